// bench_compare.h — `hybridscope compare OLD.sqlite NEW.sqlite`: what changed between two
// benchmark databases, with significance (docs/benchmarks.md, "Compare").
//
// Two matrices: cells are matched by their overrides (and rank count; the step count is left out
// so that a longer run still matches); each metric's samples are the per-repetition values. Two
// files of plain runs, or a cell with one repetition on each side: one value per run would leave
// nothing to test, so step_s, tokens_per_s and mfu take the per-step samples of the measured steps
// from run_compare.h's compare_runs() — the function behind `report --compare`, so both commands
// give the same p — and switch_s the measured switches. For each metric: change = (new − old)/|old|
// of the medians and a two-sided Mann–Whitney U test (alpha 0.05, fewer than 9 samples a side
// flagged unreliable), as Google Benchmark's compare.py; for step times also MLPerf's trimmed
// mean. A metric with one value a side is shown but not tested.
//
// Whatever makes the two sides not like for like — a matrix against a plain run, different rank
// counts, config keys that differ — is listed in `mismatches` and printed before the table.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hybridscope/reports/run_compare.h"
#include "hybridscope/reports/run_database.h"
#include "hybridscope/reports/statistics.h"

namespace hs::reports {

struct MetricComparison {
  std::string metric;
  Spread old_values, new_values;
  double change = 0.0;            // (new − old)/|old| of the medians; NaN when old is 0
  std::optional<MannWhitney> test;  // absent when a side has fewer than 2 samples (nothing to test)
  std::string samples = "repetitions";  // what one sample is: "repetitions", "steps" or "switches"
  bool significant = false;       // p < kAlpha
  bool worse = false;             // the change goes against the metric's better direction
  std::optional<double> old_trimmed_mean, new_trimmed_mean;  // step_s only
};

struct CellComparison {
  std::string name;  // the new cell's name (or the run's)
  std::vector<MetricComparison> metrics;
};

struct Comparison {
  std::string old_path, new_path;
  std::string mode;  // "matrix" | "run"
  std::string old_label, new_label;  // "matrix 3 'demo'" / "run 7"
  std::vector<CellComparison> cells;
  std::vector<std::string> only_old, only_new;  // cells without a partner
  /// What makes the comparison not like for like, one sentence each, said before any number:
  /// "old is matrix 3 'demo', new a plain run: comparing the last run of each", "rank count
  /// differs: old 4, new 1", "config differs in 2 keys: k (old a, new b), ...".
  std::vector<std::string> mismatches;
  std::vector<ConfigDifference> config_diff;  // every differing key (mismatches names the first few)
};

/// Compares the newest matrices of both files, or their last runs when either holds no matrix.
/// With `old_run` or `new_run`, those runs (the other side's last run where one is not given),
/// never the matrices: two runs of one file (two imported traces) compare so. Throws
/// RunDatabaseError when a file holds neither, or not the run named.
Comparison compare_databases(const RunDatabase& old_db, const RunDatabase& new_db,
                             std::optional<std::int64_t> old_run = std::nullopt,
                             std::optional<std::int64_t> new_run = std::nullopt);

/// The table: per cell and metric, old and new medians, change, p-value and a verdict.
std::string format_comparison(const Comparison& comparison);
nlohmann::json comparison_json(const Comparison& comparison);

/// Cells whose step time got significantly slower by more than `percent` (the --fail-if-slower gate).
std::vector<std::string> significant_slowdowns(const Comparison& comparison, double percent);

}  // namespace hs::reports
