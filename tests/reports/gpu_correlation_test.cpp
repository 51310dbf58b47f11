// gpu_correlation_test.cpp — the kernel -> range correlation check (`hybridscope check`) on a
// database written by the real recorder, with one kernel of each verdict: launched inside its
// range, launched outside it, tagged but without a launch record, launched outside every range,
// and an NCCL kernel of a collective (a depth -1 range checked against its comm_ops row). The same
// counts come from the v10 aggregates and, with those deleted (a file before v10), from the raw
// tables. Also: the aggregates read back with their range names, and the report's GPU table.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <string>

#include "../test_db.h"
#include "hybridscope/probes/recorder.h"
#include "hybridscope/reports/gpu_kernels.h"
#include "hybridscope/reports/run_database.h"

namespace hs::reports {
namespace {

using namespace hs::probes;

std::string write_run(const std::string& path) {
  Recorder rec(path);
  RunInfo info;
  info.name = "check";
  rec.begin_run(info);
  const std::int64_t tid = static_cast<std::int64_t>(::gettid());
  rec.record_range({"gen", Category::kPhase, 0, 0, 1000, 2000});  // this thread: ranges.tid = tid
  rec.record_comm({"all_reduce", "dp", 2, 1024, "float32", 3000, 4000, 0});

  GpuActivityBatch b;
  b.correlation_ranges.push_back({1, tid, 0, 1000, "gen"});
  b.correlation_ranges.push_back({2, tid, -1, 3000, "comm/all_reduce"});
  auto kernel = [&](std::uint32_t id, const char* name, std::int64_t start) {
    KernelActivity k;
    k.correlation_id = id, k.start_ns = start, k.end_ns = start + 50, k.name = name;
    k.kernel_class = classify_kernel(name);
    b.kernels.push_back(k);
  };
  auto call = [&](std::uint32_t id, std::int64_t start) {
    RuntimeApiActivity a;
    a.correlation_id = id, a.start_ns = start, a.end_ns = start + 5, a.name = "cudaLaunchKernel_v7000";
    b.runtime_api.push_back(a);
  };
  b.external_correlations = {{11, 1}, {12, 1}, {14, 1}, {15, 2}};
  call(11, 1100), kernel(11, "inside_kernel", 1200);             // launched inside gen
  call(12, 2500), kernel(12, "outside_kernel", 2600);            // tagged gen, launched after it ended
  call(13, 2700), kernel(13, "untagged_kernel", 2800);           // outside every range
  kernel(14, "no_launch_kernel", 1300);                          // tagged, its call never recorded
  call(15, 3100), kernel(15, "ncclDevKernel_AllReduce", 3200);   // the collective's kernel
  rec.record_gpu_activity(std::move(b));
  rec.end_run(RunStatus::kCompleted);
  return path;
}

void expect_counts(const KernelCorrelationCheck& c) {
  EXPECT_EQ(c.kernels, 5);
  EXPECT_EQ(c.correlated, 4);
  EXPECT_EQ(c.inside, 2);
  EXPECT_EQ(c.outside, 1);
  EXPECT_EQ(c.unverified, 1);
  EXPECT_EQ(c.uncorrelated, 1);
  EXPECT_FALSE(c.ok());
}

TEST(KernelCorrelationCheck, CountsEachVerdictFromTheAggregates) {
  const auto path = write_run(hs::test::temp_db("gpu_correlation_test", "aggregates.sqlite"));
  const RunDatabase db(path);
  const KernelCorrelationCheck c = db.check_kernel_correlation(db.last_run().id);
  EXPECT_TRUE(c.from_aggregates);
  expect_counts(c);
}

TEST(KernelCorrelationCheck, CountsTheSameFromTheRawTablesOfAFileWithoutAggregates) {
  const auto path = write_run(hs::test::temp_db("gpu_correlation_test", "raw.sqlite"));
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &raw), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(raw, "DELETE FROM kernel_stats", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(raw);
  const RunDatabase db(path);
  const KernelCorrelationCheck c = db.check_kernel_correlation(db.last_run().id);
  EXPECT_FALSE(c.from_aggregates);
  expect_counts(c);
}

TEST(KernelCorrelationCheck, TheAggregatesReadBackWithTheirRangesAndFeedTheReportTable) {
  const auto path = write_run(hs::test::temp_db("gpu_correlation_test", "read.sqlite"));
  const RunDatabase db(path);
  const RunData data = load_run(db, db.last_run().id);
  ASSERT_EQ(data.kernel_stats.size(), 5u);
  int in_gen = 0;
  for (const KernelStatRow& k : data.kernel_stats) {
    if (k.range == "gen") ++in_gen;
    if (k.name == "untagged_kernel") EXPECT_EQ(k.range, "");
    if (k.name == "ncclDevKernel_AllReduce") {
      EXPECT_EQ(k.range, "comm/all_reduce");
      EXPECT_EQ(k.kernel_class, "nccl");
    }
    EXPECT_EQ(k.total_ns, 50);
  }
  EXPECT_EQ(in_gen, 3);
  ASSERT_EQ(data.stream_busy.size(), 1u);
  EXPECT_EQ(data.stream_busy[0].busy_ns, 250) << "five disjoint 50 ns kernels on one stream";
  const GpuKernelSummary s = gpu_kernel_summary(data, {0});
  EXPECT_EQ(s.source, "kernel_stats");
  EXPECT_EQ(s.records, 5);
  EXPECT_EQ(s.total_ns, 250);
  EXPECT_EQ(s.busy_ns, 250);
  EXPECT_TRUE(gpu_kernel_summary(data, {1}).top.empty()) << "step 1 recorded no GPU activity";
}

}  // namespace
}  // namespace hs::reports
