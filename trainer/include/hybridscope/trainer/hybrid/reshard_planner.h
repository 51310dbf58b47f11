// reshard.h — the reshard planner: a pure function from (training layout, generation layout,
// mode) to what every rank sends, receives and keeps (HybridFlow §5, Table 2; design brief §2).
//
// Each rank *assembles* a set of boxes: in hybrid mode its generation shard; in vanilla and naive
// mode the full tensors (then it slices its generation shard locally). The assembled boxes are
// filled from *source pieces*, which partition every parameter, so nothing is received twice
// and nothing is kept twice:
//   hybrid, vanilla: the distinct training boxes; a piece the rank holds is kept locally, the
//     others come from a holder in the rank's own training replica (same dp coordinate) when
//     there is one (megatron), else from the one rank that holds it (fsdp);
//   naive (DS-Chat / ZeRO-3): every training box split again into dp row blocks, block j
//     contributed by the rank with dp coordinate j, so each rank contributes M/(p·t·d) (balanced
//     stages, d dividing the rows; uneven blocks otherwise) and receives everything else —
//     including what its megatron replica already holds.
// Per rank: received = bytes assembled − bytes kept. With every parameter tp-split and balanced
// stages this is HybridFlow's Table 2 (docs/resharding.md gives the per-rank statement for
// unbalanced stages and tp-replicated parameters).
//
// The rollout->train direction moves nothing: a training box inside the generation box is
// sliced back out of it; otherwise the executor kept the training tensor (counted as redundant).
//
// Deliberately free of LibTorch (reshard_executor.h runs a plan on tensors).
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "hybridscope/trainer/dist/layout.h"

namespace hs::trainer {

/// A box of one parameter (index into LayoutSet::params), in the parameter's global indices.
struct Piece {
  std::size_t param = 0;
  Box box;
};

/// The pieces one rank sends to or receives from one peer (a world rank), in a fixed order that
/// both sides derive from the same plan; bytes is their sum.
struct Transfer {
  int peer = 0;
  std::vector<Piece> pieces;
  std::int64_t bytes = 0;
};

struct RankPlan {
  /// Per parameter: the box this rank assembles (nullopt: none of it). Hybrid: the generation
  /// box; vanilla, naive: the full tensor.
  std::vector<std::optional<Box>> assembled;
  std::vector<Piece> local;       // copied from the rank's own training shard
  std::vector<Transfer> sends;    // ascending peer
  std::vector<Transfer> recvs;    // ascending peer
  std::int64_t bytes_sent = 0;
  std::int64_t bytes_received = 0;
  std::int64_t bytes_local = 0;
  std::int64_t training_bytes = 0;    // the rank's training shard
  std::int64_t generation_bytes = 0;  // its generation shard
  /// Parameter bytes held at the switch's peak: assembled ∪ training shard.
  std::int64_t peak_parameter_bytes = 0;
  /// Training bytes outside the generation shard, kept through rollout to restore the layout.
  std::int64_t redundant_bytes = 0;
};

struct ReshardPlan {
  ReshardMode mode = ReshardMode::kHybrid;
  LayoutSet training;
  LayoutSet generation;
  std::vector<RankPlan> ranks;  // by world rank
};

/// A plan's byte counts without its pieces: what the simulator (bench/sim) needs to cost a switch
/// on 1024 ranks, where the pieces of a naive plan (world² · parameters boxes) would not fit in
/// memory. Made by the same walk as plan_reshard, so every count equals the plan's.
/// The smallest piece the executor moves as a message of its own (below, moves_directly): 64 KiB
/// of fp32; smaller pieces ride in their peer's packed buffer, since a Gloo message of its own
/// costs more than copying them twice.
constexpr std::int64_t kDirectMinElements = 16 * 1024;

/// inner ⊆ outer is one contiguous run of a row-major tensor of outer's shape: the dims after the
/// first one that inner does not span whole are whole, and those before it have size 1.
bool contiguous_within(const Box& outer, const Box& inner);

/// The executor's rule (reshard_executor.h): `piece` moves from the rank holding `sender_box` (its
/// training box) to the rank assembling `receiver_box` as a message of its own, sent straight out
/// of the training tensor and received straight into place, when it has at least `min_elements`
/// and is contiguous within both boxes; otherwise it is packed and unpacked.
bool moves_directly(const Box& sender_box, const Box& receiver_box, const Box& piece,
                    std::int64_t min_elements = kDirectMinElements);

struct RankTraffic {
  std::int64_t bytes_sent = 0;
  std::int64_t bytes_received = 0;
  std::int64_t bytes_local = 0;
  /// Of bytes_sent / bytes_received, what goes through the packed buffers (copied on the way out
  /// / in; the rest moves directly, moves_directly with kDirectMinElements).
  std::int64_t packed_bytes_sent = 0;
  std::int64_t packed_bytes_received = 0;
  std::int64_t training_bytes = 0;
  std::int64_t generation_bytes = 0;
  std::int64_t peak_parameter_bytes = 0;
  std::int64_t redundant_bytes = 0;
  std::vector<std::pair<int, std::int64_t>> sent_to;        // (peer, bytes), ascending peer
  std::vector<std::pair<int, std::int64_t>> received_from;  // (peer, bytes), ascending peer
};

struct ReshardTraffic {
  ReshardMode mode = ReshardMode::kHybrid;
  std::int64_t model_bytes = 0;
  std::vector<RankTraffic> ranks;  // by world rank
};

/// Plans train->rollout. Throws LayoutError when the layouts disagree (world size, parameters).
ReshardPlan plan_reshard(const LayoutSet& training, const LayoutSet& generation, ReshardMode mode);

/// The training and generation layouts of `params` for one configuration, then the plan:
/// mesh (pp, tp, world/(pp·tp)) with the strategy's dp sharding, rollout tp `rollout_tp`.
ReshardPlan plan_reshard(const std::vector<ParamSpec>& params, const MeshShape& training_mesh, DpSharding dp,
                         int rollout_tp, ReshardMode mode);

/// The byte counts of plan_reshard(training, generation, mode), per rank and per peer.
ReshardTraffic reshard_traffic(const LayoutSet& training, const LayoutSet& generation, ReshardMode mode);
ReshardTraffic reshard_traffic(const std::vector<ParamSpec>& params, const MeshShape& training_mesh, DpSharding dp,
                               int rollout_tp, ReshardMode mode);

}  // namespace hs::trainer
