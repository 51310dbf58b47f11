// run_compare.h — run against run (or cell against cell), phase by phase: the per-step samples of
// each phase's time (`timing_s/*`), their medians, the relative change and the two-sided
// Mann–Whitney U test of statistics.h (the test `hybridscope compare` uses), and the config keys
// whose values differ.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "hybridscope/reports/run_data.h"
#include "hybridscope/reports/statistics.h"

namespace hs::reports {

struct PhaseDelta {
  std::string phase;  // "step" or a phase name (no `timing_s/` prefix)
  Spread old_values, new_values;
  double change = 0.0;  // (new − old)/|old| of the medians; NaN when old is 0
  MannWhitney test;
  bool significant = false;  // p < kAlpha
};

/// Which way a step metric is better: throughput and MFU up, reward up; entropy, KL and the
/// response length are neither (a change is shown, not judged).
enum class Better { kHigher, kLower, kNeither };

/// A step metric compared like a phase: one sample per measured step on each side.
struct MetricDelta {
  std::string metric;  // "tokens/s" (RunData::tokens_per_s_series) or a step metric's name
  Spread old_values, new_values;
  double change = 0.0;  // (new − old)/|old| of the medians; NaN when old is 0
  MannWhitney test;
  bool significant = false;  // p < kAlpha
  Better better = Better::kNeither;
};

/// The step metrics compare_runs() compares, in this order, with the way each is better:
/// tokens/s, perf/mfu/actor, critic/score/mean, actor/entropy, actor/ppo_kl, response_length/mean.
const std::vector<std::pair<std::string, Better>>& compared_step_metrics();

struct ConfigDifference {
  std::string key;
  std::optional<std::string> old_value, new_value;  // absent: the key is missing on that side
};

/// The keys whose values differ between two resolved configs (each sorted by key), by key.
std::vector<ConfigDifference> config_differences(const std::vector<std::pair<std::string, std::string>>& old_config,
                                                 const std::vector<std::pair<std::string, std::string>>& new_config);

struct RunComparison {
  std::string old_label, new_label;  // "run 7 'name' (path)"
  std::vector<PhaseDelta> phases;    // "step" first, then verl's order; phases present on both sides
  /// Top-level phases with measured samples on one side only (not compared), verl's order: an own run's
  /// `switch/train_to_rollout` against an imported trace's `update_weights`, a critic on one side.
  std::vector<std::string> only_old_phases, only_new_phases;
  std::vector<MetricDelta> metrics;  // compared_step_metrics() that both runs recorded in measured steps
  std::vector<ConfigDifference> config_diff;  // by key
  /// Why the configs were not compared, said where config_diff would be ("config not compared: new,
  /// an imported run, has none (not in the source)"): an imported run has no config, and every key of
  /// the other side would read as changed. Empty: compared (config_diff holds the differences).
  std::string config_note;
};

/// Compares the measured steps of two runs (the first `warmup_steps` of each left out).
RunComparison compare_runs(const RunData& old_run, const RunData& new_run, int warmup_steps = 1);

}  // namespace hs::reports
