// decode_graphs.h — the decode step of the rollout's device loop as CUDA graphs, one per batch-size
// bucket (hybridscope.decode.cuda_graphs; private to hs_trainer).
//
// vLLM's scheme: a step of A rows runs the graph of the smallest bucket >= A, its inputs copied
// into the graph's static tensors and the rows past A padded with rows that write one scratch KV
// slot and attend to it alone; their logits are discarded. A graph is captured the first time its
// bucket is needed (one eager warm-up step first, then the capture, on a side stream), and every
// graph shares one memory pool. Captured graphs hold the model's parameter and cache pointers:
// RolloutEngine drops them when either changes (release_cache, or the parameters' storage moved).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <torch/types.h>

#include "hybridscope/trainer/model/model.h"
#include "hybridscope/trainer/model/paged_kv_cache.h"

namespace hs::trainer::detail {

/// The bucket sizes up to (and including the first one at or past) max_batch: 1, 2, 4, then every 8.
std::vector<std::int64_t> graph_batch_buckets(std::int64_t max_batch);
/// The smallest of `buckets` (ascending) holding `rows`; throws when none does.
std::int64_t bucket_for(const std::vector<std::int64_t>& buckets, std::int64_t rows);
/// Whether this build can capture CUDA graphs (a CUDA LibTorch).
bool decode_graphs_built();

class DecodeGraphs {
 public:
  /// Graphs of `model`'s forward_cached (paged_decode on) over `cache` for up to max_batch rows,
  /// each row's block table at most max_blocks wide. CUDA only.
  DecodeGraphs(Transformer model, PagedKvCache* cache, std::int64_t max_batch, std::int64_t max_blocks);
  ~DecodeGraphs();
  DecodeGraphs(const DecodeGraphs&) = delete;
  DecodeGraphs& operator=(const DecodeGraphs&) = delete;

  /// One decode step of A rows: ids, positions, slots and context_lens (A) int64, block_tables
  /// (A, M <= max_blocks) int64 -> logits (A, V), a view of the graph's output, valid until the
  /// next step. Pad rows write slot scratch_block * block_size and read that block only.
  torch::Tensor step(const torch::Tensor& ids, const torch::Tensor& positions, const torch::Tensor& slots,
                     const torch::Tensor& block_tables, const torch::Tensor& context_lens, std::int64_t scratch_block);

  /// Graphs captured so far (one per bucket used).
  std::int64_t graphs_captured() const;
  /// Whether the graphs were captured over `model`'s parameter storages as they are now (an
  /// offload round trip moves them).
  bool captured_over(const Transformer& model) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hs::trainer::detail
