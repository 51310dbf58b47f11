// main.cpp — the `hybridscope` command. main() wires subcommands to the libraries and turns
// their typed errors into a message and a non-zero exit; it computes nothing itself.
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "bench_command.h"
#include "check_command.h"
#include "checkpoint_command.h"
#include "config_command.h"
#include "export_trace_command.h"
#include "hybridscope/bench/matrix.h"
#include "hybridscope/bench/sim/hardware.h"
#include "hybridscope/bench/slurm_job.h"
#include "hybridscope/probes/recorder.h"
#include "hybridscope/reports/chrome_trace.h"
#include "hybridscope/reports/run_database.h"
#include "hybridscope/trainer/config/config.h"
#include "hybridscope/trainer/data/dataset.h"
#include "hybridscope/trainer/dist/layout.h"
#include "hybridscope/trainer/dist/process_group.h"
#include "hybridscope/trainer/memory/cpu_heap.h"
#include "import_command.h"
#include "launch_command.h"
#include "matrix_command.h"
#include "merge_command.h"
#include "report_command.h"
#include "reshard_plan_command.h"
#include "simulate_command.h"
#include "switch_bench_command.h"
#include "train_command.h"

namespace {

std::string join_command_line(int argc, char** argv) {
  std::string out;
  for (int i = 0; i < argc; ++i) {
    if (i) out += ' ';
    out += argv[i];
  }
  return out;
}

// A process started by `launch` or `bench` (HS_PARENT_PID set) gets SIGTERM when that parent
// dies, so that ranks never outlive a killed launcher or runner; a parent already gone (the race
// between spawn and prctl) ends it at once.
void die_with_parent() {
  const char* parent = std::getenv("HS_PARENT_PID");
  if (!parent) return;
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (std::to_string(::getppid()) != parent) {
    fmt::print(stderr, "hybridscope: the process that started this one (pid {}) is gone; exiting\n", parent);
    std::exit(1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  die_with_parent();
  hs::trainer::configure_cpu_heap();  // glibc's thresholds for LibTorch's CPU tensors (cpu_heap.h)
  hs::trainer::install_cpu_block_cache();  // and the blocks above them kept for reuse (cpu_heap.h)
  CLI::App app{"hybridscope: a PPO/GRPO trainer instrumented for profiling RL post-training of LLMs"};
  app.set_version_flag("--version", std::string("hybridscope ") + HS_VERSION_STRING);
  app.require_subcommand(1);

  // train, config
  hs::cli::TrainArgs train_args;
  auto* train = hs::cli::add_train_command(app, train_args);
  hs::cli::ConfigArgs config_args;
  auto* config_cmd = hs::cli::add_config_command(app, config_args);

  // export-trace
  hs::cli::ExportTraceArgs export_args;
  auto* export_trace = hs::cli::add_export_trace_command(app, export_args);

  // launch
  hs::cli::LaunchArgs launch_args;
  auto* launch = hs::cli::add_launch_command(app, launch_args);

  // merge, checkpoint merge
  hs::cli::MergeArgs merge_args;
  auto* merge = hs::cli::add_merge_command(app, merge_args);
  hs::cli::CheckpointMergeArgs checkpoint_args;
  auto* checkpoint_merge = hs::cli::add_checkpoint_command(app, checkpoint_args);

  // reshard-plan
  hs::cli::ReshardPlanArgs reshard_args;
  auto* reshard_plan = hs::cli::add_reshard_plan_command(app, reshard_args);

  // switch-bench
  hs::cli::SwitchBenchArgs switch_bench_args;
  auto* switch_bench = hs::cli::add_switch_bench_command(app, switch_bench_args);

  // matrix plan
  hs::cli::MatrixArgs matrix_args;
  auto* matrix = hs::cli::add_matrix_command(app, matrix_args);

  // bench, summary, compare
  hs::cli::BenchArgs bench_args;
  auto* bench_cmd = hs::cli::add_bench_command(app, bench_args);
  hs::cli::SummaryArgs summary_args;
  auto* summary_cmd = hs::cli::add_summary_command(app, summary_args);
  hs::cli::CompareArgs compare_args;
  auto* compare_cmd = hs::cli::add_compare_command(app, compare_args);

  // check: the GPU records' kernel -> range correlation
  hs::cli::CheckArgs check_args;
  auto* check_cmd = hs::cli::add_check_command(app, check_args);
  // import: another framework's run (Kineto traces, verl's metrics) into a run database
  hs::cli::ImportArgs import_args;
  auto* import_cmd = hs::cli::add_import_command(app, import_args);
  // diagnose, report
  hs::cli::DiagnoseArgs diagnose_args;
  auto* diagnose_cmd = hs::cli::add_diagnose_command(app, diagnose_args);
  hs::cli::ReportArgs report_args;
  auto* report_cmd = hs::cli::add_report_command(app, report_args);

  // simulate
  hs::cli::SimulateArgs simulate_args;
  auto* simulate_cmd = hs::cli::add_simulate_command(app, simulate_args);

  // `launch [options] -- command...`: what follows `--` belongs to the ranks, untouched by parsing.
  int parse_argc = argc;
  if (argc > 1 && std::string(argv[1]) == "launch") {
    for (int i = 2; i < argc; ++i) {
      if (std::string(argv[i]) == "--") {
        launch_args.command.assign(argv + i + 1, argv + argc);
        parse_argc = i;
        break;
      }
    }
  }
  // Every usage error exits 2, as docs/cli.md says: CLI11_PARSE would return CLI11's own codes
  // (a --config or --hardware file that does not exist fails CLI::ExistingFile's check with
  // ValidationError, 105). app.exit() prints the message (or the help, or the version) and returns
  // CLI11's code, 0 for --help and --version.
  try {
    app.parse(parse_argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }

  try {
    if (export_trace->parsed()) return hs::cli::run_export_trace(export_args);
    if (reshard_plan->parsed()) return hs::cli::run_reshard_plan(reshard_args);
    if (switch_bench->parsed()) return hs::cli::run_switch_bench(switch_bench_args);
    if (launch->parsed()) return hs::cli::run_launch(launch_args);
    if (matrix->parsed()) return hs::cli::run_matrix_plan(matrix_args);
    if (bench_cmd->parsed()) {
      bench_args.command_line = join_command_line(argc, argv);
      return hs::cli::run_bench(bench_args);
    }
    if (summary_cmd->parsed()) return hs::cli::run_summary(summary_args);
    if (compare_cmd->parsed()) return hs::cli::run_compare(compare_args);
    if (check_cmd->parsed()) return hs::cli::run_check(check_args);
    if (import_cmd->parsed()) {
      import_args.command_line = join_command_line(argc, argv);
      return hs::cli::run_import(import_args);
    }
    if (diagnose_cmd->parsed()) return hs::cli::run_diagnose(diagnose_args);
    if (report_cmd->parsed()) return hs::cli::run_report(report_args);
    if (simulate_cmd->parsed()) return hs::cli::run_simulate(simulate_args);
    if (checkpoint_merge->parsed()) return hs::cli::run_checkpoint_merge(checkpoint_args);
    if (merge->parsed()) return hs::cli::run_merge(merge_args);
    if (config_cmd->parsed()) return hs::cli::run_config(config_args);
    if (train->parsed()) {
      train_args.command_line = join_command_line(argc, argv);
      return hs::cli::run_train(train_args);
    }
    return 2;  // unreachable: require_subcommand(1) leaves one of the above parsed
  } catch (const hs::trainer::ConfigError& e) {
    fmt::print(stderr, "config error: {}\n", e.what());
    return 2;
  } catch (const hs::bench::SlurmError& e) {
    fmt::print(stderr, "slurm error: {}\n", e.what());
    return 2;
  } catch (const hs::bench::MatrixError& e) {
    fmt::print(stderr, "matrix spec error: {}\n", e.what());
    return 2;
  } catch (const hs::trainer::DistError& e) {
    fmt::print(stderr, "distributed error: {}\n", e.what());
    return 1;
  } catch (const hs::bench::sim::SimError& e) {
    fmt::print(stderr, "simulate: {}\n", e.what());
    return 2;
  } catch (const hs::trainer::LayoutError& e) {
    fmt::print(stderr, "layout error: {}\n", e.what());
    return 2;
  } catch (const hs::trainer::DataError& e) {
    fmt::print(stderr, "data error: {}\n", e.what());
    return 2;
  } catch (const hs::reports::RunDatabaseError& e) {
    fmt::print(stderr, "run database error: {}\n", e.what());
    return 2;
  } catch (const hs::reports::ExportError& e) {
    fmt::print(stderr, "export error: {}\n", e.what());
    return 1;
  } catch (const hs::probes::RecorderError& e) {
    fmt::print(stderr, "run database error: {}\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
}
