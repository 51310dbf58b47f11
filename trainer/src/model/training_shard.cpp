// training_shard.cpp — a rank's box of a tensor and of a whole model (see training_shard.h).
#include "hybridscope/trainer/model/training_shard.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/torch.h>

namespace hs::trainer {

at::Tensor box_view(const at::Tensor& whole, const Box& box) {
  at::Tensor view = whole;
  for (std::size_t d = 0; d < box.ranges.size(); ++d)
    view = view.slice(static_cast<std::int64_t>(d), box.ranges[d].begin, box.ranges[d].end);
  return view;
}

void copy_training_shard(const TransformerImpl& full, TransformerImpl& shard, const LayoutSet& layout, int rank) {
  torch::NoGradGuard no_grad;
  const auto source = full.named_parameters();
  auto target = shard.named_parameters();
  for (std::size_t p = 0; p < layout.params.size(); ++p) {
    const auto& name = layout.params[p].spec.name;
    auto* dst = target.find(name);
    const auto box = layout.box(p, rank);
    if (dst == nullptr || !box) continue;
    const auto* src = source.find(name);
    if (src == nullptr) throw LayoutError(fmt::format("copy_training_shard: the full model has no parameter {}", name));
    const at::Tensor piece = box_view(*src, *box);
    if (piece.sizes() != dst->sizes())
      throw LayoutError(fmt::format("copy_training_shard: {} on rank {} has shape {} but its box is {}", name, rank,
                                    fmt::join(dst->sizes().vec(), "x"), fmt::join(piece.sizes().vec(), "x")));
    dst->copy_(piece);
  }
}

}  // namespace hs::trainer
