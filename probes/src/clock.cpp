// clock.cpp — the one clock (see clock.h): the TSC, calibrated against CLOCK_MONOTONIC, or
// CLOCK_MONOTONIC itself.
//
// The TSC map is piecewise linear: segment i converts ticks >= tick0 as
//   ns = ns0 + (ticks − tick0) × ns_per_tick.
// The first segment comes from a ~20 ms calibration; each refine_clock() appends one that starts
// where the previous one ends at that tick (the map stays continuous and monotonic) with the slope
// measured over the whole run so far, corrected to steer the measured error back towards 0.
// Segments are never changed once published, so a tick converted by the writer long after it was
// read gets the ns that now_ns() would have returned for it. (A tick read in the few ns between a
// refinement's paired read and the new segment's publication may be converted by both segments;
// they differ by (ticks − tick0) × Δslope: far below a nanosecond.)
#include "hybridscope/probes/clock.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <mutex>
#include <string>
#include <thread>

namespace hs::probes {

namespace detail {
bool g_clock_is_tsc = false;

std::int64_t steady_clock_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace detail

namespace {

struct Segment {
  std::int64_t tick0;
  std::int64_t ns0;
  double ns_per_tick;
};

// One second of refinements for the first minute, then one every 16 s: 4096 segments last ~18 h,
// after which the map is only measured (the slope is by then known to far below 1 ppm).
constexpr int kMaxSegments = 4096;
constexpr std::int64_t kCalibrationNs = 20'000'000;
// A measured error is steered out over four refinement intervals: by the next on-time refinement a
// quarter of it is gone. A refinement k intervals late finds |1 − k/4| of it: it overshoots past 4
// and grows only past 8. (Steering it out within one interval grew 16x per refinement once the
// interval went from 1 s to 16 s.)
constexpr int kSteerIntervals = 4;
// The steering never bends the slope by more than NTP's own maximum slew.
constexpr double kMaxSteer = 500e-6;

Segment g_segments[kMaxSegments];
std::atomic<int> g_segment_count{0};  // release after a segment is written
std::atomic<double> g_seconds_per_tick{1e-9};
std::atomic<double> g_tsc_hz{0.0};
std::atomic<std::int64_t> g_max_error_ns{0};
std::atomic<int> g_refinements{0};
std::atomic<std::int64_t> g_shift_ns{0};

std::mutex g_refine_mutex;            // one refinement at a time
std::int64_t g_anchor_tick = 0;       // the calibration's first paired read (under the mutex
std::int64_t g_anchor_ns = 0;         // once calibrated)
std::int64_t g_last_refine_ns = 0;

// One paired read: a CLOCK_MONOTONIC read bracketed by two TSC reads, the narrowest of a few;
// the tick is the bracket's middle. Half the width bounds the pairing error.
struct Paired {
  std::int64_t tick;
  std::int64_t ns;
  std::int64_t width;
};

Paired paired_read() noexcept {
  Paired best{0, 0, std::numeric_limits<std::int64_t>::max()};
  for (int i = 0; i < 16; ++i) {
#if defined(__x86_64__)
    const auto before = static_cast<std::int64_t>(__rdtsc());
    const std::int64_t ns = detail::steady_clock_ns();
    const auto after = static_cast<std::int64_t>(__rdtsc());
#else
    const std::int64_t before = 0, ns = detail::steady_clock_ns(), after = 0;
#endif
    if (after - before < best.width) best = {before + (after - before) / 2, ns, after - before};
  }
  return best;
}

// /proc/cpuinfo's flags (the first CPU's): an invariant TSC is constant_tsc (fixed rate across
// P-states) and nonstop_tsc (keeps counting in deep C-states), the conditions Linux itself
// requires before it trusts the TSC as a clocksource.
bool invariant_tsc() {
#if defined(__x86_64__)
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    line += ' ';
    return line.find(" constant_tsc ") != std::string::npos && line.find(" nonstop_tsc ") != std::string::npos;
  }
#endif
  return false;
}

// HS_CLOCK=steady_clock forces the fallback (tests, or a machine whose TSC is not to be trusted);
// HS_CLOCK=tsc or unset: the TSC where it is invariant.
bool want_tsc() {
  const char* env = std::getenv("HS_CLOCK");
  if (env && std::strcmp(env, "steady_clock") == 0) return false;
  if (env && *env && std::strcmp(env, "tsc") != 0)
    std::fprintf(stderr, "hybridscope: HS_CLOCK=%s is neither 'tsc' nor 'steady_clock'; using the default\n", env);
  return invariant_tsc();
}

void calibrate() noexcept {
  try {
    if (!want_tsc()) return;
  } catch (...) {
    return;
  }
  const Paired first = paired_read();
  std::this_thread::sleep_for(std::chrono::nanoseconds(kCalibrationNs));
  const Paired second = paired_read();
  if (second.tick <= first.tick || second.ns <= first.ns) return;  // a TSC that does not count: fall back
  const double ns_per_tick = static_cast<double>(second.ns - first.ns) / static_cast<double>(second.tick - first.tick);
  g_anchor_tick = first.tick;
  g_anchor_ns = first.ns;
  g_last_refine_ns = second.ns;
  g_segments[0] = {second.tick, second.ns, ns_per_tick};
  g_segment_count.store(1, std::memory_order_release);
  g_seconds_per_tick.store(ns_per_tick * 1e-9, std::memory_order_relaxed);
  g_tsc_hz.store(1e9 / ns_per_tick, std::memory_order_relaxed);
  detail::g_clock_is_tsc = true;
}

// Converted ticks before the shift.
std::int64_t map_ticks(std::int64_t ticks) noexcept {
  const int n = g_segment_count.load(std::memory_order_acquire);
  int i = n - 1;
  while (i > 0 && g_segments[i].tick0 > ticks) --i;
  const Segment& s = g_segments[i];
  return s.ns0 + std::llround(static_cast<double>(ticks - s.tick0) * s.ns_per_tick);
}

std::int64_t unshifted_now_ns() noexcept {
  detail::init_clock();
  const std::int64_t ticks = now_ticks();
  return detail::g_clock_is_tsc ? map_ticks(ticks) : ticks;
}

// UNIX-epoch ns minus the clock's ns (unshifted).
std::int64_t measure_epoch_offset() noexcept {
  // Bracket the system-clock read between two clock reads; keep the narrowest bracket.
  std::int64_t best_width = std::numeric_limits<std::int64_t>::max();
  std::int64_t best_offset = 0;
  for (int i = 0; i < 8; ++i) {
    const std::int64_t before = unshifted_now_ns();
    const std::int64_t wall = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                  std::chrono::system_clock::now().time_since_epoch())
                                  .count();
    const std::int64_t after = unshifted_now_ns();
    if (after - before < best_width) {
      best_width = after - before;
      best_offset = wall - (before + (after - before) / 2);
    }
  }
  return best_offset;
}

}  // namespace

namespace detail {
void init_clock() noexcept {
  static const bool calibrated = (calibrate(), true);
  static_cast<void>(calibrated);
}
}  // namespace detail

const char* to_string(ClockSource source) noexcept {
  return source == ClockSource::kTsc ? "tsc" : "steady_clock";
}

std::int64_t ticks_to_ns(std::int64_t ticks) noexcept {
  detail::init_clock();
  const std::int64_t shift = g_shift_ns.load(std::memory_order_relaxed);
  return (detail::g_clock_is_tsc ? map_ticks(ticks) : ticks) + shift;
}

double seconds_per_tick() noexcept { return g_seconds_per_tick.load(std::memory_order_relaxed); }

std::int64_t now_ns() noexcept { return unshifted_now_ns() + g_shift_ns.load(std::memory_order_relaxed); }

void set_clock_shift_ns(std::int64_t shift_ns) noexcept { g_shift_ns.store(shift_ns, std::memory_order_relaxed); }

std::int64_t clock_shift_ns() noexcept { return g_shift_ns.load(std::memory_order_relaxed); }

std::int64_t epoch_offset_ns() noexcept {
  static const std::int64_t offset = measure_epoch_offset();
  return offset - clock_shift_ns();
}

ClockInfo clock_info() noexcept {
  detail::init_clock();
  ClockInfo info;
  if (!detail::g_clock_is_tsc) return info;
  info.source = ClockSource::kTsc;
  info.tsc_hz = g_tsc_hz.load(std::memory_order_relaxed);
  info.calibration_error_ns = g_max_error_ns.load(std::memory_order_relaxed);
  info.refinements = g_refinements.load(std::memory_order_relaxed);
  return info;
}

void refine_clock(bool force) noexcept {
  detail::init_clock();
  if (!detail::g_clock_is_tsc) return;
  std::lock_guard<std::mutex> lock(g_refine_mutex);
  const Paired p = paired_read();
  const int refinements = g_refinements.load(std::memory_order_relaxed);
  const std::int64_t interval = refinements < 60 ? 1'000'000'000 : 16'000'000'000;
  if (!force && p.ns - g_last_refine_ns < interval) return;
  g_last_refine_ns = p.ns;
  const std::int64_t predicted = map_ticks(p.tick);
  const std::int64_t error = predicted - p.ns;
  g_max_error_ns.store(std::max(g_max_error_ns.load(std::memory_order_relaxed), std::abs(error)),
                       std::memory_order_relaxed);
  g_refinements.store(refinements + 1, std::memory_order_relaxed);
  if (p.tick <= g_anchor_tick) return;
  const double run_ns_per_tick =
      static_cast<double>(p.ns - g_anchor_ns) / static_cast<double>(p.tick - g_anchor_tick);
  g_tsc_hz.store(1e9 / run_ns_per_tick, std::memory_order_relaxed);
  const int n = g_segment_count.load(std::memory_order_relaxed);
  if (n == kMaxSegments) return;
  // From here the map gains horizon − error ns per horizon of true time: back on CLOCK_MONOTONIC
  // kSteerIntervals intervals on if the run-long slope holds (a quarter of the way at the next).
  const double horizon = static_cast<double>(kSteerIntervals * interval);
  const double steer = std::clamp(static_cast<double>(error) / horizon, -kMaxSteer, kMaxSteer);
  const double slope = run_ns_per_tick * (1.0 - steer);
  g_segments[n] = {p.tick, predicted, slope};
  g_segment_count.store(n + 1, std::memory_order_release);
  g_seconds_per_tick.store(slope * 1e-9, std::memory_order_relaxed);
}

}  // namespace hs::probes
