// export_trace_command.cpp — `hybridscope export-trace RUN.sqlite -o trace.json [--run ID]`.
// Wiring only: reading and formatting live in hs::reports.
#include "export_trace_command.h"

#include <chrono>
#include <cstdio>

#include <fmt/format.h>

#include "hybridscope/reports/chrome_trace.h"
#include "hybridscope/reports/run_database.h"

namespace hs::cli {

CLI::App* add_export_trace_command(CLI::App& app, ExportTraceArgs& args) {
  auto* cmd = app.add_subcommand("export-trace",
                                 "Export a run as Chrome Trace Event JSON (open in ui.perfetto.dev or chrome://tracing)");
  cmd->add_option("database", args.db_path, "Run database (SQLite) written by `hybridscope train`")->required();
  cmd->add_option("--output,-o", args.out_path, "Trace file to write (JSON)")->required();
  cmd->add_option("--run", args.run_id, "Run id in the database (default: the last run)");
  return cmd;
}

int run_export_trace(const ExportTraceArgs& args) {
  const auto started = std::chrono::steady_clock::now();
  const hs::reports::RunDatabase db(args.db_path);
  const auto run = args.run_id ? db.run(*args.run_id) : db.last_run();
  fmt::print("reading run {} '{}' ({}, {} rank{}) from {}\n", run.id, run.name, run.status, run.world_size,
             run.world_size == 1 ? "" : "s", db.path());
  const auto summary = hs::reports::export_chrome_trace(db, run.id, args.out_path);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  fmt::print("wrote {}: {} events ({} ranges, {} comm ops, {} switch spans, {} GPU activities, {} CUDA API calls, "
             "{} flow events, {} metric and {} memory counter samples, {} metadata) in {:.2f} s\n",
             args.out_path, summary.total(), summary.complete_events, summary.comm_events, summary.switch_events,
             summary.gpu_events, summary.api_events, summary.flow_events, summary.counter_events,
             summary.memory_counter_events, summary.metadata_events, seconds);
  if (summary.skipped_metrics > 0)
    fmt::print("note: {} metric values left out (no step range for their step, or not finite)\n",
               summary.skipped_metrics);
  if (summary.complete_events == 0)
    fmt::print("note: run {} recorded no ranges (did it stop before its first step?)\n", run.id);
  fmt::print("open it in https://ui.perfetto.dev or chrome://tracing\n");
  return 0;
}

}  // namespace hs::cli
