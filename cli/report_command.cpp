// report_command.cpp — `hybridscope diagnose` and `hybridscope report` (see report_command.h).
#include "report_command.h"

#include <chrono>
#include <ctime>
#include <filesystem>
#include <stdexcept>

#include <fmt/format.h>

#include "hybridscope/bench/sim/hardware.h"
#include "hybridscope/reports/bench_summary.h"
#include "hybridscope/reports/diagnosis.h"
#include "hybridscope/reports/report.h"
#include "hybridscope/reports/rl_summary.h"
#include "hybridscope/reports/run_database.h"

#ifndef HS_VERSION_STRING
#define HS_VERSION_STRING "0.0.0"
#endif

namespace hs::cli {

namespace {

constexpr const char* kDefaultCommBench = "out/comm-bench.json";

void add_analysis_options(CLI::App* cmd, AnalysisArgs& args) {
  cmd->add_option("db", args.db_path, "Run or benchmark database (hybridscope train --db / hybridscope bench --db)")
      ->required();
  cmd->add_option("--run", args.run_ids,
                  "Run id(s) to analyse (default: the last run; for a benchmark database one run per cell of the "
                  "newest matrix)");
  cmd->add_option("--comm-bench", args.comm_bench_path,
                  "Communication micro-benchmark JSON (make comm-bench) for the switch's wire bound (default: "
                  "out/comm-bench.json when it exists, else the run's own collectives)");
  cmd->add_option("--hardware", args.hardware_path,
                  "Hardware description (bench/hardware/*.yaml, as simulate reads) whose link bandwidth the weight "
                  "sync is compared with: inter_node when the run's world exceeds devices_per_node, else intra_node "
                  "(default: the switch's bandwidth, from --comm-bench or the run's own collectives)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--warmup", args.warmup_steps,
                  "Steps left out of every mean (default: the matrix's warmup_steps, else 1)")
      ->check(CLI::Range(0, 1000000));
}

// The runs to analyse, each with the warm-up that applies to it.
struct Selection {
  struct Run {
    std::int64_t id = 0;
    int warmup_steps = 1;
    std::string label;  // the matrix cell it measured; empty for a plain run
  };
  std::vector<Run> runs;
  std::optional<reports::MatrixSummary> matrix;
};

Selection select_runs(const reports::RunDatabase& db, const AnalysisArgs& args) {
  Selection out;
  const auto matrices = db.matrices();
  int matrix_warmup = 1;
  if (!matrices.empty()) {
    out.matrix = reports::summarize_matrix(db, matrices.back().id);
    matrix_warmup = matrices.back().warmup_steps;
  }
  const int warmup = args.warmup_steps >= 0 ? args.warmup_steps : matrix_warmup;
  if (!args.run_ids.empty()) {
    for (const auto id : args.run_ids) {
      db.run(id);  // throws naming the runs present
      out.runs.push_back({id, warmup, ""});
    }
    return out;
  }
  if (out.matrix) {
    // One run per cell: the last completed repetition (the matrix's own order of cells).
    for (const auto& cell : out.matrix->cells)
      if (!cell.runs.empty())
        out.runs.push_back({cell.runs.back().run_id, warmup,
                            fmt::format("cell {} ({} rank{}), last of {} completed", cell.cell.name, cell.cell.ranks,
                                        cell.cell.ranks == 1 ? "" : "s", cell.runs.size())});
    if (!out.runs.empty()) return out;
  }
  out.runs.push_back({db.last_run().id, warmup, ""});
  return out;
}

std::vector<reports::LinkMeasurement> links_for(const AnalysisArgs& args) {
  if (!args.comm_bench_path.empty()) return reports::load_comm_bench(args.comm_bench_path);
  std::error_code ec;
  if (std::filesystem::is_regular_file(kDefaultCommBench, ec)) return reports::load_comm_bench(kDefaultCommBench);
  return {};
}

// The link a --hardware file gives a run: the level its ranks span (docs/metrics.md, "Weight sync").
void given_link(const AnalysisArgs& args, int world_size, reports::AnalysisOptions& options) {
  if (args.hardware_path.empty()) return;
  const auto hardware = bench::sim::read_hardware(args.hardware_path);
  const auto level = world_size > hardware.devices_per_node ? bench::sim::LinkLevel::kInterNode
                                                            : bench::sim::LinkLevel::kIntraNode;
  options.link_gbps = hardware.link(level).bandwidth_bytes_per_s / 1e9;
  options.link_source = fmt::format("{}: {} link, per device and direction ({})", args.hardware_path,
                                    bench::sim::link_level_name(level), hardware.name);
}

std::vector<reports::RunReport> analyse(const reports::RunDatabase& db, const Selection& selection,
                                        const std::vector<reports::LinkMeasurement>& links, bool progress,
                                        const AnalysisArgs& args) {
  std::vector<reports::RunReport> out;
  std::size_t i = 0;
  for (const auto& run : selection.runs) {
    if (progress && selection.runs.size() > 1)
      fmt::print(stderr, "analysing run {} ({}/{})\n", run.id, ++i, selection.runs.size());
    reports::AnalysisOptions options;
    options.warmup_steps = run.warmup_steps;
    options.links = links;
    reports::RunReport r;
    r.label = run.label;
    auto data = reports::load_run(db, run.id);
    given_link(args, data.run.world_size, options);
    r.analysis = reports::analyze_run(std::move(data), options);
    r.findings = reports::diagnose(r.analysis);
    out.push_back(std::move(r));
  }
  return out;
}

std::string utc_now() {
  const auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

CLI::App* add_diagnose_command(CLI::App& app, DiagnoseArgs& args) {
  auto* cmd = app.add_subcommand(
      "diagnose", "Why is the step slow? Findings with their evidence and the config keys to change (docs/diagnosis.md)");
  add_analysis_options(cmd, args.analysis);
  cmd->add_flag("--json", args.json, "Print the findings as JSON");
  cmd->add_option("--fail-on", args.fail_on, "Exit 1 when a finding is at least this severe (warning or critical)")
      ->check(CLI::IsMember({"warning", "critical"}));
  return cmd;
}

CLI::App* add_report_command(CLI::App& app, ReportArgs& args) {
  auto* cmd = app.add_subcommand(
      "report", "Export a report (HTML with charts, PDF, Markdown, CSV, JSON) of runs or a matrix (docs/reports.md)");
  add_analysis_options(cmd, args.analysis);
  cmd->add_option("-o,--output", args.output_path, "Output file, e.g. out/report.html")->required();
  cmd->add_option("-f,--format", args.format, "html, pdf, md, csv or json (default: from the output's extension)")
      ->check(CLI::IsMember({"html", "pdf", "md", "csv", "json"}));
  cmd->add_option("--compare", args.compare_path, "Compare the first analysed run against a run of this database");
  cmd->add_option("--compare-run", args.compare_run_id, "The run of --compare's database (default: its last run)");
  cmd->add_option("--title", args.title, "Report title (default: from the database's name)");
  return cmd;
}

int run_diagnose(const DiagnoseArgs& args) {
  const reports::RunDatabase db(args.analysis.db_path);
  const auto selection = select_runs(db, args.analysis);
  const auto runs = analyse(db, selection, links_for(args.analysis), !args.json, args.analysis);
  nlohmann::json json = nlohmann::json::array();
  bool failed = false;
  const auto threshold = args.fail_on == "critical" ? reports::Severity::kCritical : reports::Severity::kWarning;
  for (const auto& r : runs) {
    if (args.json)
      json.push_back({{"run_id", r.analysis.data.run.id},
                      {"label", r.label},
                      {"findings", reports::findings_json(r.findings)},
                      {"rl", reports::rl_summary_json(r.analysis)}});
    else
      fmt::print("{}{}\n", r.label.empty() ? "" : "=== " + r.label + " ===\n", reports::format_findings(r.analysis, r.findings));
    for (const auto& f : r.findings)
      if (!args.fail_on.empty() && f.severity >= threshold) failed = true;
  }
  if (args.json) fmt::print("{}\n", json.dump(2));
  return failed ? 1 : 0;
}

int run_report(const ReportArgs& args) {
  std::string format_name = args.format;
  if (format_name.empty()) {
    format_name = std::filesystem::path(args.output_path).extension().string();
    if (!format_name.empty()) format_name.erase(0, 1);  // ".html" -> "html"
    if (format_name.empty())
      throw std::invalid_argument("cannot tell the report format from " + args.output_path +
                                  ": give -f html|pdf|md|csv|json or an output ending in one of them");
  }
  const auto format = reports::parse_report_format(format_name);
  const reports::RunDatabase db(args.analysis.db_path);
  const auto selection = select_runs(db, args.analysis);
  const auto links = links_for(args.analysis);
  reports::Report report;
  report.title = !args.title.empty() ? args.title
                                     : "hybridscope report: " + std::filesystem::path(args.analysis.db_path).filename().string();
  report.generated_at = utc_now();
  report.hybridscope_version = HS_VERSION_STRING;
  report.sources = {args.analysis.db_path};
  report.matrix = selection.matrix;
  report.runs = analyse(db, selection, links, true, args.analysis);
  if (!args.compare_path.empty()) {
    const reports::RunDatabase other(args.compare_path);
    const auto other_id = args.compare_run_id > 0 ? args.compare_run_id : other.last_run().id;
    const int warmup = args.analysis.warmup_steps >= 0 ? args.analysis.warmup_steps : 1;
    report.sources.push_back(args.compare_path);
    report.comparison = reports::compare_runs(reports::load_run(other, other_id), report.runs.front().analysis.data, warmup);
  }
  reports::write_report(report, format, args.output_path);
  std::size_t findings = 0;
  for (const auto& r : report.runs) findings += r.findings.size();
  fmt::print("report            {} ({} run{}, {} finding{}{})\n", args.output_path, report.runs.size(),
             report.runs.size() == 1 ? "" : "s", findings, findings == 1 ? "" : "s",
             report.matrix ? ", matrix summary" : "");
  return 0;
}

}  // namespace hs::cli
