// range_observer.h — an optional process-wide hook told when a scoped range opens and closes, so
// that a tool can tie its own records to hybridscope's ranges. The CUPTI collector (hs_cupti)
// installs one that pushes an external correlation id per range, which maps every kernel to the
// range that launched it. With no observer installed a range pays one atomic load and a branch.
//
// Calls come from the thread that opens/closes the range, in LIFO order per thread. An observer
// installed or removed while ranges are open sees pops without pushes (or the reverse) for those
// ranges: it must tolerate them.
#pragma once

#include <atomic>
#include <cstdint>

namespace hs::probes {

struct RangeObserver {
  /// A range opened: its name (a string literal), nesting depth and start (probes::now_ns()).
  void (*push)(void* context, const char* name, int depth, std::int64_t start_ns) noexcept;
  /// The innermost open range of the calling thread closed.
  void (*pop)(void* context) noexcept;
  void* context;
};

namespace detail {
extern std::atomic<const RangeObserver*> g_range_observer;
}

/// The installed observer, or nullptr.
inline const RangeObserver* range_observer() noexcept {
  return detail::g_range_observer.load(std::memory_order_acquire);
}

/// Installs `observer` (nullptr removes it; it must outlive its installation) and returns the
/// previous one.
inline const RangeObserver* set_range_observer(const RangeObserver* observer) noexcept {
  return detail::g_range_observer.exchange(observer, std::memory_order_acq_rel);
}

}  // namespace hs::probes
