// probes_off_test.cpp — compiled with HS_PROBES_DISABLED (as every target is with CMake
// HS_ENABLE_PROBES=OFF): the range macros compile to nothing. With a recorder and an NVTX tool
// both listening, a scope wrapped in HS_PROBE_RANGE / HS_PROBE_TRACE_RANGE(_ARGS) leaves no timing, no
// range record and no NVTX event. What the trainer reports then: docs/metrics.md.
#include <gtest/gtest.h>

#include <string>

#include "../../test_db.h"
#include "hybridscope/probes/range.h"
#include "hybridscope/probes/recorder.h"
#if defined(HS_NVTX_INJECTION_PATH)
#include "../nvtx/nvtx_log.h"
#endif

#if !defined(HS_PROBES_DISABLED)
#error "probes_off_test.cpp must be compiled with HS_PROBES_DISABLED"
#endif

namespace hs::probes {
namespace {

int work_in_ranges(StepTimings& timings) {
  int sum = 0;
  HS_PROBE_RANGE(timings, "step", kStep);
  for (int i = 0; i < 3; ++i) {
    HS_PROBE_RANGE(timings, "gen", kPhase);
    HS_PROBE_TRACE_RANGE(timings, "gen/decode", kPhase);
    HS_PROBE_TRACE_RANGE_ARGS(timings, "gen/decode_step", kPhase, 8, 512 + i);
    HS_PROBE_TRACE_RANGE_ARGS(thread_timings(), "optimizer_step", kPhase, i, i);
    sum += i;
  }
  return sum;
}

TEST(ProbesCompiledOut, RangesTimeNothingRecordNothingEmitNothing) {
  const auto path = test::temp_db("probes_off", "off.sqlite");
  Recorder rec(path);
  rec.begin_run({});
  StepTimings timings(&rec);
  const ThreadTimings installed(timings);  // thread_timings() would record too, were the macros there
#if defined(HS_NVTX_INJECTION_PATH)
  ASSERT_TRUE(nvtx_attached()) << "the test NVTX tool is not attached: this test would prove nothing about NVTX";
  const std::size_t before = test::nvtx_log().size();
#endif
  timings.begin_step(1);
  EXPECT_EQ(work_in_ranges(timings), 3);  // the wrapped code still runs
  rec.end_run(RunStatus::kCompleted);

  EXPECT_TRUE(timings.totals().empty());
  EXPECT_EQ(timings.seconds("step"), 0.0);
  EXPECT_EQ(test::query_row(path, "SELECT COUNT(*) FROM ranges"), "0");
  EXPECT_EQ(test::query_row(path, "SELECT status FROM runs"), "completed");  // the recorder itself works
#if defined(HS_NVTX_INJECTION_PATH)
  EXPECT_EQ(test::nvtx_log_since(before), std::vector<std::string>{});
#endif
}

// The same guard class is still there for code that names it explicitly (what the macros hide):
// the compile-out is the macros', not a second ScopedRange.
TEST(ProbesCompiledOut, AnExplicitScopedRangeStillTimes) {
  StepTimings timings;
  { ScopedRange r(timings, "explicit", Category::kPhase); }
  EXPECT_EQ(timings.totals().size(), 1u);
}

}  // namespace
}  // namespace hs::probes
