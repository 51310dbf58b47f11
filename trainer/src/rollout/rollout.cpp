// rollout.cpp — RolloutEngine::generate and sample_tokens.
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

#include <fmt/format.h>

#include "hybridscope/probes/range.h"
#include "hybridscope/trainer/model/device.h"
#include "hybridscope/trainer/memory/memory_probe.h"
#include "hybridscope/trainer/rollout/rollout.h"
#include "rollout/decode_graphs.h"

namespace hs::trainer {

// ---------------------------------------------------------------------------------------------
// Sampling

namespace {

bool greedy(const SamplingParams& params) { return !params.do_sample || params.temperature <= 0.0; }

// The sampling distribution of logits (B, V): temperature, then top-k, then top-p, softmaxed.
torch::Tensor filtered_probs(const torch::Tensor& logits, const SamplingParams& params) {
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
  return x.softmax(-1);
}

}  // namespace

torch::Tensor sample_tokens(const torch::Tensor& logits, const SamplingParams& params,
                            torch::Generator& generator) {
  TORCH_CHECK(logits.dim() == 2, "sample_tokens: logits must be (B, V), got ", logits.sizes());
  if (greedy(params)) return logits.argmax(-1);  // (B)
  auto probs = filtered_probs(logits, params);
  if (probs.device().type() != generator.device().type()) {
    // Device logits, host generator: one uniform per row is drawn on the host and the CDF is
    // inverted on the device — B numbers cross, not the (B, V) probabilities. Reproducible for a
    // seed on a device; the host's multinomial below draws other tokens for the same seed.
    auto uniforms = torch::rand({probs.size(0)}, generator, torch::TensorOptions().dtype(torch::kDouble));
    return sample_by_inverse_cdf(probs, uniforms.to(probs.device()));
  }
  return torch::multinomial(probs, 1, /*replacement=*/false, generator).squeeze(1);  // (B)
}

torch::Tensor sample_tokens_at(const torch::Tensor& logits, const SamplingParams& params, const torch::Tensor& uniforms) {
  TORCH_CHECK(logits.dim() == 2, "sample_tokens_at: logits must be (B, V), got ", logits.sizes());
  if (greedy(params)) return logits.argmax(-1);  // (B)
  return sample_by_inverse_cdf(filtered_probs(logits, params), uniforms);
}

torch::Tensor sampling_log_probs(const torch::Tensor& logits, const torch::Tensor& tokens, const SamplingParams& params) {
  TORCH_CHECK(logits.dim() == 2 && tokens.dim() == 1 && tokens.size(0) == logits.size(0),
              "sampling_log_probs: logits (B, V) and tokens (B), got ", logits.sizes(), " and ", tokens.sizes());
  auto x = logits.scalar_type() == torch::kDouble ? logits : logits.to(torch::kFloat);
  const bool sampled = params.do_sample && params.temperature > 0.0;
  if (sampled && params.temperature != 1.0) x = x / params.temperature;
  return x.log_softmax(-1).gather(-1, tokens.to(torch::kLong).unsqueeze(-1)).squeeze(-1);
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

void check_engine_sizes(std::int64_t block_size, int max_num_seqs, int max_seq_len) {
  if (block_size <= 0 || max_num_seqs <= 0 || max_seq_len <= 0) {
    throw std::invalid_argument("RolloutEngine: block_size (" + std::to_string(block_size) +
                                "), max_num_seqs (" + std::to_string(max_num_seqs) +
                                ") and max_seq_len (" + std::to_string(max_seq_len) +
                                ") must be positive");
  }
}

// Every sequence holding max_seq_len tokens in private blocks: the worst case, since shared
// prompt blocks and copy-on-write never hold more than that.
std::int64_t worst_case_blocks(std::int64_t block_size, int max_num_seqs, int max_seq_len) {
  check_engine_sizes(block_size, max_num_seqs, max_seq_len);
  return (max_seq_len + block_size - 1) / block_size * max_num_seqs;
}

std::string gib(std::int64_t bytes) { return fmt::format("{:.2f} GiB", static_cast<double>(bytes) / (1 << 30)); }

// (rows, cols) int64 tensor on `device` from a row-major vector.
torch::Tensor long_tensor(std::vector<std::int64_t>& values, std::int64_t rows, std::int64_t cols,
                          const torch::Device& device) {
  auto t = torch::from_blob(values.data(), {rows, cols}, torch::kLong);
  return device.is_cpu() ? t.clone() : t.to(device);
}

}  // namespace

std::int64_t kv_blocks_within(const KvMemoryBudget& budget) {
  if (budget.bytes_per_block <= 0) throw std::invalid_argument("kv_blocks_within: bytes_per_block must be positive");
  const auto share = static_cast<std::int64_t>(budget.utilization * static_cast<double>(budget.total_bytes));
  const std::int64_t bytes = std::min(share - budget.weight_bytes, budget.available_bytes);
  return std::max<std::int64_t>(0, bytes / budget.bytes_per_block);
}

RolloutEngine::RolloutEngine(Transformer model, int eos_token_id, int pad_token_id,
                             std::int64_t block_size, std::int64_t num_blocks, int max_num_seqs,
                             int max_seq_len, double gpu_memory_utilization)
    : model_(std::move(model)),
      eos_token_id_(eos_token_id),
      pad_token_id_(pad_token_id),
      max_num_seqs_(max_num_seqs),
      max_seq_len_(max_seq_len),
      size_by_memory_(num_blocks <= 0),
      gpu_memory_utilization_(gpu_memory_utilization),
      pool_sizing_(num_blocks > 0
                       ? fmt::format("hybridscope.kv_num_blocks = {}", num_blocks)
                       : fmt::format("max_num_seqs {} x {} blocks of max_seq_len {}", max_num_seqs,
                                     (max_seq_len + block_size - 1) / std::max<std::int64_t>(block_size, 1),
                                     max_seq_len)),
      allocator_(num_blocks > 0 ? (check_engine_sizes(block_size, max_num_seqs, max_seq_len), num_blocks)
                                : worst_case_blocks(block_size, max_num_seqs, max_seq_len),
                 block_size) {
  if (!(gpu_memory_utilization > 0.0 && gpu_memory_utilization <= 1.0)) {
    throw std::invalid_argument("RolloutEngine: gpu_memory_utilization " + std::to_string(gpu_memory_utilization) +
                                " must be in (0, 1]");
  }
  if (model_->head() != HeadKind::kLm) {
    throw std::invalid_argument("RolloutEngine: the model needs an LM head (HeadKind::kLm)");
  }
  if (max_seq_len > model_->shape().max_position_embeddings) {
    throw std::invalid_argument("RolloutEngine: max_seq_len " + std::to_string(max_seq_len) +
                                " exceeds the model's max_position_embeddings " +
                                std::to_string(model_->shape().max_position_embeddings));
  }
}

RolloutEngine::~RolloutEngine() = default;

DecodeOptions decode_options(const DecodeConfig& decode) {
  DecodeOptions options;
  options.device_loop = decode.device_loop;
  options.stop_check_interval = decode.stop_check_interval;
  options.cuda_graphs = decode.cuda_graphs;
  return options;
}

void RolloutEngine::set_decode(const DecodeOptions& options) {
  if (options.stop_check_interval < 1) {
    throw std::invalid_argument("hybridscope.decode.stop_check_interval = " + std::to_string(options.stop_check_interval) +
                                ": must be >= 1");
  }
  if (options.cuda_graphs && !options.device_loop) {
    throw std::invalid_argument("hybridscope.decode.cuda_graphs = true replays the device loop's step: set "
                                "hybridscope.decode.device_loop=true too");
  }
  if (options.cuda_graphs && !detail::decode_graphs_built()) {
    throw std::invalid_argument("hybridscope.decode.cuda_graphs = true: this build has no CUDA graphs (a CPU LibTorch "
                                "or no CUDA toolkit when it was configured) — set it to false");
  }
  decode_ = options;
  graphs_.reset();
}

std::int64_t RolloutEngine::decode_graphs_captured() const { return graphs_ ? graphs_->graphs_captured() : 0; }

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
  if (size_by_memory_ && weight.device().is_cuda()) size_pool_by_memory(local, dtype, weight.device());
  graphs_.reset();  // captured over the cache they replace
  cache_ = std::make_unique<PagedKvCache>(local, allocator_.num_blocks(), allocator_.block_size(),
                                          dtype, weight.device());
}

void RolloutEngine::size_pool_by_memory(const ModelShape& local, torch::Dtype dtype, const torch::Device& device) {
  const auto worst_case = worst_case_blocks(allocator_.block_size(), max_num_seqs_, max_seq_len_);
  const auto memory = cuda_device_memory(device.index());
  if (!memory) {
    pool_sizing_ = fmt::format("max_num_seqs {} x max_seq_len {} (device memory unknown: the driver gave no figure)",
                               max_num_seqs_, max_seq_len_);
    if (allocator_.num_blocks() != worst_case) allocator_ = KvBlockAllocator(worst_case, allocator_.block_size());
    return;
  }
  KvMemoryBudget budget;
  budget.utilization = gpu_memory_utilization_;
  budget.total_bytes = memory->total_bytes;
  budget.available_bytes = memory->free_bytes;
  if (cuda_allocator_stats_available()) {
    const auto cached = cuda_allocator_stats(device.index());
    budget.available_bytes += cached.reserved_bytes - cached.allocated_bytes;  // reusable without cudaMalloc
  }
  for (const auto& p : model_->parameters()) budget.weight_bytes += static_cast<std::int64_t>(p.nbytes());
  budget.bytes_per_block = PagedKvCache::bytes_per_block(local, allocator_.block_size(), dtype);
  const auto fits = kv_blocks_within(budget);
  const auto blocks = std::min(worst_case, fits);
  pool_sizing_ = fmt::format(
      "rollout.gpu_memory_utilization {} of {} total, less {} of rollout weights, {} available: {} blocks of {} "
      "(the worst case needs {})",
      gpu_memory_utilization_, gib(budget.total_bytes), gib(budget.weight_bytes), gib(budget.available_bytes), fits,
      fmt::format("{:.2f} MiB", static_cast<double>(budget.bytes_per_block) / (1 << 20)), worst_case);
  if (blocks < 1) {
    throw KvPoolExhausted("no KV block fits the rollout's memory share: " + pool_sizing_ +
                          " — raise actor_rollout_ref.rollout.gpu_memory_utilization, offload the training state "
                          "(actor_rollout_ref.actor.fsdp_config.*_offload) or set hybridscope.kv_num_blocks");
  }
  if (allocator_.num_blocks() != blocks) allocator_ = KvBlockAllocator(blocks, allocator_.block_size());
}

void RolloutEngine::set_stop_token_ids(const std::vector<std::int32_t>& ids) {
  extra_stop_ids_.clear();
  for (const auto id : ids)
    if (id != eos_token_id_) extra_stop_ids_.push_back(id);
}

void RolloutEngine::limit_sampling_to(std::int64_t vocab_size) {
  if (vocab_size < 1 || vocab_size > model_->shape().vocab_size) {
    throw std::invalid_argument("limit_sampling_to: " + std::to_string(vocab_size) + " ids must be in 1.." +
                                std::to_string(model_->shape().vocab_size) + " (the model's vocabulary)");
  }
  sampling_vocab_ = vocab_size;
}

torch::Tensor RolloutEngine::sampled_ids(const torch::Tensor& logits) const {
  return sampling_vocab_ > 0 && sampling_vocab_ < logits.size(-1) ? logits.narrow(-1, 0, sampling_vocab_) : logits;
}

void RolloutEngine::release_cache() {
  graphs_.reset();  // they point into the cache
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
  if (decode_.device_loop && request.between_steps) {
    throw std::invalid_argument("generate: hybridscope.decode.device_loop keeps the decode state on the device and "
                                "cannot join a weight sync between two tokens (async_training.partial_rollout): set "
                                "async_training.partial_rollout=false or hybridscope.decode.device_loop=false");
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
  result.log_probs.resize(result.responses.size());
  result.peak_pool = allocator_.stats();
  // Waves in prompt order: at most max_num_seqs sequences, and the worst case of their blocks
  // (no sharing) within the pool, so that a wave never runs out of blocks halfway.
  const std::size_t per_wave = static_cast<std::size_t>(max_num_seqs_ / p.n);
  const std::int64_t block_size = allocator_.block_size();
  auto worst_blocks = [&](std::size_t i) {
    const auto tokens = static_cast<std::int64_t>(request.prompts[i].size()) + request.max_response_length;
    return p.n * ((tokens + block_size - 1) / block_size);
  };
  // A CUDA graph's pad rows write one scratch block of their own.
  const std::int64_t scratch = decode_.device_loop && decode_.cuda_graphs ? 1 : 0;
  for (std::size_t first = 0; first < request.prompts.size();) {
    std::size_t end = first;
    for (std::int64_t need = scratch; end < request.prompts.size() && end - first < per_wave; ++end) {
      need += worst_blocks(end);
      if (need > allocator_.num_blocks()) break;
    }
    if (end == first) {
      throw KvPoolExhausted(fmt::format(
          "the KV pool holds {} blocks of {} tokens ({}); prompt {} with {} samples of up to {} + {} tokens may need {} "
          "— raise hybridscope.kv_num_blocks (or rollout.gpu_memory_utilization on CUDA), or lower rollout.n or "
          "data.max_response_length",
          allocator_.num_blocks(), block_size, pool_sizing_, first, p.n, request.prompts[first].size(),
          request.max_response_length, worst_blocks(first) + scratch));
    }
    run_wave(request, first, end, generator, result);
    first = end;
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
  note_peak(result);

  // The cache view of a forward over `rows` sequences of `cols` positions each, from slots and ctx
  // as filled above and the block tables of seq_of(0 .. rows-1), max_blocks wide (the prefill, a
  // re-prefill and every decode step).
  std::vector<std::int64_t> tables;
  KvCacheView view;
  view.cache = cache_.get();
  auto point_view = [&](std::int64_t rows, std::int64_t cols, auto&& seq_of) {
    tables.assign(static_cast<std::size_t>(rows * max_blocks), 0);
    for (std::int64_t r = 0; r < rows; ++r) {
      const auto& blocks = allocator_.block_table(seq_of(r));
      std::copy(blocks.begin(), blocks.end(), tables.begin() + r * max_blocks);
    }
    const auto filled = static_cast<std::ptrdiff_t>(rows * cols);
    view.slot_mapping = long_tensor(slots, rows, cols, device);
    view.block_tables = long_tensor(tables, rows, max_blocks, device);
    view.context_lens = long_tensor(ctx, rows, 1, device).view({rows});
    view.max_context_len = *std::max_element(ctx.begin(), ctx.begin() + rows);  // no device sync in forward_cached
    view.all_slots_written = std::find(slots.begin(), slots.begin() + filled, -1) == slots.begin() + filled ? 1 : 0;
  };
  point_view(W, T, [&](std::int64_t w) { return prompt_seq[static_cast<std::size_t>(w)]; });
  torch::Tensor logits;
  {
    HS_PROBE_TRACE_RANGE_ARGS(probes::thread_timings(), "gen/prefill", kPhase, W, T);
    logits = model_->forward_cached(long_tensor(ids, W, T, device), long_tensor(pos, W, T, device), view,
                                    /*last_token_only=*/true);
  }
  auto last = logits.select(1, 0);  // (W, V): each prompt's last token (left padding)

  // ---- fork: sample 0 continues in the prompt's sequence, samples 1..n-1 share its blocks
  const std::int64_t N = W * n;
  std::vector<KvBlockAllocator::SeqId> seq(static_cast<std::size_t>(N));
  for (std::int64_t w = 0; w < W; ++w) {
    seq[static_cast<std::size_t>(w * n)] = prompt_seq[static_cast<std::size_t>(w)];
    for (int j = 1; j < n; ++j) {
      seq[static_cast<std::size_t>(w * n + j)] = allocator_.fork(prompt_seq[static_cast<std::size_t>(w)]);
    }
  }

  if (decode_.device_loop) {
    KvBlockAllocator::SeqId scratch_seq = -1;
    std::int64_t scratch_block = -1;
    if (decode_.cuda_graphs) {
      scratch_seq = allocator_.add_sequence();
      scratch_block = allocator_.append_token(scratch_seq).index / block_size;
    }
    decode_on_device(request, first, last, seq, scratch_block, generator, result);
    for (const auto s : seq) allocator_.free_sequence(s);
    if (scratch_seq >= 0) allocator_.free_sequence(scratch_seq);
    return;
  }

  const auto max_len = static_cast<std::size_t>(request.max_response_length);
  auto* responses = result.responses.data() + first * static_cast<std::size_t>(n);
  std::vector<std::int64_t> active;  // indices into seq, ascending
  auto* log_probs = result.log_probs.data() + first * static_cast<std::size_t>(n);
  // Samples one token per row of `row_logits` (B, V) and records it with its log-probability under
  // the engine's own distribution (sampling_log_probs).
  auto take = [&](const torch::Tensor& row_logits, const std::vector<std::int64_t>& rows) {
    const torch::Tensor sampling = sampled_ids(row_logits);
    const torch::Tensor next = sample_tokens(sampling, request.params, generator);
    auto tokens = next.to(torch::kCPU, torch::kLong).contiguous();
    auto lp = sampling_log_probs(sampling, next, request.params).to(torch::kCPU, torch::kFloat).contiguous();
    const auto* tok = tokens.data_ptr<std::int64_t>();
    const auto* lpp = lp.data_ptr<float>();
    std::vector<std::int64_t> still;
    still.reserve(rows.size());
    for (std::size_t r = 0; r < rows.size(); ++r) {
      auto& response = responses[rows[r]];
      response.push_back(static_cast<std::int32_t>(tok[r]));
      log_probs[rows[r]].push_back(lpp[r]);
      ++result.generated_tokens;
      const bool stop = tok[r] == eos_token_id_ ||
                        std::find(extra_stop_ids_.begin(), extra_stop_ids_.end(), tok[r]) != extra_stop_ids_.end();
      if (!stop && response.size() < max_len) still.push_back(rows[r]);
    }
    active.swap(still);
  };
  if (max_len > 0) {
    std::vector<std::int64_t> all(static_cast<std::size_t>(N));
    for (std::int64_t i = 0; i < N; ++i) all[static_cast<std::size_t>(i)] = i;
    take(n == 1 ? last : last.repeat_interleave(n, 0), all);
  }

  // ---- re-prefill: after a weight change mid-wave, every sequence in flight recomputes the K/V
  // of its prompt + tokens so far with the new weights, in its own blocks (verl aborts the
  // requests and resubmits prompt + partial response, whose prefill does the same). The token
  // sampled last is not in the cache yet: the next decode step appends it. A block shared by
  // forks (their prompt) holds the same tokens for each: its first sharer writes it, the others'
  // slots are -1 and read it.
  auto active_seq = [&](std::int64_t a) {
    return seq[static_cast<std::size_t>(active[static_cast<std::size_t>(a)])];
  };
  auto reprefill = [&] {
    const auto A = static_cast<std::int64_t>(active.size());
    std::int64_t T_re = 1;
    for (const auto i : active) T_re = std::max(T_re, allocator_.length(seq[static_cast<std::size_t>(i)]));
    ids.assign(static_cast<std::size_t>(A * T_re), pad_token_id_);
    pos.assign(static_cast<std::size_t>(A * T_re), 0);
    slots.assign(static_cast<std::size_t>(A * T_re), -1);
    ctx.assign(static_cast<std::size_t>(A), 0);
    max_blocks = 1;
    std::vector<char> written(static_cast<std::size_t>(allocator_.num_blocks() * block_size), 0);
    for (std::int64_t a = 0; a < A; ++a) {
      const auto i = static_cast<std::size_t>(active[static_cast<std::size_t>(a)]);
      const auto& prompt = request.prompts[first + i / static_cast<std::size_t>(n)];
      const auto len = allocator_.length(seq[i]);  // prompt + every response token but the last
      const auto& blocks = allocator_.block_table(seq[i]);
      const auto prompt_len = static_cast<std::int64_t>(prompt.size());
      for (std::int64_t t = 0; t < len; ++t) {
        const auto at = static_cast<std::size_t>(a * T_re + (T_re - len) + t);
        ids[at] = t < prompt_len ? prompt[static_cast<std::size_t>(t)] : responses[i][static_cast<std::size_t>(t - prompt_len)];
        pos[at] = t;
        const auto slot = blocks[static_cast<std::size_t>(t / block_size)] * block_size + t % block_size;
        if (!written[static_cast<std::size_t>(slot)]) {
          written[static_cast<std::size_t>(slot)] = 1;
          slots[at] = slot;
        }
      }
      ctx[static_cast<std::size_t>(a)] = len;
      result.reprefilled_tokens += len;
      max_blocks = std::max<std::int64_t>(max_blocks, static_cast<std::int64_t>(blocks.size()));
    }
    point_view(A, T_re, active_seq);
    HS_PROBE_TRACE_RANGE_ARGS(probes::thread_timings(), "gen/reprefill", kPhase, A, T_re);
    model_->forward_cached(long_tensor(ids, A, T_re, device), long_tensor(pos, A, T_re, device), view,
                           /*last_token_only=*/true);
  };

  // ---- decode: one token per unfinished sequence per step
  std::vector<std::int64_t> copy_from, copy_to;
  while (!active.empty()) {
    if (request.between_steps && request.between_steps()) reprefill();
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
    note_peak(result);
    cache_->copy_blocks(copy_from, copy_to);  // before this step writes into any of them
    point_view(A, 1, active_seq);  // one new token per active sequence, each with its slot
    HS_PROBE_TRACE_RANGE_ARGS(probes::thread_timings(), "gen/decode_step", kPhase, A, view.max_context_len);
    logits = model_->forward_cached(long_tensor(ids, A, 1, device), long_tensor(pos, A, 1, device), view);
    take(logits.select(1, 0), active);
  }

  for (const auto s : seq) allocator_.free_sequence(s);
}

// ---------------------------------------------------------------------------------------------
// The device loop (DecodeOptions.device_loop)

void RolloutEngine::decode_on_device(const GenerationRequest& request, std::size_t first,
                                     const torch::Tensor& first_logits,
                                     const std::vector<KvBlockAllocator::SeqId>& seq, std::int64_t scratch_block,
                                     torch::Generator& generator, GenerationResult& result) {
  const auto& params = request.params;
  const int n = params.n;
  const auto N = static_cast<std::int64_t>(seq.size());
  const std::int64_t max_len = request.max_response_length;
  if (max_len == 0) return;
  const auto device = first_logits.device();
  const auto on_device = torch::TensorOptions().device(device);
  const auto longs = on_device.dtype(torch::kLong);

  // Every slot a response can take, reserved now: decode step s appends response token s at
  // position prompt + s, for s < max_len - 1 (the last token is sampled but never cached). A
  // fork's first append copies the prompt's shared last block; the prompt's K/V are final after
  // the prefill, so the copies run once, here.
  const std::int64_t steps = max_len - 1;
  const std::int64_t slot_cols = std::max<std::int64_t>(steps, 1);
  std::vector<std::int64_t> slot_table(static_cast<std::size_t>(N * slot_cols), 0);
  std::vector<std::int64_t> prompt_len(static_cast<std::size_t>(N));
  std::vector<std::int64_t> copy_from, copy_to;
  std::int64_t max_blocks = 1;
  for (std::int64_t i = 0; i < N; ++i) {
    const auto sq = seq[static_cast<std::size_t>(i)];
    prompt_len[static_cast<std::size_t>(i)] = allocator_.length(sq);
    for (std::int64_t t = 0; t < steps; ++t) {
      const auto slot = allocator_.append_token(sq);
      if (slot.copy_from >= 0) {
        copy_from.push_back(slot.copy_from);
        copy_to.push_back(slot.copy_to);
      }
      slot_table[static_cast<std::size_t>(i * slot_cols + t)] = slot.index;
    }
    max_blocks = std::max<std::int64_t>(max_blocks, static_cast<std::int64_t>(allocator_.block_table(sq).size()));
  }
  cache_->copy_blocks(copy_from, copy_to);
  note_peak(result);
  std::vector<std::int64_t> tables(static_cast<std::size_t>(N * max_blocks), 0);
  for (std::int64_t i = 0; i < N; ++i) {
    const auto& blocks = allocator_.block_table(seq[static_cast<std::size_t>(i)]);
    std::copy(blocks.begin(), blocks.end(), tables.begin() + i * max_blocks);
  }
  if (decode_.cuda_graphs && (!graphs_ || !graphs_->captured_over(model_))) {
    // First use, or the parameters' storage moved (an offload round trip): capture afresh.
    const auto widest = (max_seq_len_ + allocator_.block_size() - 1) / allocator_.block_size();
    graphs_ = std::make_unique<detail::DecodeGraphs>(model_, cache_.get(), max_num_seqs_, widest);
  }

  // The active rows' state; row r of it is sequence rows_h[r] of the wave (ascending).
  std::vector<std::int64_t> rows_h(static_cast<std::size_t>(N));
  for (std::int64_t i = 0; i < N; ++i) rows_h[static_cast<std::size_t>(i)] = i;
  torch::Tensor rows = torch::arange(N, longs);
  torch::Tensor slots = long_tensor(slot_table, N, slot_cols, device);
  torch::Tensor block_tables = long_tensor(tables, N, max_blocks, device);
  torch::Tensor prompts = long_tensor(prompt_len, N, 1, device).view({N});
  std::int64_t longest_prompt = *std::max_element(prompt_len.begin(), prompt_len.end());
  std::vector<std::int64_t> stop_ids{eos_token_id_};
  stop_ids.insert(stop_ids.end(), extra_stop_ids_.begin(), extra_stop_ids_.end());
  const torch::Tensor stop = long_tensor(stop_ids, 1, static_cast<std::int64_t>(stop_ids.size()), device).view({-1});

  // On a device the wave's draws come from the host generator at once (one copy, not one per
  // step); on CPU sample_tokens draws as the host loop does.
  const bool draw_ahead = !device.is_cpu() && !greedy(params);
  torch::Tensor uniforms;
  if (draw_ahead) uniforms = torch::rand({max_len, N}, generator, torch::TensorOptions().dtype(torch::kDouble)).to(device);
  auto draw = [&](const torch::Tensor& logits, std::int64_t column) {
    const torch::Tensor sampling = sampled_ids(logits);
    const torch::Tensor next =
        (draw_ahead ? sample_tokens_at(sampling, params, uniforms.select(0, column).index_select(0, rows))
                    : sample_tokens(sampling, params, generator))
            .to(torch::kLong);
    return std::make_pair(next, sampling_log_probs(sampling, next, params).to(torch::kFloat));
  };

  // Outputs by wave sequence; a row's tokens past its length are discarded.
  auto out_tokens = torch::zeros({N, max_len}, longs);
  auto out_log_probs = torch::zeros({N, max_len}, on_device.dtype(torch::kFloat));
  auto lengths = torch::zeros({N}, longs);
  auto [tokens, log_probs] = draw(n == 1 ? first_logits : first_logits.repeat_interleave(n, 0), 0);
  out_tokens.select(1, 0).copy_(tokens);
  out_log_probs.select(1, 0).copy_(log_probs);
  torch::Tensor length = torch::ones({N}, longs);
  torch::Tensor done = torch::isin(tokens, stop).logical_or_(length >= max_len);

  for (std::int64_t s = 0; s < steps; ++s) {
    if (s % decode_.stop_check_interval == 0) {
      // The one host read between two checks: drop the rows that finished since the last.
      const auto finished = done.to(torch::kCPU).contiguous();
      const auto* f = finished.data_ptr<bool>();
      std::vector<std::int64_t> keep;
      for (std::size_t r = 0; r < rows_h.size(); ++r)
        if (!f[r]) keep.push_back(static_cast<std::int64_t>(r));
      if (keep.size() < rows_h.size()) {
        lengths.index_copy_(0, rows, length);
        if (keep.empty()) {
          rows_h.clear();
          break;
        }
        const auto K = static_cast<std::int64_t>(keep.size());
        const auto kept = long_tensor(keep, K, 1, device).view({K});
        rows = rows.index_select(0, kept);
        tokens = tokens.index_select(0, kept);
        length = length.index_select(0, kept);
        done = done.index_select(0, kept);
        slots = slots.index_select(0, kept);
        block_tables = block_tables.index_select(0, kept);
        prompts = prompts.index_select(0, kept);
        std::vector<std::int64_t> still(keep.size());
        longest_prompt = 0;
        for (std::size_t k = 0; k < keep.size(); ++k) {
          still[k] = rows_h[static_cast<std::size_t>(keep[k])];
          longest_prompt = std::max(longest_prompt, prompt_len[static_cast<std::size_t>(still[k])]);
        }
        rows_h.swap(still);
      }
    }
    const auto A = static_cast<std::int64_t>(rows_h.size());
    const auto positions = prompts + s;  // (A)
    const auto context = positions + 1;
    const auto step_slots = slots.select(1, s);
    torch::Tensor logits;  // (A, V)
    {
      HS_PROBE_TRACE_RANGE_ARGS(probes::thread_timings(), "gen/decode_step", kPhase, A, longest_prompt + s + 1);
      if (graphs_) {
        logits = graphs_->step(tokens, positions, step_slots, block_tables, context, scratch_block);
      } else {
        KvCacheView view;
        view.cache = cache_.get();
        view.slot_mapping = step_slots.view({A, 1});
        view.block_tables = block_tables;
        view.context_lens = context;
        view.max_context_len = longest_prompt + s + 1;  // an upper bound known on the host: no sync
        view.all_slots_written = 1;
        logits = model_->forward_cached(tokens.view({A, 1}), positions.view({A, 1}), view).select(1, 0);
      }
    }
    auto [next, next_log_probs] = draw(logits, s + 1);
    out_tokens.select(1, s + 1).index_copy_(0, rows, next);
    out_log_probs.select(1, s + 1).index_copy_(0, rows, next_log_probs);
    length = length + done.logical_not().to(torch::kLong);  // a finished row's token does not count
    done = done.logical_or(torch::isin(next, stop)).logical_or_(length >= max_len);
    tokens = next;
  }
  if (!rows_h.empty()) lengths.index_copy_(0, rows, length);

  // The wave's responses in one copy.
  const auto tokens_h = out_tokens.to(torch::kCPU).contiguous();
  const auto log_probs_h = out_log_probs.to(torch::kCPU).contiguous();
  const auto lengths_h = lengths.to(torch::kCPU).contiguous();
  const auto* tok = tokens_h.data_ptr<std::int64_t>();
  const auto* lp = log_probs_h.data_ptr<float>();
  const auto* len = lengths_h.data_ptr<std::int64_t>();
  auto* responses = result.responses.data() + first * static_cast<std::size_t>(n);
  auto* response_log_probs = result.log_probs.data() + first * static_cast<std::size_t>(n);
  for (std::int64_t i = 0; i < N; ++i) {
    auto& response = responses[i];
    auto& logp = response_log_probs[i];
    for (std::int64_t t = 0; t < len[i]; ++t) {
      response.push_back(static_cast<std::int32_t>(tok[i * max_len + t]));
      logp.push_back(lp[i * max_len + t]);
    }
    result.generated_tokens += len[i];
  }
}

}  // namespace hs::trainer
