// activity_buffer_pool.h — the buffers CUPTI fills with activity records: fixed-size, 8-byte
// aligned (CUPTI's record alignment), reused after parsing, and capped in total so that a GPU
// producing records faster than they are parsed costs bounded memory. Beyond the cap a request is
// refused (counted) and CUPTI drops the records it could not store (it counts those:
// cuptiActivityGetNumDroppedRecords).
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

namespace hs::probes {

class ActivityBufferPool {
 public:
  static constexpr std::size_t kAlignment = 8;

  ActivityBufferPool(std::size_t buffer_bytes, std::size_t max_outstanding_bytes);
  ~ActivityBufferPool();
  ActivityBufferPool(const ActivityBufferPool&) = delete;
  ActivityBufferPool& operator=(const ActivityBufferPool&) = delete;

  /// A buffer of buffer_bytes() (a free one when there is one), or nullptr when handing it out
  /// would put more than max_outstanding_bytes in use or memory ran out (both counted as refused).
  std::uint8_t* acquire() noexcept;
  /// Gives a buffer from acquire() back for reuse.
  void release(std::uint8_t* buffer) noexcept;

  std::size_t buffer_bytes() const noexcept { return buffer_bytes_; }
  std::int64_t requested() const;
  std::int64_t refused() const;
  std::size_t outstanding_bytes() const;
  std::size_t peak_outstanding_bytes() const;

  /// Frees a buffer from acquire() outright (for a buffer that outlived its pool).
  static void free_buffer(std::uint8_t* buffer) noexcept;

 private:
  const std::size_t buffer_bytes_;
  const std::size_t max_outstanding_bytes_;
  mutable std::mutex mutex_;
  std::vector<std::uint8_t*> free_;
  std::size_t outstanding_ = 0;
  std::size_t peak_ = 0;
  std::int64_t requested_ = 0;
  std::int64_t refused_ = 0;
};

}  // namespace hs::probes
