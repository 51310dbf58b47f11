// rollout.h — the rollout engine: batched autoregressive generation over a paged KV cache.
//
// K and V live in per-layer tensors of fixed-size blocks (num_blocks, block_size, kv_heads,
// head_dim); KvBlockAllocator decides which block each token goes to. A prompt is prefilled once
// and its n samples fork its blocks (GRPO groups share the prompt's KV). Sampling: temperature,
// top-k, top-p; greedy when do_sample is false or temperature is 0. Generation stops at EOS or
// max_response_length.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <torch/types.h>

#include "hybridscope/trainer/config.h"
#include "hybridscope/trainer/kv_block_pool.h"
#include "hybridscope/trainer/model.h"

namespace hs::trainer {

/// K/V storage for every layer of a model, addressed by flat slot index.
class PagedKvCache {
 public:
  PagedKvCache(const ModelShape& shape, std::int64_t num_blocks, std::int64_t block_size,
               torch::Dtype dtype, torch::Device device);
  /// (num_blocks * block_size, kv_heads, head_dim) views of layer `layer`'s K and V.
  torch::Tensor& keys(int layer) { return k_.at(layer); }
  torch::Tensor& values(int layer) { return v_.at(layer); }
  void copy_block(std::int64_t from, std::int64_t to);
  /// copy_block for many pairs at once (one gather/scatter per layer); sources and destinations
  /// must be disjoint.
  void copy_blocks(const std::vector<std::int64_t>& from, const std::vector<std::int64_t>& to);
  std::int64_t block_size() const { return block_size_; }
  std::int64_t num_blocks() const { return num_blocks_; }
  std::int64_t bytes() const;

 private:
  std::int64_t num_blocks_;
  std::int64_t block_size_;
  std::vector<torch::Tensor> k_, v_;
};

struct GenerationRequest {
  std::vector<std::vector<std::int32_t>> prompts;  // token ids (bos first), unpadded
  SamplingParams params;                            // params.n samples per prompt
  int max_response_length = 0;
};

struct GenerationResult {
  /// prompts.size() * n responses, prompt-major (sample j of prompt i at i * n + j); each ends
  /// with EOS when the model produced it within max_response_length.
  std::vector<std::vector<std::int32_t>> responses;
  std::int64_t generated_tokens = 0;
  KvPoolStats peak_pool;  // pool stats at the moment of peak use
};

class RolloutEngine {
 public:
  /// `model` is the actor's module (the same parameters in the single-process trainer).
  /// num_blocks -1: enough for max_num_seqs sequences of max_seq_len tokens.
  RolloutEngine(Transformer model, int eos_token_id, int pad_token_id, std::int64_t block_size,
                std::int64_t num_blocks, int max_num_seqs, int max_seq_len);

  /// Generates under torch::NoGradGuard with `generator` as the only source of randomness.
  /// Sequences are processed in waves of at most max_num_seqs.
  GenerationResult generate(const GenerationRequest& request, torch::Generator& generator);

  /// Allocates the K/V tensors (the train->rollout switch does this).
  void allocate_cache();
  /// Frees the K/V tensors (rollout->train with free_cache_engine).
  void release_cache();
  bool cache_allocated() const;

  const KvBlockAllocator& allocator() const { return allocator_; }
  std::int64_t cache_bytes() const;

 private:
  /// Prefills prompts [first, end), forks their n samples, decodes them to completion, frees them.
  void run_wave(const GenerationRequest& request, std::size_t first, std::size_t end,
                torch::Generator& generator, GenerationResult& result);
  /// Records the pool stats in result.peak_pool when more blocks are in use than ever before.
  void note_peak(GenerationResult& result) const;

  Transformer model_;
  int eos_token_id_;
  int pad_token_id_;
  int max_num_seqs_;
  int max_seq_len_;
  KvBlockAllocator allocator_;
  std::unique_ptr<PagedKvCache> cache_;
};

/// Samples one token per row of logits (B, V) with temperature/top-k/top-p; argmax when greedy.
torch::Tensor sample_tokens(const torch::Tensor& logits, const SamplingParams& params,
                            torch::Generator& generator);

/// One token per row of `probs` (B, V) at `uniforms` (B) in [0, 1): the first v whose cumulative
/// probability exceeds u·(the row's total), computed where `probs` is. sample_tokens uses it for
/// device logits with a host generator.
torch::Tensor sample_by_inverse_cdf(const torch::Tensor& probs, const torch::Tensor& uniforms);

}  // namespace hs::trainer
