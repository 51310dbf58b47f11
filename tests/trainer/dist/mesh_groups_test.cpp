// mesh_groups_test.cpp — the training and generation layouts' process groups (Megatron rank order,
// HybridFlow's grouping) and copying a rank's training shard out of the full model.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <map>
#include <mutex>
#include <vector>

#include "hybridscope/trainer/dist/mesh_groups.h"
#include "hybridscope/trainer/model/training_shard.h"
#include "hybrid/reshard_fixtures.h"
#include "hybridscope/trainer/dist/thread_world.h"

namespace hs::trainer {
namespace {

// The world ranks of `comm`'s members, in group rank order, learned by an all-gather of world ranks.
std::vector<int> members(Communicator& comm, int world_rank) {
  auto all = comm.all_gather(torch::full({1}, world_rank, torch::kInt64));
  std::vector<int> out;
  for (std::int64_t i = 0; i < all.size(0); ++i) out.push_back(static_cast<int>(all[i].item<std::int64_t>()));
  return out;
}

TEST(MeshGroups, TrainingGroupsFollowMegatronOrder) {
  // (pp, tp, dp) = (2, 2, 2): rank = tp + 2·(dp + 2·pp).
  const MeshShape mesh{2, 2, 2};
  std::mutex mu;
  std::map<int, std::vector<std::vector<int>>> seen;  // rank -> {tp, dp, pp members}
  run_thread_ranks(mesh.world(), [&](int rank, GroupFactory& groups) {
    const auto ctx = make_training_context(groups, mesh, rank);
    std::vector<std::vector<int>> m{members(*ctx.tp, rank), members(*ctx.dp, rank), members(*ctx.pp, rank)};
    std::lock_guard lock(mu);
    seen[rank] = m;
  });
  EXPECT_EQ(seen[0], (std::vector<std::vector<int>>{{0, 1}, {0, 2}, {0, 4}}));
  EXPECT_EQ(seen[3], (std::vector<std::vector<int>>{{2, 3}, {1, 3}, {3, 7}}));
  EXPECT_EQ(seen[6], (std::vector<std::vector<int>>{{6, 7}, {4, 6}, {2, 6}}));
}

TEST(MeshGroups, HybridGenerationGroupsAreStridedAndSingleRanksNeedNoGroup) {
  // Training tp 4 on 4 ranks, rollout tp 2, hybrid: generation tp groups at stride t/t_g = 2.
  const auto training = training_layout(llama_parameters(test::tiny_llama()), {1, 4, 1}, DpSharding::kReplicated);
  const auto generation = generation_layout(training, 2, ReshardMode::kHybrid);
  std::mutex mu;
  std::map<int, std::vector<int>> tp_members;
  std::map<int, int> pp_size;
  run_thread_ranks(4, [&](int rank, GroupFactory& groups) {
    const auto ctx = make_generation_context(groups, generation, rank);
    auto m = members(*ctx.tp, rank);
    std::lock_guard lock(mu);
    tp_members[rank] = m;
    pp_size[rank] = ctx.pp->size();
  });
  EXPECT_EQ(tp_members[0], (std::vector<int>{0, 2}));
  EXPECT_EQ(tp_members[1], (std::vector<int>{1, 3}));
  EXPECT_EQ(tp_members[3], (std::vector<int>{1, 3}));
  EXPECT_EQ(pp_size[2], 1);
}

TEST(MeshGroups, CopyTrainingShardTakesTheRanksBox) {
  const ModelShape shape = test::tiny_llama();
  torch::manual_seed(5);
  Transformer full(shape, HeadKind::kLm);
  const auto layout = training_layout(llama_parameters(shape), {1, 2, 1}, DpSharding::kReplicated);
  auto tp_group = std::make_shared<ThreadGroup>(2);
  std::mutex mu;
  std::map<int, std::map<std::string, at::Tensor>> shards;
  run_thread_ranks(2, [&](int rank, GroupFactory&) {
    ParallelContext ctx;
    ctx.tp = std::make_shared<ThreadCommunicator>(rank, tp_group, "tp");
    Transformer shard(shape, HeadKind::kLm, ctx);
    copy_training_shard(*full, *shard, layout, rank);
    std::lock_guard lock(mu);
    for (const auto& item : shard->named_parameters()) shards[rank][item.key()] = item.value().detach().clone();
  });
  const auto params = full->named_parameters();
  const auto& q = params["model.layers.0.self_attn.q_proj.weight"];  // column parallel: rows split
  EXPECT_TRUE(torch::equal(shards[1]["model.layers.0.self_attn.q_proj.weight"], q.chunk(2, 0)[1]));
  const auto& down = params["model.layers.1.mlp.down_proj.weight"];  // row parallel: columns split
  EXPECT_TRUE(torch::equal(shards[0]["model.layers.1.mlp.down_proj.weight"], down.chunk(2, 1)[0]));
  EXPECT_TRUE(torch::equal(shards[1]["model.norm.weight"], params["model.norm.weight"]));
}

}  // namespace
}  // namespace hs::trainer
