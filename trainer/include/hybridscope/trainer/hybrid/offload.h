// offload.h — moving the actor's training state out of device memory while it generates
// (verl's actor_rollout_ref.actor.fsdp_config.param_offload / optimizer_offload).
//
// Tensors move in place (Tensor::set_data): the module, AdamW's state map, the fsdp shards and the
// reshard executor keep holding the very tensors they held, so nothing has to be re-registered and
// the optimizer's state stays attached to its parameter. Host copies are pinned when the tensors
// come from a CUDA device (so the copy back can use DMA); on the CPU the host copy is a second
// host buffer, which exercises the same code and saves nothing.
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

namespace hs::trainer {

class HostOffload {
 public:
  /// Copies every defined tensor of `tensors` to host memory and points it there; returns the
  /// bytes moved. The device each came from is remembered for onload(). Throws std::logic_error
  /// when already offloaded.
  std::int64_t offload(std::vector<at::Tensor> tensors);
  /// Moves the offloaded tensors back to their devices; returns the bytes moved (0 when nothing is
  /// offloaded).
  std::int64_t onload();
  bool offloaded() const { return !tensors_.empty(); }

 private:
  std::vector<at::Tensor> tensors_;
  std::vector<c10::Device> devices_;
};

}  // namespace hs::trainer
