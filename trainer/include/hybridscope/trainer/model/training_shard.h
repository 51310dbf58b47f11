// training_shard.h — a rank's part of a whole model in a layout (layout.h): the box of a tensor
// that a rank holds, and copying every parameter's box out of the full model into the rank's
// sharded module (tp columns/rows, its pipeline stage, its fsdp rows).
//
// The groups a rank computes with are made from the same layout (mesh_groups.h); this is the data
// side: a sharded model built with those groups starts from the full model's values through it.
#pragma once

#include <ATen/core/Tensor.h>

#include "hybridscope/trainer/dist/layout.h"
#include "hybridscope/trainer/model/model.h"

namespace hs::trainer {

/// The part of `whole` (a tensor of the parameter's global shape) that `box` covers: a view.
at::Tensor box_view(const at::Tensor& whole, const Box& box);

/// Copies world rank `rank`'s box (layout.box) of every parameter of `full` (an unsharded model,
/// the same names) into `shard`, a model built with that rank's context. Parameters `shard` does not
/// hold (another pipeline stage) are skipped; a parameter of the layout missing from `full`, or a
/// shard whose shape is not its box, throws LayoutError naming it.
void copy_training_shard(const TransformerImpl& full, TransformerImpl& shard, const LayoutSet& layout, int rank);

}  // namespace hs::trainer
