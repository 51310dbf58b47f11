// range_test.cpp — who consumes a range: timed ranges always feed the step's totals (timing_s),
// trace-only ranges never do; both become range records when a recorder is attached; a
// trace-only range with no consumer does nothing at all (not even the depth count). Runs without
// an NVTX tool (tests/probes/nvtx covers the tool's side).
#include <gtest/gtest.h>

#include "../test_db.h"
#include "hybridscope/probes/nvtx.h"
#include "hybridscope/probes/range.h"
#include "hybridscope/probes/recorder.h"

namespace hs::probes {
namespace {

class Ranges : public ::testing::Test {
 protected:
  void SetUp() override {
#if defined(HS_PROBES_DISABLED)
    GTEST_SKIP() << "built with HS_ENABLE_PROBES=OFF: the macros compile to nothing (tests/probes/compiled_out)";
#endif
    if (nvtx_attached()) GTEST_SKIP() << "an NVTX tool is attached (NVTX_INJECTION64_PATH): every range has a consumer";
  }
};

TEST_F(Ranges, ConsumersFollowTheRecorderAndTheKind) {
  StepTimings timings;
  EXPECT_EQ(timings.consumers(RangeKind::kTimed), kConsumerTiming);
  EXPECT_EQ(timings.consumers(RangeKind::kTraceOnly), 0u);
  const auto path = test::temp_db("ranges", "consumers.sqlite");
  Recorder rec(path);
  timings.set_recorder(&rec);
  EXPECT_EQ(timings.consumers(RangeKind::kTimed), kConsumerTiming | kConsumerRecorder);
  EXPECT_EQ(timings.consumers(RangeKind::kTraceOnly), kConsumerRecorder);
  timings.set_recorder(nullptr);
  EXPECT_EQ(timings.consumers(RangeKind::kTraceOnly), 0u);
}

TEST_F(Ranges, TraceOnlyRangeWithoutConsumerLeavesNoTrace) {
  StepTimings timings;
  timings.begin_step(1);
  {
    HS_PROBE_TRACE_RANGE(timings, "decode", kPhase);
    // Not counted as a level: the timed range inside is at depth 0 (its push() returns 0).
    EXPECT_EQ(timings.push(), 0);
    timings.pop({"probe", Category::kPhase, 0, 0, 0, 0}, 0);
  }
  EXPECT_TRUE(timings.totals().empty());
  { HS_PROBE_RANGE(timings, "gen", kPhase); }
  ASSERT_EQ(timings.totals().size(), 1u);
  EXPECT_STREQ(timings.totals()[0].first, "gen");
}

TEST_F(Ranges, TraceOnlyRangesAreRecordedButNotTimed) {
  const auto path = test::temp_db("ranges", "trace.sqlite");
  Recorder rec(path);
  rec.begin_run({});
  StepTimings timings(&rec);
  timings.begin_step(3);
  {
    HS_PROBE_RANGE(timings, "update_actor", kPhase);
    for (int i = 0; i < 4; ++i) {
      HS_PROBE_TRACE_RANGE(timings, "update_actor/micro_batch", kPhase);
    }
  }
  rec.end_run(RunStatus::kCompleted);
  ASSERT_EQ(timings.totals().size(), 1u);
  EXPECT_STREQ(timings.totals()[0].first, "update_actor");
  EXPECT_EQ(test::query_rows(path, "SELECT s.value, r.depth, r.step, COUNT(*) FROM ranges r JOIN strings s "
                                   "ON s.id = r.name_id GROUP BY s.value ORDER BY s.value"),
            (std::vector<std::string>{"update_actor|0|3|1", "update_actor/micro_batch|1|3|4"}));
  // Each micro-batch lies inside the phase.
  EXPECT_EQ(test::query_row(path, "SELECT COUNT(*) FROM ranges c JOIN ranges p ON p.depth = 0 WHERE c.depth = 1 "
                                  "AND c.start_ns >= p.start_ns AND c.end_ns <= p.end_ns"),
            "4");
}

TEST_F(Ranges, DetachingTheRecorderInsideARangeIsSafe) {
  const auto path = test::temp_db("ranges", "detach.sqlite");
  Recorder rec(path);
  rec.begin_run({});
  StepTimings timings(&rec);
  {
    HS_PROBE_TRACE_RANGE(timings, "open_while_attached", kPhase);
    timings.set_recorder(nullptr);
  }
  rec.end_run(RunStatus::kCompleted);
  EXPECT_EQ(test::query_row(path, "SELECT COUNT(*) FROM ranges"), "0");
}

}  // namespace
}  // namespace hs::probes
