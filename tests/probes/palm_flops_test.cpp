// palm_flops_test.cpp — PaLM's / torchtitan's training FLOPs (palm_flops.h) against the formula
// worked by hand on Qwen2.5-0.5B's config.json, and against verl's convention (model_flops.h) on the
// same sequences, so that each MFU is named by the convention it follows.
#include "hybridscope/probes/palm_flops.h"

#include <gtest/gtest.h>

namespace probes = hs::probes;

namespace {

// Qwen2.5-0.5B's config.json: vocab 151936, hidden 896, intermediate 4864, 24 layers, 14 heads,
// 2 KV heads, head_dim 896/14 = 64, tie_word_embeddings true, q/k/v biases.
probes::DecoderShape qwen25_05b() { return {151936, 896, 4864, 24, 14, 2, 64}; }

}  // namespace

TEST(PalmFlops, Qwen25HalfBByHandFromTorchtitansRule) {
  // torchtitan's get_nparams_and_active_nparams (torchtitan/models/utils.py): every parameter but an
  // input embedding that is not the LM head. Qwen2.5-0.5B ties them, so torchtitan counts all
  // 494,032,768 parameters (its published size). By hand, per layer:
  //   q 896·896, k and v 896·128 each, o 896·896 = 1,835,008; MLP 3·896·4864 = 13,074,432
  //   → 24 · 14,909,440 = 357,826,560, plus the head 151936·896 = 136,134,656: N = 493,961,216;
  //   norms 24·2·896 + 896 = 43,904 and q/k/v biases 24·(896 + 128 + 128) = 27,648 make the rest:
  //   493,961,216 + 71,552 = 494,032,768.
  EXPECT_DOUBLE_EQ(probes::palm_parameter_count(qwen25_05b()), 493961216.0);
  EXPECT_DOUBLE_EQ(probes::palm_parameter_count(qwen25_05b()) + 43904.0 + 27648.0, 494032768.0);
  // Lengths {300, 700, 1000}: Σs = 2000, Σs² = 1,580,000.
  //   6·N·Σs = 5,927,534,592,000; 12·L·H·Q·Σs² = 12·24·14·64·1,580,000 = 407,715,840,000
  //   → 6,335,250,432,000 (torchtitan's per-token 6N + 12·L·H·Q·T summed over every token).
  EXPECT_DOUBLE_EQ(probes::palm_training_flops(qwen25_05b(), {300, 700, 1000}), 6335250432000.0);
  EXPECT_DOUBLE_EQ(probes::palm_training_flops(qwen25_05b(), 2000.0, 1580000.0), 6335250432000.0);
}

TEST(PalmFlops, DiffersFromVerlsByTheEmbeddingAndTheCausalHalf) {
  const auto s = qwen25_05b();
  // verl (flops_counter.py _estimate_qwen2_flops, model_flops_test.cpp): 7,765,008,384,000 on the
  // same lengths — it counts the embedding and the head (2·V·h) and half the attention scores.
  const double verl = probes::training_flops(s, {300, 700, 1000});
  EXPECT_DOUBLE_EQ(verl, 7765008384000.0);
  EXPECT_DOUBLE_EQ(verl - probes::palm_training_flops(s, {300, 700, 1000}),
                   6.0 * 151936.0 * 896.0 * 2000.0 - 6.0 * 24.0 * 14.0 * 64.0 * 1580000.0);
  // Where the two meet: one sequence of length V·h / (L·H·Q) = 151936·896/21504 = 6330.67 tokens.
  const double crossover = 151936.0 * 896.0 / (24.0 * 14.0 * 64.0);
  EXPECT_NEAR(probes::training_flops(s, crossover, crossover * crossover),
              probes::palm_training_flops(s, crossover, crossover * crossover), 1e-3);
  EXPECT_LT(probes::palm_training_flops(s, {1024}), probes::training_flops(s, {1024}));
  EXPECT_GT(probes::palm_training_flops(s, {16384}), probes::training_flops(s, {16384}));
}
