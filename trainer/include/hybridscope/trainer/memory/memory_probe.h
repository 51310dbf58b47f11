// memory_probe.h — what the memory probe reads (design brief §3, profiling-facts.md "PyTorch CUDA
// caching allocator"): one probes::MemorySample of a device — the CPU tracking allocator
// (cpu_memory_tracker.h) or the CUDA caching allocator behind the version shim
// (src/torch_compat.h) —, the peak over a window such as a switch, and a sampler thread that
// records samples on a timer besides the phase boundaries the trainer samples at.
//
// What the CPU cannot tell: reserved, active and inactive-split bytes and the largest free block
// belong to a caching allocator; on CPU they stay unknown (NULL), and so do the fragmentation
// ratios built on them.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

#include "hybridscope/probes/recorder.h"
#include "hybridscope/probes/run_probes.h"

namespace hs::trainer {

/// The CUDA caching allocator's aggregate-pool statistics the probe records.
struct CudaAllocatorStats {
  std::int64_t allocated_bytes = 0;       // current
  std::int64_t reserved_bytes = 0;        // current (segments cudaMalloc'ed)
  std::int64_t active_bytes = 0;          // current (allocated or waiting on a stream)
  std::int64_t inactive_split_bytes = 0;  // current (free pieces of split blocks)
  std::int64_t peak_allocated_bytes = 0;  // since the last peak reset
  std::int64_t peak_reserved_bytes = 0;   // since the last peak reset
  std::int64_t num_allocs = 0;            // allocations requested, cumulative
  std::int64_t num_alloc_retries = 0;     // cudaMalloc failures answered by freeing the cache
  std::int64_t num_ooms = 0;
  std::int64_t largest_free_block_bytes = 0;  // cacheInfo(): the largest cached free block
};

/// Whether this LibTorch can report CUDA caching-allocator statistics (a CUDA build).
bool cuda_allocator_stats_available() noexcept;
/// `device`'s caching-allocator statistics. Throws std::runtime_error on a LibTorch without CUDA.
CudaAllocatorStats cuda_allocator_stats(int device);
/// The sample columns of `stats` (device, bytes, counts; ts/step/phase left to the caller).
probes::MemorySample to_memory_sample(const CudaAllocatorStats& stats, int device);

/// A sample of `device` now: -1 = the CPU tracking allocator (allocated = live bytes, peak,
/// allocation count; the caching-allocator columns unknown), >= 0 = that CUDA device.
probes::MemorySample read_memory(int device, std::int64_t step, const char* phase);

/// The most bytes allocated on `device` over a window: the peak is restarted at construction
/// and read by peak_bytes(). One window at a time per device. On CUDA this resets the caching
/// allocator's peak statistics (as torch.cuda.reset_peak_memory_stats does); on CPU it uses the
/// tracker's window peak and leaves the step peak alone. -1 when nothing is tracked.
class MemoryPeakWindow {
 public:
  explicit MemoryPeakWindow(int device);
  std::int64_t peak_bytes() const;

 private:
  int device_;
  bool tracked_;
};

/// The most bytes allocated and reserved on CUDA `device` since the previous call (the first
/// call: since the process started), whatever MemoryPeakWindows restarted the allocator's peaks
/// in between (each window carries the peak it clears into this reading); restarts the peaks.
/// verl's perf/max_memory_allocated_gb and perf/max_memory_reserved_gb of a step. Throws
/// std::runtime_error on a LibTorch without CUDA.
struct DevicePeak {
  std::int64_t allocated_bytes = 0;
  std::int64_t reserved_bytes = 0;
};
DevicePeak take_cuda_peak(int device);

/// torch.cuda.empty_cache() where `device` is a CUDA device (>= 0) of a CUDA build, else nothing:
/// the caching allocator's unused cached blocks go back to the driver, as verl does when the actor
/// enters and leaves the rollout layout, so that the KV pool and the training state do not hold
/// each other's cached blocks (a fragmented cache of one phase starving the next).
void release_cached_device_memory(int device);

/// Records read_memory(device, step, "timer") from its own thread, one interval after the
/// previous sample (never closer), until destroyed (which wakes and joins the thread at once).
class MemorySampler {
 public:
  /// Records through `probes` (on, and outliving the sampler), each sample under the step `probes`
  /// holds then; `interval` > 0.
  MemorySampler(const probes::RunProbes& probes, int device, std::chrono::milliseconds interval);
  ~MemorySampler();
  MemorySampler(const MemorySampler&) = delete;
  MemorySampler& operator=(const MemorySampler&) = delete;

  /// Samples taken so far.
  std::int64_t samples() const { return samples_.load(std::memory_order_relaxed); }

 private:
  void run();

  const probes::RunProbes& probes_;
  int device_;
  std::chrono::milliseconds interval_;
  std::atomic<std::int64_t> samples_{0};
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace hs::trainer
