// projection.cpp — sizes, layouts and their tables (projection.h).
#include "hybridscope/bench/sim/projection.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include <nlohmann/json.hpp>

namespace hs::bench::sim {

namespace {

constexpr double kGB = 1e9;

double sequences(const StepInputs& in) { return static_cast<double>(in.prompts) * in.samples_per_prompt; }

double actor_flops(const StepInputs& in) {
  const double S = in.prompt_length + in.response_length;
  return probes::training_flops(in.model, sequences(in) * S, sequences(in) * S * S) * in.ppo_epochs;
}

std::string layout_label(const StepInputs& in) {
  const std::string train = in.grad_sync == GradSync::kFsdp
                                ? fmt::format("fsdp dp {}", in.train.dp)
                                : fmt::format("megatron tp {} pp {} dp {}", in.train.tp, in.train.pp, in.train.dp);
  if (in.rollout_ranks > 0)
    return fmt::format("{} | rollout pool {} rank{} at tp {}, {}", train, in.rollout_ranks,
                       in.rollout_ranks == 1 ? "" : "s", in.rollout_tp, trainer::to_string(in.async_mode));
  return fmt::format("{} -> rollout tp {}, {}", train, in.rollout_tp, trainer::to_string(in.reshard_mode));
}

}  // namespace

Efficiencies assumed_gpu_efficiencies() {
  Efficiencies e;
  e.prefill_compute = 0.5;
  e.decode_bandwidth = 0.6;
  e.forward_compute = 0.45;
  e.train_compute = 0.4;
  e.switch_copy = 0.5;
  return e;
}

StepInputs at_world(const StepInputs& base, int ranks, double batch_scale) {
  StepInputs in = base;
  const int model_ranks = in.train.tp * in.train.pp;
  int actor_ranks = ranks;
  if (base.rollout_ranks > 0) {
    // A split pool keeps its share of the ranks, in whole replicas, and leaves the actor at least one.
    const double share = static_cast<double>(base.rollout_ranks) / total_ranks(base);
    in.rollout_ranks = std::max(in.rollout_tp, static_cast<int>(std::lround(share * ranks / in.rollout_tp)) * in.rollout_tp);
    actor_ranks = ranks - in.rollout_ranks;
    if (actor_ranks < model_ranks)
      throw SimError(fmt::format("{} ranks leave the actor {} beside a rollout pool of {}: too few for training tp {} "
                                 "· pp {}",
                                 ranks, actor_ranks, in.rollout_ranks, in.train.tp, in.train.pp));
  }
  if (actor_ranks % model_ranks != 0)
    throw SimError(fmt::format("{} ranks do not divide into training tp {} · pp {}", actor_ranks, in.train.tp,
                               in.train.pp));
  in.train.dp = actor_ranks / model_ranks;
  if (batch_scale != 1.0) {
    in.prompts = static_cast<int>(std::lround(base.prompts * batch_scale));
    if (in.ppo_mini_batch_size > 0) in.ppo_mini_batch_size = static_cast<int>(std::lround(base.ppo_mini_batch_size * batch_scale));
  }
  resolve_batches(in);
  return in;
}

std::string memory_refusal(const MemoryEstimate& m) {
  if (m.fits()) return "";
  if (m.training_peak > m.capacity)
    return fmt::format(
        "training needs {:.1f} GB per rank > {:.1f} GB (master weights {:.1f}, gradients {:.1f}, optimizer {:.1f}, "
        "reference {:.1f}, compute weights {:.1f}, activations {:.1f}, logits {:.1f}): shard more (tp, pp, fsdp), "
        "checkpoint activations or lower ppo_micro_batch_size_per_gpu",
        m.training_peak / kGB, m.capacity / kGB, m.master_weights / kGB, m.gradients / kGB, m.optimizer / kGB,
        m.reference_weights / kGB, m.compute_weights / kGB, m.activations / kGB, m.logits / kGB);
  // The optimizer state still on the device during generation (0 when offloaded): the rest of the peak.
  const double resident_optimizer =
      m.generation_peak - m.master_weights - m.reference_weights - m.generation_weights - m.kv_cache;
  return fmt::format(
      "generation needs {:.1f} GB per rank > {:.1f} GB (master weights {:.1f}, optimizer {:.1f}, reference {:.1f}, "
      "rollout weights {:.1f}, KV cache {:.1f}): raise rollout tp, use hybrid resharding, lower max_num_seqs or "
      "offload the optimizer",
      m.generation_peak / kGB, m.capacity / kGB, m.master_weights / kGB, resident_optimizer / kGB,
      m.reference_weights / kGB, m.generation_weights / kGB, m.kv_cache / kGB);
}

Outcome try_step(const StepInputs& inputs, const CommCalibration& comm) {
  Outcome out;
  try {
    out.times = simulate_step(inputs, comm);
  } catch (const SimError& e) {
    out.refusal = e.what();
    return out;
  }
  out.refusal = memory_refusal(out.times.memory);
  out.feasible = out.refusal.empty();
  return out;
}

Projection project(const StepInputs& base, const CommCalibration& comm, const std::vector<int>& ranks) {
  Projection p;
  const double peak = comm.hardware().device.flops_per_s(base.dtype);
  const SizeProjection* first = nullptr;
  for (const int n : ranks) {
    SizeProjection s;
    s.ranks = n;
    try {
      s.inputs = at_world(base, n);
    } catch (const SimError& e) {
      s.refusal = e.what();
      p.sizes.push_back(s);
      continue;
    }
    const Outcome o = try_step(s.inputs, comm);
    s.feasible = o.feasible;
    s.refusal = o.refusal;
    s.times = o.times;
    if (s.feasible) {
      const double S = s.inputs.prompt_length + s.inputs.response_length;
      s.tokens_per_s = sequences(s.inputs) * S / s.times.step_s;
      s.tokens_per_s_per_device = s.tokens_per_s / n;
      s.mfu_actor = actor_flops(s.inputs) / (s.times.update_actor_s * n * peak);
      s.mfu_step = actor_flops(s.inputs) / (s.times.step_s * n * peak);
    }
    p.sizes.push_back(s);
  }
  for (auto& s : p.sizes) {
    if (!s.feasible) continue;
    if (!first) first = &s;
    s.strong_efficiency = first->times.step_s * first->ranks / (s.times.step_s * s.ranks);
    const double scale = static_cast<double>(s.ranks) / first->ranks;
    try {
      const Outcome weak = try_step(at_world(base, s.ranks, scale), comm);
      s.weak_feasible = weak.feasible;
      s.weak_refusal = weak.refusal;
      if (weak.feasible) {
        s.weak_step_s = weak.times.step_s;
        s.weak_efficiency = first->times.step_s / weak.times.step_s;
      }
    } catch (const SimError& e) {
      s.weak_refusal = e.what();
    }
  }
  return p;
}

std::vector<LayoutCandidate> search_layouts(const StepInputs& base, const CommCalibration& comm, int ranks,
                                            const std::function<void(int, int)>& progress) {
  if (base.rollout_ranks > 0)
    throw SimError("--search ranks colocated layouts only: split placements (hybridscope.placement.rollout) are not "
                   "searched yet; project the split layout without --search, or clear hybridscope.placement.rollout");
  const HardwareSpec& hw = comm.hardware();
  const int node = base.devices_per_node > 0 ? base.devices_per_node : hw.devices_per_node;
  const auto heads = static_cast<int>(base.model.num_attention_heads);
  const auto kv = static_cast<int>(base.model.num_key_value_heads);
  const auto layers = static_cast<int>(base.model.num_hidden_layers);
  auto splits_heads = [&](int t) { return t <= std::max(1, node) && heads % t == 0 && kv % t == 0; };

  std::vector<StepInputs> inputs;
  const trainer::ReshardMode modes[] = {trainer::ReshardMode::kHybrid, trainer::ReshardMode::kVanilla,
                                        trainer::ReshardMode::kNaive};
  for (const GradSync sync : {GradSync::kFsdp, GradSync::kDataParallel}) {
    for (const int tp : {1, 2, 4, 8}) {
      for (const int pp : {1, 2, 4, 8}) {
        if (sync == GradSync::kFsdp && (tp != 1 || pp != 1)) continue;  // verl's fsdp: no tp or pp
        if (!splits_heads(tp) || layers % pp != 0 || ranks % (tp * pp) != 0) continue;
        for (const int tg : {1, 2, 4, 8}) {
          if (!splits_heads(tg) || ranks % tg != 0) continue;
          for (const auto mode : modes) {
            StepInputs in = base;
            in.grad_sync = sync;
            in.train = {tp, pp, ranks / (tp * pp)};
            in.rollout_tp = tg;
            in.reshard_mode = mode;
            resolve_batches(in);
            inputs.push_back(in);
          }
        }
      }
    }
  }
  std::vector<LayoutCandidate> out;
  for (const auto& in : inputs) {
    LayoutCandidate c;
    c.inputs = in;
    c.label = layout_label(in);
    c.outcome = try_step(in, comm);
    out.push_back(std::move(c));
    if (progress) progress(static_cast<int>(out.size()), static_cast<int>(inputs.size()));
  }
  std::stable_sort(out.begin(), out.end(), [](const LayoutCandidate& a, const LayoutCandidate& b) {
    if (a.outcome.feasible != b.outcome.feasible) return a.outcome.feasible;
    return a.outcome.feasible && a.outcome.times.step_s < b.outcome.times.step_s;
  });
  // Why: each feasible candidate's largest phases, and what it loses against the best by phase.
  const PhaseTimes* best = out.empty() || !out.front().outcome.feasible ? nullptr : &out.front().outcome.times;
  for (auto& c : out) {
    if (!c.outcome.feasible) continue;
    const PhaseTimes& t = c.outcome.times;
    const std::pair<const char*, double> phases[] = {
        {"switch", t.switch_s},       {"gen", t.gen_s},       {"old_log_prob", t.old_log_prob_s}, {"ref", t.ref_s},
        {"values", t.values_s},       {"update_critic", t.update_critic_s}, {"update_actor", t.update_actor_s}};
    std::vector<std::pair<const char*, double>> sorted(std::begin(phases), std::end(phases));
    std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    c.why = fmt::format("{} {:.0f}%, {} {:.0f}%", sorted[0].first, 100 * sorted[0].second / t.step_s, sorted[1].first,
                        100 * sorted[1].second / t.step_s);
    if (best && &t != best) {
      const std::pair<const char*, double> deltas[] = {
          {"switch", t.switch_s - best->switch_s},
          {"gen", t.gen_s - best->gen_s},
          {"log-prob passes", t.old_log_prob_s + t.ref_s + t.values_s - best->old_log_prob_s - best->ref_s - best->values_s},
          {"updates", t.update_actor_s + t.update_critic_s - best->update_actor_s - best->update_critic_s}};
      const auto worst = *std::max_element(std::begin(deltas), std::end(deltas),
                                           [](const auto& a, const auto& b) { return a.second < b.second; });
      c.why += fmt::format("; +{:.2f} s against the best, most in {} (+{:.2f} s)", t.step_s - best->step_s,
                           worst.first, worst.second);
    }
    c.why += fmt::format("; peak {:.1f} GB", std::max(t.memory.training_peak, t.memory.generation_peak) / kGB);
  }
  return out;
}

std::vector<std::string> projection_assumptions(const StepInputs& base, const CommCalibration& comm,
                                                const std::string& efficiency_origin) {
  const HardwareSpec& hw = comm.hardware();
  std::vector<std::string> a;
  a.push_back(fmt::format("hardware {} ({}): device {} peaks are {}", hw.name, hw.source, hw.device.name,
                          basis_name(hw.device.basis)));
  if (!hw.device.rows_efficiency.empty()) {
    std::string points;
    for (const auto& [rows, share] : hw.device.rows_efficiency)
      points += fmt::format("{}{:g} rows {:.2f}", points.empty() ? "" : ", ", rows, share);
    a.push_back(fmt::format("generation's products run at the device's share of its large-product rate for their "
                            "rows (the prefill's tokens, a decode step's sequences): {}",
                            points));
  }
  for (const LinkLevel level : {LinkLevel::kIntraNode, LinkLevel::kInterNode}) {
    const LinkSpec& l = hw.link(level);
    bool fitted = false;
    for (const Collective op : {Collective::kAllReduce, Collective::kAllGather, Collective::kReduceScatter,
                                Collective::kSendRecv})
      fitted = fitted || comm.fit(op, level) != nullptr;
    a.push_back(fmt::format("{} links: {:.3g} GB/s, {:.3g} us per step ({}){}", link_level_name(level),
                            l.bandwidth_bytes_per_s / kGB, l.latency_s * 1e6, basis_name(l.basis),
                            fitted ? "; collectives fitted from measurements where measured, and read off the measured times at the group sizes measured" : "; no collective fitted"));
  }
  const Efficiencies& e = base.efficiency;
  a.push_back(fmt::format("efficiencies ({}): prefill compute {:.3g}, decode bandwidth {:.3g}, forward compute {:.3g}, "
                          "train compute {:.3g}, switch copies {:.3g}, KV fill {:.3g}; generation overhead {:.3g} ms per "
                          "forward call + {:.3g} ms per layer of one",
                          efficiency_origin, e.prefill_compute, e.decode_bandwidth, e.forward_compute, e.train_compute,
                          e.switch_copy, e.kv_fill, e.gen_call_overhead_s * 1e3, e.gen_layer_overhead_s * 1e3));
  const LengthSpread spread = response_spread(base);
  a.push_back(spread.hi > spread.lo
                  ? fmt::format("every prompt is {:.0f} tokens; responses average {:.0f} tokens, spread uniformly on "
                                "[{:.0f}, {:.0f}] (a skewed distribution with a tail at the cap makes generation slower)",
                                base.prompt_length, base.response_length, spread.lo, spread.hi)
                  : fmt::format("every prompt is {:.0f} tokens and every response {:.0f} tokens (give --response-length "
                                "below data.max_response_length for a spread of lengths)",
                                base.prompt_length, base.response_length));
  a.push_back("communication is never overlapped with compute (an upper bound); rings only, no tree or hierarchical "
              "collectives, no contention between concurrent groups");
  a.push_back(fmt::format("hybridscope's engine: FSDP gathers {}, reference model {}, the switch posts every "
                          "send and receive of a rank at once (the executor's exchange)",
                          base.fsdp_gathers == FsdpGathers::kPerMicroBatch ? "per micro-batch"
                          : base.fsdp_gathers == FsdpGathers::kPerLayer
                              ? "per decoder layer in every forward call and backward (fsdp_config.per_layer; "
                                "forward_prefetch's overlap is not modelled)"
                              : "once per pass",
                          base.reference_sharded ? "sharded like the actor" : "replicated on every rank"));
  if (base.rollout_ranks > 0)
    a.push_back(fmt::format(
        "split placement, {} ({:.0f} % of the ranks generate, each at rollout tp {}): step = {}; the weight sync is "
        "a bucketed broadcast from the actor's rank 0 with a pack and an unpack at the copy rate, the batch's "
        "hand-over one broadcast per pool rank over every rank",
        trainer::to_string(base.async_mode), 100.0 * base.rollout_ranks / total_ranks(base), base.rollout_tp,
        base.async_mode == trainer::AsyncMode::kSync ? "sync + generation + hand-over + training (each waits)"
        : base.async_mode == trainer::AsyncMode::kOneStepOff
            ? "max(generation, training) + hand-over + sync (the sync and the hand-over are exposed)"
            : fmt::format("max(generation, training) + hand-over + sync / {} (trigger_parameter_sync_step; "
                          "staleness_threshold {:.3g}{})",
                          base.trigger_parameter_sync_step, base.staleness_threshold,
                          base.staleness_threshold * base.trigger_parameter_sync_step >= 1.0
                              ? ""
                              : ": too little to generate a batch ahead, so only a sync window's steps overlap")));
  a.push_back(fmt::format("reward {}; critic {}", base.reward_model ? "a model's forward pass" : "rule-based, not costed",
                          base.critic ? "of the actor's shape and layout" : "none (GRPO)"));
  a.push_back("memory: no allocator fragmentation, rollout-engine reserve, CUDA context or NCCL buffers (~1-3 GB per "
              "GPU); the KV cache holds max_num_seqs sequences at full length (no paging or preemption)");
  return a;
}

std::string format_projection(const Projection& p, const StepInputs& base, const CommCalibration& comm) {
  std::string out = fmt::format("{} on {}: {} prompts x {} samples, {:.0f} + {:.0f} tokens, {}\n\n",
                                "step model", comm.hardware().name, base.prompts, base.samples_per_prompt,
                                base.prompt_length, base.response_length, layout_label(base));
  out += fmt::format("{:>6} {:>9} {:>7} {:>6} {:>6} {:>6} {:>7} {:>10} {:>10} {:>7} {:>7} {:>7} {:>9} {:>7}\n", "ranks",
                     "step s", "switch", "gen", "logp", "update", "mem GB", "tokens/s", "tok/s/dev", "MFU act",
                     "MFU", "strong", "weak s", "weak");
  for (const auto& s : p.sizes) {
    if (!s.feasible) {
      out += fmt::format("{:>6} refused: {}\n", s.ranks, s.refusal);
      continue;
    }
    const PhaseTimes& t = s.times;
    auto share = [&](double x) { return fmt::format("{:.0f}%", 100.0 * x / t.step_s); };
    out += fmt::format("{:>6} {:>9.3f} {:>7} {:>6} {:>6} {:>6} {:>7.3g} {:>10.4g} {:>10.4g} {:>6.1f}% {:>6.1f}% {:>6.1f}% {:>9} {:>7}\n",
                       s.ranks, t.step_s, share(t.switch_s), share(t.gen_s),
                       share(t.old_log_prob_s + t.ref_s + t.values_s + t.reward_s),
                       share(t.update_actor_s + t.update_critic_s),
                       std::max(t.memory.training_peak, t.memory.generation_peak) / kGB, s.tokens_per_s,
                       s.tokens_per_s_per_device, 100 * s.mfu_actor, 100 * s.mfu_step, 100 * s.strong_efficiency,
                       s.weak_feasible ? fmt::format("{:.3f}", s.weak_step_s) : "-",
                       s.weak_feasible ? fmt::format("{:.1f}%", 100 * s.weak_efficiency) : "-");
  }
  out += "\ncolumns: phase shares of the step (logp: old_log_prob + ref + values + reward; update: actor + critic), "
         "peak memory per rank, tokens/s (prompt + response), MFU of update_actor (verl's perf/mfu/actor) and of the "
         "step, strong-scaling efficiency (fixed batch), weak-scaling step time and efficiency (batch x N/N0)\n";
  for (const auto& s : p.sizes)
    if (s.feasible && !s.weak_feasible && !s.weak_refusal.empty())
      out += fmt::format("weak scaling at {} ranks refused: {}\n", s.ranks, s.weak_refusal);
  out += "\nassumptions:\n";
  for (const auto& a : p.assumptions) out += "  - " + a + "\n";
  return out;
}

std::string format_search(const std::vector<LayoutCandidate>& candidates, int ranks, int top) {
  int feasible = 0;
  for (const auto& c : candidates) feasible += c.outcome.feasible ? 1 : 0;
  std::string out = fmt::format("layout search on {} ranks: {} candidates, {} feasible; the best {}:\n", ranks,
                                candidates.size(), feasible, std::min(top, feasible));
  out += fmt::format("{:>3} {:<52} {:>9} {:>8} {:>8} {:>8}  {}\n", "#", "layout", "step s", "switch", "gen", "update",
                     "why");
  int shown = 0;
  for (const auto& c : candidates) {
    if (!c.outcome.feasible || shown >= top) break;
    const PhaseTimes& t = c.outcome.times;
    out += fmt::format("{:>3} {:<52} {:>9.3f} {:>8.3f} {:>8.3f} {:>8.3f}  {}\n", ++shown, c.label, t.step_s, t.switch_s,
                       t.gen_s, t.update_actor_s + t.update_critic_s, c.why);
  }
  // The refused, grouped by what refused them (the memory's reasons carry each candidate's numbers).
  std::map<std::string, std::vector<std::string>> refused;
  for (const auto& c : candidates) {
    if (c.outcome.feasible) continue;
    const std::string& r = c.outcome.refusal;
    const std::string kind = r.rfind("training needs", 0) == 0     ? "training memory does not fit"
                             : r.rfind("generation needs", 0) == 0 ? "generation memory does not fit"
                                                                   : r.substr(r.find("): ") == std::string::npos ? 0 : r.find("): ") + 3);
    refused[kind].push_back(c.label);
  }
  if (!refused.empty()) out += fmt::format("refused ({}; --json has each reason):\n", candidates.size() - feasible);
  for (const auto& [kind, labels] : refused)
    out += fmt::format("  {} x {} (e.g. {})\n", labels.size(), kind, labels.front());
  return out;
}

namespace {

nlohmann::json phases_json(const PhaseTimes& t) {
  return {{"step_s", t.step_s},
          {"switch/train_to_rollout", t.switch_s},
          {"gen", t.gen_s},
          {"reward", t.reward_s},
          {"old_log_prob", t.old_log_prob_s},
          {"ref", t.ref_s},
          {"values", t.values_s},
          {"update_critic", t.update_critic_s},
          {"update_actor", t.update_actor_s}};
}

// A split rollout pool's terms at one size (PhaseTimes; docs/simulator.md, "Split placement and
// the asynchronous modes"): the two pipelines, which of them max(G, T) takes, the hand-over and
// the sync. Only for a split placement: a colocated size has no such object (absent, not zeros).
nlohmann::json split_pool_json(const StepInputs& in, const PhaseTimes& t) {
  return {{"rollout_ranks", in.rollout_ranks},
          {"actor_ranks", total_ranks(in) - in.rollout_ranks},
          {"rollout_pipeline_s", t.rollout_pipeline_s},
          {"train_pipeline_s", t.train_pipeline_s},
          {"bound", t.rollout_pipeline_s > t.train_pipeline_s ? "rollout" : "train"},
          {"handoff_s", t.handoff_s},
          {"sync_pack_s", t.sync_pack_s},
          {"sync_wire_s", t.sync_wire_s},
          {"sync_unpack_s", t.sync_unpack_s},
          {"sync_s", t.sync_s},
          {"sync_per_step_s", t.sync_per_step_s},
          {"gen_wait_s", t.gen_wait_s}};
}

nlohmann::json memory_json(const MemoryEstimate& m) {
  return {{"master_weights", m.master_weights}, {"gradients", m.gradients},
          {"optimizer", m.optimizer},           {"reference_weights", m.reference_weights},
          {"compute_weights", m.compute_weights},
          {"activations", m.activations},       {"logits", m.logits},
          {"training_peak", m.training_peak},   {"generation_weights", m.generation_weights},
          {"kv_cache", m.kv_cache},             {"generation_peak", m.generation_peak},
          {"capacity", m.capacity}};
}

}  // namespace

std::string projection_json(const Projection& p, const StepInputs& base, const CommCalibration& comm,
                            const std::vector<LayoutCandidate>& search, int search_ranks) {
  nlohmann::json j;
  j["hardware"] = comm.hardware().name;
  j["layout"] = layout_label(base);
  j["model"] = {{"hidden_size", base.model.hidden_size},          {"intermediate_size", base.model.intermediate_size},
                {"num_hidden_layers", base.model.num_hidden_layers}, {"num_attention_heads", base.model.num_attention_heads},
                {"num_key_value_heads", base.model.num_key_value_heads}, {"vocab_size", base.model.vocab_size}};
  j["batch"] = {{"prompts", base.prompts},
                {"samples_per_prompt", base.samples_per_prompt},
                {"prompt_length", base.prompt_length},
                {"response_length", base.response_length}};
  const Efficiencies& e = base.efficiency;
  j["efficiency"] = {{"prefill_compute", e.prefill_compute}, {"decode_bandwidth", e.decode_bandwidth},
                     {"forward_compute", e.forward_compute}, {"train_compute", e.train_compute},
                     {"switch_copy", e.switch_copy}, {"kv_fill", e.kv_fill},
                     {"gen_call_overhead_s", e.gen_call_overhead_s},
                     {"gen_layer_overhead_s", e.gen_layer_overhead_s}};
  j["assumptions"] = p.assumptions;
  if (base.rollout_ranks > 0)
    j["split_pool"] = {{"rollout_ranks", base.rollout_ranks},
                       {"async_mode", trainer::to_string(base.async_mode)},
                       {"trigger_parameter_sync_step", base.trigger_parameter_sync_step},
                       {"staleness_threshold", base.staleness_threshold}};
  j["sizes"] = nlohmann::json::array();
  for (const auto& s : p.sizes) {
    nlohmann::json x = {{"ranks", s.ranks}, {"feasible", s.feasible}};
    if (!s.feasible) {
      x["refusal"] = s.refusal;
    } else {
      x["phases_s"] = phases_json(s.times);
      x["memory_bytes"] = memory_json(s.times.memory);
      if (s.times.split_pool) x["split_pool"] = split_pool_json(s.inputs, s.times);
      x["tokens_per_s"] = s.tokens_per_s;
      x["tokens_per_s_per_device"] = s.tokens_per_s_per_device;
      x["mfu_actor"] = s.mfu_actor;
      x["mfu_step"] = s.mfu_step;
      x["strong_efficiency"] = s.strong_efficiency;
      if (s.weak_feasible) {
        x["weak_step_s"] = s.weak_step_s;
        x["weak_efficiency"] = s.weak_efficiency;
      } else {
        x["weak_refusal"] = s.weak_refusal;
      }
    }
    j["sizes"].push_back(x);
  }
  j["search"] = nlohmann::json::array();
  for (const auto& c : search) {
    nlohmann::json x = {{"ranks", search_ranks}, {"layout", c.label}, {"feasible", c.outcome.feasible}};
    if (c.outcome.feasible) {
      x["phases_s"] = phases_json(c.outcome.times);
      x["memory_bytes"] = memory_json(c.outcome.times.memory);
      x["why"] = c.why;
    } else {
      x["refusal"] = c.outcome.refusal;
    }
    j["search"].push_back(x);
  }
  return j.dump(2);
}

}  // namespace hs::bench::sim
