// bench_summary.h — what a benchmark matrix measured (docs/benchmarks.md, "Summary"): per run, the
// scalar metrics of its measured steps; per cell, their median and spread over the repetitions;
// per rank axis, speedup and strong or weak scaling efficiency against the reference cell. Read
// by `hybridscope bench` and `hybridscope summary` (console, --json, --csv), `hybridscope compare`
// and the viewer.
//
// Definitions (anchors: verl's metric names, nccl-tests, NeMo-RL, profiling-facts "Scaling"):
// - step_s: timing_s/step (the slowest rank's step) averaged over the measured steps;
// - tokens_per_s: Σ perf/total_num_tokens / Σ timing_s/step; per rank: ÷ world size;
// - gen_tokens_per_s: response tokens / generation time (from timing_per_token_ms/gen);
//   gen_s_per_response: timing_s/gen ÷ (data.train_batch_size × rollout.n);
// - share/<phase>: timing_s/<phase> ÷ timing_s/step;
// - switch_s: for each train→rollout switch, the slowest rank (NeMo-RL's refit latency); a run's
//   value is the median of those maxima, and a cell's (summary, report, viewer, JSON alike) is the
//   median of its runs' values, as for every other metric. The cell also keeps the pooled
//   distribution of every switch (switch_latency, "switch_latency_s (pooled)") for its spread; its
//   median is not the cell's switch time;
//   switch_bytes: bytes all ranks received in that switch (median over switches);
// - comm_share: each rank's time in collectives — the union of their intervals within its measured
//   `step` ranges, never their summed durations (comm_time.h) — ÷ its step time, averaged over
//   ranks: at most 1;
//   busbw_gbps/<op>: the median bus bandwidth of that collective (nccl-tests factors);
// - peak_mem_gb: max perf/max_memory_allocated_gb; reserved_slack_max, external_frag_max: the
//   worst memory-sample ratios (absent on CPU); mfu: perf/mfu/actor averaged.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hybridscope/reports/run_database.h"
#include "hybridscope/reports/statistics.h"

namespace hs::reports {

/// How to print and compare a metric.
struct MetricInfo {
  std::string key;
  std::string label;  // column heading
  std::string unit;
  bool lower_is_better = true;
};
/// The description of a metric key (share/*, busbw_gbps/* included).
MetricInfo metric_info(const std::string& key);

/// One run's metrics over its measured steps (steps after `warmup_steps`).
struct RunMetrics {
  std::int64_t run_id = 0;
  int world_size = 1;
  std::map<std::string, double> values;  // metric key -> value; a metric the run lacks is absent
  std::vector<double> step_seconds;      // timing_s/step of each measured step
  std::vector<double> switch_seconds;    // slowest rank of each measured train->rollout switch
};

/// Reads a run's metrics. Throws RunDatabaseError when the run does not exist.
RunMetrics run_metrics(const RunDatabase& db, std::int64_t run_id, int warmup_steps);

/// Speedup and efficiency of a cell along one rank axis, against the reference cell (the same
/// levels on every other axis, the axis's baseline level or else its fewest ranks).
struct ScalingPoint {
  std::string axis;
  std::string kind;  // strong | weak
  int reference_ranks = 0;
  int reference_cell = 0;  // cell_index
  double speedup = 0.0;
  double efficiency = 0.0;             // time form: strong t0·n0/(n·t), weak t0/t
  double throughput_efficiency = 0.0;  // X_N / ((N/N0)·X_N0) on tokens/s
};

struct CellSummary {
  MatrixCellRow cell;
  int completed = 0;
  int failed = 0;
  int interrupted = 0;
  std::vector<std::string> errors;        // first line of each failed run's error
  std::map<std::string, Spread> metrics;  // over the completed repetitions
  std::optional<Spread> switch_latency;   // pooled slowest-rank times of every measured switch
  bool noisy = false;                     // step_s CV above the threshold
  std::vector<ScalingPoint> scaling;
  std::vector<RunMetrics> runs;
};

struct MatrixSummary {
  MatrixRow matrix;
  std::vector<MatrixAxisRow> axes;
  std::vector<CellSummary> cells;  // by cell_index
  double cv_threshold = 0.05;
  std::vector<std::string> environments;  // distinct "host, cpu (n cpus), torch X, hybridscope Y (commit)"
};

/// Summarises a matrix of `db`; a cell with no completed run has no metrics.
MatrixSummary summarize_matrix(const RunDatabase& db, std::int64_t matrix_id, double cv_threshold = 0.05);

/// The console table: one line per cell (levels, ranks, repetitions, step time with spread and CV,
/// tokens/s, switch latency and bytes, communication share, peak memory, MFU, scaling), then the
/// phase shares, then failures, noisy cells and the environment.
std::string format_summary(const MatrixSummary& summary);
nlohmann::json summary_json(const MatrixSummary& summary);
/// Long form: one row per cell and metric (cell_index, cell, metric, n, median, min, max, q1, q3, cv).
std::string summary_csv(const MatrixSummary& summary);

}  // namespace hs::reports
