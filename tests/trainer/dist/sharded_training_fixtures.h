// sharded_training_fixtures.h — the model, batch and actor settings that the sharded-training
// tests share (pipeline_test.cpp in threads, sharded_training_test.cpp over Gloo processes through
// hs_dist_child sharded_training): tiny enough for CPU ranks, shaped so every layout splits it.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "hybridscope/trainer/data/batch.h"
#include "hybridscope/trainer/config/config.h"

namespace hs::trainer::test {

// Hidden 32, 4 heads of 8, 4 layers (2 per stage with pp 2), vocabulary 20 (LM head split over
// tp 2 or 4). `kv_heads` 2 gives GQA with one KV head per rank at tp 2.
inline ModelShape sharded_training_shape(int kv_heads = 4) {
  ModelShape s;
  s.vocab_size = 20;
  s.hidden_size = 32;
  s.intermediate_size = 64;
  s.num_hidden_layers = 4;
  s.num_attention_heads = 4;
  s.num_key_value_heads = kv_heads;
  s.max_position_embeddings = 32;
  return s;
}

// 8 samples (2 prompts of unequal length x 4 responses of 1..5 tokens), identical on every rank;
// old log-probs and advantages random so the PPO ratio is clipped on some tokens.
inline RolloutBatch sharded_training_batch(int vocab) {
  auto gen = at::detail::createCPUGenerator(4321);
  std::vector<std::vector<std::int32_t>> prompts, responses;
  for (int i = 0; i < 2; ++i) {
    std::vector<std::int32_t> prompt;
    for (int k = 0; k < 4 - i; ++k)
      prompt.push_back(static_cast<std::int32_t>(torch::randint(3, vocab, {1}, gen).item<std::int64_t>()));
    prompts.push_back(prompt);
  }
  for (int i = 0; i < 8; ++i) {
    std::vector<std::int32_t> response;
    for (int k = 0; k < 1 + (i * 3) % 5; ++k)
      response.push_back(static_cast<std::int32_t>(torch::randint(3, vocab, {1}, gen).item<std::int64_t>()));
    responses.push_back(response);
  }
  RolloutBatch batch = make_rollout_batch(prompts, responses, 4, /*pad=*/0, /*eos=*/1);
  const auto shape = batch.responses.sizes();
  batch.old_log_probs = -torch::rand(shape, gen) - 2.5;
  batch.advantages = torch::randn(shape, gen);
  return batch;
}

// One mini-batch (2 prompts x n 4 = the whole batch), micro-batches of one sample, clipping
// active. AdamW with eps far above |g| makes the first step (lr / eps)·g = 0.1·g, linear in the
// gradient (with the default eps it is lr·sign(g), which hides a mis-weighted gradient and turns
// rounding noise on near-zero gradients into ±lr).
inline ActorConfig sharded_training_actor() {
  ActorConfig cfg;
  cfg.ppo_mini_batch_size = 2;
  cfg.ppo_micro_batch_size_per_gpu = 1;
  cfg.optim.lr = 100.0;
  cfg.optim.eps = 1e3;
  cfg.optim.weight_decay = 0.0;
  cfg.grad_clip = 0.05;
  cfg.entropy_coeff = 0.01;
  return cfg;
}

}  // namespace hs::trainer::test
