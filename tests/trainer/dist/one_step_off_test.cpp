// one_step_off_test.cpp — a split rollout pool (hybridscope.placement.rollout) with real ranks over
// Gloo (`hybridscope launch`): the synchronous split run and the one-step-off run of the same seed
// agree on the first step exactly and part from the second, where the trained samples are one
// update old; the weight sync moves every parameter byte once per rollout rank, in the switches
// table, the comm_ops rows and the step metrics alike.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "../../process.h"
#include "../../test_db.h"
#include "../../tiny_grpo.h"
#include "split_pool_run.h"
#include "hybridscope/trainer/data/tokenizer.h"
#include "hybridscope/trainer/dist/layout.h"
#include "hybridscope/trainer/model/model.h"

namespace {

namespace fs = std::filesystem;

using hs::test::step_metrics_of;
using hs::test::tiny_parameter_bytes;

// tiny_grpo on `ranks` ranks in `mode`, rank 0 the actor (split_pool_run.h).
std::string run_split(const std::string& tag, int ranks, const std::string& mode, int steps,
                      const std::vector<std::string>& extra = {}) {
  return hs::test::run_split_pool("one_step_off_test", tag, ranks, mode, steps, extra);
}

// What depends on the clock or the machine, not on the samples and the weights.
bool timed(const std::string& name) {
  return name.rfind("timing_s/", 0) == 0 || name.rfind("timing_per_token_ms/", 0) == 0 ||
         (name.rfind("perf/", 0) == 0 && name != "perf/total_num_tokens");
}

TEST(OneStepOff, AgreesWithTheSynchronousSplitRunOnTheFirstStepAndLagsFromTheSecond) {
  // The untrained tiny policy scores 0 everywhere (GRPO advantages 0): an entropy bonus and a large
  // learning rate make every update move the policy, so that one update of lag is visible.
  const std::vector<std::string> moving = {"actor_rollout_ref.actor.entropy_coeff=0.1",
                                           "actor_rollout_ref.actor.optim.lr=1e-2"};
  const std::string sync_db = run_split("sync", 2, "sync", 3, moving);
  const std::string off_db = run_split("off", 2, "one_step_off", 3, moving);
  if (HasFailure()) return;

  // Step 1: the same prompts, the same initial weights, the same seeds — every metric the samples
  // and the weights decide is equal, bit for bit.
  const auto sync1 = step_metrics_of(sync_db, 1), off1 = step_metrics_of(off_db, 1);
  int compared = 0;
  for (const auto& [name, value] : sync1) {
    if (timed(name)) continue;
    ASSERT_TRUE(off1.count(name)) << name << " is missing from the one_step_off run's step 1";
    EXPECT_EQ(off1.at(name), value) << name;
    ++compared;
  }
  EXPECT_GE(compared, 20);
  for (const char* name : {"actor/pg_loss", "actor/grad_norm", "critic/score/mean", "rollout_corr/kl"})
    EXPECT_TRUE(sync1.count(name)) << name;
  EXPECT_EQ(sync1.at("async/staleness/max"), 0);
  EXPECT_EQ(off1.at("async/staleness/max"), 0);

  // From step 2 on: the synchronous run trains on samples of its current weights, the one-step-off
  // run on samples generated before the last update.
  for (int step = 2; step <= 3; ++step) {
    const auto sync = step_metrics_of(sync_db, step), off = step_metrics_of(off_db, step);
    EXPECT_EQ(sync.at("async/staleness/mean"), 0) << "step " << step;
    EXPECT_EQ(off.at("async/staleness/mean"), 1) << "step " << step;
    EXPECT_EQ(off.at("async/staleness/max"), 1) << "step " << step;
    EXPECT_EQ(sync.at("async/param_version"), step - 1);
    EXPECT_EQ(off.at("async/param_version"), step - 1);
    // The rollout's log-probs come from older weights than the actor's old log-probs: the gap the
    // rollout correction sees is the policy change of one update, far above the engines' rounding.
    const double sync_gap = sync.at("training/rollout_probs_diff_max");
    const double off_gap = off.at("training/rollout_probs_diff_max");
    std::printf("step %d: rollout_probs_diff_max sync %.3g, one_step_off %.3g\n", step, sync_gap, off_gap);
    EXPECT_GT(off_gap, 10 * sync_gap) << "step " << step;
  }
  // Weight syncs: sync mode from step 2 on (before generating), one_step_off only at step 2 of 3
  // (step k's weights feed batch k+1; the last step's would feed none).
  const std::string syncs =
      "SELECT GROUP_CONCAT(step) FROM (SELECT DISTINCT s.step FROM switches s JOIN strings d ON d.id = s.direction_id "
      "WHERE d.value = 'sync_rollout_weights' ORDER BY s.step)";
  EXPECT_EQ(hs::test::query_row(sync_db, syncs), "2,3");
  EXPECT_EQ(hs::test::query_row(off_db, syncs), "2");
  // The actor rank never switches into the rollout layout: generation is the pool's (and the one
  // actor rank validates in its training layout).
  EXPECT_EQ(hs::test::query_row(off_db, "SELECT COUNT(*) FROM switches s JOIN strings d ON d.id = s.direction_id "
                                        "WHERE d.value IN ('train_to_rollout', 'rollout_to_train')"),
            "0");
}

TEST(OneStepOff, TheSyncMovesEveryParameterByteOncePerRolloutRank) {
  const std::string db = run_split("bytes", 3, "one_step_off", 4);
  if (HasFailure()) return;
  const std::int64_t bytes = tiny_parameter_bytes();
  // Steps 2 and 3 sync (of 4): rank 0 sends the parameters once per sync, each rollout rank
  // receives all of them; the switch's components are the sender's and the receivers'.
  const auto rows = hs::test::query_rows(
      db, "SELECT s.step, s.rank, s.bytes_sent, s.bytes_received FROM switches s JOIN strings d ON d.id = "
          "s.direction_id WHERE d.value = 'sync_rollout_weights' ORDER BY s.step, s.rank");
  std::vector<std::string> expected;
  for (int step = 2; step <= 3; ++step) {
    expected.push_back(fmt::format("{}|0|{}|0", step, bytes));
    expected.push_back(fmt::format("{}|1|0|{}", step, bytes));
    expected.push_back(fmt::format("{}|2|0|{}", step, bytes));
  }
  EXPECT_EQ(rows, expected);
  EXPECT_EQ(hs::test::query_rows(
                db, "SELECT s.rank, GROUP_CONCAT(n.value) FROM switch_components c JOIN switches s ON s.id = c.switch_id "
                    "JOIN strings d ON d.id = s.direction_id JOIN strings n ON n.id = c.name_id WHERE d.value = "
                    "'sync_rollout_weights' AND s.step = 2 GROUP BY s.rank ORDER BY s.rank"),
            (std::vector<std::string>{"0|sync_pack,sync_broadcast", "1|sync_broadcast,sync_unpack",
                                      "2|sync_broadcast,sync_unpack"}));
  // On the wire: per sync, the version (8 bytes) and one bucket of every parameter byte (the model
  // is far below update_weights_bucket_megabytes), broadcast over the group sync_rollout.
  EXPECT_EQ(hs::test::query_rows(db, "SELECT c.step, c.bytes FROM comm_ops c JOIN strings g ON g.id = c.group_id "
                                     "WHERE g.value = 'sync_rollout' AND c.rank = 0 ORDER BY c.step, c.bytes"),
            (std::vector<std::string>{"2|8", fmt::format("2|{}", bytes), "3|8", fmt::format("3|{}", bytes)}));
  for (int step = 1; step <= 4; ++step) {
    const auto m = step_metrics_of(db, step);
    if (step == 2 || step == 3) {
      EXPECT_EQ(m.at("async/sync_bytes"), static_cast<double>(bytes)) << "step " << step;
      EXPECT_EQ(m.at("async/sync_buckets"), 1) << "step " << step;
      EXPECT_TRUE(m.count("timing_s/sync_rollout_weights")) << "step " << step;
    } else {
      EXPECT_FALSE(m.count("async/sync_bytes")) << "step " << step << " moved no weights";
    }
    // Both rollout ranks generated with the same weights: one staleness for the whole batch.
    EXPECT_EQ(m.at("async/staleness/max"), step == 1 ? 0 : 1) << "step " << step;
    EXPECT_GT(m.at("timing_s/generate_async"), 0) << "step " << step;
  }
  // Each rollout rank generated its half of the 4 prompts x 2 samples per step, in its own gen ranges.
  EXPECT_EQ(hs::test::query_rows(db, "SELECT r.rank, COUNT(*) FROM ranges r JOIN strings n ON n.id = r.name_id "
                                     "WHERE n.value = 'gen' GROUP BY r.rank ORDER BY r.rank"),
            (std::vector<std::string>{"0|4", "1|4", "2|4"}));
}

}  // namespace
