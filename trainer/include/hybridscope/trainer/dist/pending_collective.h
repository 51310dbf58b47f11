// pending_collective.h — collectives that run while the caller computes: issue now, wait later.
//
// fsdp's per-layer gathers (zero.h, forward_prefetch) issue the next layer's all_gather and the
// last layer's gradient reduce_scatter and go on computing; wait() returns the result. c10d's
// Gloo backend runs its ops on its own worker threads, so the transfer really proceeds while the
// training thread computes; C10dCommunicator and the probe (ProbedCommunicator) implement
// AsyncCollectives. Any other Communicator (the single-rank identity, the in-process thread world)
// gets a synchronous stand-in: the collective runs at issue and wait() hands back its result.
//
// Every rank of the group issues the same collectives in the same order, as for the blocking ones.
//
// What this is not: a general asynchronous Communicator (point-to-point and all_reduce stay
// blocking; only what fsdp overlaps is here).
#pragma once

#include <cstdint>
#include <memory>

#include <ATen/core/Tensor.h>

#include "hybridscope/trainer/dist/parallel.h"

namespace hs::trainer {

/// One issued collective. wait() once; destroying an unwaited one waits for it (a collective must
/// complete on every rank before its buffers go).
class PendingCollective {
 public:
  virtual ~PendingCollective() = default;
  /// Blocks until the collective completed; its result (what the blocking call would return).
  virtual at::Tensor wait() = 0;
  /// probes::now_ns() when the backend saw it complete (valid after wait(); at most wait()'s
  /// return, where the backend tells no earlier time).
  virtual std::int64_t completed_ns() const = 0;
};

/// Implemented by communicators whose backend runs these collectives off the calling thread.
class AsyncCollectives {
 public:
  virtual ~AsyncCollectives() = default;
  /// Issues all_gather(input) (Communicator::all_gather's result from wait()).
  virtual std::unique_ptr<PendingCollective> all_gather_async(const at::Tensor& input) = 0;
  /// Issues reduce_scatter(input, op) (Communicator::reduce_scatter's result from wait()).
  virtual std::unique_ptr<PendingCollective> reduce_scatter_async(const at::Tensor& input, ReduceOp op) = 0;
};

/// `comm`'s asynchronous all_gather, or the synchronous stand-in when it has none.
std::unique_ptr<PendingCollective> all_gather_async(Communicator& comm, const at::Tensor& input);
/// `comm`'s asynchronous reduce_scatter, or the synchronous stand-in when it has none.
std::unique_ptr<PendingCollective> reduce_scatter_async(Communicator& comm, const at::Tensor& input,
                                                        ReduceOp op = ReduceOp::kSum);

/// A collective that already ran (the stand-in): wait() returns `result`.
class CompletedCollective final : public PendingCollective {
 public:
  CompletedCollective(at::Tensor result, std::int64_t completed_ns)
      : result_(std::move(result)), completed_ns_(completed_ns) {}
  at::Tensor wait() override { return result_; }
  std::int64_t completed_ns() const override { return completed_ns_; }

 private:
  at::Tensor result_;
  std::int64_t completed_ns_;
};

}  // namespace hs::trainer
