// pipeline_test.cpp — pipeline stages of the Transformer and the 1F1B schedule, with the stages as
// threads of one process (thread_world.h): the order of each stage's forwards and backwards, the
// stage's parameters (global names, training_layout's placement), gradients and log-probs equal to
// the whole model's, and the refusals. The same over Gloo processes: sharded_training_test.cpp.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "../../remove_tree.h"
#include "hybridscope/trainer/dist/layout.h"
#include "hybridscope/trainer/dist/mesh_groups.h"
#include "hybridscope/trainer/model/training_shard.h"
#include "hybridscope/trainer/rl/pipeline.h"
#include "hybridscope/trainer/rl/ppo_workers.h"
#include "hybridscope/trainer/rollout/rollout.h"
#include "dist/sharded_training_fixtures.h"
#include "hybridscope/trainer/dist/thread_world.h"

namespace hs::trainer {
namespace {

using Kind = PipelineOp::Kind;

PipelineOp F(int m) { return {Kind::kForward, m}; }
PipelineOp B(int m) { return {Kind::kBackward, m}; }

std::string str(const std::vector<PipelineOp>& ops) {
  std::string out;
  for (const auto& op : ops) out += (op.kind == Kind::kForward ? "F" : "B") + std::to_string(op.micro) + " ";
  return out;
}

TEST(Pipeline, OneFOneBOrderWarmsUpThenAlternates) {
  // Narayanan et al. 2021, Fig. 4 (top): p = 4, m = 8, stage 0 warms up with 3 forwards.
  EXPECT_EQ(str(one_f_one_b_order(4, 0, 8)), "F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7 ");
  EXPECT_EQ(str(one_f_one_b_order(4, 2, 8)), "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 F6 B5 F7 B6 B7 ");
  EXPECT_EQ(str(one_f_one_b_order(4, 3, 8)), "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7 ");
  // Fewer micro-batches than stages: every forward is a warm-up one.
  EXPECT_EQ(str(one_f_one_b_order(4, 0, 2)), "F0 F1 B0 B1 ");
  EXPECT_EQ(str(one_f_one_b_order(1, 0, 3)), "F0 B0 F1 B1 F2 B2 ");
  EXPECT_THROW(one_f_one_b_order(2, 2, 4), std::invalid_argument);
}

TEST(Pipeline, StagesHoldTheirLayersUnderGlobalNamesAsTrainingLayoutPlacesThem) {
  const auto shape = test::sharded_training_shape();
  const MeshShape mesh{2, 1, 1};
  const auto layout = training_layout(llama_parameters(shape), mesh, DpSharding::kReplicated);
  std::mutex mu;
  std::map<int, std::set<std::string>> names;
  run_thread_ranks(2, [&](int rank, GroupFactory& groups) {
    Transformer stage(shape, HeadKind::kLm, make_training_context(groups, mesh, rank));
    std::set<std::string> mine;
    for (const auto& item : stage->named_parameters()) mine.insert(item.key());
    std::lock_guard lock(mu);
    names[rank] = mine;
  });
  for (int rank = 0; rank < 2; ++rank) {
    std::set<std::string> want;
    for (std::size_t p = 0; p < layout.params.size(); ++p)
      if (layout.box(p, rank)) want.insert(layout.params[p].spec.name);
    EXPECT_EQ(names[rank], want) << "stage " << rank;
  }
  EXPECT_TRUE(names[0].count("model.embed_tokens.weight") && names[0].count("model.layers.1.mlp.up_proj.weight"));
  EXPECT_TRUE(names[1].count("lm_head.weight") && names[1].count("model.norm.weight") &&
              names[1].count("model.layers.2.self_attn.q_proj.weight"));
}

TEST(Pipeline, EachStageLoadsItsPartOfAWholeCheckpoint) {
  const auto shape = test::sharded_training_shape();
  torch::manual_seed(9);
  Transformer full(shape, HeadKind::kLm);
  const auto dir = std::filesystem::temp_directory_path() / ("hs_pipeline_test_" + std::to_string(::getpid()));
  hs::test::remove_tree(dir);
  save_pretrained(full, dir.string());
  const MeshShape mesh{2, 2, 1};
  const auto layout = training_layout(llama_parameters(shape), mesh, DpSharding::kReplicated);
  std::mutex mu;
  std::map<int, int> mismatches, compared;
  run_thread_ranks(mesh.world(), [&](int rank, GroupFactory& groups) {
    const auto ctx = make_training_context(groups, mesh, rank);
    auto loaded = load_pretrained(dir.string(), HeadKind::kLm, ctx);
    Transformer copied(shape, HeadKind::kLm, ctx);
    copy_training_shard(*full, *copied, layout, rank);
    const auto want = copied->named_parameters();
    int bad = 0, n = 0;
    for (const auto& item : loaded->named_parameters()) {
      ++n;
      if (!torch::equal(item.value(), want[item.key()])) ++bad;
    }
    std::lock_guard lock(mu);
    mismatches[rank] = bad;
    compared[rank] = n;
  });
  hs::test::remove_tree(dir);
  for (int rank = 0; rank < mesh.world(); ++rank) {
    EXPECT_EQ(mismatches[rank], 0) << "rank " << rank;
    EXPECT_GT(compared[rank], 0) << "rank " << rank;
  }
}

TEST(Pipeline, StagedModelsRefuseWhatTheyCannotDo) {
  auto tied = test::sharded_training_shape();
  tied.tie_word_embeddings = true;
  auto odd = test::sharded_training_shape();
  odd.num_hidden_layers = 3;
  std::mutex mu;
  std::vector<std::string> errors;
  auto message = [&](const std::function<void()>& f) {
    try {
      f();
    } catch (const std::exception& e) {
      std::lock_guard lock(mu);
      errors.push_back(e.what());
      return;
    }
    std::lock_guard lock(mu);
    errors.push_back("(no error)");
  };
  run_thread_ranks(2, [&](int rank, GroupFactory& groups) {
    const auto ctx = make_training_context(groups, {2, 1, 1}, rank);
    if (rank != 0) return;  // construction is local: one stage's errors suffice
    message([&] { Transformer(tied, HeadKind::kLm, ctx); });
    message([&] { Transformer(odd, HeadKind::kLm, ctx); });
    message([&] {
      Transformer critic(test::sharded_training_shape(), HeadKind::kValue, ctx);
      PPOCritic(critic, CriticConfig{}, 1, 1, ctx);
    });
    message([&] {
      Transformer stage(test::sharded_training_shape(), HeadKind::kLm, ctx);
      PagedKvCache cache(test::sharded_training_shape(), 1, 4, torch::kFloat, torch::kCPU);
      KvCacheView kv;
      kv.cache = &cache;
      auto ids = torch::zeros({1, 1}, torch::kLong);
      stage->forward_cached(ids, ids, kv);
    });
  });
  ASSERT_EQ(errors.size(), 4u);
  EXPECT_NE(errors[0].find("tie_word_embeddings"), std::string::npos) << errors[0];
  EXPECT_NE(errors[1].find("num_hidden_layers 3 is not divisible by the pp size 2"), std::string::npos) << errors[1];
  EXPECT_NE(errors[2].find("pipeline-parallel critics are not supported"), std::string::npos) << errors[2];
  EXPECT_NE(errors[3].find("generation runs on whole (pp = 1) models"), std::string::npos) << errors[3];
}

// pp stages as threads, 4 micro-batches of 2 samples each: every stage runs exactly the 1F1B
// order, and the accumulated gradients of a weighted log-prob loss equal the whole model's
// (float64, so any wrong activation or gradient exchange stands far above rounding). `packed`: the
// stages run use_remove_padding (each packs its input and unpacks its output, so the stages still
// exchange (B, T, C)) against the whole padded model.
void check_one_f_one_b(int pp, bool packed = false) {
  const auto shape = test::sharded_training_shape();
  torch::manual_seed(3);
  Transformer full(shape, HeadKind::kLm);
  full->to(torch::kDouble);
  const auto batch = test::sharded_training_batch(shape.vocab_size);
  std::vector<RolloutBatch> micro;
  for (const auto& rows : split_rows(batch.size(), 2)) micro.push_back(batch.select(rows));
  // Weights on the real response tokens only: what a padding position holds is no result (a packed
  // forward leaves zeros there).
  const auto weights = torch::randn({batch.size(), batch.response_length()}, torch::kDouble) * batch.response_mask;
  auto loss_of = [&](std::size_t m, const torch::Tensor& logits) {
    const auto lp = response_log_probs_of_logits(logits, micro[m], 1.0, false).first;
    return (lp * weights.narrow(0, static_cast<std::int64_t>(2 * m), 2)).sum();
  };
  for (std::size_t m = 0; m < micro.size(); ++m) {
    const auto& ub = micro[m];
    loss_of(m, full->forward(ub.input_ids, ub.attention_mask, ub.position_ids)).backward();
  }
  const auto want_log_probs = [&] {
    torch::NoGradGuard no_grad;
    return response_log_probs(full, batch, 1.0, false).first;
  }();

  const MeshShape mesh{pp, 1, 1};
  const auto layout = training_layout(llama_parameters(shape), mesh, DpSharding::kReplicated);
  std::mutex mu;
  std::map<int, std::vector<PipelineOp>> traces;
  std::map<int, double> grad_diff, log_prob_diff;
  run_thread_ranks(pp, [&](int rank, GroupFactory& groups) {
    Transformer stage(shape, HeadKind::kLm, make_training_context(groups, mesh, rank));
    stage->to(torch::kDouble);
    copy_training_shard(*full, *stage, layout, rank);
    ComputeOptions compute;
    compute.remove_padding = packed;
    stage->set_compute(compute);
    std::vector<PipelineOp> trace;
    pipeline_forward_backward(stage, micro, loss_of, &trace);
    double worst = 0;
    const auto reference = full->named_parameters();
    for (const auto& item : stage->named_parameters())
      worst = std::max(worst, (item.value().grad() - reference[item.key()].grad()).abs().max().item<double>());
    const auto log_probs = micro_batched_log_probs(stage, batch, 3, 1.0);  // micro-batches of 3, 3, 2
    std::lock_guard lock(mu);
    traces[rank] = trace;
    grad_diff[rank] = worst;
    log_prob_diff[rank] = ((log_probs - want_log_probs) * batch.response_mask).abs().max().item<double>();
  });
  for (int s = 0; s < pp; ++s) {
    EXPECT_EQ(str(traces[s]), str(one_f_one_b_order(pp, s, 4))) << "stage " << s;
    EXPECT_LT(grad_diff[s], 1e-12) << "stage " << s;
    EXPECT_LT(log_prob_diff[s], 1e-12) << "stage " << s;
  }
  // The interleaving itself, written out: stage 0 warms up with min(p - 1, 4) forwards.
  if (pp == 2) {
    EXPECT_EQ(str(traces[0]), str({F(0), F(1), B(0), F(2), B(1), F(3), B(2), B(3)}));
  } else if (pp == 4) {
    EXPECT_EQ(str(traces[0]), str({F(0), F(1), F(2), F(3), B(0), B(1), B(2), B(3)}));
  }
  EXPECT_EQ(str(traces[pp - 1]), str({F(0), B(0), F(1), B(1), F(2), B(2), F(3), B(3)}));
}

TEST(Pipeline, TwoStagesRunOneFOneBAndEqualTheWholeModel) { check_one_f_one_b(2); }
TEST(Pipeline, FourStagesRunOneFOneBAndEqualTheWholeModel) { check_one_f_one_b(4); }
TEST(Pipeline, PackedStagesEqualThePaddedWholeModel) { check_one_f_one_b(2, /*packed=*/true); }

}  // namespace
}  // namespace hs::trainer
