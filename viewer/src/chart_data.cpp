// chart_data.cpp — the viewer's chart series from the reports library's analyses (chart_data.h).
#include "hybridscope/viewer/chart_data.h"

#include <algorithm>
#include <functional>
#include <map>

namespace hs::viewer {
namespace {

constexpr const char* kTokensPerSecond = "tokens/s";

std::string last_part(const std::string& name) {
  const auto dot = name.rfind('.');
  return dot == std::string::npos ? name : name.substr(dot + 1);
}

}  // namespace

const std::vector<std::pair<std::string, std::string>>& charted_step_metrics() {
  static const std::vector<std::pair<std::string, std::string>> metrics = {
      {"Throughput (tokens/s)", kTokensPerSecond},
      {"Reward (critic/score/mean)", "critic/score/mean"},
      {"Entropy (actor/entropy)", "actor/entropy"},
      {"KL (actor/ppo_kl)", "actor/ppo_kl"},
      {"Response length (response_length/mean)", "response_length/mean"},
      {"Step time (timing_s/step)", "timing_s/step"},
  };
  return metrics;
}

std::vector<LineChartData> step_metric_charts(const reports::RunData& data) {
  std::vector<LineChartData> out;
  for (const auto& [title, metric] : charted_step_metrics()) {
    LineSeries series;
    series.name = metric;
    if (metric == kTokensPerSecond) {
      for (const auto& [step, value] : data.tokens_per_s_series()) series.points.emplace_back(static_cast<double>(step), value);
    } else {
      for (const auto& [step, value] : data.metric_series(metric)) series.points.emplace_back(static_cast<double>(step), value);
    }
    if (series.points.empty()) continue;
    LineChartData chart;
    chart.title = title;
    chart.x_label = "step";
    // The title names the metric; the axis says only a unit (a long name was cut off beside the axis).
    chart.y_label = metric == kTokensPerSecond ? "tokens/s" : metric == "timing_s/step" ? "s" : "";
    chart.series.push_back(std::move(series));
    out.push_back(std::move(chart));
  }
  return out;
}

std::vector<LineChartData> overlay_metric_charts(const std::vector<const reports::RunData*>& runs,
                                                 const std::vector<std::string>& labels) {
  std::vector<std::int64_t> last_step;
  std::vector<std::vector<LineChartData>> per_run;
  for (const auto* run : runs) {
    const auto steps = run->steps();
    last_step.push_back(steps.empty() ? 0 : steps.back());
    per_run.push_back(step_metric_charts(*run));
  }
  const bool normalise = std::adjacent_find(last_step.begin(), last_step.end(), std::not_equal_to<>()) != last_step.end();
  std::vector<LineChartData> out;
  for (const auto& [title, metric] : charted_step_metrics()) {
    LineChartData chart;
    chart.title = title;
    chart.x_label = normalise ? "progress % (step / the run's last step)" : "step";
    for (std::size_t r = 0; r < runs.size(); ++r) {
      for (auto& single : per_run[r]) {
        if (single.title != title) continue;
        chart.y_label = single.y_label;
        LineSeries series = std::move(single.series.front());
        series.name = r < labels.size() ? labels[r] : series.name;
        if (normalise && last_step[r] > 0)
          for (auto& [x, y] : series.points) x = 100.0 * x / static_cast<double>(last_step[r]);
        chart.series.push_back(std::move(series));
      }
    }
    if (!chart.series.empty()) out.push_back(std::move(chart));
  }
  return out;
}

StackedBarData step_phase_bars(const reports::PhaseBreakdown& phases) {
  StackedBarData out;
  out.title = "Phases per step (slowest rank of each phase)";
  out.y_label = "s";
  for (const auto& s : phases.steps) out.categories.push_back(std::to_string(s.step));
  for (const auto& phase : phases.top_phases) {  // stacked: sub-phases are inside their parents' bars
    BarSet set{phase, {}};
    for (const auto& s : phases.steps) {
      const auto it = s.phase_s.find(phase);
      set.values.push_back(it == s.phase_s.end() ? 0.0 : it->second);
    }
    out.sets.push_back(std::move(set));
  }
  BarSet other{"other", {}};
  for (const auto& s : phases.steps) other.values.push_back(s.other_s);
  out.sets.push_back(std::move(other));
  return out;
}

StackedBarData rank_phase_bars(const reports::PhaseBreakdown& phases) {
  StackedBarData out;
  out.title = "Mean phase time per rank (measured steps)";
  out.y_label = "s";
  for (const auto& [rank, _] : phases.rank_mean_phase_s) out.categories.push_back("rank " + std::to_string(rank));
  for (const auto& phase : phases.top_phases) {  // stacked: sub-phases are inside their parents' bars
    BarSet set{phase, {}};
    for (const auto& [rank, by_phase] : phases.rank_mean_phase_s) {
      const auto it = by_phase.find(phase);
      set.values.push_back(it == by_phase.end() ? 0.0 : it->second);
    }
    out.sets.push_back(std::move(set));
  }
  return out;
}

std::vector<LineChartData> scaling_charts(const reports::MatrixSummary& matrix) {
  std::vector<LineChartData> out;
  for (const auto& axis : matrix.axes) {
    if (!axis.rank_axis) continue;
    const auto a = static_cast<std::size_t>(axis.axis_index);
    // One line per combination of the other axes' levels, in the order cells first show it.
    std::vector<std::string> groups;
    std::map<std::string, LineSeries> efficiency, throughput;
    double min_ranks = 0, max_ranks = 0;
    bool any = false;
    for (const auto& cell : matrix.cells) {
      const auto p = std::find_if(cell.scaling.begin(), cell.scaling.end(),
                                  [&](const reports::ScalingPoint& s) { return s.axis == axis.name; });
      if (p == cell.scaling.end()) continue;
      std::string group;
      for (std::size_t i = 0; i < cell.cell.levels.size(); ++i) {
        if (i == a) continue;
        if (!group.empty()) group += ", ";
        group += (i < matrix.axes.size() ? last_part(matrix.axes[i].name) : "axis" + std::to_string(i)) + "=" +
                 cell.cell.levels[i];
      }
      if (group.empty()) group = "cells";
      if (!efficiency.count(group)) {
        groups.push_back(group);
        efficiency[group].name = group;
        throughput[group].name = group;
      }
      const double ranks = cell.cell.ranks;
      efficiency[group].points.emplace_back(ranks, 100.0 * p->efficiency);
      if (const auto x = cell.metrics.find("tokens_per_s"); x != cell.metrics.end())
        throughput[group].points.emplace_back(ranks, x->second.median);
      min_ranks = any ? std::min(min_ranks, ranks) : ranks;
      max_ranks = any ? std::max(max_ranks, ranks) : ranks;
      any = true;
    }
    if (!any) continue;
    const std::string kind = axis.scaling.empty() ? "strong" : axis.scaling;
    LineChartData eff;
    eff.title = "Efficiency (" + kind + ") vs ranks along " + axis.name;
    eff.x_label = "ranks";
    eff.y_label = "efficiency %";
    LineChartData thr;
    thr.title = "Throughput vs ranks along " + axis.name;
    thr.x_label = "ranks";
    thr.y_label = "tokens/s (median)";
    for (const auto& g : groups) {
      std::sort(efficiency[g].points.begin(), efficiency[g].points.end());
      std::sort(throughput[g].points.begin(), throughput[g].points.end());
      eff.series.push_back(std::move(efficiency[g]));
      if (!throughput[g].points.empty()) thr.series.push_back(std::move(throughput[g]));
    }
    eff.series.push_back({"ideal", {{min_ranks, 100.0}, {max_ranks, 100.0}}, true});
    out.push_back(std::move(eff));
    if (!thr.series.empty()) out.push_back(std::move(thr));
  }
  return out;
}

}  // namespace hs::viewer
