// report_charts.cpp — the report's charts from the analyses (report_charts.h).
#include "report_charts.h"

#include <set>

#include <fmt/format.h>

#include "report_content.h"

namespace hs::reports::detail {
namespace {

ChartSeries step_series(const std::string& name, const std::vector<std::pair<std::int64_t, double>>& values) {
  ChartSeries s;
  s.name = name;
  for (const auto& [step, v] : values) s.points.emplace_back(static_cast<double>(step), v);
  return s;
}

}  // namespace

std::optional<LineChart> throughput_chart(const RunAnalysis& analysis) {
  const auto values = analysis.data.tokens_per_s_series();
  if (values.empty()) return std::nullopt;
  LineChart chart;
  chart.title = "Throughput per step";
  chart.x_label = "step";
  chart.y_label = "tokens/s";
  chart.value_unit = "tokens/s";
  chart.integer_x = true;
  chart.series.push_back(step_series("tokens/s", values));
  return chart;
}

std::optional<LineChart> reward_chart(const RunAnalysis& analysis) {
  const auto values = reward_per_step(analysis.data);
  if (values.empty()) return std::nullopt;
  LineChart chart;
  chart.title = "Reward per step (critic/score/mean)";
  chart.x_label = "step";
  chart.y_label = "mean score";
  chart.integer_x = true;
  chart.y_from_zero = false;
  chart.series.push_back(step_series("critic/score/mean", values));
  return chart;
}

std::optional<StackedBarChart> phase_chart(const RunAnalysis& analysis) {
  const auto& phases = analysis.phases;
  if (phases.steps.empty()) return std::nullopt;
  StackedBarChart chart;
  chart.title = "Phase breakdown per step (slowest rank per phase)";
  chart.x_label = "step";
  chart.y_label = "seconds";
  chart.value_unit = "s";
  for (const auto& s : phases.steps) chart.categories.push_back(std::to_string(s.step));
  for (const auto& phase : phases.top_phases) {  // stacked: a sub-phase is inside its parent's segment
    BarSeries segment{phase, {}};
    for (const auto& s : phases.steps) {
      const auto it = s.phase_s.find(phase);
      segment.values.push_back(it == s.phase_s.end() ? 0.0 : it->second);
    }
    chart.segments.push_back(std::move(segment));
  }
  BarSeries other{"other", {}};
  for (const auto& s : phases.steps) other.values.push_back(s.other_s);
  chart.segments.push_back(std::move(other));
  return chart;
}

std::optional<GroupedBarChart> rank_phase_chart(const RunAnalysis& analysis) {
  const auto& phases = analysis.phases;
  if (phases.rank_mean_phase_s.size() < 2) return std::nullopt;
  GroupedBarChart chart;
  chart.title = "Per-rank mean time per phase";
  chart.value_label = "seconds (mean over measured steps)";
  chart.value_unit = "s";
  std::vector<std::string> groups;
  for (const auto& phase : phases.top_phases)
    for (const auto& [rank, by_phase] : phases.rank_mean_phase_s)
      if (by_phase.count(phase)) {
        groups.push_back(phase);
        break;
      }
  chart.groups = groups;
  if (!phases.rank_mean_step_s.empty()) chart.groups.push_back("step");
  for (const auto& [rank, by_phase] : phases.rank_mean_phase_s) {
    BarSeries series{fmt::format("rank {}", rank), {}};
    for (const auto& phase : groups) {
      const auto it = by_phase.find(phase);
      series.values.push_back(it == by_phase.end() ? 0.0 : it->second);
    }
    if (!phases.rank_mean_step_s.empty()) {
      const auto it = phases.rank_mean_step_s.find(rank);
      series.values.push_back(it == phases.rank_mean_step_s.end() ? 0.0 : it->second);
    }
    chart.series.push_back(std::move(series));
  }
  return chart;
}

std::optional<BoundChart> switch_chart(const RunAnalysis& analysis) {
  const auto& switches = analysis.switches;
  if (switches.directions.empty()) return std::nullopt;
  BoundChart chart;
  chart.title = "Weight switch against its wire bound (mean per switch, slowest rank)";
  chart.value_label = "seconds";
  chart.value_unit = "s";
  for (const auto& d : switches.directions) {
    BoundRow row;
    row.label = d.direction;
    row.components = d.components_s;
    if (d.unaccounted_s > 0) row.components.emplace_back("unaccounted", d.unaccounted_s);
    if (row.components.empty()) row.components.emplace_back("switch", d.median_s);  // no component records
    row.bound = d.wire_bound_s;
    chart.rows.push_back(std::move(row));
  }
  return chart;
}

std::optional<LineChart> memory_chart(const RunAnalysis& analysis) {
  const auto timeline = memory_timeline(analysis.data);
  if (timeline.empty()) return std::nullopt;
  LineChart chart;
  chart.title = "Memory over the run";
  chart.x_label = "seconds since the run started";
  chart.x_hover = "t =";
  chart.x_unit = "s";
  chart.y_label = "GiB";
  chart.value_unit = "GiB";
  int slot = 0;
  for (const auto& line : timeline) {
    if (!line.allocated_gib.empty())
      chart.series.push_back({fmt::format("rank {} allocated", line.rank), line.allocated_gib, false, slot});
    if (!line.reserved_gib.empty())
      chart.series.push_back({fmt::format("rank {} reserved", line.rank), line.reserved_gib, true, slot});
    ++slot;
  }
  if (chart.series.empty()) return std::nullopt;
  return chart;
}

std::vector<LineChart> scaling_charts(const MatrixSummary& matrix) {
  const auto curves = scaling_curves(matrix);
  std::vector<LineChart> charts;
  for (const auto& axis : matrix.axes) {
    if (!axis.rank_axis) continue;
    LineChart chart;
    chart.title = fmt::format("Scaling along '{}' ({})", axis.name, axis.scaling.empty() ? "strong" : axis.scaling);
    chart.x_label = "ranks";
    chart.y_label = "efficiency (1 = ideal)";
    chart.integer_x = true;
    std::set<double> ranks;
    for (const auto& curve : curves) {
      if (curve.axis != axis.name) continue;
      chart.series.push_back({curve.label, curve.efficiency});
      for (const auto& [n, e] : curve.efficiency) ranks.insert(n);
    }
    if (chart.series.empty()) continue;
    ChartSeries ideal{"ideal", {}, true};
    ideal.colour_index = static_cast<int>(chart.series.size());
    for (const double n : ranks) ideal.points.emplace_back(n, 1.0);
    chart.series.push_back(std::move(ideal));
    charts.push_back(std::move(chart));
  }
  return charts;
}

}  // namespace hs::reports::detail
