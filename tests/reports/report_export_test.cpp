// report_export_test.cpp — the exporters on a hand-built Report (sample_report.h): the findings
// and the numbers behind them appear in HTML, Markdown, CSV and JSON; a run name and config value
// holding <script>, quotes, `|` and a newline come out escaped in HTML and Markdown and intact in
// CSV (read back with an RFC 4180 reader written here) and JSON (read back with nlohmann); the
// HTML references nothing on the network; each chart is an <svg> with the series it should have;
// the PDF printed by Chromium carries the findings' text (pdftotext).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hybridscope/reports/report.h"
#include "recorded_run.h"
#include "sample_report.h"

using namespace hs::reports;
using hs::reports::testing::kHostileName;
using hs::reports::testing::kHostileValue;
using hs::reports::testing::sample_report;
using nlohmann::json;

namespace {

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto pos = text.find(what); pos != std::string::npos; pos = text.find(what, pos + what.size())) ++n;
  return n;
}

// The escaping an independent reader expects in HTML text and attributes.
std::string escaped(const std::string& s) {
  std::string out;
  for (const char c : s) {
    if (c == '&') out += "&amp;";
    else if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '"') out += "&quot;";
    else if (c == '\'') out += "&#39;";
    else out += c;
  }
  return out;
}

// Each <svg>…</svg> of a page by its aria-label (the chart's title, escaped).
std::map<std::string, std::string> charts_by_label(const std::string& html) {
  std::map<std::string, std::string> out;
  for (auto pos = html.find("<svg "); pos != std::string::npos; pos = html.find("<svg ", pos + 1)) {
    const auto end = html.find("</svg>", pos);
    const auto label = html.find("aria-label=\"", pos);
    EXPECT_NE(end, std::string::npos);
    EXPECT_LT(label, end);
    const auto label_end = html.find('"', label + 12);
    out[html.substr(label + 12, label_end - label - 12)] = html.substr(pos, end - pos);
  }
  return out;
}

std::vector<std::string> series_names(const std::string& svg) {
  std::vector<std::string> out;
  const std::string marker = "class=\"series\" data-series=\"";
  for (auto pos = svg.find(marker); pos != std::string::npos; pos = svg.find(marker, pos + 1)) {
    const auto start = pos + marker.size();
    out.push_back(svg.substr(start, svg.find('"', start) - start));
  }
  return out;
}

// RFC 4180: fields separated by commas, records by CRLF (a lone LF accepted), a quoted field may
// hold commas, CR, LF and doubled quotes.
std::vector<std::vector<std::string>> parse_csv(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> row;
  std::string field;
  bool quoted = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') field += '"', ++i;
      else if (c == '"') quoted = false;
      else field += c;
    } else if (c == '"') {
      EXPECT_TRUE(field.empty()) << "a quote inside an unquoted field at byte " << i;
      quoted = true;
    } else if (c == ',') {
      row.push_back(field), field.clear();
    } else if (c == '\n' || (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n')) {
      if (c == '\r') ++i;
      row.push_back(field), field.clear();
      rows.push_back(row), row.clear();
    } else {
      field += c;
    }
  }
  EXPECT_FALSE(quoted) << "unterminated quoted field";
  if (!field.empty() || !row.empty()) row.push_back(field), rows.push_back(row);
  return rows;
}

struct CsvRow {
  std::string section, run_id, rank, step, key, value, unit;
};

std::vector<CsvRow> csv_rows(const std::string& text) {
  const auto rows = parse_csv(text);
  EXPECT_FALSE(rows.empty());
  EXPECT_EQ(rows.front(), (std::vector<std::string>{"section", "run_id", "rank", "step", "key", "value", "unit"}));
  std::vector<CsvRow> out;
  for (std::size_t i = 1; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i].size(), 7u) << "row " << i;
    if (rows[i].size() == 7)
      out.push_back({rows[i][0], rows[i][1], rows[i][2], rows[i][3], rows[i][4], rows[i][5], rows[i][6]});
  }
  return out;
}

std::optional<CsvRow> find_row(const std::vector<CsvRow>& rows, const std::string& section, const std::string& key,
                               const std::string& step = "*") {
  for (const auto& r : rows)
    if (r.section == section && r.key == key && (step == "*" || r.step == step)) return r;
  return std::nullopt;
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string collapse_spaces(const std::string& text) {
  std::string out;
  for (const char c : text) {
    const bool space = std::isspace(static_cast<unsigned char>(c));
    if (space && (out.empty() || out.back() == ' ')) continue;
    out += space ? ' ' : c;
  }
  return out;
}

bool on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');)
    if (!dir.empty() && ::access((std::filesystem::path(dir) / name).c_str(), X_OK) == 0) return true;
  return false;
}

bool chromium_available() {
  if (const char* env = std::getenv("HS_CHROMIUM"); env && *env) return ::access(env, X_OK) == 0;
  for (const char* name : {"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"})
    if (on_path(name)) return true;
  return false;
}

// Sets (or unsets, with nullptr) an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) ::setenv(name, value, 1);
    else ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_) ::setenv(name_, old_->c_str(), 1);
    else ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace

TEST(ReportHtml, FindingsComeRightAfterTheSummaryWithTheirNumbers) {
  const auto report = sample_report();
  const std::string html = report_html(report);
  for (const auto& f : report.runs[0].findings) {
    EXPECT_NE(html.find(escaped(f.title)), std::string::npos) << f.title;
    EXPECT_NE(html.find(escaped(f.evidence)), std::string::npos) << f.evidence;
    EXPECT_NE(html.find(escaped(f.suggestion)), std::string::npos) << f.suggestion;
  }
  EXPECT_NE(html.find("<code>actor_rollout_ref.rollout.tensor_model_parallel_size=2</code>"), std::string::npos);
  // Summary: mean step over steps 2..5 = 4.3 s; tokens/s = 32000 / 17.2 = 1860.47 -> "1860"; MFU 31.2 %.
  EXPECT_NE(html.find("<td>mean step</td><td>4.3 s</td>"), std::string::npos);
  EXPECT_NE(html.find("<td>tokens/s</td><td>1860</td>"), std::string::npos);
  EXPECT_NE(html.find("<td>MFU, verl flops_counter (perf/mfu/actor)</td><td>31.2 %</td>"), std::string::npos);
  EXPECT_NE(html.find("<td>MFU, PaLM/torchtitan (perf/mfu/actor_palm)</td><td>not recorded</td>"), std::string::npos);
  EXPECT_NE(html.find("<td>algorithm.adv_estimator</td><td>grpo</td>"), std::string::npos);
  EXPECT_NE(html.find("<td>actor_rollout_ref.rollout.tensor_model_parallel_size</td><td>2</td>"), std::string::npos);
  // Switch: 0.372 / 0.06 = 6.2× its bound; gen share 2.58 / 4.3 = 60 %.
  EXPECT_NE(html.find("6.2×"), std::string::npos);
  EXPECT_NE(html.find("<td>gen</td><td class=\"num\">2580</td><td class=\"num\">60.0 %</td>"), std::string::npos);
  EXPECT_NE(html.find(report.runs[0].analysis.switches.headline), std::string::npos);
  // Order: the report's summary (with the findings) first; in the run's section its numbers, its
  // findings, then the charts.
  const auto report_summary = html.find(R"(<section id="summary">)");
  const auto first_finding = html.find(report.runs[0].findings[0].title);
  const auto run_section = html.find(R"(<section class="run" id="run-0">)");
  const auto summary = html.find("<td>run id</td>");
  const auto findings = html.find("<h3>Findings</h3>");
  const auto charts = html.find("<h3>Throughput and reward</h3>");
  EXPECT_LT(report_summary, first_finding);
  EXPECT_LT(first_finding, run_section);
  EXPECT_LT(run_section, summary);
  EXPECT_LT(summary, findings);
  EXPECT_LT(findings, charts);
  // Critical before warning before info, as diagnose() ordered them.
  EXPECT_LT(html.find("finding critical"), html.find("finding warning"));
  EXPECT_LT(html.find("finding warning"), html.find("finding info"));
  // Only the increasing trend is highlighted.
  EXPECT_EQ(count(html, "<tr class=\"highlight\"><td>timing_s/step</td>"), 1u);
  EXPECT_EQ(count(html, "<tr class=\"highlight\"><td>switch/train_to_rollout</td>"), 0u);
  // Comparison: step median 5.0 -> 4.3 is −14.0 %; the config diff names the changed keys.
  EXPECT_NE(html.find("-14.0 %"), std::string::npos);
  EXPECT_NE(html.find("<td>trainer.old_only</td><td>1</td><td>(absent)</td>"), std::string::npos);
  // Matrix: cell 3 (4 ranks, 4.5 s) has strong efficiency 11 / (4 × 4.5) = 61.1 %.
  EXPECT_NE(html.find("61.1 %"), std::string::npos);
}

// The report opens with its answer: a table of contents, the verdict, the findings of all runs
// said once each and ranked by the step time at stake, the matrix and its scaling — and only then
// the per-run detail. Two runs (matrix cells) with the same three findings: each once in the summary.
TEST(ReportHtml, OpensWithOneSummaryOfDeduplicatedRankedFindingsAndTheMatrix) {
  auto report = sample_report();
  RunReport second = report.runs[0];
  second.label = "cell world=2";
  second.analysis.phases.mean_step_s = 10.0;
  // In the second run the straggler costs the most: 0.7 × 10 s = 7 s against gen's 0.6 × 10 s.
  for (auto& f : second.findings)
    if (f.rule == "straggler") f.impact = 0.7;
  report.runs.push_back(second);
  const std::string html = report_html(report);

  const auto contents = html.find(R"(<nav id="contents"><h2>Contents</h2>)");
  const auto summary = html.find(R"(<section id="summary"><h2>Summary</h2>)");
  const auto verdict = html.find(R"(<div class="verdict">)");
  const auto matrix = html.find(R"(<h3 id="matrix">)");
  const auto scaling = html.find("Scaling along");
  const auto comparison = html.find(R"(<section id="comparison">)");
  const auto first_run = html.find(R"(<section class="run" id="run-0">)");
  ASSERT_NE(contents, std::string::npos);
  ASSERT_NE(first_run, std::string::npos);
  EXPECT_LT(contents, summary);
  EXPECT_LT(summary, verdict);
  EXPECT_LT(verdict, matrix);
  EXPECT_LT(matrix, scaling);
  EXPECT_LT(scaling, comparison);
  EXPECT_LT(comparison, first_run) << "the matrix table and its scaling come before any run's detail";
  for (const char* link : {"href=\"#summary\"", "href=\"#findings\"", "href=\"#matrix\"", "href=\"#comparison\"",
                           "href=\"#run-0\"", "href=\"#run-1\""})
    EXPECT_NE(html.find(link, contents), std::string::npos) << link;

  // Deduplicated: three rules, three summary entries; each suggestion printed once, not per run.
  EXPECT_EQ(count(html, R"(id="finding-)"), 3u);
  for (const auto& f : report.runs[0].findings) EXPECT_EQ(count(html, escaped(f.suggestion)), 1u) << f.suggestion;
  // Ranked by step time at stake (7 s, 6 s, then the switch's 0.0865 × 10 s), not by severity.
  const auto straggler = html.find(R"(<div class="finding info" id="finding-0">)");
  const auto gen = html.find(R"(<div class="finding critical" id="finding-1">)");
  const auto sw = html.find(R"(<div class="finding warning" id="finding-2">)");
  ASSERT_NE(straggler, std::string::npos);
  ASSERT_NE(gen, std::string::npos);
  ASSERT_NE(sw, std::string::npos);
  EXPECT_NE(html.find("fired on 2 of 2 runs", straggler), std::string::npos);
  EXPECT_NE(html.find("7 s of the 10 s step at stake", straggler), std::string::npos) << "impact × the run's step";
  // The verdict names the costliest finding and the matrix's scaling.
  const std::string verdict_text = html.substr(verdict, html.find("</div>", verdict) - verdict);
  EXPECT_NE(verdict_text.find("Rank 1 is the straggler"), std::string::npos) << verdict_text;
  EXPECT_NE(verdict_text.find("61.1 %"), std::string::npos) << verdict_text;
  // Per run, each finding links to its summary entry instead of repeating the suggestion.
  EXPECT_NE(html.find(R"(<a href="#finding-0">suggestion</a>)", first_run), std::string::npos);
  // Headings for the PDF outline: one h1, the sections as h2.
  EXPECT_EQ(count(html, "<h1>"), 1u);
  EXPECT_EQ(count(html, "<h2>"), 5u) << "contents, summary, comparison, two runs";
}

TEST(ReportHtml, DataIsEscapedAndNothingComesFromTheNetwork) {
  const std::string html = report_html(sample_report());
  EXPECT_EQ(lower(html).find("<script"), std::string::npos) << "no script element at all, from data or otherwise";
  EXPECT_NE(html.find(escaped(kHostileName)), std::string::npos) << "the run name, escaped";
  EXPECT_NE(html.find(escaped(kHostileValue)), std::string::npos) << "the config value, escaped";
  EXPECT_NE(html.find("&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
  for (const char* reference : {"http://", "https://", "url(", "@import", " src=", "<link", "//fonts"})
    EXPECT_EQ(lower(html).find(reference), std::string::npos) << reference;
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(html.find("<style>"), std::string::npos) << "inline CSS";
  EXPECT_NE(html.find("@media print"), std::string::npos);
  EXPECT_NE(html.find("break-inside: avoid"), std::string::npos) << "charts never split across PDF pages";
}

TEST(ReportHtml, EachChartIsAnSvgWithItsSeries) {
  const std::string html = report_html(sample_report());
  const auto charts = charts_by_label(html);
  const std::map<std::string, std::vector<std::string>> expected = {
      {"Throughput per step", {"tokens/s"}},
      {"Reward per step (critic/score/mean)", {"critic/score/mean"}},
      {"Phase breakdown per step (slowest rank per phase)",
       {"switch/train_to_rollout", "gen", "old_log_prob", "update_actor", "other"}},
      {"Per-rank mean time per phase", {"rank 0", "rank 1"}},
      {"Weight switch against its wire bound (mean per switch, slowest rank)",
       {"pack", "transfer", "wait", "unaccounted", "free_cache", "wire bound"}},
      {"Memory over the run", {"rank 0 allocated", "rank 0 reserved", "rank 1 allocated", "rank 1 reserved"}},
      {"Scaling along &#39;world&#39; (strong)", {"world (ref cell 1: world=1,mode=naive)", "ideal"}},
  };
  ASSERT_EQ(charts.size(), expected.size());
  for (const auto& [label, names] : expected) {
    ASSERT_TRUE(charts.count(label)) << label;
    EXPECT_EQ(series_names(charts.at(label)), names) << label;
  }
  // Throughput: five steps, each a polyline vertex and a marked point; step 2 = 8000 tokens / 4 s.
  const auto& throughput = charts.at("Throughput per step");
  EXPECT_EQ(count(throughput, "<circle"), 5u);
  EXPECT_NE(throughput.find("<title>tokens/s: step 2, 2000 tokens/s</title>"), std::string::npos);
  // Phase bars: step 3's gen is 0.6 × 4.2 = 2.52 s of its 4.2 s; 5 phases × 5 steps = 25 bars.
  const auto& phases = charts.at("Phase breakdown per step (slowest rank per phase)");
  EXPECT_NE(phases.find("<title>gen, step 3: 2.52 s of 4.2 s</title>"), std::string::npos);
  EXPECT_EQ(count(phases, "<rect"), 25u + 5u) << "25 bars and 5 legend swatches";
  // The bound: 60 ms drawn beneath the 372 ms measured bar of train_to_rollout.
  const auto& bound = charts.at("Weight switch against its wire bound (mean per switch, slowest rank)");
  EXPECT_NE(bound.find("<title>train_to_rollout, wire bound: 60 ms</title>"), std::string::npos);
  EXPECT_NE(bound.find("<title>train_to_rollout, wait: 150 ms of 372 ms</title>"), std::string::npos);
  // Memory: the first sample of rank 0 is 2.2 s after the run started ((3.2e9 − 1e9) ns), at 2.0 GiB.
  EXPECT_NE(charts.at("Memory over the run").find("<title>rank 0 allocated: t = 2.2 s, 2 GiB</title>"),
            std::string::npos);
  // No chart is empty: every series draws at least one mark.
  for (const auto& [label, svg] : charts)
    EXPECT_GE(count(svg, "<rect") + count(svg, "<polyline"), series_names(svg).size()) << label;
}

TEST(ReportMarkdown, SameTablesWithCellsEscaped) {
  const auto report = sample_report();
  const std::string md = report_markdown(report);
  for (const auto& f : report.runs[0].findings) {
    EXPECT_NE(md.find(f.rule), std::string::npos);
    if (f.rule != "straggler") {
      EXPECT_NE(md.find(f.title), std::string::npos) << f.title;
    }
  }
  EXPECT_NE(md.find("Rank 1 is the straggler &lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
  EXPECT_EQ(lower(md).find("<script"), std::string::npos);
  EXPECT_NE(md.find("| mean step | 4.3 s |"), std::string::npos);
  EXPECT_NE(md.find("| gen | 2580 | 60.0 % |"), std::string::npos);
  // Per-step numbers stand in for the charts: step 2 = 8000 / 4 = 2000 tokens/s, reward 0.2.
  EXPECT_NE(md.find("| 2 | 4000 | 1 | 372 | 2400 | 400 | 800 | 28.0 | 2000 | 0.2 |"), std::string::npos) << md;
  // The config value: `|` escaped, newline as <br>, specials as entities; the table stays one row.
  EXPECT_NE(md.find("&lt;script&gt;alert(1)&lt;/script&gt; say \"hi\", it's<br>ok \\| yes"), std::string::npos);
  std::istringstream lines(md);
  for (std::string line; std::getline(lines, line);)
    if (!line.empty() && line.front() == '|') {
      EXPECT_EQ(line.back(), '|') << "a table row broken by data: " << line;
    }
  EXPECT_NE(md.find("**timing_s/step**"), std::string::npos) << "the increasing trend is emphasised";
  // tokens/s went up, and up is better: old median 200, new (1000/4.4 + 1000/4.2)/2 = 232.68 (+16.3 %).
  EXPECT_NE(md.find("### Step metrics"), std::string::npos);
  EXPECT_NE(md.find("| **tokens/s** | **200** | **232.7** | **+16.3 %** |"), std::string::npos) << md;
  EXPECT_NE(md.find("significantly better"), std::string::npos);
  EXPECT_NE(md.find("| world (ref cell 1: world=1,mode=naive) | strong | 4 | 61.1 % | 61.1 % |"), std::string::npos);
  // As the HTML: the summary (ranked findings, the matrix) and the comparison before the run's detail,
  // each suggestion once.
  const auto summary = md.find("## Summary");
  const auto matrix = md.find("### Matrix 3");
  const auto comparison = md.find("## Comparison");
  const auto run = md.find("| mean step |");
  ASSERT_NE(summary, std::string::npos);
  EXPECT_LT(summary, md.find("2.58 s of the 4.3 s step at stake"));
  EXPECT_LT(summary, matrix);
  EXPECT_LT(matrix, comparison);
  EXPECT_LT(comparison, run);
  for (const auto& f : report.runs[0].findings)
    if (!f.suggestion.empty()) {
      EXPECT_EQ(count(md, "Suggestion: " + f.suggestion.substr(0, 20)), 1u) << f.suggestion;
    }
}

TEST(ReportCsv, TidyRowsThatReadBackIntact) {
  const auto report = sample_report();
  const auto rows = csv_rows(report_csv(report));
  const auto name = find_row(rows, "run", "name");
  ASSERT_TRUE(name);
  EXPECT_EQ(name->value, kHostileName) << "quotes, comma-free newline and <script> survive";
  EXPECT_EQ(name->run_id, "7");
  ASSERT_TRUE(find_row(rows, "config", "trainer.experiment_name"));
  EXPECT_EQ(find_row(rows, "config", "trainer.experiment_name")->value, kHostileValue);
  ASSERT_TRUE(find_row(rows, "config_diff", "trainer.experiment_name/new"));
  EXPECT_EQ(find_row(rows, "config_diff", "trainer.experiment_name/new")->value, kHostileValue);
  // Findings: key = rule, value = title, unit = severity; evidence with its newline intact.
  for (const auto& f : report.runs[0].findings) {
    const auto row = find_row(rows, "finding", f.rule);
    ASSERT_TRUE(row) << f.rule;
    EXPECT_EQ(row->value, f.title);
    EXPECT_EQ(find_row(rows, "finding", f.rule + "/evidence")->value, f.evidence);
    EXPECT_EQ(find_row(rows, "finding", f.rule + "/suggestion")->value, f.suggestion)
        << "a newline without quotes or commas is quoted too";
  }
  EXPECT_EQ(find_row(rows, "finding", "rollout-dominates")->unit, "critical");
  EXPECT_EQ(find_row(rows, "finding", "switch-over-bound")->rank, "1");
  EXPECT_EQ(find_row(rows, "finding", "switch-over-bound")->step, "4");
  // Throughput per step: 8000 / 4.2 = 1904.7619...
  ASSERT_TRUE(find_row(rows, "throughput", "tokens_per_s", "3"));
  EXPECT_NEAR(std::stod(find_row(rows, "throughput", "tokens_per_s", "3")->value), 8000.0 / 4.2, 1e-9);
  EXPECT_EQ(find_row(rows, "step_metric", "timing_s/step", "5")->value, "4.6");
  EXPECT_EQ(find_row(rows, "step_metric", "timing_s/step", "5")->unit, "s");
  // One row per observation: 2 ranks × 5 steps × (step + 4 phases) per-rank phase times; 2 ranks ×
  // 5 steps × 2 samples × (t_s, phase, allocated, reserved, active) memory rows.
  std::map<std::string, int> per_section;
  for (const auto& r : rows) ++per_section[r.section];
  EXPECT_EQ(per_section["phase_rank"], 2 * 5 * 5);
  EXPECT_EQ(per_section["memory"], 2 * 5 * 2 * 5);
  EXPECT_EQ(per_section["switch"], 4 * (3 + 4));  // 4 steps: 3 rows rollout_to_train, 4 with the bound
  const auto t_s = find_row(rows, "memory", "t_s", "1");
  ASSERT_TRUE(t_s);
  EXPECT_NEAR(std::stod(t_s->value), 2.2, 1e-12) << "(2e9 + 0.2 × 6e9 − 1e9) ns after the run started";
  EXPECT_NEAR(std::stod(find_row(rows, "matrix_cell", "cell 3/scaling/world/efficiency_strong")->value), 11.0 / 18.0,
              1e-12);
  EXPECT_NEAR(std::stod(find_row(rows, "compare", "step/change")->value), -0.14, 1e-12);
}

TEST(ReportJson, CarriesWhatTheHtmlShowsAndReadsBackIntact) {
  const auto report = sample_report();
  const json j = json::parse(report_json(report).dump());
  ASSERT_EQ(j.at("runs").size(), 1u);
  const auto& run = j.at("runs")[0];
  EXPECT_EQ(run.at("run").at("name"), kHostileName);
  EXPECT_EQ(run.at("config").at("trainer.experiment_name"), kHostileValue);
  EXPECT_EQ(run.at("layout").at("algorithm.adv_estimator"), "grpo");
  EXPECT_EQ(run.at("run").at("started"), "2025-06-01T12:00:00Z");
  ASSERT_EQ(run.at("findings").size(), 3u);
  EXPECT_EQ(run.at("findings")[0].at("title"), report.runs[0].findings[0].title);
  EXPECT_EQ(run.at("findings")[0].at("severity"), "critical");
  EXPECT_EQ(run.at("findings")[1].at("rank"), 1);
  EXPECT_EQ(run.at("findings")[2].at("evidence"), report.runs[0].findings[2].evidence);
  EXPECT_TRUE(run.at("findings")[0].at("rank").is_null());
  EXPECT_DOUBLE_EQ(run.at("summary").at("mean_step_s"), 4.3);
  EXPECT_NEAR(run.at("summary").at("tokens_per_s").get<double>(), 32000.0 / 17.2, 1e-9);
  ASSERT_EQ(run.at("throughput").size(), 5u);
  EXPECT_DOUBLE_EQ(run.at("throughput")[1].at("tokens_per_s"), 2000.0);
  EXPECT_DOUBLE_EQ(run.at("reward")[4].at("critic/score/mean"), 0.4);
  EXPECT_EQ(run.at("phases").at("steps").size(), 5u);
  EXPECT_NEAR(run.at("phases").at("share").at("gen").get<double>(), 0.6, 1e-12);
  EXPECT_NEAR(run.at("phases").at("rank_mean_phase_s").at("0").at("gen").get<double>(), 0.9 * 2.58, 1e-12);
  EXPECT_NEAR(run.at("switches").at("directions")[0].at("over_bound").get<double>(), 6.2, 1e-12);
  EXPECT_TRUE(run.at("switches").at("directions")[1].at("wire_bound_s").is_null());
  EXPECT_EQ(run.at("memory").at("timeline").size(), 2u);
  EXPECT_EQ(run.at("memory").at("timeline")[0].at("allocated_gib").size(), 10u);
  EXPECT_EQ(run.at("temporal").at("source"), "kernels");
  EXPECT_DOUBLE_EQ(run.at("temporal").at("overlap")[1].at("overlap_ratio"), 0.25);
  EXPECT_EQ(run.at("stragglers").at("straggler_rank"), 1);
  EXPECT_TRUE(run.at("trends")[0].at("increasing").get<bool>());
  const auto& c = j.at("comparison");
  EXPECT_EQ(c.at("config_diff")[1].at("new"), kHostileValue);
  EXPECT_TRUE(c.at("config_diff")[2].at("new").is_null());
  EXPECT_NEAR(c.at("phases")[0].at("change").get<double>(), -0.14, 1e-12);
  EXPECT_TRUE(c.at("phases")[0].at("significant").get<bool>()) << "4 v 4 fully separated: exact p = 2/70 < 0.05";
  ASSERT_FALSE(c.at("metrics").empty());
  EXPECT_EQ(c.at("metrics")[0].at("metric"), "tokens/s");
  EXPECT_EQ(c.at("metrics")[0].at("better"), "higher");
  EXPECT_EQ(c.at("metrics")[0].at("new").at("n"), 4);
  EXPECT_TRUE(c.at("metrics")[0].at("significant").get<bool>()) << "4 v 4 fully separated";
  const auto& m = j.at("matrix");
  EXPECT_EQ(m.at("cells").size(), 3u);
  ASSERT_EQ(m.at("scaling_curves").size(), 1u);
  EXPECT_EQ(m.at("scaling_curves")[0].at("efficiency")[2][0], 4.0);
  EXPECT_NEAR(m.at("scaling_curves")[0].at("efficiency")[2][1].get<double>(), 11.0 / 18.0, 1e-12);
  // The summary: the findings ranked by step time at stake (0.6 × 4.3 s first), the verdict.
  ASSERT_EQ(j.at("summary").at("findings").size(), 3u);
  EXPECT_EQ(j.at("summary").at("findings")[0].at("rule"), "rollout-dominates");
  EXPECT_NEAR(j.at("summary").at("findings")[0].at("seconds_at_stake").get<double>(), 0.6 * 4.3, 1e-9);
  EXPECT_FALSE(j.at("summary").at("verdict").empty());
}

TEST(ReportWriter, ParsesFormatNamesAndWritesEachTextFormat) {
  EXPECT_EQ(parse_report_format("html"), ReportFormat::kHtml);
  EXPECT_EQ(parse_report_format("pdf"), ReportFormat::kPdf);
  EXPECT_EQ(parse_report_format("md"), ReportFormat::kMarkdown);
  EXPECT_EQ(parse_report_format("csv"), ReportFormat::kCsv);
  EXPECT_EQ(parse_report_format("json"), ReportFormat::kJson);
  try {
    parse_report_format("docx");
    FAIL() << "docx accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("html, pdf, md, csv or json"), std::string::npos) << e.what();
  }
  const auto report = sample_report();
  const auto dir = hs::reports::testing::temp_dir("report_writer") / "nested dir";
  write_report(report, ReportFormat::kHtml, (dir / "r.html").string());
  write_report(report, ReportFormat::kMarkdown, (dir / "r.md").string());
  write_report(report, ReportFormat::kCsv, (dir / "r.csv").string());
  write_report(report, ReportFormat::kJson, (dir / "r.json").string());
  EXPECT_EQ(read_file(dir / "r.html"), report_html(report));
  EXPECT_EQ(read_file(dir / "r.md"), report_markdown(report));
  EXPECT_EQ(read_file(dir / "r.csv"), report_csv(report));
  EXPECT_EQ(json::parse(read_file(dir / "r.json")), report_json(report));
}

TEST(ReportPdf, ChromiumPrintsTheFindings) {
  if (!chromium_available())
    GTEST_SKIP() << "no Chromium on PATH or in $HS_CHROMIUM: install the Debian package chromium "
                    "(scripts/install-deps.sh) to test the PDF export";
  const auto report = sample_report();
  const auto dir = hs::reports::testing::temp_dir("report_pdf") / "a dir with spaces";
  const auto pdf = dir / "sample report.pdf";
  write_report(report, ReportFormat::kPdf, pdf.string());
  const std::string bytes = read_file(pdf);
  ASSERT_GT(bytes.size(), 1000u);
  EXPECT_EQ(bytes.substr(0, 5), "%PDF-");
  if (!on_path("pdftotext"))
    GTEST_SKIP() << "the PDF was written; install poppler-utils (scripts/install-deps.sh) to check its text";
  const auto text_path = dir / "sample report.txt";
  const std::string command = "pdftotext '" + pdf.string() + "' '" + text_path.string() + "'";
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  const std::string text = collapse_spaces(read_file(text_path));
  for (const auto& f : report.runs[0].findings)
    if (f.rule != "straggler") {
      EXPECT_NE(text.find(f.title), std::string::npos) << f.title << "\n--- pdftotext:\n" << text;
    }
  EXPECT_NE(text.find("Rank 1 is the straggler <script>alert(1)</script>"), std::string::npos)
      << "the escaped title prints as its text";
  EXPECT_NE(text.find("Weight switch"), std::string::npos);
  // The headings became the PDF's outline (--generate-pdf-document-outline): an /Outlines tree.
  EXPECT_NE(bytes.find("/Outlines"), std::string::npos) << "no document outline in the PDF";
}

TEST(ReportPdf, FailuresSayWhatToDo) {
  const auto report = sample_report();
  const auto dir = hs::reports::testing::temp_dir("report_pdf_errors");
  const auto message = [&](const char* chromium, const char* path_env) -> std::string {
    ScopedEnv env("HS_CHROMIUM", chromium);
    ScopedEnv path("PATH", path_env);
    try {
      write_report_pdf(report, (dir / "x.pdf").string());
    } catch (const std::runtime_error& e) {
      return e.what();
    }
    return "(no error)";
  };
  const auto absent = message(nullptr, (dir / "empty-bin").c_str());
  EXPECT_NE(absent.find("install it with scripts/install-deps.sh (Debian package chromium)"), std::string::npos) << absent;
  const auto bad_env = message((dir / "no-such-chromium").c_str(), std::getenv("PATH"));
  EXPECT_NE(bad_env.find("HS_CHROMIUM="), std::string::npos) << bad_env;
  // A "Chromium" that fails: its exit status and stderr come back in the message.
  const auto fake = dir / "fake chromium";
  {
    std::ofstream script(fake);
    script << "#!/bin/sh\necho 'cannot open display: fake failure' >&2\nexit 3\n";
  }
  std::filesystem::permissions(fake, std::filesystem::perms::owner_all);
  const auto failed = message(fake.c_str(), std::getenv("PATH"));
  EXPECT_NE(failed.find("exit status 3"), std::string::npos) << failed;
  EXPECT_NE(failed.find("cannot open display: fake failure"), std::string::npos) << failed;
  EXPECT_FALSE(std::filesystem::exists(dir / "x.pdf"));
}
