// trends.h — does a phase (or the switch, or memory) grow step after step? An ordinary least
// squares line through (step, value) with a 95 % confidence interval on its slope from Student's
// t distribution — a trend is reported only when the whole interval lies above zero, never from a
// single first-vs-last comparison.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "hybridscope/reports/phase_breakdown.h"
#include "hybridscope/reports/run_data.h"

namespace hs::reports {

/// The fewest points a trend is called on: with 3 measured steps one slow step under load read as a
/// 36 %/step "trend" (docs/diagnosis.md). The report's verdict and the phase-trending-up rule alike.
inline constexpr std::size_t kTrendMinPoints = 4;

struct LinearTrend {
  std::string series;      // e.g. "timing_s/gen", "switch/train_to_rollout", "memory/allocated_gb"
  std::string unit;        // "s", "GB", ...
  std::size_t n = 0;       // points
  double slope = 0.0;      // unit per step
  double intercept = 0.0;
  double slope_ci_low = 0.0, slope_ci_high = 0.0;  // 95 % two-sided (t with n − 2 degrees of freedom)
  double mean = 0.0;                               // of the values
  double relative_slope = 0.0;                     // slope / mean (per step); 0 when mean is 0
  double first_fit = 0.0, last_fit = 0.0;          // the line at the first and last step
  bool increasing = false;  // slope_ci_low > 0, over at least kTrendMinPoints points
  bool decreasing = false;  // slope_ci_high < 0, over at least kTrendMinPoints points
};

/// Two-sided quantile of Student's t: the x with P(T <= x) = p for `df` degrees of freedom (df >= 1).
/// Throws std::invalid_argument for p outside (0, 1) or df < 1.
double student_t_quantile(double p, double df);

/// OLS fit of points (x, y). With fewer than 3 points or all x equal the interval is infinite
/// (−inf, +inf); with fewer than kTrendMinPoints neither flag is set (the interval is still given). Throws std::invalid_argument on NaN input.
LinearTrend fit_trend(const std::string& series, const std::string& unit,
                      const std::vector<std::pair<double, double>>& points);

/// Trends over the breakdown's measured steps: the step time and every phase of `breakdown` (its
/// slowest rank per step, as phase_breakdown() aggregates them; the switch phases excepted), each
/// switch direction from the switch records (slowest rank per switch), and the peak allocated
/// memory per step over all ranks.
std::vector<LinearTrend> run_trends(const RunData& data, const PhaseBreakdown& breakdown);

}  // namespace hs::reports
