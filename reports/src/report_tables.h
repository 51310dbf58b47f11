// report_tables.h — the report's tables, built once as plain text cells and rendered by the HTML
// and Markdown exporters, so that both show the same rows with the same numbers. Cells hold
// unescaped text: each renderer escapes for its format. Private to hs_reports.
#pragma once

#include <string>
#include <vector>

#include "hybridscope/reports/report.h"

namespace hs::reports::detail {

struct TableRow {
  std::vector<std::string> cells;
  bool highlight = false;  // drawn emphasised (an increasing trend, a significant change)
};

struct ReportTable {
  std::vector<std::string> headers;
  std::vector<bool> numeric;  // per column: right-aligned numbers
  std::vector<TableRow> rows;
  std::string note;  // one line under the table: where the numbers come from
};

/// Run id, name, status, host, start, world size, layout keys, steps, mean step, tokens/s, MFU.
ReportTable run_summary_table(const RunReport& run);
/// One row per step: step time (slowest rank), each phase, other, tokens/s, reward — the numbers
/// behind the charts.
ReportTable per_step_table(const RunAnalysis& analysis);
/// Mean seconds and share of the step per phase over the measured steps, "other" and "step".
ReportTable phase_table(const PhaseBreakdown& phases);
/// Per switch direction: count, median and max (slowest rank), bytes, wire bound, components.
ReportTable switch_table(const SwitchAnalysis& switches);
/// Idle ratio per role and measured step (role_idle.h), with the means and the verdict.
ReportTable role_table(const RoleIdleAnalysis& roles);
/// The weight sync per measured step (weight_sync.h); steps with more than one sync highlighted.
ReportTable weight_sync_table(const WeightSyncAnalysis& sync);
/// Peaks, fragmentation ratios, retries/OOMs, parameter bytes, the KV pool (measure, value).
ReportTable memory_table(const MemoryAnalysis& memory, const RunSummary& run);
/// Peak memory per rank and phase.
ReportTable memory_phase_table(const MemoryAnalysis& memory);
/// HTA temporal breakdown per rank (ms and shares of the window).
ReportTable temporal_table(const TemporalAnalysis& temporal);
/// HTA comm/compute overlap per rank.
ReportTable overlap_table(const TemporalAnalysis& temporal);
/// GPU time by (range, kernel) of the measured steps; empty without GPU records.
ReportTable gpu_kernel_table(const GpuKernelSummary& gpu);
/// Per phase: the spread of the ranks' mean times, fastest and slowest rank.
ReportTable straggler_table(const StragglerAnalysis& stragglers);
/// The straggler rank, HTA's late-collective rank, global_seqlen token balance (measure, value).
ReportTable imbalance_table(const StragglerAnalysis& stragglers);
/// Every fitted trend; the increasing ones highlighted.
ReportTable trend_table(const std::vector<LinearTrend>& trends);
/// Per phase: old and new medians, change, U-test p-value, verdict; significant ones highlighted.
ReportTable comparison_table(const RunComparison& comparison);
/// The step metrics (throughput, MFU, reward, ...) of a comparison, judged by which way each is better.
ReportTable metric_comparison_table(const RunComparison& comparison);
/// The config keys whose values differ.
ReportTable config_diff_table(const RunComparison& comparison);
/// One row per matrix cell: levels, ranks, repetitions, headline medians, scaling per rank axis.
ReportTable matrix_table(const MatrixSummary& matrix);

}  // namespace hs::reports::detail
