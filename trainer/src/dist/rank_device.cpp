// rank_device.cpp — see rank_device.h.
#include "hybridscope/trainer/dist/rank_device.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/cuda.h>

#include "torch_compat.h"

namespace hs::trainer {

c10::Device trainer_device(DeviceKind device, int local_rank, bool expandable_segments) {
  if (device == DeviceKind::kCpu) return c10::Device(c10::kCPU);
  if (expandable_segments) compat::set_allocator_settings("expandable_segments:True");
  if (!torch::cuda::is_available())
    throw ConfigError(
        "trainer.device = cuda, but this process sees no CUDA device (a CPU-only LibTorch, no NVIDIA driver, or "
        "CUDA_VISIBLE_DEVICES hides them all): set trainer.device=cpu, or run on a GPU machine (docs/building.md, "
        "\"On a GPU machine\")");
  const auto count = static_cast<int>(torch::cuda::device_count());
  const c10::Device cuda(c10::kCUDA, static_cast<c10::DeviceIndex>(local_rank % count));
  // The current device of this process: NCCL's communicators and the caching allocator's
  // statistics are per device, and every rank of a node must take its own. Its context and the
  // allocator exist from here on, before the first tensor (the memory probe and the KV pool's
  // sizing ask the driver and the allocator first).
#if HS_TORCH_HAS_CUDA_ALLOCATOR
  compat::cuda_set_device(cuda.index());
#else
  c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->setDevice(cuda);
#endif
  return cuda;
}

int memory_device_index(const c10::Device& device) { return device.is_cuda() ? device.index() : -1; }

}  // namespace hs::trainer
