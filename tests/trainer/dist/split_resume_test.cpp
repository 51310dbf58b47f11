// split_resume_test.cpp — resuming a split rollout pool run (hybridscope.placement.rollout) from its
// checkpoint, with real ranks over Gloo (`hybridscope launch`): a sync or one_step_off run stopped
// after the checkpoint of step 2 and resumed ends as the uninterrupted run, metric for metric and
// weight for weight (one_step_off carries the weights the batch generated ahead was generated
// with); a fully_async run resumes at the next step, its rollouter generating with the resumed
// weights within the staleness bound; a changed placement is refused, naming both and the fix.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "../../process.h"
#include "../../test_db.h"
#include "../../tiny_grpo.h"
#include "split_pool_run.h"
#include "hybridscope/trainer/model/model.h"

namespace {

namespace fs = std::filesystem;

using hs::test::launch_split_pool;
using hs::test::SplitPoolLaunch;
using hs::test::step_metrics_of;

// The untrained tiny policy scores 0 everywhere (GRPO advantages 0): an entropy bonus and a large
// learning rate make every update move the weights, so that a resume that lost or changed anything
// shows in the metrics and the weights.
const std::vector<std::string> kMoving = {"actor_rollout_ref.actor.entropy_coeff=0.1",
                                          "actor_rollout_ref.actor.optim.lr=1e-2"};

// What depends on the clock or the machine, not on the samples and the weights.
bool timed(const std::string& name) {
  return name.rfind("timing_s/", 0) == 0 || name.rfind("timing_per_token_ms/", 0) == 0 ||
         (name.rfind("perf/", 0) == 0 && name != "perf/total_num_tokens");
}

std::vector<std::string> with(std::vector<std::string> args, const std::vector<std::string>& more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

// Launches and asserts that the run completed; returns its database.
std::string completed(const SplitPoolLaunch& run) {
  EXPECT_TRUE(hs::test::exited_ok(run.status)) << run.output;
  EXPECT_EQ(hs::test::query_row(run.db, "SELECT status FROM runs"), "completed") << run.output;
  return run.db;
}

// The actor's weights of checkpoint `step_dir` (global_step_<N>), by name.
std::map<std::string, torch::Tensor> actor_weights(const std::string& step_dir) {
  std::map<std::string, torch::Tensor> out;
  for (auto& [name, t] : hs::trainer::load_safetensors(step_dir + "/actor/model.safetensors")) out.emplace(name, t);
  return out;
}

nlohmann::json trainer_state(const std::string& step_dir) {
  std::ifstream in(step_dir + "/trainer_state.json");
  return nlohmann::json::parse(in);
}

// A run of 4 steps saving every 2 (`full`), and the same run stopped after step 2 (`part`, its
// checkpoint global_step_2) then resumed to step 4 in the same directory (`resumed`): the resumed
// run runs steps 3 and 4 only, each equal to the uninterrupted run's in every metric the samples
// and the weights decide, and its final checkpoint holds the same weights, bit for bit. `part_dir`:
// the directory of `part` and `resumed`.
void expect_resume_matches_the_uninterrupted_run(const std::string& suite, int ranks, const std::string& mode,
                                                 const std::vector<std::string>& extra, std::string& part_dir) {
  const auto saving = with(extra, {"trainer.save_freq=2"});
  const std::string full_dir = hs::test::fresh_dir(suite, mode + "_full");
  part_dir = hs::test::fresh_dir(suite, mode + "_part");
  const std::string full = completed(launch_split_pool(full_dir, "run.sqlite", ranks, mode, 4, saving));
  completed(launch_split_pool(part_dir, "first.sqlite", ranks, mode, 2, saving));
  const SplitPoolLaunch resumed_run =
      launch_split_pool(part_dir, "resumed.sqlite", ranks, mode, 4, with(saving, {"trainer.resume_mode=auto"}));
  const std::string resumed = completed(resumed_run);
  if (::testing::Test::HasFailure()) return;
  EXPECT_NE(resumed_run.output.find("(step 2)"), std::string::npos) << resumed_run.output;
  // The resumed run started at step 3.
  EXPECT_EQ(hs::test::query_row(resumed, "SELECT MIN(step) || '-' || MAX(step) FROM step_metrics"), "3-4");

  for (int step = 3; step <= 4; ++step) {
    const auto expected = step_metrics_of(full, step), got = step_metrics_of(resumed, step);
    int compared = 0;
    for (const auto& [name, value] : expected) {
      if (timed(name)) continue;
      ASSERT_TRUE(got.count(name)) << name << " is missing from the resumed run's step " << step;
      EXPECT_EQ(got.at(name), value) << mode << " step " << step << " " << name;
      ++compared;
    }
    EXPECT_GE(compared, 20) << "step " << step;
    EXPECT_EQ(got.at("async/param_version"), step - 1) << "step " << step;
  }
  // The same final weights, and weights that moved after the resume (the comparison means something).
  const auto full_final = actor_weights(full_dir + "/ckpt/global_step_4");
  const auto resumed_final = actor_weights(part_dir + "/ckpt/global_step_4");
  const auto at_resume = actor_weights(part_dir + "/ckpt/global_step_2");
  ASSERT_EQ(full_final.size(), resumed_final.size());
  bool moved = false;
  for (const auto& [name, t] : full_final) {
    ASSERT_TRUE(resumed_final.count(name)) << name;
    EXPECT_TRUE(torch::equal(resumed_final.at(name), t)) << mode << " " << name;
    moved = moved || !torch::equal(at_resume.at(name), t);
  }
  EXPECT_TRUE(moved) << "steps 3 and 4 changed no weight";
  // The checkpoint records the placement and the parameter version it was saved with.
  const auto state = trainer_state(part_dir + "/ckpt/global_step_2");
  EXPECT_EQ(state.at("param_version"), 2);
  EXPECT_EQ(state.at("rollout_placement"), "rollout ranks [" + std::string(ranks == 2 ? "1" : "1,2") +
                                               "], async_mode " + mode);
}

// sync: the pool generates step k's batch with the weights of update k-1, synced before it; the
// resumed pool takes the checkpoint's weights (version 2) in the base broadcast, then the step-3 sync.
TEST(SplitResume, ASyncSplitRunResumesToTheUninterruptedRunsMetricsAndWeights) {
  std::string part;
  expect_resume_matches_the_uninterrupted_run("split_resume_test", 3, "sync", kMoving, part);
}

// one_step_off: batch 3 was generated during step 2 with the weights of update 1, and is not in the
// checkpoint; the checkpoint carries those weights (rollout/, version 1) and the resumed pool
// generates batch 3 with them again, so step 3 trains one update old samples as the uninterrupted
// run did (staleness 1), then goes on in step.
TEST(SplitResume, AOneStepOffRunResumesWithTheWeightsOfTheBatchGeneratedAhead) {
  std::string part;
  expect_resume_matches_the_uninterrupted_run("split_resume_test", 2, "one_step_off", kMoving, part);
  if (HasFailure()) return;
  const auto state = trainer_state(part + "/ckpt/global_step_2");
  EXPECT_EQ(state.at("rollout_version"), 1);
  EXPECT_TRUE(fs::exists(part + "/ckpt/global_step_2/rollout/model.safetensors"));
  EXPECT_EQ(step_metrics_of(part + "/resumed.sqlite", 3).at("async/staleness/max"), 1);
  // The resume's extra sync (the rollout weights, at the checkpoint's step) and step 3's (the
  // resumed actor's): every parameter byte from rank 0 to rank 1 each time.
  const std::int64_t bytes = hs::test::tiny_parameter_bytes();
  EXPECT_EQ(hs::test::query_rows(part + "/resumed.sqlite",
                                 "SELECT s.step, s.rank, s.bytes_sent, s.bytes_received FROM switches s JOIN strings d "
                                 "ON d.id = s.direction_id WHERE d.value = 'sync_rollout_weights' ORDER BY s.step, s.rank"),
            (std::vector<std::string>{fmt::format("2|0|{}|0", bytes), fmt::format("2|1|0|{}", bytes),
                                      fmt::format("3|0|{}|0", bytes), fmt::format("3|1|0|{}", bytes)}));
}

// fully_async: R = 4 groups per step, a sync every step, staleness_threshold 0.6 (M = 6 groups per
// version, staleness at most 1). Stopped after step 3's checkpoint and resumed, the rollouter
// starts again at group 12 (the first the actor had not taken) with the resumed weights: step 4
// trains version-3 samples with version-3 weights (staleness 0), every later step stays within
// the bound, and the run finishes its 6 steps.
TEST(SplitResume, AFullyAsyncRunResumesAtTheNextStepWithTheResumedWeights) {
  const std::vector<std::string> async = {
      "actor_rollout_ref.hybrid_engine=false", "async_training.require_batches=1",
      "async_training.staleness_threshold=0.6", "async_training.trigger_parameter_sync_step=1",
      "trainer.save_freq=3"};
  const std::string dir = hs::test::fresh_dir("split_resume_test", "fully_async");
  completed(launch_split_pool(dir, "first.sqlite", 2, "fully_async", 3, with(async, kMoving)));
  const SplitPoolLaunch run =
      launch_split_pool(dir, "resumed.sqlite", 2, "fully_async", 6, with(with(async, kMoving), {"trainer.resume_mode=auto"}));
  const std::string db = completed(run);
  if (HasFailure()) return;
  EXPECT_NE(run.output.find("(step 3)"), std::string::npos) << run.output;
  EXPECT_EQ(hs::test::query_row(db, "SELECT MIN(step) || '-' || MAX(step) FROM step_metrics"), "4-6");
  const auto step4 = step_metrics_of(db, 4);
  EXPECT_EQ(step4.at("async/param_version"), 3);
  EXPECT_EQ(step4.at("async/staleness/max"), 0) << "the pool's first groups after the resume use the resumed weights";
  for (int step = 5; step <= 6; ++step) {
    const auto m = step_metrics_of(db, step);
    EXPECT_EQ(m.at("async/param_version"), step - 1);
    EXPECT_LE(m.at("async/staleness/max"), 1) << "step " << step;
    EXPECT_LE(m.at("fully_async/monitor/queue/mq_queue_size"), 6) << "step " << step;
  }
  // The groups of steps 4..6 are the loader's batches 4..6, as the uninterrupted run's: the rollout
  // rank generated 12 groups after the resume (its gen ranges cover them) and the actor trained 3 steps.
  EXPECT_EQ(hs::test::query_row(db, "SELECT COUNT(*) FROM switches s JOIN strings d ON d.id = s.direction_id WHERE "
                                    "d.value = 'sync_rollout_weights' AND s.rank = 0"),
            "3");  // steps 4, 5 and 6 (T = 1), none before: the resumed weights came in the base broadcast
  EXPECT_EQ(trainer_state(dir + "/ckpt/global_step_6").at("param_version"), 6);
}

// A checkpoint of a synchronous split run resumed as one_step_off (its batch generated ahead and
// the weights that made it are not in the checkpoint) is refused before any step: the actor names
// both placements and the fix, the rollout rank stops with it.
TEST(SplitResume, AChangedPlacementIsRefusedNamingBothAndTheFix) {
  const std::string dir = hs::test::fresh_dir("split_resume_test", "changed");
  completed(launch_split_pool(dir, "first.sqlite", 2, "sync", 1, {"trainer.save_freq=1"}));
  const SplitPoolLaunch run =
      launch_split_pool(dir, "resumed.sqlite", 2, "one_step_off", 2, {"trainer.save_freq=1", "trainer.resume_mode=auto"});
  EXPECT_FALSE(hs::test::exited_ok(run.status));
  std::string logs = run.output;
  for (const auto& entry : fs::directory_iterator(dir + "/logs")) logs += hs::test::read_all(entry.path().string());
  for (const char* part : {"was saved by a run with rollout ranks [1], async_mode sync",
                           "this run has rollout ranks [1], async_mode one_step_off",
                           "actor_rollout_ref.model.path=", "the actor's ranks refused to start this run"})
    EXPECT_NE(logs.find(part), std::string::npos) << part << "\n" << logs;
}

}  // namespace
