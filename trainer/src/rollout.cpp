// rollout.cpp — PagedKvCache, RolloutEngine::generate and sample_tokens.
//
// One wave: the wave's prompts are prefilled together in one forward_cached (left-padded, pad
// slots -1); sample 0 of each prompt continues in the prompt's own sequence and samples 1..n-1
// fork it, so a GRPO group shares the prompt's blocks (the partially filled last block is
// copied on the first append of each fork). Every decode step is one forward_cached over all
// unfinished sequences with one new token each; the per-token bookkeeping (slots, block tables)
// is plain C++ over the allocator and becomes five small int64 tensors per step.
#include <torch/torch.h>

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>

#include "hybridscope/trainer/rollout.h"

namespace hs::trainer {

// ---------------------------------------------------------------------------------------------
// PagedKvCache

PagedKvCache::PagedKvCache(const ModelShape& shape, std::int64_t num_blocks,
                           std::int64_t block_size, torch::Dtype dtype, torch::Device device)
    : num_blocks_(num_blocks), block_size_(block_size) {
  TORCH_CHECK(num_blocks > 0 && block_size > 0, "PagedKvCache: num_blocks and block_size must be positive");
  // Zero-filled, not empty: masked-out slots are still multiplied by probability 0, and 0 * NaN
  // from uninitialised memory would poison the attention output.
  auto options = torch::TensorOptions().dtype(dtype).device(device);
  for (int layer = 0; layer < shape.num_hidden_layers; ++layer) {
    k_.push_back(torch::zeros({num_blocks * block_size, shape.num_key_value_heads, shape.head_dim()}, options));
    v_.push_back(torch::zeros({num_blocks * block_size, shape.num_key_value_heads, shape.head_dim()}, options));
  }
}

void PagedKvCache::copy_block(std::int64_t from, std::int64_t to) {
  for (std::size_t layer = 0; layer < k_.size(); ++layer) {
    k_[layer].narrow(0, to * block_size_, block_size_).copy_(k_[layer].narrow(0, from * block_size_, block_size_));
    v_[layer].narrow(0, to * block_size_, block_size_).copy_(v_[layer].narrow(0, from * block_size_, block_size_));
  }
}

void PagedKvCache::copy_blocks(const std::vector<std::int64_t>& from,
                               const std::vector<std::int64_t>& to) {
  TORCH_CHECK(from.size() == to.size(), "copy_blocks: ", from.size(), " sources, ", to.size(), " destinations");
  if (from.empty() || k_.empty()) return;
  if (from.size() == 1) return copy_block(from[0], to[0]);
  const auto n = static_cast<std::int64_t>(from.size());
  auto options = torch::TensorOptions().dtype(torch::kLong);
  auto offsets = torch::arange(block_size_, options);
  auto blocks_from = torch::from_blob(const_cast<std::int64_t*>(from.data()), {n, 1}, options);
  auto blocks_to = torch::from_blob(const_cast<std::int64_t*>(to.data()), {n, 1}, options);
  auto device = k_.front().device();
  auto src = (blocks_from * block_size_ + offsets).reshape({-1}).to(device);  // (n * block_size)
  auto dst = (blocks_to * block_size_ + offsets).reshape({-1}).to(device);
  for (std::size_t layer = 0; layer < k_.size(); ++layer) {
    k_[layer].index_copy_(0, dst, k_[layer].index_select(0, src));
    v_[layer].index_copy_(0, dst, v_[layer].index_select(0, src));
  }
}

std::int64_t PagedKvCache::bytes() const {
  std::int64_t total = 0;
  for (const auto& t : k_) total += static_cast<std::int64_t>(t.nbytes());
  for (const auto& t : v_) total += static_cast<std::int64_t>(t.nbytes());
  return total;
}

// ---------------------------------------------------------------------------------------------
// Sampling

torch::Tensor sample_tokens(const torch::Tensor& logits, const SamplingParams& params,
                            torch::Generator& generator) {
  TORCH_CHECK(logits.dim() == 2, "sample_tokens: logits must be (B, V), got ", logits.sizes());
  if (!params.do_sample || params.temperature <= 0.0) return logits.argmax(-1);  // (B)
  const auto V = logits.size(1);
  // 16-bit logits are sampled in float32; float64 stays float64.
  auto x = logits.scalar_type() == torch::kDouble ? logits : logits.to(torch::kFloat);  // (B, V)
  if (params.temperature != 1.0) x = x / params.temperature;
  const double neg_inf = -std::numeric_limits<double>::infinity();
  if (params.top_k > 0 && params.top_k < V) {
    // Keep the k largest (ties with the k-th are kept too, as in HF's TopKLogitsWarper).
    auto kth = std::get<0>(x.topk(params.top_k, -1)).narrow(-1, params.top_k - 1, 1);  // (B, 1)
    x = x.masked_fill(x < kth, neg_inf);
  }
  if (params.top_p < 1.0) {
    // Nucleus: keep the most probable tokens until their mass reaches top_p; a token is dropped
    // when the mass before it already exceeds top_p, so the most probable one always stays.
    auto [sorted, order] = x.sort(-1, /*descending=*/true);  // (B, V)
    auto probs = sorted.softmax(-1);
    auto mass_before = probs.cumsum(-1) - probs;
    sorted = sorted.masked_fill(mass_before > params.top_p, neg_inf);
    x = torch::empty_like(x).scatter_(-1, order, sorted);
  }
  auto probs = x.softmax(-1);
  if (probs.device().type() != generator.device().type()) {
    // Device logits, host generator: one uniform per row is drawn on the host and the CDF is
    // inverted on the device — B numbers cross, not the (B, V) probabilities. Reproducible for a
    // seed on a device; the host's multinomial below draws other tokens for the same seed.
    auto uniforms = torch::rand({probs.size(0)}, generator, torch::TensorOptions().dtype(torch::kDouble));
    return sample_by_inverse_cdf(probs, uniforms.to(probs.device()));
  }
  return torch::multinomial(probs, 1, /*replacement=*/false, generator).squeeze(1);  // (B)
}

torch::Tensor sample_by_inverse_cdf(const torch::Tensor& probs, const torch::Tensor& uniforms) {
  TORCH_CHECK(probs.dim() == 2 && uniforms.dim() == 1 && uniforms.size(0) == probs.size(0),
              "sample_by_inverse_cdf: probs (B, V) and uniforms (B), got ", probs.sizes(), " and ", uniforms.sizes());
  // In float64: a float32 running sum over a 150k vocabulary drifts by ~1e-4 of the total.
  auto cdf = probs.to(torch::kDouble).cumsum(-1);                               // (B, V)
  auto target = (uniforms.to(cdf.dtype()) * cdf.select(-1, -1)).unsqueeze(1);  // (B, 1)
  // The first v with cdf(v) > u·total: a zero-probability token (cdf flat) is never chosen.
  return torch::searchsorted(cdf, target, /*out_int32=*/false, /*right=*/true)
      .squeeze(1)
      .clamp_max(probs.size(1) - 1);
}

// ---------------------------------------------------------------------------------------------
// RolloutEngine

namespace {

std::int64_t resolve_num_blocks(std::int64_t num_blocks, std::int64_t block_size,
                                int max_num_seqs, int max_seq_len) {
  if (block_size <= 0 || max_num_seqs <= 0 || max_seq_len <= 0) {
    throw std::invalid_argument("RolloutEngine: block_size (" + std::to_string(block_size) +
                                "), max_num_seqs (" + std::to_string(max_num_seqs) +
                                ") and max_seq_len (" + std::to_string(max_seq_len) +
                                ") must be positive");
  }
  if (num_blocks > 0) return num_blocks;
  // Every sequence holding max_seq_len tokens in private blocks: the worst case, since shared
  // prompt blocks and copy-on-write never hold more than that.
  const std::int64_t per_seq = (max_seq_len + block_size - 1) / block_size;
  return per_seq * max_num_seqs;
}

// (rows, cols) int64 tensor on `device` from a row-major vector.
torch::Tensor long_tensor(std::vector<std::int64_t>& values, std::int64_t rows, std::int64_t cols,
                          const torch::Device& device) {
  auto t = torch::from_blob(values.data(), {rows, cols}, torch::kLong);
  return device.is_cpu() ? t.clone() : t.to(device);
}

}  // namespace

RolloutEngine::RolloutEngine(Transformer model, int eos_token_id, int pad_token_id,
                             std::int64_t block_size, std::int64_t num_blocks, int max_num_seqs,
                             int max_seq_len)
    : model_(std::move(model)),
      eos_token_id_(eos_token_id),
      pad_token_id_(pad_token_id),
      max_num_seqs_(max_num_seqs),
      max_seq_len_(max_seq_len),
      allocator_(resolve_num_blocks(num_blocks, block_size, max_num_seqs, max_seq_len), block_size) {
  if (model_->head() != HeadKind::kLm) {
    throw std::invalid_argument("RolloutEngine: the model needs an LM head (HeadKind::kLm)");
  }
  if (max_seq_len > model_->shape().max_position_embeddings) {
    throw std::invalid_argument("RolloutEngine: max_seq_len " + std::to_string(max_seq_len) +
                                " exceeds the model's max_position_embeddings " +
                                std::to_string(model_->shape().max_position_embeddings));
  }
}

void RolloutEngine::allocate_cache() {
  const auto weight = model_->parameters().front();
  const auto dtype = model_->compute_dtype();  // bf16 compute keeps a bf16 cache over fp32 weights
  if (cache_ && model_->shape().num_hidden_layers > 0 &&
      (cache_->keys(0).scalar_type() != dtype || cache_->keys(0).device() != weight.device())) {
    cache_.reset();  // the model moved or changed precision since the last allocation
  }
  if (cache_) return;
  // Each rank caches its own KV heads (attention heads are split over tp).
  ModelShape local = model_->shape();
  local.num_key_value_heads /= model_->parallel().tp->size();
  cache_ = std::make_unique<PagedKvCache>(local, allocator_.num_blocks(), allocator_.block_size(),
                                          dtype, weight.device());
}

void RolloutEngine::release_cache() {
  cache_.reset();
  allocator_.reset();
}

bool RolloutEngine::cache_allocated() const { return cache_ != nullptr; }

std::int64_t RolloutEngine::cache_bytes() const { return cache_ ? cache_->bytes() : 0; }

void RolloutEngine::note_peak(GenerationResult& result) const {
  const auto now = allocator_.stats();
  if (now.blocks_used > result.peak_pool.blocks_used) result.peak_pool = now;
}

GenerationResult RolloutEngine::generate(const GenerationRequest& request,
                                         torch::Generator& generator) {
  const auto& p = request.params;
  if (p.n < 1 || p.n > max_num_seqs_) {
    throw std::invalid_argument("generate: n = " + std::to_string(p.n) +
                                " samples per prompt must be in [1, max_num_seqs = " +
                                std::to_string(max_num_seqs_) + "]");
  }
  if (request.max_response_length < 0) {
    throw std::invalid_argument("generate: max_response_length must be >= 0");
  }
  for (std::size_t i = 0; i < request.prompts.size(); ++i) {
    const auto len = static_cast<int>(request.prompts[i].size());
    if (len == 0 || len + request.max_response_length > max_seq_len_) {
      throw std::invalid_argument("generate: prompt " + std::to_string(i) + " has " +
                                  std::to_string(len) + " tokens; it needs 1.." +
                                  std::to_string(max_seq_len_ - request.max_response_length) +
                                  " so that prompt + max_response_length (" +
                                  std::to_string(request.max_response_length) +
                                  ") fits max_seq_len " + std::to_string(max_seq_len_));
    }
  }
  torch::NoGradGuard no_grad;
  allocate_cache();
  allocator_.reset();  // nothing survives a previous generate, even one that threw

  GenerationResult result;
  result.responses.resize(request.prompts.size() * static_cast<std::size_t>(p.n));
  result.peak_pool = allocator_.stats();
  const std::size_t per_wave = static_cast<std::size_t>(max_num_seqs_ / p.n);
  for (std::size_t first = 0; first < request.prompts.size(); first += per_wave) {
    run_wave(request, first, std::min(first + per_wave, request.prompts.size()), generator, result);
  }
  return result;
}

void RolloutEngine::run_wave(const GenerationRequest& request, std::size_t first, std::size_t end,
                             torch::Generator& generator, GenerationResult& result) {
  const int n = request.params.n;
  const auto W = static_cast<std::int64_t>(end - first);
  const auto device = model_->parameters().front().device();
  const std::int64_t block_size = allocator_.block_size();

  // ---- prefill: one left-padded forward over the wave's prompts
  std::int64_t T = 0;
  for (std::size_t i = first; i < end; ++i) {
    T = std::max<std::int64_t>(T, static_cast<std::int64_t>(request.prompts[i].size()));
  }
  std::vector<std::int64_t> ids(static_cast<std::size_t>(W * T), pad_token_id_);
  std::vector<std::int64_t> pos(static_cast<std::size_t>(W * T), 0);
  std::vector<std::int64_t> slots(static_cast<std::size_t>(W * T), -1);
  std::vector<std::int64_t> ctx(static_cast<std::size_t>(W));
  std::vector<KvBlockAllocator::SeqId> prompt_seq(static_cast<std::size_t>(W));
  std::int64_t max_blocks = 1;
  for (std::int64_t w = 0; w < W; ++w) {
    const auto& prompt = request.prompts[first + static_cast<std::size_t>(w)];
    const auto len = static_cast<std::int64_t>(prompt.size());
    const auto seq = allocator_.add_sequence();
    prompt_seq[static_cast<std::size_t>(w)] = seq;
    for (std::int64_t t = 0; t < len; ++t) {
      const auto at = static_cast<std::size_t>(w * T + (T - len) + t);
      ids[at] = prompt[static_cast<std::size_t>(t)];
      pos[at] = t;
      slots[at] = allocator_.append_token(seq).index;  // fresh sequence: never a copy
    }
    ctx[static_cast<std::size_t>(w)] = len;
    max_blocks = std::max<std::int64_t>(max_blocks, static_cast<std::int64_t>(allocator_.block_table(seq).size()));
  }
  std::vector<std::int64_t> tables(static_cast<std::size_t>(W * max_blocks), 0);
  for (std::int64_t w = 0; w < W; ++w) {
    const auto& blocks = allocator_.block_table(prompt_seq[static_cast<std::size_t>(w)]);
    std::copy(blocks.begin(), blocks.end(), tables.begin() + w * max_blocks);
  }
  note_peak(result);

  KvCacheView view;
  view.cache = cache_.get();
  view.slot_mapping = long_tensor(slots, W, T, device);
  view.block_tables = long_tensor(tables, W, max_blocks, device);
  view.context_lens = long_tensor(ctx, W, 1, device).view({W});
  view.max_context_len = *std::max_element(ctx.begin(), ctx.end());  // no device sync in forward_cached
  view.all_slots_written = std::find(slots.begin(), slots.end(), -1) == slots.end() ? 1 : 0;
  auto logits = model_->forward_cached(long_tensor(ids, W, T, device), long_tensor(pos, W, T, device), view);
  auto last = logits.select(1, T - 1);  // (W, V): each prompt's last token (left padding)

  // ---- fork: sample 0 continues in the prompt's sequence, samples 1..n-1 share its blocks
  const std::int64_t N = W * n;
  std::vector<KvBlockAllocator::SeqId> seq(static_cast<std::size_t>(N));
  for (std::int64_t w = 0; w < W; ++w) {
    seq[static_cast<std::size_t>(w * n)] = prompt_seq[static_cast<std::size_t>(w)];
    for (int j = 1; j < n; ++j) {
      seq[static_cast<std::size_t>(w * n + j)] = allocator_.fork(prompt_seq[static_cast<std::size_t>(w)]);
    }
  }

  const auto max_len = static_cast<std::size_t>(request.max_response_length);
  auto* responses = result.responses.data() + first * static_cast<std::size_t>(n);
  std::vector<std::int64_t> active;  // indices into seq, ascending
  auto take = [&](const torch::Tensor& next, const std::vector<std::int64_t>& rows) {
    auto tokens = next.to(torch::kCPU, torch::kLong).contiguous();
    const auto* tok = tokens.data_ptr<std::int64_t>();
    std::vector<std::int64_t> still;
    still.reserve(rows.size());
    for (std::size_t r = 0; r < rows.size(); ++r) {
      auto& response = responses[rows[r]];
      response.push_back(static_cast<std::int32_t>(tok[r]));
      ++result.generated_tokens;
      if (tok[r] != eos_token_id_ && response.size() < max_len) still.push_back(rows[r]);
    }
    active.swap(still);
  };
  if (max_len > 0) {
    std::vector<std::int64_t> all(static_cast<std::size_t>(N));
    for (std::int64_t i = 0; i < N; ++i) all[static_cast<std::size_t>(i)] = i;
    take(sample_tokens(n == 1 ? last : last.repeat_interleave(n, 0), request.params, generator), all);
  }

  // ---- decode: one token per unfinished sequence per step
  std::vector<std::int64_t> copy_from, copy_to;
  while (!active.empty()) {
    const auto A = static_cast<std::int64_t>(active.size());
    ids.assign(static_cast<std::size_t>(A), 0);
    pos.assign(static_cast<std::size_t>(A), 0);
    slots.assign(static_cast<std::size_t>(A), 0);
    ctx.assign(static_cast<std::size_t>(A), 0);
    copy_from.clear();
    copy_to.clear();
    max_blocks = 1;
    for (std::int64_t a = 0; a < A; ++a) {
      const auto i = static_cast<std::size_t>(active[static_cast<std::size_t>(a)]);
      const auto slot = allocator_.append_token(seq[i]);
      if (slot.copy_from >= 0) {
        copy_from.push_back(slot.copy_from);
        copy_to.push_back(slot.copy_to);
      }
      const auto length = allocator_.length(seq[i]);
      ids[static_cast<std::size_t>(a)] = responses[i].back();
      pos[static_cast<std::size_t>(a)] = length - 1;
      slots[static_cast<std::size_t>(a)] = slot.index;
      ctx[static_cast<std::size_t>(a)] = length;
      max_blocks = std::max<std::int64_t>(max_blocks, (length + block_size - 1) / block_size);
    }
    tables.assign(static_cast<std::size_t>(A * max_blocks), 0);
    for (std::int64_t a = 0; a < A; ++a) {
      const auto& blocks = allocator_.block_table(seq[static_cast<std::size_t>(active[static_cast<std::size_t>(a)])]);
      std::copy(blocks.begin(), blocks.end(), tables.begin() + a * max_blocks);
    }
    note_peak(result);
    cache_->copy_blocks(copy_from, copy_to);  // before this step writes into any of them

    view.slot_mapping = long_tensor(slots, A, 1, device);
    view.block_tables = long_tensor(tables, A, max_blocks, device);
    view.context_lens = long_tensor(ctx, A, 1, device).view({A});
    view.max_context_len = *std::max_element(ctx.begin(), ctx.begin() + A);
    view.all_slots_written = 1;  // one new token per active sequence, each with its slot
    logits = model_->forward_cached(long_tensor(ids, A, 1, device), long_tensor(pos, A, 1, device), view);
    take(sample_tokens(logits.select(1, 0), request.params, generator), active);
  }

  for (const auto s : seq) allocator_.free_sequence(s);
}

}  // namespace hs::trainer
