// nccl_backend.h — the one place that constructs c10d::ProcessGroupNCCL (private to hs_trainer).
//
// Compiled with NCCL when the LibTorch is a CUDA build and the CUDA toolkit's nccl.h is found
// (HS_WITH_NCCL); otherwise make_nccl_backend throws DistError saying so.
#pragma once

#include <chrono>

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

namespace hs::trainer::detail {

/// An NCCL backend over `store` for CUDA tensors on this process's current device. Sets
/// TORCH_NCCL_BLOCKING_WAIT=1 (unless already set) so that work->wait() blocks the host until
/// the collective finished or `timeout` passed: the probe then times complete operations.
c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                                    std::chrono::milliseconds timeout);

}  // namespace hs::trainer::detail
