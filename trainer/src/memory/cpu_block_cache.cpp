// cpu_block_cache.cpp — freed CPU blocks above glibc's mmap threshold kept for reuse (cpu_heap.h).
#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>

#include <cstring>
#include <deque>
#include <mutex>

#include "hybridscope/trainer/memory/cpu_heap.h"

namespace hs::trainer {

namespace {

// Each block carries a 64-byte header (keeping the base allocator's 64-byte alignment) holding
// its capacity, so the deleter is a plain function of the data pointer, as LibTorch's
// raw_allocate users (oneDNN) need and as the memory probe's tracker, wrapping this, expects.
class BlockCacheAllocator final : public c10::Allocator {
 public:
  static constexpr std::size_t kHeader = 64;
  static constexpr auto kFrom = static_cast<std::size_t>(kCpuHeapMmapThreshold);

  BlockCacheAllocator(c10::Allocator* base, std::int64_t cap) : base_(base), cap_(static_cast<std::size_t>(cap)) {}

  c10::DataPtr allocate(size_t n) override {
    void* data = take(n);
    return {data, data, &BlockCacheAllocator::release, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &BlockCacheAllocator::release; }
  void copy_data(void* dest, const void* src, std::size_t count) const override { std::memcpy(dest, src, count); }

  CpuBlockCacheStats stats() {
    const std::lock_guard<std::mutex> lock(mutex_);
    return {static_cast<std::int64_t>(cached_), hits_, misses_};
  }
  void set_cap(std::int64_t cap) {
    const std::lock_guard<std::mutex> lock(mutex_);
    cap_ = static_cast<std::size_t>(cap);
    trim(0);
  }

  static BlockCacheAllocator* instance;

 private:
  struct Block {
    void* raw;
    std::size_t capacity;
  };

  void* take(std::size_t n) {
    const std::size_t need = n + kHeader;
    if (need >= kFrom) {
      const std::lock_guard<std::mutex> lock(mutex_);
      // The tightest cached block that holds `need` with at most 1/8 to spare.
      auto best = blocks_.end();
      for (auto it = blocks_.begin(); it != blocks_.end(); ++it) {
        if (it->capacity >= need && it->capacity - need <= need / 8 &&
            (best == blocks_.end() || it->capacity < best->capacity))
          best = it;
      }
      if (best != blocks_.end()) {
        void* raw = best->raw;
        cached_ -= best->capacity;
        blocks_.erase(best);
        ++hits_;
        return static_cast<char*>(raw) + kHeader;
      }
      ++misses_;
    }
    void* raw = base_->raw_allocate(need);
    *static_cast<std::size_t*>(raw) = need;
    return static_cast<char*>(raw) + kHeader;
  }

  // Frees the oldest cached blocks until `incoming` more bytes fit the cap. Holds mutex_.
  void trim(std::size_t incoming) {
    while (!blocks_.empty() && cached_ + incoming > cap_) {
      base_->raw_deallocate(blocks_.front().raw);
      cached_ -= blocks_.front().capacity;
      blocks_.pop_front();
    }
  }

  static void release(void* data) {
    if (data == nullptr) return;
    void* raw = static_cast<char*>(data) - kHeader;
    const std::size_t capacity = *static_cast<std::size_t*>(raw);
    if (capacity >= kFrom) {
      const std::lock_guard<std::mutex> lock(instance->mutex_);
      if (capacity <= instance->cap_) {
        instance->trim(capacity);
        instance->blocks_.push_back({raw, capacity});
        instance->cached_ += capacity;
        return;
      }
    }
    instance->base_->raw_deallocate(raw);
  }

  c10::Allocator* base_;
  std::mutex mutex_;
  std::size_t cap_;
  std::deque<Block> blocks_;  // oldest first
  std::size_t cached_ = 0;
  std::int64_t hits_ = 0, misses_ = 0;
};
BlockCacheAllocator* BlockCacheAllocator::instance = nullptr;

std::mutex g_install_lock;
c10::Allocator* g_base = nullptr;
constexpr std::uint8_t kPriority = 1;  // the memory probe's tracker installs over it with the same

}  // namespace

void install_cpu_block_cache(std::int64_t cap_bytes) {
  const std::lock_guard<std::mutex> lock(g_install_lock);
  if (BlockCacheAllocator::instance != nullptr) {
    BlockCacheAllocator::instance->set_cap(cap_bytes);
    if (c10::GetCPUAllocator() == g_base) c10::SetCPUAllocator(BlockCacheAllocator::instance, kPriority);
    return;
  }
  c10::Allocator* base = c10::GetCPUAllocator();
  if (base->raw_deleter() == nullptr) return;  // a base without raw allocation cannot be wrapped
  g_base = base;
  // Intentionally leaked: storage may outlive any static destructor order.
  BlockCacheAllocator::instance = new BlockCacheAllocator(base, cap_bytes);
  c10::SetCPUAllocator(BlockCacheAllocator::instance, kPriority);
}

void uninstall_cpu_block_cache() {
  const std::lock_guard<std::mutex> lock(g_install_lock);
  // Storage it allocated keeps its deleter; set_cap(0) hands every cached block back.
  if (BlockCacheAllocator::instance == nullptr) return;
  BlockCacheAllocator::instance->set_cap(0);
  if (c10::GetCPUAllocator() == BlockCacheAllocator::instance) c10::SetCPUAllocator(g_base, kPriority);
}

CpuBlockCacheStats cpu_block_cache_stats() {
  return BlockCacheAllocator::instance ? BlockCacheAllocator::instance->stats() : CpuBlockCacheStats{};
}

}  // namespace hs::trainer
