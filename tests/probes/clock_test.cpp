// clock_test.cpp — the one clock (clock.h): converted ticks are now_ns() and CLOCK_MONOTONIC's time,
// a refinement never moves a tick already read, ranges timed in ticks land on the timeline of the
// records stamped with now_ns() (comm, memory) in both clocks — the calibrated TSC and the
// steady_clock fallback (HS_CLOCK=steady_clock, in a child process: the clock is chosen once per
// process) — and under the clock shift of multi-host sync; the range payload reaches SQLite.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

#include "../process.h"
#include "../test_db.h"
#include "hybridscope/probes/clock.h"
#include "hybridscope/probes/range.h"
#include "hybridscope/probes/recorder.h"

namespace {

using namespace hs::probes;
using hs::test::query_rows;

std::int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::int64_t number(const std::string& path, const std::string& sql) {
  const auto rows = query_rows(path, sql);
  return rows.empty() || rows[0] == "NULL" ? -1 : std::stoll(rows[0]);
}

// The clock this machine should give a process with this test's environment: the TSC where
// /proc/cpuinfo says it is invariant, unless HS_CLOCK=steady_clock.
ClockSource expected_source() {
  if (const char* env = std::getenv("HS_CLOCK"); env && std::strcmp(env, "steady_clock") == 0)
    return ClockSource::kSteadyClock;
#if defined(__x86_64__)
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("flags", 0) != 0) continue;
    line += ' ';
    const bool invariant =
        line.find(" constant_tsc ") != std::string::npos && line.find(" nonstop_tsc ") != std::string::npos;
    return invariant ? ClockSource::kTsc : ClockSource::kSteadyClock;
  }
#endif
  return ClockSource::kSteadyClock;
}

TEST(Clock, IsTheTscWhereItIsInvariant) {
  const ClockInfo info = clock_info();
  EXPECT_EQ(info.source, expected_source());
  if (info.source == ClockSource::kTsc) {
    EXPECT_GT(info.tsc_hz, 1e8) << "a TSC slower than 100 MHz: a wrong calibration";
    EXPECT_LT(info.tsc_hz, 1e10);
  } else {
    EXPECT_EQ(info.tsc_hz, 0.0);
  }
}

// now_ns() is ticks_to_ns(now_ticks()): a now_ns() read between two tick reads converts between them.
TEST(Clock, ConvertedTicksAreNowNs) {
  for (int i = 0; i < 10000; ++i) {
    const std::int64_t before = now_ticks();
    const std::int64_t ns = now_ns();
    const std::int64_t after = now_ticks();
    ASSERT_LE(ticks_to_ns(before), ns) << "at read " << i;
    ASSERT_LE(ns, ticks_to_ns(after)) << "at read " << i;
  }
}

// The converted clock reads CLOCK_MONOTONIC's time. Bound: 100 us. The startup calibration takes
// two paired reads 20 ms apart, each bracketed by TSC reads no wider than ~1 us even on a loaded
// machine (the narrowest of 16), so its slope is off by at most ~50 ppm; this process has run a few
// seconds at most, and every refinement (each recorder's writer, and the forced one here) steers the
// error back to 0 with a slope measured over the whole run. 100 us leaves that 2x margin; a wrong
// rate (a TSC that changes with the CPU frequency, a calibration against the wrong clock) is off by
// percents: milliseconds after the 300 ms here.
TEST(Clock, AgreesWithClockMonotonic) {
  constexpr std::int64_t kBoundNs = 100'000;
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  refine_clock(/*force=*/true);
  ASSERT_EQ(clock_shift_ns(), 0);
  std::int64_t narrowest = INT64_MAX, difference = 0;
  for (int i = 0; i < 64; ++i) {
    const std::int64_t before = steady_ns();
    const std::int64_t ns = now_ns();
    const std::int64_t after = steady_ns();
    if (after - before < narrowest) {
      narrowest = after - before;
      difference = ns - (before + (after - before) / 2);
    }
  }
  EXPECT_LT(std::abs(difference), kBoundNs) << "now_ns() - CLOCK_MONOTONIC";
  EXPECT_LT(clock_info().calibration_error_ns, kBoundNs);
  if (clock_info().source == ClockSource::kTsc) {
    EXPECT_GE(clock_info().refinements, 1);
  }
}

// A refinement continues the map for later ticks only: a tick read before it converts to the same
// ns after it (the writer converts ticks long after they were read), and time keeps going forward.
TEST(Clock, RefinementNeverMovesATickAlreadyRead) {
  const std::int64_t ticks = now_ticks();
  const std::int64_t ns = ticks_to_ns(ticks);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  refine_clock(/*force=*/true);
  EXPECT_EQ(ticks_to_ns(ticks), ns);
  EXPECT_GE(now_ns(), ns + 20'000'000);
}

// Ranges timed in ticks, converted by the writer, lie inside the now_ns() stamps taken around them
// (a collective's, a memory sample's) — also when the clock is shifted onto rank 0's (multi-host
// sync) — and carry their payload; a range without one writes NULLs.
TEST(Clock, RangesLandOnTheTimelineOfCommAndMemoryRecords) {
  const auto path = hs::test::temp_db("clock_test", "timeline.sqlite");
  constexpr std::int64_t kShift = 3'600'000'000'000;  // an hour: another host's boot
  set_clock_shift_ns(kShift);
  {
    Recorder rec(path);
    rec.begin_run({});
    StepTimings timings(&rec);
    timings.begin_step(4);
    const std::int64_t before = now_ns();
    {
      HS_PROBE_TRACE_RANGE_ARGS(timings, "decode_step", kPhase, 8, 512);
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      MemorySample m;
      m.ts_ns = now_ns();
      m.step = 4;
      m.phase = "inside";
      rec.record_memory(m);
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    { HS_PROBE_TRACE_RANGE(timings, "no_payload", kPhase); }
    rec.record_comm({"barrier", "world", 1, 0, "", before, now_ns(), 4});
    rec.end_run(RunStatus::kCompleted);
  }
  set_clock_shift_ns(0);
  const std::string range = "(SELECT id FROM ranges WHERE name_id = (SELECT id FROM strings WHERE value = 'decode_step'))";
  const std::int64_t start = number(path, "SELECT start_ns FROM ranges WHERE id = " + range);
  const std::int64_t end = number(path, "SELECT end_ns FROM ranges WHERE id = " + range);
  const std::int64_t comm_start = number(path, "SELECT start_ns FROM comm_ops");
  const std::int64_t comm_end = number(path, "SELECT end_ns FROM comm_ops");
  const std::int64_t sample = number(path, "SELECT ts_ns FROM memory_samples");
  EXPECT_LE(comm_start, start);
  EXPECT_LT(start, sample);
  EXPECT_LT(sample, end);
  EXPECT_LE(end, comm_end);
  EXPECT_GE(end - start, 4'000'000) << "two 2 ms sleeps";
  EXPECT_GT(start, kShift) << "ranges follow the clock shift as now_ns() does";
  EXPECT_EQ(query_rows(path, "SELECT batch_size, context_len FROM ranges WHERE id = " + range),
            std::vector<std::string>{"8|512"});
  EXPECT_EQ(query_rows(path, "SELECT batch_size, context_len FROM ranges WHERE name_id = "
                             "(SELECT id FROM strings WHERE value = 'no_payload')"),
            std::vector<std::string>{"NULL|NULL"});
  EXPECT_EQ(query_rows(path, "SELECT clock_source FROM ranks"),
            std::vector<std::string>{to_string(clock_info().source)});
}

// A child process on each clock: the TSC (where invariant) and the forced fallback. Each records
// a range with a payload, a memory sample inside it and a collective around it.
class ClockChild : public ::testing::TestWithParam<const char*> {};

TEST_P(ClockChild, RecordsOnOneTimelineAndSaysWhichClock) {
  const std::string clock = GetParam();
  const auto db = hs::test::temp_db("clock_test", "child_" + clock + ".sqlite");
  const auto out = db + ".out";
  const pid_t pid = hs::test::spawn({HS_PROBE_CLOCK_CHILD, db}, {"HS_CLOCK=" + clock}, out);
  ASSERT_GT(pid, 0);
  ASSERT_TRUE(hs::test::exited_ok(hs::test::wait_for(pid, std::chrono::seconds(60))));
  const bool tsc = clock == "tsc" && expected_source() == ClockSource::kTsc;
  const std::string source = tsc ? "tsc" : "steady_clock";
  std::ifstream printed(out);
  std::string line;
  std::getline(printed, line);
  EXPECT_EQ(line, source);
  EXPECT_EQ(query_rows(db, "SELECT clock_source, tsc_hz IS NULL, status FROM ranks"),
            std::vector<std::string>{source + (tsc ? "|0" : "|1") + "|completed"});
  const std::int64_t start = number(db, "SELECT start_ns FROM ranges");
  const std::int64_t end = number(db, "SELECT end_ns FROM ranges");
  const std::int64_t sample = number(db, "SELECT ts_ns FROM memory_samples");
  EXPECT_LE(number(db, "SELECT start_ns FROM comm_ops"), start);
  EXPECT_LT(start, sample);
  EXPECT_LT(sample, end);
  EXPECT_LE(end, number(db, "SELECT end_ns FROM comm_ops"));
  EXPECT_GE(end - start, 10'000'000) << "two 5 ms sleeps";
  EXPECT_EQ(query_rows(db, "SELECT batch_size, context_len FROM ranges"), std::vector<std::string>{"2|3"});
  // The ranks row's start and end (UNIX ns through epoch_offset_ns) bracket the range too.
  const std::int64_t offset = number(db, "SELECT clock_offset_ns FROM ranks");
  EXPECT_LE(number(db, "SELECT start_unix_ns FROM ranks"), start + offset);
  EXPECT_GE(number(db, "SELECT end_unix_ns FROM ranks"), end + offset);
}

INSTANTIATE_TEST_SUITE_P(Clocks, ClockChild, ::testing::Values("tsc", "steady_clock"));

}  // namespace
