// export_trace_command.h — `hybridscope export-trace`: a run database to Chrome/Perfetto trace JSON.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

namespace hs::cli {

struct ExportTraceArgs {
  std::string db_path;
  std::string out_path;
  std::optional<std::int64_t> run_id;  // default: the last run in the file
};

/// Registers the subcommand on `app`, parsing into `args` (which must outlive parsing).
CLI::App* add_export_trace_command(CLI::App& app, ExportTraceArgs& args);

/// Runs the export, printing what it reads and writes. Throws hs::reports::RunDatabaseError or
/// hs::reports::ExportError; main() turns them into a message and an exit status.
int run_export_trace(const ExportTraceArgs& args);

}  // namespace hs::cli
