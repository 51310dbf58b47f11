// clock.h — the one clock of hybridscope: monotonic nanoseconds, plus the offset that maps it
// to the UNIX epoch so that ranks and hosts line up on one timeline.
#pragma once

#include <cstdint>

namespace hs::probes {

/// Monotonic time in ns (CLOCK_MONOTONIC via std::chrono::steady_clock), plus the clock shift
/// (below): on every rank the run's one timeline, rank 0's monotonic clock.
std::int64_t now_ns() noexcept;

/// UNIX-epoch ns minus now_ns(), measured once per process (the tightest of a few paired reads).
/// unix_ns = monotonic_ns + epoch_offset_ns().
std::int64_t epoch_offset_ns() noexcept;

/// From now on now_ns() reads CLOCK_MONOTONIC + `shift_ns`: a rank on another host than rank 0
/// (another boot, another monotonic clock) reads rank 0's clock as the rendezvous estimated it
/// (dist/process_group.h, ClockSync), so that every rank's records share one timeline. Set once,
/// before anything is recorded; 0 until then. epoch_offset_ns() follows it.
void set_clock_shift_ns(std::int64_t shift_ns) noexcept;
std::int64_t clock_shift_ns() noexcept;

}  // namespace hs::probes
