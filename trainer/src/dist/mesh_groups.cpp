// mesh_groups.cpp — process groups of the training and generation layouts (see mesh_groups.h).
#include "hybridscope/trainer/dist/mesh_groups.h"

#include <fmt/format.h>
#include <torch/torch.h>

namespace hs::trainer {

namespace {

// Every group of a partition of the world, made in ascending order of each group's first rank;
// returns rank `rank`'s group (a SingleRankCommunicator when the groups have one rank).
std::shared_ptr<Communicator> make_partition(GroupFactory& groups, const std::vector<std::vector<int>>& partition,
                                             int rank, const std::string& name) {
  std::shared_ptr<Communicator> mine;
  for (const auto& members : partition) {
    if (members.size() == 1) {
      if (members.front() == rank) mine = std::make_shared<SingleRankCommunicator>(name);
      continue;
    }
    auto group = groups.new_group(members, name);
    if (group) mine = std::move(group);
  }
  if (!mine) throw LayoutError(fmt::format("rank {} is in no '{}' group of the mesh", rank, name));
  return mine;
}

// Ranks grouped by `key` (ranks with the same key form one group), each group ascending; groups
// ordered by their first rank.
template <typename Key>
std::vector<std::vector<int>> partition_by(int world, Key key) {
  std::vector<std::vector<int>> out;
  std::vector<decltype(key(0))> keys;
  for (int r = 0; r < world; ++r) {
    const auto k = key(r);
    std::size_t i = 0;
    while (i < keys.size() && !(keys[i] == k)) ++i;
    if (i == keys.size()) {
      keys.push_back(k);
      out.emplace_back();
    }
    out[i].push_back(r);
  }
  return out;
}

}  // namespace

ParallelContext make_training_context(GroupFactory& groups, const MeshShape& mesh, int rank) {
  const int world = mesh.world();
  ParallelContext ctx;
  ctx.world = groups.world();
  if (ctx.world->size() != world)
    throw LayoutError(fmt::format("the mesh pp={} tp={} dp={} has {} ranks but the world has {}", mesh.pp, mesh.tp,
                                  mesh.dp, world, ctx.world->size()));
  auto coord = [&](int r) { return megatron_coord(mesh, r); };
  ctx.tp = make_partition(groups, partition_by(world, [&](int r) { return std::pair{coord(r).pp, coord(r).dp}; }),
                          rank, "tp");
  ctx.dp = make_partition(groups, partition_by(world, [&](int r) { return std::pair{coord(r).pp, coord(r).tp}; }),
                          rank, "dp");
  ctx.pp = make_partition(groups, partition_by(world, [&](int r) { return std::pair{coord(r).tp, coord(r).dp}; }),
                          rank, "pp");
  return ctx;
}

ParallelContext make_generation_context(GroupFactory& groups, const LayoutSet& generation, int rank) {
  const int world = generation.world();
  ParallelContext ctx;
  ctx.world = groups.world();
  const auto& c = generation.coords;
  // Group ranks are in generation tp order: sort each replica's ranks by their tp coordinate.
  auto replicas = partition_by(world, [&](int r) { return c[static_cast<std::size_t>(r)].dp; });
  for (const auto& members : replicas) {
    for (std::size_t i = 0; i < members.size(); ++i)
      if (c[static_cast<std::size_t>(members[i])].tp != static_cast<int>(i))
        throw LayoutError(fmt::format("generation replica of rank {}: tp coordinates are not in rank order, which a "
                                      "c10d group (ascending ranks) cannot express",
                                      members.front()));
  }
  ctx.tp = make_partition(groups, replicas, rank, "rollout_tp");
  ctx.dp = make_partition(groups, partition_by(world, [&](int r) { return c[static_cast<std::size_t>(r)].tp; }),
                          rank, "rollout_dp");
  return ctx;
}

}  // namespace hs::trainer
