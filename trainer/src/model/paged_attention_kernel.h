// paged_attention_kernel.h — the launcher of hybridscope's paged-attention decode kernel
// (paged_attention_kernel.cu, built by nvcc where CMake finds a CUDA compiler: HS_HAVE_PAGED_KERNEL).
//
// No LibTorch and no CUDA header here: paged_attention.cpp, a LibTorch source, calls it with raw
// pointers, and the .cu file needs no ATen headers (nvcc never compiles LibTorch).
#pragma once

#include <cstdint>

namespace hs::trainer::detail {

enum class PagedKernelDtype { kFloat, kBFloat16, kHalf };

/// One decode token per sequence attending over its cached context, the K/V read through the
/// block table on the device (vLLM's paged attention, decode only). Every pointer is device memory.
struct PagedDecodeArgs {
  void* out = nullptr;                         // (B, H, D) contiguous, dtype
  const void* q = nullptr;                     // (B, H, D) contiguous, dtype
  const void* k_cache = nullptr;               // (slots, KV, D) contiguous, dtype
  const void* v_cache = nullptr;               // (slots, KV, D) contiguous, dtype
  const std::int64_t* block_tables = nullptr;  // (B, max_blocks) block ids
  const std::int64_t* context_lens = nullptr;  // (B) tokens of context, the new one included (>= 1)
  std::int64_t batch = 0, heads = 0, kv_heads = 0, head_dim = 0, max_blocks = 0, block_size = 0;
  float scale = 1.0f;  // 1 / sqrt(D)
  PagedKernelDtype dtype = PagedKernelDtype::kBFloat16;
  void* stream = nullptr;  // cudaStream_t to launch on
};

/// Head dimensions the kernel is compiled for.
bool paged_decode_supports_head_dim(std::int64_t head_dim);

/// Launches the kernel on args.stream; nullptr on success, else the reason (an unsupported shape,
/// or the CUDA runtime's launch error).
const char* launch_paged_decode(const PagedDecodeArgs& args);

}  // namespace hs::trainer::detail
