// sharded_checkpoint_test.cpp — a sharded actor's checkpoint pieces (checkpoint.h): every rank's
// boxes of the training layout written, read back into the same layout, refused in another one,
// and merged into the whole model bit for bit. (Resuming a real 4-rank run: launch_test.cpp.)
#include <torch/torch.h>

#include <filesystem>
#include <map>
#include <string>
#include <unistd.h>
#include <vector>

#include <gtest/gtest.h>

#include "../../remove_tree.h"
#include "hybridscope/trainer/dist/mesh_groups.h"
#include "hybridscope/trainer/model/training_shard.h"
#include "hybridscope/trainer/dist/layout.h"
#include "hybridscope/trainer/loop/checkpoint.h"
#include "hybridscope/trainer/model/model.h"

namespace hs::trainer {
namespace {

namespace fs = std::filesystem;

ModelShape qwen2_tiny() {
  ModelShape s;
  s.architecture = ModelArchitecture::kQwen2;  // q/k/v biases: split with their rows
  s.vocab_size = 40;
  s.hidden_size = 32;
  s.intermediate_size = 48;
  s.num_hidden_layers = 2;
  s.num_attention_heads = 4;
  s.num_key_value_heads = 2;
  s.max_position_embeddings = 32;
  return s;
}

// Rank r's pieces of `full`: its boxes of `layout`, copied out.
std::vector<std::pair<std::string, torch::Tensor>> pieces_of(Transformer& full, const LayoutSet& layout, int rank) {
  auto params = full->named_parameters();
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (std::size_t i = 0; i < layout.params.size(); ++i) {
    const auto box = layout.box(i, rank);
    if (!box) continue;
    out.emplace_back(layout.params[i].spec.name, box_view(params[layout.params[i].spec.name].detach(), *box).clone());
  }
  return out;
}

TEST(ShardedCheckpoint, PiecesRoundTripAndMergeIntoTheWholeModel) {
  torch::manual_seed(3);
  Transformer full(qwen2_tiny(), HeadKind::kLm);
  {
    torch::NoGradGuard no_grad;
    for (auto& p : full->parameters()) p.normal_();  // biases and norms too, so each must land right
  }
  const auto root = fs::temp_directory_path() / ("hs_sharded_ckpt_" + std::to_string(::getpid()));
  for (const auto& [mesh, sharding] : {std::pair{MeshShape{2, 2, 2}, DpSharding::kSharded},
                                       std::pair{MeshShape{1, 2, 2}, DpSharding::kReplicated},
                                       std::pair{MeshShape{1, 1, 3}, DpSharding::kSharded}}) {
    SCOPED_TRACE("pp " + std::to_string(mesh.pp) + " tp " + std::to_string(mesh.tp) + " dp " + std::to_string(mesh.dp));
    hs::test::remove_tree(root);
    const auto layout = training_layout(llama_parameters(full->shape()), mesh, sharding);
    std::vector<std::vector<std::pair<std::string, torch::Tensor>>> saved(static_cast<std::size_t>(mesh.world()));
    for (int r = 0; r < mesh.world(); ++r) {
      auto pieces = pieces_of(full, layout, r);
      std::vector<torch::Tensor> leaves;
      for (auto& [name, t] : pieces) leaves.push_back(t);
      torch::optim::AdamW optim(leaves, torch::optim::AdamWOptions(1e-3));
      ActorShard shard{r, mesh, sharding, full->shape(), pieces, &optim};
      save_actor_shard((root / "staging").string(), shard);
      saved[static_cast<std::size_t>(r)] = pieces;
    }
    // Read back into zeroed pieces of the same layout.
    for (int r = 0; r < mesh.world(); ++r) {
      auto pieces = saved[static_cast<std::size_t>(r)];
      std::vector<torch::Tensor> leaves;
      for (auto& [name, t] : pieces) {
        t = torch::zeros_like(t);
        leaves.push_back(t);
      }
      torch::optim::AdamW optim(leaves, torch::optim::AdamWOptions(1e-3));
      load_actor_shard((root / "staging").string(), {r, mesh, sharding, full->shape(), pieces, &optim});
      for (std::size_t i = 0; i < pieces.size(); ++i) {
        EXPECT_TRUE(torch::equal(pieces[i].second, saved[static_cast<std::size_t>(r)][i].second)) << pieces[i].first;
      }
    }
    // Another mesh is refused, naming both layouts and the way out.
    try {
      torch::optim::AdamW optim(std::vector<torch::Tensor>{torch::zeros({1}, torch::requires_grad())}, torch::optim::AdamWOptions(1e-3));
      load_actor_shard((root / "staging").string(), {0, MeshShape{1, 1, 1}, sharding, full->shape(), {}, &optim});
      ADD_FAILURE() << "a checkpoint of another mesh loaded";
    } catch (const std::runtime_error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("pp=1 tp=1 dp=1"), std::string::npos) << what;
      EXPECT_NE(what.find("hybridscope checkpoint merge"), std::string::npos) << what;
    }
    // Merged: the whole model, every tensor bit for bit, loadable as a HuggingFace directory.
    const auto merged_dir = root / "merged";
    EXPECT_EQ(merge_actor_shards((root / "staging" / "actor").string(), merged_dir.string()), full->num_parameters());
    auto merged = load_pretrained(merged_dir.string(), HeadKind::kLm);
    EXPECT_EQ(merged->shape().architecture, ModelArchitecture::kQwen2);
    auto want = full->named_parameters();
    auto got = merged->named_parameters();
    ASSERT_EQ(want.keys(), got.keys());
    for (const auto& key : want.keys()) EXPECT_TRUE(torch::equal(want[key], got[key])) << key;
  }
  // A missing rank file is named.
  fs::remove(root / "staging" / "actor" / "shards" / "rank_2.safetensors");
  try {
    merge_actor_shards((root / "staging" / "actor").string(), (root / "again").string());
    ADD_FAILURE() << "merged without rank 2";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("rank_2.safetensors"), std::string::npos) << e.what();
  }
  hs::test::remove_tree(root);
}

}  // namespace
}  // namespace hs::trainer
