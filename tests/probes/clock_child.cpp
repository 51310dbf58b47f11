// clock_child.cpp — hs_probe_clock_child: a process whose clock the test chooses (HS_CLOCK in its
// environment, read once when the clock is first used). It records one run into DB: a scoped
// range with a payload bracketed by a collective's now_ns() stamps and a memory sample inside the
// range, then ends the run; clock_test checks that they share one timeline and what the ranks row
// says about the clock. Prints the clock source on stdout.
// Usage: hs_probe_clock_child DB
#include <chrono>
#include <cstdio>
#include <thread>

#include "hybridscope/probes/clock.h"
#include "hybridscope/probes/range.h"
#include "hybridscope/probes/recorder.h"

int main(int argc, char** argv) {
  namespace p = hs::probes;
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DB\n", argv[0]);
    return 2;
  }
  try {
    p::Recorder rec(argv[1]);
    rec.begin_run({"clock_child", "hs_probe_clock_child", "", 1, "", {}});
    p::StepTimings timings(&rec);
    timings.begin_step(1);
    const std::int64_t before = p::now_ns();
    {
      HS_PROBE_TRACE_RANGE_ARGS(timings, "child/range", kPhase, 2, 3);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      p::MemorySample m;
      m.ts_ns = p::now_ns();
      m.step = 1;
      m.phase = "inside";
      rec.record_memory(m);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    rec.record_comm({"barrier", "world", 1, 0, "", before, p::now_ns(), 1});
    if (!rec.end_run(p::RunStatus::kCompleted)) return 1;
    std::printf("%s\n", p::to_string(p::clock_info().source));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hs_probe_clock_child: %s\n", e.what());
    return 1;
  }
}
