// sharded_training_test.cpp — the PPO actor trained tensor- and pipeline-parallel over real Gloo
// processes (hs_dist_child sharded_training) equals the single-process trainer, for each mesh
// (pp, tp, dp) of world = pp·tp·dp in Megatron rank order. The dp-only meshes are
// DataParallel.* in process_group_test.cpp.
//
// Every rank builds the same full float32 model from one seed, copies its training shard
// (make_training_context + training_layout + copy_training_shard) and compares on the fixed batch
// of sharded_training_fixtures.h (its dp share of the 8 samples):
//   (a) the last stage's full-vocabulary logits against the full model's forward,
//   (b) PPOActor::compute_log_prob (micro-batches of 3, on every rank of the pp group),
//   (c) one PPOActor::update_policy (micro-batches of one sample, so 1F1B interleaves; gradient
//       clipping active): every parameter shard against the same box of the single-process
//       update, the pg_loss metric (mean over dp) and the clip norm; every metric bitwise equal
//       on the ranks of a tp group and of a pp group.
// Tolerances (float32, ε = 1.2e-7): the sharded forward sums the same products in another order
// (row-parallel partial sums, the all-reduce), so logits and log-probs differ by a few ulps of
// their magnitude (≤ 1e-5 · max|logit| and ≤ 2e-6 absolute for log-probs ≈ −3). The update is
// (lr/eps)·g_clipped = 0.1·g (AdamW's eps far above |g|): linear in the gradient, so a gradient
// weighted by local instead of global counts, a clip norm that counts a replicated parameter twice,
// or a missing micro-batch moves parameters by ≥ 1% of the update; rounding moves them by
// ≤ 1e-4 of the largest update (measured ≤ 5e-6: the float32 parameter's own ulp dominates).
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "../../test_db.h"
#include "dist/dist_test_util.h"

namespace hs::trainer {
namespace {

struct RankResult {
  double logit_diff = -1, logit_scale = -1, log_prob_diff = -1, param_diff = -1, update_scale = -1,
         pg_loss_diff = -1, grad_norm_diff = -1, grad_norm = -1, spread = -1, metric_count = -1;
};

void check_sharded_training(int pp, int tp, int dp, int kv_heads) {
  const std::string tag =
      "pp" + std::to_string(pp) + "tp" + std::to_string(tp) + "dp" + std::to_string(dp) + "kv" + std::to_string(kv_heads);
  const auto out = hs::test::temp_db("sharded_training_test", tag + ".txt");
  const int world = pp * tp * dp;
  const auto status = hs::test::run_ranks({HS_DIST_CHILD, "sharded_training", std::to_string(pp), std::to_string(tp),
                                           std::to_string(dp), std::to_string(kv_heads), out},
                                          world);
  for (int r = 0; r < world; ++r) ASSERT_TRUE(hs::test::exited_ok(status[static_cast<std::size_t>(r)])) << tag << " rank " << r;
  for (int r = 0; r < world; ++r) {
    std::ifstream in(out + ".rank" + std::to_string(r));
    RankResult x;
    in >> x.logit_diff >> x.logit_scale >> x.log_prob_diff >> x.param_diff >> x.update_scale >> x.pg_loss_diff >>
        x.grad_norm_diff >> x.grad_norm >> x.spread >> x.metric_count;
    ASSERT_TRUE(in) << tag << " rank " << r << " wrote no result";
    std::printf("%s rank %d: logits %.3g (of %.3g), log-probs %.3g, params %.3g (update %.3g), pg_loss %.3g, "
                "grad_norm %.3g (%.4g), metric spread %.3g\n",
                tag.c_str(), r, x.logit_diff, x.logit_scale, x.log_prob_diff, x.param_diff, x.update_scale,
                x.pg_loss_diff, x.grad_norm_diff, x.grad_norm, x.spread);
    EXPECT_LE(x.logit_diff, 1e-5 * x.logit_scale) << tag << " rank " << r;
    EXPECT_LE(x.log_prob_diff, 2e-6) << tag << " rank " << r;
    EXPECT_GT(x.update_scale, 1e-4) << tag << ": the update must be large enough to compare";
    EXPECT_LE(x.param_diff, 1e-4 * x.update_scale) << tag << " rank " << r;
    EXPECT_LE(x.pg_loss_diff, 1e-6) << tag << " rank " << r;
    EXPECT_LE(x.grad_norm_diff, 1e-5 * x.grad_norm) << tag << " rank " << r;
    EXPECT_GT(x.grad_norm, 0.05) << tag << ": clipping (grad_clip 0.05) must be active";
    EXPECT_EQ(x.spread, 0.0) << tag << " rank " << r << ": metrics differ within a tp or pp group";
    EXPECT_GE(x.metric_count, 7) << tag << " rank " << r;
  }
}

TEST(ShardedTraining, TensorParallelTwoEqualsSingleProcessWithGqa) { check_sharded_training(1, 2, 1, 2); }
TEST(ShardedTraining, TensorParallelTwoTimesDataParallelTwoEqualsSingleProcess) { check_sharded_training(1, 2, 2, 4); }
TEST(ShardedTraining, TensorParallelFourEqualsSingleProcess) { check_sharded_training(1, 4, 1, 4); }
TEST(ShardedTraining, PipelineTwoTimesDataParallelTwoEqualsSingleProcess) { check_sharded_training(2, 1, 2, 4); }
TEST(ShardedTraining, PipelineTwoTimesTensorParallelTwoEqualsSingleProcess) { check_sharded_training(2, 2, 1, 2); }
// Beyond the list: four stages of one layer (stage 0 warms up with 3 forwards over Gloo's
// rendezvous sends) and all three dimensions at once.
TEST(ShardedTraining, PipelineFourEqualsSingleProcess) { check_sharded_training(4, 1, 1, 4); }
TEST(ShardedTraining, PipelineTensorAndDataParallelTwoEachEqualsSingleProcess) { check_sharded_training(2, 2, 2, 4); }

}  // namespace
}  // namespace hs::trainer
