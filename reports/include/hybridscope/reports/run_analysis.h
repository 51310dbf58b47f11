// run_analysis.h — every analysis of one run, computed once: what the diagnosis rules, the
// exporters and the viewer read. analyze_run() only calls the analyses' functions; it adds no
// arithmetic of its own.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "hybridscope/reports/gpu_kernels.h"
#include "hybridscope/reports/imbalance.h"
#include "hybridscope/reports/memory_analysis.h"
#include "hybridscope/reports/phase_breakdown.h"
#include "hybridscope/reports/role_idle.h"
#include "hybridscope/reports/run_data.h"
#include "hybridscope/reports/switch_analysis.h"
#include "hybridscope/reports/temporal_breakdown.h"
#include "hybridscope/reports/trends.h"
#include "hybridscope/reports/weight_sync.h"

namespace hs::reports {

struct AnalysisOptions {
  int warmup_steps = 1;                 // steps left out of every mean (allocator growth, first touch)
  std::vector<LinkMeasurement> links;   // communication micro-benchmarks for the switch's wire bound
  /// A link bandwidth given by the user (GB/s, e.g. from a hardware file's link: `--hardware`) for
  /// the weight sync's comparison; absent: the switch analysis' bandwidth.
  std::optional<double> link_gbps;
  std::string link_source;              // where link_gbps comes from
};

struct RunAnalysis {
  RunData data;
  int warmup_steps = 1;                // AnalysisOptions::warmup_steps it was run with
  std::vector<std::int64_t> measured;  // the steps the analyses cover
  PhaseBreakdown phases;
  TemporalAnalysis temporal;
  GpuKernelSummary gpu_kernels;  // GPU time by range and kernel (v10 aggregates, else raw records)
  SwitchAnalysis switches;
  MemoryAnalysis memory;
  StragglerAnalysis stragglers;
  std::vector<LinearTrend> trends;
  RoleIdleAnalysis roles;        // idle ratios per role, the rollout-/train-bound verdict
  WeightSyncAnalysis weight_sync;  // the weight sync per step: time, bytes, GB/s, syncs
  /// Means over the measured steps of the step metrics a report headlines (absent: not recorded).
  std::optional<double> tokens_per_s;     // Σ perf/total_num_tokens / Σ timing_s/step
  std::optional<double> mfu;              // perf/mfu/actor: verl's flops_counter convention
  std::optional<double> mfu_palm;         // perf/mfu/actor_palm: PaLM's / torchtitan's (docs/metrics.md)
  std::optional<double> response_length;  // response_length/mean
  std::optional<double> rollout_batch;    // sequences generated per step: data.train_batch_size × rollout.n
};

RunAnalysis analyze_run(RunData data, const AnalysisOptions& options = {});

/// Why `a` measured no step, for a reader ("" when it measured some): the run recorded no step at
/// all (for an imported run: its source has no step ranges and no timing_s/step metric), or every
/// step it recorded is warm-up. The diagnosis, the report and the viewer print it in place of a
/// mean step, which would otherwise read 0 s.
std::string why_no_measured_steps(const RunAnalysis& a);

}  // namespace hs::reports
