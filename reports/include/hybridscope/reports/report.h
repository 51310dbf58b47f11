// report.h — `hybridscope report`: one or more analysed runs (with their findings), an optional
// comparison against another database's run, and a matrix summary when the file holds a matrix,
// exported as self-contained HTML (inline SVG charts, no network), PDF (that HTML printed by
// headless Chromium), Markdown, tidy CSV (one row per observation) or JSON (everything the HTML
// shows). docs/reports.md describes every section.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hybridscope/reports/bench_summary.h"
#include "hybridscope/reports/diagnosis.h"
#include "hybridscope/reports/run_analysis.h"
#include "hybridscope/reports/run_compare.h"

namespace hs::reports {

struct RunReport {
  std::string label;  // where the run comes from, e.g. "cell world=2, hybridscope.reshard.mode=hybrid, repetition 5"; may be empty
  RunAnalysis analysis;
  std::vector<Finding> findings;
};

struct Report {
  std::string title;
  std::string generated_at;  // ISO 8601 UTC, set by the command
  std::string hybridscope_version;
  std::vector<std::string> sources;  // database paths
  std::vector<RunReport> runs;
  std::optional<RunComparison> comparison;  // --compare: the first run of `runs` against another file's
  std::optional<MatrixSummary> matrix;      // the file's newest matrix, when it holds one
};

enum class ReportFormat { kHtml, kPdf, kMarkdown, kCsv, kJson };
/// "html" | "pdf" | "md" | "csv" | "json" -> format; throws std::invalid_argument naming the choices.
ReportFormat parse_report_format(const std::string& name);

std::string report_html(const Report& report);
std::string report_markdown(const Report& report);
/// Tidy: columns section,run_id,rank,step,key,value,unit — one row per observation.
std::string report_csv(const Report& report);
nlohmann::json report_json(const Report& report);

/// Prints the HTML with headless Chromium (`chromium --headless --print-to-pdf`) into `pdf_path`.
/// Throws std::runtime_error when no Chromium is installed (naming `scripts/install-deps.sh`) or it fails.
void write_report_pdf(const Report& report, const std::string& pdf_path);

/// Writes `report` in `format` to `path` (parent directories created).
void write_report(const Report& report, ReportFormat format, const std::string& path);

}  // namespace hs::reports
