// parallel.h — the process-group interface every module-level collective goes through.
//
// A one-rank world (SingleRankCommunicator) makes every collective the identity; c10d Gloo/NCCL
// communicators (process_group.h), the in-process thread world (thread_world.h) and the
// communication probe (probed_communicator.h) sit behind the same interface. Model layers, the
// optimizer and the training loop take a ParallelContext so that layouts extend them rather than
// rewrite them.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "hybridscope/trainer/dist/layout.h"

namespace hs::trainer {

enum class ReduceOp { kSum, kMax, kMin, kAvg };

/// One message of a batched point-to-point exchange (Communicator::exchange): `tensor` goes to, or
/// comes from, group rank `peer`. A receive's tensor is preallocated and contiguous, of the
/// sender's shape and dtype; it is filled in place (the handle is shared, so the list may be const).
struct P2POp {
  at::Tensor tensor;
  int peer = -1;
};

/// What an exchange reports while it runs, each hook with the op's index in its list (any may be
/// empty). All run on the calling thread. `recv_done(i)` runs as soon as receive i's tensor is
/// filled, while later receives may still be in flight: the caller unpacks there. `*_posted` is
/// when the op was handed to the backend, `*_done` when the exchange saw it complete (the
/// probe's start and end of the transfer's row).
struct ExchangeHooks {
  std::function<void(std::size_t)> send_posted, send_done, recv_posted, recv_done;
};

/// A group of ranks that runs collectives together.
class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string name() const = 0;  // e.g. "world", "tp", "dp"
  /// In place.
  virtual void all_reduce(at::Tensor& tensor, ReduceOp op = ReduceOp::kSum) = 0;
  /// Concatenation of every rank's `input` along dim 0 (equal shapes).
  virtual at::Tensor all_gather(const at::Tensor& input) = 0;
  /// This rank's 1/size slice (dim 0) of the element-wise reduction of every rank's `input`.
  virtual at::Tensor reduce_scatter(const at::Tensor& input, ReduceOp op = ReduceOp::kSum) = 0;
  virtual void broadcast(at::Tensor& tensor, int root) = 0;
  /// Point to point within the group (`peer` is a group rank, not this rank): `send` blocks until
  /// the tensor may be reused, `recv` fills a preallocated tensor of the sender's shape and dtype.
  virtual void send(const at::Tensor& tensor, int peer) = 0;
  virtual void recv(at::Tensor& tensor, int peer) = 0;
  virtual void barrier() = 0;
  /// Moves many point-to-point messages at once: every op of `sends` and `recvs`. Collective over
  /// the ranks it names: each peer calls it too, and between two ranks a's sends to b, in list
  /// order, match b's receives from a, in list order. Returns when every op is complete.
  /// The default moves them pair by pair in one global order — the unordered pairs (a, b), a < b,
  /// ascending; within a pair a sends then receives and b receives then sends — so the smallest
  /// unfinished pair can always proceed: no deadlock even where `send` waits for the receiver. A
  /// communicator with asynchronous point-to-point ops (C10dCommunicator over Gloo) overrides it
  /// to post everything at once.
  virtual void exchange(const std::vector<P2POp>& sends, const std::vector<P2POp>& recvs,
                        const ExchangeHooks& hooks = {});
};

/// The default exchange of Communicator, callable by overrides that fall back to it: pairs in
/// the global order above, over `comm`'s own send and recv.
void exchange_in_pair_order(Communicator& comm, const std::vector<P2POp>& sends, const std::vector<P2POp>& recvs,
                            const ExchangeHooks& hooks);

/// Makes the groups of a world. c10d's rule holds: every rank of the world calls new_group with
/// the same `ranks` (world ranks, ascending) in the same order, including ranks outside the group,
/// which get nullptr. Group rank i is ranks[i].
class GroupFactory {
 public:
  virtual ~GroupFactory() = default;
  virtual std::shared_ptr<Communicator> world() = 0;
  virtual std::shared_ptr<Communicator> new_group(const std::vector<int>& ranks, const std::string& name) = 0;
};

/// The world of one rank: every collective is the identity.
class SingleRankCommunicator final : public Communicator {
 public:
  explicit SingleRankCommunicator(std::string name = "world") : name_(std::move(name)) {}
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string name() const override { return name_; }
  void all_reduce(at::Tensor&, ReduceOp) override {}
  at::Tensor all_gather(const at::Tensor& input) override { return input; }
  at::Tensor reduce_scatter(const at::Tensor& input, ReduceOp) override { return input; }
  void broadcast(at::Tensor&, int) override {}
  void send(const at::Tensor&, int peer) override { no_peer(peer); }
  void recv(at::Tensor&, int peer) override { no_peer(peer); }
  void barrier() override {}

 private:
  [[noreturn]] static void no_peer(int peer);

  std::string name_;
};

/// The groups of a one-rank world: every group is a SingleRankCommunicator of that name.
class SingleRankGroupFactory final : public GroupFactory {
 public:
  std::shared_ptr<Communicator> world() override { return std::make_shared<SingleRankCommunicator>("world"); }
  std::shared_ptr<Communicator> new_group(const std::vector<int>& ranks, const std::string& name) override;
};

/// The groups a rank belongs to in its current layout. Each pointer is non-null; the default
/// context is one rank in every group.
struct ParallelContext {
  std::shared_ptr<Communicator> world = std::make_shared<SingleRankCommunicator>("world");
  std::shared_ptr<Communicator> tp = std::make_shared<SingleRankCommunicator>("tp");
  std::shared_ptr<Communicator> dp = std::make_shared<SingleRankCommunicator>("dp");
  std::shared_ptr<Communicator> pp = std::make_shared<SingleRankCommunicator>("pp");
  /// How the workers' optimizers hold parameters along dp: replicated (megatron) or ZeRO-3 shards
  /// (fsdp, zero.h). Set from actor_rollout_ref.actor.strategy (dp_sharding_for_strategy).
  DpSharding dp_sharding = DpSharding::kReplicated;

  int world_size() const { return world->size(); }
};

}  // namespace hs::trainer
