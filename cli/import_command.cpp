// import_command.cpp — see import_command.h. The import itself is hs_importer's.
#include "import_command.h"

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>

#include "hybridscope/importer/kineto_import.h"
#include "hybridscope/importer/nsys_import.h"
#include "hybridscope/importer/phase_map.h"
#include "hybridscope/importer/verl_metrics.h"

namespace hs::cli {

namespace {

// The Nsight Systems exports among `inputs` (files, or the *.sqlite exports of a folder); empty when
// the inputs are Kineto traces. Throws ImportError on a .nsys-rep or on a mix of both kinds.
std::vector<std::string> nsys_exports(const std::vector<std::string>& inputs) {
  namespace fs = std::filesystem;
  std::vector<std::string> exports;
  std::size_t others = 0;
  for (const std::string& in : inputs) {
    importer::refuse_nsys_report(in);
    std::error_code ec;
    if (fs::is_directory(in, ec)) {
      std::vector<std::string> found;
      for (const auto& e : fs::directory_iterator(in, ec)) {
        const std::string p = e.path().string();
        importer::refuse_nsys_report(p);
        if (e.is_regular_file() && e.path().extension() == ".sqlite" && importer::is_nsys_export(p)) found.push_back(p);
      }
      std::sort(found.begin(), found.end());
      if (found.empty()) ++others;
      exports.insert(exports.end(), found.begin(), found.end());
    } else if (importer::is_nsys_export(in)) {
      exports.push_back(in);
    } else {
      ++others;
    }
  }
  if (!exports.empty() && others > 0)
    throw importer::ImportError("the inputs mix Nsight Systems exports and other files: import one kind of source at a time");
  return exports;
}

void print_notes_and_run(const importer::ImportSummary& s, const std::string& db_path) {
  for (const auto& note : s.notes) fmt::print("note: {}\n", note);
  fmt::print("run {} in {} (source {})\n", s.run_id, db_path, s.source);
}

int run_import_checked(const ImportArgs& args);

// The built-in maps (one with --framework), the user's file over them. The user's map is held in a
// named variable: iterating `from_file(...).entries()` would read a destroyed temporary.
importer::PhaseMap phase_map(const ImportArgs& args) {
  importer::PhaseMap phases = args.framework.empty() ? importer::PhaseMap::all_builtin()
                                                     : importer::PhaseMap::builtin(args.framework);
  if (!args.phase_map_path.empty()) {
    const importer::PhaseMap user = importer::PhaseMap::from_file(args.phase_map_path);
    for (const auto& [name, phase] : user.entries()) phases.set(name, phase);
  }
  return phases;
}

}  // namespace

CLI::App* add_import_command(CLI::App& app, ImportArgs& args) {
  auto* cmd = app.add_subcommand("import", "Import another framework's run: PyTorch-profiler (Kineto) traces, one per rank, "
                                           "Nsight Systems SQLite exports, and verl's step metrics (docs/importing.md)");
  cmd->add_option("inputs", args.inputs, "trace files (.json, .json.gz), Nsight Systems exports (.sqlite) or folders of "
                                         "them; none with --metrics alone");
  cmd->add_option("--db", args.db_path, "run database to add the run to (created if needed)");
  cmd->add_option("--metrics", args.metrics_path, "verl's console log or file-logger JSONL of the same run")
      ->check(CLI::ExistingFile);
  cmd->add_option("--framework", args.framework, "use only this built-in phase map: verl, nemo-rl, slime (default: all)");
  cmd->add_option("--phase-map", args.phase_map_path, "YAML or JSON {their_name: hybridscope_phase}, over the built-in map")
      ->check(CLI::ExistingFile);
  cmd->add_option("--name", args.name, "the run's name (default: the first file's)");
  cmd->add_flag("--no-cpu-ops", args.no_cpu_ops, "import the annotations only, not every CPU operator");
  cmd->add_option("--first-step", args.first_step, "number of the trace's first step (default 1, as verl counts)");
  cmd->add_option("--rank-map", args.rank_map, "Nsight Systems exports: pid=rank,... for processes whose rank the export does not say");
  return cmd;
}

int run_import(const ImportArgs& args) {
  try {
    return run_import_checked(args);
  } catch (const importer::ImportError& e) {
    fmt::print(stderr, "hybridscope import: {}\n", e.what());
    return 2;
  }
}

namespace {

int run_import_checked(const ImportArgs& args) {
  if (args.inputs.empty() && args.metrics_path.empty()) {
    fmt::print(stderr, "hybridscope import: give trace files or folders, or --metrics LOG\n");
    return 2;
  }
  importer::VerlMetrics metrics;
  if (!args.metrics_path.empty()) metrics = importer::read_verl_metrics(args.metrics_path);
  importer::ImportSummary s;
  const std::vector<std::string> exports = nsys_exports(args.inputs);
  if (!args.rank_map.empty() && exports.empty())
    throw importer::ImportError("--rank-map applies to Nsight Systems exports only (Kineto traces carry their rank)");
  if (!exports.empty()) {
    importer::NsysImportOptions options;
    options.phases = phase_map(args);
    options.run_name = args.name;
    options.command_line = args.command_line;
    options.first_step = args.first_step;
    options.step_metrics = metrics.steps;
    if (!args.rank_map.empty()) options.rank_map = importer::parse_rank_map(args.rank_map);
    s = importer::import_nsys(exports, args.db_path, options);
    fmt::print("read {} rows ({:.1f} MiB of SQLite) from {} export(s): {} process(es) as ranks\n", s.events,
               static_cast<double>(s.bytes) / 1048576.0, exports.size(), s.ranks);
    fmt::print("ranges {} ({} phases, {} steps), kernels {}, memcpy {}, memset {}, runtime calls {}; not imported: {} "
               "rows of other kinds (NVTX marks, names and unended ranges; CUDA backtrace rows)\n",
               s.ranges, s.phase_ranges, s.steps, s.kernels, s.memcpys, s.memsets, s.runtime_calls, s.skipped);
  } else if (args.inputs.empty()) {
    s = importer::import_verl_metrics(metrics, args.db_path, args.name.empty() ? args.metrics_path : args.name,
                                      args.command_line);
  } else {
    importer::KinetoImportOptions options;
    options.phases = phase_map(args);
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
  print_notes_and_run(s, args.db_path);
  return 0;
}

}  // namespace

}  // namespace hs::cli
