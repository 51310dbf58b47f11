// run_data.h — everything one run recorded, loaded once into plain value structs for the analyses
// (phase_breakdown.h, temporal_breakdown.h, switch_analysis.h, memory_analysis.h, imbalance.h,
// trends.h) and the diagnosis rules. Every list is sorted here by start time (then rank), never by
// insert order: merged rank files and other writers give no order guarantee (profiling-facts,
// "Diagnosis pitfalls").
//
// Not a database handle: after load_run() nothing refers to SQLite. Fixtures in tests build a
// RunData by hand or load one from a database the test wrote.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "hybridscope/reports/intervals.h"
#include "hybridscope/reports/run_database.h"
#include "hybridscope/reports/run_records.h"

namespace hs::reports {

/// The run's records (RunRecords, read by read_run_records() as the Chrome trace's are), sorted by
/// load_run(): ranges by start_ns, then rank, tid, depth; metrics by step, then name; comm_ops,
/// switches and gpu by start_ns, then rank; memory and kv_pool by ts_ns, then rank.
struct RunData : RunRecords {
  std::string source_path;  // the database it came from ("" for a hand-built fixture)
  RunSummary run;
  std::vector<std::pair<std::string, std::string>> config;  // resolved (dotted key, value), by key
  std::vector<KernelStatRow> kernel_stats; // v10 aggregates of every kernel, copy and memset, by rank, step
  std::vector<StreamBusyRow> stream_busy;  // v10, by rank, step, device, stream

  /// The value of a step metric; nullopt when the step did not record it.
  std::optional<double> metric(std::int64_t step, const std::string& name) const;
  /// Every recorded (step, value) of a metric, by step.
  std::vector<std::pair<std::int64_t, double>> metric_series(const std::string& name) const;
  /// Tokens per second of each step: perf/total_num_tokens / timing_s/step (steps with both and a
  /// positive step time), by step. The one definition the report and the viewer chart.
  std::vector<std::pair<std::int64_t, double>> tokens_per_s_series() const;
  /// A resolved config value; nullopt when the run's config lacks the key.
  std::optional<std::string> config_value(const std::string& key) const;
  /// The config value as a number; nullopt when absent or not numeric.
  std::optional<double> config_number(const std::string& key) const;
  /// Steps that have a `step` range, ascending (without ranges: the steps with a `timing_s/step` metric).
  std::vector<std::int64_t> steps() const;
};

/// Loads a run of `db` and sorts every list by start time. Throws RunDatabaseError (kUnknownRun).
RunData load_run(const RunDatabase& db, std::int64_t run_id);

/// Sorts every list of `data` the way load_run() leaves them (for hand-built fixtures).
void sort_by_start(RunData& data);

/// The steps an analysis measures: every step after the first `warmup_steps` recorded ones
/// (a run's first step pays for allocator growth and first-touch; docs/reports.md).
std::vector<std::int64_t> measured_steps(const RunData& data, int warmup_steps);

/// Which step a record belongs to — the one rule every analysis uses (phase breakdown, switches,
/// memory and KV samples, collectives, overlap, trends, the matrix summary, the viewer): a record
/// of rank r belongs to step N only when it starts inside r's `step` range of step N
/// ([start, end)). The trainer stamps every record with its current step number and keeps that
/// number after the step ends: the final validation after the last step runs under it (its
/// `testing` range and the generation, switches, memory samples and collectives beneath it), so
/// the number alone would count the validation in the last step. A rank that recorded no `step`
/// range at all (probes off, an import without step ranges, a hand-built fixture) keeps the
/// recorded number.
class StepWindows {
 public:
  /// Every `step` range of `data`, per rank.
  explicit StepWindows(const RunData& data);

  /// The step a record of `rank` starting at `start_ns` belongs to; `recorded_step` when the rank
  /// has no `step` range; nullopt when it starts inside none of the rank's step ranges.
  std::optional<std::int64_t> step_of(int rank, std::int64_t start_ns, std::int64_t recorded_step) const;
  /// Whether that step is one of `steps`.
  bool in(const std::set<std::int64_t>& steps, int rank, std::int64_t start_ns, std::int64_t recorded_step) const;
  /// The rank's `step` ranges of `steps`, sorted by start (empty when it has none).
  std::vector<Interval> ranges(int rank, const std::set<std::int64_t>& steps) const;
  /// Whether the rank recorded any `step` range.
  bool has_ranges(int rank) const { return by_rank_.count(rank) != 0; }

 private:
  struct Window {
    Interval range;
    std::int64_t step = 0;
  };
  std::map<int, std::vector<Window>> by_rank_;  // rank -> its step ranges, by start
};

}  // namespace hs::reports
