// chart_data.h — what the viewer's charts draw, as plain value structs built on the worker thread
// from the reports library's analyses (run_analysis.h, bench_summary.h). No Qt here: the chart
// seam (src/chart_view.h) turns these into Qt Charts, and tests check the numbers without
// rendering anything.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hybridscope/reports/bench_summary.h"
#include "hybridscope/reports/phase_breakdown.h"
#include "hybridscope/reports/run_data.h"

namespace hs::viewer {

/// One line: (x, y) points in x order.
struct LineSeries {
  std::string name;
  std::vector<std::pair<double, double>> points;
  bool dashed = false;  // a reference line (the ideal of a scaling chart)
};

/// A line chart: one or more series over a shared x axis.
struct LineChartData {
  std::string title;
  std::string x_label, y_label;
  std::vector<LineSeries> series;
  /// A fixed x range (min, max): charts read one above the other share it. Absent: the data's own.
  std::optional<std::pair<double, double>> x_range;
  /// A base-2 logarithmic x axis (ranks 8, 16, ..., 1024 evenly spaced); every x must be > 0.
  bool log2_x = false;
};

/// One layer of a stacked bar chart: a value per category.
struct BarSet {
  std::string name;
  std::vector<double> values;  // one per category, same order
};

/// A stacked bar chart: one bar per category, one coloured layer per set.
struct StackedBarData {
  std::string title;
  std::string y_label;
  std::vector<std::string> categories;
  std::vector<BarSet> sets;
};

/// The step metrics the Metrics page charts, in this order, as (title, metric) pairs; "tokens/s"
/// is derived per step as perf/total_num_tokens / timing_s/step (bench_summary.h's definition,
/// applied to one step).
const std::vector<std::pair<std::string, std::string>>& charted_step_metrics();

/// One line chart per charted step metric that the run recorded (x: step), every step included
/// (warm-up too: the chart is where one sees it). Metrics the run lacks get no chart.
std::vector<LineChartData> step_metric_charts(const reports::RunData& data);

/// The Compare page's overlaid charts: one chart per charted step metric that any of `runs`
/// recorded, one line per run named by `labels` (same order). When the runs recorded different
/// numbers of steps, x is each run's progress, 100 · step / (its last step), so that runs of
/// unequal length span the same axis ("progress %"); with equal step counts x is the step.
std::vector<LineChartData> overlay_metric_charts(const std::vector<const reports::RunData*>& runs,
                                                 const std::vector<std::string>& labels);

/// Per step (category "1", "2", ...): seconds of each phase (the slowest rank's, StepPhases.phase_s)
/// stacked in verl's order, then "other" (StepPhases.other_s).
StackedBarData step_phase_bars(const reports::PhaseBreakdown& phases);

/// Per rank (category "rank 0", ...): mean seconds of each phase over the measured steps
/// (PhaseBreakdown.rank_mean_phase_s). Empty categories when the breakdown has no per-rank rows.
StackedBarData rank_phase_bars(const reports::PhaseBreakdown& phases);

/// The scaling view of a matrix: for each rank axis, two charts, efficiency (time form, the
/// ScalingPoint.efficiency of each cell) and throughput (median tokens/s) against the cell's ranks,
/// one line per combination of the other axes' levels ("mode=hybrid"), the efficiency chart with
/// the ideal (100 %) as a dashed line; efficiency in %. Cells without a ScalingPoint on that axis are left out.
std::vector<LineChartData> scaling_charts(const reports::MatrixSummary& matrix);

}  // namespace hs::viewer
