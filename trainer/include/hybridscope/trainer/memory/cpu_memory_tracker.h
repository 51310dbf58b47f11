// cpu_memory_tracker.h — the CPU side of the memory probe: a tracking allocator installed as
// LibTorch's CPU allocator. It forwards to the allocator that was installed before it and counts
// live bytes, their peak and the number of allocations (atomics: any thread may allocate).
// On CUDA the caching allocator's own statistics play this part.
#pragma once

#include <cstdint>

namespace hs::trainer {

struct CpuMemoryStats {
  std::int64_t live_bytes = 0;   // requested bytes of tensors alive now
  std::int64_t peak_bytes = 0;   // highest live_bytes since the last reset_peak()
  std::int64_t num_allocs = 0;   // allocations since install
};

/// Installs the tracker as LibTorch's CPU allocator (the tracker is made once per process; a call
/// while it is installed is a no-op). Storage allocated before the install is not counted (its
/// deleter is the previous allocator's).
void install_cpu_memory_tracker();
/// Puts the allocator that was there before back (the probe-overhead benchmark's "off" steps);
/// storage the tracker allocated is still released through it. install_cpu_memory_tracker()
/// re-installs the same tracker, its counts continuing.
void uninstall_cpu_memory_tracker();
bool cpu_memory_tracker_installed();
CpuMemoryStats cpu_memory_stats();
void reset_cpu_memory_peak();
/// A second peak for a window inside the step (the switch): restarted here at the live bytes,
/// read by cpu_memory_window_peak(); the step peak above is not touched. One window at a time.
void begin_cpu_memory_window();
std::int64_t cpu_memory_window_peak();

}  // namespace hs::trainer
