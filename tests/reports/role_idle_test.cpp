// role_idle_test.cpp — idle ratios per role (role_idle.h) against numbers worked out by hand: a
// hand-built run with gaps, nested ranges and a split reference, and the two-rank run of
// analysis_fixture.h written by the real recorder.
#include <gtest/gtest.h>

#include <algorithm>

#include "analysis_fixture.h"
#include "hybridscope/reports/role_idle.h"
#include "hybridscope/reports/run_analysis.h"
#include "recorded_run.h"

using namespace hs::reports;

namespace {

RangeRow range(int rank, std::int64_t step, const std::string& name, std::int64_t start, std::int64_t end) {
  RangeRow r;
  r.rank = rank;
  r.step = step;
  r.name = name;
  r.category = name == "step" ? "step" : "phase";
  r.start_ns = start;
  r.end_ns = end;
  return r;
}

const RoleIdle& role(const RoleIdleAnalysis& a, const std::string& name) {
  for (const auto& r : a.roles)
    if (r.role == name) return r;
  throw std::runtime_error("no role " + name);
}

// Ranks 0 and 1 generate and train (colocated); rank 2 runs only `ref` (a split reference).
// Steps 2 and 3 are [0, 1000) and [1000, 2000) ns on every rank.
//   step 2, rank 0: gen [100, 300) and [500, 600) — two pauses — with gen_max [150, 250) inside the
//                   first (counted once): rollout busy 300, idle 0.7; old_log_prob [650, 720) and
//                   update_actor [700, 900) overlap: train busy |[650, 900)| = 250, idle 0.75.
//           rank 1: gen [100, 500): idle 0.6; update_actor [600, 1000): idle 0.6.
//           rank 2: ref [300, 400): reference idle 0.9.
//   step 3, rank 0: gen [1000, 1500): idle 0.5; no training phase at all: train idle 1.0.
//           rank 1: gen [1000, 1200): idle 0.8; update_actor [1200, 1800): idle 0.4.
//           rank 2: nothing: reference idle 1.0.
// verl's rollouter/idle_ratio would see one pause window of rank 0's step 2 (the last one,
// fully_async_rollouter.py reset_staleness); the union counts both gaps.
RunData hand_built() {
  RunData d;
  d.run.world_size = 3;
  d.ranges = {range(0, 2, "step", 0, 1000),         range(0, 2, "gen", 100, 300),
              range(0, 2, "gen_max", 150, 250),     range(0, 2, "gen", 500, 600),
              range(0, 2, "old_log_prob", 650, 720), range(0, 2, "update_actor", 700, 900),
              range(1, 2, "step", 0, 1000),         range(1, 2, "gen", 100, 500),
              range(1, 2, "update_actor", 600, 1000), range(2, 2, "step", 0, 1000),
              range(2, 2, "ref", 300, 400),          range(0, 3, "step", 1000, 2000),
              range(0, 3, "gen", 1000, 1500),       range(1, 3, "step", 1000, 2000),
              range(1, 3, "gen", 1000, 1200),       range(1, 3, "update_actor", 1200, 1800),
              range(2, 3, "step", 1000, 2000),      range(0, 2, "switch/train_to_rollout", 0, 100)};
  sort_by_start(d);
  return d;
}

}  // namespace

TEST(RoleIdle, UnionOfEachRolesRangesPerRankAndStepWithASplitReference) {
  const auto a = role_idle_analysis(hand_built(), {2, 3});
  ASSERT_EQ(a.roles.size(), 3u);
  EXPECT_TRUE(a.colocated);
  const auto& rollout = role(a, "rollout");
  const auto& train = role(a, "train");
  const auto& ref = role(a, "reference");
  EXPECT_EQ(rollout.ranks, (std::vector<int>{0, 1}));
  EXPECT_EQ(train.ranks, (std::vector<int>{0, 1}));
  EXPECT_EQ(ref.ranks, (std::vector<int>{2}));  // a ref-only rank is not a train rank
  EXPECT_EQ(rollout.verl_name, "rollouter/idle_ratio");
  EXPECT_EQ(train.verl_name, "trainer/idle_ratio");
  ASSERT_EQ(a.steps.size(), 2u);
  EXPECT_DOUBLE_EQ(a.steps[0].idle_ratio.at("rollout"), (0.7 + 0.6) / 2);
  EXPECT_DOUBLE_EQ(a.steps[0].idle_ratio.at("train"), (0.75 + 0.6) / 2);
  EXPECT_DOUBLE_EQ(a.steps[0].idle_ratio.at("reference"), 0.9);
  EXPECT_DOUBLE_EQ(a.steps[1].idle_ratio.at("rollout"), (0.5 + 0.8) / 2);
  EXPECT_DOUBLE_EQ(a.steps[1].idle_ratio.at("train"), (1.0 + 0.4) / 2);
  EXPECT_DOUBLE_EQ(a.steps[1].idle_ratio.at("reference"), 1.0);
  EXPECT_DOUBLE_EQ(rollout.idle_ratio, 0.65);
  EXPECT_DOUBLE_EQ(train.idle_ratio, (0.675 + 0.7) / 2);
  EXPECT_DOUBLE_EQ(ref.idle_ratio, 0.95);
  EXPECT_EQ(train.idlest_rank, 0);
  EXPECT_DOUBLE_EQ(train.idlest_ratio, (0.75 + 1.0) / 2);
  EXPECT_DOUBLE_EQ(train.busy_s, (250.0 + 400.0 + 0.0 + 600.0) / 4 / 1e9);
  EXPECT_DOUBLE_EQ(train.window_s, 1000.0 / 1e9);
  EXPECT_EQ(a.verdict, "rollout-bound");  // the trainer idles more than the rollouter
}

TEST(RoleIdle, OnlyTheMeasuredStepsAndNoVerdictWithoutBothRoles) {
  // Step 3 alone: rank 0 ran no training phase in the measured steps, so it holds no train role
  // there (roles come from what the measured steps ran), and rank 2 ran nothing: no reference.
  const auto only3 = role_idle_analysis(hand_built(), {3});
  EXPECT_DOUBLE_EQ(role(only3, "rollout").idle_ratio, 0.65);
  EXPECT_EQ(role(only3, "train").ranks, (std::vector<int>{1}));
  EXPECT_DOUBLE_EQ(role(only3, "train").idle_ratio, 0.4);
  EXPECT_EQ(only3.roles.size(), 2u);
  EXPECT_EQ(only3.verdict, "train-bound");

  RunData gen_only;
  gen_only.ranges = {range(0, 1, "step", 0, 100), range(0, 1, "gen", 0, 40)};
  const auto a = role_idle_analysis(gen_only, {1});
  ASSERT_EQ(a.roles.size(), 1u);
  EXPECT_DOUBLE_EQ(a.roles[0].idle_ratio, 0.6);
  EXPECT_EQ(a.verdict, "");
  EXPECT_NE(a.note.find("only the rollout role"), std::string::npos) << a.note;

  RunData none;
  none.ranges = {range(0, 1, "step", 0, 100), range(0, 1, "forward", 0, 40)};
  const auto n = role_idle_analysis(none, {1});
  EXPECT_TRUE(n.roles.empty());
  EXPECT_NE(n.note.find("phase map"), std::string::npos) << n.note;
}

TEST(RoleIdle, WithoutStepRangesTheWindowIsTheRanksSpanInTheStep) {
  RunData d;
  d.ranges = {range(0, 5, "gen", 0, 300), range(0, 5, "update_actor", 400, 1000)};
  const auto a = role_idle_analysis(d, {5});
  EXPECT_DOUBLE_EQ(role(a, "rollout").idle_ratio, 0.7);
  EXPECT_DOUBLE_EQ(role(a, "train").idle_ratio, 0.4);
  EXPECT_EQ(a.verdict, "train-bound");  // the rollout role waits more
}

// The two-rank run recorded through the recorder (analysis_fixture.h): per step, rank 0's step is
// 185 ms with gen 100 ms and update_actor 50 ms; rank 1's is 185 + 10·step ms with gen 100 ms and
// update_actor 50 + 10·step ms. The switches are neither role's work.
TEST(RoleIdle, ARecordedRunsRolesByHand) {
  const auto path = (hs::reports::testing::temp_dir("role_idle_recorded") / "run.sqlite").string();
  const auto id = hs::reports::testing::write_two_rank_run(path);
  const auto analysis = analyze_run(load_run(RunDatabase(path), id));
  const auto& a = analysis.roles;
  double rollout = 0.0, train = 0.0;
  for (const double step : {2.0, 3.0, 4.0}) {
    const double w1 = 185.0 + 10.0 * step;
    rollout += ((1.0 - 100.0 / 185.0) + (1.0 - 100.0 / w1)) / 2.0;
    train += ((1.0 - 50.0 / 185.0) + (1.0 - (50.0 + 10.0 * step) / w1)) / 2.0;
  }
  EXPECT_NEAR(role(a, "rollout").idle_ratio, rollout / 3.0, 1e-12);
  EXPECT_NEAR(role(a, "train").idle_ratio, train / 3.0, 1e-12);
  EXPECT_TRUE(a.colocated);
  EXPECT_EQ(a.verdict, "rollout-bound");
  ASSERT_EQ(a.steps.size(), 3u);
  EXPECT_EQ(a.steps.front().step, 2);
}

// A hybridscope run with a split rollout pool (hybridscope.placement.rollout=[1], one_step_off):
// rank 0 trains and times its wait for the pool's batch as `gen` (trainer.cpp); rank 1 generates.
// Step 2 is [0, 1000) ns on both ranks:
//   rank 0: gen (the wait) [0, 100), sync_rollout_weights [100, 150), old_log_prob [150, 350),
//           update_actor [350, 1000): train busy 850, idle 0.15 — the wait is not rollout work;
//   rank 1: rollout_handoff [0, 100), sync_rollout_weights [100, 150), gen [150, 550): rollout
//           busy 400, idle 0.6.
// So the rollout role is rank 1 alone, the pools are separate and the run is train-bound. Without
// the placement, rank 0's wait would count as generation and make it a colocated rank of both roles.
TEST(RoleIdle, ASplitPoolsActorWaitIsNotRolloutWork) {
  RunData d;
  d.run.world_size = 2;
  d.config = {{"hybridscope.async_mode", "one_step_off"}, {"hybridscope.placement.rollout", "[1]"}};
  d.ranges = {range(0, 2, "step", 0, 1000),          range(0, 2, "gen", 0, 100),
              range(0, 2, "sync_rollout_weights", 100, 150), range(0, 2, "old_log_prob", 150, 350),
              range(0, 2, "update_actor", 350, 1000), range(1, 2, "step", 0, 1000),
              range(1, 2, "rollout_handoff", 0, 100), range(1, 2, "sync_rollout_weights", 100, 150),
              range(1, 2, "gen", 150, 550)};
  sort_by_start(d);
  EXPECT_EQ(split_rollout_ranks(d), std::vector<int>{1});
  const auto a = role_idle_analysis(d, {2});
  EXPECT_FALSE(a.colocated);
  EXPECT_EQ(role(a, "rollout").ranks, std::vector<int>{1});
  EXPECT_EQ(role(a, "train").ranks, std::vector<int>{0});
  EXPECT_DOUBLE_EQ(role(a, "train").idle_ratio, 0.15);
  EXPECT_DOUBLE_EQ(role(a, "rollout").idle_ratio, 0.6);
  EXPECT_EQ(a.verdict, "train-bound");

  // The same ranges without the placement key: rank 0 holds both roles.
  RunData plain = d;
  plain.config.clear();
  EXPECT_TRUE(split_rollout_ranks(plain).empty());
  EXPECT_TRUE(role_idle_analysis(plain, {2}).colocated);
  // The pool records no step range of its own (rollout_server.cpp): the actor's step [0, 1000) is
  // its window, not the span of its ranges [0, 550) (which would read idle 1 − 400/550).
  RunData no_pool_step = d;
  no_pool_step.ranges.erase(std::remove_if(no_pool_step.ranges.begin(), no_pool_step.ranges.end(),
                                           [](const RangeRow& r) { return r.rank == 1 && r.name == "step"; }),
                            no_pool_step.ranges.end());
  EXPECT_DOUBLE_EQ(role(role_idle_analysis(no_pool_step, {2}), "rollout").idle_ratio, 0.6);
  // An imported trace has no hybridscope placement, whatever its config table says.
  RunData imported = d;
  imported.run.source = "kineto";
  EXPECT_TRUE(split_rollout_ranks(imported).empty());
}
