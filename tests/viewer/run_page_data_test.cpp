// run_page_data_test.cpp — the Memory, Switch and Comm tabs' data (run_page_data.h) against
// hand-computed numbers: memory charts from a hand-built RunData and from a run the real writer
// wrote (run_page_fixture.h), the min/max decimation against a brute-force scan, the switch table
// and its bars from the two-rank fixture (reports/analysis_fixture.h), the comm table's busbw
// against nccl-tests' factors worked by hand, and the comm-bench file beside a database.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "hybridscope/reports/run_analysis.h"
#include "hybridscope/viewer/loaded_database.h"
#include "hybridscope/viewer/run_page_data.h"
#include "run_page_fixture.h"
#include "viewer_fixtures.h"

namespace hs::viewer {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;
constexpr std::int64_t kSecond = 1'000'000'000;

const LineChartData* chart_titled(const std::vector<LineChartData>& charts, const std::string& prefix) {
  for (const auto& c : charts)
    if (c.title.rfind(prefix, 0) == 0) return &c;
  return nullptr;
}

std::vector<std::string> titles(const std::vector<LineChartData>& charts) {
  std::vector<std::string> out;
  for (const auto& c : charts) out.push_back(c.title);
  return out;
}

reports::MemorySampleRow cpu_sample(int rank, std::int64_t ts_ns, std::int64_t allocated) {
  reports::MemorySampleRow m;
  m.rank = rank;
  m.ts_ns = ts_ns;
  m.step = 1;
  m.phase = "gen";
  m.allocated_bytes = allocated;
  return m;
}

TEST(MemoryCharts, CpuSamplesGiveOneAllocatedChartPerRankAgainstTheRunStart) {
  reports::RunData data;
  // The run started at monotonic 10 s (UNIX 1000 s with an offset of 990 s).
  data.run.start_unix_ns = 1000 * kSecond;
  data.run.clock_offset_ns = 990 * kSecond;
  data.memory = {cpu_sample(0, 11 * kSecond, 64 << 20), cpu_sample(1, 11 * kSecond + kSecond / 2, 32 << 20),
                 cpu_sample(0, 12 * kSecond, 128 << 20)};
  const auto charts = memory_charts(data);
  // A CPU run records only allocated bytes: no reserved, ratios, counters or KV pool.
  ASSERT_EQ(titles(charts), std::vector<std::string>{"Allocated (MiB)"});
  const auto& c = charts[0];
  EXPECT_EQ(c.y_label, "MiB");
  ASSERT_EQ(c.series.size(), 2u);
  EXPECT_EQ(c.series[0].name, "rank 0");
  EXPECT_EQ(c.series[1].name, "rank 1");
  // x = ts − 10 s: rank 0 at 1 s (64 MiB) and 2 s (128 MiB), rank 1 at 1.5 s (32 MiB).
  ASSERT_EQ(c.series[0].points.size(), 2u);
  EXPECT_DOUBLE_EQ(c.series[0].points[0].first, 1.0);
  EXPECT_DOUBLE_EQ(c.series[0].points[0].second, 64.0);
  EXPECT_DOUBLE_EQ(c.series[0].points[1].first, 2.0);
  EXPECT_DOUBLE_EQ(c.series[0].points[1].second, 128.0);
  EXPECT_DOUBLE_EQ(c.series[1].points.at(0).first, 1.5);
  EXPECT_DOUBLE_EQ(c.series[1].points.at(0).second, 32.0);
}

TEST(MemoryCharts, AboveTenGiBTheAxisIsInGiB) {
  reports::RunData data;
  data.run.start_unix_ns = 100 * kSecond;  // after the samples (clock offset 0): not a usable origin
  data.memory = {cpu_sample(0, 5 * kSecond, 12LL << 30), cpu_sample(0, 6 * kSecond, 6LL << 30)};
  const auto charts = memory_charts(data);
  ASSERT_EQ(charts.size(), 1u);
  EXPECT_EQ(charts[0].title, "Allocated (GiB)");
  // The run's start comes after the samples: x counts from the first sample.
  EXPECT_DOUBLE_EQ(charts[0].series[0].points[0].first, 0.0);
  EXPECT_DOUBLE_EQ(charts[0].series[0].points[0].second, 12.0);
  EXPECT_DOUBLE_EQ(charts[0].series[0].points[1].second, 6.0);
}

TEST(MemoryCharts, CudaRunFromTheWriterChartsEveryQuantityTheRatiosCountersAndTheKvPool) {
  const std::string path = testing::write_memory_comm_run("viewer", "memory_comm.sqlite");
  reports::RunDatabase db(path);
  const auto data = reports::load_run(db, db.runs().front().id);
  const auto charts = memory_charts(data);
  EXPECT_EQ(titles(charts), (std::vector<std::string>{
                                "Allocated (MiB)", "Reserved (MiB)", "Active (MiB)",
                                "Reserved slack: 1 − allocated/reserved (%)",
                                "Split fragmentation: inactive split/reserved (%)",
                                "External fragmentation: 1 − largest free/(reserved − active) (%)",
                                "Inactive split (MiB)", "Largest free block (MiB)",
                                "Allocation retries and OOMs (cumulative)", "KV pool occupancy: blocks used/blocks (%)"}));
  // Samples at 1.1, 2.1, 3.1 s and the first is the origin (the run began later on the real clock).
  const auto* allocated = chart_titled(charts, "Allocated");
  ASSERT_NE(allocated, nullptr);
  ASSERT_EQ(allocated->series.at(0).points.size(), 3u);
  EXPECT_NEAR(allocated->series[0].points[1].first, 1.0, 1e-12);
  EXPECT_NEAR(allocated->series[0].points[1].second, 300.0, 1e-12);
  // The writer's ratios: slack 1 − 300/400 = 25 % at step 2; split 40/400 = 10 % at step 3;
  // external 1 − 100/(400 − 220) = 44.4 % at step 3.
  EXPECT_NEAR(chart_titled(charts, "Reserved slack")->series[0].points[1].second, 25.0, 1e-9);
  EXPECT_NEAR(chart_titled(charts, "Split fragmentation")->series[0].points[2].second, 10.0, 1e-9);
  EXPECT_NEAR(chart_titled(charts, "External fragmentation")->series[0].points[2].second, 100.0 * (1.0 - 100.0 / 180.0),
              1e-9);
  EXPECT_NEAR(chart_titled(charts, "Largest free block")->series[0].points[2].second, 100.0, 1e-12);
  const auto* counters = chart_titled(charts, "Allocation retries");
  ASSERT_EQ(counters->series.size(), 2u);
  EXPECT_EQ(counters->series[0].name, "rank 0 retries");
  EXPECT_EQ(counters->series[1].name, "rank 0 OOMs");
  EXPECT_DOUBLE_EQ(counters->series[0].points[2].second, 3.0);
  EXPECT_DOUBLE_EQ(counters->series[1].points[2].second, 1.0);
  // KV pool: 97 of 100 blocks at 2.2 s (1.1 s after the origin), 40 at 3.2 s.
  const auto* kv = chart_titled(charts, "KV pool");
  ASSERT_EQ(kv->series.at(0).points.size(), 2u);
  EXPECT_NEAR(kv->series[0].points[0].first, 1.1, 1e-12);
  EXPECT_NEAR(kv->series[0].points[0].second, 97.0, 1e-12);
  EXPECT_NEAR(kv->series[0].points[1].second, 40.0, 1e-12);
  // Every chart shares one time axis: from the first memory sample (0) to the last KV sample (2.1 s).
  for (const auto& c : charts) {
    ASSERT_TRUE(c.x_range.has_value()) << c.title;
    EXPECT_NEAR(c.x_range->first, 0.0, 1e-12) << c.title;
    EXPECT_NEAR(c.x_range->second, 2.1, 1e-12) << c.title;
  }
}

TEST(MemoryCharts, DiagnoseRunCarriesTheChartsAndTheMemoryAnalysis) {
  const std::string path = testing::write_memory_comm_run("viewer", "memory_diagnose.sqlite");
  const RunDiagnosis d = diagnose_run(path, 1, 1);
  ASSERT_TRUE(d.ok()) << d.error;
  EXPECT_EQ(d.memory_charts.size(), 10u);
  // memory_analysis over the measured steps 2 and 3: peak 300 MiB at step 2, reserved 400 MiB,
  // lowest allocated/reserved 200/400; the counters over the run: 0 → 3 retries, 0 → 1 OOM.
  EXPECT_EQ(d.memory.device, "cuda");
  EXPECT_EQ(d.memory.peak_allocated_bytes, 300 * testing::kMiBytes);
  EXPECT_EQ(d.memory.peak_step, 2);
  EXPECT_EQ(d.memory.peak_reserved_bytes, 400 * testing::kMiBytes);
  EXPECT_NEAR(*d.memory.min_allocated_over_reserved, 0.5, 1e-12);
  EXPECT_EQ(d.memory.alloc_retries, 3);
  EXPECT_EQ(d.memory.ooms, 1);
  EXPECT_NEAR(*d.memory.kv_peak_occupancy, 0.97, 1e-12);
}

TEST(DecimateMinMax, KeepsEveryPeakAndTroughWithinTheLimit) {
  std::vector<std::pair<double, double>> points;
  for (int i = 0; i < 10000; ++i) points.emplace_back(i * 0.01, std::sin(i * 0.05));
  points[4321].second = 50.0;   // a spike between samples of a smooth line
  points[7777].second = -50.0;  // and a dip
  const auto kept = decimate_min_max(points, 1000);
  EXPECT_LE(kept.size(), 1000u);
  EXPECT_GE(kept.size(), 900u);
  EXPECT_TRUE(std::is_sorted(kept.begin(), kept.end()));
  EXPECT_NE(std::find(kept.begin(), kept.end(), points[4321]), kept.end());
  EXPECT_NE(std::find(kept.begin(), kept.end(), points[7777]), kept.end());
  // Every kept point is an input point, and each bucket of 20 inputs keeps its brute-force max.
  for (std::size_t b = 0; b < 500; ++b) {
    const auto first = points.begin() + static_cast<std::ptrdiff_t>(b * 20);
    const auto top = *std::max_element(first, first + 20, [](const auto& a, const auto& c) { return a.second < c.second; });
    EXPECT_NE(std::find(kept.begin(), kept.end(), top), kept.end()) << "bucket " << b;
  }
  const std::vector<std::pair<double, double>> few = {{0, 1}, {1, 2}, {2, 3}};
  EXPECT_EQ(decimate_min_max(few, 1000), few);
}

TEST(SwitchTable, EachMeasuredSwitchWithItsComponentsBytesAndWireBound) {
  const std::string path = testing::write_run_db("switch_table.sqlite", "switches", false);
  reports::RunDatabase db(path);
  const auto analysis = reports::analyze_run(reports::load_run(db, db.runs().front().id));
  const auto rows = switch_table(analysis.data, analysis.switches);
  // Steps 2..4 (step 1 is the warm-up), each train_to_rollout then rollout_to_train.
  ASSERT_EQ(rows.size(), 6u);
  EXPECT_EQ(rows[0].step, 2);
  EXPECT_EQ(rows[0].direction, "train_to_rollout");
  EXPECT_EQ(rows[1].direction, "rollout_to_train");
  EXPECT_EQ(rows[5].step, 4);
  // train_to_rollout: 20 ms on both ranks, reshard_weights 12 ms + kv_allocate 6 ms, 2 ms unaccounted;
  // rank 1 received 64 MiB, rank 0 16 MiB.
  const auto& t2r = rows[0];
  EXPECT_NEAR(t2r.seconds, 0.020, 1e-12);
  ASSERT_EQ(t2r.components_s.size(), 2u);
  EXPECT_EQ(t2r.components_s[0].first, "reshard_weights");
  EXPECT_NEAR(t2r.components_s[0].second, 0.012, 1e-12);
  EXPECT_EQ(t2r.components_s[1].first, "kv_allocate");
  EXPECT_NEAR(t2r.components_s[1].second, 0.006, 1e-12);
  EXPECT_NEAR(t2r.unaccounted_s, 0.002, 1e-12);
  EXPECT_EQ(t2r.max_bytes_received, 64 * testing::kMiBytes);
  EXPECT_EQ(t2r.total_bytes_received, 80 * testing::kMiBytes);
  // The wire bound from the run's own 8 MiB all-reduce of 10 ms on 2 ranks: busbw = 8 MiB / 10 ms
  // × 2(2−1)/2 = 0.8388608 GB/s, so 64 MiB need 67108864 / 0.8388608e9 = 0.080 s.
  ASSERT_TRUE(t2r.wire_bound_s.has_value());
  EXPECT_NEAR(*t2r.wire_bound_s, 0.080, 1e-9);
  // rollout_to_train: 10 ms, kv_release 4 + restore_weights 6, nothing received, no bound.
  const auto& r2t = rows[1];
  EXPECT_NEAR(r2t.seconds, 0.010, 1e-12);
  EXPECT_NEAR(r2t.unaccounted_s, 0.0, 1e-12);
  EXPECT_EQ(r2t.max_bytes_received, 0);
  EXPECT_FALSE(r2t.wire_bound_s.has_value());

  const auto bars = switch_component_bars(rows);
  ASSERT_EQ(bars.size(), 2u);
  EXPECT_EQ(bars[0].categories, (std::vector<std::string>{"step 2", "step 3", "step 4"}));
  EXPECT_EQ(bars[0].y_label, "ms");
  ASSERT_EQ(bars[0].sets.size(), 3u);
  EXPECT_EQ(bars[0].sets[0].name, "reshard_weights");
  EXPECT_EQ(bars[0].sets[2].name, "unaccounted");
  EXPECT_NEAR(bars[0].sets[0].values[1], 12.0, 1e-9);
  EXPECT_NEAR(bars[0].sets[1].values[2], 6.0, 1e-9);
  EXPECT_NEAR(bars[0].sets[2].values[0], 2.0, 1e-9);
  EXPECT_EQ(bars[1].sets[1].name, "restore_weights");
  EXPECT_NEAR(bars[1].sets[1].values[0], 6.0, 1e-9);
}

TEST(SwitchTable, ACommBenchBesideTheDatabaseGivesTheBoundAndABadOneIsReported) {
  // A directory of its own: the other tests' databases must not see this comm-bench.json.
  const std::string path = hs::test::temp_db("viewer_bench", "run.sqlite");
  reports::testing::FixtureOptions options;
  options.name = "bench";
  reports::testing::write_two_rank_run(path, options);
  const auto dir = std::filesystem::path(path).parent_path();
  std::filesystem::create_directories(dir / "out");
  {
    std::ofstream json(dir / "out" / "comm-bench.json");
    json << R"({"benchmarks": [{"name": "BM_AllGather/ranks:2/bytes:67108864", "run_type": "iteration",
                 "busbw_GBps": 2.0, "bytes": 67108864, "group_size": 2}]})";
  }
  EXPECT_EQ(comm_bench_beside(path), (dir / "out" / "comm-bench.json").string());
  const RunDiagnosis d = diagnose_run(path, 1, 1);
  ASSERT_TRUE(d.ok()) << d.error;
  EXPECT_EQ(d.comm_bench_path, (dir / "out" / "comm-bench.json").string());
  EXPECT_TRUE(d.comm_bench_error.empty());
  // 64 MiB at the micro-benchmark's 2 GB/s: 67108864 / 2e9 = 0.033554432 s.
  ASSERT_FALSE(d.switch_rows.empty());
  EXPECT_NEAR(*d.switch_rows[0].wire_bound_s, 0.033554432, 1e-12);
  EXPECT_NE(d.switches.bandwidth_source.find("micro-benchmark"), std::string::npos) << d.switches.bandwidth_source;

  // A file given by hand that is not hs_comm_bench's: reported, and the run's own collectives used.
  const std::string bad = (dir / "bad.json").string();
  std::ofstream(bad) << "{\"not\": \"benchmarks\"}";
  const RunDiagnosis b = diagnose_run(path, 1, 1, bad);
  ASSERT_TRUE(b.ok()) << b.error;
  EXPECT_TRUE(b.comm_bench_path.empty());
  EXPECT_NE(b.comm_bench_error.find("bad.json"), std::string::npos) << b.comm_bench_error;
  EXPECT_NEAR(*b.switch_rows[0].wire_bound_s, 0.080, 1e-9);
}

TEST(CommTable, BusbwIsTheRecordersNcclTestsFactorAndWarmupIsLeftOut) {
  const std::string path = testing::write_memory_comm_run("viewer", "comm_table.sqlite");
  const RunDiagnosis d = diagnose_run(path, 1, 1);
  ASSERT_TRUE(d.ok()) << d.error;
  const auto& rows = d.comm_rows;
  // The most total time first: all_gather 2 + 4 + 8 = 14 ms, all_reduce 1 ms (the 100 ms of the
  // warm-up step left out), barrier 0.5 ms.
  ASSERT_EQ(rows.size(), 3u);
  const auto& ag = rows[0];
  EXPECT_EQ(ag.op, "all_gather");
  EXPECT_EQ(ag.group, "tp");
  EXPECT_EQ(ag.group_size, 4);
  EXPECT_EQ(ag.calls, 3);
  EXPECT_EQ(ag.bytes, 12 * testing::kMiBytes);
  EXPECT_NEAR(ag.total_s, 0.014, 1e-12);
  EXPECT_NEAR(ag.mean_s, 0.014 / 3.0, 1e-12);
  // algbw per call = 4194304 B / t: 2.097152, 1.048576, 0.524288 GB/s (median 1.048576);
  // busbw = algbw × (4 − 1)/4: 1.572864, 0.786432, 0.393216 (median 0.786432, max 1.572864).
  EXPECT_NEAR(*ag.algbw_gbps, 1.048576, 1e-9);
  EXPECT_NEAR(*ag.busbw_gbps, 0.786432, 1e-9);
  EXPECT_NEAR(*ag.max_busbw_gbps, 1.572864, 1e-9);
  const auto& ar = rows[1];
  EXPECT_EQ(ar.op, "all_reduce");
  EXPECT_EQ(ar.calls, 1);
  EXPECT_NEAR(ar.total_s, 0.001, 1e-12);
  // 1 MiB in 1 ms = 1.048576 GB/s; all_reduce on 2 ranks: × 2(2 − 1)/2 = 1.
  EXPECT_NEAR(*ar.algbw_gbps, 1.048576, 1e-9);
  EXPECT_NEAR(*ar.busbw_gbps, 1.048576, 1e-9);
  const auto& barrier = rows[2];
  EXPECT_EQ(barrier.op, "barrier");
  EXPECT_EQ(barrier.bytes, 0);
  EXPECT_NEAR(barrier.total_s, 0.0005, 1e-12);
  // A barrier moves no bytes: bus factor 0.
  EXPECT_NEAR(barrier.busbw_gbps.value_or(0.0), 0.0, 1e-12);
}

}  // namespace
}  // namespace hs::viewer
