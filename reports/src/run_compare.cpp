// run_compare.cpp — run against run, phase by phase, with the U test of statistics.h.
#include "hybridscope/reports/run_compare.h"

#include <fmt/format.h>

#include <map>
#include <set>

#include "hybridscope/reports/phase_breakdown.h"

namespace hs::reports {

namespace {


std::string label(const RunData& data) {
  return fmt::format("run {} '{}'{}", data.run.id, data.run.name,
                     data.source_path.empty() ? "" : " (" + data.source_path + ")");
}

// phase ("step" included) -> one sample per measured step.
std::map<std::string, std::vector<double>> samples(const PhaseBreakdown& b) {
  const std::set<std::int64_t> measured(b.measured.begin(), b.measured.end());
  std::map<std::string, std::vector<double>> out;
  for (const auto& s : b.steps) {
    if (!measured.count(s.step)) continue;
    out["step"].push_back(s.step_s);
    for (const auto& name : b.phases) {
      const auto it = s.phase_s.find(name);
      out[name].push_back(it == s.phase_s.end() ? 0.0 : it->second);
    }
  }
  return out;
}

// One sample per measured step that recorded the metric.
std::vector<double> metric_samples(const RunData& data, const std::vector<std::int64_t>& measured, const std::string& metric) {
  const std::set<std::int64_t> steps(measured.begin(), measured.end());
  std::vector<double> out;
  const auto series = metric == "tokens/s" ? data.tokens_per_s_series() : data.metric_series(metric);
  for (const auto& [step, value] : series)
    if (steps.count(step)) out.push_back(value);
  return out;
}

}  // namespace

const std::vector<std::pair<std::string, Better>>& compared_step_metrics() {
  static const std::vector<std::pair<std::string, Better>> metrics = {
      {"tokens/s", Better::kHigher},           {"perf/mfu/actor", Better::kHigher},
      {"critic/score/mean", Better::kHigher},  {"actor/entropy", Better::kNeither},
      {"actor/ppo_kl", Better::kNeither},      {"response_length/mean", Better::kNeither},
  };
  return metrics;
}

RunComparison compare_runs(const RunData& old_run, const RunData& new_run, int warmup_steps) {
  RunComparison out;
  out.old_label = label(old_run);
  out.new_label = label(new_run);
  const auto old_breakdown = phase_breakdown(old_run, warmup_steps);
  const auto new_breakdown = phase_breakdown(new_run, warmup_steps);
  const auto old_samples = samples(old_breakdown);
  const auto new_samples = samples(new_breakdown);
  std::vector<std::string> names = {"step"};
  for (const auto& name : new_breakdown.phases) names.push_back(name);
  const auto has_samples = [](const std::map<std::string, std::vector<double>>& side, const std::string& name) {
    const auto it = side.find(name);
    return it != side.end() && !it->second.empty();
  };
  for (const auto& name : old_breakdown.top_phases)
    if (has_samples(old_samples, name) && !has_samples(new_samples, name)) out.only_old_phases.push_back(name);
  for (const auto& name : new_breakdown.top_phases)
    if (has_samples(new_samples, name) && !has_samples(old_samples, name)) out.only_new_phases.push_back(name);
  for (const auto& name : names) {
    const auto o = old_samples.find(name);
    const auto n = new_samples.find(name);
    if (o == old_samples.end() || n == new_samples.end() || o->second.empty() || n->second.empty()) continue;
    PhaseDelta d;
    d.phase = name;
    d.old_values = spread(o->second);
    d.new_values = spread(n->second);
    d.change = relative_change(d.old_values.median, d.new_values.median);
    d.test = mann_whitney_u(o->second, n->second);
    d.significant = d.test.p_value < kAlpha;
    out.phases.push_back(std::move(d));
  }
  for (const auto& [metric, better] : compared_step_metrics()) {
    const auto o = metric_samples(old_run, old_breakdown.measured, metric);
    const auto n = metric_samples(new_run, new_breakdown.measured, metric);
    if (o.empty() || n.empty()) continue;
    MetricDelta d;
    d.metric = metric;
    d.old_values = spread(o);
    d.new_values = spread(n);
    d.change = relative_change(d.old_values.median, d.new_values.median);
    d.test = mann_whitney_u(o, n);
    d.significant = d.test.p_value < kAlpha;
    d.better = better;
    out.metrics.push_back(std::move(d));
  }
  const bool old_imported = old_run.run.imported(), new_imported = new_run.run.imported();
  if (old_imported && new_imported)
    out.config_note = "config not compared: neither imported run has one (not in the source)";
  else if (old_imported || new_imported)
    out.config_note = fmt::format("config not compared: {}, an imported run, has none (not in the source)",
                                  old_imported ? "old" : "new");
  else
    out.config_diff = config_differences(old_run.config, new_run.config);
  return out;
}

std::vector<ConfigDifference> config_differences(const std::vector<std::pair<std::string, std::string>>& old_config,
                                                 const std::vector<std::pair<std::string, std::string>>& new_config) {
  std::map<std::string, std::pair<std::optional<std::string>, std::optional<std::string>>> keys;
  for (const auto& [key, value] : old_config) keys[key].first = value;
  for (const auto& [key, value] : new_config) keys[key].second = value;
  std::vector<ConfigDifference> out;
  for (const auto& [key, values] : keys)
    if (values.first != values.second) out.push_back({key, values.first, values.second});
  return out;
}

}  // namespace hs::reports
