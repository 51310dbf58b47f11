// reshard_executor.h — runs a reshard plan (reshard.h) on one rank's tensors over a Communicator.
//
// train->rollout (to_generation): a piece that is one contiguous run of both the sender's training
// tensor and the receiver's assembled tensor (a whole layer's shard from a pipeline peer, a row
// block of a column-parallel weight) and is at least 64 KiB of fp32 moves as a message of its own,
// sent straight out of the training tensor and received straight into its place: no copy on
// either side. Every other piece a rank sends to a peer is packed into that peer's flat buffer —
// buffers allocated once per executor from the plan and reused by every switch — and unpacked by
// the receiver as soon as that buffer has arrived. Both sides derive the messages between them,
// and their order (the direct pieces in plan order, then the packed buffer), from the plan alone.
// All messages of a rank move in one batched exchange (Communicator::exchange); vanilla and naive
// then slice the generation shard out of the full tensors. A barrier of the group ends the switch
// (the time it waits is the wait for the slowest peer).
// The exchanges run over one group made through the GroupFactory ("reshard", all ranks) and
// wrapped in the ProbedCommunicator, so every byte lands in comm_ops as send/recv rows.
// Order: over c10d Gloo every receive and send of a rank is posted at once (all pairs in flight;
// nothing waits before everything is posted, so no deadlock); over NCCL they form one coalesced
// group (batch_isend_irecv's ncclGroupStart/End). Over communicators without asynchronous
// point-to-point ops (the thread world) the exchange runs the unordered rank
// pairs (a, b), a < b, ascending; within a pair a sends then receives and b receives then sends:
// the smallest unfinished pair can always proceed, so no deadlock even when send waits for the
// receiver. On HybridFlow's hybrid grouping the transfers are exactly what an all-gather within
// each micro-DP group moves (the same bytes per rank; see docs/resharding.md).
//
// rollout->train (to_training) moves nothing: a training box inside the generation box is sliced
// back out of it, otherwise the tensor kept at to_generation is returned (plan redundant_bytes).
// Generation does not write weights, so the restored shards are bit-identical.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include <ATen/core/Tensor.h>

#include "hybridscope/probes/run_probes.h"
#include "hybridscope/trainer/model/model.h"
#include "hybridscope/trainer/dist/parallel.h"
#include "hybridscope/trainer/hybrid/reshard_planner.h"

namespace hs::trainer {

/// The parameters of `model` as the layouts see them, in named_parameters() order: global shapes
/// (tp-split dims multiplied back by the model's tp size), tensor_parallel_dims(), the decoder
/// layer from the name. Equal to llama_parameters(model.shape()) for an LM-head actor.
std::vector<ParamSpec> parameter_specs(const TransformerImpl& model);

/// What one switch moved on this rank (the switch record's bytes_* columns).
struct ReshardBytes {
  std::int64_t sent = 0;
  std::int64_t received = 0;
  std::int64_t local = 0;
};

/// Where one to_generation spent this rank's time, in ns (probes::now_ns), as four consecutive
/// parts of the call that sum to its duration (the switch's reshard_* components, docs/schema.md).
struct ReshardTimes {
  std::int64_t pack_ns = 0;    // checks, the kept pieces' local copies, packing the send buffers
  std::int64_t wire_ns = 0;    // the exchange, first post to last message done, less the unpacking inside it
  std::int64_t unpack_ns = 0;  // received pieces copied into place (as each message arrives) and, vanilla
                               // and naive, the generation shard sliced out of the full tensors
  std::int64_t wait_ns = 0;    // the closing barrier: waiting for the slowest rank of the group
};

class ReshardExecutor {
 public:
  /// One message to or from a peer: piece `piece` of transfer `transfer` (moved directly), or
  /// the transfer's packed buffer.
  /// The default floor of a piece moved as its own message (reshard_planner.h).
  static constexpr std::int64_t kDirectMinElements = hs::trainer::kDirectMinElements;

  struct Message {
    static constexpr int kPacked = -1;
    std::size_t transfer = 0;
    int piece = kPacked;
  };

  /// Collective over the world: every rank constructs its executor with the same plan (the
  /// group "reshard" is created here). Its transfers are recorded through `probes` (null: no
  /// comm_ops rows; it must outlive the executor). A group the factory already probes
  /// (C10dGroupFactory given probes) is used as it is, so no transfer is recorded twice.
  /// `direct_min_elements`: the smallest piece that moves as a message of its own (when it is
  /// contiguous on both sides); smaller pieces are packed. The same on every rank of the plan.
  ReshardExecutor(std::shared_ptr<const ReshardPlan> plan, int rank, GroupFactory& groups,
                  const probes::RunProbes* probes = nullptr, std::int64_t direct_min_elements = kDirectMinElements);

  /// `training[p]`: this rank's training shard of plan parameter p (the training box's shape;
  /// undefined where the rank holds none). All defined tensors share one dtype and device.
  /// Returns the generation shard of every parameter (the generation box's shape, contiguous);
  /// where the rank's training box already is its generation box, the training tensor itself.
  /// `wire_dtype`: the generation shards are cast into it while they are packed and assembled, so
  /// they move in it (bf16 rollout weights from fp32 masters: half the bytes); the plan must have
  /// been made with its element size. The shards are then rounded copies, and to_training refuses.
  std::vector<at::Tensor> to_generation(const std::vector<at::Tensor>& training,
                                        std::optional<at::ScalarType> wire_dtype = std::nullopt);
  /// The training shards again from `generation` (what to_generation returned). Throws
  /// std::logic_error after a to_generation in another dtype: the training tensors, not the
  /// rounded generation shards, hold the weights.
  std::vector<at::Tensor> to_training(const std::vector<at::Tensor>& generation);

  /// Bytes of the last to_generation (equal to the plan's; to_training moves none).
  const ReshardBytes& last_bytes() const { return bytes_; }
  /// Time of the last to_generation, by part.
  const ReshardTimes& last_times() const { return times_; }
  const ReshardPlan& plan() const { return *plan_; }
  /// The messages of every switch, in the order they are posted (direct pieces, packed buffers).
  const std::vector<Message>& send_messages() const { return send_messages_; }
  const std::vector<Message>& recv_messages() const { return recv_messages_; }
  int rank() const { return rank_; }

 private:
  std::shared_ptr<const ReshardPlan> plan_;
  int rank_;
  std::shared_ptr<Communicator> comm_;
  ReshardBytes bytes_;
  ReshardTimes times_;
  // One flat buffer per peer (views of one allocation per direction), in plan order of
  // sends/recvs: (elements of the transfer's packed pieces,) in the wire dtype. Made at the first
  // to_generation and again only when the dtype or device changes.
  std::vector<at::Tensor> send_buffers_, recv_buffers_;
  std::vector<Message> send_messages_, recv_messages_;  // the order of the exchange's sends, receives
  std::vector<std::vector<std::size_t>> send_packed_, recv_packed_;  // per transfer: its packed pieces
  std::vector<at::Tensor> kept_;  // training tensors that do not lie inside the generation box
  bool rounded_ = false;          // the last to_generation cast into another dtype
};

}  // namespace hs::trainer
