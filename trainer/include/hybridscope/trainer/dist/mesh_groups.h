// mesh_groups.h — the process groups of a layout (layout.h). A rank's shard of the model in the
// same layout: training_shard.h.
//
// Training mesh (pp, tp, dp) in Megatron rank order (megatron_coord): a tp group is the tp
// consecutive ranks of one (pp, dp) coordinate, a dp group the ranks of one (pp, tp) coordinate,
// a pp group the ranks of one (tp, dp) coordinate. The generation layout's groups follow its rank
// grouping (LayoutSet::coords, which depends on the reshard mode): a generation tp group is the t_g
// ranks of one replica (coords[r].dp), the dp group the d_g ranks with the same generation tp rank.
//
// Making groups is collective over the world (c10d's rule, parallel.h): every rank calls these
// with the same arguments, and every rank creates every group in the same order.
#pragma once

#include "hybridscope/trainer/dist/layout.h"
#include "hybridscope/trainer/dist/parallel.h"

namespace hs::trainer {

/// Rank `rank`'s tp, dp and pp groups on the training mesh; `world` is groups.world(). Groups of
/// one rank are SingleRankCommunicators (no c10d group is formed for them).
ParallelContext make_training_context(GroupFactory& groups, const MeshShape& mesh, int rank);

/// Rank `rank`'s groups in `generation` (a generation_layout): tp = its replica's t_g ranks in
/// generation tp order, dp = the replicas, pp = one rank.
ParallelContext make_generation_context(GroupFactory& groups, const LayoutSet& generation, int rank);

}  // namespace hs::trainer
