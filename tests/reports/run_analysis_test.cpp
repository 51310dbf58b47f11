// run_analysis_test.cpp — the reader's ordering and the analyses of run_data.h, phase_breakdown.h,
// switch_analysis.h, memory_analysis.h and run_compare.h against numbers computed by hand from the
// two-rank fixture (analysis_fixture.h states them).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "analysis_fixture.h"
#include "hybridscope/reports/memory_analysis.h"
#include "hybridscope/reports/phase_breakdown.h"
#include "hybridscope/reports/run_compare.h"
#include "hybridscope/reports/run_data.h"
#include "hybridscope/reports/switch_analysis.h"
#include "recorded_run.h"

using namespace hs::reports;
using hs::reports::testing::temp_dir;
using hs::reports::testing::write_two_rank_run;

namespace {

RunData fixture_run(const std::string& test, hs::reports::testing::FixtureOptions options = {}) {
  const auto path = (temp_dir(test) / "run.sqlite").string();
  const auto id = write_two_rank_run(path, options);
  return load_run(RunDatabase(path), id);
}

}  // namespace

TEST(RunData, ListsComeBackInStartOrderWhateverTheInsertOrder) {
  const auto data = fixture_run("run_data_order");
  ASSERT_EQ(data.ranges.size(), 2u * 4u * 5u);
  for (std::size_t i = 1; i < data.ranges.size(); ++i)
    EXPECT_LE(data.ranges[i - 1].start_ns, data.ranges[i].start_ns) << "range " << i;
  for (std::size_t i = 1; i < data.switches.size(); ++i)
    EXPECT_LE(data.switches[i - 1].start_ns, data.switches[i].start_ns);
  EXPECT_EQ(data.steps(), (std::vector<std::int64_t>{1, 2, 3, 4}));
  EXPECT_EQ(measured_steps(data, 1), (std::vector<std::int64_t>{2, 3, 4}));
  EXPECT_EQ(measured_steps(data, 9), (std::vector<std::int64_t>{1, 2, 3, 4})) << "too short to drop a warm-up";
  EXPECT_EQ(data.config_value("data.train_batch_size"), "8");
  EXPECT_EQ(data.config_number("actor_rollout_ref.rollout.n"), 4.0);
  EXPECT_FALSE(data.config_value("no.such.key"));
  EXPECT_DOUBLE_EQ(*data.metric(3, "timing_s/step"), 0.215);
}

TEST(PhaseBreakdown, TheStepIsTheSlowestRanksNotRankZeros) {
  const auto b = phase_breakdown(fixture_run("breakdown"), 1);
  EXPECT_EQ(b.source, "ranges");
  EXPECT_EQ(b.phases, (std::vector<std::string>{"switch/train_to_rollout", "gen", "switch/rollout_to_train",
                                                "update_actor"}));
  ASSERT_EQ(b.steps.size(), 4u);
  ASSERT_EQ(b.per_rank.size(), 8u);
  const auto& s2 = b.steps[1];
  EXPECT_EQ(s2.step, 2);
  EXPECT_EQ(s2.slowest_rank, 1);
  EXPECT_NEAR(s2.step_s, 0.205, 1e-12);  // rank 1: 185 + 10·2 ms; rank 0 would say 185
  EXPECT_NEAR(s2.phase_s.at("update_actor"), 0.070, 1e-12);
  EXPECT_NEAR(s2.phase_s.at("gen"), 0.100, 1e-12);
  EXPECT_NEAR(s2.other_s, 0.005, 1e-12);  // the 5 ms of loop overhead
  // Means over steps 2..4: step (205 + 215 + 225)/3 = 215 ms; update_actor (70 + 80 + 90)/3 = 80 ms.
  EXPECT_EQ(b.measured, (std::vector<std::int64_t>{2, 3, 4}));
  EXPECT_NEAR(b.mean_step_s, 0.215, 1e-12);
  EXPECT_NEAR(b.mean_phase_s.at("update_actor"), 0.080, 1e-12);
  EXPECT_NEAR(b.share.at("gen"), 100.0 / 215.0, 1e-12);
  EXPECT_NEAR(b.rank_mean_step_s.at(0), 0.185, 1e-12);
  EXPECT_NEAR(b.rank_mean_step_s.at(1), 0.215, 1e-12);
  EXPECT_NEAR(b.rank_mean_phase_s.at(0).at("update_actor"), 0.050, 1e-12);
}

TEST(PhaseBreakdown, WithoutRangesTheTimingMetricsGiveTheAggregate) {
  RunData data;
  data.metrics = {{1, "timing_s/gen", 0.5}, {1, "timing_s/gen_max", 0.6}, {1, "timing_s/step", 1.0},
                  {1, "timing_s/update_actor", 0.3}, {2, "timing_s/gen", 0.4}, {2, "timing_s/step", 0.8},
                  {2, "timing_s/update_actor", 0.3}};
  const auto b = phase_breakdown(data, 1);
  EXPECT_EQ(b.source, "step_metrics");
  EXPECT_EQ(b.phases, (std::vector<std::string>{"gen", "update_actor"}));  // gen_max is not a phase
  EXPECT_TRUE(b.per_rank.empty());
  ASSERT_EQ(b.steps.size(), 2u);
  EXPECT_NEAR(b.steps[0].other_s, 0.2, 1e-12);  // 1.0 − 0.5 − 0.3
  EXPECT_NEAR(b.mean_step_s, 0.8, 1e-12);       // step 2 only
  EXPECT_NEAR(b.share.at("gen"), 0.5, 1e-12);
}

TEST(SwitchAnalysis, EachDirectionAgainstItsWireBound) {
  const auto data = fixture_run("switch_bound");
  // 4 ranks is more than the run's 2: ignored; of the 2-rank links send_recv is the fastest.
  const std::vector<LinkMeasurement> links = {{"all_gather", 2, 64 << 20, 1.0},
                                              {"send_recv", 2, 64 << 20, 2.0},
                                              {"all_reduce", 4, 64 << 20, 5.0}};
  const auto s = switch_analysis(data, {2, 3, 4}, links);
  ASSERT_TRUE(s.bandwidth_gbps);
  EXPECT_DOUBLE_EQ(*s.bandwidth_gbps, 2.0);
  EXPECT_NE(s.bandwidth_source.find("send_recv on 2 ranks"), std::string::npos) << s.bandwidth_source;
  EXPECT_EQ(s.events.size(), 6u);  // 3 measured steps × 2 directions
  ASSERT_EQ(s.directions.size(), 2u);
  const auto& t2r = s.directions[0];
  EXPECT_EQ(t2r.direction, "train_to_rollout");
  EXPECT_EQ(t2r.switches, 3);
  EXPECT_NEAR(t2r.median_s, 0.020, 1e-12);
  EXPECT_EQ(t2r.median_max_bytes_received, hs::reports::testing::kSwitchBytesRank1);  // the busiest receiver
  ASSERT_TRUE(t2r.wire_bound_s);
  EXPECT_NEAR(*t2r.wire_bound_s, 67108864.0 / 2e9, 1e-12);  // 33.55 ms
  EXPECT_NEAR(*t2r.over_bound, 0.020 / (67108864.0 / 2e9), 1e-9);
  ASSERT_EQ(t2r.components_s.size(), 2u);
  EXPECT_EQ(t2r.components_s[0].first, "reshard_weights");
  EXPECT_NEAR(t2r.components_s[0].second, 0.012, 1e-12);
  EXPECT_NEAR(t2r.unaccounted_s, 0.002, 1e-12);
  const auto& r2t = s.directions[1];
  EXPECT_FALSE(r2t.wire_bound_s) << "nothing received: no bound";
  EXPECT_NE(s.headline.find("train_to_rollout switch: the busiest rank received 64.0 MiB in 20.0 ms (median of 3)"),
            std::string::npos)
      << s.headline;
  EXPECT_NE(s.headline.find("the wire needs 33.6 ms at 2.00 GB/s"), std::string::npos) << s.headline;
}

TEST(SwitchAnalysis, FallsBackToTheRunsOwnCollectives) {
  const auto s = switch_analysis(fixture_run("switch_own"), {2, 3, 4});
  // The fixture's all_reduce: 8 MiB in 10 ms on 2 ranks -> algbw 0.8388608 GB/s × 2(n−1)/n = 1.
  ASSERT_TRUE(s.bandwidth_gbps);
  EXPECT_NEAR(*s.bandwidth_gbps, 0.8388608, 1e-9);
  EXPECT_NE(s.bandwidth_source.find("the run's own collectives: all_reduce"), std::string::npos);
  EXPECT_NEAR(*s.directions[0].wire_bound_s, 0.08, 1e-9);  // 64 MiB / 0.8388608 GB/s
}

TEST(SwitchAnalysis, ReadsTheCommBenchJsonAndRefusesOtherFiles) {
  const auto dir = temp_dir("comm_bench_json");
  const auto good = (dir / "comm.json").string();
  std::ofstream(good) << R"({"context": {}, "benchmarks": [
    {"name": "BM_AllGather/ranks:4/bytes:1024/manual_time", "run_type": "iteration", "bytes": 1024,
     "group_size": 4.0, "busbw_GBps": 0.5},
    {"name": "BM_SendRecv/ranks:2/bytes:1024/manual_time", "run_type": "iteration", "bytes": 2048,
     "group_size": 2.0, "busbw_GBps": 1.5},
    {"name": "BM_SendRecv/ranks:2/bytes:1024/manual_time_mean", "run_type": "aggregate", "bytes": 2048,
     "group_size": 2.0, "busbw_GBps": 9.0}]})";
  const auto links = load_comm_bench(good);
  ASSERT_EQ(links.size(), 2u);  // the aggregate repeats the iterations
  EXPECT_EQ(links[0].op, "all_gather");
  EXPECT_EQ(links[0].ranks, 4);
  EXPECT_EQ(links[1].op, "send_recv");
  EXPECT_EQ(links[1].bytes, 2048);
  EXPECT_DOUBLE_EQ(links[1].busbw_gbps, 1.5);
  const auto bad = (dir / "bad.json").string();
  std::ofstream(bad) << R"({"rows": []})";
  try {
    load_comm_bench(bad);
    ADD_FAILURE() << "accepted a file without benchmarks";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("no \"benchmarks\" array"), std::string::npos) << e.what();
  }
  EXPECT_THROW(load_comm_bench((dir / "missing.json").string()), std::runtime_error);
  // A bench whose small all-reduces and all-gathers went through shared memory (context
  // shm_bytes): those rows are not the wire; send/recv and larger messages are.
  const auto shm = (dir / "shm.json").string();
  std::ofstream(shm) << R"({"context": {"shm_bytes": "1048576"}, "benchmarks": [
    {"name": "BM_AllReduce/ranks:2/bytes:1048576/manual_time", "run_type": "iteration", "bytes": 1048576,
     "group_size": 2.0, "busbw_GBps": 7.4},
    {"name": "BM_AllGatherInSitu/ranks:2/bytes:4096/manual_time", "run_type": "iteration", "bytes": 4096,
     "group_size": 2.0, "busbw_GBps": 0.3},
    {"name": "BM_AllReduce/ranks:2/bytes:4194304/manual_time", "run_type": "iteration", "bytes": 4194304,
     "group_size": 2.0, "busbw_GBps": 1.3},
    {"name": "BM_SendRecv/ranks:2/bytes:4096/manual_time", "run_type": "iteration", "bytes": 4096,
     "group_size": 2.0, "busbw_GBps": 0.2}]})";
  const auto wire = load_comm_bench(shm);
  ASSERT_EQ(wire.size(), 2u);
  EXPECT_EQ(wire[0].op, "all_reduce");
  EXPECT_EQ(wire[0].bytes, 4194304);
  EXPECT_EQ(wire[1].op, "send_recv");
}

TEST(MemoryAnalysis, RatiosCountersAndPeakAgainstParameters) {
  RunData data;
  const auto sample = [](int rank, std::int64_t step, std::int64_t ts, const char* phase, std::int64_t allocated,
                         std::int64_t reserved, std::int64_t retries, std::int64_t ooms) {
    MemorySampleRow m;
    m.rank = rank, m.step = step, m.ts_ns = ts, m.phase = phase, m.device = 0;
    m.allocated_bytes = allocated, m.reserved_bytes = reserved, m.active_bytes = allocated;
    m.num_alloc_retries = retries, m.num_ooms = ooms;
    m.reserved_slack = 1.0 - static_cast<double>(allocated) / static_cast<double>(reserved);
    return m;
  };
  data.memory = {sample(0, 1, 10, "gen", 900, 1000, 3, 0),  // warm-up: left out of peaks, counted in retries
                 sample(0, 2, 20, "gen", 600, 1000, 4, 0),  // 0.6: the worst ratio
                 sample(0, 2, 30, "update_actor", 800, 1000, 5, 0),
                 sample(1, 2, 25, "update_actor", 850, 1000, 0, 0),
                 sample(1, 3, 35, "update_actor", 700, 1000, 0, 1)};
  data.metrics = {{2, "perf/actor_param_bytes", 400.0}};
  data.kv_pool = {{0, 2, 21, "gen", 100, 97, 0, 16, 3, 1000, 4096}, {0, 2, 22, "gen", 100, 40, 0, 16, 1, 400, 4096}};
  const auto m = memory_analysis(data, {2, 3});
  EXPECT_EQ(m.device, "cuda");
  EXPECT_EQ(m.peak_allocated_bytes, 850);
  EXPECT_EQ(m.peak_rank, 1);
  EXPECT_EQ(m.peak_step, 2);
  EXPECT_NEAR(*m.min_allocated_over_reserved, 0.6, 1e-12);
  EXPECT_NEAR(*m.worst_reserved_slack, 0.4, 1e-12);
  EXPECT_EQ(m.alloc_retries, 2);  // rank 0: 3 -> 5
  EXPECT_EQ(m.ooms, 1);           // rank 1: 0 -> 1
  EXPECT_EQ(*m.param_bytes, 400);
  EXPECT_NEAR(*m.peak_over_params, 850.0 / 400.0, 1e-12);
  EXPECT_EQ(m.kv_num_blocks, 100);
  EXPECT_EQ(m.kv_peak_blocks_used, 97);
  EXPECT_NEAR(*m.kv_peak_occupancy, 0.97, 1e-12);
  // Rank 0's phases in verl's order, gen before update_actor.
  ASSERT_GE(m.phases.size(), 2u);
  EXPECT_EQ(m.phases[0].phase, "gen");
  EXPECT_EQ(m.phases[0].peak_allocated_bytes, 600);
  EXPECT_EQ(m.phases[1].phase, "update_actor");
}

TEST(RunCompare, PhaseDeltasWithTheUTestAndTheConfigDiff) {
  hs::reports::testing::FixtureOptions slower;
  slower.update_extra_ms_per_step = 25.0;
  slower.config = {{"data.train_batch_size", "16"}, {"actor_rollout_ref.rollout.n", "4"}, {"new.key", "<x>"}};
  const auto old_run = fixture_run("compare_old");
  const auto new_run = fixture_run("compare_new", slower);
  const auto c = compare_runs(old_run, new_run, 1);
  ASSERT_FALSE(c.phases.empty());
  EXPECT_EQ(c.phases[0].phase, "step");
  const auto update = std::find_if(c.phases.begin(), c.phases.end(), [](const PhaseDelta& d) { return d.phase == "update_actor"; });
  ASSERT_NE(update, c.phases.end());
  // old: 70, 80, 90 ms (median 80); new: 100, 125, 150 ms (median 125): +56.25 %.
  EXPECT_NEAR(update->change, 0.5625, 1e-12);
  // Every new sample above every old one, 3 v 3: exact two-sided p = 2 · 1/C(6,3) = 0.1.
  EXPECT_NEAR(update->test.p_value, 0.1, 1e-12);
  EXPECT_FALSE(update->significant);
  const auto gen = std::find_if(c.phases.begin(), c.phases.end(), [](const PhaseDelta& d) { return d.phase == "gen"; });
  EXPECT_NEAR(gen->change, 0.0, 1e-12);
  // Step metrics: tokens/s per measured step is 1000 tokens / step time.
  // old steps 2..4: 205, 215, 225 ms; new: 235, 260, 285 ms. Medians 1000/0.215 and 1000/0.26:
  // change = 0.215/0.26 − 1 = −0.1730769…; every new sample below every old one: p = 0.1 again.
  ASSERT_EQ(c.metrics.size(), 2u);  // tokens/s and perf/mfu/actor: the fixture records no reward, KL, ...
  EXPECT_EQ(c.metrics[0].metric, "tokens/s");
  EXPECT_EQ(c.metrics[0].better, Better::kHigher);
  EXPECT_NEAR(c.metrics[0].old_values.median, 1000.0 / 0.215, 1e-9);
  EXPECT_NEAR(c.metrics[0].change, 0.215 / 0.26 - 1.0, 1e-12);
  EXPECT_NEAR(c.metrics[0].test.p_value, 0.1, 1e-12);
  EXPECT_EQ(c.metrics[1].metric, "perf/mfu/actor");
  EXPECT_NEAR(c.metrics[1].change, 0.0, 1e-12);  // 0.3 on both sides
  ASSERT_EQ(c.config_diff.size(), 2u);
  EXPECT_EQ(c.config_diff[0].key, "data.train_batch_size");
  EXPECT_EQ(c.config_diff[0].old_value, "8");
  EXPECT_EQ(c.config_diff[0].new_value, "16");
  EXPECT_EQ(c.config_diff[1].key, "new.key");
  EXPECT_FALSE(c.config_diff[1].old_value);
}

TEST(SwitchAnalysis, APointToPointSendIsNoBandwidthMeasurement) {
  auto data = fixture_run("switch_send");
  // A 4 MiB send "in" 0.1 ms (Gloo returns once it is posted) would claim 42 GB/s.
  data.comm_ops.push_back({0, 2, "send", "reshard", 2, 4 << 20, "float32", 3 * hs::reports::testing::kFixtureStepStride, 3 * hs::reports::testing::kFixtureStepStride + 100'000, 41.9, 41.9});
  const auto s = switch_analysis(data, {2, 3, 4});
  ASSERT_TRUE(s.bandwidth_gbps);
  EXPECT_NEAR(*s.bandwidth_gbps, 0.8388608, 1e-9) << "the all_reduce, not the send: " << s.bandwidth_source;
}
