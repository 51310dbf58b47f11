// matrix_test.cpp — matrix specs: the product of the axes in order, the overrides each cell gets,
// cells whose config does not validate kept with the reason, specs that cannot be read refused
// with the key, and every spec that ships in bench/matrices/ expanding to valid cells.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "../remove_tree.h"
#include "hybridscope/bench/matrix.h"
#include "hybridscope/trainer/config/config.h"

namespace fs = std::filesystem;
using namespace hs::bench;

namespace {

class MatrixTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("hs_matrix_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    std::ofstream(dir_ / "base.yaml") << "data:\n  train_batch_size: 8\nactor_rollout_ref:\n  actor:\n"
                                         "    ppo_mini_batch_size: 4\n    ppo_micro_batch_size_per_gpu: 4\ncritic:\n"
                                         "  ppo_mini_batch_size: 4\nalgorithm:\n  adv_estimator: remax\n";
  }
  void TearDown() override { hs::test::remove_tree(dir_); }
  std::string spec(const std::string& text) {
    const auto path = dir_ / "spec.yaml";
    std::ofstream(path) << text;
    return path.string();
  }
  fs::path dir_;
};

// The message of the MatrixError that load_matrix throws for `text` ("" when none is thrown).
std::string refusal(const std::string& path) {
  try {
    load_matrix(path);
  } catch (const MatrixError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_F(MatrixTest, ExpandsTheProductFirstAxisSlowestWithOverridesInOrder) {
  const auto path = spec(R"(
name: grid
base: base.yaml
ranks: 2
warmup_steps: 1
measured_steps: 4
overrides: [trainer.test_freq=-1]
axes:
  size:
    small: [hybridscope.model.hidden_size=64, hybridscope.model.intermediate_size=128]
    wide: [hybridscope.model.hidden_size=256, ranks=4]
  actor_rollout_ref.rollout.n: [1, 2, 4]
baseline: {size: small, actor_rollout_ref.rollout.n: 1}
)");
  const MatrixSpec s = load_matrix(path);
  EXPECT_EQ(s.name, "grid");
  EXPECT_EQ(s.base_config, (dir_ / "base.yaml").string()) << "a relative base is read from the spec's folder";
  const auto cells = expand_matrix(s);
  ASSERT_EQ(cells.size(), 6u);
  const std::vector<std::string> names = {"size=small,actor_rollout_ref.rollout.n=1", "size=small,actor_rollout_ref.rollout.n=2",
                                          "size=small,actor_rollout_ref.rollout.n=4", "size=wide,actor_rollout_ref.rollout.n=1",
                                          "size=wide,actor_rollout_ref.rollout.n=2", "size=wide,actor_rollout_ref.rollout.n=4"};
  for (std::size_t i = 0; i < cells.size(); ++i) {
    EXPECT_EQ(cells[i].name, names[i]);
    EXPECT_EQ(cells[i].index, static_cast<int>(i));
    EXPECT_TRUE(cells[i].valid()) << cells[i].name << ": " << cells[i].invalid_reason;
    EXPECT_EQ(cells[i].baseline, i == 0) << cells[i].name;
  }
  EXPECT_EQ(cells[1].overrides,
            (std::vector<std::string>{"trainer.test_freq=-1", "trainer.total_training_steps=5",
                                      "hybridscope.model.hidden_size=64", "hybridscope.model.intermediate_size=128",
                                      "actor_rollout_ref.rollout.n=2", "trainer.nnodes=1", "trainer.n_gpus_per_node=2"}))
      << "the world the validator checks is the cell's rank count on one host";
  EXPECT_EQ(cells[0].ranks, 2) << "the spec's ranks";
  EXPECT_EQ(cells[3].ranks, 4) << "a level's ranks=N wins, and is no config override";
  EXPECT_EQ(cells[3].overrides.size(), 6u);
  EXPECT_EQ(cell_command(s, cells[3], "hs"),
            "hs launch -n 4 -- train --config " + s.base_config +
                " --no-progress --db out/matrix/grid/cell4.sqlite trainer.test_freq=-1 trainer.total_training_steps=5 "
                "hybridscope.model.hidden_size=256 actor_rollout_ref.rollout.n=1 trainer.nnodes=1 "
                "trainer.n_gpus_per_node=4");
}

TEST_F(MatrixTest, ZippedAxesMoveTogetherAndRankAxesScaleStrongOrWeak) {
  const std::string weak_text = R"(
base: base.yaml
axes:
  world:
    zip:
      ranks: [1, 2, 4]
      actor_rollout_ref.rollout.tensor_model_parallel_size: [1, 1, 2]
  data.max_response_length: [4, 8]
scaling: {world: weak}
)";
  const auto bad_baseline = spec(weak_text + "baseline: {world: 4/2/4}\n");
  EXPECT_NE(refusal(bad_baseline).find("baseline.world = 4/2/4"), std::string::npos) << refusal(bad_baseline);
  const auto weak = load_matrix(spec(weak_text));
  ASSERT_EQ(weak.axes.size(), 2u);
  EXPECT_TRUE(weak.axes[0].rank_axis());
  EXPECT_FALSE(weak.axes[1].rank_axis());
  EXPECT_EQ(weak.scaling_of("world"), ScalingKind::kWeak);
  EXPECT_EQ(weak.reference_ranks(weak.axes[0]), 1) << "no baseline: the fewest ranks";
  const auto cells = expand_matrix(weak);
  ASSERT_EQ(cells.size(), 6u) << "3 zipped levels x 2";
  EXPECT_EQ(cells[4].name, "world=4/2,data.max_response_length=4");
  EXPECT_EQ(cells[4].ranks, 4);
  // Weak scaling: the base's 8 prompts and mini-batches of 4 per rank at N0 = 1, times 4 ranks.
  const auto& o = cells[4].overrides;
  auto has = [&](const std::string& x) { return std::find(o.begin(), o.end(), x) != o.end(); };
  EXPECT_TRUE(has("actor_rollout_ref.rollout.tensor_model_parallel_size=2"));
  EXPECT_TRUE(has("data.train_batch_size=32")) << ::testing::PrintToString(o);
  EXPECT_TRUE(has("actor_rollout_ref.actor.ppo_mini_batch_size=16"));
  EXPECT_TRUE(has("critic.ppo_mini_batch_size=16"));
  EXPECT_TRUE(has("trainer.n_gpus_per_node=4"));
  for (const auto& c : cells) EXPECT_TRUE(c.valid()) << c.name << ": " << c.invalid_reason;

  // Strong scaling (the default) keeps the global batch.
  const auto strong = expand_matrix(load_matrix(spec(R"(
base: base.yaml
axes:
  world: {zip: {ranks: [1, 2]}, names: [one, two]}
)")));
  ASSERT_EQ(strong.size(), 2u);
  EXPECT_EQ(strong[1].name, "world=two");
  for (const auto& x : strong[1].overrides) EXPECT_EQ(x.find("data.train_batch_size"), std::string::npos) << x;

  EXPECT_NE(refusal(spec("base: base.yaml\naxes:\n  w: {zip: {ranks: [1, 2], data.seed: [1]}}\n")).find("equally long"),
            std::string::npos);
  EXPECT_NE(refusal(spec("base: base.yaml\naxes:\n  a: [1]\nscaling: {a: weak}\n")).find("only rank axes scale"),
            std::string::npos);
  EXPECT_NE(refusal(spec("base: base.yaml\naxes:\n  w: {zip: {ranks: [1]}}\nscaling: {w: linear}\n")).find("strong"),
            std::string::npos);
}

// An invalid cell's reason is the config loader's message word for word: what `hybridscope train`
// prints for the same overrides (tests/trainer/config/config_refusal_test.cpp ties that message to
// the trainer's own refusal).
TEST_F(MatrixTest, AnInvalidCellsReasonIsTheValidatorsMessage) {
  const auto s = load_matrix(spec(R"(
base: base.yaml
axes:
  world:
    zip:
      ranks: [2, 3]
      actor_rollout_ref.rollout.tensor_model_parallel_size: [2, 2]
)"));
  const auto cells = expand_matrix(s);
  ASSERT_EQ(cells.size(), 2u);
  EXPECT_TRUE(cells[0].valid()) << cells[0].invalid_reason;
  ASSERT_FALSE(cells[1].valid());
  std::string expected;
  try {
    hs::trainer::load_config(s.base_config, cells[1].overrides);
  } catch (const hs::trainer::ConfigError& e) {
    expected = e.what();
  }
  EXPECT_FALSE(expected.empty());
  EXPECT_EQ(cells[1].invalid_reason, expected);
  EXPECT_NE(expected.find("must divide the 3"), std::string::npos) << expected;
}

TEST_F(MatrixTest, ACellWhoseConfigDoesNotValidateIsKeptWithTheReason) {
  const auto cells = expand_matrix(load_matrix(spec(R"(
base: base.yaml
axes:
  data.train_batch_size: [8, 6]
)")));
  ASSERT_EQ(cells.size(), 2u);
  EXPECT_TRUE(cells[0].valid()) << cells[0].invalid_reason;
  ASSERT_FALSE(cells[1].valid());
  // 6 prompts are not a multiple of the mini-batch of 4: the config's own message, with the keys.
  EXPECT_NE(cells[1].invalid_reason.find("data.train_batch_size"), std::string::npos) << cells[1].invalid_reason;
  EXPECT_NE(cells[1].invalid_reason.find("ppo_mini_batch_size"), std::string::npos) << cells[1].invalid_reason;
  EXPECT_FALSE(cells[0].baseline) << "no baseline in the spec";
  // An unknown key is refused by the config loader, naming it.
  const auto typo = expand_matrix(load_matrix(spec("base: base.yaml\naxes:\n  data.train_batch_sise: [8]\n")));
  ASSERT_EQ(typo.size(), 1u);
  EXPECT_NE(typo[0].invalid_reason.find("data.train_batch_sise"), std::string::npos) << typo[0].invalid_reason;
}

TEST_F(MatrixTest, SpecsThatCannotBeReadAreRefusedNamingTheKey) {
  EXPECT_NE(refusal((dir_ / "missing.yaml").string()).find("does not exist"), std::string::npos);
  EXPECT_NE(refusal(spec("base: base.yaml\naxis:\n  a: [1]\n")).find("unknown key 'axis'"), std::string::npos);
  EXPECT_NE(refusal(spec("axes:\n  a: [1]\n")).find("'base' is missing"), std::string::npos);
  EXPECT_NE(refusal(spec("base: nowhere.yaml\naxes:\n  a: [1]\n")).find("no such file"), std::string::npos);
  EXPECT_NE(refusal(spec("base: base.yaml\n")).find("'axes' must be a map"), std::string::npos);
  EXPECT_NE(refusal(spec("base: base.yaml\naxes:\n  a: []\n")).find("axes.a has no levels"), std::string::npos);
  EXPECT_NE(refusal(spec("base: base.yaml\naxes:\n  a: 3\n")).find("axes.a must be a list"), std::string::npos);
  EXPECT_NE(refusal(spec("base: base.yaml\naxes:\n  s: {x: [hidden]}\n")).find("'hidden' is not an override"),
            std::string::npos);
  EXPECT_NE(refusal(spec("base: base.yaml\naxes:\n  s: {x: [ranks=0]}\n")).find("ranks must be an integer >= 1"),
            std::string::npos);
  EXPECT_NE(refusal(spec("base: base.yaml\nrepetitions: 0\naxes:\n  a: [1]\n")).find("repetitions = 0"),
            std::string::npos);
  EXPECT_NE(refusal(spec("base: base.yaml\naxes:\n  a: [1]\nbaseline: {b: 1}\n")).find("names axis 'b'"),
            std::string::npos);
  EXPECT_NE(refusal(spec("base: base.yaml\naxes:\n  a: [1]\nbaseline: {a: 2}\n")).find("no such level"),
            std::string::npos);
  EXPECT_NE(refusal(spec("base: base.yaml\naxes:\n  a: [1, 1]\n")).find("level '1' appears twice"), std::string::npos);
  EXPECT_EQ(refusal(spec("base: base.yaml\naxes:\n  a: [1]\n")), "") << "the smallest spec reads";
}

// Every spec in bench/matrices/ reads, and every cell of it is a valid config (run from the
// repository root, where the base configs' dataset paths resolve).
TEST(ShippedMatrices, EveryCellOfEverySpecIsValid) {
  const fs::path root = HS_SOURCE_DIR;
  const fs::path before = fs::current_path();
  fs::current_path(root);
  int specs = 0;
  for (const auto& entry : fs::directory_iterator(root / "bench/matrices")) {
    if (entry.path().extension() != ".yaml") continue;
    ++specs;
    const MatrixSpec s = load_matrix(entry.path().string());
    const auto cells = expand_matrix(s);
    EXPECT_FALSE(cells.empty()) << entry.path();
    int baselines = 0;
    for (const auto& cell : cells) {
      EXPECT_TRUE(cell.valid()) << entry.path() << " cell " << cell.name << ": " << cell.invalid_reason;
      baselines += cell.baseline ? 1 : 0;
    }
    EXPECT_EQ(baselines, 1) << entry.path() << ": one baseline cell";
  }
  fs::current_path(before);
  EXPECT_GE(specs, 1);

  // The GPU spec of issue 5: Qwen2.5 0.5B to 7B on CUDA in bf16, 7B sharded over 8 ranks.
  const auto gpu = expand_matrix(load_matrix((root / "bench/matrices/gpu-shapes.yaml").string()));
  std::vector<std::string> shapes;
  for (const auto& cell : gpu) {
    if (shapes.empty() || shapes.back() != cell.levels[0]) shapes.push_back(cell.levels[0]);
    EXPECT_NE(std::find(cell.overrides.begin(), cell.overrides.end(), "trainer.device=cuda"), cell.overrides.end());
    EXPECT_EQ(cell.ranks, cell.levels[0] == "qwen2.5-7b" ? 8 : 1) << cell.name;
  }
  EXPECT_EQ(shapes, (std::vector<std::string>{"qwen2.5-0.5b", "qwen2.5-1.5b", "qwen2.5-3b", "qwen2.5-7b"}));
}
