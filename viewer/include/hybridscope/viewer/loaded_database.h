// loaded_database.h — what the viewer knows about an opened database, as plain value structs
// (hotspot's pattern): load_database() and diagnose_run() run on a worker thread, read the file
// through hs::reports only, and return structs that the Qt models on the GUI thread adapt.
// Nothing here includes Qt or keeps an SQLite handle alive, and neither function throws: a bad
// file comes back as a struct whose `error` says what was wrong and what to do.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "hybridscope/reports/bench_summary.h"
#include "hybridscope/viewer/chart_data.h"
#include "hybridscope/reports/diagnosis.h"
#include "hybridscope/reports/memory_analysis.h"
#include "hybridscope/reports/run_compare.h"
#include "hybridscope/reports/run_database.h"
#include "hybridscope/viewer/run_page_data.h"

namespace hs::viewer {

/// One run as the runs browser lists it: the `runs` row, its layouts from the resolved config,
/// and two cheap throughput numbers from `step_metrics` alone (no ranges, no collectives).
struct RunEntry {
  reports::RunSummary run;
  std::string matrix_cell;   // "demo-cpu / world=2, mode=hybrid #3" for a matrix run; empty otherwise
  int warmup_steps = 1;      // the matrix's warm-up for a matrix run, else AnalysisOptions' default
  std::string training;      // "fsdp", "megatron tp2 pp1", ... (actor_rollout_ref.actor.*)
  std::optional<int> rollout_tp;  // actor_rollout_ref.rollout.tensor_model_parallel_size
  std::string algorithm;     // algorithm.adv_estimator (grpo, gae, ...)
  int steps = 0;             // steps that recorded timing_s/step
  // Over the steps after `warmup_steps`, as bench_summary.h defines them:
  std::optional<double> mean_step_s;   // mean of timing_s/step (s)
  std::optional<double> tokens_per_s;  // Σ perf/total_num_tokens / Σ timing_s/step (tokens/s)
};

/// An opened database (a run file or a matrix file).
struct LoadedDatabase {
  std::string path;
  int schema_version = 0;
  std::vector<RunEntry> runs;                      // by run id
  std::vector<reports::MatrixSummary> matrices;    // by matrix id; empty for a file of plain runs
  std::vector<LineChartData> scaling_charts;       // the Scaling page's, every matrix (chart_data.h), titled with its name
  std::vector<std::string> warnings;               // parts that could not be read (e.g. one matrix)
  std::string error;                               // empty: loaded; else why nothing was

  bool ok() const { return error.empty(); }
};

/// Opens `path` read-only and reads its runs and matrices. Never throws: a missing, corrupt,
/// foreign or newer-schema file gives a LoadedDatabase with `error` set (RunDatabaseError's text).
LoadedDatabase load_database(const std::string& path);

/// The run page's numbers for one run: where its step time goes and what the rules found.
struct RunDiagnosis {
  std::string path;
  std::int64_t run_id = 0;
  std::string run_name;
  std::string breakdown_source;       // "ranges" | "step_metrics" (phase_breakdown.h)
  std::vector<std::string> phases;    // verl's order, each top-level phase followed by its sub-phases
  std::map<std::string, std::string> parent;  // sub-phase -> its top-level phase (phase_breakdown.h)
  std::map<std::string, double> mean_phase_s;  // s, over the measured steps
  std::map<std::string, double> share;         // mean_phase_s / mean_step_s
  std::string source = "hybridscope";  // runs.source: "hybridscope", or the importer's ("kineto", ...)
  std::string missing = "not recorded";  // RunSummary::missing(): how a number the run lacks is named
  std::string no_measured_steps;       // why_no_measured_steps(): why there is no mean step; empty: there is
  double mean_step_s = 0.0;
  std::size_t measured_steps = 0;
  std::vector<std::int64_t> measured;  // the measured steps themselves, ascending
  std::optional<double> tokens_per_s;
  std::optional<double> mfu;
  std::optional<double> comm_share;  // reports::comm_time: each rank's union of collectives ÷ its step time, mean
  std::vector<reports::Finding> findings;  // critical first (diagnose())
  // The run page's charts, built on the worker thread too (chart_data.h):
  std::vector<LineChartData> metric_charts;  // Metrics tab: one per charted step metric recorded
  StackedBarData step_phases;                // Phases tab: seconds per phase, per step
  StackedBarData rank_phases;                // Phases tab: mean seconds per phase, per rank
  // The Memory, Switch and Comm tabs (run_page_data.h), built on the worker thread too:
  reports::MemoryAnalysis memory;            // Memory tab's summary (memory_analysis.h, measured steps)
  std::vector<LineChartData> memory_charts;  // Memory tab: over time, a line per rank
  reports::SwitchAnalysis switches;          // Switch tab's summary per direction and the bandwidth used
  std::vector<SwitchTableRow> switch_rows;   // Switch tab: one per measured switch
  std::vector<StackedBarData> switch_bars;   // Switch tab: components per switch, a chart per direction
  std::string comm_bench_path;               // the micro-benchmark JSON the wire bound used; empty: none
  std::string comm_bench_error;              // why a comm-bench file found or chosen was not used
  std::vector<CommTableRow> comm_rows;       // Comm tab: per (op, group), measured steps
  std::string error;                         // empty: analysed

  bool ok() const { return error.empty(); }
};

/// load_run + analyze_run (warm-up `warmup_steps`) + diagnose for one run of `path`. Never throws.
/// The switch's wire bound uses communication micro-benchmarks (load_comm_bench) from `comm_bench`
/// when given, else from comm_bench_beside(path) when such a file exists, else the run's own
/// collectives; a comm-bench file that cannot be read is reported in `comm_bench_error` and left out.
RunDiagnosis diagnose_run(const std::string& path, std::int64_t run_id, int warmup_steps,
                          const std::string& comm_bench = {});

/// hs_comm_bench's JSON that belongs with the database at `path`: `comm-bench.json` in the
/// database's directory (`make demo` writes out/bench.sqlite beside out/comm-bench.json), else in
/// its `out/` subdirectory; empty when there is neither.
std::string comm_bench_beside(const std::string& path);

/// A run to compare: where it is and how many warm-up steps to leave out.
struct RunRef {
  std::string path;
  std::int64_t run_id = 0;
  int warmup_steps = 1;
  std::string label;  // how the Compare page names it; empty: "run 7 'name' (file)"
};

/// The Compare page's numbers: every run after the first against the first (the baseline).
struct RunsComparison {
  std::vector<std::string> labels;                 // one per run, baseline first ("run 7 'name' (file)")
  std::vector<reports::RunComparison> against;     // against[i]: the baseline (old) vs run i + 1 (new)
  std::vector<LineChartData> overlay_charts;       // every run's step metrics overlaid (overlay_metric_charts)
  std::string error;                               // empty: compared

  bool ok() const { return error.empty(); }
};

/// load_run for each run and compare_runs(baseline, run, max of the two warm-ups) for each run
/// after the first. Never throws: a run that cannot be read sets `error`.
RunsComparison compare_selected_runs(const std::vector<RunRef>& runs);

}  // namespace hs::viewer
