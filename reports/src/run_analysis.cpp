// run_analysis.cpp — runs every analysis of one run once.
#include "hybridscope/reports/run_analysis.h"

#include <fmt/format.h>

namespace hs::reports {

RunAnalysis analyze_run(RunData data, const AnalysisOptions& options) {
  RunAnalysis a;
  a.data = std::move(data);
  a.warmup_steps = options.warmup_steps;
  a.phases = phase_breakdown(a.data, options.warmup_steps);
  a.measured = a.phases.measured;
  a.temporal = temporal_analysis(a.data, a.measured);
  a.gpu_kernels = gpu_kernel_summary(a.data, a.measured);
  a.switches = switch_analysis(a.data, a.measured, options.links);
  a.memory = memory_analysis(a.data, a.measured);
  a.stragglers = straggler_analysis(a.data, a.phases);
  a.trends = run_trends(a.data, a.phases);
  a.roles = role_idle_analysis(a.data, a.measured);
  a.weight_sync = options.link_gbps
                      ? weight_sync_analysis(a.data, a.measured, options.link_gbps, options.link_source)
                      : weight_sync_analysis(a.data, a.measured, a.switches.bandwidth_gbps, a.switches.bandwidth_source);

  double tokens = 0.0, seconds = 0.0, mfu = 0.0, mfu_palm = 0.0, length = 0.0;
  int mfu_n = 0, mfu_palm_n = 0, length_n = 0;
  for (const auto step : a.measured) {
    const auto t = a.data.metric(step, "perf/total_num_tokens");
    const auto s = a.data.metric(step, "timing_s/step");
    if (t && s) {
      tokens += *t;
      seconds += *s;
    }
    if (const auto m = a.data.metric(step, "perf/mfu/actor")) mfu += *m, ++mfu_n;
    if (const auto m = a.data.metric(step, "perf/mfu/actor_palm")) mfu_palm += *m, ++mfu_palm_n;
    if (const auto l = a.data.metric(step, "response_length/mean")) length += *l, ++length_n;
  }
  if (seconds > 0) a.tokens_per_s = tokens / seconds;
  if (mfu_n) a.mfu = mfu / mfu_n;
  if (mfu_palm_n) a.mfu_palm = mfu_palm / mfu_palm_n;
  if (length_n) a.response_length = length / length_n;
  const auto batch = a.data.config_number("data.train_batch_size");
  const auto n = a.data.config_number("actor_rollout_ref.rollout.n");
  if (batch) a.rollout_batch = *batch * n.value_or(1.0);
  return a;
}

std::string why_no_measured_steps(const RunAnalysis& a) {
  if (!a.measured.empty()) return "";
  if (a.phases.steps.empty()) {
    if (a.data.run.imported())
      return fmt::format("no measured steps: the {} source has no steps ({}, no timing_s/step metric; docs/importing.md)",
                         a.data.run.source,
                         a.data.run.source == "kineto" ? "no `step` annotation or ProfilerStep#N range in the trace"
                                                       : "no `step` range in it");
    return "no measured steps: the run recorded no step (no `step` range, no timing_s/step metric)";
  }
  return fmt::format("no measured steps: all {} recorded step(s) are warm-up (--warmup {}; --warmup 0 measures them)",
                     a.phases.steps.size(), a.warmup_steps);
}

}  // namespace hs::reports
