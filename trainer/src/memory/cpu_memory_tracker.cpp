#include "hybridscope/trainer/memory/cpu_memory_tracker.h"

#include <atomic>
#include <cstring>
#include <mutex>

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>

namespace hs::trainer {

namespace {

// Each allocation carries a 64-byte header (keeping the base allocator's 64-byte alignment) that
// holds its size, so the deleter is a plain function of the data pointer: LibTorch's raw_allocate
// paths (oneDNN, bf16 kernels) need "simple" data pointers whose context is the data itself.
class TrackingCpuAllocator final : public c10::Allocator {
 public:
  static constexpr std::size_t kHeader = 64;

  explicit TrackingCpuAllocator(c10::Allocator* base) : base_(base) {}

  c10::DataPtr allocate(size_t n) override {
    void* raw = base_->raw_allocate(n + kHeader);
    *static_cast<std::int64_t*>(raw) = static_cast<std::int64_t>(n);
    void* data = static_cast<char*>(raw) + kHeader;
    const auto bytes = static_cast<std::int64_t>(n);
    const std::int64_t live = live_.fetch_add(bytes, std::memory_order_relaxed) + bytes;
    raise(peak_, live);
    raise(window_peak_, live);
    allocs_.fetch_add(1, std::memory_order_relaxed);
    return {data, data, &TrackingCpuAllocator::release, c10::Device(c10::DeviceType::CPU)};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &TrackingCpuAllocator::release; }
  void copy_data(void* dest, const void* src, std::size_t count) const override { std::memcpy(dest, src, count); }

  CpuMemoryStats stats() const {
    return {live_.load(std::memory_order_relaxed), peak_.load(std::memory_order_relaxed),
            allocs_.load(std::memory_order_relaxed)};
  }
  void reset_peak() { peak_.store(live_.load(std::memory_order_relaxed), std::memory_order_relaxed); }
  void begin_window() { window_peak_.store(live_.load(std::memory_order_relaxed), std::memory_order_relaxed); }
  std::int64_t window_peak() const { return window_peak_.load(std::memory_order_relaxed); }
  static TrackingCpuAllocator* instance;

 private:
  static void raise(std::atomic<std::int64_t>& peak, std::int64_t live) {
    std::int64_t seen = peak.load(std::memory_order_relaxed);
    while (live > seen && !peak.compare_exchange_weak(seen, live, std::memory_order_relaxed)) {
    }
  }

  static void release(void* data) {
    if (!data) return;
    void* raw = static_cast<char*>(data) - kHeader;
    instance->live_.fetch_sub(*static_cast<std::int64_t*>(raw), std::memory_order_relaxed);
    instance->base_->raw_deallocate(raw);
  }

  c10::Allocator* base_;
  std::atomic<std::int64_t> live_{0};
  std::atomic<std::int64_t> peak_{0};
  std::atomic<std::int64_t> window_peak_{0};
  std::atomic<std::int64_t> allocs_{0};
};
TrackingCpuAllocator* TrackingCpuAllocator::instance = nullptr;

TrackingCpuAllocator* g_tracker = nullptr;
c10::Allocator* g_base = nullptr;
std::mutex g_install_lock;
// LibTorch keeps the allocator set with the highest priority; ours and its restore use the same one.
constexpr std::uint8_t kPriority = 1;

}  // namespace

void install_cpu_memory_tracker() {
  std::lock_guard<std::mutex> lock(g_install_lock);
  if (!g_tracker) {
    c10::Allocator* base = c10::GetCPUAllocator();
    if (base->raw_deleter() == nullptr) return;  // a base without raw allocation cannot be wrapped
    // Intentionally leaked: storage may outlive any static destructor order.
    g_base = base;
    g_tracker = new TrackingCpuAllocator(base);
    TrackingCpuAllocator::instance = g_tracker;
  }
  c10::SetCPUAllocator(g_tracker, kPriority);
}

void uninstall_cpu_memory_tracker() {
  std::lock_guard<std::mutex> lock(g_install_lock);
  // Storage the tracker allocated keeps its deleter (the tracker, which frees through the base).
  if (g_tracker && c10::GetCPUAllocator() == g_tracker) c10::SetCPUAllocator(g_base, kPriority);
}

bool cpu_memory_tracker_installed() { return g_tracker != nullptr && c10::GetCPUAllocator() == g_tracker; }

CpuMemoryStats cpu_memory_stats() { return g_tracker ? g_tracker->stats() : CpuMemoryStats{}; }

void reset_cpu_memory_peak() {
  if (g_tracker) g_tracker->reset_peak();
}

void begin_cpu_memory_window() {
  if (g_tracker) g_tracker->begin_window();
}

std::int64_t cpu_memory_window_peak() { return g_tracker ? g_tracker->window_peak() : 0; }

}  // namespace hs::trainer
