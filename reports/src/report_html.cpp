// report_html.cpp — the report as one self-contained HTML page: inline CSS (with print rules
// for the PDF), inline SVG charts, no script and no reference to the network, so that the file
// reads the same offline, attached to an issue, or printed. Every string from the data goes
// through html_escape(). Sections, the answer first: the header and a table of contents; the
// summary (the verdict, the findings of every run merged and ranked by the step time at stake, the
// matrix's cell table and scaling curves) on one screen; the comparison; then per run its numbers,
// its findings in one line each (their suggestions are in the summary), throughput and reward,
// phases, per-rank spread, the switch against its bound, memory, HTA's breakdown and overlap,
// stragglers, trends. Headings are h1 (title), h2 (sections), h3 (parts): the PDF's outline.
#include <string>

#include <fmt/format.h>

#include "hybridscope/reports/rl_summary.h"
#include "hybridscope/reports/report.h"
#include "report_charts.h"
#include "report_content.h"
#include "report_tables.h"

namespace hs::reports {
namespace {

using detail::html_escape;

constexpr const char* kStyle = R"css(
:root { --ink: #1f2328; --muted: #59636e; --rule: #d1d9e0; --band: #f6f8fa; }
* { box-sizing: border-box; }
body { font: 14px/1.45 -apple-system, "Segoe UI", "DejaVu Sans", Helvetica, Arial, sans-serif; color: var(--ink);
       max-width: 960px; margin: 0 auto; padding: 24px; }
h1 { font-size: 24px; margin: 0 0 4px; }
h2 { font-size: 20px; margin: 36px 0 8px; padding-bottom: 4px; border-bottom: 2px solid var(--rule); }
h3 { font-size: 16px; margin: 24px 0 8px; }
p.meta, p.note, .empty { color: var(--muted); }
p.note { font-size: 12px; margin: 4px 0 12px; }
nav ul, nav ol { margin: 4px 0; padding-left: 20px; }
nav h2 { margin-top: 16px; }
.verdict { border: 1px solid var(--rule); background: var(--band); border-radius: 4px; padding: 8px 12px; }
.verdict p { margin: 4px 0; font-size: 15px; }
.stake { font-variant-numeric: tabular-nums; font-weight: 600; }
ul.run-findings { padding-left: 20px; }
ul.run-findings li { margin: 4px 0; }
code { font: 12px/1.3 "DejaVu Sans Mono", Menlo, Consolas, monospace; background: var(--band); padding: 1px 4px;
       border-radius: 3px; white-space: pre-wrap; overflow-wrap: anywhere; }
.table-wrap { overflow-x: auto; }
table { border-collapse: collapse; margin: 8px 0; font-size: 13px; }
th, td { border: 1px solid var(--rule); padding: 3px 8px; text-align: left; vertical-align: top; white-space: pre-wrap; }
th { background: var(--band); }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
td.num { white-space: nowrap; }
.scroll { max-height: 360px; overflow-y: auto; }
table.wide th { white-space: normal; }  /* headers break at spaces and at the <wbr> after / and _ */
table.wide td { white-space: nowrap; }
p.caption { font-weight: 600; margin: 12px 0 0; }
tr.highlight td { background: #fff1e5; font-weight: 600; }
table.kv td:first-child { color: var(--muted); }
.finding { border: 1px solid var(--rule); border-left: 6px solid #6e7781; border-radius: 4px; padding: 8px 12px;
           margin: 10px 0; }
.finding.critical { border-left-color: #cf222e; }
.finding.warning { border-left-color: #d4a72c; }
.finding.info { border-left-color: #0969da; }
.finding .head { font-size: 15px; }
.finding p { margin: 4px 0; white-space: pre-wrap; }
.badge { display: inline-block; font-size: 11px; font-weight: 700; text-transform: uppercase; color: #fff;
         background: #6e7781; border-radius: 10px; padding: 1px 8px; margin-right: 6px; vertical-align: 1px; }
.critical .badge { background: #cf222e; }
.warning .badge { background: #9a6700; }
.info .badge { background: #0969da; }
.where { color: var(--muted); font-size: 12px; margin-left: 6px; }
.headline { font-size: 15px; font-weight: 600; }
figure { margin: 12px 0; }
svg.chart { width: 100%; height: auto; max-width: 880px; display: block; }
svg.chart text { fill: var(--ink); }
footer { margin-top: 40px; color: var(--muted); font-size: 12px; }
@page { size: A4; margin: 12mm; }
@media print {
  body { max-width: none; padding: 0; font-size: 11px; }
  nav { break-after: page; }
  section.run + section, section + section.run { break-before: page; }
  figure, svg, tr, .finding, table.kv { break-inside: avoid; page-break-inside: avoid; }
  h2, h3, p.headline { break-after: avoid; page-break-after: avoid; }
  .table-wrap, .scroll { overflow: visible; max-height: none; }
  table { font-size: 10px; }
  table.wide { font-size: 8px; }  /* the step and matrix tables fit the page width */
  table.wide th, table.wide td { padding: 2px 4px; }
  a { color: inherit; text-decoration: none; }
}
)css";

// A column heading, escaped, that may break after '/' and '_' ("switch/<wbr>train_<wbr>to_<wbr>rollout")
// rather than between any two letters.
std::string header_html(const std::string& text) {
  std::string out;
  for (const char ch : html_escape(text)) {
    out += ch;
    if (ch == '/' || ch == '_') out += "<wbr>";
  }
  return out;
}

std::string table_html(const detail::ReportTable& t, bool key_value = false) {
  if (t.rows.empty()) return "";
  // More than 8 columns (steps × phases, matrix cells): smaller when printed, cells kept whole.
  const char* css = key_value ? R"( class="kv")" : t.headers.size() > 8 ? R"( class="wide")" : "";
  std::string out = fmt::format(R"(<div class="table-wrap"><table{}>)", css);
  out += "<thead><tr>";
  for (std::size_t c = 0; c < t.headers.size(); ++c)
    out += fmt::format("<th{}>{}</th>", c < t.numeric.size() && t.numeric[c] ? R"( class="num")" : "",
                       header_html(t.headers[c]));
  out += "</tr></thead><tbody>";
  for (const auto& row : t.rows) {
    out += row.highlight ? R"(<tr class="highlight">)" : "<tr>";
    for (std::size_t c = 0; c < row.cells.size(); ++c)
      out += fmt::format("<td{}>{}</td>", c < t.numeric.size() && t.numeric[c] ? R"( class="num")" : "",
                         html_escape(row.cells[c]));
    out += "</tr>";
  }
  out += "</tbody></table></div>";
  if (!t.note.empty()) out += R"(<p class="note">)" + html_escape(t.note) + "</p>";
  return out;
}

std::string figure(const std::string& svg) { return "<figure>" + svg + "</figure>"; }

std::string empty_note(const std::string& what) { return R"(<p class="empty">)" + html_escape(what) + "</p>"; }

std::string config_keys_html(const std::vector<std::string>& keys) {
  if (keys.empty()) return "";
  std::string out = "<p><b>Config keys:</b> ";
  for (const auto& key : keys) out += "<code>" + html_escape(key) + "</code> ";
  return out + "</p>";
}

// The summary's findings: each rule once, the costliest instance's evidence, where else it fired.
std::string ranked_findings_html(const Report& report, const std::vector<detail::RankedFinding>& ranked) {
  if (ranked.empty()) return empty_note("No findings: no rule fired on any run.");
  std::string out;
  for (std::size_t i = 0; i < ranked.size(); ++i) {
    const auto& m = ranked[i];
    const Finding& f = m.finding;
    const std::string severity = to_string(f.severity);
    out += fmt::format(
        R"(<div class="finding {0}" id="finding-{1}"><div class="head"><span class="badge">{0}</span><strong>{2}</strong>)",
        severity, i, html_escape(f.title));
    out += fmt::format(R"(<span class="where">{}</span></div>)", html_escape(f.rule));
    std::string stake = m.step_s > 0 ? fmt::format(R"(<span class="stake">{} of the {} step at stake</span> ({} impact))",
                                                   detail::format_seconds(m.seconds_at_stake),
                                                   detail::format_seconds(m.step_s), detail::format_percent(f.impact))
                                     : fmt::format("impact {}", detail::format_percent(f.impact));
    std::string where = fmt::format(R"(<a href="#run-{}">)", m.run_index) +
                        html_escape(detail::run_title(report.runs[m.run_index])) + "</a>";
    if (f.rank) where += fmt::format(", rank {}", *f.rank);
    if (f.step) where += fmt::format(", step {}", *f.step);
    std::string also;
    if (m.runs.size() > 1) also = fmt::format("; fired on {} of {} runs", m.runs.size(), report.runs.size());
    else if (m.instances > 1) also = fmt::format("; {} times in this run", m.instances);
    out += "<p>" + stake + " — " + where + html_escape(also) + "</p>";
    if (!f.evidence.empty()) out += "<p><b>Evidence:</b> " + html_escape(f.evidence) + "</p>";
    if (!f.suggestion.empty()) out += "<p><b>Suggestion:</b> " + html_escape(f.suggestion) + "</p>";
    out += config_keys_html(f.config_keys);
    out += "</div>";
  }
  return out;
}

// A run's findings, one line each: its own numbers, the suggestion once in the summary.
std::string run_findings_html(const RunReport& run, const std::vector<detail::RankedFinding>& ranked) {
  if (run.findings.empty()) return empty_note("No findings: no rule fired on this run.");
  std::string out = R"(<ul class="run-findings">)";
  for (const auto& f : run.findings) {
    std::size_t summary_index = 0;
    for (std::size_t i = 0; i < ranked.size(); ++i)
      if (ranked[i].finding.rule == f.rule && ranked[i].finding.range == f.range) summary_index = i;
    std::string where;
    if (f.rank) where += fmt::format("rank {}", *f.rank);
    if (f.step) where += fmt::format("{}step {}", where.empty() ? "" : ", ", *f.step);
    out += fmt::format(R"(<li class="{0}"><span class="badge">{0}</span><strong>{1}</strong>)", to_string(f.severity),
                       html_escape(f.title));
    if (!where.empty()) out += R"(<span class="where">)" + html_escape(where) + "</span>";
    if (!f.evidence.empty()) out += "<br>" + html_escape(f.evidence);
    out += fmt::format(R"( <a href="#finding-{}">suggestion</a></li>)", summary_index);
  }
  return out + "</ul>";
}

std::string run_html(const RunReport& run, std::size_t index, const std::vector<detail::RankedFinding>& ranked) {
  const auto& a = run.analysis;
  std::string out = fmt::format(R"(<section class="run" id="run-{}"><h2>{}</h2>)", index,
                                html_escape(detail::run_title(run)));
  out += table_html(detail::run_summary_table(run), true);

  out += "<h3>Findings</h3>" + run_findings_html(run, ranked);

  out += "<h3>Throughput and reward</h3>";
  const auto throughput = detail::throughput_chart(a);
  const auto reward = detail::reward_chart(a);
  if (throughput) out += figure(detail::render_line_chart(*throughput));
  if (reward) out += figure(detail::render_line_chart(*reward));
  if (!throughput && !reward) out += empty_note("No perf/total_num_tokens, timing_s/step or critic/score/mean recorded.");
  if (const auto steps = detail::per_step_table(a); !steps.rows.empty())
    out += R"(<p class="caption">Numbers per step</p><div class="scroll">)" + table_html(steps) + "</div>";

  out += "<h3>Phase breakdown</h3>";
  if (const auto chart = detail::phase_chart(a)) out += figure(detail::render_stacked_bar_chart(*chart));
  else out += empty_note("No step ranges or timing_s/* metrics recorded.");
  out += table_html(detail::phase_table(a.phases));

  out += "<h3>Per-rank phase spread</h3>";
  if (const auto chart = detail::rank_phase_chart(a)) out += figure(detail::render_grouped_bar_chart(*chart));
  else out += empty_note("One rank, or no per-rank ranges: nothing to spread.");

  out += "<h3>Weight switch</h3>";
  if (!a.switches.headline.empty()) out += R"(<p class="headline">)" + html_escape(a.switches.headline) + "</p>";
  if (const auto chart = detail::switch_chart(a)) out += figure(detail::render_bound_chart(*chart));
  else out += empty_note("No switch recorded in the measured steps.");
  if (!a.switches.directions.empty()) out += table_html(detail::switch_table(a.switches));

  out += "<h3>Roles, weight sync and MFU</h3>";
  for (const std::string& line : rl_summary_lines(a)) out += R"(<p class="headline">)" + html_escape(line) + "</p>";
  if (!a.roles.steps.empty()) out += table_html(detail::role_table(a.roles));
  if (!a.weight_sync.steps.empty()) out += table_html(detail::weight_sync_table(a.weight_sync));

  out += "<h3>Memory</h3>";
  if (const auto chart = detail::memory_chart(a)) out += figure(detail::render_line_chart(*chart));
  else out += empty_note("No memory samples recorded (probes off, or no tracking allocator).");
  out += table_html(detail::memory_table(a.memory, a.data.run), true);
  out += table_html(detail::memory_phase_table(a.memory));

  out += "<h3>Temporal breakdown and communication overlap (HTA)</h3>";
  if (a.temporal.breakdown.empty() && a.temporal.overlap.empty())
    out += empty_note("No kernel records or host ranges to break down.");
  out += table_html(detail::temporal_table(a.temporal));
  out += table_html(detail::overlap_table(a.temporal));
  if (!a.gpu_kernels.top.empty()) {
    out += "<h3>GPU kernels by range</h3>";
    out += table_html(detail::gpu_kernel_table(a.gpu_kernels));
  }

  out += "<h3>Stragglers and imbalance</h3>";
  out += table_html(detail::straggler_table(a.stragglers));
  out += table_html(detail::imbalance_table(a.stragglers), true);

  out += "<h3>Trends over the run</h3>";
  if (a.trends.empty()) out += empty_note("Too few measured steps to fit a trend.");
  out += table_html(detail::trend_table(a.trends));
  return out + "</section>";
}

std::string comparison_html(const RunComparison& c) {
  std::string out = R"(<section id="comparison"><h2>Comparison</h2>)";
  out += fmt::format(R"(<p>Old: <strong>{}</strong><br>New: <strong>{}</strong></p>)", html_escape(c.old_label),
                     html_escape(c.new_label));
  out += "<h3>Per-phase change</h3>";
  if (c.phases.empty()) out += empty_note("No phase present on both sides.");
  out += table_html(detail::comparison_table(c));
  if (!c.metrics.empty()) out += "<h3>Step metrics</h3>" + table_html(detail::metric_comparison_table(c));
  out += "<h3>Config difference</h3>";
  if (!c.config_note.empty())
    out += empty_note(c.config_note + ".");
  else if (c.config_diff.empty())
    out += empty_note("The two runs' resolved configs are identical.");
  out += table_html(detail::config_diff_table(c));
  return out + "</section>";
}

// The matrix inside the summary: its cell table and scaling curves.
std::string matrix_html(const MatrixSummary& m) {
  std::string out = fmt::format(R"(<h3 id="matrix">Matrix {} '{}' ({})</h3>)", m.matrix.id,
                                html_escape(m.matrix.name), html_escape(m.matrix.status));
  if (!m.axes.empty()) {
    out += "<p>Axes: ";
    for (std::size_t i = 0; i < m.axes.size(); ++i) {
      const auto& axis = m.axes[i];
      out += (i ? ", " : "") + std::string("<code>") + html_escape(axis.name) + "</code>";
      if (axis.rank_axis) out += " (ranks, " + html_escape(axis.scaling.empty() ? "strong" : axis.scaling) + ")";
    }
    out += "</p>";
  }
  out += table_html(detail::matrix_table(m));
  for (const auto& chart : detail::scaling_charts(m)) out += figure(detail::render_line_chart(chart));
  if (!m.environments.empty()) {
    out += R"(<p class="caption">Environment</p><ul>)";
    for (const auto& e : m.environments) out += "<li>" + html_escape(e) + "</li>";
    out += "</ul>";
  }
  return out;
}

std::string summary_html(const Report& report, const std::vector<detail::RankedFinding>& ranked) {
  std::string out = R"(<section id="summary"><h2>Summary</h2><div class="verdict">)";
  const auto sentences = detail::verdict(report, ranked);
  if (sentences.empty()) out += "<p>Nothing to report.</p>";
  for (const auto& sentence : sentences) out += "<p>" + html_escape(sentence) + "</p>";
  out += "</div>";
  if (!report.runs.empty()) {
    out += R"(<h3 id="findings">Findings, by step time at stake</h3>)";
    out += ranked_findings_html(report, ranked);
  }
  if (report.matrix) out += matrix_html(*report.matrix);
  return out + "</section>";
}

}  // namespace

std::string report_html(const Report& report) {
  const std::string title = report.title.empty() ? "hybridscope report" : report.title;
  std::string out = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                    "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">";
  out += "<title>" + html_escape(title) + "</title><style>" + kStyle + "</style></head><body>";
  out += "<header><h1>" + html_escape(title) + "</h1>";
  out += R"(<p class="meta">)";
  if (!report.generated_at.empty()) out += "Generated " + html_escape(report.generated_at);
  if (!report.hybridscope_version.empty()) out += " · hybridscope " + html_escape(report.hybridscope_version);
  out += "</p>";
  if (!report.sources.empty()) {
    out += "<p>Sources:</p><ul>";
    for (const auto& s : report.sources) out += "<li><code>" + html_escape(s) + "</code></li>";
    out += "</ul>";
  }
  out += "</header>";

  // Contents: links here, and the PDF's outline from the same headings.
  const auto ranked = detail::ranked_findings(report);
  out += R"(<nav id="contents"><h2>Contents</h2><ol>)";
  out += R"(<li><a href="#summary">Summary</a>: the verdict)";
  if (!report.runs.empty()) out += fmt::format(R"(, <a href="#findings">{} finding(s)</a>)", ranked.size());
  if (report.matrix) out += R"(, <a href="#matrix">the matrix and its scaling</a>)";
  out += "</li>";
  if (report.comparison) out += R"(<li><a href="#comparison">Comparison</a></li>)";
  if (!report.runs.empty()) {
    out += "<li>Per run<ol>";
    for (std::size_t i = 0; i < report.runs.size(); ++i)
      out += fmt::format(R"(<li><a href="#run-{}">{}</a> — {} finding(s)</li>)", i,
                         html_escape(detail::run_title(report.runs[i])), report.runs[i].findings.size());
    out += "</ol></li>";
  }
  out += "</ol></nav>";

  if (report.runs.empty() && !report.comparison && !report.matrix) {
    out += empty_note("Nothing to report.");
  } else {
    out += summary_html(report, ranked);
    if (report.comparison) out += comparison_html(*report.comparison);
    for (std::size_t i = 0; i < report.runs.size(); ++i) out += run_html(report.runs[i], i, ranked);
  }
  out += "<footer>hybridscope report";
  if (!report.hybridscope_version.empty()) out += " · version " + html_escape(report.hybridscope_version);
  out += "</footer></body></html>\n";
  return out;
}

}  // namespace hs::reports
