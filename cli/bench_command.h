// bench_command.h — `hybridscope bench` (run a matrix), `hybridscope summary` (what a matrix
// measured) and `hybridscope compare` (two databases, with significance). docs/benchmarks.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace hs::cli {

struct BenchArgs {
  std::string spec_path;
  std::string db_path = "out/bench.sqlite";
  std::string log_dir;
  bool resume = false;
  std::string json_path;  // also write the summary as JSON here
  std::string csv_path;   // and as CSV here
  double cv_threshold = 0.05;
  std::string command_line;
  bool slurm = false;                   // every run a Slurm job (bench/slurm_job.h)
  std::string slurm_partition;          // sbatch --partition
  std::vector<std::string> slurm_args;  // more sbatch arguments, as they are
};

struct SummaryArgs {
  std::string db_path;
  std::int64_t matrix_id = 0;  // 0: the newest
  bool json = false;
  bool csv = false;
  double cv_threshold = 0.05;
};

struct CompareArgs {
  std::string old_path, new_path;
  std::int64_t old_run = 0, new_run = 0;  // 0: matrices, or the last run
  bool json = false;
  double fail_if_slower = -1.0;  // percent; < 0: never fail
};

CLI::App* add_bench_command(CLI::App& app, BenchArgs& args);
CLI::App* add_summary_command(CLI::App& app, SummaryArgs& args);
CLI::App* add_compare_command(CLI::App& app, CompareArgs& args);

/// Runs the matrix, then prints its summary. Exit status: 0 when every run completed, 1 when a run
/// failed, 130 when interrupted (the database keeps what ran; --resume continues).
int run_bench(const BenchArgs& args);
int run_summary(const SummaryArgs& args);
/// 0, or 1 when --fail-if-slower found a significant slowdown beyond the threshold.
int run_compare(const CompareArgs& args);

}  // namespace hs::cli
