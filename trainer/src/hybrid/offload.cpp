// offload.cpp — HostOffload: device <-> host moves in place.
#include "hybridscope/trainer/hybrid/offload.h"

#include <stdexcept>

#include <torch/torch.h>

namespace hs::trainer {

std::int64_t HostOffload::offload(std::vector<at::Tensor> tensors) {
  if (offloaded()) throw std::logic_error("HostOffload::offload: the tensors of the last offload are still on the host");
  torch::NoGradGuard no_grad;
  std::int64_t bytes = 0;
  for (auto& t : tensors) {
    if (!t.defined()) continue;
    const auto host = torch::TensorOptions().device(torch::kCPU).pinned_memory(t.is_cuda());
    devices_.push_back(t.device());
    t.set_data(t.to(host, /*non_blocking=*/false, /*copy=*/true));  // the device block returns to its allocator
    bytes += static_cast<std::int64_t>(t.nbytes());
    tensors_.push_back(t);
  }
  return bytes;
}

std::int64_t HostOffload::onload() {
  torch::NoGradGuard no_grad;
  std::int64_t bytes = 0;
  for (std::size_t i = 0; i < tensors_.size(); ++i) {
    auto& t = tensors_[i];
    t.set_data(t.to(devices_[i], /*non_blocking=*/false, /*copy=*/true));
    bytes += static_cast<std::int64_t>(t.nbytes());
  }
  tensors_.clear();
  devices_.clear();
  return bytes;
}

}  // namespace hs::trainer
