#include "hybridscope/probes/clock.h"

#include <atomic>
#include <chrono>
#include <limits>

namespace hs::probes {

namespace {

std::atomic<std::int64_t> g_shift_ns{0};

std::int64_t monotonic_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

std::int64_t now_ns() noexcept { return monotonic_ns() + g_shift_ns.load(std::memory_order_relaxed); }

void set_clock_shift_ns(std::int64_t shift_ns) noexcept { g_shift_ns.store(shift_ns, std::memory_order_relaxed); }

std::int64_t clock_shift_ns() noexcept { return g_shift_ns.load(std::memory_order_relaxed); }

namespace {
// UNIX-epoch ns minus CLOCK_MONOTONIC ns (unshifted).
std::int64_t measure_epoch_offset() noexcept {
  // Bracket the system-clock read between two monotonic reads; keep the narrowest bracket.
  std::int64_t best_width = std::numeric_limits<std::int64_t>::max();
  std::int64_t best_offset = 0;
  for (int i = 0; i < 8; ++i) {
    const std::int64_t before = monotonic_ns();
    const std::int64_t wall = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                  std::chrono::system_clock::now().time_since_epoch())
                                  .count();
    const std::int64_t after = monotonic_ns();
    if (after - before < best_width) {
      best_width = after - before;
      best_offset = wall - (before + (after - before) / 2);
    }
  }
  return best_offset;
}
}  // namespace

std::int64_t epoch_offset_ns() noexcept {
  static const std::int64_t offset = measure_epoch_offset();
  return offset - clock_shift_ns();
}

}  // namespace hs::probes
