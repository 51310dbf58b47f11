// fsdp_test.cpp — ZeRO-3 / FSDP parameter shards (zero.h): in-process thread ranks for the
// mechanics (row blocks, gather, release, reduce-scatter, uneven rows, the full state dict), and
// real Gloo processes (hs_dist_child fsdp_update) for one PPO actor update against the
// single-process trainer, with the bytes of every collective checked against the closed form.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "../../test_db.h"
#include "dist/dist_test_util.h"
#include "dist/fsdp_fixtures.h"
#include "hybridscope/trainer/dist/layout.h"
#include "hybridscope/trainer/model/model.h"
#include "hybridscope/trainer/rl/ppo_workers.h"
#include "hybridscope/trainer/dist/zero.h"
#include "hybridscope/trainer/dist/thread_world.h"

namespace hs::trainer {
namespace {

// The critic's backbone with its value head: score.weight (1, C) and score.bias (1) have fewer
// rows than ranks, so the last blocks are empty and padded on the wire.
Transformer seeded_critic() {
  torch::manual_seed(3);
  return Transformer(test::fsdp_shape(), HeadKind::kValue);
}

TEST(ZeroShards, RowBlocksGatherReleaseAndReduceScatterOverThreeRanks) {
  const int n = 3;
  // Built here, not in the rank threads: torch's default generator is one per process.
  Transformer reference = seeded_critic();
  std::vector<Transformer> models;
  for (int r = 0; r < n; ++r) models.push_back(seeded_critic());
  std::int64_t full_bytes = 0;
  for (const auto& p : reference->parameters()) full_bytes += static_cast<std::int64_t>(p.nbytes());
  run_thread_ranks(n, [&](int rank, GroupFactory& groups) {
    auto dp = groups.world();
    Transformer model = models[static_cast<std::size_t>(rank)];
    ZeroShards zero(*model, dp);
    // Rows: ceil(rows / 3) per rank, the last rank's block shorter or empty.
    std::int64_t bytes = 0;
    const auto params = reference->named_parameters();
    for (std::size_t i = 0; i < zero.names().size(); ++i) {
      const auto& full = params[zero.names()[i]];
      const std::int64_t rows = full.size(0), block = (rows + n - 1) / n;
      const auto [begin, end] = zero.rows(i);
      EXPECT_EQ(begin, std::min(rows, block * rank)) << zero.names()[i];
      EXPECT_EQ(end, std::min(rows, block * (rank + 1))) << zero.names()[i];
      EXPECT_TRUE(torch::equal(zero.shards()[i], full.narrow(0, begin, end - begin))) << zero.names()[i];
      bytes += (end - begin) * (full.numel() / rows) * 4;
    }
    EXPECT_EQ(zero.shard_bytes(), bytes);
    // Released at construction: no parameter storage until gathered.
    EXPECT_FALSE(zero.gathered());
    EXPECT_EQ(zero.module_parameter_bytes(), 0);
    for (const auto& p : model->parameters()) EXPECT_EQ(p.numel(), 0);

    zero.gather();
    EXPECT_EQ(zero.module_parameter_bytes(), full_bytes);
    for (const auto& item : model->named_parameters())
      EXPECT_TRUE(torch::equal(item.value(), params[item.key()])) << item.key();

    // Gradients that differ per rank: rank k's gradient is (k + 1) x the parameter; the shard's
    // gradient is the sum over ranks of its rows, n(n+1)/2 x the parameter's rows.
    for (auto& p : model->parameters()) p.mutable_grad() = p.detach() * static_cast<float>(rank + 1);
    zero.reduce_scatter_grads();
    EXPECT_FALSE(zero.gathered());
    EXPECT_EQ(zero.module_parameter_bytes(), 0);
    for (const auto& p : model->parameters()) EXPECT_FALSE(p.grad().defined());
    for (std::size_t i = 0; i < zero.names().size(); ++i) {
      const auto [begin, end] = zero.rows(i);
      const auto want = params[zero.names()[i]].narrow(0, begin, end - begin) * static_cast<float>(n * (n + 1) / 2);
      EXPECT_TRUE(torch::allclose(zero.shards()[i].grad(), want, 0, 0)) << zero.names()[i];
    }

    // The full state dict is the full tensors; loading a changed one keeps each rank's rows.
    auto state = zero.full_state_dict();
    for (const auto& [name, t] : state) EXPECT_TRUE(torch::equal(t, params[name])) << name;
    for (auto& entry : state) entry.second = entry.second + 1.0f;
    zero.load_full_state_dict(state);
    zero.gather();
    for (const auto& item : model->named_parameters())
      EXPECT_TRUE(torch::equal(item.value(), params[item.key()] + 1.0f)) << item.key();
    zero.release();
    EXPECT_EQ(zero.module_parameter_bytes(), 0);
  });
}

// Per-layer units (wrap_layers) on two thread ranks: the root unit and the layers partition the
// module; the Pass scope gathers only the root, the layer hooks one layer at a time (the thread
// world has no asynchronous collectives: prefetch runs its gathers at issue, which shows as the
// next layer counted in flight); a module without decoder layers is refused by name.
TEST(ZeroShards, PerLayerUnitsGatherTheRootAndOneLayerAtATime) {
  const int n = 2;
  std::vector<Transformer> models;
  for (int r = 0; r < n; ++r) models.push_back(seeded_critic());
  run_thread_ranks(n, [&](int rank, GroupFactory& groups) {
    Transformer model = models[static_cast<std::size_t>(rank)];
    ZeroShards zero(*model, groups.world());
    zero.wrap_layers(/*forward_prefetch=*/true);
    const std::int64_t root = zero.root_unit_bytes(), layer = zero.largest_layer_unit_bytes();
    EXPECT_EQ(root + test::fsdp_shape().num_hidden_layers * layer, zero.full_bytes());
    {
      ZeroShards::PassScope pass(&zero);
      EXPECT_EQ(zero.module_parameter_bytes(), root);
      zero.reset_stats();
      zero.before_forward(0);  // layer 0 full, layer 1's gather issued
      EXPECT_EQ(zero.module_parameter_bytes(), root + layer);
      EXPECT_EQ(zero.peak_full_bytes(), root + 2 * layer);
      zero.after_forward(0);
      EXPECT_EQ(zero.module_parameter_bytes(), root);
      zero.before_forward(1);  // the prefetched gather lands
      EXPECT_EQ(zero.module_parameter_bytes(), root + layer);
      zero.after_forward(1);
      EXPECT_EQ(zero.comm_stats().collectives, 2);
    }
    EXPECT_EQ(zero.module_parameter_bytes(), 0);
    if (rank == 0) {
      auto plain = torch::nn::Linear(4, 4);
      ZeroShards flat(*plain, groups.world());
      try {
        flat.wrap_layers(false);
        ADD_FAILURE() << "a module without decoder layers was wrapped per layer";
      } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("model.layers.<i>"), std::string::npos) << e.what();
      }
    }
  });
}

TEST(ZeroShards, LoadFullStateDictNamesAMissingOrMisshapedTensor) {
  Transformer model = seeded_critic();
  auto dp = std::make_shared<SingleRankCommunicator>("dp");
  ZeroShards zero(*model, dp);
  auto state = zero.full_state_dict();
  state.pop_back();
  const std::string missing = zero.names().back();
  try {
    zero.load_full_state_dict(state);
    ADD_FAILURE() << "a missing tensor was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("no tensor named " + missing), std::string::npos) << e.what();
  }
  state = zero.full_state_dict();
  state.front().second = torch::zeros({2, 2});
  try {
    zero.load_full_state_dict(state);
    ADD_FAILURE() << "a misshaped tensor was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(zero.names().front() + " has shape (2, 2)"), std::string::npos) << e.what();
  }
}

// The critic on fsdp shards over 2 thread ranks vs the single-process critic on the whole batch:
// two epochs, so the second mini-batch runs on shards gathered after a step, and compute_values
// afterwards on the stepped shards. The value head's 1-row score.weight and score.bias leave rank
// 1 an empty block. float32 tolerances as in FsdpOverGloo (the update is the clipped gradient
// itself; reduction order moves it by ~1e-10).
TEST(ZeroShards, CriticUpdateOverTwoThreadRanksEqualsSingleProcess) {
  torch::set_num_threads(1);
  const int n = 2;
  CriticConfig cfg;
  cfg.ppo_mini_batch_size = 4;  // prompts: the whole batch
  cfg.ppo_micro_batch_size_per_gpu = 2;
  cfg.ppo_epochs = 2;
  cfg.optim.lr = 1e3;  // (lr/eps)·g = g: see fsdp_fixtures.h
  cfg.optim.eps = 1e3;
  cfg.optim.weight_decay = 0.0;
  cfg.grad_clip = 0.05;
  RolloutBatch batch = test::fsdp_batch(test::fsdp_shape().vocab_size);
  auto gen = at::detail::createCPUGenerator(99);
  batch.values = torch::randn(batch.responses.sizes(), gen) * 0.1;
  batch.returns = torch::randn(batch.responses.sizes(), gen);

  Transformer reference = seeded_critic();
  std::vector<Transformer> models;
  for (int r = 0; r < n; ++r) models.push_back(seeded_critic());
  PPOCritic single(reference, cfg, test::kFsdpRolloutN, 10);
  const Metrics single_metrics = single.update_critic(batch, 0);
  const auto single_values = single.compute_values(batch, 2);
  const auto params = reference->named_parameters();
  run_thread_ranks(n, [&](int rank, GroupFactory& groups) {
    ParallelContext ctx;
    ctx.world = groups.world();
    ctx.dp = ctx.world;
    ctx.dp_sharding = DpSharding::kSharded;
    PPOCritic critic(models[static_cast<std::size_t>(rank)], cfg, test::kFsdpRolloutN, 10, ctx);
    const ZeroShards* zero = critic.optimizer().zero_shards();
    ASSERT_NE(zero, nullptr);
    std::vector<std::int64_t> rows;
    const std::int64_t share = batch.size() / n;
    for (std::int64_t i = rank * share; i < (rank + 1) * share; ++i) rows.push_back(i);
    const RolloutBatch local = batch.select(rows);
    const Metrics metrics = critic.update_critic(local, 0);
    double worst = 0;
    for (std::size_t i = 0; i < zero->names().size(); ++i) {
      const auto [begin, end] = zero->rows(i);
      const auto want = params[zero->names()[i]].narrow(0, begin, end - begin);
      ASSERT_EQ(zero->shards()[i].sizes(), want.sizes()) << zero->names()[i];
      if (want.numel() > 0) worst = std::max(worst, (zero->shards()[i] - want).abs().max().item<double>());
    }
    EXPECT_LE(worst, 2e-6) << "rank " << rank;
    // The clip norm is the whole batch's (dp-summed squares of the shard gradients), averaged
    // over the two steps; the loss metrics average this rank's micro-batches and differ.
    double norm = -1, single_norm = -1;
    for (const auto& [k, v] : metrics) norm = k == "critic/grad_norm" ? v : norm;
    for (const auto& [k, v] : single_metrics) single_norm = k == "critic/grad_norm" ? v : single_norm;
    EXPECT_GT(single_norm, cfg.grad_clip) << "clipping must be active";
    EXPECT_NEAR(norm, single_norm, 1e-5 * single_norm) << "rank " << rank;
    std::printf("critic rank %d: max |shard - single| = %.3g, grad_norm %.6g vs %.6g\n", rank, worst, norm, single_norm);
    const auto values = critic.compute_values(local, 2);
    EXPECT_LE((values - single_values.index_select(0, torch::tensor(rows))).abs().max().item<double>(), 1e-5)
        << "rank " << rank;
    EXPECT_EQ(zero->module_parameter_bytes(), 0);
  });
}

// Per-layer units need every dp rank to run as many passes: a micro-batch without a valid token
// (rank 1's first, its response mask zeroed) still runs, with an exactly-zero gradient, where the
// single process skips it. Two thread ranks with forward_prefetch against the single-process
// update on the whole batch, the tolerance of FsdpOverGloo (a skipped pass would hang the ranks).
TEST(ZeroShards, PerLayerActorRunsAMicroBatchWithoutTokensAsAZeroGradient) {
  torch::set_num_threads(1);
  const int n = 2;
  ActorConfig cfg = test::fsdp_actor_config();
  cfg.fsdp_config.per_layer = true;
  cfg.fsdp_config.forward_prefetch = true;
  const ModelShape shape = test::fsdp_layered_shape();
  RolloutBatch batch = test::fsdp_batch(shape.vocab_size);
  batch.response_mask.narrow(0, 8, 2).zero_();  // rank 1's first micro-batch
  auto seeded_actor = [&] {
    torch::manual_seed(5);
    return Transformer(shape, HeadKind::kLm);
  };
  Transformer reference = seeded_actor();
  std::vector<Transformer> models;
  for (int r = 0; r < n; ++r) models.push_back(seeded_actor());
  PPOActor single(reference, cfg, 1.0, test::kFsdpRolloutN, 10);
  single.update_policy(batch, 0, 0);
  const auto params = reference->named_parameters();
  run_thread_ranks(n, [&](int rank, GroupFactory& groups) {
    ParallelContext ctx;
    ctx.world = groups.world();
    ctx.dp = ctx.world;
    ctx.dp_sharding = DpSharding::kSharded;
    PPOActor actor(models[static_cast<std::size_t>(rank)], cfg, 1.0, test::kFsdpRolloutN, 10, ctx);
    const ZeroShards* zero = actor.optimizer().zero_shards();
    ASSERT_NE(zero, nullptr);
    ASSERT_TRUE(zero->per_layer());
    std::vector<std::int64_t> rows;
    const std::int64_t share = batch.size() / n;
    for (std::int64_t i = rank * share; i < (rank + 1) * share; ++i) rows.push_back(i);
    actor.update_policy(batch.select(rows), 0, 0);
    double worst = 0;
    for (std::size_t i = 0; i < zero->names().size(); ++i) {
      const auto [begin, end] = zero->rows(i);
      const auto want = params[zero->names()[i]].narrow(0, begin, end - begin);
      if (want.numel() > 0) worst = std::max(worst, (zero->shards()[i] - want).abs().max().item<double>());
    }
    EXPECT_LE(worst, 2e-6) << "rank " << rank;  // NaN fails too
    std::printf("per-layer actor rank %d: max |shard - single| = %.3g\n", rank, worst);
  });
}

// One PPO actor update with strategy fsdp over a (1, tp, dp) Gloo mesh (hs_dist_child
// fsdp_update) against the single-process update on the whole batch. Per rank:
//   - its shards equal its training_layout(kSharded) boxes of the single-process model, before
//     the update exactly and after it within 2e-6 (float32: the update is the clipped gradient
//     itself, ~1e-3 per element, see fsdp_fixtures.h; micro-batch and reduction order change the
//     gradient's rounding at ~1e-7 relative, i.e. ~1e-10 here, while a gradient summed over the
//     wrong ranks or rows moves a parameter by ~1e-3);
//   - the policy loss of the batch (from compute_log_prob over gathered shards, weighted by
//     global batch info and averaged over dp) within 1e-6 of the single-process loss, and the clipping
//     norm (dp-summed squares of the shard gradients, combined with tp) within 1e-5 relative;
//     clipping was active (the single-process norm exceeds grad_clip);
//   - between uses the module holds 0 parameter bytes and the shards hold M_r / dp, M_r the
//     rank's tp shard (training_layout(kSharded).rank_bytes);
//   - comm_ops on the dp group: an all_gather per use (compute_log_prob, the mini-batch) and one
//     reduce_scatter, each of nccl-tests bytes = M_r (all_gather: dp x the flat shard;
//     reduce_scatter: the flat full gradients).
// With per-layer units (UNITS layer / prefetch / prefetch_recompute, fsdp_layered_shape's four
// layers; the last with gradient checkpointing, each layer recomputed in the backward) the same
// tolerances hold, and instead:
//   - comm_ops: the root unit (embeddings, norm, head; R bytes) gathered per use and
//     reduce-scattered once; each layer unit (Y bytes) gathered in every forward pass (the
//     log-prob passes P and the update passes U) and again in every backward, reduce-scattered
//     once per backward: all_gather R x 2, Y x (P + 2U) x L; reduce_scatter R x 1, Y x U x L;
//   - the update's peak full-parameter bytes: R + Y without prefetch (one layer full at a time),
//     R + 2Y with it (the next layer's gather in flight while one computes) — both less than M_r,
//     the whole model that one unit holds.
void check_fsdp_update(int tp, int dp, const std::string& units = "model") {
  const std::string tag = "fsdp_1" + std::to_string(tp) + std::to_string(dp) + "_" + units;
  const auto db = hs::test::temp_db("fsdp_test", tag + ".sqlite");
  const int world = tp * dp;
  const auto status =
      hs::test::run_ranks({HS_DIST_CHILD, "fsdp_update", db, std::to_string(tp), std::to_string(dp), units}, world);
  for (int r = 0; r < world; ++r) ASSERT_TRUE(hs::test::exited_ok(status[static_cast<std::size_t>(r)])) << tag << " rank " << r;
  const bool layered = units != "model";
  const MeshShape mesh{1, tp, dp};
  const ModelShape shape = layered ? test::fsdp_layered_shape() : test::fsdp_shape();
  const auto specs = llama_parameters(shape);
  const LayoutSet replicated = training_layout(specs, mesh, DpSharding::kReplicated);
  const LayoutSet sharded = training_layout(specs, mesh, DpSharding::kSharded);
  for (int r = 0; r < world; ++r) {
    std::ifstream in(db + ".result.rank" + std::to_string(r));
    double after = -1, before = -1, loss = -1, norm = -1, single_norm = -1;
    std::int64_t module_bytes = -1, shard_bytes = -1, peak = -1, root = -1, layer = -1, whole = -1;
    in >> after >> before >> loss >> norm >> single_norm >> module_bytes >> shard_bytes >> peak >> root >> layer >> whole;
    ASSERT_TRUE(in) << tag << " rank " << r << " wrote no result";
    std::printf("%s rank %d: max |shard - single| = %.3g (before %.3g), |loss - single| = %.3g, grad_norm rel %.3g "
                "(single %.4g); peak full bytes %lld of %lld\n",
                tag.c_str(), r, after, before, loss, norm, single_norm, static_cast<long long>(peak),
                static_cast<long long>(whole));
    EXPECT_EQ(before, 0.0) << tag << " rank " << r;
    EXPECT_LE(after, 2e-6) << tag << " rank " << r;
    EXPECT_LE(loss, 1e-6) << tag << " rank " << r;
    EXPECT_LE(norm, 1e-5) << tag << " rank " << r;
    EXPECT_GT(single_norm, test::fsdp_actor_config().grad_clip) << "clipping must be active";
    const std::int64_t m_r = replicated.rank_bytes(r);
    EXPECT_EQ(module_bytes, 0) << tag << " rank " << r;
    EXPECT_EQ(shard_bytes, sharded.rank_bytes(r)) << tag << " rank " << r;
    EXPECT_EQ(shard_bytes * dp, m_r) << tag << " rank " << r;
    EXPECT_EQ(whole, m_r) << tag << " rank " << r;
    auto rows = hs::test::query_rows(
        db + ".rank" + std::to_string(r),
        "SELECT o.value, c.group_size, c.bytes FROM comm_ops c JOIN strings o ON o.id = c.op_id "
        "JOIN strings g ON g.id = c.group_id WHERE g.value = 'dp' AND o.value IN ('all_gather', 'reduce_scatter') "
        "ORDER BY c.start_ns");
    // fsdp's prefetched gathers and its reduce-scatters under prefetch are issued asynchronously
    // (pending_collective.h): each such row carries the return of its post and the training
    // thread's wait, in that order after the issue, the wait returning no earlier than the
    // completion. A gather or reduce-scatter waited at once (no prefetch; a pass's first unit) is
    // a blocking collective, as is every other one (tp's, the gradient norm's all_reduce).
    const std::string fsdp_row = "(g.value = 'dp' AND o.value IN ('all_gather', 'reduce_scatter'))";
    const std::string count = "SELECT COUNT(*) FROM comm_ops c JOIN strings o ON o.id = c.op_id JOIN strings g ON "
                              "g.id = c.group_id WHERE ";
    EXPECT_EQ(hs::test::query_rows(db + ".rank" + std::to_string(r),
                                   count + fsdp_row + " AND c.posted_ns IS NOT NULL AND NOT COALESCE(c.posted_ns >= "
                                   "c.start_ns AND c.wait_start_ns >= c.posted_ns AND c.wait_end_ns >= c.wait_start_ns "
                                   "AND c.wait_end_ns >= c.end_ns, 0)"),
              std::vector<std::string>{"0"})
        << tag << " rank " << r << ": an asynchronous fsdp collective without its wait, or out of order";
    const bool prefetch = units == "prefetch" || units == "prefetch_recompute";
    const auto async_rows =
        std::stoll(hs::test::query_rows(db + ".rank" + std::to_string(r), count + fsdp_row + " AND c.posted_ns IS NOT NULL")
                       .at(0));
    if (prefetch)
      EXPECT_GT(async_rows, 0) << tag << " rank " << r << ": prefetch issued no collective ahead of its wait";
    else
      EXPECT_EQ(async_rows, 0) << tag << " rank " << r << ": without prefetch every collective is waited at once";
    EXPECT_EQ(hs::test::query_rows(db + ".rank" + std::to_string(r),
                                   count + "NOT " + fsdp_row + " AND (c.posted_ns IS NOT NULL "
                                   "OR c.wait_start_ns IS NOT NULL OR c.wait_end_ns IS NOT NULL)"),
              std::vector<std::string>{"0"})
        << tag << " rank " << r << ": a synchronous collective recorded with a wait";
    auto row = [&](const char* op, std::int64_t bytes) {
      return std::string(op) + "|" + std::to_string(dp) + "|" + std::to_string(bytes);
    };
    if (!layered) {
      EXPECT_EQ(rows, (std::vector<std::string>{row("all_gather", m_r), row("all_gather", m_r),
                                                row("reduce_scatter", m_r)}))
          << tag << " rank " << r;
      EXPECT_EQ(peak, m_r) << tag << " rank " << r;
      continue;
    }
    const int L = shape.num_hidden_layers;
    const std::int64_t y = (m_r - root) / L;
    EXPECT_EQ(layer, y) << tag << " rank " << r << ": equal layers";
    const std::int64_t share = test::fsdp_batch(shape.vocab_size).size() / dp;
    const std::int64_t passes = share / test::fsdp_actor_config().ppo_micro_batch_size_per_gpu;  // P = U
    std::vector<std::string> want;
    for (int i = 0; i < 2; ++i) want.push_back(row("all_gather", root));
    for (std::int64_t i = 0; i < 3 * passes * L; ++i) want.push_back(row("all_gather", y));
    want.push_back(row("reduce_scatter", root));
    for (std::int64_t i = 0; i < passes * L; ++i) want.push_back(row("reduce_scatter", y));
    std::sort(rows.begin(), rows.end());
    std::sort(want.begin(), want.end());
    EXPECT_EQ(rows, want) << tag << " rank " << r;
    EXPECT_EQ(peak, root + (units == "layer" ? 1 : 2) * y) << tag << " rank " << r;
    EXPECT_LT(peak, m_r) << tag << " rank " << r;
  }
}

TEST(FsdpOverGloo, TwoRanksUpdateEqualsSingleProcess) { check_fsdp_update(1, 2); }
TEST(FsdpOverGloo, FourRanksUpdateEqualsSingleProcess) { check_fsdp_update(1, 4); }
TEST(FsdpOverGloo, TensorParallelTwoByDataParallelTwo) { check_fsdp_update(2, 2); }
TEST(FsdpOverGloo, FourRanksPerLayerUnitsEqualSingleProcess) { check_fsdp_update(1, 4, "layer"); }
TEST(FsdpOverGloo, FourRanksPerLayerUnitsWithForwardPrefetchEqualSingleProcess) {
  check_fsdp_update(1, 4, "prefetch");
}
TEST(FsdpOverGloo, TensorParallelTwoByPerLayerPrefetchOverTwo) { check_fsdp_update(2, 2, "prefetch"); }
TEST(FsdpOverGloo, FourRanksPerLayerPrefetchUnderGradientCheckpointing) { check_fsdp_update(1, 4, "prefetch_recompute"); }

}  // namespace
}  // namespace hs::trainer
