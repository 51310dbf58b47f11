// phase_breakdown.h — where a step's time goes, phase by phase, with verl's `timing_s/*` names
// (docs/metrics.md), per rank and aggregated. A step lasts as long as its slowest rank (not rank
// 0's, profiling-facts "Diagnosis pitfalls"); a phase's aggregated time is its slowest rank's, as
// the trainer reduces `timing_s/*` before recording them.
//
// Source: the `ranges` table (category step / phase / switch), where a phase is every range of
// that name inside the step, summed. A range is in step N when it starts inside the rank's `step`
// range of step N (StepWindows, run_data.h): the final validation after the last step carries that
// step's number but is not part of it.
//
// Phases form a tree: a range that lies (in time, on its rank) inside another phase or switch
// range is a sub-phase of the outermost one (`gen/decode_step` and `gen/prefill` under `gen`,
// `micro_batch/forward` and `optimizer_step` under `update_actor`); with probes off, a name
// `a/b` whose prefix `a` is a phase of the run is a sub-phase of `a`. Only the top-level phases
// add up to (at most) the step: charts, stacked bars and sums use `top_phases`; tables may list a
// sub-phase under its parent, never in the same sum. A run recorded with probes off has no ranges: the breakdown
// then comes from the `timing_s/*` step metrics (aggregated only; no per-rank rows).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "hybridscope/reports/run_data.h"

namespace hs::reports {

/// verl's phases in the order a step runs them (`timing_s/<name>`), the two switch directions
/// (`switch/train_to_rollout` before `gen`, `switch/rollout_to_train` after it) included.
const std::vector<std::string>& verl_phase_order();

/// One rank's step.
struct RankStep {
  int rank = 0;
  std::int64_t step = 0;
  double step_s = 0.0;
  std::map<std::string, double> phase_s;  // phase name (no `timing_s/` prefix) -> seconds
};

/// One step, aggregated over ranks.
struct StepPhases {
  std::int64_t step = 0;
  double step_s = 0.0;   // the slowest rank's step
  int slowest_rank = 0;  // whose step that is
  std::map<std::string, double> phase_s;  // each phase's slowest rank
  double other_s = 0.0;  // the slowest rank's step outside its top-level phases (loop overhead, logging), >= 0
};

struct PhaseBreakdown {
  std::string source;                 // "ranges" | "step_metrics"
  std::vector<std::string> phases;    // every phase present: each top-level one (verl's order, unknown
                                      // names after, sorted) followed by its sub-phases
  std::vector<std::string> top_phases;  // the top-level phases alone, in the same order: these add up
  std::map<std::string, std::string> parent;  // sub-phase -> its top-level phase
  std::vector<RankStep> per_rank;     // by step, then rank (empty when source is step_metrics)
  std::vector<StepPhases> steps;      // every step, by step
  std::vector<std::int64_t> measured; // the steps the means below cover (warm-up left out)
  double mean_step_s = 0.0;           // over `measured`
  std::map<std::string, double> mean_phase_s;  // over `measured`
  std::map<std::string, double> share;         // mean_phase_s / mean_step_s
  std::map<int, std::map<std::string, double>> rank_mean_phase_s;  // rank -> phase -> mean seconds over `measured`
  std::map<int, double> rank_mean_step_s;                          // rank -> mean step seconds
};

/// Whether `phase` is a top-level phase of `breakdown` (not a sub-phase of another).
bool is_top_level(const PhaseBreakdown& breakdown, const std::string& phase);

/// The breakdown of `data`; the first `warmup_steps` steps are left out of the means (all of them
/// are kept when the run has no more steps than that).
PhaseBreakdown phase_breakdown(const RunData& data, int warmup_steps = 1);

}  // namespace hs::reports
