// bench_command.cpp — `hybridscope bench`, `summary` and `compare` (see bench_command.h).
#include "bench_command.h"

#include <cstdio>
#include <fstream>

#include <fmt/format.h>

#include "hybridscope/bench/matrix.h"
#include "hybridscope/bench/runner.h"
#include "hybridscope/reports/bench_compare.h"
#include "hybridscope/reports/bench_summary.h"
#include "hybridscope/reports/run_database.h"

namespace hs::cli {

namespace {

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  if (!(out << text)) throw std::runtime_error("cannot write " + path);
}

}  // namespace

CLI::App* add_bench_command(CLI::App& app, BenchArgs& args) {
  auto* cmd = app.add_subcommand(
      "bench", "Run a benchmark matrix (bench/matrices/*.yaml): every cell as real ranks, into one database");
  cmd->add_option("spec", args.spec_path, "Matrix spec (YAML), e.g. bench/matrices/demo-cpu.yaml")->required();
  cmd->add_option("--db", args.db_path, "Database for the matrix and its runs (default out/bench.sqlite)");
  cmd->add_option("--log-dir", args.log_dir, "Logs of every run (default: next to --db, <name>-logs/)");
  cmd->add_flag("--resume", args.resume, "Continue the newest matrix of this name in --db: run only what is missing");
  cmd->add_option("--json", args.json_path, "Also write the summary as JSON to this file");
  cmd->add_option("--csv", args.csv_path, "Also write the summary as CSV to this file");
  cmd->add_option("--cv-threshold", args.cv_threshold, "Flag a cell noisy above this step-time CV (default 0.05)")
      ->check(CLI::Range(0.0, 10.0));
  auto* slurm = cmd->add_flag("--slurm", args.slurm,
                              "Submit every run as a Slurm batch job (sbatch; ranks started by srun) instead of "
                              "launching it here; SLURM_CONF names the cluster (scripts/slurm-cluster.sh starts one)");
  cmd->add_option("--slurm-partition", args.slurm_partition, "With --slurm: the partition (sbatch --partition)")
      ->needs(slurm);
  cmd->add_option("--slurm-arg", args.slurm_args,
                  "With --slurm: one more sbatch argument, e.g. --slurm-arg=--time=30 (repeatable)")
      ->needs(slurm)
      ->allow_extra_args(false);
  return cmd;
}

CLI::App* add_summary_command(CLI::App& app, SummaryArgs& args) {
  auto* cmd = app.add_subcommand("summary", "Summarise a benchmark matrix of a database (table, --json or --csv)");
  cmd->add_option("db", args.db_path, "Database written by `hybridscope bench`")->required();
  cmd->add_option("--matrix", args.matrix_id, "Matrix id (default: the newest)");
  auto* json = cmd->add_flag("--json", args.json, "Print JSON");
  cmd->add_flag("--csv", args.csv, "Print CSV (one row per cell and metric)")->excludes(json);
  cmd->add_option("--cv-threshold", args.cv_threshold, "Flag a cell noisy above this step-time CV (default 0.05)")
      ->check(CLI::Range(0.0, 10.0));
  return cmd;
}

CLI::App* add_compare_command(CLI::App& app, CompareArgs& args) {
  auto* cmd = app.add_subcommand(
      "compare", "Compare two benchmark databases (matrices cell by cell, or runs phase by phase) with a U test");
  cmd->add_option("old", args.old_path, "The baseline database")->required();
  cmd->add_option("new", args.new_path, "The database to judge")->required();
  cmd->add_option("--old-run", args.old_run, "Run id in old to compare (default: its matrix, else its last run)");
  cmd->add_option("--new-run", args.new_run, "Run id in new to compare (default: its matrix, else its last run)");
  cmd->add_flag("--json", args.json, "Print JSON");
  cmd->add_option("--fail-if-slower", args.fail_if_slower,
                  "Exit 1 when a cell's step time is significantly slower (p < 0.05) by more than PCT percent")
      ->check(CLI::Range(0.0, 1e6));
  return cmd;
}

int run_bench(const BenchArgs& args) {
  const bench::MatrixSpec spec = bench::load_matrix(args.spec_path);
  const auto cells = bench::expand_matrix(spec);
  bench::RunnerOptions options;
  options.db_path = args.db_path;
  options.log_dir = args.log_dir;
  options.resume = args.resume;
  options.command_line = args.command_line;
  options.slurm.enabled = args.slurm;
  options.slurm.partition = args.slurm_partition;
  options.slurm.sbatch_args = args.slurm_args;
  const auto result = bench::run_matrix(spec, cells, options);

  const reports::RunDatabase db(args.db_path);
  const auto summary = reports::summarize_matrix(db, result.matrix_id, args.cv_threshold);
  fmt::print("\n=== hybridscope bench summary ===\n{}", reports::format_summary(summary));
  if (!args.json_path.empty()) write_file(args.json_path, reports::summary_json(summary).dump(2) + "\n");
  if (!args.csv_path.empty()) write_file(args.csv_path, reports::summary_csv(summary));
  fmt::print("database          {}\n", args.db_path);
  if (!args.json_path.empty()) fmt::print("summary JSON      {}\n", args.json_path);
  if (!args.csv_path.empty()) fmt::print("summary CSV       {}\n", args.csv_path);
  fmt::print("this invocation   {} runs completed, {} failed{}\n", result.completed, result.failed,
             result.already_done ? fmt::format(", {} completed earlier", result.already_done) : "");
  std::fflush(stdout);
  if (result.interrupted) {
    fmt::print(stderr, "bench: interrupted; `hybridscope bench {} --db {} --resume` runs what is missing\n",
               args.spec_path, args.db_path);
    return 130;
  }
  return result.failed > 0 ? 1 : 0;
}

int run_summary(const SummaryArgs& args) {
  const reports::RunDatabase db(args.db_path);
  const auto matrices = db.matrices();
  if (matrices.empty())
    throw reports::RunDatabaseError(reports::RunDatabaseError::Kind::kUnknownRun,
                                    args.db_path + " holds no benchmark matrix (`hybridscope bench SPEC --db " +
                                        args.db_path + "` writes one)");
  const auto summary =
      reports::summarize_matrix(db, args.matrix_id ? args.matrix_id : matrices.back().id, args.cv_threshold);
  if (args.json)
    fmt::print("{}\n", reports::summary_json(summary).dump(2));
  else if (args.csv)
    fmt::print("{}", reports::summary_csv(summary));
  else
    fmt::print("{}", reports::format_summary(summary));
  return 0;
}

int run_compare(const CompareArgs& args) {
  const reports::RunDatabase old_db(args.old_path);
  const reports::RunDatabase new_db(args.new_path);
  const auto run_id = [](std::int64_t id) { return id > 0 ? std::optional<std::int64_t>(id) : std::nullopt; };
  const auto comparison = reports::compare_databases(old_db, new_db, run_id(args.old_run), run_id(args.new_run));
  if (args.json)
    fmt::print("{}\n", reports::comparison_json(comparison).dump(2));
  else
    fmt::print("{}", reports::format_comparison(comparison));
  std::fflush(stdout);
  if (args.fail_if_slower >= 0) {
    const auto slower = reports::significant_slowdowns(comparison, args.fail_if_slower);
    for (const auto& line : slower) fmt::print(stderr, "compare: significantly slower: {}\n", line);
    if (!slower.empty()) return 1;
  }
  return 0;
}

}  // namespace hs::cli
