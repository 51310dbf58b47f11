// step_model.cpp — one RL step's phases from first principles (formulas and sources in
// step_model.h).
#include "hybridscope/bench/sim/step_model.h"

#include <fmt/format.h>

#include <algorithm>

namespace hs::bench::sim {

double kv_bytes_per_token(const probes::DecoderShape& m, double bytes_per_element) noexcept {
  return 2.0 * m.num_hidden_layers * m.num_key_value_heads * m.head_dim * bytes_per_element;
}

LinkLevel link_level_for_strided_group(int n, int stride, int devices_per_node) noexcept {
  return n * stride <= devices_per_node ? LinkLevel::kIntraNode : LinkLevel::kInterNode;
}

int ranks_per_node(const StepInputs& in, const HardwareSpec& hw) {
  if (in.processes_per_node > 0) return in.processes_per_node;
  const int devices = in.devices_per_node > 0 ? in.devices_per_node : hw.devices_per_node;
  return std::min(in.train.world(), devices);
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
  const int world = in.train.world();
  if (world % in.rollout_tp != 0)
    throw SimError(fmt::format("step model: rollout tp {} does not divide the {} ranks of the training layout "
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

PhaseTimes simulate_step(const StepInputs& in, const CommCalibration& comm) {
  check_inputs(in);
  const HardwareSpec& hw = comm.hardware();
  const probes::DecoderShape& m = in.model;
  const double peak = hw.device.flops_per_s(in.dtype);
  const double bandwidth = hw.device.memory_bandwidth_bytes_per_s;
  const Efficiencies& eff = in.efficiency;
  const int world = in.train.world();
  const double params = in.parameter_count > 0 ? in.parameter_count : probes::dense_parameter_count(m);
  const double dense = probes::dense_parameter_count(m);
  const double attention_per_context_token = 4.0 * m.head_dim * m.num_attention_heads * m.num_hidden_layers;
  // Shared devices: a rank gets 1/share of its device's FLOP/s and bandwidth.
  const double share = device_sharing(in, hw);
  const int node_ranks = ranks_per_node(in, hw);

  PhaseTimes t;
  // Generation: each replica (rollout_tp consecutive ranks) gets b sequences.
  const double sequences = static_cast<double>(in.prompts) * in.samples_per_prompt;
  const int tp_g = in.rollout_tp;
  const double b = sequences / (world / tp_g);
  const double P = in.prompt_length, R = in.response_length;
  t.prefill_s = share * probes::forward_flops(m, b * P, b * P * P) / (tp_g * peak * eff.prefill_compute);
  const double weight_shard_bytes = params * in.weight_bytes_per_param / tp_g;
  const double kv_token_shard_bytes = kv_bytes_per_token(m, in.kv_bytes_per_element) / tp_g;
  for (int j = 0; j < static_cast<int>(R); ++j) {
    const double context = P + j;  // tokens already in the cache when step j runs
    const double bytes = weight_shard_bytes + b * context * kv_token_shard_bytes;
    const double flops = b * (2.0 * dense + attention_per_context_token * context) / tp_g;
    t.decode_s += share * std::max(bytes / (bandwidth * eff.decode_bandwidth), flops / (peak * eff.prefill_compute));
  }
  if (tp_g > 1) {
    // Two all-reduces per layer of the activations (b tokens · hidden, in the weights' dtype):
    // once for the prompts, then once per generated token.
    const LinkLevel level = link_level_for_strided_group(tp_g, 1, node_ranks);
    const double per_layer = 2.0 * m.num_hidden_layers;
    const double activation = m.hidden_size * in.weight_bytes_per_param;
    t.gen_tp_comm_s = per_layer * comm.seconds(Collective::kAllReduce, tp_g, b * P * activation, level);
    t.gen_tp_comm_s += R * per_layer * comm.seconds(Collective::kAllReduce, tp_g, b * activation, level);
  }
  t.gen_s = t.prefill_s + t.decode_s + t.gen_tp_comm_s;

  // FSDP collectives over a dp group (members tp·pp ranks apart) of the stage's parameters.
  const int dp = in.train.dp;
  const bool fsdp = in.grad_sync == GradSync::kFsdp && dp > 1;
  const double shard_params = params / (in.train.tp * in.train.pp);  // what one dp group gathers or reduces
  const LinkLevel dp_level = link_level_for_strided_group(dp, in.train.tp * in.train.pp, node_ranks);
  const double gather =
      fsdp ? comm.seconds(Collective::kAllGather, dp, shard_params * in.weight_bytes_per_param, dp_level) : 0.0;
  const bool per_micro = in.fsdp_gathers == FsdpGathers::kPerMicroBatch;

  // Log-prob passes over all sequences of S = P + R tokens, spread over every rank; with fsdp each
  // pass gathers the parameters once per forward call (kPerMicroBatch) or once (kPerOptimizerStep).
  const double S = P + R;
  const double forward = probes::forward_flops(m, sequences * S, sequences * S * S);
  const double log_prob_compute = share * forward / (world * peak * eff.forward_compute);
  t.old_log_prob_gather_s = gather * (per_micro ? in.log_prob_micro_batches : 1);
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
      t.actor_grad_comm_s = per_micro ? rounds * micro * (2.0 * gather + scatter) : rounds * (gather + scatter);
    }
  }
  t.update_actor_s = t.actor_compute_s + t.actor_bubble_s + t.actor_grad_comm_s;
  t.step_s = t.gen_s + t.old_log_prob_s + t.ref_s + t.update_actor_s;
  return t;
}

}  // namespace hs::bench::sim
