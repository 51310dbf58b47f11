// paged_attention.cpp — paged_decode_attention: LibTorch tensors onto the paged-attention decode
// kernel (paged_attention_kernel.cu). Built without it (no CUDA compiler, or a CPU LibTorch),
// paged_decode_kernel_built() is false and set_compute refuses ComputeOptions.paged_decode.
#include <torch/torch.h>

#include <stdexcept>
#include <string>

#include "model/model_layers.h"

#ifndef HS_HAVE_PAGED_KERNEL
#define HS_HAVE_PAGED_KERNEL 0  // set by trainer/CMakeLists.txt where nvcc built the kernel
#endif

#if HS_HAVE_PAGED_KERNEL
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "model/paged_attention_kernel.h"
#endif

namespace hs::trainer::detail {

bool paged_decode_kernel_built() { return HS_HAVE_PAGED_KERNEL != 0; }

torch::Tensor paged_decode_attention(const torch::Tensor& q, const torch::Tensor& k_cache, const torch::Tensor& v_cache,
                                     const torch::Tensor& block_tables, const torch::Tensor& context_lens,
                                     std::int64_t block_size, double scale) {
  TORCH_CHECK(q.dim() == 3 && k_cache.dim() == 3 && v_cache.sizes() == k_cache.sizes(),
              "paged_decode_attention: q (B, H, D) and caches (slots, KV, D), got ", q.sizes(), " and ",
              k_cache.sizes());
  TORCH_CHECK(q.size(2) == k_cache.size(2) && q.size(1) % k_cache.size(1) == 0,
              "paged_decode_attention: q ", q.sizes(), " does not match the cache's KV heads and head_dim ",
              k_cache.sizes());
  TORCH_CHECK(block_tables.dim() == 2 && block_tables.size(0) == q.size(0) && context_lens.numel() == q.size(0),
              "paged_decode_attention: block_tables (B, max_blocks) and context_lens (B) must match B = ", q.size(0));
#if HS_HAVE_PAGED_KERNEL
  TORCH_CHECK(q.is_cuda() && k_cache.device() == q.device() && v_cache.device() == q.device() &&
                  block_tables.device() == q.device() && context_lens.device() == q.device(),
              "paged_decode_attention: every tensor must be on the same CUDA device (hybridscope.decode.paged_kernel "
              "is a CUDA kernel)");
  TORCH_CHECK(k_cache.is_contiguous() && v_cache.is_contiguous(), "paged_decode_attention: the caches must be contiguous");
  PagedKernelDtype dtype;
  switch (k_cache.scalar_type()) {
    case torch::kFloat: dtype = PagedKernelDtype::kFloat; break;
    case torch::kBFloat16: dtype = PagedKernelDtype::kBFloat16; break;
    case torch::kHalf: dtype = PagedKernelDtype::kHalf; break;
    default: TORCH_CHECK(false, "paged_decode_attention: cache dtype ", k_cache.scalar_type(), " is not float32, bf16 or fp16");
  }
  const c10::cuda::CUDAGuard guard(q.device());
  const auto qc = q.to(k_cache.scalar_type()).contiguous();
  const auto tables = block_tables.to(torch::kLong).contiguous();
  const auto lens = context_lens.to(torch::kLong).contiguous().view({-1});
  auto out = torch::empty_like(qc);
  PagedDecodeArgs args;
  args.out = out.data_ptr();
  args.q = qc.data_ptr();
  args.k_cache = k_cache.data_ptr();
  args.v_cache = v_cache.data_ptr();
  args.block_tables = tables.data_ptr<std::int64_t>();
  args.context_lens = lens.data_ptr<std::int64_t>();
  args.batch = qc.size(0);
  args.heads = qc.size(1);
  args.kv_heads = k_cache.size(1);
  args.head_dim = qc.size(2);
  args.max_blocks = tables.size(1);
  args.block_size = block_size;
  args.scale = static_cast<float>(scale);
  args.dtype = dtype;
  args.stream = c10::cuda::getCurrentCUDAStream(q.device().index()).stream();
  if (const char* error = launch_paged_decode(args)) {
    throw std::runtime_error(std::string("paged_decode_attention: ") + error +
                             " (set hybridscope.decode.paged_kernel=false to attend through the gathered context)");
  }
  return out;
#else
  (void)v_cache;
  (void)block_size;
  (void)scale;
  throw std::invalid_argument("paged_decode_attention: this build has no paged-attention kernel (no CUDA compiler or a "
                              "CPU LibTorch when it was configured): set hybridscope.decode.paged_kernel=false");
#endif
}

bool paged_decode_supports(std::int64_t head_dim) {
#if HS_HAVE_PAGED_KERNEL
  return paged_decode_supports_head_dim(head_dim);
#else
  (void)head_dim;
  return false;
#endif
}

}  // namespace hs::trainer::detail
