// layout.h — the device mesh and where each parameter lives on it (3D-HybridEngine, design
// brief §2 "Resharding"; HybridFlow §5).
//
// A mesh is (pp, tp, dp) with world = pp·tp·dp. A *layout* says, for every parameter, which
// pipeline stage holds it, which tensor dim is split over the mesh's tp dimension (or none:
// replicated) and which dim of that tp shard is split over dp (or none). Together with the rank
// grouping (which mesh coordinate each world rank takes) it gives the *box* — one index range per
// tensor dim — that every rank holds. The reshard planner (reshard.h) intersects boxes.
//
// Deliberately free of LibTorch: layouts and plans are pure data, so the planner is a fast,
// process-free unit-testable function. See docs/resharding.md.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "hybridscope/trainer/config/config.h"

namespace hs::trainer {

/// A shape that cannot be laid out (a split that does not divide, a bad mesh): the message names
/// the parameter or key and what to change.
class LayoutError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

struct MeshShape {
  int pp = 1, tp = 1, dp = 1;
  int world() const { return pp * tp * dp; }
};

struct MeshCoord {
  int pp = 0, tp = 0, dp = 0;
  bool operator==(const MeshCoord& o) const { return pp == o.pp && tp == o.tp && dp == o.dp; }
};

/// Megatron-LM's rank order: tp fastest, then dp, then pp:
///   rank = tp + mesh.tp * (dp + mesh.dp * pp).
/// So a tp group is consecutive ranks and a pipeline stage is a block of tp·dp ranks.
MeshCoord megatron_coord(const MeshShape& mesh, int rank);
int megatron_rank(const MeshShape& mesh, const MeshCoord& coord);

/// Half-open index range [begin, end).
struct Range {
  std::int64_t begin = 0, end = 0;
  std::int64_t size() const { return end - begin; }
  bool operator==(const Range& o) const { return begin == o.begin && end == o.end; }
};

/// A box of a tensor in global indices: one range per dim.
struct Box {
  std::vector<Range> ranges;
  std::int64_t numel() const;
  std::vector<std::int64_t> shape() const;
  bool operator==(const Box& o) const { return ranges == o.ranges; }
  bool operator<(const Box& other) const;  // lexicographic on (begin, end), to deduplicate boxes
};

/// The whole tensor of `shape`.
Box full_box(const std::vector<std::int64_t>& shape);
/// a ∩ b, or nullopt when they do not overlap.
std::optional<Box> intersect(const Box& a, const Box& b);
/// Elements of a ∩ b (0 when they do not overlap), without building the box.
std::int64_t overlap_numel(const Box& a, const Box& b);
/// inner ⊆ outer.
bool contains(const Box& outer, const Box& inner);

/// One parameter as the layouts see it (torch-free): its name in named_parameters(), global
/// (unsharded) shape, bytes per element, the dim column/row-parallel layers split over tp (-1:
/// replicated over tp, e.g. norms and the embedding) and its decoder layer (for pipeline stages).
struct ParamSpec {
  static constexpr int kBeforeLayers = -1;       // embeddings: the first stage
  static constexpr int kAfterLayers = 1 << 30;   // final norm, LM head: the last stage

  std::string name;
  std::vector<std::int64_t> shape;
  int element_size = 4;
  int tp_dim = -1;
  int layer = kBeforeLayers;  // decoder layer index, or kBeforeLayers / kAfterLayers
  /// Indices along tp_dim that must stay on one rank (head_dim for attention projections: whole
  /// heads per rank; 1 otherwise).
  std::int64_t tp_unit = 1;

  std::int64_t bytes() const;
};

/// The actor's parameters (LM head) for `shape` with the names, shapes and tp dims of the
/// trainer's Transformer (model.h): q/k/v/gate/up and lm_head split along dim 0 (column
/// parallel; whole heads per rank since H and KV are multiples of tp), o/down along dim 1 (row
/// parallel), the embedding and the norms replicated. Tied embeddings: no lm_head. Qwen2's q/k/v
/// biases split with their rows (whole heads); Qwen3's q_norm / k_norm (D) are replicated. In the
/// order of the Transformer's named_parameters().
std::vector<ParamSpec> llama_parameters(const ModelShape& shape, int element_size = 4);

/// One parameter's placement on a mesh.
struct ParamLayout {
  ParamSpec spec;
  int stage = 0;    // pipeline stage that holds it (0 when the mesh has one stage)
  int tp_dim = -1;  // tensor dim split over the mesh's tp ranks; -1 replicated
  int dp_dim = -1;  // dim of the tp shard split over the mesh's dp ranks; -1 replicated
};

/// Every parameter's layout over one mesh, and the rank grouping: coords[r] is world rank r's
/// mesh coordinate (a permutation of the mesh).
struct LayoutSet {
  std::string description;  // e.g. "training pp=2 tp=2 dp=1 megatron"
  MeshShape mesh;
  std::vector<MeshCoord> coords;
  std::vector<ParamLayout> params;

  int world() const { return mesh.world(); }
  /// The box of parameter `param` that world rank `rank` holds; nullopt when it holds none
  /// (another pipeline stage).
  std::optional<Box> box(std::size_t param, int rank) const;
  /// Bytes of every parameter's full tensor (M).
  std::int64_t model_bytes() const;
  /// Bytes world rank `rank` holds.
  std::int64_t rank_bytes(int rank) const;
};

/// Along dp: Megatron replicates the parameters (optimizer state sharded; HybridFlow's setting),
/// ZeRO-3/FSDP shards each tp shard along its dim 0 into dp row blocks of ceil(rows/dp) rows, the
/// last one shorter when dp does not divide (as ZeroShards keeps them; so a shard is
/// still a box; see docs/resharding.md).
enum class DpSharding { kReplicated, kSharded };
/// actor_rollout_ref.actor.strategy: megatron -> kReplicated, fsdp -> kSharded.
DpSharding dp_sharding_for_strategy(ActorStrategy strategy);

/// The training layout on `mesh` in Megatron rank order: pipeline stage s holds decoder layers
/// [s·L/pp, (s+1)·L/pp), the embedding sits on the first stage and the final norm and LM head on
/// the last. Throws LayoutError when L % pp or a tp-split dim % tp is not 0, or an fsdp row block
/// would be empty.
LayoutSet training_layout(const std::vector<ParamSpec>& params, const MeshShape& mesh, DpSharding dp);

// ReshardMode (hybridscope.reshard.mode: how the generation layout's ranks are grouped and how the
// planner gathers) is declared in config.h with its spellings; to_string(mode) names it.

/// The generation layout of `training`'s parameters: mesh (1, t_g, world/t_g), every parameter
/// on the one stage, tp-split along the same dim as in training (replicated ones stay
/// replicated), replicated over the d_g = world/t_g generation replicas. Rank grouping:
///   hybrid: training rank (s, i, j) gets generation tp rank g = i / (t/t_g), so its training
///     shard lies inside its generation shard; its micro-DP group is the p·t/t_g ranks of its
///     training replica j with the same g (consecutive ranks when pp = 1) and its generation TP
///     group the ranks of its stage and replica with the same i mod (t/t_g) (stride t/t_g).
///     With t_g = k·t > t (e.g. fsdp, t = 1, rollout tp 2) the shards nest the other way: the p·d
///     ranks of training tp rank i take generation blocks i·k .. i·k+k-1 (m = pp + p·dp, block
///     i·k + m / (p·d/k), replica m mod (p·d/k)), so a megatron rank already holds its generation
///     shard of its own stage's parameters.
///   vanilla, naive: consecutive generation TP groups (rank r: g = r mod t_g, replica r / t_g).
/// Throws LayoutError when t_g does not divide world, or (hybrid) t_g and t do not divide one
/// another (or k does not divide p·d), or a tp-split dim is not divisible by t_g.
LayoutSet generation_layout(const LayoutSet& training, int rollout_tp, ReshardMode mode);

}  // namespace hs::trainer
