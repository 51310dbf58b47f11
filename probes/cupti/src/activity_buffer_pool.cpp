#include "hybridscope/probes/activity_buffer_pool.h"

#include <algorithm>
#include <new>

namespace hs::probes {

ActivityBufferPool::ActivityBufferPool(std::size_t buffer_bytes, std::size_t max_outstanding_bytes)
    // A multiple of the alignment: CUPTI packs 8-byte-aligned records up to the size it is given.
    : buffer_bytes_(std::max(kAlignment, buffer_bytes / kAlignment * kAlignment)),
      max_outstanding_bytes_(max_outstanding_bytes) {}

ActivityBufferPool::~ActivityBufferPool() {
  for (std::uint8_t* b : free_) free_buffer(b);
}

std::uint8_t* ActivityBufferPool::acquire() noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  ++requested_;
  if (outstanding_ + buffer_bytes_ > max_outstanding_bytes_) {
    ++refused_;
    return nullptr;
  }
  std::uint8_t* buffer = nullptr;
  if (!free_.empty()) {
    buffer = free_.back();
    free_.pop_back();
  } else {
    buffer = static_cast<std::uint8_t*>(::operator new(buffer_bytes_, std::align_val_t{kAlignment}, std::nothrow));
    if (!buffer) {
      ++refused_;
      return nullptr;
    }
  }
  outstanding_ += buffer_bytes_;
  peak_ = std::max(peak_, outstanding_);
  return buffer;
}

void ActivityBufferPool::release(std::uint8_t* buffer) noexcept {
  if (!buffer) return;
  std::lock_guard<std::mutex> lock(mutex_);
  outstanding_ -= std::min(outstanding_, buffer_bytes_);
  try {
    free_.push_back(buffer);
  } catch (...) {
    free_buffer(buffer);
  }
}

void ActivityBufferPool::free_buffer(std::uint8_t* buffer) noexcept {
  ::operator delete(buffer, std::align_val_t{kAlignment});
}

std::int64_t ActivityBufferPool::requested() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return requested_;
}
std::int64_t ActivityBufferPool::refused() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return refused_;
}
std::size_t ActivityBufferPool::outstanding_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return outstanding_;
}
std::size_t ActivityBufferPool::peak_outstanding_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return peak_;
}

}  // namespace hs::probes
