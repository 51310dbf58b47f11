// torch_compat.h — the one place that knows which LibTorch API differs between PyTorch 2.x
// versions. Include it instead of reaching for the moving parts directly.
//
// - CUDA caching allocator statistics: DeviceStats moved from c10::cuda::CUDACachingAllocator to
//   c10::CachingDeviceAllocator (2.6+) and StatType from the CUDA namespace to c10::CachingAllocator;
//   getDeviceStats()/cacheInfo()/resetPeakStats() kept their names under
//   c10::cuda::CUDACachingAllocator. The stats type is taken from getDeviceStats' return type and
//   the aggregate pool is index 0 of every StatArray (StatType::AGGREGATE in all versions).
//   Present only when LibTorch is a CUDA build (HS_TORCH_HAS_CUDA_ALLOCATOR).
// - Autocast: 2.4 made the state per device type (is_autocast_enabled(DeviceType),
//   get/set_autocast_dtype(DeviceType)); before it CPU and CUDA had their own functions
//   (is_cpu_enabled, set_autocast_cpu_dtype, is_enabled, set_autocast_gpu_dtype). AutocastGuard
//   hides both, and clears the cast-weight cache when the outermost region ends, as Python's
//   torch.autocast does.
// - oneDNN matrix products: at::native::mkldnn_matmul(mat1, mat2, result, beta, alpha) (result =
//   beta * result + alpha * mat1 @ mat2, any strides, float32 in float32 unless the float32 matmul
//   precision allows bf16/tf32) is exported by libtorch_cpu from 2.0 on but declared only in
//   ATen/native/mkldnn/Matmul.h, which the wheel does not ship; declared here with the signature
//   it has had since 2.0. HS_TORCH_HAS_ONEDNN_MATMUL when LibTorch is built with oneDNN (x86-64).
// - scaled_dot_product_attention with a scale argument: 2.1+ (HS_TORCH_HAS_SDPA); its enable_gqa argument 2.5+, before
//   which the K/V heads are repeated for grouped-query attention.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include <ATen/autocast_mode.h>
#if __has_include(<c10/core/AllocatorConfig.h>)
#include <c10/core/AllocatorConfig.h>
#endif
#include <ATen/core/Tensor.h>
#include <torch/version.h>

#define HS_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) || (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))
#if HS_TORCH_AT_LEAST(2, 1)
#define HS_TORCH_HAS_SDPA 1
#include <ATen/ops/scaled_dot_product_attention.h>
#else
#define HS_TORCH_HAS_SDPA 0
#endif

#include <ATen/Config.h>
#if AT_MKLDNN_ENABLED() && defined(__x86_64__)
#define HS_TORCH_HAS_ONEDNN_MATMUL 1
namespace at::native {
TORCH_API void mkldnn_matmul(const at::Tensor& mat1, const at::Tensor& mat2, const at::Tensor& result, float beta,
                             float alpha);
}  // namespace at::native
#else
#define HS_TORCH_HAS_ONEDNN_MATMUL 0
#endif

#if __has_include(<c10/cuda/CUDACachingAllocator.h>)
#define HS_TORCH_HAS_CUDA_ALLOCATOR 1
#include <ATen/Context.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#else
#define HS_TORCH_HAS_CUDA_ALLOCATOR 0
#endif

namespace hs::trainer::compat {

/// Autocast to `dtype` for ops on `device` tensors while in scope; the previous state is restored
/// after. Weights cast inside the region are cached until the outermost guard ends.
class AutocastGuard {
 public:
  AutocastGuard(c10::DeviceType device, c10::ScalarType dtype) : device_(device) {
#if HS_TORCH_AT_LEAST(2, 4)
    was_enabled_ = at::autocast::is_autocast_enabled(device_);
    was_dtype_ = at::autocast::get_autocast_dtype(device_);
    at::autocast::set_autocast_enabled(device_, true);
    at::autocast::set_autocast_dtype(device_, dtype);
#else
    const bool cpu = device_ == c10::DeviceType::CPU;
    was_enabled_ = cpu ? at::autocast::is_cpu_enabled() : at::autocast::is_enabled();
    was_dtype_ = cpu ? at::autocast::get_autocast_cpu_dtype() : at::autocast::get_autocast_gpu_dtype();
    if (cpu) {
      at::autocast::set_cpu_enabled(true);
      at::autocast::set_autocast_cpu_dtype(dtype);
    } else {
      at::autocast::set_enabled(true);
      at::autocast::set_autocast_gpu_dtype(dtype);
    }
#endif
    at::autocast::increment_nesting();
  }
  ~AutocastGuard() {
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
#if HS_TORCH_AT_LEAST(2, 4)
    at::autocast::set_autocast_enabled(device_, was_enabled_);
    at::autocast::set_autocast_dtype(device_, was_dtype_);
#else
    if (device_ == c10::DeviceType::CPU) {
      at::autocast::set_cpu_enabled(was_enabled_);
      at::autocast::set_autocast_cpu_dtype(was_dtype_);
    } else {
      at::autocast::set_enabled(was_enabled_);
      at::autocast::set_autocast_gpu_dtype(was_dtype_);
    }
#endif
  }
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  c10::DeviceType device_;
  bool was_enabled_ = false;
  c10::ScalarType was_dtype_ = c10::ScalarType::Float;
};

/// Whether autocast is on for ops on `device` tensors.
inline bool autocast_enabled(c10::DeviceType device) {
#if HS_TORCH_AT_LEAST(2, 4)
  return at::autocast::is_autocast_enabled(device);
#else
  return device == c10::DeviceType::CPU ? at::autocast::is_cpu_enabled() : at::autocast::is_enabled();
#endif
}

#if HS_TORCH_HAS_SDPA
/// softmax(q k^T · scale + mask) v with a boolean mask (true = visible). q (B, H, T, D); k, v
/// (B, KV, L, D) with H a multiple of KV (grouped-query attention).
inline at::Tensor scaled_dot_product_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                               const at::Tensor& visible, double scale) {
  const bool gqa = q.size(1) != k.size(1);
#if HS_TORCH_AT_LEAST(2, 5)
  return at::scaled_dot_product_attention(q, k, v, visible, 0.0, false, scale, gqa);
#else
  if (!gqa) return at::scaled_dot_product_attention(q, k, v, visible, 0.0, false, scale);
  const auto groups = q.size(1) / k.size(1);
  return at::scaled_dot_product_attention(q, k.repeat_interleave(groups, 1), v.repeat_interleave(groups, 1),
                                          visible, 0.0, false, scale);
#endif
}
#endif

#if HS_TORCH_HAS_CUDA_ALLOCATOR
namespace cuda_alloc = c10::cuda::CUDACachingAllocator;
using CudaDeviceStats = decltype(cuda_alloc::getDeviceStats(c10::DeviceIndex{0}));
inline constexpr std::size_t kAggregatePool = 0;

/// CUDA's runtime and the caching allocator of every device, initialised once: the allocator's
/// queries (getDeviceStats, cacheInfo) index per-device state that exists only after it, and
/// cacheInfo on a fresh process crashed (CudaTrainer.TheStepPeakSurvivesTheSwitchesPeakWindows on
/// an H200, run alone).
inline void cuda_lazy_init() { at::globalContext().lazyInitDevice(c10::DeviceType::CUDA); }

/// The process's current device `index`, with its primary context created now (a forced
/// cudaSetDevice; c10's setDevice skips the call when the index is already current, and then no
/// context exists until the first allocation, so cuMemGetInfo had nothing to answer for).
inline void cuda_set_device(int index) {
  cuda_lazy_init();
  c10::cuda::set_device(static_cast<c10::DeviceIndex>(index), /*force=*/true);
}

inline CudaDeviceStats cuda_device_stats(int device) {
  cuda_lazy_init();
  return cuda_alloc::getDeviceStats(static_cast<c10::DeviceIndex>(device));
}
inline std::int64_t cuda_largest_free_block(int device) {
  // cacheInfo raises *largest to the largest free cached block, but a 0 passed in is first
  // replaced by cudaMemGetInfo's free device memory ("an optimistic initial guess"): the whole
  // card's free bytes, not the cache's, which made external fragmentation −286 on an H100. Any
  // cached block is at least 512 bytes, so starting at 1 asks for the cache's figure alone.
  std::size_t largest = 1;
  cuda_lazy_init();
  cuda_alloc::cacheInfo(static_cast<c10::DeviceIndex>(device), &largest);
  return largest <= 1 ? 0 : static_cast<std::int64_t>(largest);
}
inline void cuda_reset_peak_stats(int device) {
  cuda_alloc::resetPeakStats(static_cast<c10::DeviceIndex>(device));
}
/// Returns the caching allocator's unused cached blocks to the driver (torch.cuda.empty_cache()).
inline void cuda_empty_cache() { cuda_alloc::emptyCache(); }
#endif

/// PYTORCH_CUDA_ALLOC_CONF-style settings ("expandable_segments:True") for the allocators: parsed
/// now where c10 has AllocatorConfig (2.8+), else through the variable the allocator reads at its
/// first use.
#if __has_include(<c10/core/AllocatorConfig.h>)
inline void set_allocator_settings(const std::string& settings) { c10::CachingAllocator::setAllocatorSettings(settings); }
#else
inline void set_allocator_settings(const std::string& settings) {
  ::setenv("PYTORCH_CUDA_ALLOC_CONF", settings.c_str(), 1);
}
#endif

#if HS_TORCH_HAS_CUDA_ALLOCATOR

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
