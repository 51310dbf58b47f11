// reshard_planner.cpp — intersections of assembled boxes and source pieces (see reshard.h).
#include "hybridscope/trainer/hybrid/reshard_planner.h"

#include <algorithm>
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

bool contiguous_within(const Box& outer, const Box& inner) {
  std::size_t d = inner.ranges.size();
  while (d > 0 && inner.ranges[d - 1] == outer.ranges[d - 1]) --d;
  if (d <= 1) return true;
  for (std::size_t k = 0; k + 1 < d; ++k)
    if (inner.ranges[k].size() != 1) return false;
  return true;
}

bool moves_directly(const Box& sender_box, const Box& receiver_box, const Box& piece, std::int64_t min_elements) {
  return piece.numel() >= min_elements && contiguous_within(sender_box, piece) && contiguous_within(receiver_box, piece);
}

namespace {

// The one walk of a plan, shared by plan_reshard (which keeps every piece) and reshard_traffic
// (which keeps byte counts): for every parameter p and world rank r, r's totals are added to
// `totals[r]` and every source piece r's assembled box overlaps is reported as
// on_piece(p, r, assembled, source, from) -- from == r when r holds it (kept locally), else the
// holder it comes from. Parameters outer, ranks inner, sources in box order: so the pieces of
// one (from, to) pair arrive in parameter order, the order both sides of a transfer derive.
template <class OnPiece>
void walk_plan(const LayoutSet& training, const LayoutSet& generation, ReshardMode mode,
               std::vector<RankTraffic>& totals, OnPiece&& on_piece) {
  check_compatible(training, generation);
  const int world = training.world();
  totals.assign(static_cast<std::size_t>(world), RankTraffic{});
  for (std::size_t p = 0; p < training.params.size(); ++p) {
    const std::vector<Source> sources = sources_of(training, p, mode);
    const std::int64_t element_size = training.params[p].spec.element_size;
    const Box full = full_box(training.params[p].spec.shape);
    for (int r = 0; r < world; ++r) {
      RankTraffic& t = totals[static_cast<std::size_t>(r)];
      const std::optional<Box> gen = generation.box(p, r);
      const std::optional<Box> train = training.box(p, r);
      const Box* assembled = mode == ReshardMode::kHybrid ? (gen ? &*gen : nullptr) : &full;
      if (train) t.training_bytes += train->numel() * element_size;
      if (gen) t.generation_bytes += gen->numel() * element_size;
      std::int64_t union_bytes = assembled ? assembled->numel() * element_size : 0;
      if (train) {
        union_bytes += (train->numel() - (assembled ? overlap_numel(*assembled, *train) : 0)) * element_size;
        t.redundant_bytes += (train->numel() - (gen ? overlap_numel(*gen, *train) : 0)) * element_size;
      }
      t.peak_parameter_bytes += union_bytes;
      if (!assembled) continue;
      for (const Source& s : sources) {
        const std::int64_t bytes = overlap_numel(*assembled, s.box) * element_size;
        if (bytes == 0) continue;
        const bool mine = std::find(s.holders.begin(), s.holders.end(), r) != s.holders.end();
        const int from = mine ? r : choose_holder(training, s.holders, r);
        if (mine) {
          t.bytes_local += bytes;
        } else {
          t.bytes_received += bytes;
          totals[static_cast<std::size_t>(from)].bytes_sent += bytes;
        }
        on_piece(p, r, *assembled, s, from);
      }
    }
  }
}

}  // namespace

ReshardPlan plan_reshard(const LayoutSet& training, const LayoutSet& generation, ReshardMode mode) {
  const int world = training.world();
  ReshardPlan plan;
  plan.mode = mode;
  plan.training = training;
  plan.generation = generation;
  plan.ranks.resize(static_cast<std::size_t>(world));
  // sends[a][b] / recvs[b][a]: the pieces a sends b, built in one order so both sides agree.
  std::vector<std::map<int, Transfer>> sends(static_cast<std::size_t>(world)), recvs(static_cast<std::size_t>(world));
  std::vector<RankTraffic> totals;
  walk_plan(training, generation, mode, totals,
            [&](std::size_t p, int r, const Box& assembled, const Source& s, int from) {
              RankPlan& rp = plan.ranks[static_cast<std::size_t>(r)];
              Box part = *intersect(assembled, s.box);
              if (from == r) {
                rp.local.push_back({p, std::move(part)});
                return;
              }
              const std::int64_t bytes = part.numel() * training.params[p].spec.element_size;
              Transfer& out = sends[static_cast<std::size_t>(from)][r];
              out.peer = r;
              out.pieces.push_back({p, part});
              out.bytes += bytes;
              Transfer& in = recvs[static_cast<std::size_t>(r)][from];
              in.peer = from;
              in.pieces.push_back({p, std::move(part)});
              in.bytes += bytes;
            });
  const std::size_t n = training.params.size();
  for (int r = 0; r < world; ++r) {
    RankPlan& rp = plan.ranks[static_cast<std::size_t>(r)];
    const RankTraffic& t = totals[static_cast<std::size_t>(r)];
    for (std::size_t p = 0; p < n; ++p) {
      rp.assembled.push_back(mode == ReshardMode::kHybrid ? generation.box(p, r)
                                                          : std::optional<Box>(full_box(training.params[p].spec.shape)));
    }
    rp.bytes_local = t.bytes_local;
    rp.training_bytes = t.training_bytes;
    rp.generation_bytes = t.generation_bytes;
    rp.peak_parameter_bytes = t.peak_parameter_bytes;
    rp.redundant_bytes = t.redundant_bytes;
    for (auto& [peer, tr] : sends[static_cast<std::size_t>(r)]) {
      rp.bytes_sent += tr.bytes;
      rp.sends.push_back(std::move(tr));
    }
    for (auto& [peer, tr] : recvs[static_cast<std::size_t>(r)]) {
      rp.bytes_received += tr.bytes;
      rp.recvs.push_back(std::move(tr));
    }
  }
  return plan;
}

ReshardTraffic reshard_traffic(const LayoutSet& training, const LayoutSet& generation, ReshardMode mode) {
  ReshardTraffic traffic;
  traffic.mode = mode;
  traffic.model_bytes = training.model_bytes();
  const std::size_t world = static_cast<std::size_t>(training.world());
  // Dense (from, to) byte counts while walking (world² int64: 8 MiB at 1024 ranks), then sparse.
  std::vector<std::int64_t> pair_bytes(world * world, 0);
  walk_plan(training, generation, mode, traffic.ranks,
            [&](std::size_t p, int r, const Box& assembled, const Source& s, int from) {
              if (from == r) return;
              const std::int64_t elements = overlap_numel(assembled, s.box);
              const std::int64_t bytes = elements * training.params[p].spec.element_size;
              pair_bytes[static_cast<std::size_t>(from) * world + static_cast<std::size_t>(r)] += bytes;
              // The executor's rule, against the source box instead of the holder's training box
              // (no box to build): a source is that training box or (naive) a dp row block of it,
              // with the same whole trailing dims, so a piece is contiguous within both or neither.
              const bool direct =
                  elements >= kDirectMinElements && moves_directly(s.box, assembled, *intersect(assembled, s.box));
              if (!direct) {
                traffic.ranks[static_cast<std::size_t>(r)].packed_bytes_received += bytes;
                traffic.ranks[static_cast<std::size_t>(from)].packed_bytes_sent += bytes;
              }
            });
  for (std::size_t from = 0; from < world; ++from) {
    for (std::size_t to = 0; to < world; ++to) {
      const std::int64_t bytes = pair_bytes[from * world + to];
      if (bytes == 0) continue;
      traffic.ranks[from].sent_to.push_back({static_cast<int>(to), bytes});
      traffic.ranks[to].received_from.push_back({static_cast<int>(from), bytes});
    }
  }
  return traffic;
}

ReshardPlan plan_reshard(const std::vector<ParamSpec>& params, const MeshShape& training_mesh, DpSharding dp,
                         int rollout_tp, ReshardMode mode) {
  const LayoutSet training = training_layout(params, training_mesh, dp);
  return plan_reshard(training, generation_layout(training, rollout_tp, mode), mode);
}

ReshardTraffic reshard_traffic(const std::vector<ParamSpec>& params, const MeshShape& training_mesh, DpSharding dp,
                               int rollout_tp, ReshardMode mode) {
  const LayoutSet training = training_layout(params, training_mesh, dp);
  return reshard_traffic(training, generation_layout(training, rollout_tp, mode), mode);
}

}  // namespace hs::trainer
