// report_charts.h — which charts a report draws and from which numbers: the chart descriptions
// (svg_chart.h) built from a run's analyses or a matrix summary. Absent when the run recorded
// nothing to draw, so that a report never shows an empty chart. Private to hs_reports.
#pragma once

#include <optional>
#include <vector>

#include "hybridscope/reports/report.h"
#include "svg_chart.h"

namespace hs::reports::detail {

/// Tokens/s per step (perf/total_num_tokens ÷ timing_s/step), one series.
std::optional<LineChart> throughput_chart(const RunAnalysis& analysis);
/// critic/score/mean per step, one series.
std::optional<LineChart> reward_chart(const RunAnalysis& analysis);
/// Each step's phases (slowest rank each) stacked, with "other" on top: one series per phase.
std::optional<StackedBarChart> phase_chart(const RunAnalysis& analysis);
/// Each rank's mean time per phase: one group per phase (and "step"), one series per rank.
/// Absent with fewer than two ranks or without per-rank ranges.
std::optional<GroupedBarChart> rank_phase_chart(const RunAnalysis& analysis);
/// Per switch direction: mean components and the unaccounted rest stacked, against the wire bound.
std::optional<BoundChart> switch_chart(const RunAnalysis& analysis);
/// Allocated (solid) and reserved (dashed) GiB per rank over the run's time.
std::optional<LineChart> memory_chart(const RunAnalysis& analysis);
/// One chart per rank axis: efficiency against ranks, a series per reference cell, and the ideal.
std::vector<LineChart> scaling_charts(const MatrixSummary& matrix);

}  // namespace hs::reports::detail
