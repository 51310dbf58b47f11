#include "hybridscope/probes/gpu_activity.h"

#include <cstring>

namespace hs::probes {

KernelClass classify_kernel(const char* name) noexcept {
  if (!name) return KernelClass::kCompute;
  // CUPTI reports mangled names: ncclDevKernel_AllReduce_Sum_f32_RING_LL arrives as
  // _Z39ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE, so besides
  // HTA's `^nccl` the NCCL kernel prefixes are looked for anywhere in the name.
  // A one-rank communicator runs a pre-multiplied sum (ncclAvg on floats) as NCCL's own
  // oneRankReduce kernel (src/device/onerank.cu, anonymous namespace:
  // _ZN12_GLOBAL__N_113oneRankReduceI...); other one-rank reductions launch nothing.
  if (std::strncmp(name, "nccl", 4) == 0 || std::strstr(name, "ncclDevKernel") || std::strstr(name, "ncclKernel") ||
      std::strstr(name, "oneRankReduce"))
    return KernelClass::kNccl;
  if (std::strncmp(name, "Memcpy", 6) == 0 || std::strncmp(name, "Memset", 6) == 0) return KernelClass::kMemory;
  return KernelClass::kCompute;
}

}  // namespace hs::probes
