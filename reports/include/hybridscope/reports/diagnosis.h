// diagnosis.h — rules that turn a RunAnalysis into findings: "rollout is 64 % of the step;
// generation is memory-bound at batch 8 — raise actor_rollout_ref.rollout.n". Each rule is one
// function with a condition, the evidence it quotes (numbers, rank, step, range), a severity and a
// suggestion naming the verl / hybridscope config keys to change and why (docs/diagnosis.md).
// Adding a rule is one function in diagnosis_rules.cpp, one entry in diagnosis_rules(), one test.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hybridscope/reports/run_analysis.h"

namespace hs::reports {

enum class Severity { kInfo = 0, kWarning = 1, kCritical = 2 };
std::string to_string(Severity severity);  // "info" | "warning" | "critical"

struct Finding {
  std::string rule;      // the rule's id, e.g. "rollout-dominates"
  Severity severity = Severity::kInfo;
  std::string title;     // one line: what is wrong
  std::string evidence;  // the numbers behind it (with rank / step / range where one is to blame)
  std::string suggestion;                // what to change and why
  std::vector<std::string> config_keys;  // the keys the suggestion names, with their current values where known
  double impact = 0.0;  // share of the step at stake (0..1): orders findings of equal severity
  std::optional<int> rank;
  std::optional<std::int64_t> step;
  /// The range (a phase or switch name of the `ranges` table: "gen", "switch/train_to_rollout",
  /// "update_actor") the finding is about, where it is about one; empty: the whole step. With
  /// `rank` and `step`, where the viewer's timeline jumps.
  std::string range;
};

/// Thresholds of the rules (defaults from the issue and verl practice; docs/diagnosis.md).
struct DiagnosisThresholds {
  double rollout_share = 0.60;          // generation share of the step
  double switch_share = 0.15;           // switch share of the step
  double switch_over_bound = 4.0;       // switch time / its wire bound
  double comm_share = 0.10;             // exposed-or-not communication share of the step...
  double comm_overlap = 0.5;            // ...with an overlap ratio below this
  double allocated_over_reserved = 0.8; // verl users' fragmentation rule of thumb
  double peak_over_params = 6.0;        // peak memory per rank / model parameter bytes: AdamW's fp32
                                        // weights, gradients and two moments are 4× (16 B per parameter)
  double dp_token_imbalance = 0.10;     // (max − min)/mean tokens across data-parallel ranks
  double straggler_share = 0.10;        // slowest rank's excess over the median rank
  double low_mfu = 0.25;                // perf/mfu/actor
  double small_rollout_batch = 64;      // sequences per generation below which decode is memory-bound
  double kv_occupancy = 0.95;           // peak KV-pool occupancy
  double trend_share = 0.02;            // growth per step (relative slope) worth reporting
  std::size_t trend_min_points = kTrendMinPoints;  // fewer measured steps are too few to call a trend
  double memory_bound_gen_share = 0.30; // generation share above which a memory-bound decode matters
  double critical_share = 0.30;         // a finding whose impact exceeds this share of the step is critical
  double role_idle = 0.50;              // the waiting role's idle ratio (role_idle.h) worth a verdict
  int syncs_per_step = 1;               // weight syncs in one step above this are repeated (verl #3672)
};

/// One rule: an id, what it checks, and the check itself.
struct DiagnosisRule {
  const char* id;
  const char* description;
  std::optional<Finding> (*check)(const RunAnalysis& analysis, const DiagnosisThresholds& thresholds);
};

/// Every rule, in the order docs/diagnosis.md lists them.
const std::vector<DiagnosisRule>& diagnosis_rules();

/// Runs every rule; findings by severity (critical first), then impact (largest first).
std::vector<Finding> diagnose(const RunAnalysis& analysis, const DiagnosisThresholds& thresholds = {});

/// The console text of `hybridscope diagnose`: a header naming the run, then each finding with its
/// evidence and suggestion; "no findings" when there are none.
std::string format_findings(const RunAnalysis& analysis, const std::vector<Finding>& findings);
nlohmann::json findings_json(const std::vector<Finding>& findings);

}  // namespace hs::reports
