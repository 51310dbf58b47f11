// clock.h — the one clock of hybridscope: nanoseconds on the run's timeline, plus the offset that
// maps them to the UNIX epoch so that ranks and hosts line up on one timeline.
//
// The clock is read in ticks on the hot path and converted to nanoseconds once, off it:
//   - x86-64 with an invariant TSC (/proc/cpuinfo: constant_tsc and nonstop_tsc): ticks are the
//     TSC (rdtsc, ~12 ns on this project's build machine against ~21 ns for CLOCK_MONOTONIC through
//     the vDSO). The first use calibrates ticks per ns against CLOCK_MONOTONIC over ~20 ms and
//     anchors the map at CLOCK_MONOTONIC, so converted ticks read CLOCK_MONOTONIC's time;
//     refine_clock() (the recorder's writer thread calls it at each drain: once a second for the
//     first minute, then every 16 s) measures the map's error against CLOCK_MONOTONIC and continues
//     it from there with a slope refined over the whole run, steering the error back towards 0.
//   - otherwise (another architecture, no invariant TSC, or HS_CLOCK=steady_clock in the
//     environment): ticks are CLOCK_MONOTONIC ns (std::chrono::steady_clock), the map the identity.
// Either way now_ns() == ticks_to_ns(now_ticks()): a range's ticks converted when the recorder
// writes them land on the same timeline as the now_ns() stamps of collectives, memory samples,
// switches and CUPTI's GPU records.
#pragma once

#include <cstdint>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace hs::probes {

/// Where ticks come from (ranks.clock_source).
enum class ClockSource { kTsc, kSteadyClock };
/// "tsc" | "steady_clock".
const char* to_string(ClockSource source) noexcept;

namespace detail {
/// True once the clock is calibrated on the TSC; constant-initialised false, set by the first
/// init_clock() (before anything can read ticks: StepTimings and Recorder call it).
extern bool g_clock_is_tsc;
std::int64_t steady_clock_ns() noexcept;
/// Calibrates the clock once per process (thread-safe; later calls return at once).
void init_clock() noexcept;
}  // namespace detail

/// The clock's raw reading: TSC ticks, or CLOCK_MONOTONIC ns on the fallback. Hot path: no
/// conversion, no shift; ticks_to_ns() turns it into the timeline's ns. Valid after init_clock()
/// (any now_ns(), StepTimings or Recorder has run it).
inline std::int64_t now_ticks() noexcept {
#if defined(__x86_64__)
  if (detail::g_clock_is_tsc) return static_cast<std::int64_t>(__rdtsc());
#endif
  return detail::steady_clock_ns();
}

/// A now_ticks() reading in ns on the run's timeline (the clock shift included): what now_ns()
/// returned at that moment.
std::int64_t ticks_to_ns(std::int64_t ticks) noexcept;

/// Seconds per tick of the current calibration: durations (end - start ticks) in seconds with
/// one multiply (the step's timing totals). 1e-9 on the fallback.
double seconds_per_tick() noexcept;

/// Time in ns on the run's timeline: CLOCK_MONOTONIC as the TSC map reproduces it (or read
/// directly on the fallback), plus the clock shift (below): on every rank rank 0's monotonic clock.
std::int64_t now_ns() noexcept;

/// UNIX-epoch ns minus now_ns(), measured once per process (the tightest of a few paired reads).
/// unix_ns = now_ns() + epoch_offset_ns().
std::int64_t epoch_offset_ns() noexcept;

/// From now on now_ns() reads the clock + `shift_ns`: a rank on another host than rank 0 (another
/// boot, another monotonic clock) reads rank 0's clock as the rendezvous estimated it
/// (dist/process_group.h, ClockSync), so that every rank's records share one timeline. Set once,
/// before anything is recorded; 0 until then. epoch_offset_ns() follows it.
void set_clock_shift_ns(std::int64_t shift_ns) noexcept;
std::int64_t clock_shift_ns() noexcept;

/// The clock as calibrated so far (the ranks table and the run's console line).
struct ClockInfo {
  ClockSource source = ClockSource::kSteadyClock;
  double tsc_hz = 0;  // ticks per second of the latest refinement; 0 on the fallback
  /// The largest |converted ticks − CLOCK_MONOTONIC| that refine_clock() measured so far (ns),
  /// each measurement bounded by the paired read's width; 0 on the fallback.
  std::int64_t calibration_error_ns = 0;
  int refinements = 0;  // refine_clock() calls that measured (and continued) the map
};
ClockInfo clock_info() noexcept;

/// Measures the TSC map's error against CLOCK_MONOTONIC and continues the map with the run-long
/// slope, steering the error towards 0 (a quarter of it left per refinement interval); at most once
/// a second (every 16 s after the first minute) unless `force` (end of a run: the final
/// measurement). Any thread; a no-op on the fallback.
void refine_clock(bool force = false) noexcept;

}  // namespace hs::probes
