// fsdp_fixtures.h — what the fsdp (ZeRO-3) test and its hs_dist_child mode share: the model, the
// actor settings and the batch.
#pragma once

#include <cstdint>
#include <vector>

#include <torch/torch.h>

#include "hybridscope/trainer/data/batch.h"
#include "hybridscope/trainer/config/config.h"
#include "hybrid/reshard_fixtures.h"

namespace hs::trainer::test {

inline constexpr int kFsdpRolloutN = 4;

// tiny_llama: every tp-split dim divides by tp 4 and every row count of a tp-2 shard by dp 2.
inline ModelShape fsdp_shape() { return tiny_llama(); }

// fsdp's per-layer units (fsdp_config.per_layer): four decoder layers, so that the root unit and
// two layers (the most per-layer units hold at once) are less than the whole model.
inline ModelShape fsdp_layered_shape() {
  ModelShape s = tiny_llama();
  s.num_hidden_layers = 4;
  return s;
}

// How the fsdp actor wraps its units (hs_dist_child fsdp_update's UNITS argument).
// kLayerPrefetchRecompute: per-layer prefetch under gradient checkpointing (the layer is gathered
// before its recomputation in the backward).
enum class FsdpUnits { kModel, kLayer, kLayerPrefetch, kLayerPrefetchRecompute };

// One mini-batch of the whole batch, micro-batches of 2 samples (>= 2 per rank at dp 4), and an
// update that is linear in the clipped gradient: AdamW's first step is lr·g/(|g| + eps), which
// with eps = 1e3 far above |g| is (lr/eps)·g = g, so a gradient that is mis-summed or mis-placed
// shows at the size of the update (~1e-3 per element) instead of being hidden by sign(g).
// grad_clip 0.05 lies below the batch's gradient norm (checked), so clipping is active.
inline ActorConfig fsdp_actor_config() {
  ActorConfig cfg;
  cfg.ppo_mini_batch_size = 4;  // prompts: x rollout.n = the 16 samples
  cfg.ppo_micro_batch_size_per_gpu = 2;
  cfg.optim.lr = 1e3;
  cfg.optim.eps = 1e3;
  cfg.optim.weight_decay = 0.0;
  cfg.grad_clip = 0.05;
  return cfg;
}

// 16 samples (4 prompts x 4 responses) of unequal prompt and response lengths, identical on every
// rank (fixed generator).
inline RolloutBatch fsdp_batch(int vocab) {
  auto gen = at::detail::createCPUGenerator(4321);
  const std::int64_t prompts_n = 4, p = 3, rlen = 5;
  std::vector<std::vector<std::int32_t>> prompts, responses;
  for (std::int64_t i = 0; i < prompts_n; ++i) {
    std::vector<std::int32_t> prompt;
    for (std::int64_t k = 0; k < p - (i % 2); ++k)
      prompt.push_back(static_cast<std::int32_t>(torch::randint(3, vocab, {1}, gen).item<std::int64_t>()));
    prompts.push_back(prompt);
  }
  for (std::int64_t i = 0; i < prompts_n * kFsdpRolloutN; ++i) {
    std::vector<std::int32_t> response;
    for (std::int64_t k = 0; k < 1 + (i * 3) % rlen; ++k)
      response.push_back(static_cast<std::int32_t>(torch::randint(3, vocab, {1}, gen).item<std::int64_t>()));
    responses.push_back(response);
  }
  RolloutBatch batch = make_rollout_batch(prompts, responses, kFsdpRolloutN, /*pad=*/0, /*eos=*/1);
  const auto shape = batch.responses.sizes();
  batch.old_log_probs = -torch::rand(shape, gen) - 1.0;
  batch.advantages = torch::randn(shape, gen);
  return batch;
}

}  // namespace hs::trainer::test
