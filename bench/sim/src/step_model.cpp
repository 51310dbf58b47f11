// step_model.cpp — one RL step's phases from first principles (formulas and sources in
// step_model.h).
#include "hybridscope/bench/sim/step_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace hs::bench::sim {

double kv_bytes_per_token(const probes::DecoderShape& m, double bytes_per_element) noexcept {
  return 2.0 * m.num_hidden_layers * m.num_key_value_heads * m.head_dim * bytes_per_element;
}

LinkLevel link_level_for_strided_group(int n, int stride, int devices_per_node) noexcept {
  return n * stride <= devices_per_node ? LinkLevel::kIntraNode : LinkLevel::kInterNode;
}

int generation_ranks(const StepInputs& in) noexcept { return in.rollout_ranks > 0 ? in.rollout_ranks : in.train.world(); }

int total_ranks(const StepInputs& in) noexcept { return in.train.world() + std::max(0, in.rollout_ranks); }

int ranks_per_node(const StepInputs& in, const HardwareSpec& hw) {
  if (in.processes_per_node > 0) return in.processes_per_node;
  const int devices = in.devices_per_node > 0 ? in.devices_per_node : hw.devices_per_node;
  return std::min(total_ranks(in), devices);
}

double device_sharing(const StepInputs& in, const HardwareSpec& hw) {
  if (in.devices_per_node < 0 || in.processes_per_node < 0)
    throw SimError(fmt::format("step model: devices_per_node {} / processes_per_node {}: must be >= 0 (0: default)",
                               in.devices_per_node, in.processes_per_node));
  const int devices = in.devices_per_node > 0 ? in.devices_per_node : hw.devices_per_node;
  if (devices <= 0) throw SimError(fmt::format("step model: {} devices per node: must be > 0", devices));
  return std::max(1.0, static_cast<double>(ranks_per_node(in, hw)) / devices);
}

namespace {

void check_inputs(const StepInputs& in) {
  auto positive = [](const char* what, double v) {
    if (!(v > 0.0)) throw SimError(fmt::format("step model: {} = {}: must be > 0", what, v));
  };
  positive("train.tp", in.train.tp);
  positive("train.pp", in.train.pp);
  positive("train.dp", in.train.dp);
  positive("rollout_tp", in.rollout_tp);
  positive("prompts", in.prompts);
  positive("samples_per_prompt", in.samples_per_prompt);
  positive("prompt_length", in.prompt_length);
  positive("response_length", in.response_length);
  positive("optimizer_steps_per_epoch", in.optimizer_steps_per_epoch);
  positive("micro_batches_per_optimizer_step", in.micro_batches_per_optimizer_step);
  positive("ppo_epochs", in.ppo_epochs);
  positive("log_prob_micro_batches", in.log_prob_micro_batches);
  positive("model.num_hidden_layers", in.model.num_hidden_layers);
  if (in.rollout_ranks < 0)
    throw SimError(fmt::format("step model: rollout_ranks = {}: must be >= 0 (0: colocated)", in.rollout_ranks));
  positive("trigger_parameter_sync_step", in.trigger_parameter_sync_step);
  if (in.rollout_ranks == 0 && in.async_mode != trainer::AsyncMode::kSync)
    throw SimError(fmt::format("step model: async_mode {} needs a split rollout pool (rollout_ranks > 0): the "
                               "colocated engine cannot generate while it trains",
                               trainer::to_string(in.async_mode)));
  const int world = generation_ranks(in);
  if (world % in.rollout_tp != 0)
    throw SimError(in.rollout_ranks > 0
                       ? fmt::format("step model: rollout tp {} does not divide the {} ranks of the rollout pool: "
                                     "pick a divisor",
                                     in.rollout_tp, world)
                       : fmt::format("step model: rollout tp {} does not divide the {} ranks of the training layout "
                                     "(tp {} · pp {} · dp {}): pick a divisor",
                                     in.rollout_tp, world, in.train.tp, in.train.pp, in.train.dp));
  const int sequences = in.prompts * in.samples_per_prompt;
  const int replicas = world / in.rollout_tp;
  if (sequences % replicas != 0)
    throw SimError(fmt::format("step model: {} sequences do not split evenly over {} rollout replicas: make "
                               "prompts · n a multiple of world / rollout_tp",
                               sequences, replicas));
}

}  // namespace

void resolve_batches(StepInputs& in) {
  const double sequences = static_cast<double>(in.prompts) * in.samples_per_prompt;
  if (in.ppo_mini_batch_size > 0) {
    const double mini = in.ppo_mini_batch_size;
    in.optimizer_steps_per_epoch = std::max(1, static_cast<int>(in.prompts / mini));
    if (in.ppo_micro_batch_size_per_gpu > 0)
      in.micro_batches_per_optimizer_step = std::max(
          1, static_cast<int>(std::ceil(mini * in.samples_per_prompt / in.train.dp / in.ppo_micro_batch_size_per_gpu)));
  }
  if (in.log_prob_micro_batch_size_per_gpu > 0)
    in.log_prob_micro_batches = std::max(
        1, static_cast<int>(std::ceil(sequences / in.train.world() / in.log_prob_micro_batch_size_per_gpu)));
}

double LengthSpread::active_fraction(double step) const noexcept {
  if (hi <= lo) return std::clamp(hi - step, 0.0, 1.0);  // all R long: a fractional R's last step partly
  if (step < lo) return 1.0;
  if (step >= hi) return 0.0;
  return (hi - step) / (hi - lo);
}

LengthSpread response_spread(const StepInputs& in) noexcept {
  const double R = in.response_length;
  if (!(in.response_length_max > R)) return {R, R};
  const double hi = std::min(in.response_length_max, 2.0 * R);
  return {2.0 * R - hi, hi};
}

double sequences_per_replica(const StepInputs& in) noexcept {
  return static_cast<double>(in.prompts) * in.samples_per_prompt / (generation_ranks(in) / in.rollout_tp);
}

double decoded_at_once(const StepInputs& in) noexcept {
  const double b = sequences_per_replica(in);
  return in.max_num_seqs > 0 ? std::min(b, static_cast<double>(in.max_num_seqs)) : b;
}

trainer::ModelShape trainer_model_shape(const StepInputs& in) {
  trainer::ModelShape s;
  s.vocab_size = static_cast<int>(in.model.vocab_size);
  s.hidden_size = static_cast<int>(in.model.hidden_size);
  s.intermediate_size = static_cast<int>(in.model.intermediate_size);
  s.num_hidden_layers = static_cast<int>(in.model.num_hidden_layers);
  s.num_attention_heads = static_cast<int>(in.model.num_attention_heads);
  s.num_key_value_heads = static_cast<int>(in.model.num_key_value_heads);
  s.tie_word_embeddings = in.tie_word_embeddings;
  return s;
}

namespace {

// The planner's byte counts for the step's layouts, or SimError with the planner's reason.
trainer::ReshardTraffic switch_traffic(const StepInputs& in) {
  const auto element = static_cast<int>(in.switch_bytes_per_param);
  const auto params = trainer::llama_parameters(trainer_model_shape(in), element);
  const trainer::MeshShape mesh{in.train.pp, in.train.tp, in.train.dp};
  const auto dp = in.grad_sync == GradSync::kFsdp ? trainer::DpSharding::kSharded : trainer::DpSharding::kReplicated;
  try {
    return trainer::reshard_traffic(params, mesh, dp, in.rollout_tp, in.reshard_mode);
  } catch (const trainer::LayoutError& e) {
    throw SimError(fmt::format("weight switch (training pp {} tp {} dp {} -> rollout tp {}, {}): {}", in.train.pp,
                               in.train.tp, in.train.dp, in.rollout_tp, trainer::to_string(in.reshard_mode), e.what()));
  }
}

}  // namespace

MemoryEstimate estimate_memory(const StepInputs& in, const HardwareSpec& hw, const SwitchTimes& sw) {
  MemoryEstimate m;
  const probes::DecoderShape& shape = in.model;
  const double params = in.parameter_count > 0 ? in.parameter_count : probes::dense_parameter_count(shape);
  const double tp = in.train.tp, pp = in.train.pp, dp = in.train.dp;
  const double state_ranks = tp * pp * (in.grad_sync == GradSync::kFsdp ? dp : 1.0);
  const double models = in.critic ? 2.0 : 1.0;
  m.master_weights = models * params * in.master_bytes_per_param / state_ranks;
  m.gradients = m.master_weights;
  m.optimizer = models * params * in.optimizer_bytes_per_param / (tp * pp * dp);
  const double reference_ranks = tp * pp * (in.grad_sync == GradSync::kFsdp && in.reference_sharded ? dp : 1.0);
  if (in.reference_policy) m.reference_weights = params * in.weight_bytes_per_param / reference_ranks;

  const double sequences = static_cast<double>(in.prompts) * in.samples_per_prompt;
  const double S = in.prompt_length + in.response_length;
  const double micro_sequences =
      sequences / in.optimizer_steps_per_epoch / dp / in.micro_batches_per_optimizer_step;
  const double t = std::max(1.0, micro_sequences) * S;  // tokens of one micro-batch
  const double h = shape.hidden_size, layers = shape.num_hidden_layers / pp;
  const double in_flight = std::min(pp, static_cast<double>(in.micro_batches_per_optimizer_step));
  const double full_layer = 34.0 * t * h / tp;
  const double per_micro = in.gradient_checkpointing ? 2.0 * t * h * layers + full_layer : full_layer * layers;
  m.activations = models * per_micro * in_flight;
  m.logits = t * shape.vocab_size * 4.0 * 2.0 / tp;
  // bf16 compute over fp32 masters: autocast keeps every weight's cast for the backward.
  if (in.weight_bytes_per_param < in.master_bytes_per_param)
    m.compute_weights = models * params * in.weight_bytes_per_param / (tp * pp);
  m.training_peak = m.master_weights + m.gradients + m.optimizer + m.reference_weights + m.compute_weights +
                    m.activations + m.logits;

  m.kv_cache = decoded_at_once(in) * S * kv_bytes_per_token(shape, in.kv_bytes_per_element) / in.rollout_tp;
  if (in.rollout_ranks > 0) {
    // A pool rank holds its replica's shard of the whole model and its KV cache, no training state.
    m.generation_weights = params * in.sync_bytes_per_param / in.rollout_tp;
    m.generation_peak = m.generation_weights + m.kv_cache;
  } else {
    m.generation_weights = static_cast<double>(sw.max_peak_parameter_bytes);
    m.generation_peak = m.master_weights + (in.optimizer_offload ? 0.0 : m.optimizer) + m.reference_weights +
                        m.generation_weights + m.kv_cache;
  }
  m.capacity = hw.device.memory_capacity_bytes / device_sharing(in, hw);
  return m;
}

GenerationTimes simulate_generation(const StepInputs& in, const CommCalibration& comm) {
  check_inputs(in);
  const HardwareSpec& hw = comm.hardware();
  const probes::DecoderShape& m = in.model;
  const double peak = hw.device.flops_per_s(in.dtype);
  const double bandwidth = hw.device.memory_bandwidth_bytes_per_s;
  const Efficiencies& eff = in.efficiency;
  const double params = in.parameter_count > 0 ? in.parameter_count : probes::dense_parameter_count(m);
  const double dense = probes::dense_parameter_count(m);
  const double attention_per_context_token = 4.0 * m.head_dim * m.num_attention_heads * m.num_hidden_layers;
  const double share = device_sharing(in, hw);
  const int node_ranks = ranks_per_node(in, hw);

  GenerationTimes t;
  // Each replica (rollout_tp consecutive ranks) gets b sequences.
  const int tp_g = in.rollout_tp;
  const double b = sequences_per_replica(in);
  const double P = in.prompt_length;
  // The prompts are prefilled once each and their n samples share the prompt's KV blocks (the
  // trainer forks them, rollout.cpp; vLLM's n > 1 does the same): b / n prompts per replica.
  const double bp = b / in.samples_per_prompt;
  // Every forward call (the prefill, each decode step) also pays the per-call overhead, and each
  // of its layers the per-layer one, which neither the batch nor tp divides (host work, kernel
  // launches, waits). Not scaled by device sharing: ranks time-sliced on one core overlap one's
  // waits with another's work (on the demo matrix, 4 ranks on 2 cores generate as fast as 2).
  const double call_overhead = eff.gen_call_overhead_s + eff.gen_layer_overhead_s * m.num_hidden_layers;
  // A product's rate depends on its input rows (hw.device.rows_share: on a CPU a decode step's few
  // dozen sequences multiply at well below the large-product rate): the prefill's rows are its
  // prompts' tokens, a decode step's its live sequences. Generation only: the log-prob and
  // training passes multiply a micro-batch's tokens (hundreds and more, past the curve's knee),
  // and the backward's weight-gradient products have those tokens as their inner dimension, not
  // their rows, which the curve (forward products) does not measure.
  t.prefill_s = share * probes::forward_flops(m, bp * P, bp * P * P) /
                    (tp_g * peak * eff.prefill_compute * hw.device.rows_share(bp * P)) +
                call_overhead;
  const double weight_shard_bytes = params * in.weight_bytes_per_param / tp_g;
  const double kv_token_shard_bytes = kv_bytes_per_token(m, in.kv_bytes_per_element) / tp_g;
  // Decoding runs at most max_num_seqs sequences at once: waves of `concurrent`, the last smaller.
  const double concurrent = decoded_at_once(in);
  const double full_waves = std::floor(b / concurrent), last_wave = b - full_waves * concurrent;
  const LinkLevel gen_level = link_level_for_strided_group(tp_g, 1, node_ranks);
  const double activation = m.hidden_size * in.weight_bytes_per_param;
  // Response lengths: all R, or (response_length_max > R) uniform on [lo, hi] with mean R and hi =
  // min(max, 2R): decoding runs until the longest ends, with fewer sequences as the others finish.
  const LengthSpread spread = response_spread(in);
  auto decode_wave = [&](double batch) {
    double s = 0;
    for (int j = 0; j < static_cast<int>(std::ceil(spread.hi)); ++j) {
      const double active = batch * spread.active_fraction(j);
      const double context = P + j;  // tokens already in the cache when step j runs
      const double bytes = weight_shard_bytes + active * context * kv_token_shard_bytes;
      const double flops = active * (2.0 * dense + attention_per_context_token * context) / tp_g;
      s += share * std::max(bytes / (bandwidth * eff.decode_bandwidth),
                            flops / (peak * eff.prefill_compute * hw.device.rows_share(active)));
      if (active > 0) s += call_overhead;
    }
    return s;
  };
  // Per forward call (the prompts', then one per generated token of each wave): two all-reduces
  // per layer of the activations (tokens · hidden, in the weights' dtype), and the vocabulary-
  // parallel head's all-gather of the next-token logits (sequences · vocab: the prompts' forward
  // returns the last position's only).
  const double per_layer = 2.0 * m.num_hidden_layers;
  const double logits_row = m.vocab_size * in.weight_bytes_per_param;
  // Each is called right after the rank's share of a layer's products: the in-situ cost where the
  // comm bench measured it (the ranks' skew included; measured among the node's ranks where other
  // groups compute beside this one: on shared cores a peer waits for the rank that shares its
  // core), else the collective's.
  auto forward_tp_comm = [&](double tokens, double sequences) {
    return per_layer * comm.seconds_in_situ(Collective::kAllReduce, tp_g, tokens * activation, gen_level, node_ranks) +
           comm.seconds_in_situ(Collective::kAllGather, tp_g, sequences * logits_row, gen_level, node_ranks);
  };
  auto wave_tp_comm = [&](double batch) {
    double s = 0;
    for (int j = 0; tp_g > 1 && j < static_cast<int>(std::ceil(spread.hi)); ++j) {
      const double active = batch * spread.active_fraction(j);
      s += forward_tp_comm(active, active);
    }
    return s;
  };
  t.decode_s = full_waves * decode_wave(concurrent) + (last_wave > 0 ? decode_wave(last_wave) : 0.0);
  if (tp_g > 1) {
    t.gen_tp_comm_s = forward_tp_comm(bp * P, bp) + full_waves * wave_tp_comm(concurrent) +
                      (last_wave > 0 ? wave_tp_comm(last_wave) : 0.0);
  }
  t.gen_s = t.prefill_s + t.decode_s + t.gen_tp_comm_s;
  return t;
}


namespace {
// A split pool's sync, hand-over and the step of its async mode (PhaseTimes' comments).
void cost_split_pool(const StepInputs& in, const CommCalibration& comm, PhaseTimes& t);
}  // namespace

PhaseTimes simulate_step(const StepInputs& in, const CommCalibration& comm) {
  check_inputs(in);
  const HardwareSpec& hw = comm.hardware();
  const probes::DecoderShape& m = in.model;
  const double peak = hw.device.flops_per_s(in.dtype);
  const double bandwidth = hw.device.memory_bandwidth_bytes_per_s;
  const Efficiencies& eff = in.efficiency;
  const int world = in.train.world();
  const double params = in.parameter_count > 0 ? in.parameter_count : probes::dense_parameter_count(m);
  // Shared devices: a rank gets 1/share of its device's FLOP/s and bandwidth.
  const double share = device_sharing(in, hw);
  const int node_ranks = ranks_per_node(in, hw);

  PhaseTimes t;
  const GenerationTimes g = simulate_generation(in, comm);
  t.prefill_s = g.prefill_s;
  t.decode_s = g.decode_s;
  t.gen_tp_comm_s = g.gen_tp_comm_s;
  t.gen_s = g.gen_s;
  const double sequences = static_cast<double>(in.prompts) * in.samples_per_prompt;
  const double P = in.prompt_length, R = in.response_length;

  // FSDP collectives over a dp group (members tp·pp ranks apart) of the stage's parameters.
  const int dp = in.train.dp;
  const bool fsdp = in.grad_sync == GradSync::kFsdp && dp > 1;
  const double shard_params = params / (in.train.tp * in.train.pp);  // what one dp group gathers or reduces
  const LinkLevel dp_level = link_level_for_strided_group(dp, in.train.tp * in.train.pp, node_ranks);
  // A gather costs the collective and its copies on the rank (zero.cpp): the rank's shard packed
  // into the flat send buffer (1/dp of the unit's bytes) and the gathered (dp, chunk) buffer
  // unflattened into the full tensors (all of them), each byte read and written once at the
  // device's memory bandwidth × the switch's copy efficiency (the same kind of copy).
  auto gather_copies = [&](double unit_params) {
    return share * 2.0 * unit_params * in.weight_bytes_per_param * (1.0 + 1.0 / dp) / (bandwidth * eff.switch_copy);
  };
  const double gather =
      fsdp ? comm.seconds(Collective::kAllGather, dp, shard_params * in.weight_bytes_per_param, dp_level) +
                 gather_copies(shard_params)
           : 0.0;
  const bool per_micro = in.fsdp_gathers == FsdpGathers::kPerMicroBatch;
  // Per-layer units (ZeroShards::wrap_layers): the root unit (embeddings, final norm, head) and
  // L decoder layers of equal size, each its own collective.
  const bool per_layer = in.fsdp_gathers == FsdpGathers::kPerLayer;
  const double root_params =
      m.vocab_size * m.hidden_size * (in.tie_word_embeddings ? 1.0 : 2.0) + m.hidden_size;  // + the final norm
  const double layer_params = std::max(0.0, shard_params - root_params) / m.num_hidden_layers;
  auto unit_gather = [&](double unit_params) {
    return fsdp ? comm.seconds(Collective::kAllGather, dp, unit_params * in.weight_bytes_per_param, dp_level) +
                      gather_copies(unit_params)
                : 0.0;
  };
  auto unit_scatter = [&](double unit_params) {
    return fsdp ? comm.seconds(Collective::kReduceScatter, dp, unit_params * in.grad_bytes_per_param, dp_level) : 0.0;
  };
  const double layers_gather = m.num_hidden_layers * unit_gather(layer_params);

  // Log-prob passes over all sequences of S = P + R tokens, spread over every rank; with fsdp each
  // pass gathers the parameters once per forward call (kPerMicroBatch) or once (kPerOptimizerStep).
  const double S = P + R;
  const double forward = probes::forward_flops(m, sequences * S, sequences * S * S);
  const double log_prob_compute = share * forward / (world * peak * eff.forward_compute);
  t.old_log_prob_gather_s = per_layer ? unit_gather(root_params) + in.log_prob_micro_batches * layers_gather
                                      : gather * (per_micro ? in.log_prob_micro_batches : 1);
  t.old_log_prob_s = log_prob_compute + t.old_log_prob_gather_s;
  if (in.reference_policy) {
    t.ref_gather_s = in.reference_sharded ? t.old_log_prob_gather_s : 0.0;
    t.ref_s = log_prob_compute + t.ref_gather_s;
  }

  // Actor update.
  const double train_flops = probes::training_flops(m, sequences * S, sequences * S * S) * in.ppo_epochs;
  t.actor_compute_s = share * train_flops / (world * peak * eff.train_compute);
  const double p = in.train.pp, micro = in.micro_batches_per_optimizer_step;
  t.actor_bubble_s = t.actor_compute_s * (p - 1.0) / micro;  // share (p−1)/(m+p−1) of compute + bubble
  if (dp > 1) {
    const double rounds = static_cast<double>(in.optimizer_steps_per_epoch) * in.ppo_epochs;
    if (in.grad_sync == GradSync::kDataParallel) {
      t.actor_grad_comm_s =
          rounds * comm.seconds(Collective::kAllReduce, dp, shard_params * in.grad_bytes_per_param, dp_level);
    } else {
      const double scatter =
          comm.seconds(Collective::kReduceScatter, dp, shard_params * in.grad_bytes_per_param, dp_level);
      if (per_layer) {
        // Per optimizer step the root unit's gather and reduce-scatter; per micro-batch every layer
        // gathered in the forward and again in the backward, and reduce-scattered once.
        const double layer_round = 2.0 * layers_gather + m.num_hidden_layers * unit_scatter(layer_params);
        t.actor_grad_comm_s = rounds * (unit_gather(root_params) + unit_scatter(root_params) + micro * layer_round);
      } else {
        t.actor_grad_comm_s = per_micro ? rounds * micro * (2.0 * gather + scatter) : rounds * (gather + scatter);
      }
    }
  }
  // Megatron's model-parallel traffic in training: per micro-batch of t tokens, two all-reduces per
  // layer of t·hidden activations forward and two backward in the tp group (consecutive ranks), and
  // the stage boundary's activations forward and their gradients backward (send/recv) between the
  // pp stages (tp ranks apart). The log-prob passes pay the forward half.
  if (in.train.tp > 1 || in.train.pp > 1) {
    const double sequences_per_dp = sequences / dp;
    const double activation_bytes = m.hidden_size * in.weight_bytes_per_param;
    const double layers_per_stage = m.num_hidden_layers / in.train.pp;
    auto model_parallel_s = [&](double tokens, double directions) {
      double s = 0;
      if (in.train.tp > 1)
        s += directions * 2.0 * layers_per_stage *
             comm.seconds(Collective::kAllReduce, in.train.tp, tokens * activation_bytes,
                          link_level_for_strided_group(in.train.tp, 1, node_ranks));
      if (in.train.pp > 1)
        s += directions * (in.train.pp - 1) *
             comm.seconds(Collective::kSendRecv, 2, tokens * activation_bytes / in.train.tp,
                          link_level_for_strided_group(2, in.train.tp, node_ranks));
      return s;
    };
    // Update: every token of the rank's share once per epoch, forward and backward.
    t.actor_model_parallel_comm_s = in.ppo_epochs * model_parallel_s(sequences_per_dp * S, 2.0);
    const double log_prob_comm = model_parallel_s(sequences_per_dp * S, 1.0);
    t.old_log_prob_s += log_prob_comm;
    if (in.reference_policy) t.ref_s += log_prob_comm;
  }
  if (dp > 1) {
    const double rounds = static_cast<double>(in.optimizer_steps_per_epoch) * in.ppo_epochs;
    const double scalar = comm.seconds(Collective::kAllReduce, dp, 16.0, dp_level);  // two float64 counts
    t.actor_scalar_comm_s = rounds * (in.grad_sync == GradSync::kFsdp ? 2.0 : 1.0) * scalar;
    if (in.grad_sync == GradSync::kFsdp)
      t.actor_grad_pack_s =
          rounds * share * 2.0 * shard_params * in.grad_bytes_per_param / (bandwidth * eff.switch_copy);
  }
  t.update_actor_s = t.actor_compute_s + t.actor_bubble_s + t.actor_grad_comm_s + t.actor_model_parallel_comm_s +
                     t.actor_scalar_comm_s + t.actor_grad_pack_s;

  // The other models: a reward model's forward, PPO's critic (the actor's shape and layout).
  if (in.reward_model) t.reward_s = log_prob_compute + t.old_log_prob_gather_s;
  if (in.critic) {
    t.values_s = t.old_log_prob_s;
    t.update_critic_s = t.update_actor_s;
  }

  t.train_pipeline_s = t.reward_s + t.old_log_prob_s + t.ref_s + t.values_s + t.update_critic_s + t.update_actor_s;
  t.rollout_pipeline_s = t.gen_s;
  if (in.rollout_ranks == 0) {
    // The weight switch: the planner's bytes, the executor's schedule.
    t.weight_switch = cost_switch(switch_traffic(in), comm, node_ranks, share, bandwidth * eff.switch_copy);
    // Then the KV pool: the rank's heads' share of every slot, zero-filled (hybrid_switch.cpp's
    // kv_allocate; PagedKvCache's zeros).
    const double pool_bytes = in.kv_pool_tokens * kv_bytes_per_token(m, in.kv_bytes_per_element) / in.rollout_tp;
    t.kv_allocate_s = share * pool_bytes / (bandwidth * eff.kv_fill);
    t.switch_s = t.weight_switch.train_to_rollout_s + t.kv_allocate_s;
    t.step_s = t.switch_s + t.gen_s + t.train_pipeline_s;
  } else {
    t.split_pool = true;
    cost_split_pool(in, comm, t);
  }
  t.memory = estimate_memory(in, hw, t.weight_switch);
  return t;
}

namespace {

void cost_split_pool(const StepInputs& in, const CommCalibration& comm, PhaseTimes& t) {
  const HardwareSpec& hw = comm.hardware();
  const double share = device_sharing(in, hw);
  const int node_ranks = ranks_per_node(in, hw);
  const double params = in.parameter_count > 0 ? in.parameter_count : probes::dense_parameter_count(in.model);
  const double copy_rate = hw.device.memory_bandwidth_bytes_per_s * in.efficiency.switch_copy;
  // The weight sync (rollout_server.h): the actor's rank 0 broadcasts the parameter version, then
  // the parameters in buckets of at most sync_bucket_bytes, to the pool (a group of pool + 1 ranks);
  // the sender packs each bucket, each receiver unpacks it: every byte read and written once at the
  // copy rate (the switch's).
  const int group = in.rollout_ranks + 1;
  const LinkLevel sync_level = link_level_for_strided_group(group, 1, node_ranks);
  const double bytes = params * in.sync_bytes_per_param;
  const double bucket = in.sync_bucket_bytes > 0 ? in.sync_bucket_bytes : bytes;
  const double full = std::floor(bytes / bucket), rest = bytes - full * bucket;
  t.sync_wire_s = comm.seconds(Collective::kBroadcast, group, 8.0, sync_level) +
                  full * comm.seconds(Collective::kBroadcast, group, bucket, sync_level) +
                  (rest > 0 ? comm.seconds(Collective::kBroadcast, group, rest, sync_level) : 0.0);
  t.sync_pack_s = share * 2.0 * bytes / copy_rate;
  t.sync_unpack_s = t.sync_pack_s;
  t.sync_s = t.sync_pack_s + t.sync_wire_s + t.sync_unpack_s;
  const bool fully_async = in.async_mode == trainer::AsyncMode::kFullyAsync;
  const double k = fully_async ? in.trigger_parameter_sync_step : 1.0;
  t.sync_per_step_s = t.sync_s / k;
  // The hand-over (rollout_server.cpp, hand_over): per pool rank, over every rank, a 16-byte header
  // and its share's rows, float32 (1 + 2 · max_response_length) per sequence.
  const int world = total_ranks(in);
  const LinkLevel world_level = link_level_for_strided_group(world, 1, node_ranks);
  const double length = in.max_response_length > 0 ? in.max_response_length : std::ceil(in.response_length);
  const double rows = static_cast<double>(in.prompts) * in.samples_per_prompt / in.rollout_ranks;
  t.handoff_s = in.rollout_ranks * (comm.seconds(Collective::kBroadcast, world, 16.0, world_level) +
                                    comm.seconds(Collective::kBroadcast, world, rows * (1.0 + 2.0 * length) * 4.0,
                                                 world_level));
  const double gen = t.rollout_pipeline_s, train = t.train_pipeline_s;
  switch (in.async_mode) {
    case trainer::AsyncMode::kSync:
      t.gen_wait_s = gen + t.handoff_s;
      t.step_s = t.sync_s + gen + t.handoff_s + train;
      break;
    case trainer::AsyncMode::kOneStepOff:
      t.gen_wait_s = std::max(0.0, gen - train) + t.handoff_s;
      t.step_s = std::max(gen, train) + t.handoff_s + t.sync_s;
      break;
    case trainer::AsyncMode::kFullyAsync:
      if (in.staleness_threshold * k >= 1.0) {  // room to generate a batch ahead across a sync
        t.gen_wait_s = std::max(0.0, gen - train) + t.handoff_s;
        t.step_s = std::max(gen, train) + t.handoff_s + t.sync_per_step_s;
      } else {  // a window of k steps overlaps inside only
        const double window = gen + (k - 1.0) * std::max(gen, train) + train;
        t.step_s = window / k + t.handoff_s + t.sync_per_step_s;
        t.gen_wait_s = t.step_s - train - t.sync_per_step_s;
      }
      break;
  }
}

}  // namespace

}  // namespace hs::bench::sim
