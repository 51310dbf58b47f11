// imbalance.h — stragglers and load imbalance across ranks: per phase, the spread of the ranks'
// mean times, which rank is slowest and by how much; HTA's straggler (the rank whose last
// collective of a step starts latest most often, judged by the spread across ranks); and verl's
// `global_seqlen/*` token balance across data-parallel ranks when the run recorded it.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "hybridscope/reports/phase_breakdown.h"
#include "hybridscope/reports/run_data.h"

namespace hs::reports {

struct PhaseSpread {
  std::string phase;
  double min_s = 0.0, max_s = 0.0, median_s = 0.0;  // over ranks' means
  int slowest_rank = 0, fastest_rank = 0;
  double spread = 0.0;  // (max − min) / median; 0 when median is 0
};

struct StragglerAnalysis {
  int world_size = 1;
  std::vector<PhaseSpread> phases;  // every phase of the breakdown, and "step"
  /// The rank that is slowest in the step most often, with its mean excess over the median rank.
  std::optional<int> straggler_rank;
  double straggler_excess_s = 0.0;     // its mean step − the median rank's mean step
  double straggler_excess_share = 0.0; // of the median rank's mean step
  int straggler_steps = 0;             // steps in which it was the slowest
  /// HTA: per step, the rank whose last collective started latest; the rank that does so most.
  std::optional<int> late_collective_rank;
  double late_collective_stddev_ms = 0.0;  // mean over steps of the std across ranks of that start time
  /// verl's global_seqlen metrics averaged over measured steps (absent when not recorded).
  std::map<std::string, double> global_seqlen;
  /// (max − min) / mean of the data-parallel ranks' token counts, from global_seqlen: the
  /// balanced_max/balanced_min pair when recorded (verl reorders the batch to that partition, so the
  /// ranks train on it), else max/min; over global_seqlen/mean, or (max + min)/2 without it.
  /// Absent when not recorded.
  std::optional<double> token_imbalance;
};

StragglerAnalysis straggler_analysis(const RunData& data, const PhaseBreakdown& breakdown);

}  // namespace hs::reports
