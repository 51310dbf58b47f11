// paged_attention_kernel.cu — hybridscope's paged-attention decode kernel (launcher in
// paged_attention_kernel.h; called by paged_attention.cpp).
//
// One thread block per (sequence, KV head, group of up to kMaxGroup query heads): the block reads
// that KV head's keys and values once for all the query heads that share it (GQA), through the
// sequence's block table, so no gathered (B, KV, L, D) copy of the context is ever made. Its
// kWarps warps take the context positions in turn (warp w: w, w + kWarps, ...); within a warp the
// 32 lanes split the head dimension (E = D / 32 each), a dot product is a warp reduction, and each
// warp keeps an online softmax (running max, running sum, running weighted V) per query head. The
// warps' partial results are merged through shared memory at the end (flash-decoding's merge of
// partial softmaxes). Scores and sums in float32 whatever the cache dtype, as SDPA accumulates.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math_constants.h>

#include <cstdint>

#include "model/paged_attention_kernel.h"

namespace hs::trainer::detail {
namespace {

constexpr int kWarps = 8;
constexpr int kMaxGroup = 8;  // query heads of one KV head per block (more: another block along z)

__device__ inline float to_float(float x) { return x; }
__device__ inline float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ inline float to_float(__half x) { return __half2float(x); }

template <class T>
__device__ inline T from_float(float x);
template <>
__device__ inline float from_float<float>(float x) { return x; }
template <>
__device__ inline __nv_bfloat16 from_float<__nv_bfloat16>(float x) { return __float2bfloat16(x); }
template <>
__device__ inline __half from_float<__half>(float x) { return __float2half(x); }

__device__ inline float warp_sum(float x) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) x += __shfl_xor_sync(0xffffffffu, x, offset);
  return x;
}

template <class T, int E>
__global__ void __launch_bounds__(kWarps * 32) paged_decode_kernel(PagedDecodeArgs a) {
  constexpr int D = E * 32;
  const std::int64_t b = blockIdx.x;
  const std::int64_t kvh = blockIdx.y;
  const std::int64_t G = a.heads / a.kv_heads;
  const std::int64_t g0 = static_cast<std::int64_t>(blockIdx.z) * kMaxGroup;
  const int groups = static_cast<int>(G - g0 < kMaxGroup ? G - g0 : kMaxGroup);  // the same in every thread
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const std::int64_t L = a.context_lens[b];
  const std::int64_t bs = a.block_size;
  const std::int64_t first_head = b * a.heads + kvh * G + g0;  // row of (B * H) of this block's query head 0
  T* out = static_cast<T*>(a.out) + first_head * D;

  if (L <= 0) {  // no context: zeros, never a division by an empty sum
    for (int g = 0; g < groups; ++g)
      for (int e = 0; e < E; ++e) out[g * D + lane * E + e] = from_float<T>(0.0f);
    return;
  }

  // This lane's E features of each query head, pre-scaled by 1/sqrt(D).
  const T* q = static_cast<const T*>(a.q) + first_head * D + lane * E;
  float qr[kMaxGroup][E];
  float m[kMaxGroup], l[kMaxGroup], acc[kMaxGroup][E];
#pragma unroll
  for (int g = 0; g < kMaxGroup; ++g) {
    m[g] = -CUDART_INF_F;
    l[g] = 0.0f;
#pragma unroll
    for (int e = 0; e < E; ++e) {
      qr[g][e] = g < groups ? to_float(q[g * D + e]) * a.scale : 0.0f;
      acc[g][e] = 0.0f;
    }
  }

  const std::int64_t* table = a.block_tables + b * a.max_blocks;
  const T* k_cache = static_cast<const T*>(a.k_cache);
  const T* v_cache = static_cast<const T*>(a.v_cache);
  for (std::int64_t j = warp; j < L; j += kWarps) {
    const std::int64_t slot = table[j / bs] * bs + j % bs;
    const std::int64_t at = (slot * a.kv_heads + kvh) * D + lane * E;
    float kr[E], vr[E];
#pragma unroll
    for (int e = 0; e < E; ++e) {
      kr[e] = to_float(k_cache[at + e]);
      vr[e] = to_float(v_cache[at + e]);
    }
#pragma unroll
    for (int g = 0; g < kMaxGroup; ++g) {
      if (g >= groups) break;  // uniform over the warp: no divergence inside warp_sum
      float s = 0.0f;
#pragma unroll
      for (int e = 0; e < E; ++e) s += qr[g][e] * kr[e];
      s = warp_sum(s);
      const float m_new = fmaxf(m[g], s);
      const float rescale = expf(m[g] - m_new);  // 0 on the first position (m = -inf)
      const float p = expf(s - m_new);
      l[g] = l[g] * rescale + p;
#pragma unroll
      for (int e = 0; e < E; ++e) acc[g][e] = acc[g][e] * rescale + p * vr[e];
      m[g] = m_new;
    }
  }

  // Merge the warps' partial softmaxes, one query head at a time (a warp that saw no position
  // has m = -inf and weighs 0; warp 0 always saw position 0).
  __shared__ float shared_m[kWarps], shared_l[kWarps];
  __shared__ float shared_acc[kWarps][D];
#pragma unroll
  for (int g = 0; g < kMaxGroup; ++g) {
    if (g >= groups) break;  // uniform over the block: every thread reaches the same barriers
    if (lane == 0) {
      shared_m[warp] = m[g];
      shared_l[warp] = l[g];
    }
#pragma unroll
    for (int e = 0; e < E; ++e) shared_acc[warp][lane * E + e] = acc[g][e];
    __syncthreads();
    if (warp == 0) {
      float top = -CUDART_INF_F;
      for (int w = 0; w < kWarps; ++w) top = fmaxf(top, shared_m[w]);
      float total = 0.0f, o[E];
#pragma unroll
      for (int e = 0; e < E; ++e) o[e] = 0.0f;
      for (int w = 0; w < kWarps; ++w) {
        const float weight = expf(shared_m[w] - top);
        total += shared_l[w] * weight;
#pragma unroll
        for (int e = 0; e < E; ++e) o[e] += shared_acc[w][lane * E + e] * weight;
      }
#pragma unroll
      for (int e = 0; e < E; ++e) out[g * D + lane * E + e] = from_float<T>(o[e] / total);
    }
    __syncthreads();
  }
}

template <class T>
const char* launch_for_dtype(const PagedDecodeArgs& a, dim3 grid, cudaStream_t stream) {
  const dim3 block(kWarps * 32);
  switch (a.head_dim) {
    case 32: paged_decode_kernel<T, 1><<<grid, block, 0, stream>>>(a); break;
    case 64: paged_decode_kernel<T, 2><<<grid, block, 0, stream>>>(a); break;
    case 96: paged_decode_kernel<T, 3><<<grid, block, 0, stream>>>(a); break;
    case 128: paged_decode_kernel<T, 4><<<grid, block, 0, stream>>>(a); break;
    case 256: paged_decode_kernel<T, 8><<<grid, block, 0, stream>>>(a); break;
    default: return "head_dim must be 32, 64, 96, 128 or 256";
  }
  const cudaError_t error = cudaGetLastError();
  return error == cudaSuccess ? nullptr : cudaGetErrorString(error);
}

}  // namespace

bool paged_decode_supports_head_dim(std::int64_t head_dim) {
  return head_dim == 32 || head_dim == 64 || head_dim == 96 || head_dim == 128 || head_dim == 256;
}

const char* launch_paged_decode(const PagedDecodeArgs& a) {
  if (a.batch == 0) return nullptr;
  if (a.batch < 0 || a.kv_heads <= 0 || a.heads % a.kv_heads != 0 || a.block_size <= 0 || a.max_blocks <= 0) {
    return "batch >= 0, kv_heads > 0 dividing heads, block_size > 0 and max_blocks > 0 are required";
  }
  if (a.batch > 0x7fffffff || a.kv_heads > 65535) return "batch or kv_heads exceeds the launch grid";
  const auto G = a.heads / a.kv_heads;
  const dim3 grid(static_cast<unsigned>(a.batch), static_cast<unsigned>(a.kv_heads),
                  static_cast<unsigned>((G + kMaxGroup - 1) / kMaxGroup));
  auto* stream = static_cast<cudaStream_t>(a.stream);
  switch (a.dtype) {
    case PagedKernelDtype::kFloat: return launch_for_dtype<float>(a, grid, stream);
    case PagedKernelDtype::kBFloat16: return launch_for_dtype<__nv_bfloat16>(a, grid, stream);
    case PagedKernelDtype::kHalf: return launch_for_dtype<__half>(a, grid, stream);
  }
  return "unknown dtype";
}

}  // namespace hs::trainer::detail
