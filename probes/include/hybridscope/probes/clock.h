// clock.h — the one clock of hybridscope: monotonic nanoseconds, plus the offset that maps it
// to the UNIX epoch so that ranks and hosts line up on one timeline.
#pragma once

#include <cstdint>

namespace hs::probes {

/// Monotonic time in ns (CLOCK_MONOTONIC via std::chrono::steady_clock).
std::int64_t now_ns() noexcept;

/// UNIX-epoch ns minus now_ns(), measured once per process (the tightest of a few paired reads).
/// unix_ns = monotonic_ns + epoch_offset_ns().
std::int64_t epoch_offset_ns() noexcept;

}  // namespace hs::probes
