// report_content.h — what a report shows, decided once for every exporter (HTML, Markdown, CSV,
// JSON): the per-step series behind the charts, the memory timeline, the layout keys of the
// summary, the scaling curves of a matrix, and the text helpers (escaping, number formatting).
// Private to hs_reports. Reads only the plain structs of report.h; computes no analysis — the
// series are the recorded values, divided where the definition says so (tokens/s per step).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hybridscope/reports/report.h"
#include "text_format.h"

namespace hs::reports::detail {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;  // the trainer's *_gb metrics are GiB (kGiB)


// ---- text ----

/// & < > " ' replaced by entities: safe in HTML/SVG text and in attribute values of either quote.
std::string html_escape(const std::string& text);
/// A Markdown table cell: `|` escaped, newlines as <br> (escaped text, so no raw HTML from data),
/// and the HTML specials escaped (Markdown renderers pass raw HTML through).
std::string markdown_cell(const std::string& text);

// ---- runs ----

/// "run 7 'name'" — the label a report gives a run.
std::string run_label(const RunSummary& run);
/// A run's heading: its label (the matrix cell) before run_label(), when it has one.
std::string run_title(const RunReport& run);
/// Seconds shown as milliseconds in a table column headed "(ms)": "1502", "19.9", "0.014".
std::string ms_cell(double seconds);
/// UNIX-epoch ns as ISO 8601 UTC, "2025-06-01T12:00:00Z"; "" for 0 (unknown).
std::string iso_utc(std::int64_t unix_ns);
/// The layout and algorithm keys a summary lists, with the run's values, for the keys the run
/// has (actor strategy, megatron tp/pp, FSDP offload, rollout tp and n, adv_estimator, batch).
std::vector<std::pair<std::string, std::string>> layout_entries(const RunData& data);

/// critic/score/mean per step (the reward curve).
std::vector<std::pair<std::int64_t, double>> reward_per_step(const RunData& data);

/// One rank's memory over time: seconds since the run started (runs.start_unix_ns on the
/// monotonic clock: start_unix_ns − clock_offset_ns) and GiB.
struct RankMemoryTimeline {
  int rank = 0;
  std::vector<std::pair<double, double>> allocated_gib;
  std::vector<std::pair<double, double>> reserved_gib;  // empty where the device has no reserved pool
};
/// The run's memory samples per rank, by time.
std::vector<RankMemoryTimeline> memory_timeline(const RunData& data);
/// A sample's time in seconds since the run started (see RankMemoryTimeline).
double seconds_since_start(const RunSummary& run, std::int64_t monotonic_ns);

// ---- the summary every report opens with ----

/// One finding of the report, said once: the runs of a matrix fire the same rules cell after cell,
/// so findings are merged by (rule, range) across runs and ranks, and ranked by the step time at
/// stake — impact × the mean step of the run, the largest instance's — so the costliest comes first.
struct RankedFinding {
  Finding finding;               // the instance with the most step time at stake
  double seconds_at_stake = 0.0; // its impact × its run's mean step
  double step_s = 0.0;           // that run's mean step
  std::size_t run_index = 0;     // where that instance is (index into Report::runs)
  std::vector<std::size_t> runs; // every run it fired on, in report order
  std::size_t instances = 0;     // how many findings were merged into it
};
std::vector<RankedFinding> ranked_findings(const Report& report);

/// The report's verdict, a few sentences: the matrix's fastest cell and its scaling at the most
/// ranks, the costliest finding with its step time at stake, the comparison's step change.
std::vector<std::string> verdict(const Report& report, const std::vector<RankedFinding>& ranked);

// ---- matrix ----

/// The headline metric keys of a matrix's cell table, in column order, present in some cell.
std::vector<std::string> matrix_columns(const MatrixSummary& matrix);

/// One scaling curve: the cells of a rank axis that share a reference cell (the same levels on
/// every other axis), as (ranks, efficiency) points sorted by ranks.
struct ScalingCurve {
  std::string axis;
  std::string kind;   // strong | weak
  std::string label;  // "world (ref cell 1: world=1,mode=naive)"
  std::vector<std::pair<double, double>> efficiency;             // (ranks, time-form efficiency)
  std::vector<std::pair<double, double>> throughput_efficiency;  // (ranks, throughput-form efficiency)
};
std::vector<ScalingCurve> scaling_curves(const MatrixSummary& matrix);

}  // namespace hs::reports::detail
