// step_model.h — the analytical model of one RL step (GRPO/PPO in verl's order), phase by phase,
// from a model's shape, the batch and lengths, the training and rollout layouts, the hardware and
// the efficiencies (achieved / peak) that calibration will fit from measured cells.
//
// What each phase costs (every rank identical; uniform prompt length P and response length R):
//   generation  replicas = world / rollout_tp, each with b = sequences / replicas sequences;
//     prefill   forward FLOPs of b prompts ÷ (rollout_tp · peak · prefill_efficiency)
//               + 2 TP all-reduces per layer of b·P·hidden activations (Megatron's row-parallel
//               attention output and MLP down projection)
//     decode    in waves of at most max_num_seqs sequences (the last wave smaller), each of
//               R steps (or, with a length cap above the mean, until the longest of lengths spread
//               uniformly around R ends, fewer sequences at each step: response_spread); step j
//               reads its weight shard and the live sequences' KV cache shard and is memory-bound
//               unless its FLOPs say otherwise:
//               max((weight_bytes/tp + b·(P + j)·kv_bytes_per_token/tp) ÷ (bandwidth · decode_bw_eff),
//                   b·(2·N_dense + 4·(P + j)·head_dim·heads·layers)/tp ÷ (peak · prefill_efficiency))
//               + 2 TP all-reduces per layer of b·hidden activations
//     per call  (the prefill and every decode step) gen_call_overhead_s + layers ·
//               gen_layer_overhead_s: host work that neither the batch nor tp divides
//   old log-prob, ref   forward FLOPs of all sequences (P + R each; model_flops.h, a third of
//               verl's training formula) ÷ (world · peak · forward_efficiency)
//               + fsdp: the parameter all-gathers of the pass over dp ranks (FsdpGathers says how many)
//   update actor  verl's training FLOPs × ppo_epochs ÷ (world · peak · train_efficiency)
//               + the 1F1B bubble: compute · (p − 1)/m, i.e. a share (p − 1)/(m + p − 1) of the
//                 pipeline's time (Narayanan et al., SC'21, §2.2), m micro-batches per optimizer step
//               + megatron's model-parallel traffic: per layer two tp all-reduces of the tokens'
//                 activations forward and two backward; pp send/recv of the boundary activations
//                 (the log-prob passes pay the forward half); sequence parallelism not modelled
//               + gradient synchronisation per optimizer step, by the calibrated alpha-beta model:
//                 data-parallel: one all-reduce of the gradient shard over dp ranks;
//                 fsdp: per micro-batch, two all-gathers of the parameters (forward, backward)
//                 and one reduce-scatter of the gradients over dp ranks (or once per optimizer
//                 step, FsdpGathers::kPerOptimizerStep)
// Shared devices: when more rank processes run on a node than it has devices, every device's time
// is shared by processes/devices ranks (time slicing: one CPU core per two single-threaded ranks,
// or several processes on one GPU), so each phase's device work (compute and memory reads) is
// that factor slower per rank: the node's total throughput stops growing at its device count.
// Communication is not scaled: its alpha and beta are calibrated from runs with the same
// placement (hs_comm_bench oversubscribes the same way), or are the hardware file's.
//   weight switch  train->rollout: the reshard planner's byte counts for the layouts and mode,
//               costed as hybridscope's executor runs them (switch_model.h)
//               + the KV pool's allocation (kv_allocate): its kv_pool_tokens slots of the rank's
//               heads' share zero-filled at memory bandwidth × kv_fill
//   reward      rule-based (verl's default for GRPO on verifiable tasks): not costed; with a reward
//               model, a forward pass over all sequences like ref
//   critic      PPO: a critic of the actor's shape (an assumption verl's examples follow): a values
//               pass like old_log_prob, and update_critic like update_actor
// Split rollout pool (rollout_ranks > 0; hybridscope.placement.rollout) and the async modes: the
// pool generates (G), the actor trains (T), the weights go over a bucketed broadcast with a pack and
// an unpack (S), the batch comes back in one broadcast per pool rank (H); sync: S + G + H + T;
// one_step_off: max(G, T) + H + S; fully_async: the same with S / trigger_parameter_sync_step, or,
// without staleness room for a batch ahead, only a sync window's steps overlapping (PhaseTimes).
// Not overlapped: every communication is exposed (an upper bound; overlap is for calibration).
// Memory per rank (estimate_memory) is estimated with the phases, and a layout that does not fit
// is refused by the projection with the reason.
// Not here yet: tree/hierarchical collectives, skewed length
// distributions (a long tail at the cap makes generation slower than the uniform spread).
// Sources of the FLOPs formula: probes/model_flops.h (verl's flops_counter.py).
#pragma once

#include <string>

#include "hybridscope/bench/sim/comm_calibration.h"
#include "hybridscope/bench/sim/hardware.h"
#include "hybridscope/bench/sim/switch_model.h"
#include "hybridscope/probes/model_flops.h"
#include "hybridscope/trainer/config/config.h"

namespace hs::bench::sim {

/// Training layout p-t-d (HybridFlow §5): world = pp · tp · dp ranks, tp fastest in rank order,
/// then pp, so a dp group's members are tp·pp ranks apart.
struct TrainLayout {
  int tp = 1;
  int pp = 1;
  int dp = 1;
  int world() const noexcept { return tp * pp * dp; }
};

enum class GradSync {
  kDataParallel,  // DDP-style: gradients all-reduced once per optimizer step
  kFsdp,          // ZeRO-3 / FSDP: parameters all-gathered in forward and backward, gradients reduce-scattered, per micro-batch
};

/// When FSDP (ZeRO-3) gathers the parameters over dp ranks.
enum class FsdpGathers {
  // PyTorch FSDP as verl runs it: parameters are freed after each use, so every forward call
  // gathers them (each micro-batch of a log-prob pass; forward and again backward in the update)
  // and gradients are reduce-scattered per micro-batch.
  kPerMicroBatch,
  // hybridscope's ZeroShards (trainer/src/dist/zero.cpp): the whole model is gathered once per
  // log-prob pass and once per optimizer step and held until it ends; gradients are
  // reduce-scattered once per optimizer step.
  kPerOptimizerStep,
  // ZeroShards with fsdp_config.per_layer (verl's auto-wrap units): the root unit (embeddings,
  // final norm, head) gathered once per log-prob pass and once per optimizer step, reduce-scattered
  // once per optimizer step; each decoder layer gathered per forward call, in the update again in
  // the backward, and reduce-scattered per micro-batch. forward_prefetch's overlap is not
  // modelled (communication is never overlapped: an upper bound).
  kPerLayer,
};

/// Achieved / peak, per kind of work; calibration fits them from measured cells.
struct Efficiencies {
  double prefill_compute = 0.5;   // generation's GEMMs (prefill, and decode's compute bound)
  double decode_bandwidth = 0.7;  // decode's weight and KV-cache reads
  double forward_compute = 0.5;   // old/ref log-prob passes
  double train_compute = 0.4;     // the actor's forward + backward
  double switch_copy = 0.5;       // the weight switch's packing, unpacking and slicing copies
  // Seconds per generation forward call (the prefill, each decode step) that neither the batch nor
  // tp divides: the host's work per step and, on a GPU, the kernel launches of an eager decode
  // (docs/benchmarks.md: a launch-bound decode step barely moves with the bytes read). Not an
  // efficiency: a time, fitted with the generation efficiencies (0: none).
  double gen_call_overhead_s = 0.0;
  // The KV pool's zero-fill when the train->rollout switch allocates it (kv_allocate: the pool's
  // bytes written once at the memory bandwidth × this).
  double kv_fill = 0.5;
  // Seconds per decoder layer per generation forward call that neither the batch nor tp divides:
  // the host's cost of each layer's operators (dispatch, allocation; on a GPU their launches). A
  // rank of a tp group runs every layer's operators on its shard, so tp 2 halves the bytes and
  // FLOPs but not this (0: none).
  double gen_layer_overhead_s = 0.0;
};

struct StepInputs {
  probes::DecoderShape model;
  double parameter_count = 0.0;       // weights held (0: probes::dense_parameter_count(model))
  double weight_bytes_per_param = 2;  // bf16 weights for generation and the all-gathers
  double grad_bytes_per_param = 2;    // bf16 gradients reduced
  double kv_bytes_per_element = 2;    // bf16 KV cache
  std::string dtype = "bf16";         // the hardware's peak FLOP/s for this dtype

  int prompts = 1;             // data.train_batch_size
  int samples_per_prompt = 1;  // actor_rollout_ref.rollout.n
  double prompt_length = 0;    // tokens, every prompt
  double response_length = 0;  // tokens, the mean response
  double response_length_max = 0;  // the cap (data.max_response_length); > response_length: lengths spread (response_spread)

  TrainLayout train;
  int rollout_tp = 1;                      // generation's tensor parallel size (pp_g = 1)
  int max_num_seqs = 0;                    // actor_rollout_ref.rollout.max_num_seqs: decoded at once (0: all)
  // Token slots of a replica's KV pool, which a colocated switch allocates (kv_allocate) and
  // zero-fills, each of its rollout_tp ranks its heads' share (0: not costed).
  double kv_pool_tokens = 0;
  GradSync grad_sync = GradSync::kFsdp;
  // verl's batch keys; resolve_batches() derives the three counts below from them and the layout
  // (0: keep the counts as set).
  int ppo_mini_batch_size = 0;                 // prompts per optimizer step
  int ppo_micro_batch_size_per_gpu = 0;        // sequences per forward/backward call
  int log_prob_micro_batch_size_per_gpu = 0;   // sequences per log-prob forward call (0: the whole share)
  int optimizer_steps_per_epoch = 1;       // train_batch_size / ppo_mini_batch_size
  int micro_batches_per_optimizer_step = 1;  // per rank: m of the 1F1B schedule, FSDP's gather rounds
  int ppo_epochs = 1;
  bool reference_policy = true;            // a ref log-prob pass (KL loss or KL in reward)
  FsdpGathers fsdp_gathers = FsdpGathers::kPerMicroBatch;
  int log_prob_micro_batches = 1;          // forward calls per rank in one log-prob pass (kPerMicroBatch gathers each)
  bool reference_sharded = true;           // the ref model is FSDP-sharded like the actor (verl); false: replicated
                                           // on every rank (hybridscope), its pass gathers nothing

  // The weight switch (switch_model.h): the reshard planner's plan for these layouts and mode.
  trainer::ReshardMode reshard_mode = trainer::ReshardMode::kHybrid;
  bool tie_word_embeddings = false;   // no separate LM head (the planner's parameter list)
  double switch_bytes_per_param = 2;  // bytes per element on the wire (bf16 rollout weights)

  // Memory (estimate_memory).
  double master_bytes_per_param = 4;     // fp32 master weights, and gradients in their dtype
  double optimizer_bytes_per_param = 8;  // Adam's two fp32 moments, sharded over dp
  bool gradient_checkpointing = true;    // actor_rollout_ref.model.enable_gradient_checkpointing
  bool optimizer_offload = false;        // optimizer state on the host between updates

  // Other models of the step.
  bool critic = false;        // PPO: a critic of the actor's shape (values, update_critic)
  bool reward_model = false;  // a model reward (a forward pass); false: rule-based, not costed

  // Placement: rank processes vs devices on one node. 0 takes the default: the hardware file's
  // devices_per_node, and one process per device (min(world, devices_per_node)). More processes
  // than devices share the devices (device_sharing); ranks per node also decide which groups
  // communicate inside a node.
  int devices_per_node = 0;
  int processes_per_node = 0;

  // Split placement and asynchronous modes (hybridscope.placement.rollout, hybridscope.async_mode;
  // verl's rollout pool with hybrid_engine=false, its one-step-off and fully-async trainers).
  // rollout_ranks > 0: that many more ranks only generate, each pool replica rollout_tp of them
  // with the whole model; `train` is then the actor's ranks alone, which only train, and there is
  // no train->rollout switch. 0: colocated (the hybrid engine: every rank does both).
  int rollout_ranks = 0;
  trainer::AsyncMode async_mode = trainer::AsyncMode::kSync;
  double sync_bytes_per_param = 2;        // the weight sync's bytes per parameter (bf16; hybridscope's trainer: its fp32 weights)
  double sync_bucket_bytes = 512.0 * (1 << 20);  // actor_rollout_ref.rollout.update_weights_bucket_megabytes
  int max_response_length = 0;            // the hand-over's padded rows (0: the mean response length)
  // fully_async (verl's async_training.*): weight syncs every trigger_parameter_sync_step updates;
  // staleness_threshold: the share of a sync window's samples the rollouter may generate ahead
  // with older weights (0: it waits for the sync at each window's end).
  int trigger_parameter_sync_step = 1;
  double staleness_threshold = 0.0;

  Efficiencies efficiency;
};

/// Ranks that generate: the pool's (rollout_ranks) when split, else the training layout's.
int generation_ranks(const StepInputs& inputs) noexcept;
/// Every rank of the step: the training layout's plus a split pool's.
int total_ranks(const StepInputs& inputs) noexcept;

/// Bytes one rank holds at its two peaks (estimate_memory).
struct MemoryEstimate {
  double master_weights = 0, gradients = 0, optimizer = 0;  // the actor's (and critic's) training state
  double reference_weights = 0;                              // the ref model's shard
  double compute_weights = 0;  // autocast's 16-bit casts of the weights, kept from forward to backward
  double activations = 0, logits = 0;                        // one update's in-flight micro-batches
  double training_peak = 0;    // state + reference + compute weights + activations + logits
  double generation_weights = 0;  // assembled ∪ training shard at the switch (the planner's peak)
  double kv_cache = 0;            // the replica's KV cache shard at the longest context
  double generation_peak = 0;     // master + optimizer (unless offloaded) + reference + generation + KV
  double capacity = 0;            // the device's, divided among the processes sharing it
  bool fits() const noexcept { return training_peak <= capacity && generation_peak <= capacity; }
};

/// Seconds per phase of one step (names as verl's timing_s/*: gen, old_log_prob, ref, values,
/// update_critic, update_actor, switch/train_to_rollout).
struct PhaseTimes {
  double prefill_s = 0, decode_s = 0, gen_tp_comm_s = 0;
  double gen_s = 0;  // prefill + decode + gen_tp_comm
  // fsdp parameter all-gathers inside the passes: each the collective and its copies (the shard
  // packed, the gathered buffer unflattened: (1 + 1/dp) × the unit's bytes read and written)
  double old_log_prob_gather_s = 0, ref_gather_s = 0;
  double old_log_prob_s = 0, ref_s = 0;                // compute + gathers
  double actor_compute_s = 0, actor_bubble_s = 0, actor_grad_comm_s = 0;
  double actor_model_parallel_comm_s = 0;  // megatron: tp all-reduces and pp send/recv of activations
  // Per optimizer step over dp (dp > 1): the two scalar all-reduces of hybridscope's engine (the
  // global token and sequence counts that normalise the loss, global_batch_info; the gradient
  // norm's squares with fsdp), and with fsdp the packing of every gradient into the reduce-scatter's
  // flat layout (read + write of the stage's gradients at the memory bandwidth × the copy
  // efficiency, the rate the switch's packing runs at).
  double actor_scalar_comm_s = 0, actor_grad_pack_s = 0;
  double update_actor_s = 0;  // compute + bubble + every communication and packing term above
  double reward_s = 0;        // a reward model's forward pass (0: rule-based)
  double values_s = 0, update_critic_s = 0;  // PPO's critic
  SwitchTimes weight_switch;  // train->rollout (switch_model.h)
  double kv_allocate_s = 0;   // the KV pool's allocation in that switch (colocated only)
  double switch_s = 0;        // weight_switch.train_to_rollout_s + kv_allocate_s
  // Split placement (rollout_ranks > 0; asynchronous modes). The pool generates (gen_s, verl's
  // timing_s/generate_async) and hands the batch over; the actor trains; the weights go from the
  // actor's rank 0 to the pool (sync_s, timing_s/sync_rollout_weights).
  bool split_pool = false;     // rollout_ranks > 0: the fields below are set
  double sync_pack_s = 0, sync_wire_s = 0, sync_unpack_s = 0;
  double sync_s = 0;           // one sync: pack + broadcasts + unpack
  double sync_per_step_s = 0;  // its mean per step: sync_s, ÷ trigger_parameter_sync_step in fully_async
  double handoff_s = 0;        // the batch's broadcasts from the pool to every rank
  double rollout_pipeline_s = 0;  // gen (the pool)
  double train_pipeline_s = 0;    // reward + old_log_prob + ref + values + update_critic + update_actor (the actor)
  double gen_wait_s = 0;       // what the actor's `gen` range measures: its wait for the batch
  // colocated: switch + gen + reward + old_log_prob + ref + values + update_critic + update_actor;
  // split sync: sync + gen + hand-over + train (each waits for the other);
  // one_step_off: max(gen, train) + hand-over + sync (the pool generates batch k+1 while the actor
  //   trains batch k; the hand-over and the sync are exposed: both sides take part);
  // fully_async: with staleness room for a batch (staleness_threshold · trigger ≥ 1) as
  //   one_step_off with the sync once per trigger_parameter_sync_step steps; without, a window of
  //   k = trigger steps overlaps inside only: (gen + (k−1)·max(gen, train) + train)/k + hand-over + sync/k.
  double step_s = 0;
  MemoryEstimate memory;
};

/// How response lengths spread: uniform on [lo, hi]. With no cap above the mean (response_length_max
/// <= response_length) every response is the mean (lo = hi = R); else hi = min(cap, 2R) and
/// lo = 2R − hi, so the mean stays R — an assumption (real length distributions are skewed; a
/// long tail at the cap makes decoding longer than this).
struct LengthSpread {
  double lo = 0, hi = 0;
  /// Share of the sequences still decoding at decode step `step` (0-based): P(length > step); with
  /// no spread, min(1, R − step) (a fractional mean's last step is run by that share).
  double active_fraction(double step) const noexcept;
};
LengthSpread response_spread(const StepInputs& inputs) noexcept;

/// K and V of one token over all layers: 2 · layers · kv_heads · head_dim · bytes_per_element.
double kv_bytes_per_token(const probes::DecoderShape& model, double bytes_per_element) noexcept;

/// The link level of a group of `n` ranks `stride` apart: inside a node when n·stride ranks fit.
LinkLevel link_level_for_strided_group(int n, int stride, int devices_per_node) noexcept;

/// Rank processes per device on a node, at least 1: processes_per_node / devices_per_node of
/// `inputs` (defaults resolved against `hw`). Throws SimError on a negative count.
double device_sharing(const StepInputs& inputs, const HardwareSpec& hw);

/// Rank processes on one node (inputs.processes_per_node, or one per device: min(world, devices)).
int ranks_per_node(const StepInputs& inputs, const HardwareSpec& hw);

/// Sets optimizer_steps_per_epoch = prompts / ppo_mini_batch_size, micro_batches_per_optimizer_step
/// = ceil(ppo_mini_batch_size · n / dp / ppo_micro_batch_size_per_gpu) and log_prob_micro_batches =
/// ceil(sequences / world / log_prob_micro_batch_size_per_gpu) from verl's keys where they are set
/// (> 0), for the layout in `inputs` (a projection changes the world, so they are derived again).
void resolve_batches(StepInputs& inputs);

/// Bytes per rank (every rank alike; pipeline stage 0, which holds the most in-flight micro-batches):
///   master, gradients  params · master_bytes / (tp · pp · (fsdp ? dp : 1)), each
///   optimizer          params · optimizer_bytes / (tp · pp · dp) (ZeRO-1 under megatron, ZeRO-3 under fsdp)
///   critic             PPO: the same three again
///   reference          params · weight_bytes / (tp · pp · (fsdp and reference_sharded ? dp : 1)) when
///                      there is a ref pass
///   activations        per micro-batch of t tokens and layer, bf16: 34·t·hidden/tp without
///                      checkpointing (Korthikanti et al., MLSys'23, Table 2, flash attention: no
///                      s² term), 2·t·hidden with it plus one layer's 34·t·hidden/tp recomputed;
///                      × L/pp layers × min(pp, m) micro-batches in flight (1F1B)
///   logits             t · vocab · 4 · 2 / tp: fp32 logits and their gradient (last stage)
///   compute weights    params · weight_bytes / (tp · pp) when the compute dtype is narrower than
///                      the master weights: autocast caches each weight's 16-bit cast from the
///                      forward to the backward (measured on an H200: with it the 0.5B/1.5B/3B
///                      gpu-shapes cells' peak allocated is predicted within 3 %, without it 3–9 % under)
///   generation         the switch's peak parameter bytes (the planner's assembled ∪ training shard)
///                      + the KV cache of min(b, max_num_seqs) sequences at P + R tokens / rollout tp
/// Not here: the allocator's fragmentation and the rollout engine's reserve (vLLM's
/// gpu_memory_utilization), CUDA context and NCCL buffers (~1–3 GB per GPU).
MemoryEstimate estimate_memory(const StepInputs& inputs, const HardwareSpec& hw, const SwitchTimes& weight_switch);

/// Sequences one rollout replica generates: prompts · n / (world / rollout_tp).
double sequences_per_replica(const StepInputs& inputs) noexcept;
/// Sequences it decodes at once: sequences_per_replica, at most max_num_seqs (when > 0).
double decoded_at_once(const StepInputs& inputs) noexcept;

/// The trainer's ModelShape of `inputs` (the planner's parameter list: llama_parameters).
trainer::ModelShape trainer_model_shape(const StepInputs& inputs);

/// Generation alone (simulate_step's gen phase): what the efficiency fit evaluates many times.
struct GenerationTimes {
  double prefill_s = 0, decode_s = 0, gen_tp_comm_s = 0, gen_s = 0;
};
GenerationTimes simulate_generation(const StepInputs& inputs, const CommCalibration& comm);

/// The model of one step on `comm`'s hardware with its calibrated collectives. Throws SimError
/// when the layout does not divide the world, the batch does not split over the replicas' count
/// in whole sequences, a count is not positive, or the planner refuses the layouts (its
/// LayoutError's message: e.g. an fsdp row block left empty).
PhaseTimes simulate_step(const StepInputs& inputs, const CommCalibration& comm);

}  // namespace hs::bench::sim
