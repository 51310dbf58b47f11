// pending_collective.cpp — the synchronous stand-in for communicators without asynchronous
// collectives (see pending_collective.h).
#include "hybridscope/trainer/dist/pending_collective.h"

#include "hybridscope/probes/clock.h"

namespace hs::trainer {

std::unique_ptr<PendingCollective> all_gather_async(Communicator& comm, const at::Tensor& input) {
  if (auto* async = dynamic_cast<AsyncCollectives*>(&comm)) return async->all_gather_async(input);
  auto result = comm.all_gather(input);
  return std::make_unique<CompletedCollective>(std::move(result), probes::now_ns());
}

std::unique_ptr<PendingCollective> reduce_scatter_async(Communicator& comm, const at::Tensor& input, ReduceOp op) {
  if (auto* async = dynamic_cast<AsyncCollectives*>(&comm)) return async->reduce_scatter_async(input, op);
  auto result = comm.reduce_scatter(input, op);
  return std::make_unique<CompletedCollective>(std::move(result), probes::now_ns());
}

}  // namespace hs::trainer
