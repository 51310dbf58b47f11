// projection_test.cpp — the weight switch's concurrent exchange and the memory estimate against hand
// arithmetic, the layout search on a constructed case whose answer is known, and the projection's
// scaling columns and refusals.
#include "hybridscope/bench/sim/projection.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include <nlohmann/json.hpp>

namespace sim = hs::bench::sim;
namespace trainer = hs::trainer;

namespace {

sim::CommCalibration cluster(double alpha, double beta, int devices_per_node = 8, double capacity = 1e9) {
  sim::HardwareSpec hw;
  hw.name = "constructed";
  hw.devices_per_node = devices_per_node;
  hw.device.dense_flops_per_s = {{"bf16", 1e12}};
  hw.device.memory_bandwidth_bytes_per_s = 1e11;
  hw.device.memory_capacity_bytes = capacity;
  hw.intra_node = {beta, alpha, sim::Basis::kAssumed};
  hw.inter_node = {beta, alpha, sim::Basis::kAssumed};
  return sim::CommCalibration(hw);
}

// As step_model_test.cpp's small case: N_dense = 250880, 8 sequences of 10 + 4 tokens, dp 2.
sim::StepInputs small_step() {
  sim::StepInputs in;
  in.model = {1000, 64, 256, 2, 4, 2, 16};
  in.prompts = 4;
  in.samples_per_prompt = 2;
  in.prompt_length = 10;
  in.response_length = 4;
  in.train = {1, 1, 2};
  in.rollout_tp = 1;
  in.grad_sync = sim::GradSync::kDataParallel;
  in.optimizer_steps_per_epoch = 2;
  in.micro_batches_per_optimizer_step = 2;
  return in;
}

}  // namespace

// Three ranks: 0→1 100 B, 1→0 100 B, 0→2 200 B, 2→1 50 B; send/recv costs 10 µs + bytes / 1e10.
// Every message is in flight at once; a rank's link carries max(sent, received) per link level.
// One node: rank 0 max(300, 100) → 10.03 µs, rank 1 max(100, 150) → 10.015, rank 2 max(50, 200)
// → 10.02. Rank 0 keeps 100 B and packs its 200 B for rank 2, which unpacks them: copies at 1e9
// B/s, read + write, rank 0 posts at 0.6 µs, so every rank it sends to starts then too: rank 0
// ends at 10.63, rank 1 at 10.615, rank 2 at 0.6 + 10.02 + 0.4 = 11.02 µs (last); a generation
// shard it installs after its last message adds its copy.
// Without the copies, two ranks a node (rank 2 alone): rank 0's levels run side by side,
// max(100 intra, 200 inter) → 10.02 µs instead of 10.03 on one node; ranks 0 and 2 end at 10.02.
// Every switch then closes with the barrier, a 4-byte all-reduce over the 3 ranks:
// 2·2 α + (2·2/3) · 4 / β = 40 µs + 0.000533 µs (the same link between nodes).
TEST(SwitchModel, ConcurrentExchangeAndCopiesByHand) {
  trainer::ReshardTraffic traffic;
  traffic.mode = trainer::ReshardMode::kHybrid;
  traffic.ranks.resize(3);
  traffic.ranks[0].sent_to = {{1, 100}, {2, 200}};
  traffic.ranks[0].received_from = {{1, 100}};
  traffic.ranks[1].sent_to = {{0, 100}};
  traffic.ranks[1].received_from = {{0, 100}, {2, 50}};
  traffic.ranks[2].sent_to = {{1, 50}};
  traffic.ranks[2].received_from = {{0, 200}};
  const std::int64_t sent[] = {300, 100, 50}, received[] = {100, 150, 200};
  for (int r = 0; r < 3; ++r) {
    traffic.ranks[r].bytes_sent = sent[r];
    traffic.ranks[r].bytes_received = received[r];
  }
  const double barrier = 4e-5 + 16.0 / 3.0 / 1e10;
  const sim::SwitchTimes direct = sim::cost_switch(traffic, cluster(1e-5, 1e10), 8, 1.0, 1e9);
  EXPECT_NEAR(direct.barrier_s, barrier, 1e-15);
  EXPECT_NEAR(direct.train_to_rollout_s, 10.03e-6 + barrier, 1e-15);
  EXPECT_EQ(direct.critical_rank, 0);
  EXPECT_NEAR(direct.copy_s, 0.0, 1e-15);
  EXPECT_EQ(direct.max_bytes_received, 200);

  traffic.ranks[0].bytes_local = 100;
  traffic.ranks[0].packed_bytes_sent = 200;
  traffic.ranks[2].packed_bytes_received = 200;
  const sim::SwitchTimes t = sim::cost_switch(traffic, cluster(1e-5, 1e10), 8, 1.0, 1e9);
  EXPECT_NEAR(t.train_to_rollout_s, 11.02e-6 + barrier, 1e-15);
  EXPECT_EQ(t.critical_rank, 2);
  EXPECT_NEAR(t.wire_s, 10.02e-6, 1e-15);
  EXPECT_NEAR(t.copy_s, 0.4e-6, 1e-15);

  // Rank 2's generation shard of 300 B is installed into the rollout model after its last
  // message: 600 B more at 1e9 B/s, 0.6 µs; rank 2 now ends at 11.62 µs.
  traffic.ranks[2].generation_bytes = 300;
  const sim::SwitchTimes installed = sim::cost_switch(traffic, cluster(1e-5, 1e10), 8, 1.0, 1e9);
  EXPECT_NEAR(installed.train_to_rollout_s, 11.62e-6 + barrier, 1e-15);
  EXPECT_EQ(installed.critical_rank, 2);
  EXPECT_NEAR(installed.copy_s, 1.0e-6, 1e-15);
  traffic.ranks[2].generation_bytes = 0;

  // Rank 2 on its own node: rank 0's intra and inter traffic overlap.
  traffic.ranks[2].packed_bytes_received = 0;
  traffic.ranks[0].packed_bytes_sent = 0;
  traffic.ranks[0].bytes_local = 0;
  const sim::SwitchTimes nodes = sim::cost_switch(traffic, cluster(1e-5, 1e10), 2, 1.0, 1e9);
  EXPECT_NEAR(nodes.train_to_rollout_s, 10.02e-6 + barrier, 1e-15);
  EXPECT_NEAR(sim::cost_switch(traffic, cluster(1e-5, 1e10), 8, 1.0, 1e9).train_to_rollout_s, 10.03e-6 + barrier,
              1e-15);
}

// The planner's bytes reach the step: fsdp over 2 ranks to rollout tp 1 makes every rank gather the
// other's half, naive and hybrid alike (HybridFlow Table 2: M − M/2); megatron dp 2 -> rollout tp 1
// (hybrid) moves nothing and costs nothing.
TEST(SwitchModel, StepUsesThePlannersBytes) {
  sim::StepInputs in = small_step();
  in.grad_sync = sim::GradSync::kFsdp;
  const auto comm = cluster(1e-5, 1e10);
  const sim::PhaseTimes fsdp = sim::simulate_step(in, comm);
  // Parameters with norms (the planner's list): 250880 + 5 · 64 = 251200, 2 bytes each.
  EXPECT_EQ(fsdp.weight_switch.max_bytes_received, 251200);
  EXPECT_GT(fsdp.switch_s, 0.0);
  EXPECT_DOUBLE_EQ(fsdp.step_s, fsdp.switch_s + fsdp.gen_s + fsdp.old_log_prob_s + fsdp.ref_s + fsdp.update_actor_s);
  in.grad_sync = sim::GradSync::kDataParallel;
  const sim::PhaseTimes megatron = sim::simulate_step(in, comm);
  EXPECT_EQ(megatron.weight_switch.max_bytes_received, 0);
  EXPECT_EQ(megatron.switch_s, 0.0);
}

// The KV pool the switch allocates: model {1000, 64, 256, 2 layers, 4 heads, 2 kv heads, head dim
// 16}, 2 bytes an element: 2·2·2·16·2 = 256 B a token; 4096 tokens at rollout tp 2: 524288 B a rank,
// zero-filled at 1e11 B/s × 0.25 = 20.97152 µs; two processes on one device (devices_per_node 1)
// double it. A split pool allocates no pool in a switch (it has none).
TEST(SwitchModel, KvPoolAllocationByHand) {
  sim::StepInputs in = small_step();
  in.rollout_tp = 2;
  in.kv_bytes_per_element = 2;
  in.efficiency.kv_fill = 0.25;
  const sim::PhaseTimes none = sim::simulate_step(in, cluster(1e-5, 1e10));
  EXPECT_EQ(none.kv_allocate_s, 0.0) << "no pool tokens: not costed";
  in.kv_pool_tokens = 4096;
  const sim::PhaseTimes t = sim::simulate_step(in, cluster(1e-5, 1e10));
  EXPECT_NEAR(t.kv_allocate_s, 524288.0 / 2.5e10, 1e-15);
  EXPECT_DOUBLE_EQ(t.switch_s, t.weight_switch.train_to_rollout_s + t.kv_allocate_s);
  EXPECT_DOUBLE_EQ(t.step_s, t.switch_s + t.gen_s + t.old_log_prob_s + t.ref_s + t.update_actor_s);
  in.devices_per_node = 1;
  in.processes_per_node = 2;
  const sim::PhaseTimes shared = sim::simulate_step(in, cluster(1e-5, 1e10, 1));
  EXPECT_NEAR(shared.kv_allocate_s, 2.0 * 524288.0 / 2.5e10, 1e-15);
}

// Memory of the small case (megatron dp 2, tp 1, pp 1; checkpointing; ref replicated by
// megatron): master = grads = 250880 · 4 = 1003520; optimizer 250880 · 8 / 2 = 1003520; reference
// 250880 · 2 = 501760; activations: one micro-batch of 8 / 2 / 2 / 2 = 1 sequence = 14 tokens,
// 2·14·64·2 + 34·14·64 = 34048; logits 14 · 1000 · 4 · 2 = 112000. Generation: the planner's
// assembled model 251200 · 2 = 502400, KV of 4 sequences · 14 tokens · 256 B = 14336.
TEST(MemoryModel, SmallCaseByHand) {
  const sim::PhaseTimes t = sim::simulate_step(small_step(), cluster(1e-5, 1e10));
  const sim::MemoryEstimate& m = t.memory;
  EXPECT_DOUBLE_EQ(m.master_weights, 1003520);
  EXPECT_DOUBLE_EQ(m.gradients, 1003520);
  EXPECT_DOUBLE_EQ(m.optimizer, 1003520);
  EXPECT_DOUBLE_EQ(m.reference_weights, 501760);
  EXPECT_DOUBLE_EQ(m.activations, 34048);
  EXPECT_DOUBLE_EQ(m.logits, 112000);
  // bf16 compute (2 bytes) over fp32 masters (4): autocast's cast of every weight, 250880 · 2.
  EXPECT_DOUBLE_EQ(m.compute_weights, 501760);
  EXPECT_DOUBLE_EQ(m.training_peak, 3658368 + 501760);
  EXPECT_DOUBLE_EQ(m.generation_weights, 502400);
  EXPECT_DOUBLE_EQ(m.kv_cache, 14336);
  EXPECT_DOUBLE_EQ(m.generation_peak, 1003520 + 1003520 + 501760 + 502400 + 14336);
  EXPECT_TRUE(m.fits());
  // A device of 3 MB holds the generation peak (3.03 MB)? No: refused, and the reason names training.
  sim::StepInputs in = small_step();
  const sim::Outcome refused = sim::try_step(in, cluster(1e-5, 1e10, 8, 3.0e6));
  EXPECT_FALSE(refused.feasible);
  EXPECT_NE(refused.refusal.find("training needs 0.0 GB per rank"), std::string::npos) << refused.refusal;
}

// A 1-second link latency makes every communication dominate. On 2 ranks the only candidates that
// communicate once per optimizer step and never in generation or the switch are megatron tp 1 pp 1
// dp 2 with rollout tp 1 and a mode that moves nothing (hybrid, vanilla: the generation shard is the
// replicated training shard); naive splits the replicas into dp row blocks and moves half the model.
TEST(LayoutSearch, SlowLinksPickTheLayoutThatMovesNothing) {
  // One optimizer step: dp 2 then pays two all-reduces (the gradients, the loss's token counts),
  // 4 s; pp 2 a send/recv in each log-prob pass and two in the update and a 1 s switch, 5 s.
  const auto comm = cluster(1.0, 1e10);
  sim::StepInputs in = small_step();
  in.optimizer_steps_per_epoch = 1;
  const auto candidates = sim::search_layouts(in, comm, 2);
  ASSERT_FALSE(candidates.empty());
  ASSERT_TRUE(candidates.front().outcome.feasible);
  EXPECT_EQ(candidates.front().label, "megatron tp 1 pp 1 dp 2 -> rollout tp 1, hybrid");
  EXPECT_EQ(candidates.front().outcome.times.switch_s, 0.0);
  EXPECT_EQ(candidates[1].label, "megatron tp 1 pp 1 dp 2 -> rollout tp 1, vanilla");
  // Sorted by step time; every feasible before every refused.
  bool refused_seen = false;
  for (std::size_t i = 1; i < candidates.size(); ++i) {
    if (!candidates[i].outcome.feasible) {
      refused_seen = true;
      continue;
    }
    EXPECT_FALSE(refused_seen) << candidates[i].label;
    EXPECT_GE(candidates[i].outcome.times.step_s, candidates[i - 1].outcome.times.step_s) << candidates[i].label;
  }
  // Same layouts, different mode: hybrid never slower than naive.
  double hybrid = -1, naive = -1;
  for (const auto& c : candidates) {
    if (c.label == "fsdp dp 2 -> rollout tp 2, hybrid") hybrid = c.outcome.times.step_s;
    if (c.label == "fsdp dp 2 -> rollout tp 2, naive") naive = c.outcome.times.step_s;
  }
  ASSERT_GT(hybrid, 0);
  EXPECT_LT(hybrid, naive);
}

// Strong scaling starts at 1 on the first size; weak scaling keeps the per-rank batch; a size the
// batch does not split over is refused with the model's reason, not dropped.
TEST(Projection, ScalingColumnsAndRefusals) {
  sim::StepInputs base = small_step();
  base.grad_sync = sim::GradSync::kFsdp;
  base.ppo_mini_batch_size = 2;
  base.ppo_micro_batch_size_per_gpu = 2;
  const auto comm = cluster(1e-5, 1e10);
  const sim::Projection p = sim::project(base, comm, {1, 2, 3, 4});
  ASSERT_EQ(p.sizes.size(), 4u);
  ASSERT_TRUE(p.sizes[0].feasible) << p.sizes[0].refusal;
  EXPECT_DOUBLE_EQ(p.sizes[0].strong_efficiency, 1.0);
  EXPECT_DOUBLE_EQ(p.sizes[0].weak_efficiency, 1.0);
  ASSERT_TRUE(p.sizes[1].feasible) << p.sizes[1].refusal;
  EXPECT_DOUBLE_EQ(p.sizes[1].strong_efficiency,
                   p.sizes[0].times.step_s / (2 * p.sizes[1].times.step_s));
  EXPECT_FALSE(p.sizes[2].feasible);  // 8 sequences over 3 replicas
  EXPECT_NE(p.sizes[2].refusal.find("do not split evenly"), std::string::npos) << p.sizes[2].refusal;
  ASSERT_TRUE(p.sizes[3].feasible) << p.sizes[3].refusal;
  EXPECT_EQ(p.sizes[3].inputs.train.dp, 4);
  EXPECT_EQ(p.sizes[3].inputs.micro_batches_per_optimizer_step, 1);  // 2 prompts · 2 / 4 ranks / 2
  EXPECT_GT(p.sizes[3].tokens_per_s, 0.0);
  EXPECT_GT(p.sizes[3].mfu_actor, p.sizes[3].mfu_step);
}

// projection_json of a split rollout pool (hybridscope.placement.rollout): step_model_test's
// SplitPoolSyncHandOverAndAsyncStepsByHand case (small_step's 2 training ranks + 2 pool ranks, one
// bucket of fp32 weights, max_response_length 4) projected at 4 ranks, one step off policy.
TEST(Projection, JsonCarriesASplitPoolsTermsAndOnlyForASplitPool) {
  sim::StepInputs base = small_step();
  base.rollout_ranks = 2;
  base.async_mode = trainer::AsyncMode::kOneStepOff;
  base.sync_bytes_per_param = 4;
  base.sync_bucket_bytes = 1 << 20;
  base.max_response_length = 4;
  const auto comm = cluster(1e-5, 1e10);
  const nlohmann::json j = nlohmann::json::parse(sim::projection_json(sim::project(base, comm, {4}), base, comm, {}, 0));
  ASSERT_TRUE(j.contains("split_pool")) << j.dump(2);
  EXPECT_EQ(j["split_pool"]["async_mode"], "one_step_off");
  EXPECT_EQ(j["split_pool"]["rollout_ranks"], 2);
  EXPECT_EQ(j["split_pool"]["trigger_parameter_sync_step"], 1);
  const nlohmann::json& size = j["sizes"][0];
  ASSERT_TRUE(size["feasible"].get<bool>()) << size.dump(2);
  const nlohmann::json& pool = size["split_pool"];
  EXPECT_EQ(pool["rollout_ranks"], 2);
  EXPECT_EQ(pool["actor_ranks"], 2);
  // The sync: 250880 parameters × 4 B = 1003520 B to a group of 3: the version 2·10 µs + 8/1e10,
  // the bucket 2·10 µs + 1003520/1e10; pack and unpack 2 · 1003520 B at 1e11 B/s × 0.5 each.
  EXPECT_NEAR(pool["sync_wire_s"].get<double>(), 20.0008e-6 + 120.352e-6, 1e-12);
  EXPECT_NEAR(pool["sync_pack_s"].get<double>(), 40.1408e-6, 1e-12);
  EXPECT_NEAR(pool["sync_unpack_s"].get<double>(), 40.1408e-6, 1e-12);
  EXPECT_NEAR(pool["sync_s"].get<double>(), 220.6344e-6, 1e-12);
  EXPECT_NEAR(pool["sync_per_step_s"].get<double>(), 220.6344e-6, 1e-12);  // one_step_off: every step
  // The hand-over: per pool rank over 4 ranks, a 16 B header (3·10 µs + 1.6e-9 s) and 4 rows of
  // 9 float32 = 144 B (3·10 µs + 1.44e-8 s).
  EXPECT_NEAR(pool["handoff_s"].get<double>(), 2 * (30.0016e-6 + 30.0144e-6), 1e-12);
  // The pipelines are the phases of phases_s: G = gen, T = old_log_prob + ref + update_actor (no
  // reward model, no critic); the step is max(G, T) + H + S, the actor's wait max(0, G − T) + H.
  const nlohmann::json& phases = size["phases_s"];
  const double gen = phases["gen"].get<double>();
  const double train = phases["old_log_prob"].get<double>() + phases["ref"].get<double>() +
                       phases["update_actor"].get<double>();
  EXPECT_DOUBLE_EQ(pool["rollout_pipeline_s"].get<double>(), gen);
  EXPECT_NEAR(pool["train_pipeline_s"].get<double>(), train, 1e-15);
  EXPECT_EQ(pool["bound"], gen > train ? "rollout" : "train");
  EXPECT_NEAR(phases["step_s"].get<double>(), std::max(gen, train) + 2 * (30.0016e-6 + 30.0144e-6) + 220.6344e-6, 1e-12);
  EXPECT_NEAR(pool["gen_wait_s"].get<double>(), std::max(0.0, gen - train) + 2 * (30.0016e-6 + 30.0144e-6), 1e-12);

  // fully_async with a sync every 2 updates: half a sync per step.
  base.async_mode = trainer::AsyncMode::kFullyAsync;
  base.trigger_parameter_sync_step = 2;
  base.staleness_threshold = 0.5;
  const nlohmann::json f = nlohmann::json::parse(sim::projection_json(sim::project(base, comm, {4}), base, comm, {}, 0));
  EXPECT_EQ(f["split_pool"]["async_mode"], "fully_async");
  EXPECT_EQ(f["split_pool"]["trigger_parameter_sync_step"], 2);
  EXPECT_DOUBLE_EQ(f["split_pool"]["staleness_threshold"].get<double>(), 0.5);
  EXPECT_NEAR(f["sizes"][0]["split_pool"]["sync_per_step_s"].get<double>(), 220.6344e-6 / 2, 1e-12);

  // A colocated projection has no split_pool anywhere: absent, not zeros.
  const sim::StepInputs colocated = small_step();
  const nlohmann::json c =
      nlohmann::json::parse(sim::projection_json(sim::project(colocated, comm, {2}), colocated, comm, {}, 0));
  EXPECT_FALSE(c.contains("split_pool"));
  ASSERT_TRUE(c["sizes"][0]["feasible"].get<bool>());
  EXPECT_FALSE(c["sizes"][0].contains("split_pool"));
}
