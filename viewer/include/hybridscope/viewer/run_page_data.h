// run_page_data.h — what the run page's Memory, Switch and Comm tabs show, as plain value structs
// built on the worker thread (diagnose_run) from the reports library's RunData and analyses. No Qt
// here: the tabs' models and charts (switch_model.h, comm_model.h, src/run_pages.h) only adapt,
// and tests check these numbers without rendering anything.
//
// Not a second analysis: the summaries (peaks, fragmentation, the switch's wire bound, busbw) are
// the reports library's (memory_analysis.h, switch_analysis.h, the recorder's comm_ops columns);
// this file only lays them out per rank, per switch and per (op, group).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hybridscope/reports/run_data.h"
#include "hybridscope/reports/switch_analysis.h"
#include "hybridscope/viewer/chart_data.h"

namespace hs::viewer {

/// Points a memory or KV-pool line keeps at most (chart_view draws every point it is given; a
/// long run samples memory at every phase boundary and on a timer: tens of thousands per rank).
inline constexpr std::size_t kMaxMemoryPointsPerSeries = 2000;

/// At most `max_points` of `points` (in x order): the points are cut into max_points / 2 runs of
/// consecutive points and each run keeps its lowest and its highest point, in x order, so that no
/// peak or trough of the line disappears. Returned unchanged when already short enough.
std::vector<std::pair<double, double>> decimate_min_max(const std::vector<std::pair<double, double>>& points,
                                                        std::size_t max_points);

/// The Memory tab's charts, over time: x is seconds since the run started (monotonic
/// runs.start_unix_ns − clock_offset_ns; the earliest sample instead if that comes first), every
/// sample (warm-up included: allocator growth shows there), one line per rank ("rank 0"), each line
/// at most `max_points` points (decimate_min_max), every chart over the same x_range (the first and
/// last sample of any chart). Only what some sample recorded gets a chart, in this order:
///   "Allocated" (MiB, or GiB above 10 GiB), "Reserved", "Active" — memory_samples' bytes;
///   "Reserved slack" (%: 1 − allocated/reserved), "Split fragmentation" (%: inactive_split/reserved),
///   "External fragmentation" (%: 1 − largest_free/(reserved − active)) — the recorder's ratios;
///   "Inactive split", "Largest free block" (MiB) — CUDA's caching allocator only;
///   "Allocation retries and OOMs" (cumulative counts, lines "rank 0 retries" and "rank 0 OOMs",
///     only when some counter is above 0: a CPU run or a healthy GPU run has none);
///   "KV pool occupancy" (%: blocks_used / num_blocks of kv_pool_samples).
std::vector<LineChartData> memory_charts(const reports::RunData& data,
                                         std::size_t max_points = kMaxMemoryPointsPerSeries);

/// One switch (one measured step, one direction) as the Switch tab lists it: SwitchEvent's numbers
/// (switch_analysis.h) and the components of its slowest rank's `switches` row.
struct SwitchTableRow {
  std::int64_t step = 0;
  std::string direction;  // train_to_rollout | rollout_to_train
  double seconds = 0.0;   // the slowest rank's duration
  int slowest_rank = 0;
  std::vector<std::pair<std::string, double>> components_s;  // that rank's, execution order (s)
  double unaccounted_s = 0.0;  // seconds − Σ components (not below 0)
  std::int64_t max_bytes_received = 0;    // the busiest receiver's bytes
  std::int64_t total_bytes_received = 0;  // over ranks
  std::optional<double> wire_bound_s;     // max_bytes_received / bandwidth (absent: no bandwidth)
};

/// One row per SwitchEvent of `analysis` (measured steps), by step, then in the order the step ran
/// them (the slowest rank's start).
std::vector<SwitchTableRow> switch_table(const reports::RunData& data, const reports::SwitchAnalysis& analysis);

/// One stacked bar chart per direction present (train_to_rollout first): a bar per switch ("step
/// 3"), a layer per component of the slowest rank in the order the components first ran, then
/// "unaccounted"; values in ms.
std::vector<StackedBarData> switch_component_bars(const std::vector<SwitchTableRow>& rows);

/// One row of the Comm tab: the collectives of one (op, group) over every rank and measured step.
struct CommTableRow {
  std::string op;     // all_reduce, all_gather, ...
  std::string group;  // the process group's name
  int group_size = 0;
  std::int64_t calls = 0;   // rows of comm_ops (one per call per rank)
  std::int64_t bytes = 0;   // Σ bytes over the calls (nccl-tests' per-rank message size, summed)
  double total_s = 0.0;     // per rank the union of the calls' intervals (reports::collective_union_ns), summed over ranks
  double summed_s = 0.0;    // Σ (end − start) over the calls (concurrent calls counted each)
  double mean_s = 0.0;      // summed_s / calls
  /// Medians over the calls of the recorder's per-call bandwidths (comm_ops.algbw_gbps = bytes /
  /// time, busbw_gbps = algbw × nccl-tests' bus factor of the op and group size), GB/s (1e9 B/s),
  /// as bench_summary.h aggregates busbw; absent when no call has one (barriers, zero bytes).
  std::optional<double> algbw_gbps;
  std::optional<double> busbw_gbps;
  std::optional<double> max_busbw_gbps;  // the fastest call (what switch_analysis takes as the link)
};

/// The collectives of the `measured` steps grouped by (op, group, group size), the most total
/// time first.
std::vector<CommTableRow> comm_table(const reports::RunData& data, const std::vector<std::int64_t>& measured);

}  // namespace hs::viewer
