#include "hybridscope/probes/gpu_activity.h"

#include <cstring>

namespace hs::probes {

KernelClass classify_kernel(const char* name) noexcept {
  if (!name) return KernelClass::kCompute;
  // CUPTI reports mangled names: ncclDevKernel_AllReduce_Sum_f32_RING_LL arrives as
  // _Z39ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE, so besides
  // HTA's `^nccl` the NCCL kernel prefixes are looked for anywhere in the name.
  if (std::strncmp(name, "nccl", 4) == 0 || std::strstr(name, "ncclDevKernel") || std::strstr(name, "ncclKernel"))
    return KernelClass::kNccl;
  if (std::strncmp(name, "Memcpy", 6) == 0 || std::strncmp(name, "Memset", 6) == 0) return KernelClass::kMemory;
  return KernelClass::kCompute;
}

}  // namespace hs::probes
