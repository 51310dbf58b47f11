// memory_probe.cpp — device memory readings, the peak window and the timer sampler
// (see memory_probe.h).
#include "hybridscope/trainer/memory/memory_probe.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <stdexcept>

#include "hybridscope/probes/clock.h"
#include "hybridscope/trainer/memory/cpu_memory_tracker.h"
#include "torch_compat.h"

namespace hs::trainer {

namespace {
// Per CUDA device: the peaks that MemoryPeakWindows cleared since the last take_cuda_peak.
std::mutex g_carried_mutex;
std::map<int, DevicePeak> g_carried;

// Restarts the allocator's peaks of `device`, keeping the ones it had for take_cuda_peak.
void restart_cuda_peak(int device) {
#if HS_TORCH_HAS_CUDA_ALLOCATOR
  const CudaAllocatorStats now = cuda_allocator_stats(device);
  {
    std::lock_guard<std::mutex> lock(g_carried_mutex);
    DevicePeak& carried = g_carried[device];
    carried.allocated_bytes = std::max(carried.allocated_bytes, now.peak_allocated_bytes);
    carried.reserved_bytes = std::max(carried.reserved_bytes, now.peak_reserved_bytes);
  }
  compat::cuda_reset_peak_stats(device);
#else
  (void)device;
#endif
}
}  // namespace

bool cuda_allocator_stats_available() noexcept { return HS_TORCH_HAS_CUDA_ALLOCATOR != 0; }

CudaAllocatorStats cuda_allocator_stats(int device) {
#if HS_TORCH_HAS_CUDA_ALLOCATOR
  return compat::aggregate_stats<CudaAllocatorStats>(compat::cuda_device_stats(device),
                                                      compat::cuda_largest_free_block(device));
#else
  throw std::runtime_error("CUDA memory statistics of device " + std::to_string(device) +
                           ": this LibTorch is a CPU build (no CUDA caching allocator)");
#endif
}

probes::MemorySample to_memory_sample(const CudaAllocatorStats& stats, int device) {
  probes::MemorySample m;
  m.device = device;
  m.allocated_bytes = stats.allocated_bytes;
  m.reserved_bytes = stats.reserved_bytes;
  m.active_bytes = stats.active_bytes;
  m.inactive_split_bytes = stats.inactive_split_bytes;
  m.largest_free_block_bytes = stats.largest_free_block_bytes;
  m.peak_allocated_bytes = stats.peak_allocated_bytes;
  m.num_allocs = stats.num_allocs;
  m.num_alloc_retries = stats.num_alloc_retries;
  m.num_ooms = stats.num_ooms;
  return m;
}

probes::MemorySample read_memory(int device, std::int64_t step, const char* phase) {
  probes::MemorySample m;
  if (device >= 0) {
    m = to_memory_sample(cuda_allocator_stats(device), device);
  } else {
    const CpuMemoryStats cpu = cpu_memory_stats();
    m.device = -1;
    if (cpu_memory_tracker_installed()) {
      m.allocated_bytes = cpu.live_bytes;
      m.peak_allocated_bytes = cpu.peak_bytes;
      m.num_allocs = cpu.num_allocs;
    }
  }
  m.ts_ns = probes::now_ns();
  m.step = step;
  m.phase = phase;
  return m;
}

MemoryPeakWindow::MemoryPeakWindow(int device)
    : device_(device), tracked_(device >= 0 ? cuda_allocator_stats_available() : cpu_memory_tracker_installed()) {
  if (!tracked_) return;
  if (device_ < 0) {
    begin_cpu_memory_window();
    return;
  }
  restart_cuda_peak(device_);
}

std::int64_t MemoryPeakWindow::peak_bytes() const {
  if (!tracked_) return -1;
  if (device_ >= 0) return cuda_allocator_stats(device_).peak_allocated_bytes;
  return cpu_memory_window_peak();
}

DevicePeak take_cuda_peak(int device) {
  const CudaAllocatorStats now = cuda_allocator_stats(device);  // throws on a CPU build
  DevicePeak peak;
  {
    std::lock_guard<std::mutex> lock(g_carried_mutex);
    peak = g_carried[device];
    g_carried[device] = DevicePeak{};
  }
  peak.allocated_bytes = std::max(peak.allocated_bytes, now.peak_allocated_bytes);
  peak.reserved_bytes = std::max(peak.reserved_bytes, now.peak_reserved_bytes);
#if HS_TORCH_HAS_CUDA_ALLOCATOR
  compat::cuda_reset_peak_stats(device);
#endif
  return peak;
}

void release_cached_device_memory(int device) {
#if HS_TORCH_HAS_CUDA_ALLOCATOR
  if (device >= 0) compat::cuda_empty_cache();
#else
  (void)device;
#endif
}

MemorySampler::MemorySampler(const probes::RunProbes& probes, int device, std::chrono::milliseconds interval)
    : probes_(probes), device_(device), interval_(interval) {
  if (!probes_.on()) throw std::invalid_argument("MemorySampler: the probes are off (no recorder)");
  if (interval_.count() <= 0) throw std::invalid_argument("MemorySampler: the interval must be > 0 ms");
  thread_ = std::thread([this] { run(); });
}

MemorySampler::~MemorySampler() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void MemorySampler::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  auto next = std::chrono::steady_clock::now() + interval_;
  while (!wake_.wait_until(lock, next, [this] { return stop_; })) {
    probes_.recorder()->record_memory(read_memory(device_, probes_.step(), "timer"));
    samples_.fetch_add(1, std::memory_order_relaxed);
    // Samples are at least one interval apart: a late tick (a stalled machine) delays the next
    // one instead of bunching samples to catch up.
    next = std::chrono::steady_clock::now() + interval_;
  }
}

}  // namespace hs::trainer
