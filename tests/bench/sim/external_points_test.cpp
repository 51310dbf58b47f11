// external_points_test.cpp — the published points file the simulator is checked against reads into
// the inputs its quotes and recipes state, and a malformed point is refused with the key named.
#include "hybridscope/bench/sim/external_points.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

namespace sim = hs::bench::sim;

TEST(ExternalPoints, TheRepositorysPointsReadAsTheirSourcesState) {
  const auto points = sim::read_external_points(std::string(HS_SOURCE_DIR) + "/bench/sim/external/points.yaml");
  ASSERT_GE(points.size(), 2u);
  const sim::ExternalPoint& llama = points[0];
  EXPECT_EQ(llama.name, "nemo-rl-v0.5 grpo llama3.1-8b 16xH100");
  EXPECT_EQ(llama.inputs.train.world(), 16);  // 2 nodes x 8, pp 2: dp 8
  EXPECT_EQ(llama.inputs.train.dp, 8);
  EXPECT_EQ(llama.inputs.prompts * llama.inputs.samples_per_prompt, 2048);  // G-GBS
  EXPECT_EQ(llama.inputs.optimizer_steps_per_epoch, 4);                     // T-GBS 512 of 2048
  EXPECT_DOUBLE_EQ(llama.inputs.model.head_dim, 128.0);
  EXPECT_DOUBLE_EQ(llama.measured_step_s, 92.8);
  EXPECT_NE(llama.hardware_path.find("bench/hardware/h100-ib.yaml"), std::string::npos) << llama.hardware_path;
  EXPECT_NO_THROW(sim::read_hardware(llama.hardware_path));
  EXPECT_FALSE(llama.assumptions.empty());
  EXPECT_EQ(points[1].inputs.train.dp, 2);  // 32 GPUs, tp 4 x pp 4
}

TEST(ExternalPoints, AMisspelledKeyIsRefusedWithThePointAndTheKey) {
  const std::string path = testing::TempDir() + "hs_points_bad.yaml";
  std::ofstream(path) << "points:\n  - name: p\n    source: s\n    quote: q\n    hardware: h.yaml\n"
                         "    model: {vocab_size: 10, hidden_size: 8, intermediate_size: 8, num_hidden_layers: 1,\n"
                         "            num_attention_heads: 1, num_key_value_heads: 1, head_dim: 8, tie_word_embeddings: no}\n";
  try {
    sim::read_external_points(path);
    FAIL() << "a bad boolean must be refused";
  } catch (const sim::SimError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("points[0] (p).model.tie_word_embeddings"), std::string::npos) << what;
    EXPECT_NE(what.find("must be true or false"), std::string::npos) << what;
  }
  std::remove(path.c_str());
}
