// report_command.h — `hybridscope diagnose DB` (findings on the console) and `hybridscope report
// DB -f html|pdf|md|csv|json -o FILE` (docs/reports.md, docs/diagnosis.md). Both read a run or
// benchmark database with hs_reports; neither needs the trainer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace hs::cli {

/// What both commands share: which runs, and the inputs of the analyses.
struct AnalysisArgs {
  std::string db_path;
  std::vector<std::int64_t> run_ids;  // empty: the last run, or one run per cell of the newest matrix
  std::string comm_bench_path;        // empty: out/comm-bench.json when it exists
  std::string hardware_path;          // a bench/hardware/*.yaml whose link the weight sync is compared with
  int warmup_steps = -1;              // < 0: the matrix's warm-up setting, else 1
};

struct DiagnoseArgs {
  AnalysisArgs analysis;
  bool json = false;
  std::string fail_on;  // "", "warning" or "critical": exit 1 when a finding is at least this severe
};

struct ReportArgs {
  AnalysisArgs analysis;
  std::string compare_path;          // --compare OTHER.sqlite
  std::int64_t compare_run_id = 0;   // 0: OTHER's last run
  std::string format;                // empty: from the output's extension
  std::string output_path;
  std::string title;
};

CLI::App* add_diagnose_command(CLI::App& app, DiagnoseArgs& args);
CLI::App* add_report_command(CLI::App& app, ReportArgs& args);

/// Prints the findings of each selected run. 0, or 1 when --fail-on matched a finding.
int run_diagnose(const DiagnoseArgs& args);
/// Writes the report and prints its path.
int run_report(const ReportArgs& args);

}  // namespace hs::cli
