// nccl_backend.cpp — c10d::ProcessGroupNCCL construction (see nccl_backend.h).
#include "dist/nccl_backend.h"

#include <cstdlib>

#include <fmt/format.h>

#include "hybridscope/trainer/dist/process_group.h"

#ifdef HS_WITH_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

namespace hs::trainer::detail {

c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                                    std::chrono::milliseconds timeout) {
#ifdef HS_WITH_NCCL
  setenv("TORCH_NCCL_BLOCKING_WAIT", "1", 0);
  auto opts = c10d::ProcessGroupNCCL::Options::create();
  opts->timeout = timeout;
  try {
    return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, size, opts);
  } catch (const std::exception& e) {
    throw DistError(fmt::format("forming an NCCL group of {} ranks failed: {}", size, e.what()));
  }
#else
  (void)store;
  (void)rank;
  (void)timeout;
  throw DistError(fmt::format(
      "hybridscope.dist.backend=nccl (a group of {} ranks) needs a build against a CUDA LibTorch with the CUDA "
      "toolkit's nccl.h; this build has no NCCL — use hybridscope.dist.backend=gloo",
      size));
#endif
}

}  // namespace hs::trainer::detail
