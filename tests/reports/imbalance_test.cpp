// imbalance_test.cpp — phase spreads, the straggler rank, HTA's late-collective rank and verl's
// token balance, on a hand-built phase breakdown (a plain struct) and run data. Expected values
// worked by hand below; the standard deviations with numpy (np.std(v, ddof=1)).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "hybridscope/reports/imbalance.h"

using namespace hs::reports;

namespace {

RankStep rank_step(int rank, std::int64_t step, double gen, double update_actor, double other) {
  RankStep r;
  r.rank = rank;
  r.step = step;
  r.phase_s = {{"gen", gen}, {"update_actor", update_actor}};
  r.step_s = gen + update_actor + other;
  return r;
}

// Four ranks, steps 0..4, steps 0 and 1 warm-up. Every rank runs gen 3.0 s (rank 0: 3.1 s) and
// update_actor 4.0 s, except rank 2 whose update_actor takes 5.2 s (30 % slower); 0.5 s of other.
// Step times: rank 0 7.6, rank 1 7.5, rank 2 8.7, rank 3 7.5 — except step 3, where rank 0 has a
// 1.9 s hiccup outside the phases (9.0 s) and is the slowest, and warm-up steps 0 and 1, where
// rank 0 takes 20 s (left out).
PhaseBreakdown four_rank_breakdown() {
  PhaseBreakdown b;
  b.source = "ranges";
  b.phases = {"gen", "update_actor"};
  b.measured = {2, 3, 4};
  for (std::int64_t s = 0; s <= 4; ++s) {
    b.per_rank.push_back(rank_step(0, s, 3.1, 4.0, s <= 1 ? 12.9 : (s == 3 ? 1.9 : 0.5)));
    b.per_rank.push_back(rank_step(1, s, 3.0, 4.0, 0.5));
    b.per_rank.push_back(rank_step(2, s, 3.0, 5.2, 0.5));
    b.per_rank.push_back(rank_step(3, s, 3.0, 4.0, 0.5));
  }
  b.rank_mean_phase_s = {
      {0, {{"gen", 3.1}, {"update_actor", 4.0}}},
      {1, {{"gen", 3.0}, {"update_actor", 4.0}}},
      {2, {{"gen", 3.0}, {"update_actor", 5.2}}},
      {3, {{"gen", 3.0}, {"update_actor", 4.0}}},
  };
  // Means over steps 2..4: rank 0 (7.6 + 9.0 + 7.6)/3 = 8.0666…, the others constant.
  b.rank_mean_step_s = {{0, (7.6 + 9.0 + 7.6) / 3.0}, {1, 7.5}, {2, 8.7}, {3, 7.5}};
  return b;
}

CommOpRow comm(int rank, std::int64_t step, double start_ms) {
  CommOpRow c;
  c.rank = rank;
  c.step = step;
  c.op = "all_reduce";
  c.start_ns = static_cast<std::int64_t>(start_ms * 1e6);
  c.end_ns = c.start_ns + 1'000'000;
  return c;
}

StepMetric metric(std::int64_t step, const std::string& name, double value) { return {step, name, value}; }

}  // namespace

TEST(ImbalanceTest, FindsTheStragglerAndItsExcess) {
  RunData data;
  data.run.world_size = 4;
  const StragglerAnalysis a = straggler_analysis(data, four_rank_breakdown());
  EXPECT_EQ(a.world_size, 4);

  // Slowest per measured step: step 2 rank 2 (8.7), step 3 rank 0 (9.0), step 4 rank 2 -> rank 2,
  // twice. (Counting warm-up steps 0 and 1 would make rank 0 the slowest three times.)
  ASSERT_TRUE(a.straggler_rank.has_value());
  EXPECT_EQ(*a.straggler_rank, 2);
  EXPECT_EQ(a.straggler_steps, 2);
  // Median of the ranks' mean steps [7.5, 7.5, 8.0667, 8.7] = (7.5 + 8.0667)/2 = 7.78333;
  // excess = 8.7 − 7.78333 = 0.91667 s, share 0.91667 / 7.78333 = 0.117773.
  EXPECT_NEAR(a.straggler_excess_s, 0.9166666666666661, 1e-12);
  EXPECT_NEAR(a.straggler_excess_share, 0.11777301927194854, 1e-12);

  ASSERT_EQ(a.phases.size(), 3u);  // gen, update_actor, step
  const PhaseSpread& gen = a.phases[0];
  EXPECT_EQ(gen.phase, "gen");
  // [3.1, 3.0, 3.0, 3.0]: min 3.0 (rank 1, the lowest of the tied), max 3.1 (rank 0), median 3.0,
  // spread 0.1 / 3.0.
  EXPECT_DOUBLE_EQ(gen.min_s, 3.0);
  EXPECT_DOUBLE_EQ(gen.max_s, 3.1);
  EXPECT_DOUBLE_EQ(gen.median_s, 3.0);
  EXPECT_EQ(gen.slowest_rank, 0);
  EXPECT_EQ(gen.fastest_rank, 1);
  EXPECT_NEAR(gen.spread, 0.1 / 3.0, 1e-12);
  const PhaseSpread& actor = a.phases[1];
  EXPECT_EQ(actor.phase, "update_actor");
  // [4.0, 4.0, 5.2, 4.0]: rank 2 slowest, spread (5.2 − 4.0) / 4.0 = 0.3 — the 30 % put in.
  EXPECT_EQ(actor.slowest_rank, 2);
  EXPECT_EQ(actor.fastest_rank, 0);
  EXPECT_DOUBLE_EQ(actor.median_s, 4.0);
  EXPECT_NEAR(actor.spread, 0.3, 1e-12);
  const PhaseSpread& step = a.phases[2];
  EXPECT_EQ(step.phase, "step");
  EXPECT_EQ(step.slowest_rank, 2);
  EXPECT_EQ(step.fastest_rank, 1);
  EXPECT_NEAR(step.median_s, 7.783333333333333, 1e-12);
  EXPECT_NEAR(step.spread, 0.15417558886509627, 1e-12);  // (8.7 − 7.5) / 7.78333

  EXPECT_FALSE(a.late_collective_rank.has_value());  // no collectives recorded
  EXPECT_TRUE(a.global_seqlen.empty());
  EXPECT_FALSE(a.token_imbalance.has_value());
}

TEST(ImbalanceTest, WorldSizeOneHasNoStraggler) {
  PhaseBreakdown b;
  b.phases = {"gen"};
  b.measured = {1, 2};
  for (std::int64_t s = 1; s <= 2; ++s) b.per_rank.push_back(rank_step(0, s, 3.0, 4.0, 0.5));
  b.rank_mean_phase_s = {{0, {{"gen", 3.0}, {"update_actor", 4.0}}}};
  b.rank_mean_step_s = {{0, 7.5}};
  RunData data;
  data.comm_ops = {comm(0, 1, 10.0), comm(0, 2, 20.0)};
  const StragglerAnalysis a = straggler_analysis(data, b);
  EXPECT_EQ(a.world_size, 1);
  EXPECT_FALSE(a.straggler_rank.has_value());
  EXPECT_DOUBLE_EQ(a.straggler_excess_s, 0.0);
  EXPECT_FALSE(a.late_collective_rank.has_value());
  EXPECT_DOUBLE_EQ(a.late_collective_stddev_ms, 0.0);
  // One rank: every phase has zero spread; update_actor, named only by the per-rank means, follows gen.
  ASSERT_EQ(a.phases.size(), 3u);
  EXPECT_EQ(a.phases[1].phase, "update_actor");
  for (const PhaseSpread& p : a.phases) EXPECT_DOUBLE_EQ(p.spread, 0.0) << p.phase;
}

TEST(ImbalanceTest, LateCollectiveRank) {
  RunData data;
  data.run.world_size = 4;
  // Start of each rank's last collective (ms), per measured step:
  //   step 2: [100, 110, 190, 104] -> rank 2 latest, sample std 42.86412641514269
  //   step 3: [300, 296, 380, 310] -> rank 2,        sample std 39.44194045260282
  //   step 4: [520, 500, 505, 510] -> rank 0,        sample std 8.539125638299666
  // Rank 2 is latest most often; the mean std is 30.281730835348394 ms. Each rank also has an
  // earlier collective per step, and warm-up step 1 (rank 3 latest, by far) is left out.
  const double last[3][4] = {{100, 110, 190, 104}, {300, 296, 380, 310}, {520, 500, 505, 510}};
  for (int rank = 0; rank < 4; ++rank) {
    data.comm_ops.push_back(comm(rank, 1, rank == 3 ? 90.0 : 1.0));
    for (std::int64_t s = 2; s <= 4; ++s) {
      data.comm_ops.push_back(comm(rank, s, last[s - 2][rank] - 50.0));
      data.comm_ops.push_back(comm(rank, s, last[s - 2][rank]));
    }
  }
  const StragglerAnalysis a = straggler_analysis(data, four_rank_breakdown());
  ASSERT_TRUE(a.late_collective_rank.has_value());
  EXPECT_EQ(*a.late_collective_rank, 2);
  EXPECT_NEAR(a.late_collective_stddev_ms, 30.281730835348394, 1e-9);
}

TEST(ImbalanceTest, GlobalSeqlenTokenImbalance) {
  // verl's log_seqlen_unbalance metrics for measured steps 2..4 (warm-up step 1 is absurd on purpose).
  RunData data;
  data.metrics = {
      metric(1, "global_seqlen/balanced_max", 1e9), metric(1, "global_seqlen/max", 1e9),
      metric(2, "global_seqlen/balanced_max", 1100), metric(2, "global_seqlen/balanced_min", 900),
      metric(2, "global_seqlen/max", 1500), metric(2, "global_seqlen/mean", 1000),
      metric(2, "global_seqlen/min", 600), metric(2, "global_seqlen/minmax_diff", 900),
      metric(3, "global_seqlen/balanced_max", 1060), metric(3, "global_seqlen/balanced_min", 940),
      metric(3, "global_seqlen/max", 1400), metric(3, "global_seqlen/mean", 1000),
      metric(3, "global_seqlen/min", 650), metric(3, "global_seqlen/minmax_diff", 750),
      metric(4, "global_seqlen/balanced_max", 1080), metric(4, "global_seqlen/balanced_min", 920),
      metric(4, "global_seqlen/max", 1300), metric(4, "global_seqlen/mean", 1000),
      metric(4, "global_seqlen/min", 550), metric(4, "global_seqlen/minmax_diff", 750),
      metric(4, "response_length/mean", 200),
  };
  const StragglerAnalysis a = straggler_analysis(data, four_rank_breakdown());
  EXPECT_EQ(a.global_seqlen.size(), 6u);
  EXPECT_DOUBLE_EQ(a.global_seqlen.at("global_seqlen/max"), 1400.0);  // (1500 + 1400 + 1300) / 3
  EXPECT_DOUBLE_EQ(a.global_seqlen.at("global_seqlen/min"), 600.0);
  EXPECT_DOUBLE_EQ(a.global_seqlen.at("global_seqlen/balanced_max"), 1080.0);
  EXPECT_DOUBLE_EQ(a.global_seqlen.at("global_seqlen/balanced_min"), 920.0);
  EXPECT_NEAR(a.global_seqlen.at("global_seqlen/minmax_diff"), 800.0, 1e-12);
  // The ranks trained on the balanced split: (1080 − 920) / 1000 = 0.16 (not (1400 − 600)/1000 = 0.8).
  ASSERT_TRUE(a.token_imbalance.has_value());
  EXPECT_NEAR(*a.token_imbalance, 0.16, 1e-12);

  // Without the balanced pair and without mean: max/min over the midrange,
  // (1400 − 600) / ((1400 + 600)/2) = 0.8.
  RunData plain;
  for (const StepMetric& m : data.metrics) {
    if (m.name == "global_seqlen/max" || m.name == "global_seqlen/min") plain.metrics.push_back(m);
  }
  const StragglerAnalysis p = straggler_analysis(plain, four_rank_breakdown());
  ASSERT_TRUE(p.token_imbalance.has_value());
  EXPECT_NEAR(*p.token_imbalance, 0.8, 1e-12);
}
