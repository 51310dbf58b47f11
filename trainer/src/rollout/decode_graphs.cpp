// decode_graphs.cpp — see decode_graphs.h. The capture needs ATen's CUDA graphs: built where
// trainer/CMakeLists.txt builds the paged kernel (HS_HAVE_CUDA_GRAPHS); elsewhere the constructor
// throws and decode_graphs_built() is false.
#include <torch/torch.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "rollout/decode_graphs.h"

#ifndef HS_HAVE_CUDA_GRAPHS
#define HS_HAVE_CUDA_GRAPHS 0  // set by trainer/CMakeLists.txt beside the paged kernel
#endif

#if HS_HAVE_CUDA_GRAPHS
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace hs::trainer::detail {

std::vector<std::int64_t> graph_batch_buckets(std::int64_t max_batch) {
  if (max_batch < 1) throw std::invalid_argument("graph_batch_buckets: max_batch must be >= 1");
  std::vector<std::int64_t> buckets;
  for (std::int64_t size : {1, 2, 4}) {
    buckets.push_back(size);
    if (size >= max_batch) return buckets;
  }
  for (std::int64_t size = 8;; size += 8) {
    buckets.push_back(size);
    if (size >= max_batch) return buckets;
  }
}

std::int64_t bucket_for(const std::vector<std::int64_t>& buckets, std::int64_t rows) {
  const auto it = std::lower_bound(buckets.begin(), buckets.end(), rows);
  if (rows < 1 || it == buckets.end()) {
    throw std::out_of_range("bucket_for: " + std::to_string(rows) + " rows fit no bucket (the largest is " +
                            (buckets.empty() ? std::string("none") : std::to_string(buckets.back())) + ")");
  }
  return *it;
}

bool decode_graphs_built() { return HS_HAVE_CUDA_GRAPHS != 0; }

#if HS_HAVE_CUDA_GRAPHS

namespace {

// The data pointers of `model`'s parameters, in order: what a captured graph reads.
std::vector<const void*> parameter_pointers(const Transformer& model) {
  std::vector<const void*> pointers;
  for (const auto& p : model->parameters()) pointers.push_back(p.data_ptr());
  return pointers;
}

struct Graph {
  at::cuda::CUDAGraph graph;
  torch::Tensor ids, positions, slots, context_lens;  // (bucket, 1) / (bucket, 1) / (bucket, 1) / (bucket)
  torch::Tensor block_tables;                          // (bucket, max_blocks)
  torch::Tensor logits;                                // (bucket, 1, V): the captured output
};

}  // namespace

struct DecodeGraphs::Impl {
  Transformer model{nullptr};
  PagedKvCache* cache = nullptr;
  std::int64_t max_blocks = 0;
  std::vector<std::int64_t> buckets;
  std::vector<std::unique_ptr<Graph>> graphs;  // parallel to buckets; null until captured
  std::vector<const void*> parameters;         // data pointers at the first capture
  at::cuda::MempoolId_t pool{0, 0};
  bool have_pool = false;

  // Pad rows: token 0 at position 0 writing the scratch block's slot 0 and attending to it alone.
  void pad(Graph& g, std::int64_t from, std::int64_t scratch_block) const {
    const auto rows = g.ids.size(0) - from;
    if (rows <= 0) return;
    g.ids.narrow(0, from, rows).fill_(0);
    g.positions.narrow(0, from, rows).fill_(0);
    g.slots.narrow(0, from, rows).fill_(scratch_block * cache->block_size());
    g.context_lens.narrow(0, from, rows).fill_(1);
    g.block_tables.narrow(0, from, rows).fill_(scratch_block);
  }

  Graph& capture(std::size_t index, std::int64_t scratch_block) {
    const auto rows = buckets[index];
    const auto device = cache->keys(0).device();
    auto longs = torch::TensorOptions().dtype(torch::kLong).device(device);
    auto g = std::make_unique<Graph>();
    g->ids = torch::zeros({rows, 1}, longs);
    g->positions = torch::zeros({rows, 1}, longs);
    g->slots = torch::zeros({rows, 1}, longs);
    g->context_lens = torch::ones({rows}, longs);
    g->block_tables = torch::zeros({rows, max_blocks}, longs);
    pad(*g, 0, scratch_block);  // every row a pad row: the warm-up and the capture touch only the scratch block
    KvCacheView view;
    view.cache = cache;
    view.slot_mapping = g->slots;
    view.block_tables = g->block_tables;
    view.context_lens = g->context_lens;
    view.max_context_len = max_blocks * cache->block_size();  // unused by the paged kernel; in range
    view.all_slots_written = 1;

    const c10::cuda::CUDAGuard guard(device);
    auto stream = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device.index());
    torch::cuda::synchronize(device.index());  // the side stream starts after everything queued so far
    {
      const c10::cuda::CUDAStreamGuard on_side(stream);
      model->forward_cached(g->ids, g->positions, view);  // warm-up: lazy inits (cuBLAS handles, workspaces)
      stream.synchronize();
      // Thread-local capture: the memory probe's sampling thread may query the driver meanwhile.
      g->graph.capture_begin(have_pool ? pool : at::cuda::MempoolId_t{0, 0}, cudaStreamCaptureModeThreadLocal);
      g->logits = model->forward_cached(g->ids, g->positions, view);
      g->graph.capture_end();
    }
    torch::cuda::synchronize(device.index());
    if (!have_pool) {
      pool = g->graph.pool();
      have_pool = true;
    }
    graphs[index] = std::move(g);
    return *graphs[index];
  }
};

DecodeGraphs::DecodeGraphs(Transformer model, PagedKvCache* cache, std::int64_t max_batch, std::int64_t max_blocks)
    : impl_(std::make_unique<Impl>()) {
  if (cache == nullptr || cache->keys(0).device().is_cpu()) {
    throw std::invalid_argument("DecodeGraphs: hybridscope.decode.cuda_graphs needs the KV cache on a CUDA device");
  }
  if (!model->compute().paged_decode) {
    throw std::invalid_argument("DecodeGraphs: hybridscope.decode.cuda_graphs needs hybridscope.decode.paged_kernel "
                                "(the gathered-context path's shapes change with every step's context)");
  }
  impl_->model = std::move(model);
  impl_->cache = cache;
  impl_->max_blocks = max_blocks;
  impl_->buckets = graph_batch_buckets(max_batch);
  impl_->graphs.resize(impl_->buckets.size());
  impl_->parameters = parameter_pointers(impl_->model);
}

DecodeGraphs::~DecodeGraphs() = default;

torch::Tensor DecodeGraphs::step(const torch::Tensor& ids, const torch::Tensor& positions, const torch::Tensor& slots,
                                 const torch::Tensor& block_tables, const torch::Tensor& context_lens,
                                 std::int64_t scratch_block) {
  const auto A = ids.size(0);
  TORCH_CHECK(block_tables.dim() == 2 && block_tables.size(0) == A && block_tables.size(1) <= impl_->max_blocks,
              "DecodeGraphs::step: block_tables (", A, ", <= ", impl_->max_blocks, "), got ", block_tables.sizes());
  const auto bucket = bucket_for(impl_->buckets, A);
  const auto index = static_cast<std::size_t>(
      std::lower_bound(impl_->buckets.begin(), impl_->buckets.end(), bucket) - impl_->buckets.begin());
  Graph& g = impl_->graphs[index] ? *impl_->graphs[index] : impl_->capture(index, scratch_block);
  g.ids.narrow(0, 0, A).copy_(ids.view({A, 1}));
  g.positions.narrow(0, 0, A).copy_(positions.view({A, 1}));
  g.slots.narrow(0, 0, A).copy_(slots.view({A, 1}));
  g.context_lens.narrow(0, 0, A).copy_(context_lens.view({A}));
  g.block_tables.narrow(0, 0, A).narrow(1, 0, block_tables.size(1)).copy_(block_tables);
  impl_->pad(g, A, scratch_block);
  g.graph.replay();
  return g.logits.narrow(0, 0, A).select(1, 0);  // (A, V)
}

std::int64_t DecodeGraphs::graphs_captured() const {
  return std::count_if(impl_->graphs.begin(), impl_->graphs.end(), [](const auto& g) { return g != nullptr; });
}

bool DecodeGraphs::captured_over(const Transformer& model) const {
  return parameter_pointers(model) == impl_->parameters;
}

#else  // no CUDA graphs in this build

struct DecodeGraphs::Impl {};

DecodeGraphs::DecodeGraphs(Transformer, PagedKvCache*, std::int64_t, std::int64_t) {
  throw std::invalid_argument("hybridscope.decode.cuda_graphs = true: this build has no CUDA graphs (a CPU LibTorch or "
                              "no CUDA toolkit when it was configured) — set it to false");
}

DecodeGraphs::~DecodeGraphs() = default;

torch::Tensor DecodeGraphs::step(const torch::Tensor&, const torch::Tensor&, const torch::Tensor&, const torch::Tensor&,
                                 const torch::Tensor&, std::int64_t) {
  throw std::logic_error("DecodeGraphs::step: not built");
}

std::int64_t DecodeGraphs::graphs_captured() const { return 0; }

bool DecodeGraphs::captured_over(const Transformer&) const { return false; }

#endif

}  // namespace hs::trainer::detail
