// import_command.h — `hybridscope import INPUT... --db RUN.sqlite`: another framework's run into a
// run database (docs/importing.md, docs/cli.md): PyTorch-profiler (Kineto) traces, one per rank
// (files or a folder), Nsight Systems SQLite exports (told apart by content), and/or verl's step
// metrics from its console log or JSONL. Computes nothing itself: hs_importer does.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace hs::cli {

struct ImportArgs {
  std::vector<std::string> inputs;  // traces (.json, .json.gz), nsys exports (.sqlite), or folders of them
  std::string db_path = "hybridscope.db";
  std::string metrics_path;         // verl console log or JSONL; alone: a metrics-only run
  std::string framework;            // a built-in phase map only ("verl", "nemo-rl", "slime"); empty: all
  std::string phase_map_path;       // the user's map (YAML or JSON), over the built-in one
  std::string name;                 // runs.name
  bool no_cpu_ops = false;          // only the annotations, not every aten:: operator
  long long first_step = 1;
  std::string rank_map;             // nsys: "pid=rank,..."
  std::string command_line;
};

CLI::App* add_import_command(CLI::App& app, ImportArgs& args);

/// Imports and prints what was written and what the source lacked. 0 on success, 2 on bad input
/// (the error names the file and the fix).
int run_import(const ImportArgs& args);

}  // namespace hs::cli
