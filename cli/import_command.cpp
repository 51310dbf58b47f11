// import_command.cpp — see import_command.h. The import itself is hs_importer's.
#include "import_command.h"

#include <fmt/format.h>

#include "hybridscope/importer/kineto_import.h"
#include "hybridscope/importer/phase_map.h"
#include "hybridscope/importer/verl_metrics.h"

namespace hs::cli {

CLI::App* add_import_command(CLI::App& app, ImportArgs& args) {
  auto* cmd = app.add_subcommand("import", "Import another framework's run: PyTorch-profiler (Kineto) traces, one per rank, "
                                           "and verl's step metrics (docs/importing.md)");
  cmd->add_option("inputs", args.inputs, "trace files (.json, .json.gz) or folders of them; none with --metrics alone");
  cmd->add_option("--db", args.db_path, "run database to add the run to (created if needed)");
  cmd->add_option("--metrics", args.metrics_path, "verl's console log or file-logger JSONL of the same run")
      ->check(CLI::ExistingFile);
  cmd->add_option("--framework", args.framework, "use only this built-in phase map: verl, nemo-rl, slime (default: all)");
  cmd->add_option("--phase-map", args.phase_map_path, "YAML or JSON {their_name: hybridscope_phase}, over the built-in map")
      ->check(CLI::ExistingFile);
  cmd->add_option("--name", args.name, "the run's name (default: the first file's)");
  cmd->add_flag("--no-cpu-ops", args.no_cpu_ops, "import the annotations only, not every CPU operator");
  cmd->add_option("--first-step", args.first_step, "number of the trace's first step (default 1, as verl counts)");
  return cmd;
}

int run_import(const ImportArgs& args) {
  if (args.inputs.empty() && args.metrics_path.empty()) {
    fmt::print(stderr, "hybridscope import: give trace files or folders, or --metrics LOG\n");
    return 2;
  }
  importer::VerlMetrics metrics;
  if (!args.metrics_path.empty()) metrics = importer::read_verl_metrics(args.metrics_path);
  importer::ImportSummary s;
  if (args.inputs.empty()) {
    s = importer::import_verl_metrics(metrics, args.db_path, args.name.empty() ? args.metrics_path : args.name,
                                      args.command_line);
  } else {
    importer::KinetoImportOptions options;
    if (!args.framework.empty()) options.phases = importer::PhaseMap::builtin(args.framework);
    if (!args.phase_map_path.empty()) {
      // Held in a local: a range-for over entries() of the temporary would read a destroyed map.
      const auto user_map = importer::PhaseMap::from_file(args.phase_map_path);
      for (const auto& [name, phase] : user_map.entries()) options.phases.set(name, phase);
    }
    options.cpu_ops = !args.no_cpu_ops;
    options.run_name = args.name;
    options.command_line = args.command_line;
    options.first_step = args.first_step;
    options.step_metrics = metrics.steps;
    s = importer::import_kineto(importer::kineto_trace_files(args.inputs), args.db_path, options);
    fmt::print("read {} events ({:.1f} MiB of JSON) from {} rank(s)\n", s.events, static_cast<double>(s.bytes) / 1048576.0,
               s.ranks);
    fmt::print("ranges {} ({} phases, {} steps), kernels {}, memcpy {}, memset {}, runtime calls {}, collectives {}, "
               "memory samples {}; not imported: {} events of other kinds\n",
               s.ranges, s.phase_ranges, s.steps, s.kernels, s.memcpys, s.memsets, s.runtime_calls, s.collectives,
               s.memory_samples, s.skipped);
    if (s.nccl_without_metadata > 0)
      fmt::print("{} NCCL kernels carry no collective metadata (record_shapes off, or an older PyTorch): they are in "
                 "kernels, not comm_ops\n", s.nccl_without_metadata);
  }
  if (!metrics.steps.empty()) fmt::print("step metrics: {} steps from {}\n", metrics.steps.size(), args.metrics_path);
  for (const auto& note : s.notes) fmt::print("note: {}\n", note);
  fmt::print("run {} in {} (source {})\n", s.run_id, args.db_path, args.inputs.empty() ? "verl-log" : "kineto");
  return 0;
}

}  // namespace hs::cli
