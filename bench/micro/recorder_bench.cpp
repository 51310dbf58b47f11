// recorder_bench.cpp — what recording costs: the sustained rate of range records into SQLite
// (records written / wall time, the final flush included), and one range on the hot path with the
// recorder on and with recording off (StepTimings without a recorder), timed (HS_PROBE_RANGE,
// feeds timing_s) and trace-only (HS_PROBE_TRACE_RANGE), no NVTX tool attached.
// Goals (docs/benchmarks.md): >= 1,000,000 records/s; <= 10 ns per recorded range (issue 21: a
// range reads the clock twice in raw TSC ticks, the record is a per-thread append); <= 50 ns off.
// Run: ./build/release/bench/hs_recorder_bench
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "hybridscope/probes/clock.h"
#include "hybridscope/probes/range.h"
#include "hybridscope/probes/recorder.h"

namespace {

namespace fs = std::filesystem;
using namespace hs::probes;

std::string bench_db(const char* name) {
  const auto dir = fs::temp_directory_path() / ("hs_recorder_bench_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const auto path = dir / name;
  for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(path.string() + suffix);
  return path.string();
}

// Sustained rate: one thread records `records` ranges as fast as it can; the writer thread drains
// them into SQLite. Timed from the first record to the end of the flush that makes the last durable.
void BM_RecordIntoSqlite(benchmark::State& state) {
  const std::int64_t records = state.range(0);
  std::int64_t written = 0, dropped = 0;
  for (auto _ : state) {
    state.PauseTiming();
    const auto path = bench_db("rate.sqlite");
    {
      Recorder rec(path);
      rec.begin_run({});
      state.ResumeTiming();
      for (std::int64_t i = 0; i < records; ++i)
        rec.record_range({"gen", Category::kPhase, 1, i / 1000, i, i + 1});
      rec.flush();
      state.PauseTiming();
      dropped += rec.dropped_records();
      written += records - rec.dropped_records();
      if (rec.write_errors() != rec.dropped_records()) state.SkipWithError("SQLite write errors");
    }
    state.ResumeTiming();
  }
  state.counters["records_per_s"] = benchmark::Counter(static_cast<double>(written), benchmark::Counter::kIsRate);
  state.counters["dropped"] = static_cast<double>(dropped);
}
BENCHMARK(BM_RecordIntoSqlite)->Arg(2'000'000)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);

// A range loop records tens of millions of ranges a second, far beyond what the writer drains
// into SQLite (BM_RecordIntoSqlite): left alone, most would be dropped, and a dropped record costs
// less than a recorded one. Every kCatchUpEvery ranges the writer catches up outside the timed
// region, so that the figure is the recorded range's (hand-offs included); `dropped` shows 0.
constexpr std::int64_t kCatchUpEvery = 1 << 16;
void catch_up(benchmark::State& state, Recorder& rec, std::int64_t& n) {
  if (++n % kCatchUpEvery != 0) return;
  state.PauseTiming();
  rec.flush();
  state.ResumeTiming();
}

// One HS_PROBE_RANGE with the recorder on: two clock reads, the step's totals, a record appended
// to the thread's chunk (and, every chunk, the hand-off).
void BM_ScopedRangeRecorderOn(benchmark::State& state) {
  Recorder rec(bench_db("hot.sqlite"));
  rec.begin_run({});
  StepTimings timings(&rec);
  timings.begin_step(1);
  std::int64_t n = 0;
  for (auto _ : state) {
    { HS_PROBE_RANGE(timings, "gen", kPhase); }
    catch_up(state, rec, n);
  }
  rec.flush();
  state.counters["dropped"] = static_cast<double>(rec.dropped_records());
}
BENCHMARK(BM_ScopedRangeRecorderOn);

// Recording off at run time (hybridscope.probes.enable: false): a timed range still feeds the
// step's totals (timing_s/*), so it still reads the clock twice.
void BM_ScopedRangeRecorderOff(benchmark::State& state) {
  StepTimings timings;
  timings.begin_step(1);
  for (auto _ : state) {
    HS_PROBE_RANGE(timings, "gen", kPhase);
  }
  benchmark::DoNotOptimize(timings.seconds("gen"));
}
BENCHMARK(BM_ScopedRangeRecorderOff);

// A trace-only range (HS_PROBE_TRACE_RANGE: no timing consumer) with the recorder on.
void BM_TraceRangeRecorderOn(benchmark::State& state) {
  Recorder rec(bench_db("trace.sqlite"));
  rec.begin_run({});
  StepTimings timings(&rec);
  timings.begin_step(1);
  std::int64_t n = 0;
  for (auto _ : state) {
    { HS_PROBE_TRACE_RANGE(timings, "gen/decode", kPhase); }
    catch_up(state, rec, n);
  }
  rec.flush();
  state.counters["dropped"] = static_cast<double>(rec.dropped_records());
}
BENCHMARK(BM_TraceRangeRecorderOn);

// A trace-only range nobody consumes (recording off, no NVTX tool attached): the run-time
// disabled path, one load and a branch. DoNotOptimize(timings) makes the compiler reload the
// consumer mask every iteration, as it must in real code, instead of hoisting it out of the loop.
void BM_TraceRangeRecorderOff(benchmark::State& state) {
  StepTimings timings;
  timings.begin_step(1);
  if (timings.consumers(RangeKind::kTraceOnly) != 0) state.SkipWithError("an NVTX tool is attached");
  for (auto _ : state) {
    benchmark::DoNotOptimize(timings);
    HS_PROBE_TRACE_RANGE(timings, "gen/decode", kPhase);
  }
}
BENCHMARK(BM_TraceRangeRecorderOff);

// One read of the one clock converted to ns (what collectives and samples pay).
void BM_NowNs(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(now_ns());
}
BENCHMARK(BM_NowNs);

// One raw read of the one clock (rdtsc on an invariant TSC): a range pays two, the floor under
// both ScopedRange figures.
void BM_NowTicks(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(now_ticks());
}
BENCHMARK(BM_NowTicks);

// record_range alone (no clock reads): the recorder's own share of the hot path.
void BM_RecordRangeOnly(benchmark::State& state) {
  Recorder rec(bench_db("append.sqlite"));
  rec.begin_run({});
  std::int64_t i = 0;
  for (auto _ : state) {
    rec.record_range({"gen", Category::kPhase, 1, 1, i, i + 1});
    catch_up(state, rec, i);
  }
  rec.flush();
  state.counters["dropped"] = static_cast<double>(rec.dropped_records());
}
BENCHMARK(BM_RecordRangeOnly);

}  // namespace

BENCHMARK_MAIN();
