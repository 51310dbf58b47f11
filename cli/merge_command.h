// merge_command.h — `hybridscope merge RUN.sqlite`: fold a multi-rank run's per-rank files
// (RUN.sqlite.rank<K>) into the run database (hs::probes::merge_rank_files; docs/cli.md).
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace hs::cli {

struct MergeArgs {
  std::string db_path;
};

/// Registers the subcommand on `app`, parsing into `args` (which must outlive parsing).
CLI::App* add_merge_command(CLI::App& app, MergeArgs& args);

/// Merges and prints what it merged. Throws hs::probes::RecorderError when a file cannot be read
/// or written.
int run_merge(const MergeArgs& args);

}  // namespace hs::cli
