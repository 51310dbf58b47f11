// weight_sync_test.cpp — the weight sync per step (weight_sync.h): an imported-style run whose
// bytes come from the collectives inside its `update_weights` ranges, with a repeated and a nested
// sync, and the recorded two-rank run whose bytes come from its switch rows (analysis_fixture.h).
#include <gtest/gtest.h>

#include <algorithm>

#include "analysis_fixture.h"
#include "hybridscope/reports/diagnosis.h"
#include "hybridscope/reports/report.h"
#include "hybridscope/reports/rl_summary.h"
#include "hybridscope/reports/run_analysis.h"
#include "hybridscope/reports/weight_sync.h"
#include "recorded_run.h"

using namespace hs::reports;

namespace {

RangeRow range(int rank, std::int64_t step, const std::string& name, std::int64_t start, std::int64_t end) {
  RangeRow r;
  r.rank = rank;
  r.step = step;
  r.name = name;
  r.category = name == "step" ? "step" : "switch";
  r.start_ns = start;
  r.end_ns = end;
  return r;
}

CommOpRow comm(int rank, std::int64_t step, std::int64_t start, std::int64_t bytes) {
  CommOpRow c;
  c.rank = rank;
  c.step = step;
  c.op = "broadcast";
  c.group = "default_pg";
  c.group_size = 2;
  c.bytes = bytes;
  c.start_ns = start;
  c.end_ns = start + 10;
  return c;
}

// Step 1 ([0, 10000) on both ranks):
//   rank 0: update_weights [100, 300) holding collectives of 1000 B (at 150) and 500 B (at 250),
//           update_weights [600, 700) with 2000 B (at 650) and a sync_rollout_weights [610, 690)
//           inside it (one sync, not two); a 9999 B collective at 400 is outside every sync.
//           → 2 syncs, 300 ns, 3500 B.
//   rank 1: update_weights [100, 500) with 4000 B (at 200) → 1 sync, 400 ns, 4000 B: the busiest.
// Step 2 ([10000, 20000)): one update_weights [10000, 10100) per rank, 100 B each.
RunData imported_style() {
  RunData d;
  d.run.world_size = 2;
  d.ranges = {range(0, 1, "step", 0, 10000),           range(1, 1, "step", 0, 10000),
              range(0, 1, "update_weights", 100, 300),  range(0, 1, "update_weights", 600, 700),
              range(0, 1, "sync_rollout_weights", 610, 690), range(1, 1, "update_weights", 100, 500),
              range(0, 2, "step", 10000, 20000),        range(1, 2, "step", 10000, 20000),
              range(0, 2, "update_weights", 10000, 10100), range(1, 2, "update_weights", 10000, 10100)};
  d.comm_ops = {comm(0, 1, 150, 1000), comm(0, 1, 250, 500),    comm(0, 1, 650, 2000), comm(0, 1, 400, 9999),
                comm(1, 1, 200, 4000), comm(0, 2, 10050, 100), comm(1, 2, 10050, 100)};
  sort_by_start(d);
  return d;
}

}  // namespace

TEST(WeightSync, BytesFromTheCollectivesInsideTheSyncRangesAndRepeatsCounted) {
  const auto w = weight_sync_analysis(imported_style(), {1, 2}, 20.0, "given: 20 GB/s");
  EXPECT_EQ(w.bytes_source, "collectives inside the sync ranges");
  EXPECT_EQ(w.range_name, "update_weights");
  ASSERT_EQ(w.steps.size(), 2u);
  const auto& s1 = w.steps[0];
  EXPECT_EQ(s1.step, 1);
  EXPECT_EQ(s1.syncs, 2);   // rank 0's two (the nested one is not a third)
  EXPECT_EQ(s1.rank, 1);    // the most bytes
  EXPECT_DOUBLE_EQ(s1.seconds, 400e-9);
  ASSERT_TRUE(s1.bytes);
  EXPECT_EQ(*s1.bytes, 4000);
  EXPECT_DOUBLE_EQ(*s1.gbps, 4000.0 / 400e-9 / 1e9);  // 10 GB/s
  EXPECT_DOUBLE_EQ(*s1.of_link, 0.5);
  EXPECT_DOUBLE_EQ(*s1.wire_bound_s, 4000.0 / 20e9);
  EXPECT_EQ(w.steps[1].syncs, 1);
  EXPECT_EQ(*w.steps[1].bytes, 100);
  EXPECT_EQ(w.max_syncs, 2);
  EXPECT_EQ(w.max_syncs_step, 1);
  EXPECT_EQ(w.steps_with_repeats, 1);
  EXPECT_EQ(w.link_source, "given: 20 GB/s");

  // Rank 0 alone: its own bytes, the outside collective not among them.
  RunData rank0 = imported_style();
  rank0.ranges.erase(std::remove_if(rank0.ranges.begin(), rank0.ranges.end(), [](const RangeRow& r) { return r.rank == 1; }),
                     rank0.ranges.end());
  const auto w0 = weight_sync_analysis(rank0, {1}, std::nullopt, "");
  EXPECT_EQ(*w0.steps[0].bytes, 3500);
  EXPECT_DOUBLE_EQ(w0.steps[0].seconds, 300e-9);
  EXPECT_FALSE(w0.steps[0].of_link);  // no bandwidth to compare with
  EXPECT_FALSE(w0.link_gbps);
}

TEST(WeightSync, NoCollectivesMeansUnknownBytesNotZero) {
  RunData d = imported_style();
  d.comm_ops.clear();
  const auto w = weight_sync_analysis(d, {1, 2}, 20.0, "given");
  EXPECT_EQ(w.bytes_source, "");
  EXPECT_FALSE(w.steps[0].bytes);
  EXPECT_FALSE(w.steps[0].gbps);
  EXPECT_FALSE(w.median_bytes);
  EXPECT_DOUBLE_EQ(w.steps[0].seconds, 400e-9);  // the slowest rank without bytes
  EXPECT_TRUE(weight_sync_analysis(RunData{}, {1}, 20.0, "given").steps.empty());
}

// The recorded run: a 20 ms switch/train_to_rollout per step and rank; rank 1 receives 64 MiB,
// rank 0 16 MiB; the run's own 8 MiB all-reduce in 10 ms gives the link, 0.8388608 GB/s bus
// bandwidth (2 ranks: factor 1).
TEST(WeightSync, ARecordedRunsBytesComeFromItsSwitches) {
  const auto path = (hs::reports::testing::temp_dir("weight_sync_recorded") / "run.sqlite").string();
  const auto id = hs::reports::testing::write_two_rank_run(path);
  const auto a = analyze_run(load_run(RunDatabase(path), id));
  const auto& w = a.weight_sync;
  EXPECT_EQ(w.bytes_source, "switches");
  EXPECT_EQ(w.range_name, "switch/train_to_rollout");
  ASSERT_EQ(w.steps.size(), 3u);
  for (const auto& s : w.steps) {
    EXPECT_EQ(s.syncs, 1);
    EXPECT_EQ(s.rank, 1);
    EXPECT_EQ(*s.bytes, hs::reports::testing::kSwitchBytesRank1);
    EXPECT_NEAR(s.seconds, 0.020, 1e-12);
    EXPECT_NEAR(*s.gbps, 67108864.0 / 0.020 / 1e9, 1e-9);
    EXPECT_NEAR(*s.of_link, 4.0, 1e-9);
    EXPECT_NEAR(*s.wire_bound_s, 0.080, 1e-12);
  }
  EXPECT_NEAR(*w.link_gbps, 0.8388608, 1e-9);
  EXPECT_EQ(w.max_syncs, 1);

  // diagnose's text, the Markdown report and the JSON say the same numbers.
  const auto lines = rl_summary_lines(a);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[1], "weight sync (switch/train_to_rollout): up to 1 per step, median 20 ms per step, 64.0 MiB (busiest "
                      "rank, from switches) at 3.355 GB/s = 400.0 % of the link's 0.8389 GB/s (" +
                          w.link_source + ")");
  EXPECT_EQ(lines[2], "MFU: verl flops_counter 30.0 % (perf/mfu/actor); PaLM/torchtitan not recorded (perf/mfu/actor_palm)");
  EXPECT_NE(format_findings(a, diagnose(a)).find(lines[1]), std::string::npos);
  Report report;
  report.runs.push_back({"", a, diagnose(a)});
  const std::string md = report_markdown(report);
  EXPECT_NE(md.find("### Roles, weight sync and MFU"), std::string::npos);
  EXPECT_NE(md.find("| 3 | 1 | 20 ms | 64.0 MiB | 3.355 | 80 ms | 400.0 % |"), std::string::npos) << md;
  const auto json = rl_summary_json(a);
  EXPECT_EQ(json["weight_sync"]["steps"][0]["bytes"], hs::reports::testing::kSwitchBytesRank1);
  EXPECT_EQ(json["weight_sync"]["max_syncs"], 1);
  EXPECT_TRUE(json["mfu"]["palm_torchtitan"].is_null());
  EXPECT_EQ(json["roles"]["verdict"], "rollout-bound");

  AnalysisOptions given;
  given.link_gbps = 50.0;
  given.link_source = "hardware file h100-sxm-ib: inter_node link";
  const auto b = analyze_run(load_run(RunDatabase(path), id), given);
  EXPECT_NEAR(*b.weight_sync.steps[0].of_link, 3.3554432 / 50.0, 1e-12);
  EXPECT_EQ(b.weight_sync.link_source, given.link_source);
}

// A switch that moves nothing (one rank; layouts that coincide) has no rate: the summary says it
// moved nothing instead of "0 B at 0 GB/s" and asks for no link to compare with.
TEST(WeightSync, ASyncThatMovesNothingShowsNoRate) {
  RunAnalysis a;
  WeightSyncStep s;
  s.step = 2;
  s.syncs = 1;
  s.seconds = 0.018;
  s.bytes = 0;
  s.gbps = 0.0;
  a.weight_sync.steps.push_back(s);
  a.weight_sync.range_name = "switch/train_to_rollout";
  a.weight_sync.bytes_source = "switches";
  a.weight_sync.median_s = 0.018;
  a.weight_sync.median_bytes = 0.0;
  a.weight_sync.median_gbps = 0.0;
  a.weight_sync.max_syncs = 1;
  const auto lines = rl_summary_lines(a);
  ASSERT_GE(lines.size(), 2u);
  EXPECT_EQ(lines[1], "weight sync (switch/train_to_rollout): up to 1 per step, median 18 ms per step, moving nothing "
                      "(0 B on the busiest rank, from switches: the generation layout's weights are the training "
                      "layout's)");
}
