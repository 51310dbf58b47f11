// diagnosis_rules.cpp — the diagnosis rules, one function each, and their table.
//
// A rule reads a RunAnalysis (never the database), and when its condition holds returns one
// finding: a title, the evidence (numbers with the step range, and the rank or step to blame), a
// suggestion naming config keys with their current values and saying why, and its impact — the
// share of the step at stake, which orders findings of equal severity. Every key a rule names is a
// key of trainer/src/config/config_keys.cpp (the test checks it against that file). What each rule
// checks and why: docs/diagnosis.md. The advice follows verl's performance tuning guide
// (docs/perf/perf_tuning.rst) and HybridFlow §5 for the switch.
//
// Adding a rule: one function here, one entry in diagnosis_rules(), one fixture pair in
// tests/reports/diagnosis_test.cpp, one section in docs/diagnosis.md.

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "diagnosis_rules_rl.h"
#include "diagnosis_text.h"
#include "hybridscope/reports/diagnosis.h"
#include "hybridscope/reports/role_idle.h"
#include "hybridscope/trainer/config_values.h"

namespace hs::reports {
namespace {

using detail::format_bytes;
using detail::format_percent;
using detail::format_seconds;
using detail::format_steps;
using detail::key_now;
using detail::name_keys;
using detail::ranks_text;
using detail::severity_for;

// The config keys the rules name (all in trainer/src/config/config_keys.cpp).
constexpr const char* kTrainBatchSize = "data.train_batch_size";
constexpr const char* kMaxResponseLength = "data.max_response_length";
constexpr const char* kRolloutN = "actor_rollout_ref.rollout.n";
constexpr const char* kRolloutTp = "actor_rollout_ref.rollout.tensor_model_parallel_size";
constexpr const char* kGpuMemoryUtilization = "actor_rollout_ref.rollout.gpu_memory_utilization";
constexpr const char* kMaxNumSeqs = "actor_rollout_ref.rollout.max_num_seqs";
constexpr const char* kFreeCacheEngine = "actor_rollout_ref.rollout.free_cache_engine";
constexpr const char* kExpandableSegments = "hybridscope.expandable_segments";
constexpr const char* kKvNumBlocks = "hybridscope.kv_num_blocks";
constexpr const char* kReshardMode = "hybridscope.reshard.mode";
constexpr const char* kActorStrategy = "actor_rollout_ref.actor.strategy";
constexpr const char* kActorTp = "actor_rollout_ref.actor.megatron.tensor_model_parallel_size";
constexpr const char* kMiniBatch = "actor_rollout_ref.actor.ppo_mini_batch_size";
constexpr const char* kMicroBatch = "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu";
constexpr const char* kDynamicBsz = "actor_rollout_ref.actor.use_dynamic_bsz";
constexpr const char* kMaxTokenLen = "actor_rollout_ref.actor.ppo_max_token_len_per_gpu";
constexpr const char* kParamOffload = "actor_rollout_ref.actor.fsdp_config.param_offload";
constexpr const char* kOptimizerOffload = "actor_rollout_ref.actor.fsdp_config.optimizer_offload";
constexpr const char* kPerLayer = "actor_rollout_ref.actor.fsdp_config.per_layer";
constexpr const char* kForwardPrefetch = "actor_rollout_ref.actor.fsdp_config.forward_prefetch";
constexpr const char* kShmBytes = "hybridscope.dist.shm_bytes";
constexpr const char* kGradientCheckpointing = "actor_rollout_ref.model.enable_gradient_checkpointing";
constexpr const char* kBalanceBatch = "trainer.balance_batch";
constexpr const char* kPrecision = "hybridscope.precision";
constexpr const char* kDevice = "trainer.device";

using trainer::ActorStrategy;
using trainer::DeviceKind;
using trainer::Precision;
using trainer::ReshardMode;

// The value of an enum key the run recorded, read with the trainer's spellings (config_values.h);
// nullopt when the key is absent or its text is no spelling of E (an imported run's own words).
template <class E>
std::optional<E> config_enum(const RunData& data, const char* key) {
  const auto text = data.config_value(key);
  return text ? trainer::recorded_config_value<E>(*text) : std::nullopt;
}

constexpr const char* kGen = "gen";
constexpr const char* kTrainToRollout = "switch/train_to_rollout";
constexpr const char* kRolloutToTrain = "switch/rollout_to_train";

double phase_share(const PhaseBreakdown& phases, const std::string& phase) {
  const auto it = phases.share.find(phase);
  return it == phases.share.end() ? 0.0 : it->second;
}

double phase_mean_s(const PhaseBreakdown& phases, const std::string& phase) {
  const auto it = phases.mean_phase_s.find(phase);
  return it == phases.mean_phase_s.end() ? 0.0 : it->second;
}

bool is_measured(const RunAnalysis& a, std::int64_t step) {
  return std::find(a.measured.begin(), a.measured.end(), step) != a.measured.end();
}

Finding start_finding(const char* rule, Severity severity, double impact) {
  Finding f;
  f.rule = rule;
  f.severity = severity;
  f.impact = impact;
  return f;
}

// "5.12 s of the 8.00 s mean step over steps 2–10" — the step context every time share quotes.
std::string of_the_step(const RunAnalysis& a, double seconds) {
  return fmt::format("{} of the {} mean step over {}", format_seconds(seconds),
                     format_seconds(a.phases.mean_step_s), format_steps(a.measured));
}

// ---------------------------------------------------------------------------------------------
// 1. rollout-dominates: generation's share of the step above thresholds.rollout_share.
std::optional<Finding> rollout_dominates(const RunAnalysis& a, const DiagnosisThresholds& t) {
  const double share = phase_share(a.phases, kGen);
  if (!(share > t.rollout_share)) return std::nullopt;
  Finding f = start_finding("rollout-dominates", severity_for(share, t), share);
  f.range = kGen;
  f.title = fmt::format("generation takes {} of the step", format_percent(share));
  f.evidence = fmt::format("gen: {} ({}, each phase its slowest rank's)", of_the_step(a, phase_mean_s(a.phases, kGen)),
                           format_percent(share));
  // The measured step where generation's share was largest.
  const StepPhases* worst = nullptr;
  double worst_share = 0.0;
  for (const StepPhases& s : a.phases.steps) {
    const auto gen = s.phase_s.find(kGen);
    if (!is_measured(a, s.step) || gen == s.phase_s.end() || s.step_s <= 0.0) continue;
    if (worst == nullptr || gen->second / s.step_s > worst_share) {
      worst = &s;
      worst_share = gen->second / s.step_s;
    }
  }
  if (worst != nullptr) {
    f.step = worst->step;
    f.evidence += fmt::format("; largest at step {}: {} of {} ({})", worst->step,
                              format_seconds(worst->phase_s.at(kGen)), format_seconds(worst->step_s),
                              format_percent(worst_share));
  }
  if (a.response_length) f.evidence += fmt::format("; mean response {:.0f} tokens", *a.response_length);
  if (a.rollout_batch) f.evidence += fmt::format("; {:.0f} sequences generated per step", *a.rollout_batch);
  const auto& d = a.data;
  // A smaller rollout tp only helps when there is one to shrink.
  const bool tp_can_shrink = d.config_number(kRolloutTp).value_or(1.0) > 1.0;
  f.suggestion = "Shorten or widen generation: ";
  if (tp_can_shrink)
    f.suggestion += fmt::format("a smaller {} gives more rollout replicas decoding in parallel when the weights fit "
                                "(verl's tuning guide); ",
                                key_now(d, kRolloutTp));
  f.suggestion += fmt::format(
      "a larger {} gives the KV pool room for more sequences at once; {} caps the longest responses, which set "
      "the length of every decode loop; fewer samples per prompt, a smaller {}, shorten generation at the price "
      "of a noisier group baseline.",
      key_now(d, kGpuMemoryUtilization), key_now(d, kMaxResponseLength), key_now(d, kRolloutN));
  name_keys(f, d, {kRolloutTp, kGpuMemoryUtilization, kMaxResponseLength, kRolloutN});
  return f;
}

// ---------------------------------------------------------------------------------------------
// 2. decode-memory-bound: generation matters and it decodes few sequences at once.
std::optional<Finding> decode_memory_bound(const RunAnalysis& a, const DiagnosisThresholds& t) {
  const double share = phase_share(a.phases, kGen);
  if (!(share > t.memory_bound_gen_share)) return std::nullopt;
  const auto& d = a.data;
  // Sequences per generation = prompts per step × responses per prompt, unless the analysis counted them.
  std::optional<double> from_config;
  if (const auto prompts = d.config_number(kTrainBatchSize), n = d.config_number(kRolloutN); prompts && n)
    from_config = *prompts * *n;
  const std::optional<double> batch = a.rollout_batch ? a.rollout_batch : from_config;
  if (!batch || !(*batch < t.small_rollout_batch)) return std::nullopt;
  Finding f = start_finding("decode-memory-bound", severity_for(share, t), share);
  f.range = kGen;
  f.title = fmt::format("decode is memory-bound: {:.0f} sequences per generation for {} of the step", *batch,
                        format_percent(share));
  f.evidence = fmt::format("{:.0f} sequences per generation (below {:.0f})", *batch, t.small_rollout_batch);
  if (from_config && *from_config == *batch)
    f.evidence += fmt::format(" = {} {} × {} {}", kTrainBatchSize, *d.config_value(kTrainBatchSize), kRolloutN,
                              *d.config_value(kRolloutN));
  // The ranks that generate: a split rollout pool's (hybridscope.placement.rollout), else every rank.
  const std::vector<int> pool = split_rollout_ranks(d);
  const double generating = pool.empty() ? static_cast<double>(d.run.world_size) : static_cast<double>(pool.size());
  const auto tp = d.config_number(kRolloutTp);
  if (tp && *tp >= 1.0 && generating >= *tp) {
    const double replicas = std::floor(generating / *tp);
    f.evidence += fmt::format(", over {:.0f} rollout replica(s) of tp {:.0f}{}: {:.1f} per decode batch", replicas,
                              *tp, pool.empty() ? "" : fmt::format(" on the rollout pool {}", ranks_text(pool)),
                              *batch / replicas);
  }
  f.evidence += fmt::format("; gen: {} ({})", of_the_step(a, phase_mean_s(a.phases, kGen)), format_percent(share));
  f.suggestion = fmt::format(
      "Decode more sequences at once: raise {} or {}, or give each replica a larger share with a larger {} "
      "(which also splits every weight read over more devices). A decode step reads every weight once for the "
      "whole batch, so at a few sequences its time is set by memory bandwidth, not FLOPs, and extra sequences "
      "cost almost nothing per token.",
      key_now(d, kRolloutN), key_now(d, kTrainBatchSize), key_now(d, kRolloutTp));
  name_keys(f, d, {kRolloutN, kTrainBatchSize, kRolloutTp});
  return f;
}

// ---------------------------------------------------------------------------------------------
// 3. switch-slow: the weight switch's share of the step, or a direction far above its wire bound.
std::optional<Finding> switch_slow(const RunAnalysis& a, const DiagnosisThresholds& t) {
  const double share = phase_share(a.phases, kTrainToRollout) + phase_share(a.phases, kRolloutToTrain);
  const SwitchDirectionSummary* worst = nullptr;  // the direction furthest above its bound
  for (const SwitchDirectionSummary& dir : a.switches.directions) {
    if (dir.over_bound && (worst == nullptr || *dir.over_bound > *worst->over_bound)) worst = &dir;
  }
  const bool over_bound = worst != nullptr && *worst->over_bound > t.switch_over_bound;
  if (!(share > t.switch_share) && !over_bound) return std::nullopt;
  Finding f = start_finding("switch-slow", severity_for(share, t), share);
  f.title = share > t.switch_share
                ? fmt::format("the weight switch takes {} of the step", format_percent(share))
                : fmt::format("the weight switch ({}) takes {:.1f}× its wire bound", worst->direction, *worst->over_bound);
  std::vector<std::string> parts;
  if (!a.switches.headline.empty()) parts.push_back(a.switches.headline);
  parts.push_back(fmt::format("both directions: {} ({})",
                              of_the_step(a, phase_mean_s(a.phases, kTrainToRollout) + phase_mean_s(a.phases, kRolloutToTrain)),
                              format_percent(share)));
  for (const SwitchDirectionSummary& dir : a.switches.directions) {
    std::string text = fmt::format("{}: median {} over {} switch(es) (max {}), {} to the busiest receiver",
                                   dir.direction, format_seconds(dir.median_s), dir.switches, format_seconds(dir.max_s),
                                   format_bytes(dir.median_max_bytes_received));
    if (dir.wire_bound_s && dir.over_bound)
      text += fmt::format(", wire bound {} ({:.1f}× it)", format_seconds(*dir.wire_bound_s), *dir.over_bound);
    if (!dir.components_s.empty()) {
      text += "; components:";
      for (std::size_t i = 0; i < dir.components_s.size(); ++i)
        text += fmt::format("{} {} {}", i == 0 ? "" : ",", dir.components_s[i].first, format_seconds(dir.components_s[i].second));
      text += fmt::format(", unaccounted {}", format_seconds(dir.unaccounted_s));
    }
    parts.push_back(text);
  }
  if (a.switches.bandwidth_gbps)
    parts.push_back(fmt::format("bandwidth {:.2f} GB/s from {}", *a.switches.bandwidth_gbps, a.switches.bandwidth_source));
  const SwitchEvent* slowest = nullptr;
  for (const SwitchEvent& e : a.switches.events)
    if (slowest == nullptr || e.seconds > slowest->seconds) slowest = &e;
  if (slowest != nullptr) {
    f.step = slowest->step;
    f.rank = slowest->slowest_rank;
    f.range = "switch/" + slowest->direction;
    parts.push_back(fmt::format("slowest: step {} {} {} on rank {}", slowest->step, slowest->direction,
                                format_seconds(slowest->seconds), slowest->slowest_rank));
  }
  for (std::size_t i = 0; i < parts.size(); ++i) f.evidence += (i == 0 ? "" : "; ") + parts[i];

  const auto& d = a.data;
  const std::string mode_advice =
      config_enum<ReshardMode>(d, kReshardMode) == ReshardMode::kHybrid
          ? fmt::format("{} is already hybrid, so the bytes moved are the minimum for these layouts", key_now(d, kReshardMode))
          : fmt::format("set {} to hybrid: each rank then receives only its generation shard instead of gathering "
                        "whole tensors (HybridFlow §5, Table 2)",
                        key_now(d, kReshardMode));
  // Equal tp in both layouts moves only data-parallel shards; advise it only when they differ.
  const bool tp_differs = d.config_number(kRolloutTp).value_or(1.0) != d.config_number(kActorTp).value_or(1.0);
  f.suggestion = mode_advice;
  if (tp_differs)
    f.suggestion += fmt::format("; setting {} equal to {} leaves the tensor-parallel split unchanged, so only "
                                "data-parallel shards move",
                                key_now(d, kRolloutTp), key_now(d, kActorTp));
  f.suggestion += ". Time far above the wire bound is packing, copying and waiting, not bandwidth: the components "
                  "above say which.";
  if (tp_differs)
    name_keys(f, d, {kReshardMode, kRolloutTp, kActorTp});
  else
    name_keys(f, d, {kReshardMode});
  return f;
}

double exposed_share(const CommComputeOverlap& overlap, std::int64_t window_ns) {
  return static_cast<double>(overlap.exposed_comm_ns) / static_cast<double>(window_ns);
}

// What kind of traffic a process group carries (trainer: dist/mesh_groups.cpp, dist/topology.cpp,
// hybrid/reshard_executor.cpp), so comm-exposed names the keys that change that traffic.
std::string comm_group_kind(const std::string& group) {
  if (group == "dp" || group == "micro_dp" || group == "fsdp" || group == "world" || group == "pp") return "training";
  if (group == "tp") return "tensor";
  if (group.rfind("rollout", 0) == 0) return "rollout";
  if (group.rfind("reshard", 0) == 0) return "reshard";
  return "other";
}

// The training collectives (fsdp gathers and reduce-scatters, the gradient all-reduce).
std::string training_comm_advice(const RunAnalysis& a, Finding& f) {
  const auto& d = a.data;
  // The overlap credits asynchronous collectives (fsdp's per-layer gathers and reduce-scatters
  // with forward_prefetch), so an fsdp run without prefetch is told to turn it on; a run before
  // these keys existed (absent from its config) is not.
  const bool fsdp = config_enum<ActorStrategy>(d, kActorStrategy) == ActorStrategy::kFsdp;
  // On one host (trainer.nnodes 1) of CPU ranks with hybridscope.dist.shm_bytes > 0 (the default
  // since it exists) the gathers and reduce-scatters run through shared memory when they are
  // posted: prefetch moves them earlier but hides none of them (docs/config.md). Said instead of
  // advising it.
  const auto shm = d.config_value(kShmBytes);
  const bool through_shm = fsdp && shm && *shm != "0" && d.config_value("trainer.nnodes") == "1" &&
                           d.config_value("trainer.device") == "cpu";
  const bool can_prefetch =
      fsdp && !through_shm && d.config_value(kForwardPrefetch) == "false" && d.config_value(kPerLayer).has_value();
  std::string out;
  if (through_shm)
    out += fmt::format(
        "these ranks share one host and {} moves their fsdp gathers and reduce-scatters through shared memory as "
        "they are posted, so {} would not hide them (it does over Gloo's threads, {}=0, or NCCL); ",
        key_now(d, kShmBytes), kForwardPrefetch, kShmBytes);
  if (can_prefetch)
    out += fmt::format(
        "{} with {} issues each layer's all-gather before the layer runs and waits for its gradient "
        "reduce-scatter only after the previous layer's backward, so the actor's fsdp collectives run under "
        "compute (the overlap ratio above credits them); ",
        key_now(d, kPerLayer), key_now(d, kForwardPrefetch));
  else if (fsdp && d.config_value(kForwardPrefetch) == "true")
    out += "Forward prefetch is on: the time still exposed is the waits for gathers and reduce-scatters that "
           "compute did not cover, and the synchronous collectives; ";
  out += fmt::format(
      "a larger {} means fewer optimizer updates per step (and, with the whole model as one fsdp unit, fewer "
      "whole-model gathers and reduce-scatters); a larger {} sends the same bytes in fewer, larger messages; {} "
      "chooses between sharded (fsdp) and replicated (megatron) parameters.",
      key_now(d, kMiniBatch), key_now(d, kMicroBatch), key_now(d, kActorStrategy));
  if (through_shm) name_keys(f, d, {kShmBytes});
  if (can_prefetch) name_keys(f, d, {kPerLayer, kForwardPrefetch});
  name_keys(f, d, {kMiniBatch, kMicroBatch, kActorStrategy});
  return out;
}

// The training layout's tensor-parallel all-reduces.
std::string tensor_comm_advice(const RunAnalysis& a, Finding& f) {
  const auto& d = a.data;
  name_keys(f, d, {kActorTp});
  return fmt::format("every tensor-parallel layer all-reduces its activations in forward and backward; a smaller "
                     "{} removes them when the model fits on fewer devices.",
                     key_now(d, kActorTp));
}

// The rollout layout's groups: tensor-parallel all-reduces at every decode step, gathers of results.
std::string rollout_comm_advice(const RunAnalysis& a, Finding& f) {
  const auto& d = a.data;
  name_keys(f, d, {kRolloutTp, kRolloutN});
  return fmt::format("generation all-reduces every tensor-parallel layer at every decode step, for a few "
                     "sequences' worth of compute; a smaller {} gives more replicas that do not talk while "
                     "decoding, and a larger {} gives each all-reduce more sequences to cover.",
                     key_now(d, kRolloutTp), key_now(d, kRolloutN));
}

// The switch's weight exchange.
std::string reshard_comm_advice(const RunAnalysis& a, Finding& f) {
  const auto& d = a.data;
  if (config_enum<ReshardMode>(d, kReshardMode) == ReshardMode::kHybrid) {
    name_keys(f, d, {kRolloutTp, kActorTp});
    return fmt::format("the switch's weight exchange; {} already moves the fewest bytes for these layouts, and "
                       "setting {} equal to {} leaves the tensor-parallel split unchanged, so only data-parallel "
                       "shards move.",
                       key_now(d, kReshardMode), key_now(d, kRolloutTp), key_now(d, kActorTp));
  }
  name_keys(f, d, {kReshardMode});
  return fmt::format("the switch's weight exchange; set {} to hybrid so each rank receives only its generation "
                     "shard (HybridFlow §5).",
                     key_now(d, kReshardMode));
}

// ---------------------------------------------------------------------------------------------
// 4. comm-exposed: a rank's communication is a large share of its window and little of it hides
// under compute (HTA's overlap ratio).
std::optional<Finding> comm_exposed(const RunAnalysis& a, const DiagnosisThresholds& t) {
  const CommComputeOverlap* worst = nullptr;
  std::int64_t worst_window = 0;
  int ranks_above = 0;
  for (const CommComputeOverlap& ov : a.temporal.overlap) {
    const auto bd = std::find_if(a.temporal.breakdown.begin(), a.temporal.breakdown.end(),
                                 [&](const TemporalBreakdown& b) { return b.rank == ov.rank; });
    if (bd == a.temporal.breakdown.end() || bd->window_ns <= 0) continue;
    const double comm_share = static_cast<double>(ov.comm_ns) / static_cast<double>(bd->window_ns);
    const bool hidden = ov.overlap_ratio && *ov.overlap_ratio >= t.comm_overlap;
    if (!(comm_share > t.comm_share) || hidden) continue;
    ++ranks_above;
    if (worst == nullptr || exposed_share(ov, bd->window_ns) > exposed_share(*worst, worst_window)) {
      worst = &ov;
      worst_window = bd->window_ns;
    }
  }
  if (worst == nullptr) return std::nullopt;
  const double window_s = static_cast<double>(worst_window) * 1e-9;
  const double exposed = exposed_share(*worst, worst_window);
  Finding f = start_finding("comm-exposed", severity_for(exposed, t), exposed);
  f.rank = worst->rank;
  f.title = fmt::format("communication is exposed: {} of rank {}'s time, not hidden under compute",
                        format_percent(exposed), worst->rank);
  f.evidence = fmt::format(
      "rank {} over {}: communication {} of its {} window ({}), overlap ratio {}, so {} exposed ({} of the window)",
      worst->rank, format_steps(a.measured), format_seconds(static_cast<double>(worst->comm_ns) * 1e-9),
      format_seconds(window_s), format_percent(static_cast<double>(worst->comm_ns) * 1e-9 / window_s),
      worst->overlap_ratio ? fmt::format("{:.2f}", *worst->overlap_ratio) : std::string("none"),
      format_seconds(static_cast<double>(worst->exposed_comm_ns) * 1e-9), format_percent(exposed));
  if (ranks_above > 1) f.evidence += fmt::format("; {} ranks above {}", ranks_above, format_percent(t.comm_share));
  // Which process groups the exposed time is on: each group has its own keys (run 29 of the demo:
  // dp 1.62 s, rollout_tp 0.91 s, reshard 0.20 s — training advice alone missed half of it).
  std::vector<std::pair<std::string, std::int64_t>> groups(worst->exposed_by_group_ns.begin(),
                                                           worst->exposed_by_group_ns.end());
  std::stable_sort(groups.begin(), groups.end(), [](const auto& x, const auto& y) { return x.second > y.second; });
  if (!groups.empty()) {
    f.evidence += fmt::format("; exposed by process group on rank {}:", worst->rank);
    for (std::size_t i = 0; i < groups.size(); ++i)
      f.evidence += fmt::format("{} {} {}", i == 0 ? "" : ",", groups[i].first,
                                format_seconds(static_cast<double>(groups[i].second) * 1e-9));
    if (groups.size() > 1) f.evidence += " (time two groups share counts in each)";
  }
  if (worst->role_wait_ns > 0) {
    // A split rollout pool: what the rank waited for the other role in their collectives is idle.
    f.evidence += fmt::format("; left out of communication: {} rank {} waited for the other role in collectives "
                              "with it (",
                              format_seconds(static_cast<double>(worst->role_wait_ns) * 1e-9), worst->rank);
    bool first = true;
    for (const auto& [group, ns] : worst->role_wait_by_group_ns) {
      f.evidence += fmt::format("{}{} {}", first ? "" : ", ", group, format_seconds(static_cast<double>(ns) * 1e-9));
      first = false;
    }
    f.evidence += "), that role's idle, not transfer";
  }
  if (!a.temporal.note.empty()) f.evidence += "; " + a.temporal.note;
  f.suggestion = "Exposed communication is time the step's thread spends waiting for collectives. ";
  if (groups.empty()) {
    // Kernel records name no group: the training collectives are the usual suspects. The advice
    // opens a sentence here ("a larger ..." follows a group's name elsewhere; a config key keeps
    // its case).
    std::string advice = training_comm_advice(a, f);
    if (advice.rfind("a ", 0) == 0) advice[0] = 'A';
    f.suggestion += advice;
    if (a.data.config_number(kActorTp).value_or(1.0) > 1.0) f.suggestion += " " + tensor_comm_advice(a, f);
    return f;
  }
  std::set<std::string> advised;  // one piece of advice per kind of group
  for (const auto& [group, ns] : groups) {
    const std::string kind = comm_group_kind(group);
    if (!advised.insert(kind).second) continue;
    const std::string head = fmt::format("{} ({} exposed): ", group, format_seconds(static_cast<double>(ns) * 1e-9));
    if (kind == "training") f.suggestion += head + training_comm_advice(a, f) + " ";
    else if (kind == "tensor") f.suggestion += head + tensor_comm_advice(a, f) + " ";
    else if (kind == "rollout") f.suggestion += head + rollout_comm_advice(a, f) + " ";
    else if (kind == "reshard") f.suggestion += head + reshard_comm_advice(a, f) + " ";
    else f.suggestion += head + "no configuration key of hybridscope's sets this group's traffic. ";
  }
  while (!f.suggestion.empty() && f.suggestion.back() == ' ') f.suggestion.pop_back();
  return f;
}

// ---------------------------------------------------------------------------------------------
// 5. fragmentation: allocated/reserved low, allocation retries, or OOMs (profiling-facts, "PyTorch
// CUDA caching allocator"). Memory costs no step time until it retries or fails: impact is 1 for
// an OOM (the step is lost), 0 otherwise.
std::optional<Finding> fragmentation(const RunAnalysis& a, const DiagnosisThresholds& t) {
  const MemoryAnalysis& m = a.memory;
  const bool low_ratio = m.min_allocated_over_reserved && *m.min_allocated_over_reserved < t.allocated_over_reserved;
  if (!low_ratio && m.alloc_retries <= 0 && m.ooms <= 0) return std::nullopt;
  Finding f = m.ooms > 0 ? start_finding("fragmentation", Severity::kCritical, 1.0)
                         : start_finding("fragmentation", Severity::kWarning, 0.0);
  if (m.ooms > 0)
    f.title = fmt::format("{} out-of-memory error(s) in the caching allocator", m.ooms);
  else if (m.alloc_retries > 0)
    f.title = fmt::format("the caching allocator retried {} allocation(s) after freeing its cache", m.alloc_retries);
  else
    f.title = fmt::format("allocated/reserved fell to {:.2f}: memory is fragmenting", *m.min_allocated_over_reserved);
  std::vector<std::string> parts;
  if (m.min_allocated_over_reserved) {
    std::string text = fmt::format("allocated/reserved as low as {:.2f} (below {:.2f})", *m.min_allocated_over_reserved,
                                   t.allocated_over_reserved);
    // The rank and phase where it is worst.
    const MemoryPhasePeak* worst = nullptr;
    for (const MemoryPhasePeak& p : m.phases)
      if (p.min_allocated_over_reserved &&
          (worst == nullptr || *p.min_allocated_over_reserved < *worst->min_allocated_over_reserved))
        worst = &p;
    if (worst != nullptr) {
      f.rank = worst->rank;
      f.range = worst->phase;
      text += fmt::format(", worst on rank {} in {} ({:.2f})", worst->rank, worst->phase, *worst->min_allocated_over_reserved);
    }
    if (!low_ratio) text = fmt::format("allocated/reserved at least {:.2f}", *m.min_allocated_over_reserved);
    parts.push_back(text);
  }
  if (m.worst_reserved_slack) parts.push_back(fmt::format("reserved slack up to {:.2f}", *m.worst_reserved_slack));
  if (m.worst_split_fragmentation)
    parts.push_back(fmt::format("split fragmentation up to {:.2f}", *m.worst_split_fragmentation));
  if (m.worst_external_fragmentation)
    parts.push_back(fmt::format("external fragmentation up to {:.2f}", *m.worst_external_fragmentation));
  parts.push_back(m.has_allocator_counters
                      ? fmt::format("allocation retries {}, OOMs {} over the run", m.alloc_retries, m.ooms)
                      : "allocation retries and OOMs " + a.data.run.missing());
  if (m.peak_reserved_bytes)
    parts.push_back(fmt::format("peak reserved {} against peak allocated {}", format_bytes(*m.peak_reserved_bytes),
                                format_bytes(m.peak_allocated_bytes)));
  for (std::size_t i = 0; i < parts.size(); ++i) f.evidence += (i == 0 ? "" : "; ") + parts[i];
  const auto& d = a.data;
  // A run of this version records hybridscope.expandable_segments; an older or imported one is told
  // the environment variable that does the same.
  const bool has_key = d.config_value(kExpandableSegments).has_value();
  f.suggestion = fmt::format(
      "Turn on the caching allocator's expandable segments ({}), so that segments grow in place instead of "
      "leaving split blocks that fit nothing; keep {} at true so the KV blocks are returned before training "
      "reuses the memory; a smaller {} or {} shrinks the KV pool when the failures come during training.",
      has_key ? "set " + key_now(d, kExpandableSegments) + " to true"
              : std::string("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True in every rank's environment"),
      key_now(d, kFreeCacheEngine), key_now(d, kGpuMemoryUtilization), key_now(d, kKvNumBlocks));
  name_keys(f, d, {kFreeCacheEngine, kGpuMemoryUtilization, kKvNumBlocks});
  if (has_key) name_keys(f, d, {kExpandableSegments});
  return f;
}

// ---------------------------------------------------------------------------------------------
// 6. memory-over-params: the peak is far above what training must hold. AdamW alone keeps four
// copies of the parameters' bytes (fp32: weights 4 + gradients 4 + two moments 8 = 16 B per
// parameter, kAdamWStateOverParams), so the threshold lies above that; advice already taken
// (fsdp set, offloads on, checkpointing on) is not given again.
constexpr double kAdamWStateOverParams = 4.0;

std::optional<Finding> memory_over_params(const RunAnalysis& a, const DiagnosisThresholds& t) {
  const MemoryAnalysis& m = a.memory;
  if (!m.peak_over_params || !(*m.peak_over_params > t.peak_over_params)) return std::nullopt;
  Finding f = start_finding("memory-over-params", Severity::kWarning, 0.0);
  f.rank = m.peak_rank;
  f.step = m.peak_step;
  f.title = fmt::format("peak memory is {:.2f}× the model's parameter bytes", *m.peak_over_params);
  f.evidence = fmt::format("peak allocated {} on rank {} at step {}: {:.2f}× the actor's {} of parameters (above {:.2f}×; "
                           "AdamW's weights, gradients and two moments alone are {:.0f}×)",
                           format_bytes(m.peak_allocated_bytes), m.peak_rank, m.peak_step, *m.peak_over_params,
                           format_bytes(m.param_bytes.value_or(0)), t.peak_over_params, kAdamWStateOverParams);
  const MemoryPhasePeak* top = nullptr;  // the phase where the peak rank peaks
  for (const MemoryPhasePeak& p : m.phases)
    if (p.rank == m.peak_rank && (top == nullptr || p.peak_allocated_bytes > top->peak_allocated_bytes)) top = &p;
  if (top != nullptr) {
    f.range = top->phase;
    f.evidence += fmt::format("; its highest phase is {} ({})", top->phase, format_bytes(top->peak_allocated_bytes));
  }
  const auto& d = a.data;
  const auto is_true = [&](const char* key) { return d.config_value(key) == "true"; };
  std::vector<std::string> advice;
  std::vector<const char*> keys;
  if (config_enum<ActorStrategy>(d, kActorStrategy) != ActorStrategy::kFsdp) {
    advice.push_back(fmt::format("{} shards parameters, gradients and moments over the data-parallel ranks (fsdp)",
                                 key_now(d, kActorStrategy)));
    keys.push_back(kActorStrategy);
  }
  std::vector<const char*> offloads;
  for (const char* key : {kParamOffload, kOptimizerOffload})
    if (!is_true(key)) offloads.push_back(key);
  if (offloads.size() == 2)
    advice.push_back(fmt::format("{} and {} move parameters and moments to host memory while generating",
                                 key_now(d, kParamOffload), key_now(d, kOptimizerOffload)));
  else if (offloads.size() == 1)
    advice.push_back(fmt::format("{} moves {} to host memory while generating", key_now(d, offloads[0]),
                                 offloads[0] == kParamOffload ? "parameters" : "the optimizer's moments"));
  keys.insert(keys.end(), offloads.begin(), offloads.end());
  if (!is_true(kGradientCheckpointing)) {
    advice.push_back(fmt::format("{} recomputes activations instead of keeping them", key_now(d, kGradientCheckpointing)));
    keys.push_back(kGradientCheckpointing);
  }
  advice.push_back(fmt::format("a smaller {} (or {} with use_dynamic_bsz) keeps fewer activations at once",
                               key_now(d, kMicroBatch), key_now(d, kMaxTokenLen)));
  keys.insert(keys.end(), {kMicroBatch, kMaxTokenLen});
  f.suggestion = "Training holds gradients and AdamW's two moments beside the parameters, and every activation of a "
                 "micro-batch until backward: ";
  for (std::size_t i = 0; i < advice.size(); ++i) f.suggestion += (i == 0 ? "" : "; ") + advice[i];
  f.suggestion += ".";
  for (const char* key : keys) name_keys(f, d, {key});
  return f;
}

// The phases whose work each data-parallel rank does on its own share of the batch, in lockstep.
double data_parallel_share(const PhaseBreakdown& phases) {
  double share = 0.0;
  for (const char* phase : {"old_log_prob", "ref", "values", "update_critic", "update_actor"})
    share += phase_share(phases, phase);
  return share;
}

// A global_seqlen metric by its verl name, with or without the "global_seqlen/" prefix.
std::optional<double> seqlen(const StragglerAnalysis& s, const std::string& name) {
  for (const std::string& key : {"global_seqlen/" + name, name}) {
    const auto it = s.global_seqlen.find(key);
    if (it != s.global_seqlen.end()) return it->second;
  }
  return std::nullopt;
}

// ---------------------------------------------------------------------------------------------
// 7. dp-imbalance: data-parallel ranks get unequal token counts (verl's global_seqlen).
std::optional<Finding> dp_imbalance(const RunAnalysis& a, const DiagnosisThresholds& t) {
  const auto& s = a.stragglers;
  if (!s.token_imbalance || !(*s.token_imbalance > t.dp_token_imbalance)) return std::nullopt;
  // The busiest rank does (1 + imbalance)× the least busy one's work in the data-parallel phases.
  const double dp_share = data_parallel_share(a.phases);
  const double impact = *s.token_imbalance * dp_share;
  Finding f = start_finding("dp-imbalance", severity_for(impact, t), impact);
  f.title = fmt::format("data-parallel ranks get unequal tokens: (max − min)/mean = {:.2f}", *s.token_imbalance);
  f.evidence = fmt::format("(max − min)/mean of the data-parallel ranks' tokens {:.2f} (above {:.2f}), mean over {}",
                           *s.token_imbalance, t.dp_token_imbalance, format_steps(a.measured));
  for (const char* name : {"min", "max", "mean", "balanced_min", "balanced_max"})
    if (const auto v = seqlen(s, name)) f.evidence += fmt::format("; global_seqlen/{} {:.0f}", name, *v);
  f.evidence += fmt::format("; the data-parallel phases take {} of the step", format_percent(dp_share));
  const auto& d = a.data;
  f.suggestion = fmt::format(
      "Every data-parallel rank waits for the one with the most tokens: {} reorders each batch so the ranks "
      "get equal token totals, and {} packs micro-batches by a token budget ({}) instead of a sample count, "
      "so long and short sequences cost what they weigh.",
      key_now(d, kBalanceBatch), key_now(d, kDynamicBsz), key_now(d, kMaxTokenLen));
  name_keys(f, d, {kBalanceBatch, kDynamicBsz, kMaxTokenLen});
  return f;
}

// ---------------------------------------------------------------------------------------------
// 8. straggler: one rank's mean step is well above the median rank's.
std::optional<Finding> straggler(const RunAnalysis& a, const DiagnosisThresholds& t) {
  const auto& s = a.stragglers;
  if (!s.straggler_rank || !(s.straggler_excess_share > t.straggler_share)) return std::nullopt;
  // What the other ranks wait: the excess as a share of the step (which is the slowest rank's).
  const double impact = a.phases.mean_step_s > 0.0 ? s.straggler_excess_s / a.phases.mean_step_s : s.straggler_excess_share;
  Finding f = start_finding("straggler", severity_for(impact, t), impact);
  const int rank = *s.straggler_rank;
  f.rank = rank;
  f.title = fmt::format("rank {} is a straggler: {} longer steps than the median rank", rank,
                        format_percent(s.straggler_excess_share));
  f.evidence = fmt::format("rank {} was the slowest in {} of {} measured steps ({}); its mean step is {} longer than "
                           "the median rank's ({})",
                           rank, s.straggler_steps, a.measured.size(), format_steps(a.measured),
                           format_seconds(s.straggler_excess_s), format_percent(s.straggler_excess_share));
  const PhaseSpread* widest = nullptr;
  for (const PhaseSpread& p : s.phases)
    if (p.phase != "step" && (widest == nullptr || p.spread > widest->spread)) widest = &p;
  if (widest != nullptr) f.range = widest->phase;
  if (widest != nullptr)
    f.evidence += fmt::format("; widest phase {}: {} on rank {} against {} on rank {} (median {}, spread {:.2f})",
                              widest->phase, format_seconds(widest->max_s), widest->slowest_rank,
                              format_seconds(widest->min_s), widest->fastest_rank, format_seconds(widest->median_s),
                              widest->spread);
  if (s.late_collective_rank)
    f.evidence += fmt::format("; HTA: rank {}'s last collective starts latest most often (std {:.1f} ms across ranks)",
                              *s.late_collective_rank, s.late_collective_stddev_ms);
  const auto& d = a.data;
  f.suggestion = fmt::format(
      "Check rank {}'s host and device first (another process on them, CPU frequency or thermal throttling, "
      "a slower link): every collective waits for it. When its extra time is in a phase whose work follows "
      "its tokens, {} and {} even out the work per rank.",
      rank, key_now(d, kBalanceBatch), key_now(d, kDynamicBsz));
  name_keys(f, d, {kBalanceBatch, kDynamicBsz});
  return f;
}

// ---------------------------------------------------------------------------------------------
// 9. low-mfu: the actor update uses little of the device's peak (perf/mfu/actor). Info: low MFU
// alone is a hint where to look, not a cost the step pays.
std::optional<Finding> low_mfu(const RunAnalysis& a, const DiagnosisThresholds& t) {
  if (!a.mfu || !(*a.mfu < t.low_mfu)) return std::nullopt;
  const double update_share = phase_share(a.phases, "update_actor");
  Finding f = start_finding("low-mfu", Severity::kInfo, update_share);
  f.range = "update_actor";
  f.title = fmt::format("the actor update reaches {:.1f} % of peak FLOP/s (MFU {:.3f})", *a.mfu * 100.0, *a.mfu);
  f.evidence = fmt::format("perf/mfu/actor (verl's flops_counter convention) {:.3f} mean over {} (below {:.2f}); update_actor: {} ({})", *a.mfu,
                           format_steps(a.measured), t.low_mfu, of_the_step(a, phase_mean_s(a.phases, "update_actor")),
                           format_percent(update_share));
  // The threshold is on verl's convention (what users compare with verl's logs); the other one is
  // quoted beside it, named (docs/metrics.md, "MFU in two conventions").
  f.evidence += a.mfu_palm ? fmt::format("; in PaLM's / torchtitan's convention (6N + 12·L·H·Q·T, perf/mfu/actor_palm) {:.3f}",
                                         *a.mfu_palm)
                           : std::string("; PaLM's / torchtitan's convention (perf/mfu/actor_palm) not recorded");
  const auto& d = a.data;
  f.suggestion = fmt::format(
      "Give each forward more tokens: a larger {}, or {} with {} at least 2× (max_prompt_length + "
      "max_response_length) as verl's tuning guide advises.",
      key_now(d, kMicroBatch), key_now(d, kDynamicBsz), key_now(d, kMaxTokenLen));
  name_keys(f, d, {kMicroBatch, kDynamicBsz, kMaxTokenLen});
  // Only a run that recomputes activations can stop doing so.
  if (d.config_value(kGradientCheckpointing) == "true") {
    f.suggestion += fmt::format(" Set {} to false when memory allows: recomputed activations are work MFU does not count.",
                                key_now(d, kGradientCheckpointing));
    name_keys(f, d, {kGradientCheckpointing});
  }
  // On CUDA the peak is the device's dense bf16 rate (docs/metrics.md): fp32 cannot reach it.
  if (config_enum<DeviceKind>(d, kDevice) == DeviceKind::kCuda &&
      config_enum<Precision>(d, kPrecision) != Precision::kBf16) {
    f.suggestion += fmt::format(" On CUDA the peak is the bf16 tensor-core rate: {} set to bf16 can reach it.",
                                key_now(d, kPrecision));
    name_keys(f, d, {kPrecision});
  }
  return f;
}

// ---------------------------------------------------------------------------------------------
// 10. kv-pressure: the paged KV pool ran full. hybridscope's engine never preempts: it admits a
// wave of sequences only when their worst case fits the pool (trainer rollout.cpp), so a full pool
// means generation ran in more, smaller waves than max_num_seqs allows, and the generation's share
// of the step is at stake. (A prompt that cannot fit even alone fails the step: KvPoolExhausted.)
std::optional<Finding> kv_pressure(const RunAnalysis& a, const DiagnosisThresholds& t) {
  const MemoryAnalysis& m = a.memory;
  if (!m.kv_peak_occupancy || !(*m.kv_peak_occupancy > t.kv_occupancy)) return std::nullopt;
  const double impact = phase_share(a.phases, kGen);
  Finding f = start_finding("kv-pressure", severity_for(impact, t), impact);
  f.range = kGen;
  f.title = fmt::format("the KV pool ran {} full: generation admits sequences in smaller waves",
                        format_percent(*m.kv_peak_occupancy));
  f.evidence = fmt::format("peak {} of {} KV blocks in use ({}, threshold {}) over {}", m.kv_peak_blocks_used,
                           m.kv_num_blocks, format_percent(*m.kv_peak_occupancy), format_percent(t.kv_occupancy),
                           format_steps(a.measured));
  f.evidence += fmt::format("; gen: {} ({})", of_the_step(a, phase_mean_s(a.phases, kGen)),
                            format_percent(phase_share(a.phases, kGen)));
  const auto& d = a.data;
  f.suggestion = fmt::format(
      "A full pool admits a new wave of sequences only when blocks free up, so generation decodes fewer "
      "sequences at once than {} allows: give the pool more blocks with {} or, when it is sized from memory, "
      "{}; a larger {} splits the weights and leaves each device more room for KV blocks.",
      key_now(d, kMaxNumSeqs), key_now(d, kKvNumBlocks), key_now(d, kGpuMemoryUtilization), key_now(d, kRolloutTp));
  name_keys(f, d, {kKvNumBlocks, kGpuMemoryUtilization, kMaxNumSeqs, kRolloutTp});
  return f;
}

// ---------------------------------------------------------------------------------------------
// 11. phase-trending-up: a series whose whole 95 % slope interval is above zero and whose slope
// exceeds thresholds.trend_share of its mean per step, over at least trend_min_points steps (on the
// demo matrix's 3 measured steps, one slow step under load read as a 36 %/step "trend"). Impact: the growth from the first to the
// last measured step as a share of the mean step (time series only).
bool is_step_series(const std::string& series) {
  return series == "step" || (series.size() >= 5 && series.compare(series.size() - 5, 5, "/step") == 0);
}

std::string format_value(double value, const std::string& unit) {
  return unit == "s" ? format_seconds(value) : fmt::format("{:.3g} {}", std::fabs(value) < 1e-12 ? 0.0 : value, unit);
}

std::optional<Finding> phase_trending_up(const RunAnalysis& a, const DiagnosisThresholds& t) {
  std::vector<const LinearTrend*> rising;
  for (const LinearTrend& trend : a.trends)
    if (trend.increasing && trend.relative_slope > t.trend_share && trend.n >= t.trend_min_points)
      rising.push_back(&trend);
  if (rising.empty()) return std::nullopt;
  // The step itself grows whenever a phase does: blame a phase first, then the fastest growth.
  std::stable_sort(rising.begin(), rising.end(), [](const LinearTrend* x, const LinearTrend* y) {
    if (is_step_series(x->series) != is_step_series(y->series)) return !is_step_series(x->series);
    return x->relative_slope > y->relative_slope;
  });
  const LinearTrend& top = *rising.front();
  const double growth = top.last_fit - top.first_fit;
  const double impact = top.unit == "s" && a.phases.mean_step_s > 0.0 ? growth / a.phases.mean_step_s : 0.0;
  Finding f = start_finding("phase-trending-up", severity_for(impact, t), impact);
  if (!a.measured.empty()) f.step = *std::max_element(a.measured.begin(), a.measured.end());
  // "timing_s/gen" is the range "gen", "switch/train_to_rollout" is itself; the step and memory are no range.
  if (top.series.rfind("timing_s/", 0) == 0 && top.series != "timing_s/step") f.range = top.series.substr(9);
  else if (top.series.rfind("switch/", 0) == 0) f.range = top.series;
  f.title = fmt::format("{} grows {} per step", top.series, format_percent(top.relative_slope));
  for (std::size_t i = 0; i < rising.size(); ++i) {
    const LinearTrend& r = *rising[i];
    f.evidence += fmt::format("{}{}: +{}/step (95 % CI {} to {}), {} of its mean per step; the fit goes from {} to {} "
                              "over {} points ({})",
                              i == 0 ? "" : "; ", r.series, format_value(r.slope, r.unit),
                              format_value(r.slope_ci_low, r.unit), format_value(r.slope_ci_high, r.unit),
                              format_percent(r.relative_slope), format_value(r.first_fit, r.unit),
                              format_value(r.last_fit, r.unit), r.n, format_steps(a.measured));
  }
  const auto& d = a.data;
  const std::string why =
      " A steady climb is not noise here: the whole 95 % interval of the slope lies above zero; the report's "
      "per-step timeline shows where it starts.";
  if (top.series.find("switch") != std::string::npos) {
    f.suggestion = fmt::format(
        "Refit creep: a switch that slows every step usually waits on memory that was not returned or on an "
        "allocator that fragments — keep {} at true and compare with the memory timeline; {} sets how much "
        "it moves.{}",
        key_now(d, kFreeCacheEngine), key_now(d, kReshardMode), why);
    name_keys(f, d, {kFreeCacheEngine, kReshardMode});
  } else if (top.series.find("memory") != std::string::npos) {
    f.suggestion = fmt::format(
        "Memory that grows every step is held across steps (a cache, a list of tensors, KV blocks kept through "
        "training): keep {} at true, and watch {} if the KV pool is sized from memory.{}",
        key_now(d, kFreeCacheEngine), key_now(d, kGpuMemoryUtilization), why);
    name_keys(f, d, {kFreeCacheEngine, kGpuMemoryUtilization});
  } else if (top.series.find(kGen) != std::string::npos) {
    f.suggestion = fmt::format(
        "Generation that grows step over step is most often the policy writing longer responses (compare "
        "response_length/mean; expected as GRPO training goes on): {} caps them, at the price of clipped "
        "answers.{}",
        key_now(d, kMaxResponseLength), why);
    name_keys(f, d, {kMaxResponseLength});
  } else {
    f.suggestion = fmt::format(
        "Look at what {} does more of at every step (longer sequences, more tokens per rank, a growing "
        "cache).{}",
        top.series, why);
  }
  return f;
}

}  // namespace

const std::vector<DiagnosisRule>& diagnosis_rules() {
  static const std::vector<DiagnosisRule> rules = {
      {"rollout-dominates", "generation's share of the step above rollout_share (60 %)", rollout_dominates},
      {"decode-memory-bound", "generation above 30 % of the step with fewer than small_rollout_batch sequences",
       decode_memory_bound},
      {"switch-slow", "the weight switch above switch_share (15 %) of the step, or a direction above switch_over_bound× its wire bound",
       switch_slow},
      {"comm-exposed", "a rank's communication above comm_share (10 %) of its window with an overlap ratio below comm_overlap",
       comm_exposed},
      {"fragmentation", "allocated/reserved below 0.8, allocation retries, or OOMs", fragmentation},
      {"memory-over-params", "peak allocated above peak_over_params (6)× the model's parameter bytes (AdamW's state is 4×)",
       memory_over_params},
      {"dp-imbalance", "data-parallel token imbalance (global_seqlen) above dp_token_imbalance (10 %)", dp_imbalance},
      {"straggler", "a rank's mean step above the median rank's by more than straggler_share (10 %)", straggler},
      {"low-mfu", "perf/mfu/actor below low_mfu (0.25)", low_mfu},
      {"kv-pressure", "KV pool peak occupancy above kv_occupancy (95 %)", kv_pressure},
      {"phase-trending-up", "a phase, switch or memory series growing by more than trend_share (2 %) per step, CI above 0",
       phase_trending_up},
      {"role-bound", "the waiting role's idle ratio (trainer/ or rollouter/idle_ratio, from the timeline) above role_idle (50 %)",
       detail::role_bound},
      {"weight-sync-repeated", "more than syncs_per_step (1) weight syncs in a measured step (verl #3672)",
       detail::weight_sync_repeated},
  };
  return rules;
}

}  // namespace hs::reports
