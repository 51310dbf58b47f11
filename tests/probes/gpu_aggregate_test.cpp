// gpu_aggregate_test.cpp — GPU activity at scale (schema v10): the aggregates the recorder keeps
// (kernel_stats, stream_busy) equal what the raw records add up to, computed here independently by
// brute force over a constructed stream (kernels delivered before and after their launching calls,
// as CUPTI's buffers arrive); the raw window keeps exactly its steps' records; the aggregates reach
// the database through the real writer and survive merge.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "../test_db.h"
#include "hybridscope/probes/clock.h"
#include "hybridscope/probes/gpu_aggregator.h"
#include "hybridscope/probes/merge.h"
#include "hybridscope/probes/recorder.h"

namespace hs::probes {
namespace {

namespace fs = std::filesystem;

constexpr const char* kNames[] = {"ampere_sgemm_128x64_nn", "vectorized_elementwise_kernel",
                                  "_Z39ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE",
                                  "flash_fwd_kernel"};

// A run's GPU activity: per step, launches inside ranges (or none), each launching a kernel
// (sometimes a copy), on two streams. `t0` is the first step's start; steps are 1'000'000 ns.
struct Stream {
  std::vector<std::pair<std::int64_t, std::int64_t>> steps;  // (since_ns, step)
  std::vector<ExternalCorrelation> externals;
  std::vector<RuntimeApiActivity> calls;
  std::vector<KernelActivity> kernels;
  std::vector<MemcpyActivity> copies;
};

Stream make_stream(std::int64_t t0, int steps, int launches_per_step, unsigned seed, std::uint32_t correlation = 100,
                   std::uint64_t range = 1) {
  std::mt19937 rng(seed);
  Stream s;
  for (int step = 1; step <= steps; ++step) {
    const std::int64_t base = t0 + (step - 1) * 1'000'000;
    s.steps.emplace_back(base, step);
    std::int64_t cpu = base + 10, gpu_end[2] = {base + 50, base + 50};
    for (int i = 0; i < launches_per_step; ++i) {
      if (i % 7 == 0) ++range;  // a new range every 7 launches
      const std::uint32_t id = ++correlation;
      const bool in_range = i % 5 != 4;  // some launches happen outside every range
      if (in_range) s.externals.push_back({id, range});
      RuntimeApiActivity call;
      call.correlation_id = id;
      call.name = "cudaLaunchKernel_v7000";
      call.start_ns = cpu;
      call.end_ns = cpu + 3;
      s.calls.push_back(call);
      cpu += 5;
      const int stream = static_cast<int>(rng() % 2);
      // Kernels on a stream run in order; a random gap (0: back to back) before each.
      const std::int64_t start = std::max(cpu, gpu_end[stream] + static_cast<std::int64_t>(rng() % 3) * 7);
      const std::int64_t end = start + 1 + static_cast<std::int64_t>(rng() % 40);
      gpu_end[stream] = end;
      if (i % 11 == 10) {
        MemcpyActivity m;
        m.device = 0, m.stream = 7 + static_cast<std::uint32_t>(stream), m.correlation_id = id;
        m.start_ns = start, m.end_ns = end, m.bytes = 4096 + i, m.copy_kind = 1;
        s.copies.push_back(m);
      } else {
        KernelActivity k;
        k.device = 0, k.stream = 7 + static_cast<std::uint32_t>(stream), k.correlation_id = id;
        k.start_ns = start, k.end_ns = end;
        k.name = kNames[rng() % 4];
        k.kernel_class = classify_kernel(k.name);
        s.kernels.push_back(k);
      }
    }
  }
  return s;
}

// CUPTI's order: each batch holds some calls (with their external ids) and some kernels; kernels
// of a call can come a batch before it. Split the stream into `n` batches that way.
std::vector<GpuActivityBatch> batches_of(const Stream& s, int n) {
  std::vector<GpuActivityBatch> out(static_cast<std::size_t>(n));
  auto slot = [&](std::size_t i, std::size_t size) { return std::min<std::size_t>(i * n / std::max<std::size_t>(size, 1), n - 1); };
  for (std::size_t i = 0; i < s.calls.size(); ++i) out[std::min<std::size_t>(slot(i, s.calls.size()) + 1, n - 1)].runtime_api.push_back(s.calls[i]);
  for (const auto& e : s.externals) {
    const auto it = std::find_if(s.calls.begin(), s.calls.end(), [&](const auto& c) { return c.correlation_id == e.correlation_id; });
    out[std::min<std::size_t>(slot(static_cast<std::size_t>(it - s.calls.begin()), s.calls.size()) + 1, n - 1)]
        .external_correlations.push_back(e);
  }
  for (std::size_t i = 0; i < s.kernels.size(); ++i) out[slot(i, s.kernels.size())].kernels.push_back(s.kernels[i]);
  for (std::size_t i = 0; i < s.copies.size(); ++i) out[slot(i, s.copies.size())].memcpys.push_back(s.copies[i]);
  return out;
}

std::int64_t step_of(const Stream& s, std::int64_t ts) {
  std::int64_t step = 0;
  for (const auto& [since, st] : s.steps)
    if (since <= ts) step = st;
  return step;
}

struct Expected {
  std::int64_t count = 0, total = 0, min = 0, max = 0, bytes = 0, launch_first = -1, launch_last = -1;
};
using Key = std::tuple<std::int64_t, std::uint64_t, std::string>;  // step, external id, name

// Brute force over the whole stream: what kernel_stats must hold.
std::map<Key, Expected> expected_stats(const Stream& s) {
  std::map<std::uint32_t, std::uint64_t> range_of;
  for (const auto& e : s.externals) range_of[e.correlation_id] = e.external_id;
  std::map<std::uint32_t, const RuntimeApiActivity*> call_of;
  for (const auto& c : s.calls) call_of[c.correlation_id] = &c;
  std::map<Key, Expected> out;
  auto add = [&](std::uint32_t id, std::int64_t start, std::int64_t end, const std::string& name, std::int64_t bytes) {
    const auto r = range_of.find(id);
    Expected& e = out[Key{step_of(s, start), r == range_of.end() ? 0 : r->second, name}];
    const std::int64_t d = end - start;
    e.min = e.count == 0 ? d : std::min(e.min, d);
    e.max = std::max(e.max, d);
    ++e.count;
    e.total += d;
    e.bytes += bytes;
    const RuntimeApiActivity* call = call_of.at(id);
    e.launch_first = e.launch_first < 0 ? call->start_ns : std::min(e.launch_first, call->start_ns);
    e.launch_last = std::max(e.launch_last, call->end_ns);
  };
  for (const auto& k : s.kernels) add(k.correlation_id, k.start_ns, k.end_ns, k.name, 0);
  for (const auto& m : s.copies) add(m.correlation_id, m.start_ns, m.end_ns, "Memcpy Host-to-Device", m.bytes);
  return out;
}

// Per (step, stream): the union of the records' intervals, by sorting (independent of the
// aggregator's merge as records arrive).
std::map<std::pair<std::int64_t, std::uint32_t>, std::int64_t> expected_busy(const Stream& s) {
  std::map<std::pair<std::int64_t, std::uint32_t>, std::vector<std::pair<std::int64_t, std::int64_t>>> by;
  for (const auto& k : s.kernels) by[{step_of(s, k.start_ns), k.stream}].emplace_back(k.start_ns, k.end_ns);
  for (const auto& m : s.copies) by[{step_of(s, m.start_ns), m.stream}].emplace_back(m.start_ns, m.end_ns);
  std::map<std::pair<std::int64_t, std::uint32_t>, std::int64_t> out;
  for (auto& [key, v] : by) {
    std::sort(v.begin(), v.end());
    std::int64_t busy = 0, cs = v[0].first, ce = v[0].second;
    for (const auto& [a, b] : v) {
      if (a > ce) {
        busy += ce - cs;
        cs = a, ce = b;
      } else {
        ce = std::max(ce, b);
      }
    }
    out[key] = busy + ce - cs;
  }
  return out;
}

TEST(GpuAggregator, AggregatesEqualTheRawRecordsSums) {
  const Stream s = make_stream(1'000'000, 4, 300, 7);
  GpuActivityAggregator agg(GpuCaptureOptions::none());
  std::map<Key, KernelStat> got;
  std::map<std::pair<std::int64_t, std::uint32_t>, StreamBusy> busy;
  auto take = [&](bool final) {
    GpuAggregates a = agg.take_changed(final);
    for (const KernelStat& k : a.kernels) got[Key{k.step, k.external_id, k.name}] = k;  // replaced: values so far
    for (const StreamBusy& b : a.streams) busy[{b.step, b.stream}] = b;
  };
  for (const auto& [since, step] : s.steps) agg.set_step(step, since);
  int n = 0;
  for (GpuActivityBatch& b : batches_of(s, 12)) {
    agg.fold(b);
    EXPECT_TRUE(b.kernels.empty() && b.runtime_api.empty()) << "no raw records outside a window";
    if (++n % 4 == 0) take(false);  // the recorder's flushes, between batches
  }
  take(true);
  EXPECT_EQ(agg.waiting(), 0u);

  const auto expected = expected_stats(s);
  ASSERT_EQ(got.size(), expected.size());
  for (const auto& [key, e] : expected) {
    const auto it = got.find(key);
    ASSERT_NE(it, got.end()) << "step " << std::get<0>(key) << " range " << std::get<1>(key) << " " << std::get<2>(key);
    const KernelStat& k = it->second;
    EXPECT_EQ(k.count, e.count);
    EXPECT_EQ(k.total_ns, e.total);
    EXPECT_EQ(k.min_ns, e.min);
    EXPECT_EQ(k.max_ns, e.max);
    EXPECT_EQ(k.bytes, e.bytes);
    EXPECT_EQ(k.launched, e.count) << "every call was delivered";
    EXPECT_EQ(k.launch_first_ns, e.launch_first);
    EXPECT_EQ(k.launch_last_ns, e.launch_last);
  }
  const auto expected_streams = expected_busy(s);
  ASSERT_EQ(busy.size(), expected_streams.size());
  for (const auto& [key, ns] : expected_streams) EXPECT_EQ(busy.at(key).busy_ns, ns) << "step " << key.first;
  // Nothing changed since: nothing to write again.
  EXPECT_TRUE(agg.take_changed(true).empty());
}

TEST(GpuAggregator, ARecordWhoseCallNeverComesIsUnattributedAfterAFlush) {
  GpuActivityAggregator agg(GpuCaptureOptions::none());
  GpuActivityBatch b;
  KernelActivity k;
  k.correlation_id = 5, k.start_ns = 10, k.end_ns = 30, k.name = "k";
  b.kernels.push_back(k);
  b.external_correlations.push_back({5, 42});  // tagged, but its runtime API record never arrives
  agg.fold(b);
  EXPECT_TRUE(agg.take_changed(false).kernels.empty()) << "waits one flush for its call";
  const GpuAggregates a = agg.take_changed(false);
  ASSERT_EQ(a.kernels.size(), 1u);
  EXPECT_EQ(a.kernels[0].external_id, 42u) << "its range is known from the external correlation";
  EXPECT_EQ(a.kernels[0].launched, 0);
  EXPECT_EQ(a.kernels[0].launch_first_ns, -1);
}

TEST(GpuAggregator, TheRawWindowKeepsExactlyItsSteps) {
  const Stream s = make_stream(1'000'000, 5, 120, 11);
  GpuActivityAggregator agg(GpuCaptureOptions::steps(2, 3));
  for (const auto& [since, step] : s.steps) agg.set_step(step, since);
  std::set<std::uint32_t> kernels, calls, externals;
  for (GpuActivityBatch& b : batches_of(s, 6)) {
    agg.fold(b);
    for (const auto& k : b.kernels) kernels.insert(k.correlation_id);
    for (const auto& c : b.runtime_api) calls.insert(c.correlation_id);
    for (const auto& e : b.external_correlations) externals.insert(e.correlation_id);
  }
  std::set<std::uint32_t> want_kernels, want_calls, want_externals;
  for (const auto& k : s.kernels)
    if (const auto st = step_of(s, k.start_ns); st >= 2 && st <= 3) want_kernels.insert(k.correlation_id);
  for (const auto& c : s.calls)
    if (const auto st = step_of(s, c.start_ns); st >= 2 && st <= 3) want_calls.insert(c.correlation_id);
  for (const auto& e : s.externals)
    if (want_calls.count(e.correlation_id)) want_externals.insert(e.correlation_id);
  EXPECT_FALSE(want_kernels.empty());
  EXPECT_EQ(kernels, want_kernels);
  EXPECT_EQ(calls, want_calls);
  EXPECT_EQ(externals, want_externals);
}

TEST(GpuAggregator, ParsesRawStepWindows) {
  GpuCaptureOptions o;
  ASSERT_TRUE(parse_raw_steps("2-3", o));
  EXPECT_FALSE(o.keeps_raw(1));
  EXPECT_TRUE(o.keeps_raw(2));
  EXPECT_TRUE(o.keeps_raw(3));
  EXPECT_FALSE(o.keeps_raw(4));
  ASSERT_TRUE(parse_raw_steps("5", o));
  EXPECT_TRUE(o.keeps_raw(5));
  EXPECT_FALSE(o.keeps_raw(6));
  ASSERT_TRUE(parse_raw_steps("none", o));
  EXPECT_FALSE(o.keeps_raw(0));
  ASSERT_TRUE(parse_raw_steps("all", o));
  EXPECT_TRUE(o.keeps_raw(1'000'000));
  EXPECT_FALSE(parse_raw_steps("3-2", o));
  EXPECT_FALSE(parse_raw_steps("x", o));
  EXPECT_FALSE(parse_raw_steps("2-", o));
}

// Through the real recorder and writer: kernel_stats equals the raw kernels table's GROUP BY (the
// window is every step here), and a window keeps only its rows. Step 1's records lie between the
// recorder's set_step(1) and set_step(2) on its clock, step 2's after.
struct Recorded {
  std::int64_t run_id;
  Stream step1, step2;
};
Recorded record_run(const std::string& path, int rank, std::int64_t run_id, GpuCaptureOptions gpu) {
  RecorderOptions options;
  options.gpu = gpu;
  Recorder rec(path, rank, options);
  RunInfo info;
  info.name = "gpu";
  info.run_id = run_id;
  Recorded r;
  r.run_id = rec.begin_run(info);
  rec.set_step(1);
  r.step1 = make_stream(now_ns(), 1, 200, 3 + static_cast<unsigned>(rank));  // spans a few us
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  rec.set_step(2);
  // Later calls, later ranges: correlation and external ids are unique within a process.
  r.step2 = make_stream(now_ns() + 1, 1, 200, 5 + static_cast<unsigned>(rank), 10'000, 1'000);
  for (auto& b : batches_of(r.step1, 4)) rec.record_gpu_activity(std::move(b));
  rec.flush();
  for (auto& b : batches_of(r.step2, 4)) rec.record_gpu_activity(std::move(b));
  rec.end_run(RunStatus::kCompleted);
  return r;
}

TEST(GpuAggregatesInTheDatabase, KernelStatsEqualTheRawRows) {
  const auto db = hs::test::temp_db("gpu_aggregate_test", "all.sqlite");
  record_run(db, 0, -1, GpuCaptureOptions{});
  // Raw rows grouped by their range (external_correlations) and name, against kernel_stats.
  const std::string raw =
      "SELECT COALESCE(e.external_id, 0), s.value, COUNT(*), SUM(k.end_ns - k.start_ns), MIN(k.end_ns - k.start_ns), "
      "MAX(k.end_ns - k.start_ns) FROM kernels k JOIN strings s ON s.id = k.name_id LEFT JOIN external_correlations e "
      "ON e.run_id = k.run_id AND e.rank = k.rank AND e.correlation_id = k.correlation_id "
      "GROUP BY 1, 2 ORDER BY 1, 2";
  const std::string agg =
      "SELECT a.external_id, s.value, SUM(a.count), SUM(a.total_ns), MIN(a.min_ns), MAX(a.max_ns) FROM kernel_stats a "
      "JOIN strings s ON s.id = a.name_id WHERE a.class_id != 3 GROUP BY 1, 2 ORDER BY 1, 2";
  const auto raw_rows = hs::test::query_rows(db, raw);
  EXPECT_GT(raw_rows.size(), 4u);
  EXPECT_EQ(hs::test::query_rows(db, agg), raw_rows);
  EXPECT_EQ(hs::test::query_rows(db, "SELECT DISTINCT step FROM kernel_stats ORDER BY step"),
            (std::vector<std::string>{"1", "2"}));
  // Stream busy time is at most the sum of durations and at least the longest record.
  EXPECT_EQ(hs::test::query_row(db, "SELECT COUNT(*) FROM stream_busy WHERE busy_ns <= 0 OR busy_ns > last_end_ns - first_start_ns"), "0");
}

TEST(GpuAggregatesInTheDatabase, AWindowKeepsOnlyItsRawRowsAndMergeCopiesTheAggregates) {
  const auto db = hs::test::temp_db("gpu_aggregate_test", "window.sqlite");
  const std::string rank1 = db + ".rank1";
  fs::remove(rank1);
  const Recorded r0 = record_run(db, 0, -1, GpuCaptureOptions::steps(2, 2));
  const Recorded r1 = record_run(rank1, 1, r0.run_id, GpuCaptureOptions::steps(2, 2));
  // Raw rows: exactly step 2's; the aggregates count both steps.
  EXPECT_EQ(hs::test::query_row(rank1, "SELECT COUNT(*) FROM kernels"), std::to_string(r1.step2.kernels.size()));
  EXPECT_EQ(hs::test::query_row(rank1, "SELECT COUNT(*) FROM runtime_api"), std::to_string(r1.step2.calls.size()));
  EXPECT_EQ(hs::test::query_row(rank1, "SELECT MIN(start_ns) FROM kernels"),
            std::to_string(std::min_element(r1.step2.kernels.begin(), r1.step2.kernels.end(),
                                            [](const auto& a, const auto& b) { return a.start_ns < b.start_ns; })
                               ->start_ns));
  const std::string all_kernels = std::to_string(r1.step1.kernels.size() + r1.step2.kernels.size());
  EXPECT_EQ(hs::test::query_row(rank1, "SELECT SUM(count) FROM kernel_stats WHERE class_id != 3"), all_kernels);
  EXPECT_EQ(hs::test::query_row(rank1, "SELECT SUM(count) FROM kernel_stats WHERE step = 1 AND class_id != 3"),
            std::to_string(r1.step1.kernels.size()));
  const std::string rank1_stats = hs::test::query_row(rank1, "SELECT COUNT(*) FROM kernel_stats");
  const std::string by_name = "SELECT s.value, SUM(a.count), SUM(a.total_ns) FROM kernel_stats a JOIN strings s ON "
                              "s.id = a.name_id WHERE a.rank = 1 GROUP BY 1 ORDER BY 1";
  const auto rank1_by_name = hs::test::query_rows(rank1, by_name);
  EXPECT_GE(rank1_by_name.size(), 4u);

  const MergeReport report = merge_rank_files(db);
  EXPECT_EQ(report.files_merged, 1);
  EXPECT_EQ(hs::test::query_row(db, "SELECT COUNT(*) FROM kernel_stats WHERE rank = 1"), rank1_stats);
  EXPECT_EQ(hs::test::query_row(db, "SELECT SUM(count) FROM kernel_stats WHERE rank = 1 AND class_id != 3"), all_kernels);
  EXPECT_EQ(hs::test::query_row(db, "SELECT COUNT(DISTINCT rank) FROM stream_busy"), "2");
  // Names survive the string remapping: rank 1's aggregates by name equal its file's.
  EXPECT_EQ(hs::test::query_rows(db, by_name), rank1_by_name);
}

}  // namespace
}  // namespace hs::probes
