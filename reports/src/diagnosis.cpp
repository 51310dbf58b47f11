// diagnosis.cpp — runs the rules of diagnosis_rules.cpp over a RunAnalysis, orders what they find,
// and writes it out: the console text of `hybridscope diagnose` and the findings' JSON. The rules
// themselves, and what each quotes, are in diagnosis_rules.cpp and docs/diagnosis.md.

#include "hybridscope/reports/diagnosis.h"
#include "hybridscope/reports/rl_summary.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

#include "diagnosis_text.h"

namespace hs::reports {

std::string to_string(Severity severity) {
  switch (severity) {
    case Severity::kInfo: return "info";
    case Severity::kWarning: return "warning";
    case Severity::kCritical: return "critical";
  }
  return "unknown";
}

namespace detail {

// An imported run has no config at all (runs.config_yaml is empty): its keys are not in the source,
// which is not the same as a recorded run's config lacking one.
std::string absent_key(const RunData& data) {
  return data.run.imported() ? "not in the source" : "not in the run's config";
}

std::string key_with_value(const RunData& data, const std::string& key) {
  const auto value = data.config_value(key);
  return value ? key + "=" + *value : key + "=(" + absent_key(data) + ")";
}

std::string key_now(const RunData& data, const std::string& key) {
  const auto value = data.config_value(key);
  return value ? fmt::format("{} (now {})", key, *value) : key + " (" + absent_key(data) + ")";
}

void name_keys(Finding& finding, const RunData& data, std::initializer_list<const char*> keys) {
  for (const char* key : keys) finding.config_keys.push_back(key_with_value(data, key));
}

std::string ranks_text(const std::vector<int>& ranks) {
  std::string out = ranks.size() == 1 ? "rank " : "ranks ";
  for (std::size_t i = 0; i < ranks.size(); ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
  return out;
}

Severity severity_for(double impact, const DiagnosisThresholds& thresholds) {
  return impact > thresholds.critical_share ? Severity::kCritical : Severity::kWarning;
}

}  // namespace detail

std::vector<Finding> diagnose(const RunAnalysis& analysis, const DiagnosisThresholds& thresholds) {
  std::vector<Finding> findings;
  for (const DiagnosisRule& rule : diagnosis_rules()) {
    if (auto finding = rule.check(analysis, thresholds)) findings.push_back(std::move(*finding));
  }
  // Stable: findings of equal severity and impact keep the rules' documented order.
  std::stable_sort(findings.begin(), findings.end(), [](const Finding& a, const Finding& b) {
    if (a.severity != b.severity) return a.severity > b.severity;
    return a.impact > b.impact;
  });
  return findings;
}

std::string format_findings(const RunAnalysis& analysis, const std::vector<Finding>& findings) {
  const RunSummary& run = analysis.data.run;
  const std::string source = run.imported() ? fmt::format(", imported ({})", run.source) : "";
  const std::string no_steps = why_no_measured_steps(analysis);
  std::string out =
      no_steps.empty()
          ? fmt::format("run {} \"{}\" — world size {}{}, mean step {} over {} ({} measured)\n", run.id, run.name,
                        run.world_size, source, detail::format_seconds(analysis.phases.mean_step_s),
                        detail::format_steps(analysis.measured), analysis.measured.size())
          : fmt::format("run {} \"{}\" — world size {}{}, {}\n", run.id, run.name, run.world_size, source, no_steps);
  for (const std::string& line : rl_summary_lines(analysis)) out += "  " + line + "\n";
  if (findings.empty() && !no_steps.empty()) {
    out += fmt::format("no findings: the {} rules judge measured steps, and there are none\n", diagnosis_rules().size());
    return out;
  }
  if (findings.empty()) {
    out += fmt::format("no findings: none of the {} rules crossed its threshold (docs/diagnosis.md)\n",
                       diagnosis_rules().size());
    return out;
  }
  for (std::size_t i = 0; i < findings.size(); ++i) {
    const Finding& f = findings[i];
    out += fmt::format("\n{}. [{}] {}\n", i + 1, to_string(f.severity), f.title);
    out += fmt::format("   {}\n", f.evidence);
    out += fmt::format("   → {}\n", f.suggestion);
    if (!f.config_keys.empty()) {
      out += "   keys:";
      for (std::size_t k = 0; k < f.config_keys.size(); ++k) out += (k == 0 ? " " : ", ") + f.config_keys[k];
      out += "\n";
    }
  }
  return out;
}

nlohmann::json findings_json(const std::vector<Finding>& findings) {
  nlohmann::json out = nlohmann::json::array();
  for (const Finding& f : findings) {
    out.push_back({{"rule", f.rule},
                   {"severity", to_string(f.severity)},
                   {"title", f.title},
                   {"evidence", f.evidence},
                   {"suggestion", f.suggestion},
                   {"config_keys", f.config_keys},
                   {"impact", f.impact},
                   {"rank", f.rank ? nlohmann::json(*f.rank) : nlohmann::json(nullptr)},
                   {"step", f.step ? nlohmann::json(*f.step) : nlohmann::json(nullptr)},
                   {"range", f.range.empty() ? nlohmann::json(nullptr) : nlohmann::json(f.range)}});
  }
  return out;
}

}  // namespace hs::reports
