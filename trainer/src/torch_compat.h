// torch_compat.h — the one place that knows which LibTorch API differs between PyTorch 2.x
// versions. Include it instead of reaching for the moving parts directly.
//
// - CUDA caching allocator statistics: DeviceStats moved from c10::cuda::CUDACachingAllocator to
//   c10::CachingDeviceAllocator (2.6+) and StatType from the CUDA namespace to c10::CachingAllocator;
//   getDeviceStats()/cacheInfo()/resetPeakStats() kept their names under
//   c10::cuda::CUDACachingAllocator. The stats type is taken from getDeviceStats' return type and
//   the aggregate pool is index 0 of every StatArray (StatType::AGGREGATE in all versions).
//   Present only when LibTorch is a CUDA build (HS_TORCH_HAS_CUDA_ALLOCATOR).
#pragma once

#include <cstddef>
#include <cstdint>

#if __has_include(<c10/cuda/CUDACachingAllocator.h>)
#define HS_TORCH_HAS_CUDA_ALLOCATOR 1
#include <c10/cuda/CUDACachingAllocator.h>
#else
#define HS_TORCH_HAS_CUDA_ALLOCATOR 0
#endif

namespace hs::trainer::compat {

#if HS_TORCH_HAS_CUDA_ALLOCATOR
namespace cuda_alloc = c10::cuda::CUDACachingAllocator;
using CudaDeviceStats = decltype(cuda_alloc::getDeviceStats(c10::DeviceIndex{0}));
inline constexpr std::size_t kAggregatePool = 0;

inline CudaDeviceStats cuda_device_stats(int device) {
  return cuda_alloc::getDeviceStats(static_cast<c10::DeviceIndex>(device));
}
inline std::int64_t cuda_largest_free_block(int device) {
  std::size_t largest = 0;
  cuda_alloc::cacheInfo(static_cast<c10::DeviceIndex>(device), &largest);
  return static_cast<std::int64_t>(largest);
}
inline void cuda_reset_peak_stats(int device) {
  cuda_alloc::resetPeakStats(static_cast<c10::DeviceIndex>(device));
}

/// The aggregate pool's fields the memory probe records, into `Out` (CudaAllocatorStats).
template <typename Out>
Out aggregate_stats(const CudaDeviceStats& stats, std::int64_t largest_free_block) {
  Out out;
  out.allocated_bytes = stats.allocated_bytes[kAggregatePool].current;
  out.reserved_bytes = stats.reserved_bytes[kAggregatePool].current;
  out.active_bytes = stats.active_bytes[kAggregatePool].current;
  out.inactive_split_bytes = stats.inactive_split_bytes[kAggregatePool].current;
  out.peak_allocated_bytes = stats.allocated_bytes[kAggregatePool].peak;
  out.peak_reserved_bytes = stats.reserved_bytes[kAggregatePool].peak;
  out.num_allocs = stats.allocation[kAggregatePool].allocated;
  out.num_alloc_retries = stats.num_alloc_retries;
  out.num_ooms = stats.num_ooms;
  out.largest_free_block_bytes = largest_free_block;
  return out;
}
#endif

}  // namespace hs::trainer::compat
