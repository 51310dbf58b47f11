// report_json.cpp — the report as JSON: everything the HTML shows, as nested objects with raw
// numbers in base units (seconds, bytes, fractions) instead of formatted text. Undefined numbers
// (a NaN change, an infinite confidence bound) are null. The matrix part is summary_json()'s,
// with the scaling curves the HTML draws added.
#include <string>

#include "hybridscope/reports/report.h"
#include "hybridscope/reports/rl_summary.h"
#include "report_content.h"

namespace hs::reports {
namespace {

using nlohmann::json;

template <typename T>
json opt(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

json spread_json(const Spread& x) {
  return {{"n", x.n},     {"median", x.median}, {"min", x.min},   {"max", x.max},       {"q1", x.q1},
          {"q3", x.q3},   {"iqr", x.iqr},       {"mean", x.mean}, {"stddev", x.stddev}, {"cv", x.cv}};
}

json step_pairs(const std::vector<std::pair<std::int64_t, double>>& values, const char* name) {
  json out = json::array();
  for (const auto& [step, v] : values) out.push_back({{"step", step}, {name, v}});
  return out;
}

json phases_json(const PhaseBreakdown& p) {
  json steps = json::array();
  for (const auto& s : p.steps)
    steps.push_back({{"step", s.step}, {"step_s", s.step_s}, {"slowest_rank", s.slowest_rank}, {"phase_s", s.phase_s},
                     {"other_s", s.other_s}});
  json per_rank = json::array();
  for (const auto& r : p.per_rank)
    per_rank.push_back({{"rank", r.rank}, {"step", r.step}, {"step_s", r.step_s}, {"phase_s", r.phase_s}});
  json rank_phase = json::object(), rank_step = json::object();
  for (const auto& [rank, by_phase] : p.rank_mean_phase_s) rank_phase[std::to_string(rank)] = by_phase;
  for (const auto& [rank, s] : p.rank_mean_step_s) rank_step[std::to_string(rank)] = s;
  return {{"source", p.source},           {"phases", p.phases},        {"measured", p.measured},
          {"mean_step_s", p.mean_step_s}, {"mean_phase_s", p.mean_phase_s}, {"share", p.share},
          {"steps", steps},               {"per_rank", per_rank},      {"rank_mean_phase_s", rank_phase},
          {"rank_mean_step_s", rank_step}, {"top_phases", p.top_phases}, {"parent", p.parent}};
}

json switches_json(const SwitchAnalysis& s) {
  json events = json::array();
  for (const auto& e : s.events)
    events.push_back({{"step", e.step}, {"direction", e.direction}, {"seconds", e.seconds},
                      {"slowest_rank", e.slowest_rank}, {"max_bytes_received", e.max_bytes_received},
                      {"total_bytes_received", e.total_bytes_received}, {"wire_bound_s", opt(e.wire_bound_s)}});
  json directions = json::array();
  for (const auto& d : s.directions) {
    json components = json::array();
    for (const auto& [name, seconds] : d.components_s) components.push_back({{"name", name}, {"seconds", seconds}});
    directions.push_back({{"direction", d.direction}, {"switches", d.switches}, {"median_s", d.median_s},
                          {"max_s", d.max_s}, {"median_max_bytes_received", d.median_max_bytes_received},
                          {"wire_bound_s", opt(d.wire_bound_s)}, {"over_bound", opt(d.over_bound)},
                          {"components_s", components}, {"unaccounted_s", d.unaccounted_s}});
  }
  return {{"bandwidth_gbps", opt(s.bandwidth_gbps)}, {"bandwidth_source", s.bandwidth_source},
          {"headline", s.headline}, {"events", events}, {"directions", directions}};
}

json memory_json(const MemoryAnalysis& m, const RunData& data) {
  json phases = json::array();
  for (const auto& p : m.phases)
    phases.push_back({{"phase", p.phase}, {"rank", p.rank}, {"peak_allocated_bytes", p.peak_allocated_bytes},
                      {"peak_reserved_bytes", opt(p.peak_reserved_bytes)},
                      {"min_allocated_over_reserved", opt(p.min_allocated_over_reserved)}});
  json timeline = json::array();
  for (const auto& line : detail::memory_timeline(data))
    timeline.push_back({{"rank", line.rank}, {"allocated_gib", line.allocated_gib}, {"reserved_gib", line.reserved_gib}});
  return {{"device", m.device},
          {"has_samples", m.has_samples},
          {"timeline", timeline},
          {"phases", phases},
          {"peak_allocated_bytes", m.peak_allocated_bytes},
          {"peak_rank", m.peak_rank},
          {"peak_step", m.peak_step},
          {"peak_reserved_bytes", opt(m.peak_reserved_bytes)},
          {"min_allocated_over_reserved", opt(m.min_allocated_over_reserved)},
          {"worst_reserved_slack", opt(m.worst_reserved_slack)},
          {"worst_split_fragmentation", opt(m.worst_split_fragmentation)},
          {"worst_external_fragmentation", opt(m.worst_external_fragmentation)},
          {"alloc_retries", m.has_allocator_counters ? json(m.alloc_retries) : json(nullptr)},
          {"ooms", m.has_allocator_counters ? json(m.ooms) : json(nullptr)},
          {"param_bytes", opt(m.param_bytes)},
          {"peak_over_params", opt(m.peak_over_params)},
          {"kv_num_blocks", m.kv_num_blocks},
          {"kv_peak_blocks_used", m.kv_peak_blocks_used},
          {"kv_peak_occupancy", opt(m.kv_peak_occupancy)}};
}

json temporal_json(const TemporalAnalysis& t) {
  json breakdown = json::array(), overlap = json::array();
  for (const auto& b : t.breakdown)
    breakdown.push_back({{"rank", b.rank}, {"window_ns", b.window_ns}, {"idle_ns", b.idle_ns},
                         {"compute_ns", b.compute_ns}, {"non_compute_ns", b.non_compute_ns},
                         {"idle_share", b.idle_share}, {"compute_share", b.compute_share},
                         {"non_compute_share", b.non_compute_share}});
  for (const auto& o : t.overlap)
    overlap.push_back({{"rank", o.rank}, {"comm_ns", o.comm_ns}, {"compute_ns", o.compute_ns},
                       {"overlap_ns", o.overlap_ns}, {"overlap_ratio", opt(o.overlap_ratio)},
                       {"exposed_comm_ns", o.exposed_comm_ns}});
  return {{"source", to_string(t.source)}, {"note", t.note}, {"breakdown", breakdown},
          {"overlap", overlap}};
}

json stragglers_json(const StragglerAnalysis& s) {
  json phases = json::array();
  for (const auto& p : s.phases)
    phases.push_back({{"phase", p.phase}, {"min_s", p.min_s}, {"max_s", p.max_s}, {"median_s", p.median_s},
                      {"slowest_rank", p.slowest_rank}, {"fastest_rank", p.fastest_rank}, {"spread", p.spread}});
  return {{"world_size", s.world_size},
          {"phases", phases},
          {"straggler_rank", opt(s.straggler_rank)},
          {"straggler_excess_s", s.straggler_excess_s},
          {"straggler_excess_share", s.straggler_excess_share},
          {"straggler_steps", s.straggler_steps},
          {"late_collective_rank", opt(s.late_collective_rank)},
          {"late_collective_stddev_ms", s.late_collective_stddev_ms},
          {"global_seqlen", s.global_seqlen},
          {"token_imbalance", opt(s.token_imbalance)}};
}

json trends_json(const std::vector<LinearTrend>& trends) {
  json out = json::array();
  for (const auto& t : trends)
    out.push_back({{"series", t.series}, {"unit", t.unit}, {"n", t.n}, {"slope", t.slope},
                   {"intercept", t.intercept}, {"slope_ci_low", t.slope_ci_low}, {"slope_ci_high", t.slope_ci_high},
                   {"mean", t.mean}, {"relative_slope", t.relative_slope}, {"first_fit", t.first_fit},
                   {"last_fit", t.last_fit}, {"increasing", t.increasing}, {"decreasing", t.decreasing}});
  return out;
}

json run_json(const RunReport& report) {
  const auto& a = report.analysis;
  const auto& run = a.data.run;
  json config = json::object(), layout = json::object();
  for (const auto& [key, value] : a.data.config) config[key] = value;
  for (const auto& [key, value] : detail::layout_entries(a.data)) layout[key] = value;
  const json findings = findings_json(report.findings);
  return {{"label", report.label},
          {"run", {{"id", run.id},
                   {"name", run.name},
                   {"status", run.status},
                   {"status_message", run.status_message},
                   {"host", run.host},
                   {"command_line", run.command_line},
                   {"hybridscope_version", run.hybridscope_version},
                   {"world_size", run.world_size},
                   {"start_unix_ns", run.start_unix_ns},
                   {"started", detail::iso_utc(run.start_unix_ns)},
                   {"end_unix_ns", opt(run.end_unix_ns)},
                   {"database", a.data.source_path}}},
          {"config", config},
          {"layout", layout},
          {"summary", {{"steps_recorded", a.phases.steps.size()},
                       {"measured_steps", a.measured},
                       {"mean_step_s", a.phases.mean_step_s},
                       {"tokens_per_s", opt(a.tokens_per_s)},
                       {"mfu", opt(a.mfu)},
                       {"mfu_palm", opt(a.mfu_palm)},
                       {"response_length", opt(a.response_length)},
                       {"rollout_batch", opt(a.rollout_batch)}}},
          {"findings", findings},
          {"throughput", step_pairs(a.data.tokens_per_s_series(), "tokens_per_s")},
          {"reward", step_pairs(detail::reward_per_step(a.data), "critic/score/mean")},
          {"phases", phases_json(a.phases)},
          {"switches", switches_json(a.switches)},
          {"rl", rl_summary_json(a)},
          {"memory", memory_json(a.memory, a.data)},
          {"temporal", temporal_json(a.temporal)},
          {"stragglers", stragglers_json(a.stragglers)},
          {"trends", trends_json(a.trends)}};
}

json run_comparison_json(const RunComparison& c) {
  json phases = json::array(), diff = json::array();
  for (const auto& d : c.phases)
    phases.push_back({{"phase", d.phase},
                      {"old", spread_json(d.old_values)},
                      {"new", spread_json(d.new_values)},
                      {"change", d.change},
                      {"test", {{"u_old", d.test.u_old}, {"u_new", d.test.u_new}, {"p_value", d.test.p_value},
                                {"exact", d.test.exact}, {"reliable", d.test.reliable}}},
                      {"significant", d.significant}});
  json metrics = json::array();
  for (const auto& d : c.metrics)
    metrics.push_back({{"metric", d.metric},
                       {"old", spread_json(d.old_values)},
                       {"new", spread_json(d.new_values)},
                       {"change", d.change},
                       {"better", d.better == Better::kHigher ? "higher" : d.better == Better::kLower ? "lower" : "neither"},
                       {"test", {{"u_old", d.test.u_old}, {"u_new", d.test.u_new}, {"p_value", d.test.p_value},
                                 {"exact", d.test.exact}, {"reliable", d.test.reliable}}},
                       {"significant", d.significant}});
  for (const auto& d : c.config_diff) diff.push_back({{"key", d.key}, {"old", opt(d.old_value)}, {"new", opt(d.new_value)}});
  return {{"old", c.old_label}, {"new", c.new_label},  {"phases", phases},
          {"metrics", metrics},  {"config_diff", diff}, {"alpha", kAlpha}};
}

}  // namespace

nlohmann::json report_json(const Report& report) {
  json runs = json::array();
  for (const auto& run : report.runs) runs.push_back(run_json(run));
  json out = {{"title", report.title},
              {"generated_at", report.generated_at},
              {"hybridscope_version", report.hybridscope_version},
              {"sources", report.sources},
              {"runs", runs}};
  // The summary the HTML opens with: the verdict and the findings merged across runs, ranked by
  // the step time at stake (the full findings stay under each run).
  const auto ranked = detail::ranked_findings(report);
  json ranked_json = json::array();
  for (const auto& m : ranked)
    ranked_json.push_back({{"rule", m.finding.rule},
                           {"range", m.finding.range},
                           {"severity", to_string(m.finding.severity)},
                           {"title", m.finding.title},
                           {"seconds_at_stake", m.seconds_at_stake},
                           {"step_s", m.step_s},
                           {"run_index", m.run_index},
                           {"runs", m.runs},
                           {"instances", m.instances}});
  out["summary"] = {{"verdict", detail::verdict(report, ranked)}, {"findings", ranked_json}};
  if (report.comparison) out["comparison"] = run_comparison_json(*report.comparison);
  if (report.matrix) {
    json matrix = summary_json(*report.matrix);
    json curves = json::array();
    for (const auto& c : detail::scaling_curves(*report.matrix))
      curves.push_back({{"axis", c.axis}, {"kind", c.kind}, {"label", c.label}, {"efficiency", c.efficiency},
                        {"throughput_efficiency", c.throughput_efficiency}});
    matrix["scaling_curves"] = curves;
    out["matrix"] = matrix;
  }
  return out;
}

}  // namespace hs::reports
