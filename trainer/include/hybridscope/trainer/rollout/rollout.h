// rollout.h — the rollout engine: batched autoregressive generation over a paged KV cache.
//
// K and V live in per-layer tensors of fixed-size blocks (num_blocks, block_size, kv_heads,
// head_dim); KvBlockAllocator decides which block each token goes to. A prompt is prefilled once
// and its n samples fork its blocks (GRPO groups share the prompt's KV). Sampling: temperature,
// top-k, top-p; greedy when do_sample is false or temperature is 0. Generation stops at EOS or
// max_response_length.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <torch/types.h>

#include "hybridscope/trainer/config/config.h"
#include "hybridscope/trainer/rollout/kv_block_pool.h"
#include "hybridscope/trainer/model/model.h"
#include "hybridscope/trainer/model/paged_kv_cache.h"

namespace hs::trainer {
namespace detail {
class DecodeGraphs;  // rollout/decode_graphs.h (private)
}  // namespace detail

struct GenerationRequest {
  std::vector<std::vector<std::int32_t>> prompts;  // token ids (bos first), unpadded
  SamplingParams params;                            // params.n samples per prompt
  int max_response_length = 0;
  /// Called before every decode forward (after the token of the step before was sampled), when
  /// set: the fully_async rollouter joins a weight sync there (async_training.partial_rollout), so
  /// the model's parameters may change in place. It returns true when they did: every sequence in
  /// flight is then re-prefilled (`gen/reprefill`) — prompt + tokens so far through one forward
  /// with the new weights, rewriting its K/V in its own blocks — as verl resubmits an aborted
  /// request with prompt + partial response; the tokens sampled before keep their log-probs.
  std::function<bool()> between_steps = nullptr;
};

struct GenerationResult {
  /// prompts.size() * n responses, prompt-major (sample j of prompt i at i * n + j); each ends
  /// with EOS when the model produced it within max_response_length.
  std::vector<std::vector<std::int32_t>> responses;
  /// log π_rollout of every response token, as the engine computed it when it sampled it
  /// (sampling_log_probs): verl's rollout_log_probs (rollout.calculate_log_probs).
  std::vector<std::vector<float>> log_probs;
  std::int64_t generated_tokens = 0;
  /// Tokens whose K/V a re-prefill after a mid-generation weight change recomputed (0 without).
  std::int64_t reprefilled_tokens = 0;
  KvPoolStats peak_pool;  // pool stats at the moment of peak use
};

/// What sizes the KV pool on a CUDA device (rollout.gpu_memory_utilization, vLLM's meaning: the
/// share of the device's total memory the rollout may hold, its weights included).
struct KvMemoryBudget {
  double utilization = 0.5;           // rollout.gpu_memory_utilization
  std::int64_t total_bytes = 0;       // the device's capacity
  std::int64_t available_bytes = 0;   // free on the device plus cached-but-unused in the allocator
  std::int64_t weight_bytes = 0;      // the rollout model's parameters
  std::int64_t bytes_per_block = 0;   // PagedKvCache::bytes_per_block
};

/// Blocks that fit min(utilization * total - weights, available), floored; never negative.
std::int64_t kv_blocks_within(const KvMemoryBudget& budget);

/// How the engine's decode loop runs (hybridscope.decode, config.h DecodeConfig; its paged_kernel
/// is the model's ComputeOptions.paged_decode).
struct DecodeOptions {
  /// false: the host loop (the sampled tokens read on the host every step, blocks appended as
  /// tokens arrive). true: the device loop (generate()).
  bool device_loop = false;
  int stop_check_interval = 8;  // device loop: steps between two host reads of the stop flags (>= 1)
  bool cuda_graphs = false;     // device loop on CUDA: replay each step's graph (decode_graphs.h)
};
/// hybridscope.decode as DecodeOptions.
DecodeOptions decode_options(const DecodeConfig& decode);

class RolloutEngine {
 public:
  /// `model` is the module generation runs on: the actor's own when it generates in its training
  /// layout, else the rollout model the reshard fills (hybrid_actor.h).
  /// num_blocks > 0 fixes the pool. num_blocks -1: enough for max_num_seqs sequences of
  /// max_seq_len tokens, and on a CUDA device no more than kv_blocks_within the share
  /// `gpu_memory_utilization` leaves when the cache is allocated.
  RolloutEngine(Transformer model, int eos_token_id, int pad_token_id, std::int64_t block_size,
                std::int64_t num_blocks, int max_num_seqs, int max_seq_len,
                double gpu_memory_utilization = 1.0);
  ~RolloutEngine();
  RolloutEngine(const RolloutEngine&) = delete;
  RolloutEngine& operator=(const RolloutEngine&) = delete;

  /// Generates under torch::NoGradGuard with `generator` as the only source of randomness.
  /// Prompts are processed in order, in waves of at most max_num_seqs sequences whose worst case
  /// (every sample's prompt + max_response_length tokens in blocks of its own) fits the pool.
  /// Throws KvPoolExhausted when one prompt's samples alone cannot fit.
  ///
  /// The decode loop is set_decode's. The host loop reads each step's sampled tokens on the host
  /// and appends KV blocks as tokens arrive. The device loop reserves every sequence's blocks for
  /// its whole response when its wave starts (the pool's peak is the wave's worst case), keeps
  /// tokens, log-probs and stop flags on the device, and reads the stop flags on the host every
  /// stop_check_interval steps, dropping the finished rows then (until then they are decoded and
  /// discarded); the responses come back in one copy at the wave's end. On a CUDA device it draws
  /// the wave's uniforms from `generator` at once and samples by inverse CDF on the device, so
  /// sampled (not greedy) tokens differ from the host loop's for the same seed; on CPU, with
  /// stop_check_interval 1, both loops give the same tokens and log-probs.
  GenerationResult generate(const GenerationRequest& request, torch::Generator& generator);

  /// Allocates the K/V tensors (the train->rollout switch does this); a pool sized by device
  /// memory is sized here, from what is free at that moment.
  void allocate_cache();
  /// Frees the K/V tensors (rollout->train with free_cache_engine).
  void release_cache();
  bool cache_allocated() const;

  /// Samples only ids below `vocab_size` (the tokenizer's vocabulary) from a model whose
  /// embedding is larger, as vLLM ignores a padded vocabulary (Qwen2.5's 151936 rows over a
  /// 151665-id tokenizer; a benchmark shape over the char tokenizer).
  void limit_sampling_to(std::int64_t vocab_size);
  /// A response also ends at any of `ids` (generation_config.json's eos list), besides the eos id
  /// the engine was built with.
  void set_stop_token_ids(const std::vector<std::int32_t>& ids);
  /// The decode loop (DecodeOptions). Throws std::invalid_argument for a stop_check_interval < 1,
  /// or cuda_graphs without device_loop.
  void set_decode(const DecodeOptions& options);
  const DecodeOptions& decode() const { return decode_; }
  /// CUDA graphs captured by the device loop so far (0 without cuda_graphs).
  std::int64_t decode_graphs_captured() const;

  const KvBlockAllocator& allocator() const { return allocator_; }
  std::int64_t cache_bytes() const;

 private:
  /// Prefills prompts [first, end), forks their n samples, decodes them to completion, frees them.
  void run_wave(const GenerationRequest& request, std::size_t first, std::size_t end,
                torch::Generator& generator, GenerationResult& result);
  /// The device loop's decode of one wave (generate()): `first_logits` (W, V) are the prefill's,
  /// `seq` the wave's W * n sequences (sample-major within each prompt), `scratch_block` the block
  /// pad rows of a CUDA graph write (-1 without graphs).
  void decode_on_device(const GenerationRequest& request, std::size_t first, const torch::Tensor& first_logits,
                        const std::vector<KvBlockAllocator::SeqId>& seq, std::int64_t scratch_block,
                        torch::Generator& generator, GenerationResult& result);
  /// Resizes the pool of a num_blocks -1 engine to what fits device memory (kv_blocks_within) now.
  void size_pool_by_memory(const ModelShape& local, torch::Dtype dtype, const torch::Device& device);
  /// `logits` (B, V) narrowed to the ids limit_sampling_to allows.
  torch::Tensor sampled_ids(const torch::Tensor& logits) const;
  /// Records the pool stats in result.peak_pool when more blocks are in use than ever before.
  void note_peak(GenerationResult& result) const;

  Transformer model_;
  int eos_token_id_;
  std::vector<std::int32_t> extra_stop_ids_;  // set_stop_token_ids, besides eos_token_id_
  int pad_token_id_;
  int max_num_seqs_;
  int max_seq_len_;
  bool size_by_memory_;            // num_blocks -1: a CUDA pool is capped by gpu_memory_utilization
  double gpu_memory_utilization_;
  std::string pool_sizing_;        // how the pool got its size, for KvPoolExhausted's message
  std::int64_t sampling_vocab_ = 0;  // 0: every id of the model
  KvBlockAllocator allocator_;
  std::unique_ptr<PagedKvCache> cache_;
  DecodeOptions decode_;
  std::unique_ptr<detail::DecodeGraphs> graphs_;  // device loop with cuda_graphs, over cache_
};

/// Samples one token per row of logits (B, V) with temperature/top-k/top-p; argmax when greedy.
torch::Tensor sample_tokens(const torch::Tensor& logits, const SamplingParams& params,
                            torch::Generator& generator);
/// sample_tokens with the draw given: one uniform in [0, 1) per row (B), where `logits` are, by
/// inverse CDF over the temperature/top-k/top-p distribution (sample_by_inverse_cdf); argmax when
/// greedy. No host synchronisation on a device.
torch::Tensor sample_tokens_at(const torch::Tensor& logits, const SamplingParams& params, const torch::Tensor& uniforms);

/// The rollout's log-probability of `tokens` (B) under `logits` (B, V): log_softmax(logits /
/// temperature) at each token (temperature 1 when greedy), over the sampled vocabulary and before
/// top-k/top-p, as the trainer's log-prob passes compute it (in float32, float64 logits stay float64).
torch::Tensor sampling_log_probs(const torch::Tensor& logits, const torch::Tensor& tokens, const SamplingParams& params);

/// One token per row of `probs` (B, V) at `uniforms` (B) in [0, 1): the first v whose cumulative
/// probability exceeds u·(the row's total), computed where `probs` is. sample_tokens uses it for
/// device logits with a host generator.
torch::Tensor sample_by_inverse_cdf(const torch::Tensor& probs, const torch::Tensor& uniforms);

}  // namespace hs::trainer
