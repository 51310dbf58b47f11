// report_export.cpp — the viewer's report export through the reports library (report_export.h).
#include "hybridscope/viewer/report_export.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <ctime>
#include <exception>
#include <filesystem>
#include <stdexcept>

#include "hybridscope/reports/bench_summary.h"
#include "hybridscope/reports/diagnosis.h"
#include "hybridscope/reports/run_analysis.h"
#include "hybridscope/reports/run_compare.h"
#include "hybridscope/reports/switch_analysis.h"

#ifndef HS_VERSION_STRING
#define HS_VERSION_STRING "0.0.0"
#endif

namespace hs::viewer {
namespace {

// ISO 8601 UTC, as `hybridscope report` stamps its reports.
std::string utc_now() {
  const auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string file_name(const std::string& path) { return std::filesystem::path(path).filename().string(); }

}  // namespace

reports::ReportFormat report_format_for_path(const std::string& path) {
  std::string suffix = std::filesystem::path(path).extension().string();
  std::transform(suffix.begin(), suffix.end(), suffix.begin(), [](unsigned char c) { return std::tolower(c); });
  if (suffix == ".htm") suffix = ".html";
  if (suffix == ".markdown") suffix = ".md";
  if (suffix.empty() || suffix == ".")
    throw std::invalid_argument("cannot tell the report format of " + path +
                                ": end the file name in .html, .pdf, .md, .csv or .json");
  try {
    return reports::parse_report_format(suffix.substr(1));
  } catch (const std::invalid_argument&) {
    throw std::invalid_argument("cannot write a report as " + suffix + " (" + path +
                                "): end the file name in .html, .pdf, .md, .csv or .json");
  }
}

ReportExport export_report(const std::vector<RunRef>& runs, const std::string& output_path,
                           const std::string& comm_bench) {
  ReportExport out;
  out.path = output_path;
  try {
    const auto format = report_format_for_path(output_path);
    switch (format) {
      case reports::ReportFormat::kHtml: out.format = "html"; break;
      case reports::ReportFormat::kPdf: out.format = "pdf"; break;
      case reports::ReportFormat::kMarkdown: out.format = "md"; break;
      case reports::ReportFormat::kCsv: out.format = "csv"; break;
      case reports::ReportFormat::kJson: out.format = "json"; break;
    }
    if (runs.empty()) throw std::invalid_argument("no run is selected: select one run (or several to compare) first");

    reports::Report report;
    report.generated_at = utc_now();
    report.hybridscope_version = HS_VERSION_STRING;
    for (const auto& ref : runs) {
      const reports::RunDatabase db(ref.path);
      reports::AnalysisOptions options;
      options.warmup_steps = ref.warmup_steps;
      const std::string bench = comm_bench.empty() ? comm_bench_beside(ref.path) : comm_bench;
      if (!bench.empty()) options.links = reports::load_comm_bench(bench);
      reports::RunReport r;
      r.label = ref.label;
      r.analysis = reports::analyze_run(reports::load_run(db, ref.run_id), options);
      r.findings = reports::diagnose(r.analysis);
      out.findings += r.findings.size();
      report.runs.push_back(std::move(r));
      if (std::find(report.sources.begin(), report.sources.end(), ref.path) == report.sources.end())
        report.sources.push_back(ref.path);
    }
    const auto& first = report.runs.front().analysis.data.run;
    if (runs.size() == 1) {
      report.title = "hybridscope report: " + first.name + " (run " + std::to_string(first.id) + " of " +
                     file_name(runs.front().path) + ")";
    } else {
      report.title = "hybridscope report: " + std::to_string(runs.size()) + " runs against run " +
                     std::to_string(first.id) + " of " + file_name(runs.front().path);
      report.comparison = reports::compare_runs(report.runs[0].analysis.data, report.runs[1].analysis.data,
                                                std::max(runs[0].warmup_steps, runs[1].warmup_steps));
      out.compared = true;
    }
    if (report.sources.size() == 1) {
      const reports::RunDatabase db(runs.front().path);
      const auto matrices = db.matrices();
      if (!matrices.empty()) {
        report.matrix = reports::summarize_matrix(db, matrices.back().id);
        out.matrix = true;
      }
    }
    out.runs = report.runs.size();
    reports::write_report(report, format, output_path);
  } catch (const std::exception& e) {
    out.error = e.what();
    if (out.error.empty()) out.error = "the report could not be written to " + output_path;
  }
  return out;
}

}  // namespace hs::viewer
