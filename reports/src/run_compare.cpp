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

}  // namespace

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
  std::map<std::string, std::pair<std::optional<std::string>, std::optional<std::string>>> keys;
  for (const auto& [key, value] : old_run.config) keys[key].first = value;
  for (const auto& [key, value] : new_run.config) keys[key].second = value;
  for (const auto& [key, values] : keys)
    if (values.first != values.second) out.config_diff.push_back({key, values.first, values.second});
  return out;
}

}  // namespace hs::reports
