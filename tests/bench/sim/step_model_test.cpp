// step_model_test.cpp — each phase of the step model against hand arithmetic on a small case.
// The expected values were also recomputed independently in Python (the formulas of
// step_model.h written out again; the script is quoted in the comments' arithmetic).
#include "hybridscope/bench/sim/step_model.h"

#include "hybridscope/bench/sim/step_calibration.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

namespace sim = hs::bench::sim;
using sim::LinkLevel;

namespace {

// A round-number device: 1e12 bf16 FLOP/s, 1e11 B/s; links 10 µs / 10 GB/s in a node of 8,
// 100 µs / 1 GB/s between nodes.
sim::CommCalibration small_cluster(int devices_per_node = 8) {
  sim::HardwareSpec hw;
  hw.name = "small";
  hw.devices_per_node = devices_per_node;
  hw.device.dense_flops_per_s = {{"bf16", 1e12}};
  hw.device.memory_bandwidth_bytes_per_s = 1e11;
  hw.device.memory_capacity_bytes = 1e9;
  hw.intra_node = {1e10, 1e-5, sim::Basis::kAssumed};
  hw.inter_node = {1e9, 1e-4, sim::Basis::kAssumed};
  return sim::CommCalibration(hw);
}

// V 1000, h 64, ffn 256, 2 layers, 4 heads of 16, 2 KV heads:
// N_dense = 2·(3·64·256 + 64·(64 + 32 + 32 + 64)) + 2·1000·64 = 2·(49152 + 12288) + 128000 = 250880.
sim::StepInputs small_step() {
  sim::StepInputs in;
  in.model = {1000, 64, 256, 2, 4, 2, 16};
  in.prompts = 4;
  in.samples_per_prompt = 2;  // 8 sequences
  in.prompt_length = 10;
  in.response_length = 4;  // S = 14
  in.train = {1, 1, 2};    // tp 1, pp 1, dp 2: world 2
  in.rollout_tp = 1;       // 2 replicas of 4 sequences
  in.grad_sync = sim::GradSync::kDataParallel;
  in.optimizer_steps_per_epoch = 2;
  in.micro_batches_per_optimizer_step = 2;
  in.efficiency = {0.5, 0.5, 0.5, 0.25};  // prefill, decode bandwidth, forward, train
  return in;
}

}  // namespace

TEST(StepModel, KvBytesAndStridedGroups) {
  // 2 (K, V) · 2 layers · 2 KV heads · 16 · 2 bytes = 256 bytes per token.
  EXPECT_DOUBLE_EQ(sim::kv_bytes_per_token({1000, 64, 256, 2, 4, 2, 16}, 2.0), 256.0);
  EXPECT_EQ(sim::link_level_for_strided_group(2, 4, 8), LinkLevel::kIntraNode);  // spans 8 ranks
  EXPECT_EQ(sim::link_level_for_strided_group(4, 4, 8), LinkLevel::kInterNode);  // spans 16
}

TEST(StepModel, DataParallelStepByHand) {
  const sim::PhaseTimes t = sim::simulate_step(small_step(), small_cluster());
  // Prefill, b = 4 sequences per replica = 2 prompts of 10 tokens (their 2 samples share the
  // prompt): forward FLOPs = 2·N·20 + 2·(2·10²)·16·4·2 = 10035200 + 51200 = 10086400;
  // ÷ (1 · 1e12 · 0.5) = 2.01728e-5 s.
  EXPECT_NEAR(t.prefill_s, 2.01728e-5, 1e-18);
  // Decode step j, context 10 + j: bytes = 2·N + 4·(10 + j)·256 = 512000, 513024, 514048, 515072;
  // ÷ (1e11 · 0.5) = 1.024e-5 … ; FLOPs 4·(2·N + 512·(10 + j)) = 2027520 … ÷ 5e11 = 4.06e-6 s:
  // memory-bound; Σ = 2054144 / 5e10 = 4.108288e-5 s.
  EXPECT_NEAR(t.decode_s, 4.108288e-5, 1e-18);
  EXPECT_EQ(t.gen_tp_comm_s, 0.0);  // rollout tp 1
  EXPECT_NEAR(t.gen_s, 2.01728e-5 + 4.108288e-5, 1e-18);
  // Old log-prob, 8 sequences of 14: 2·N·112 + 2·(8·196)·128 = 56197120 + 401408 = 56598528;
  // ÷ (2 · 1e12 · 0.5) = 5.6598528e-5 s; ref the same.
  EXPECT_NEAR(t.old_log_prob_s, 5.6598528e-5, 1e-18);
  EXPECT_NEAR(t.ref_s, 5.6598528e-5, 1e-18);
  // Actor: 3 · 56598528 = 169795584 FLOPs ÷ (2 · 1e12 · 0.25) = 3.39591168e-4 s; no pipeline.
  EXPECT_NEAR(t.actor_compute_s, 3.39591168e-4, 1e-17);
  EXPECT_EQ(t.actor_bubble_s, 0.0);
  // 2 optimizer steps × all-reduce of 2·N = 501760 bytes over 2 ranks (intra-node):
  //   2·1·1e-5 + 2·1/2 · 501760/1e10 = 2e-5 + 5.0176e-5; × 2 = 1.40352e-4 s.
  EXPECT_NEAR(t.actor_grad_comm_s, 1.40352e-4, 1e-17);
  // Per optimizer step one all-reduce of the loss's two float64 counts (16 bytes): 2·1·1e-5 +
  //   2·1/2 · 16/1e10 = 2.00016e-5; × 2 = 4.00032e-5 s. No packing (replicated gradients).
  EXPECT_NEAR(t.actor_scalar_comm_s, 4.00032e-5, 1e-18);
  EXPECT_EQ(t.actor_grad_pack_s, 0.0);
  EXPECT_NEAR(t.update_actor_s, 3.39591168e-4 + 1.40352e-4 + 4.00032e-5, 1e-17);
  EXPECT_NEAR(t.step_s, 6.125568e-05 + 2 * 5.6598528e-5 + 5.19946368e-4, 1e-17);
}

TEST(StepModel, RolloutTensorParallelAndFsdpByHand) {
  sim::StepInputs in = small_step();
  in.rollout_tp = 2;  // one replica of 8 sequences on 2 ranks
  in.grad_sync = sim::GradSync::kFsdp;
  in.reference_policy = false;
  const sim::PhaseTimes t = sim::simulate_step(in, small_cluster());
  // Prefill: the 4 prompts, 40 tokens, Σs² 400: 2·N·40 + 2·400·128 = 20172800 ÷ (2 · 1e12 · 0.5).
  EXPECT_NEAR(t.prefill_s, 2.01728e-5, 1e-18);
  // Decode: N·2/2 = 250880 weight bytes + 8·(10 + j)·128 KV bytes per rank = 261120, 262144,
  // 263168, 264192; Σ = 1050624 ÷ 5e10 = 2.101248e-5 s (memory-bound: FLOPs ÷ 5e11 ≈ 4.1e-6).
  EXPECT_NEAR(t.decode_s, 2.101248e-5, 1e-18);
  // TP all-reduces, 2 per layer (4): prompts 4·10·64·2 = 5120 bytes: 2·1e-5 + 5120/1e10
  //   = 2.0512e-5, × 4 = 8.2048e-5; then 4 tokens × 4 × (2e-5 + 1024/1e10 = 2.01024e-5)
  //   = 3.216384e-4; and per forward the head's all-gather of the next-token logits: the 4
  //   prompts', 4·1000·2 = 8000 bytes: 1e-5 + 1/2 · 8000/1e10 = 1.04e-5, then 4 tokens' of 8
  //   sequences, 16000 bytes: 1.08e-5 each, 4.32e-5; total 4.572864e-4 s.
  EXPECT_NEAR(t.gen_tp_comm_s, 4.572864e-4, 1e-17);
  EXPECT_EQ(t.ref_s, 0.0);
  // FSDP over dp 2: per micro-batch 2 all-gathers + 1 reduce-scatter of 501760 bytes, each
  //   1e-5 + 1/2 · 501760/1e10 = 3.5088e-5; × 3 × (2 steps · 2 micro-batches) = 4.21056e-4 s;
  //   and each gather's copies, the shard packed (1/2) and the full tensors unflattened (1):
  //   2 · 501760 · 1.5 bytes read + written at 1e11 B/s × the copy efficiency 0.5 = 3.01056e-5,
  //   × 8 gathers = 2.408448e-4; in all 6.619008e-4 s.
  EXPECT_NEAR(t.actor_grad_comm_s, 6.619008e-4, 1e-17);
  // Per optimizer step two 16-byte all-reduces (the counts, the gradient norm): 2 · 2 · 2.00016e-5
  //   = 8.00064e-5 s; and the gradients packed for the reduce-scatter, 501760 bytes read and
  //   written at 1e11 B/s × the copy efficiency 0.5: 2 · 501760 / 5e10 = 2.00704e-5, × 2 steps.
  EXPECT_NEAR(t.actor_scalar_comm_s, 8.00064e-5, 1e-18);
  EXPECT_NEAR(t.actor_grad_pack_s, 4.01408e-5, 1e-18);
  EXPECT_NEAR(t.update_actor_s, t.actor_compute_s + 6.619008e-4 + 8.00064e-5 + 4.01408e-5, 1e-17);
}

// The overheads per forward call and per layer of one: the same tp-2 replica makes 1 prefill + 4
// decode steps = 5 calls; 30 µs a call and 7 µs a layer of 2 add 5 · (30 + 2 · 7) µs = 220 µs to
// generation, at tp 1 as at tp 2 (neither divides them).
TEST(StepModel, GenerationOverheadsPerCallAndPerLayerByHand) {
  for (int tp : {1, 2}) {
    sim::StepInputs in = small_step();
    in.rollout_tp = tp;
    in.grad_sync = sim::GradSync::kFsdp;
    const double without = sim::simulate_generation(in, small_cluster()).gen_s;
    in.efficiency.gen_call_overhead_s = 30e-6;
    in.efficiency.gen_layer_overhead_s = 7e-6;
    EXPECT_NEAR(sim::simulate_generation(in, small_cluster()).gen_s - without, 220e-6, 1e-15) << "tp " << tp;
  }
}

// The hardware's rows_efficiency slows generation's products by their rows: the prefill's 20
// (2 prompts of 10 tokens per replica), each decode step's 4 sequences.
TEST(StepModel, GenerationProductsRunAtTheirRowsShareByHand) {
  sim::StepInputs in = small_step();
  in.efficiency.decode_bandwidth = 5.0;  // so that decode is compute-bound (memory 512000 / 5e11 ≈ 1e-6 s a step)
  sim::CommCalibration flat = small_cluster();
  const sim::PhaseTimes before = sim::simulate_step(in, flat);
  // Decode FLOPs 4·(2·N + 512·(10 + j)), j = 0..3: Σ = 8122368 ÷ 5e11 = 1.6244736e-5 s.
  EXPECT_NEAR(before.decode_s, 1.6244736e-5, 1e-18);
  sim::HardwareSpec hw = flat.hardware();
  hw.device.rows_efficiency = {{16, 0.5}, {64, 1.0}};
  const sim::PhaseTimes t = sim::simulate_step(in, sim::CommCalibration(hw));
  // Prefill: 2.01728e-5 s ÷ share(20) = 0.58048202 (hardware_test): 3.4751828e-5 s.
  EXPECT_NEAR(t.prefill_s, 2.01728e-5 / 0.58048202, 1e-12);
  // Decode at 4 rows, below the first point: share 0.5, 3.2489472e-5 s.
  EXPECT_NEAR(t.decode_s, 3.2489472e-5, 1e-17);
  // Log-prob and training passes keep their rate (hundreds of rows and more per call).
  EXPECT_EQ(t.old_log_prob_s, before.old_log_prob_s);
  EXPECT_EQ(t.actor_compute_s, before.actor_compute_s);
}

TEST(StepModel, OneFOneBBubbleByHand) {
  sim::StepInputs in = small_step();
  in.train = {1, 2, 2};  // pp 2, dp 2: world 4, dp members 2 ranks apart
  in.rollout_tp = 1;     // 4 replicas of 2 sequences
  in.optimizer_steps_per_epoch = 1;
  in.micro_batches_per_optimizer_step = 4;
  const sim::PhaseTimes t = sim::simulate_step(in, small_cluster());
  // Compute 169795584 ÷ (4 · 1e12 · 0.25) = 1.69795584e-4 s; bubble · (p − 1)/m = 1/4 of it,
  // i.e. a share (p − 1)/(m + p − 1) = 1/5 of compute + bubble.
  EXPECT_NEAR(t.actor_compute_s, 1.69795584e-4, 1e-17);
  EXPECT_NEAR(t.actor_bubble_s, 4.2448896e-5, 1e-18);
  EXPECT_NEAR(t.actor_bubble_s / (t.actor_compute_s + t.actor_bubble_s), 1.0 / 5.0, 1e-12);
  // One all-reduce of the stage's N/2 parameters (250880 bytes) over dp 2 (spans 4 ranks, in the
  // node): 2e-5 + 250880/1e10 = 4.5088e-5 s.
  EXPECT_NEAR(t.actor_grad_comm_s, 4.5088e-5, 1e-18);
  // Prefill, b = 2 sequences, 1 prompt: 2·N·10 + 2·100·128 = 5043200 ÷ 5e11 = 1.00864e-5 s.
  EXPECT_NEAR(t.prefill_s, 1.00864e-5, 1e-18);
}

TEST(StepModel, SharedDevicesSlowDeviceWorkNotCommunication) {
  const sim::CommCalibration cluster = small_cluster();
  sim::StepInputs in = small_step();  // world 2
  // Defaults: one process per device, 2 ranks on a node of 8 devices; never below 1.
  EXPECT_EQ(sim::ranks_per_node(in, cluster.hardware()), 2);
  EXPECT_EQ(sim::device_sharing(in, cluster.hardware()), 1.0);
  in.devices_per_node = 4;
  in.processes_per_node = 2;
  EXPECT_EQ(sim::device_sharing(in, cluster.hardware()), 1.0);
  // Two rank processes on one device: each gets half of it.
  in.devices_per_node = 1;
  EXPECT_EQ(sim::device_sharing(in, cluster.hardware()), 2.0);
  const sim::PhaseTimes t = sim::simulate_step(in, cluster);
  // Every device term of DataParallelStepByHand doubles: prefill 2 · 2.01728e-5, decode (still
  // memory-bound: both of its terms double) 2 · 4.108288e-5, log-prob 2 · 5.6598528e-5, actor
  // compute 2 · 3.39591168e-4.
  EXPECT_NEAR(t.prefill_s, 4.03456e-5, 1e-18);
  EXPECT_NEAR(t.decode_s, 8.216576e-5, 1e-18);
  EXPECT_NEAR(t.old_log_prob_s, 1.13197056e-4, 1e-17);
  EXPECT_NEAR(t.actor_compute_s, 6.79182336e-4, 1e-17);
  // The gradient all-reduce is not scaled (calibrated with the same placement): 1.40352e-4 s.
  EXPECT_NEAR(t.actor_grad_comm_s, 1.40352e-4, 1e-17);
  in.processes_per_node = -1;
  EXPECT_THROW(sim::device_sharing(in, cluster.hardware()), sim::SimError);
}

TEST(StepModel, OversubscribedNodeKeepsItsGroupsInside) {
  // Nodes of 2 devices; 4 ranks (fsdp over dp 4), rollout tp 2: 2 replicas of 4 sequences.
  sim::StepInputs in = small_step();
  in.train = {1, 1, 4};
  in.rollout_tp = 2;
  in.grad_sync = sim::GradSync::kFsdp;
  in.fsdp_gathers = sim::FsdpGathers::kPerOptimizerStep;
  in.reference_policy = false;
  const sim::CommCalibration cluster = small_cluster(2);
  // One process per device: 2 nodes, the dp group of 4 crosses them. All-gather of 2·N = 501760
  // bytes over 4 ranks, inter-node: 3·1e-4 + 3/4 · 501760/1e9 = 6.7632e-4 s; its copies (the
  // shard, 1/4, and the full tensors) 2 · 501760 · 1.25 bytes ÷ 5e10 = 2.5088e-5: 7.01408e-4 s.
  const sim::PhaseTimes spread = sim::simulate_step(in, cluster);
  EXPECT_NEAR(spread.old_log_prob_gather_s, 7.01408e-4, 1e-17);
  // All 4 on one node of 2 devices: shared 2× (the copies, not the collective), the group inside
  // the node: 3·1e-5 + 3/4 · 501760/1e10 = 6.7632e-5 s + 2 · 2.5088e-5 = 1.17808e-4 s.
  in.processes_per_node = 4;
  const sim::PhaseTimes packed = sim::simulate_step(in, cluster);
  EXPECT_NEAR(packed.old_log_prob_gather_s, 1.17808e-4, 1e-17);
  // Prefill of a replica's 2 prompts (4 sequences; 10086400 FLOPs) over tp 2 at 5e11:
  // 1.00864e-5 s, × 2 shared.
  EXPECT_NEAR(spread.prefill_s, 1.00864e-5, 1e-18);
  EXPECT_NEAR(packed.prefill_s, 2.01728e-5, 1e-18);
  // Log-prob: 56598528 FLOPs ÷ (4 · 5e11) = 2.8299264e-5 s, × 2 shared, + the gather.
  EXPECT_NEAR(packed.old_log_prob_s, 5.6598528e-5 + 1.17808e-4, 1e-17);
}

TEST(StepModel, FsdpGathersInLogProbPassesByHand) {
  sim::StepInputs in = small_step();  // dp 2
  in.grad_sync = sim::GradSync::kFsdp;
  in.log_prob_micro_batches = 3;
  // One all-gather of 2·N = 501760 bytes over 2 ranks: 1e-5 + 1/2 · 501760/1e10 = 3.5088e-5 s,
  // and its copies 2 · 501760 · 1.5 ÷ 5e10 = 3.01056e-5: 6.51936e-5 s a gather.
  // verl's FSDP: one per forward call, 3 per pass; the sharded ref pass the same.
  sim::PhaseTimes t = sim::simulate_step(in, small_cluster());
  EXPECT_NEAR(t.old_log_prob_gather_s, 1.955808e-4, 1e-17);
  EXPECT_NEAR(t.old_log_prob_s, 5.6598528e-5 + 1.955808e-4, 1e-17);
  EXPECT_NEAR(t.ref_gather_s, 1.955808e-4, 1e-17);
  EXPECT_NEAR(t.ref_s, t.old_log_prob_s, 1e-18);
  // hybridscope's ZeroShards: one gather per pass, a replicated ref (none); the update gathers
  // and reduce-scatters once per optimizer step: 2 · (6.51936e-5 + 3.5088e-5) = 2.005632e-4 s.
  in.fsdp_gathers = sim::FsdpGathers::kPerOptimizerStep;
  in.reference_sharded = false;
  t = sim::simulate_step(in, small_cluster());
  EXPECT_NEAR(t.old_log_prob_s, 5.6598528e-5 + 6.51936e-5, 1e-17);
  EXPECT_EQ(t.ref_gather_s, 0.0);
  EXPECT_NEAR(t.ref_s, 5.6598528e-5, 1e-18);
  EXPECT_NEAR(t.actor_grad_comm_s, 2.005632e-4, 1e-17);
  // Data parallel: the passes gather nothing.
  in.grad_sync = sim::GradSync::kDataParallel;
  EXPECT_EQ(sim::simulate_step(in, small_cluster()).old_log_prob_gather_s, 0.0);
}

TEST(StepModel, RefusesLayoutsThatDoNotDivide) {
  sim::StepInputs in = small_step();
  in.rollout_tp = 3;  // 2 ranks
  try {
    sim::simulate_step(in, small_cluster());
    FAIL() << "rollout tp 3 over 2 ranks accepted";
  } catch (const sim::SimError& e) {
    EXPECT_NE(std::string(e.what()).find("rollout tp 3 does not divide the 2 ranks"), std::string::npos) << e.what();
  }
  in = small_step();
  in.prompts = 3;
  in.samples_per_prompt = 1;  // 3 sequences over 2 replicas
  EXPECT_THROW(sim::simulate_step(in, small_cluster()), sim::SimError);
  in = small_step();
  in.response_length = 0;
  EXPECT_THROW(sim::simulate_step(in, small_cluster()), sim::SimError);
}

// Per-layer units (fsdp_config.per_layer): the root unit (embeddings, head, final norm) once per
// pass / optimizer step, each decoder layer per forward call and again in the backward.
TEST(StepModel, FsdpPerLayerUnitsByHand) {
  sim::StepInputs in = small_step();  // dp 2, 2 optimizer steps × 2 micro-batches, 2 layers
  in.grad_sync = sim::GradSync::kFsdp;
  in.fsdp_gathers = sim::FsdpGathers::kPerLayer;
  in.log_prob_micro_batches = 3;
  in.reference_policy = false;
  const sim::PhaseTimes t = sim::simulate_step(in, small_cluster());
  // Root: 2·1000·64 + 64 = 128064 parameters (untied), 256128 bytes; a layer: (250880 − 128064)/2
  // = 61408 parameters, 122816 bytes. Over dp 2 in the node: all-gather 1e-5 + 1/2 · bytes/1e10,
  // reduce-scatter the same: root 2.28064e-5, layer 1.61408e-5. A gather's copies, 2 · bytes · 1.5
  // ÷ 5e10: root 1.536768e-5, layer 7.36896e-6; so a root gather 3.817408e-5, a layer's 2.350976e-5.
  // Old log-prob: the root once + 3 forward calls × 2 layers: 3.817408e-5 + 6 · 2.350976e-5
  // = 1.7923264e-4.
  EXPECT_NEAR(t.old_log_prob_gather_s, 1.7923264e-4, 1e-17);
  // Update, per optimizer step: root gather + reduce-scatter 3.817408e-5 + 2.28064e-5; per
  // micro-batch 2 layers × (2 gathers + 1 reduce-scatter) = 2 · (2 · 2.350976e-5 + 1.61408e-5)
  // = 1.2632064e-4, × 2 micro-batches; per step 6.098048e-5 + 2.5264128e-4 = 3.1362176e-4, × 2
  // steps = 6.2724352e-4.
  EXPECT_NEAR(t.actor_grad_comm_s, 6.2724352e-4, 1e-17);
}

// A split rollout pool (hybridscope.placement.rollout) and the asynchronous modes. small_step's two
// training ranks keep the actor; two more ranks generate (2 replicas of 4 sequences, as the
// colocated step's), so generation and training equal the colocated step's, and what is new is the
// sync, the hand-over and how the modes put the pipelines together. 4 ranks on 8 devices: no
// sharing, every group inside the node (α 10 µs, β 10 GB/s).
TEST(StepModel, SplitPoolSyncHandOverAndAsyncStepsByHand) {
  const sim::CommCalibration comm = small_cluster();
  const sim::PhaseTimes colocated = sim::simulate_step(small_step(), comm);
  sim::StepInputs in = small_step();
  in.rollout_ranks = 2;
  in.sync_bytes_per_param = 4;       // fp32 weights on the wire
  in.sync_bucket_bytes = 1 << 20;    // one bucket holds them all
  in.max_response_length = 4;
  EXPECT_EQ(sim::generation_ranks(in), 2);
  EXPECT_EQ(sim::total_ranks(in), 4);

  const sim::PhaseTimes t = sim::simulate_step(in, comm);
  EXPECT_TRUE(t.split_pool);
  EXPECT_DOUBLE_EQ(t.gen_s, colocated.gen_s);
  EXPECT_DOUBLE_EQ(t.update_actor_s, colocated.update_actor_s);
  EXPECT_DOUBLE_EQ(t.switch_s, 0.0);  // no train->rollout switch: the pool holds its own weights
  const double train = colocated.old_log_prob_s + colocated.ref_s + colocated.update_actor_s;
  EXPECT_DOUBLE_EQ(t.train_pipeline_s, train);
  // Sync: 250880 parameters × 4 B = 1003520 B broadcast to a group of 3 (rank 0 and the pool):
  // the version, 2·10 µs + 8/1e10 = 20.0008 µs; the bucket, 2·10 µs + 1003520/1e10 = 120.352 µs.
  EXPECT_NEAR(t.sync_wire_s, 20.0008e-6 + 120.352e-6, 1e-12);
  // Pack and unpack: 2 · 1003520 B at 1e11 B/s × 0.5 (switch copy) = 40.1408 µs each.
  EXPECT_NEAR(t.sync_pack_s, 40.1408e-6, 1e-12);
  EXPECT_NEAR(t.sync_unpack_s, 40.1408e-6, 1e-12);
  EXPECT_NEAR(t.sync_s, 220.6344e-6, 1e-12);
  EXPECT_DOUBLE_EQ(t.sync_per_step_s, t.sync_s);
  // Hand-over: per pool rank over 4 ranks, a 16 B header (3·10 µs + 1.6e-9 s) and 4 rows of
  // (1 + 2·4) float32 = 144 B (3·10 µs + 1.44e-8 s): 2 · 60.016 µs.
  EXPECT_NEAR(t.handoff_s, 2 * (30.0016e-6 + 30.0144e-6), 1e-12);
  // sync: each waits for the other.
  EXPECT_NEAR(t.step_s, t.sync_s + t.gen_s + t.handoff_s + train, 1e-15);
  EXPECT_NEAR(t.gen_wait_s, t.gen_s + t.handoff_s, 1e-15);
  EXPECT_DOUBLE_EQ(sim::predicted_phase(t, "gen"), t.gen_wait_s);
  EXPECT_DOUBLE_EQ(sim::predicted_phase(t, "generate_async"), t.gen_s);
  EXPECT_DOUBLE_EQ(sim::predicted_phase(t, "sync_rollout_weights"), t.sync_s);
  EXPECT_DOUBLE_EQ(sim::predicted_phase(colocated, "generate_async"), -1.0);

  // one_step_off: the longer pipeline plus the exposed hand-over and sync.
  in.async_mode = hs::trainer::AsyncMode::kOneStepOff;
  const sim::PhaseTimes o = sim::simulate_step(in, comm);
  EXPECT_NEAR(o.step_s, std::max(t.gen_s, train) + t.handoff_s + t.sync_s, 1e-15);
  EXPECT_NEAR(o.gen_wait_s, std::max(0.0, t.gen_s - train) + t.handoff_s, 1e-15);
  EXPECT_LT(o.step_s, t.step_s);

  // fully_async, a sync every 2 updates: with staleness room for a batch (0.5 · 2 = 1) as
  // one_step_off with half a sync per step; without (0 · 2), two steps overlap inside the window.
  in.async_mode = hs::trainer::AsyncMode::kFullyAsync;
  in.trigger_parameter_sync_step = 2;
  in.staleness_threshold = 0.5;
  const sim::PhaseTimes f = sim::simulate_step(in, comm);
  EXPECT_NEAR(f.sync_per_step_s, t.sync_s / 2, 1e-15);
  EXPECT_NEAR(f.step_s, std::max(t.gen_s, train) + t.handoff_s + t.sync_s / 2, 1e-15);
  in.staleness_threshold = 0.0;
  const sim::PhaseTimes w = sim::simulate_step(in, comm);
  EXPECT_NEAR(w.step_s, (t.gen_s + std::max(t.gen_s, train) + train) / 2 + t.handoff_s + t.sync_s / 2, 1e-15);

  // Memory: a pool rank holds the whole model in the sync's dtype and its KV cache, no training state.
  EXPECT_DOUBLE_EQ(t.memory.generation_weights, 250880.0 * 4);
  EXPECT_DOUBLE_EQ(t.memory.generation_peak, t.memory.generation_weights + t.memory.kv_cache);
}

TEST(StepModel, AsyncModesNeedASplitPoolThatDividesIntoReplicas) {
  sim::StepInputs in = small_step();
  in.async_mode = hs::trainer::AsyncMode::kOneStepOff;
  try {
    sim::simulate_step(in, small_cluster());
    FAIL() << "one_step_off without a pool must throw";
  } catch (const sim::SimError& e) {
    EXPECT_NE(std::string(e.what()).find("needs a split rollout pool"), std::string::npos) << e.what();
  }
  in.rollout_ranks = 3;
  in.rollout_tp = 2;
  try {
    sim::simulate_step(in, small_cluster());
    FAIL() << "rollout tp 2 on a pool of 3 must throw";
  } catch (const sim::SimError& e) {
    EXPECT_NE(std::string(e.what()).find("3 ranks of the rollout pool"), std::string::npos) << e.what();
  }
}
