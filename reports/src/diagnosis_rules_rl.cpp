// diagnosis_rules_rl.cpp — the rules over the RL-role analyses (diagnosis_rules_rl.h). What each
// checks and why: docs/diagnosis.md, rules 12 and 13. Every key named is a key of
// trainer/src/config/config_keys.cpp (and verl's key of the same name); verl keys hybridscope does
// not have are said in the suggestion's sentence for imported runs, never listed as keys.
#include "diagnosis_rules_rl.h"

#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "diagnosis_text.h"

namespace hs::reports::detail {

namespace {

constexpr const char* kRolloutN = "actor_rollout_ref.rollout.n";
constexpr const char* kRolloutTp = "actor_rollout_ref.rollout.tensor_model_parallel_size";
constexpr const char* kGpuMemoryUtilization = "actor_rollout_ref.rollout.gpu_memory_utilization";
constexpr const char* kMaxResponseLength = "data.max_response_length";
constexpr const char* kMaxNumSeqs = "actor_rollout_ref.rollout.max_num_seqs";
constexpr const char* kTrainBatchSize = "data.train_batch_size";
constexpr const char* kMiniBatch = "actor_rollout_ref.actor.ppo_mini_batch_size";
constexpr const char* kMicroBatch = "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu";
constexpr const char* kDynamicBsz = "actor_rollout_ref.actor.use_dynamic_bsz";
constexpr const char* kMaxTokenLen = "actor_rollout_ref.actor.ppo_max_token_len_per_gpu";
constexpr const char* kPlacementRef = "hybridscope.placement.ref";
constexpr const char* kPlacementRollout = "hybridscope.placement.rollout";
constexpr const char* kTestFreq = "trainer.test_freq";
constexpr const char* kAsyncMode = "hybridscope.async_mode";
// verl's fully-async keys (verl/experimental/fully_async_policy, config async_training.*).
constexpr const char* kStaleness = "async_training.staleness_threshold";
constexpr const char* kTriggerSync = "async_training.trigger_parameter_sync_step";
constexpr const char* kPartialRollout = "async_training.partial_rollout";

const RoleIdle* role_of(const RoleIdleAnalysis& roles, const std::string& name) {
  for (const RoleIdle& r : roles.roles)
    if (r.role == name) return &r;
  return nullptr;
}

// The mean over the measured steps of step metric `name`, and its largest value; nullopt when
// the run did not record it in those steps.
struct MetricSummary {
  double mean = 0.0, max = 0.0;
};
std::optional<MetricSummary> measured_metric(const RunAnalysis& a, const std::string& name) {
  double sum = 0.0;
  MetricSummary out;
  int n = 0;
  for (const auto& [step, value] : a.data.metric_series(name)) {
    if (std::find(a.measured.begin(), a.measured.end(), step) == a.measured.end()) continue;
    sum += value;
    out.max = n ? std::max(out.max, value) : value;
    ++n;
  }
  if (n == 0) return std::nullopt;
  out.mean = sum / n;
  return out;
}

// The run's queue-depth metric, verl's fully-async rollouter statistic, which hybridscope's
// fully_async records under the same name (docs/metrics.md): none or that one.
std::vector<std::string> queue_metrics(const RunData& d) {
  constexpr const char* kQueueDepth = "fully_async/monitor/queue/mq_queue_size";
  for (const StepMetric& m : d.metrics)
    if (m.name == kQueueDepth) return {kQueueDepth};
  return {};
}

// A hybridscope run's split pool, in its async mode: what the evidence adds (staleness, the
// exposed sync, queue depth) and the mode's keys in the suggestion.
void explain_async(Finding& f, const RunAnalysis& a, bool rollout_bound) {
  const RunData& d = a.data;
  const std::string mode = d.config_value(kAsyncMode).value_or("sync");
  f.evidence += fmt::format("; async mode {} with a rollout pool of {}", mode,
                            ranks_text(split_rollout_ranks(d)));
  if (const auto staleness = measured_metric(a, "async/staleness/mean"))
    f.evidence += fmt::format(", samples {:.3g} updates stale on average (async/staleness/mean)", staleness->mean);
  if (const auto sync = measured_metric(a, "timing_s/sync_rollout_weights"); sync && a.phases.mean_step_s > 0)
    f.evidence += fmt::format(", the weight sync exposed {} per step ({} of the step, timing_s/sync_rollout_weights)",
                              format_seconds(sync->mean), format_percent(sync->mean / a.phases.mean_step_s));
  const auto queues = queue_metrics(d);
  for (const std::string& q : queues)
    if (const auto depth = measured_metric(a, q))
      f.evidence += fmt::format(", queue depth {} {:.3g} on average, {:.3g} at most", q, depth->mean, depth->max);
  if (queues.empty() && mode == "fully_async") f.evidence += ", no queue depth recorded";

  if (mode == "sync") {
    f.suggestion += fmt::format(
        " The pools wait for each other every step: {} set to one_step_off lets the pool generate the next batch "
        "while the actor trains (one update stale, corrected by algorithm.rollout_correction.rollout_is), which "
        "hides the shorter of the two.",
        key_now(d, kAsyncMode));
    name_keys(f, d, {kAsyncMode});
  } else if (mode == "fully_async") {
    if (rollout_bound) {
      f.suggestion += fmt::format(
          " Fully async: a larger {} lets the rollouter generate further ahead with older weights (staler samples); "
          "a larger {} syncs, and pauses the rollouter, less often; {} lets generation in flight continue across a "
          "sync instead of waiting for it.",
          key_now(d, kStaleness), key_now(d, kTriggerSync), key_now(d, kPartialRollout));
    } else {
      f.suggestion += fmt::format(
          " Fully async: the rollouter pauses once the queue holds what {} allows, so raising it only makes samples "
          "staler; a larger {} exposes fewer weight syncs on the trainer.",
          key_now(d, kStaleness), key_now(d, kTriggerSync));
    }
    name_keys(f, d, {kStaleness, kTriggerSync});
    if (rollout_bound) name_keys(f, d, {kPartialRollout});
  }
  if (!rollout_bound) {
    // Each prompt's n samples are trained as well as generated: fewer of them shorten the actor's step.
    f.suggestion += fmt::format(" A smaller {} also shrinks what the actor trains per step.", key_now(d, kRolloutN));
    name_keys(f, d, {kRolloutN});
  }
}

}  // namespace

std::optional<Finding> role_bound(const RunAnalysis& a, const DiagnosisThresholds& t) {
  const RoleIdleAnalysis& roles = a.roles;
  if (roles.verdict.empty()) return std::nullopt;
  const bool rollout_bound = roles.verdict == "rollout-bound";
  const RoleIdle* rollout = role_of(roles, "rollout");
  const RoleIdle* train = role_of(roles, "train");
  const RoleIdle* waiting = rollout_bound ? train : rollout;
  if (!(waiting->idle_ratio > t.role_idle)) return std::nullopt;

  // Colocated (every rank holds both roles, the hybrid engine): the roles take turns, so the
  // waiting role's idle time is the other role's work, not idle devices — a verdict (info) whose
  // impact is the bottleneck role's share of the step. Disjoint pools: the waiting role's devices
  // really idle; the impact is that idle time as a share of every role rank's step.
  // Colocated, nothing idles that another layout would put to work: no step time at stake (the
  // evidence gives each role's busy time). A share here ranked the verdict above the real
  // bottlenecks in the report ("1.6 s of the 2.0 s step at stake" on the demo's 4-rank cell).
  double impact = 0.0;
  Severity severity = Severity::kInfo;
  if (!roles.colocated) {
    const double all = static_cast<double>(rollout->ranks.size() + train->ranks.size());
    impact = waiting->idle_ratio * static_cast<double>(waiting->ranks.size()) / all;
    severity = severity_for(impact, t);
  }
  Finding f;
  f.rule = "role-bound";
  f.severity = severity;
  f.impact = impact;
  f.rank = waiting->idlest_rank;
  f.range = rollout_bound ? "gen" : "update_actor";
  f.title = rollout_bound
                ? fmt::format("rollout-bound: the training role waits {} of the step for generation",
                              format_percent(train->idle_ratio))
                : fmt::format("train-bound: the rollout role waits {} of the step for training",
                              format_percent(rollout->idle_ratio));
  f.evidence = fmt::format(
      "{} (train role, {}) {} against {} (rollout role, {}) {} over {} — from the timeline: per rank and step, "
      "1 − |∪ the role's phase ranges| ÷ the step range, every gap counted (verl's rollouter/idle_ratio counts "
      "one pause per parameter version, verl #6693); {}; the train role was busy {} and the rollout role {} of a "
      "{} step window on average; idlest {} rank: {} at {}",
      train->verl_name, ranks_text(train->ranks), format_percent(train->idle_ratio), rollout->verl_name,
      ranks_text(rollout->ranks), format_percent(rollout->idle_ratio), format_steps(a.measured),
      roles.colocated ? "colocated: the same ranks hold both roles and take turns" : "the roles are on separate ranks",
      format_seconds(train->busy_s), format_seconds(rollout->busy_s), format_seconds(train->window_s),
      waiting->role, waiting->idlest_rank, format_percent(waiting->idlest_ratio));
  const auto& d = a.data;
  if (rollout_bound) {
    // Only what can move: a rollout tp of 1 cannot shrink, and max_num_seqs is named when it, not the
    // batch, caps the sequences decoded at once.
    const auto tp = d.config_number(kRolloutTp);
    const auto max_seqs = d.config_number(kMaxNumSeqs);
    const auto prompts = d.config_number(kTrainBatchSize), n = d.config_number(kRolloutN);
    const bool seqs_cap = max_seqs && prompts && n && *max_seqs < *prompts * *n;
    std::vector<const char*> keys;
    f.suggestion = "Generation sets the pace:";
    if (tp && *tp > 1) {
      f.suggestion += fmt::format(" a smaller {} gives more replicas decoding at once when the weights fit;",
                                  key_now(d, kRolloutTp));
      keys.push_back(kRolloutTp);
    }
    if (seqs_cap) {
      f.suggestion += fmt::format(" a larger {} decodes more of the step's {:.0f} sequences at once (fewer waves);",
                                  key_now(d, kMaxNumSeqs), *prompts * *n);
      keys.push_back(kMaxNumSeqs);
    }
    f.suggestion += fmt::format(
        " a larger {} leaves the KV pool room for more sequences at once; {} caps the longest responses; a smaller "
        "{} generates fewer samples per prompt (a noisier group baseline).",
        key_now(d, kGpuMemoryUtilization), key_now(d, kMaxResponseLength), key_now(d, kRolloutN));
    for (const char* k : {kGpuMemoryUtilization, kMaxResponseLength, kRolloutN}) keys.push_back(k);
    for (const char* k : keys) name_keys(f, d, {k});
  } else {
    f.suggestion = fmt::format(
        "Training sets the pace: {} with {} packs micro-batches by tokens so the device stays busy; a larger {} "
        "runs fewer, larger forward passes; a larger {} means fewer optimizer steps per batch.",
        key_now(d, kDynamicBsz), key_now(d, kMaxTokenLen), key_now(d, kMicroBatch), key_now(d, kMiniBatch));
    name_keys(f, d, {kDynamicBsz, kMaxTokenLen, kMicroBatch, kMiniBatch});
  }
  // Separate rollout and train pools: hybridscope's own split placement (hybridscope.placement.rollout,
  // with async_mode one_step_off or sync), or another framework's run (verl's fully-async or
  // one-step-off trainers), whose pool keys are said in words.
  const std::size_t giving = rollout_bound ? train->ranks.size() : rollout->ranks.size();  // the side ranks leave
  if (!roles.colocated && !d.run.imported() && giving <= 1) {
    f.suggestion += fmt::format(
        " The pools are separate, and the {} holds a single rank already: give the {} more ranks (a larger world, "
        "hybridscope launch -n) in {} rather than take the {}'s.",
        rollout_bound ? "actor" : "rollout pool", rollout_bound ? "rollout pool" : "actor",
        key_now(d, kPlacementRollout), rollout_bound ? "actor" : "pool");
    name_keys(f, d, {kPlacementRollout});
    if (!split_rollout_ranks(d).empty()) explain_async(f, a, rollout_bound);
  } else if (!roles.colocated && !d.run.imported()) {
    f.suggestion += fmt::format(" The pools are separate: move ranks {} the rollout pool in {}.",
                                rollout_bound ? "into" : "out of", key_now(d, kPlacementRollout));
    name_keys(f, d, {kPlacementRollout});
    if (!split_rollout_ranks(d).empty()) explain_async(f, a, rollout_bound);
  } else if (!roles.colocated) {
    f.suggestion += fmt::format(
        " With verl's separate pools (fully_async_policy, one_step_off_policy) move devices to the {}: "
        "rollout.nnodes / rollout.n_gpus_per_node against trainer.nnodes / trainer.n_gpus_per_node (verl #7601).",
        rollout_bound ? "rollouter" : "trainer");
  }
  if (const RoleIdle* ref = role_of(roles, "reference"); ref && ref->idle_ratio > t.role_idle) {
    f.evidence += fmt::format("; the split reference ({}) idles {} of the step", ranks_text(ref->ranks),
                              format_percent(ref->idle_ratio));
    f.suggestion += fmt::format(" The reference ranks idle most of the step: fewer of them in {} leave more to "
                                "the actor.",
                                key_now(d, kPlacementRef));
    name_keys(f, d, {kPlacementRef});
  }
  return f;
}

std::optional<Finding> weight_sync_repeated(const RunAnalysis& a, const DiagnosisThresholds& t) {
  const WeightSyncAnalysis& w = a.weight_sync;
  if (!(w.max_syncs > t.syncs_per_step)) return std::nullopt;
  const WeightSyncStep* worst = nullptr;
  for (const WeightSyncStep& s : w.steps)
    if (s.step == w.max_syncs_step) worst = &s;
  // What the repeats cost in the worst step: its sync time beyond one sync's share.
  const double extra_s = worst->seconds * static_cast<double>(worst->syncs - 1) / static_cast<double>(worst->syncs);
  const double impact = a.phases.mean_step_s > 0 ? extra_s / a.phases.mean_step_s : 0.0;
  Finding f;
  f.rule = "weight-sync-repeated";
  f.severity = severity_for(impact, t);
  f.impact = impact;
  f.step = worst->step;
  f.rank = worst->rank;
  f.range = w.range_name;
  f.title = fmt::format("{} weight syncs in one step ({} of {} measured steps sync more than once)", w.max_syncs,
                        w.steps_with_repeats, w.steps.size());
  f.evidence = fmt::format("step {}: {} `{}` ranges on rank {}, {} in all", worst->step, worst->syncs, w.range_name,
                           worst->rank, format_seconds(worst->seconds));
  if (worst->bytes) f.evidence += fmt::format(", {} moved", format_bytes(static_cast<double>(*worst->bytes)));
  if (worst->gbps) f.evidence += fmt::format(" at {} GB/s", format_number(*worst->gbps));
  f.evidence += fmt::format("; the repeats cost {} of the {} mean step", format_seconds(extra_s),
                            format_seconds(a.phases.mean_step_s));
  const auto& d = a.data;
  f.suggestion = fmt::format(
      "The rollout needs the new weights once per step. verl #3672: waking the rollout for validation and again "
      "for the training generation synced the weights twice; here validation inside a step ({}) does the same — "
      "validate less often, or look for a second wake-up of the rollout in the step.",
      key_now(d, kTestFreq));
  name_keys(f, d, {kTestFreq});
  return f;
}

}  // namespace hs::reports::detail
