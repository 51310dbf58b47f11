// report_markdown.cpp — the report as GitHub-flavoured Markdown: the HTML report's sections and
// tables (report_tables.h) without charts — each chart's numbers are in the per-step table or the
// section's table. Table cells escape `|` and carry newlines as <br>; the HTML specials of data
// are escaped too, because Markdown renderers pass raw HTML through.
#include <string>

#include <fmt/format.h>

#include "hybridscope/reports/rl_summary.h"
#include "hybridscope/reports/report.h"
#include "report_content.h"
#include "report_tables.h"

namespace hs::reports {
namespace {

using detail::markdown_cell;

// Text outside tables: one line, the Markdown specials that would start markup left alone but the
// HTML specials escaped (a run name may hold anything).
std::string md_text(const std::string& text) { return markdown_cell(text); }

std::string table_md(const detail::ReportTable& t) {
  if (t.rows.empty()) return "";
  std::string out = "|";
  for (const auto& h : t.headers) out += " " + markdown_cell(h) + " |";
  out += "\n|";
  for (std::size_t c = 0; c < t.headers.size(); ++c) out += c < t.numeric.size() && t.numeric[c] ? "---:|" : "---|";
  out += "\n";
  for (const auto& row : t.rows) {
    out += "|";
    for (const auto& cell : row.cells) {
      const std::string text = markdown_cell(cell);
      out += " " + (row.highlight && !text.empty() ? "**" + text + "**" : text) + " |";
    }
    out += "\n";
  }
  if (!t.note.empty()) out += "\n_" + md_text(t.note) + "_\n";
  return out + "\n";
}

// The summary's findings: each (rule, range) once over all runs, by step time at stake.
std::string ranked_findings_md(const Report& report, const std::vector<detail::RankedFinding>& ranked) {
  if (ranked.empty()) return "No findings: no rule fired on any run.\n\n";
  std::string out;
  for (std::size_t i = 0; i < ranked.size(); ++i) {
    const auto& m = ranked[i];
    const Finding& f = m.finding;
    out += fmt::format("{}. **[{}] {}** (`{}`", i + 1, to_string(f.severity), md_text(f.title), md_text(f.rule));
    if (m.step_s > 0)
      out += fmt::format(", {} of the {} step at stake", detail::format_seconds(m.seconds_at_stake),
                         detail::format_seconds(m.step_s));
    else
      out += fmt::format(", impact {}", detail::format_percent(f.impact));
    out += fmt::format("; {}", md_text(detail::run_title(report.runs[m.run_index])));
    if (f.rank) out += fmt::format(", rank {}", *f.rank);
    if (f.step) out += fmt::format(", step {}", *f.step);
    if (m.runs.size() > 1) out += fmt::format("; fired on {} of {} runs", m.runs.size(), report.runs.size());
    out += ")\n";
    if (!f.evidence.empty()) out += "   - Evidence: " + md_text(f.evidence) + "\n";
    if (!f.suggestion.empty()) out += "   - Suggestion: " + md_text(f.suggestion) + "\n";
    if (!f.config_keys.empty()) {
      out += "   - Config keys:";
      for (const auto& key : f.config_keys) out += " `" + md_text(key) + "`";
      out += "\n";
    }
  }
  return out + "\n";
}

// A run's findings, one line each (the suggestions are in the summary).
std::string run_findings_md(const std::vector<Finding>& findings) {
  if (findings.empty()) return "No findings: no rule fired on this run.\n\n";
  std::string out;
  for (const auto& f : findings) {
    out += fmt::format("- **[{}] {}**", to_string(f.severity), md_text(f.title));
    if (!f.evidence.empty()) out += " — " + md_text(f.evidence);
    out += "\n";
  }
  return out + "\n";
}

std::string run_md(const RunReport& run) {
  const auto& a = run.analysis;
  std::string out = "## " + md_text(detail::run_title(run)) + "\n\n";
  out += table_md(detail::run_summary_table(run));
  out += "### Findings\n\n" + run_findings_md(run.findings);
  out += "### Per step\n\n";
  const auto steps = detail::per_step_table(a);
  out += steps.rows.empty() ? "No steps recorded.\n\n" : table_md(steps);
  out += "### Phase breakdown\n\n" + table_md(detail::phase_table(a.phases));
  out += "### Weight switch\n\n";
  if (!a.switches.headline.empty()) out += "**" + md_text(a.switches.headline) + "**\n\n";
  out += a.switches.directions.empty() ? "No switch recorded in the measured steps.\n\n"
                                       : table_md(detail::switch_table(a.switches));
  out += "### Roles, weight sync and MFU\n\n";
  for (const std::string& line : rl_summary_lines(a)) out += "- " + md_text(line) + "\n";
  out += "\n";
  if (!a.roles.steps.empty()) out += table_md(detail::role_table(a.roles));
  if (!a.weight_sync.steps.empty()) out += table_md(detail::weight_sync_table(a.weight_sync));
  out += "### Memory\n\n" + table_md(detail::memory_table(a.memory, a.data.run)) + table_md(detail::memory_phase_table(a.memory));
  out += "### Temporal breakdown and communication overlap (HTA)\n\n";
  out += table_md(detail::temporal_table(a.temporal)) + table_md(detail::overlap_table(a.temporal));
  if (!a.gpu_kernels.top.empty()) out += "### GPU kernels by range\n\n" + table_md(detail::gpu_kernel_table(a.gpu_kernels));
  out += "### Stragglers and imbalance\n\n";
  out += table_md(detail::straggler_table(a.stragglers)) + table_md(detail::imbalance_table(a.stragglers));
  out += "### Trends over the run\n\n";
  out += a.trends.empty() ? "Too few measured steps to fit a trend.\n\n" : table_md(detail::trend_table(a.trends));
  return out;
}

std::string matrix_md(const MatrixSummary& m) {
  std::string out = fmt::format("### Matrix {} '{}' ({})\n\n", m.matrix.id, md_text(m.matrix.name), md_text(m.matrix.status));
  out += table_md(detail::matrix_table(m));
  const auto curves = detail::scaling_curves(m);
  if (!curves.empty()) {
    out += "#### Scaling\n\n";
    detail::ReportTable t;
    t.headers = {"curve", "kind", "ranks", "efficiency", "throughput efficiency"};
    t.numeric = {false, false, true, true, true};
    for (const auto& c : curves)
      for (std::size_t i = 0; i < c.efficiency.size(); ++i)
        t.rows.push_back({{c.label, c.kind, detail::format_number(c.efficiency[i].first),
                           detail::format_percent(c.efficiency[i].second),
                           detail::format_percent(c.throughput_efficiency[i].second)}});
    out += table_md(t);
  }
  if (!m.environments.empty()) {
    out += "#### Environment\n\n";
    for (const auto& e : m.environments) out += "- " + md_text(e) + "\n";
    out += "\n";
  }
  return out;
}

}  // namespace

std::string report_markdown(const Report& report) {
  std::string out = "# " + md_text(report.title.empty() ? "hybridscope report" : report.title) + "\n\n";
  if (!report.generated_at.empty()) out += "Generated " + md_text(report.generated_at);
  if (!report.hybridscope_version.empty()) out += " · hybridscope " + md_text(report.hybridscope_version);
  out += "\n\n";
  if (!report.sources.empty()) {
    out += "Sources:\n\n";
    for (const auto& s : report.sources) out += "- `" + md_text(s) + "`\n";
    out += "\n";
  }
  // The answer first: the verdict, the findings of all runs merged and ranked, the matrix.
  const auto ranked = detail::ranked_findings(report);
  out += "## Summary\n\n";
  for (const auto& sentence : detail::verdict(report, ranked)) out += md_text(sentence) + "  \n";
  out += "\n";
  if (!report.runs.empty()) out += "### Findings, by step time at stake\n\n" + ranked_findings_md(report, ranked);
  if (report.matrix) out += matrix_md(*report.matrix);
  if (report.comparison) {
    const auto& c = *report.comparison;
    out += "## Comparison\n\nOld: " + md_text(c.old_label) + "  \nNew: " + md_text(c.new_label) + "\n\n";
    out += "### Per-phase change\n\n";
    out += c.phases.empty() ? "No phase present on both sides.\n\n" : table_md(detail::comparison_table(c));
    if (!c.metrics.empty()) out += "### Step metrics\n\n" + table_md(detail::metric_comparison_table(c));
    out += "### Config difference\n\n";
    out += !c.config_note.empty()  ? c.config_note + ".\n\n"
           : c.config_diff.empty() ? "The two runs' resolved configs are identical.\n\n"
                                   : table_md(detail::config_diff_table(c));
  }
  for (const auto& run : report.runs) out += run_md(run);
  return out;
}

}  // namespace hs::reports
