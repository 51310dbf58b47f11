// clock_drift_bench.cpp — hs_clock_drift_bench: how far the one clock (clock.h) strays from
// CLOCK_MONOTONIC over a long run. Once a second, for SECONDS (default 600), it refines the clock as
// the recorder's writer thread does, then reads the converted clock (now_ns()) and CLOCK_MONOTONIC
// side by side (the narrowest of 16 brackets) and prints their difference. At the end: the largest
// |difference| of the converted clock, and the drift of the startup calibration alone — the map of
// the first ~20 ms never refined — as max |difference| and in ppm (its slope against
// CLOCK_MONOTONIC over the run). Not a Google Benchmark: it measures a run, not a call.
// Run: ./build/release/bench/hs_clock_drift_bench [SECONDS]
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <thread>

#include "hybridscope/probes/clock.h"

namespace {

using hs::probes::now_ns;
using hs::probes::now_ticks;
using hs::probes::ticks_to_ns;

std::int64_t monotonic_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// (ticks, converted ns, CLOCK_MONOTONIC ns): the monotonic read bracketed by two clock reads.
struct Reading {
  std::int64_t ticks, converted, monotonic, width;
};
Reading read_side_by_side() {
  Reading best{0, 0, 0, std::numeric_limits<std::int64_t>::max()};
  for (int i = 0; i < 16; ++i) {
    const std::int64_t before = now_ticks();
    const std::int64_t mono = monotonic_ns();
    const std::int64_t after = now_ticks();
    if (after - before < best.width) {
      const std::int64_t mid = before + (after - before) / 2;
      best = {mid, ticks_to_ns(mid), mono, after - before};
    }
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const int seconds = argc > 1 ? std::atoi(argv[1]) : 600;
  if (seconds <= 0) {
    std::fprintf(stderr, "usage: %s [SECONDS > 0]\n", argv[0]);
    return 2;
  }
  const hs::probes::ClockInfo start_info = hs::probes::clock_info();
  // The startup calibration as a fixed linear map: ticks per ns from the clock's first ~20 ms.
  const Reading first = read_side_by_side();
  const double startup_ns_per_tick = start_info.tsc_hz > 0 ? 1e9 / start_info.tsc_hz : 1.0;
  std::printf("clock %s, tsc_hz at start %.0f\n", hs::probes::to_string(start_info.source), start_info.tsc_hz);
  std::printf("%8s %16s %16s\n", "t_s", "converted-mono", "startup_map-mono");
  double max_converted = 0, max_startup = 0, last_startup = 0, last_t = 0;
  for (int s = 1; s <= seconds; ++s) {
    std::this_thread::sleep_until(std::chrono::steady_clock::now() + std::chrono::seconds(1));
    hs::probes::refine_clock();
    const Reading r = read_side_by_side();
    const double converted = static_cast<double>(r.converted - r.monotonic);
    const double startup = static_cast<double>(first.converted) +
                           static_cast<double>(r.ticks - first.ticks) * startup_ns_per_tick -
                           static_cast<double>(r.monotonic);
    max_converted = std::max(max_converted, std::abs(converted));
    max_startup = std::max(max_startup, std::abs(startup));
    last_startup = startup - static_cast<double>(first.converted - first.monotonic);
    last_t = static_cast<double>(r.monotonic - first.monotonic);
    if (s <= 10 || s % 30 == 0) std::printf("%8d %16.0f %16.0f\n", s, converted, startup);
    std::fflush(stdout);
  }
  const hs::probes::ClockInfo end_info = hs::probes::clock_info();
  std::printf("over %d s: converted clock max |now_ns - CLOCK_MONOTONIC| = %.0f ns; "
              "startup calibration alone: max %.0f ns, drift %.3f ppm; tsc_hz at end %.0f, %d refinements\n",
              seconds, max_converted, max_startup, last_t > 0 ? last_startup / last_t * 1e6 : 0.0, end_info.tsc_hz,
              end_info.refinements);
  return 0;
}
