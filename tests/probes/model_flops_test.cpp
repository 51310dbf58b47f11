// model_flops_test.cpp — verl's FLOPs estimate against hand arithmetic and against verl's
// _estimate_qwen2_flops evaluated on Qwen2.5's published shapes.
#include "hybridscope/probes/model_flops.h"

#include <gtest/gtest.h>

namespace probes = hs::probes;

namespace {

// config.json of Qwen2.5-7B and Qwen2.5-0.5B (head_dim = hidden / heads = 128 and 64).
probes::DecoderShape qwen25_7b() { return {152064, 3584, 18944, 28, 28, 4, 128}; }
probes::DecoderShape qwen25_05b() { return {151936, 896, 4864, 24, 14, 2, 64}; }

}  // namespace

TEST(ModelFlops, SmallShapeByHand) {
  // The demo policy: V 98, h 128, ffn 384, 2 layers, 4 heads (head_dim 32), 2 KV heads.
  const probes::DecoderShape s{98, 128, 384, 2, 4, 2, 32};
  // N_dense = 2·(3·128·384 + 128·(128 + 64 + 64 + 128)) + 2·98·128
  //         = 2·(147456 + 49152) + 25088 = 418304
  EXPECT_DOUBLE_EQ(probes::dense_parameter_count(s), 418304.0);
  // Lengths 10 and 20: 6·418304·30 + 6·(100 + 400)·32·4·2 = 75294720 + 768000 = 76062720.
  EXPECT_DOUBLE_EQ(probes::training_flops(s, {10, 20}), 76062720.0);
  EXPECT_DOUBLE_EQ(probes::training_flops(s, 30.0, 500.0), 76062720.0);
  EXPECT_DOUBLE_EQ(probes::forward_flops(s, 30.0, 500.0), 76062720.0 / 3.0);
}

TEST(ModelFlops, MatchesVerlsFormulaOnQwen25) {
  // Golden values: verl's _estimate_qwen2_flops (flops_counter.py, after PR #4959) times
  // delta_time, evaluated in Python on the shapes above:
  //   N = (h·ffn·3 + h·(q + k + v + H·d))·L + V·h·2; 6·N·Σs + 6·Σs²·d·H·L
  // 7B, lengths {512, 1024}: N = 7615283200, FLOPs = 70971650211840 (the pre-#4959 factor 12
  // would give 71760850452480).
  EXPECT_DOUBLE_EQ(probes::dense_parameter_count(qwen25_7b()), 7615283200.0);
  EXPECT_DOUBLE_EQ(probes::training_flops(qwen25_7b(), {512, 1024}), 70971650211840.0);
  // 0.5B, lengths {300, 700, 1000}: N = 630095872, FLOPs = 7765008384000.
  EXPECT_DOUBLE_EQ(probes::dense_parameter_count(qwen25_05b()), 630095872.0);
  EXPECT_DOUBLE_EQ(probes::training_flops(qwen25_05b(), {300, 700, 1000}), 7765008384000.0);
}
