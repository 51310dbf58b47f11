// reshard_planner.cpp — intersections of assembled boxes and source pieces (see reshard.h).
#include "hybridscope/trainer/hybrid/reshard_planner.h"

#include <map>

namespace hs::trainer {

namespace {

struct Source {
  Box box;
  std::vector<int> holders;  // world ranks that may provide it, ascending
};

// The pieces that partition parameter `p` and who may provide each.
std::vector<Source> sources_of(const LayoutSet& training, std::size_t p, ReshardMode mode) {
  std::map<Box, std::vector<int>> by_box;
  const ParamLayout& layout = training.params[p];
  const bool split_over_dp = mode == ReshardMode::kNaive && layout.dp_dim < 0 && training.mesh.dp > 1;
  for (int r = 0; r < training.world(); ++r) {
    auto box = training.box(p, r);
    if (!box) continue;
    if (split_over_dp) {
      // DS-Chat's ZeRO-3 partition: the rank with dp coordinate j contributes row block j
      // ([j·n/d, (j+1)·n/d), uneven when d does not divide the n rows, as ZeRO-3's padding is).
      const Range rows = box->ranges.at(0);
      const std::int64_t d = training.mesh.dp, j = training.coords[static_cast<std::size_t>(r)].dp;
      box->ranges[0] = {rows.begin + rows.size() * j / d, rows.begin + rows.size() * (j + 1) / d};
      if (box->ranges[0].size() == 0) continue;  // fewer rows than dp ranks: nothing to contribute
    }
    by_box[*box].push_back(r);
  }
  std::vector<Source> out;
  for (auto& [box, holders] : by_box) out.push_back({box, std::move(holders)});
  return out;
}

// A holder in `rank`'s own training replica (same dp coordinate) if there is one, else one
// picked by rank so that the load spreads.
int choose_holder(const LayoutSet& training, const std::vector<int>& holders, int rank) {
  const int dp = training.coords[static_cast<std::size_t>(rank)].dp;
  for (int h : holders) {
    if (training.coords[static_cast<std::size_t>(h)].dp == dp) return h;
  }
  return holders[static_cast<std::size_t>(rank) % holders.size()];
}

std::int64_t bytes_of(const LayoutSet& l, std::size_t p, const Box& b) { return b.numel() * l.params[p].spec.element_size; }

void check_compatible(const LayoutSet& a, const LayoutSet& b) {
  if (a.world() != b.world()) {
    throw LayoutError("reshard between layouts of " + std::to_string(a.world()) + " and " + std::to_string(b.world()) +
                      " ranks: both must span the same world");
  }
  if (a.params.size() != b.params.size()) throw LayoutError("reshard between layouts of different parameter lists");
  for (std::size_t p = 0; p < a.params.size(); ++p) {
    if (a.params[p].spec.name != b.params[p].spec.name || a.params[p].spec.shape != b.params[p].spec.shape) {
      throw LayoutError("reshard: parameter " + std::to_string(p) + " is " + a.params[p].spec.name + " in " +
                        a.description + " but " + b.params[p].spec.name + " in " + b.description);
    }
  }
}

}  // namespace

ReshardPlan plan_reshard(const LayoutSet& training, const LayoutSet& generation, ReshardMode mode) {
  check_compatible(training, generation);
  const int world = training.world();
  const std::size_t n = training.params.size();
  ReshardPlan plan;
  plan.mode = mode;
  plan.training = training;
  plan.generation = generation;
  plan.ranks.resize(static_cast<std::size_t>(world));
  // sends[a][b] / recvs[b][a]: the pieces a sends b, built in one order so both sides agree.
  std::vector<std::map<int, Transfer>> sends(static_cast<std::size_t>(world)), recvs(static_cast<std::size_t>(world));
  for (std::size_t p = 0; p < n; ++p) {
    const std::vector<Source> sources = sources_of(training, p, mode);
    for (int r = 0; r < world; ++r) {
      RankPlan& rp = plan.ranks[static_cast<std::size_t>(r)];
      const std::optional<Box> gen = generation.box(p, r);
      const std::optional<Box> train = training.box(p, r);
      const std::optional<Box> assembled =
          mode == ReshardMode::kHybrid ? gen : std::optional<Box>(full_box(training.params[p].spec.shape));
      rp.assembled.push_back(assembled);
      if (train) rp.training_bytes += bytes_of(training, p, *train);
      if (gen) rp.generation_bytes += bytes_of(training, p, *gen);
      std::int64_t union_bytes = assembled ? bytes_of(training, p, *assembled) : 0;
      if (train) {
        const auto inside = assembled ? intersect(*assembled, *train) : std::nullopt;
        union_bytes += bytes_of(training, p, *train) - (inside ? bytes_of(training, p, *inside) : 0);
        const auto in_gen = gen ? intersect(*gen, *train) : std::nullopt;
        rp.redundant_bytes += bytes_of(training, p, *train) - (in_gen ? bytes_of(training, p, *in_gen) : 0);
      }
      rp.peak_parameter_bytes += union_bytes;
      if (!assembled) continue;
      for (const Source& s : sources) {
        auto part = intersect(*assembled, s.box);
        if (!part) continue;
        const std::int64_t bytes = bytes_of(training, p, *part);
        bool mine = false;
        for (int h : s.holders) mine = mine || h == r;
        if (mine) {
          rp.local.push_back({p, *part});
          rp.bytes_local += bytes;
          continue;
        }
        const int from = choose_holder(training, s.holders, r);
        Transfer& out = sends[static_cast<std::size_t>(from)][r];
        out.peer = r;
        out.pieces.push_back({p, *part});
        out.bytes += bytes;
        Transfer& in = recvs[static_cast<std::size_t>(r)][from];
        in.peer = from;
        in.pieces.push_back({p, *part});
        in.bytes += bytes;
      }
    }
  }
  for (int r = 0; r < world; ++r) {
    RankPlan& rp = plan.ranks[static_cast<std::size_t>(r)];
    for (auto& [peer, t] : sends[static_cast<std::size_t>(r)]) {
      rp.bytes_sent += t.bytes;
      rp.sends.push_back(std::move(t));
    }
    for (auto& [peer, t] : recvs[static_cast<std::size_t>(r)]) {
      rp.bytes_received += t.bytes;
      rp.recvs.push_back(std::move(t));
    }
  }
  return plan;
}

ReshardPlan plan_reshard(const std::vector<ParamSpec>& params, const MeshShape& training_mesh, DpSharding dp,
                         int rollout_tp, ReshardMode mode) {
  const LayoutSet training = training_layout(params, training_mesh, dp);
  return plan_reshard(training, generation_layout(training, rollout_tp, mode), mode);
}

}  // namespace hs::trainer
