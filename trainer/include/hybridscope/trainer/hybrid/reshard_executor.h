// reshard_executor.h — runs a reshard plan (reshard.h) on one rank's tensors over a Communicator.
//
// train->rollout (to_generation): every rank packs the pieces it sends to each peer into one flat
// buffer per peer, the buffers move point to point, and each rank assembles its boxes from what it
// keeps and what it received; vanilla and naive then slice the generation shard out of the full
// tensors. The exchanges run over one group made through the GroupFactory ("reshard", all ranks)
// and wrapped in the ProbedCommunicator, so every byte lands in comm_ops as send/recv rows.
// Order: the unordered rank pairs (a, b), a < b, ascending; within a pair a sends then receives
// and b receives then sends. Every rank walks its pairs in that global order, so the smallest
// unfinished pair can always proceed: no deadlock even when send waits for the receiver. On
// HybridFlow's hybrid grouping the transfers are exactly what an all-gather within each micro-DP
// group moves (the same bytes per rank; see docs/resharding.md).
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

class ReshardExecutor {
 public:
  /// Collective over the world: every rank constructs its executor with the same plan (the
  /// group "reshard" is created here). Its transfers are recorded through `probes` (null: no
  /// comm_ops rows; it must outlive the executor). A group the factory already probes
  /// (C10dGroupFactory given probes) is used as it is, so no transfer is recorded twice.
  ReshardExecutor(std::shared_ptr<const ReshardPlan> plan, int rank, GroupFactory& groups,
                  const probes::RunProbes* probes = nullptr);

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
  const ReshardPlan& plan() const { return *plan_; }
  int rank() const { return rank_; }

 private:
  std::shared_ptr<const ReshardPlan> plan_;
  int rank_;
  std::shared_ptr<Communicator> comm_;
  ReshardBytes bytes_;
  std::vector<at::Tensor> kept_;  // training tensors that do not lie inside the generation box
  bool rounded_ = false;          // the last to_generation cast into another dtype
};

}  // namespace hs::trainer
