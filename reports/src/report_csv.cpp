// report_csv.cpp — the report as tidy CSV: one row per observation, columns
// section,run_id,rank,step,key,value,unit (empty where a column does not apply). RFC 4180: rows
// end in CRLF; a field holding a comma, a double quote, CR or LF is quoted and its quotes doubled,
// so any text (a run name with a newline and <script>) reads back intact. Numbers are written in
// their shortest round-trip form.
//
// Sections: report, run, config, summary, finding, step_metric, throughput, phase_rank, phase_step,
// phase_mean, switch, switch_summary, memory, memory_summary, memory_phase, temporal, overlap,
// imbalance, trend, compare, config_diff, matrix, matrix_cell. A memory sample is several rows
// (t_s, phase, allocated_bytes, reserved_bytes, active_bytes) with the same rank and step, in
// that order. A finding's first row has key = the rule and value = its title; its evidence,
// suggestion, config keys and impact follow as <rule>/evidence etc.
#include <cmath>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "hybridscope/reports/report.h"
#include "report_content.h"

namespace hs::reports {
namespace {

std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string out = "\"";
  for (const char ch : text) out += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return out + "\"";
}

std::string number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return fmt::format("{}", v);
}

// The unit of a verl step metric from its name (docs/metrics.md).
std::string metric_unit(const std::string& name) {
  if (name.rfind("timing_s/", 0) == 0) return "s";
  if (name.rfind("timing_per_token_ms/", 0) == 0) return "ms/token";
  if (name.size() > 3 && name.compare(name.size() - 3, 3, "_gb") == 0) return "GiB";
  if (name == "perf/total_num_tokens") return "tokens";
  if (name == "perf/throughput") return "tokens/s/rank";
  return "";
}

class CsvWriter {
 public:
  std::string out = "section,run_id,rank,step,key,value,unit\r\n";
  std::string section;
  std::optional<std::int64_t> run_id;

  void row(std::optional<int> rank, std::optional<std::int64_t> step, const std::string& key, const std::string& value,
           const std::string& unit = "") {
    out += csv_field(section) + "," + (run_id ? std::to_string(*run_id) : "") + "," +
           (rank ? std::to_string(*rank) : "") + "," + (step ? std::to_string(*step) : "") + "," + csv_field(key) +
           "," + csv_field(value) + "," + csv_field(unit) + "\r\n";
  }
  void text(const std::string& key, const std::string& value) { row({}, {}, key, value); }
  void value(const std::string& key, double v, const std::string& unit = "") { row({}, {}, key, number(v), unit); }
  template <typename T>
  void optional(const std::string& key, const std::optional<T>& v, const std::string& unit = "") {
    if (v) value(key, static_cast<double>(*v), unit);
  }
};

void run_rows(CsvWriter& w, const RunReport& report) {
  const auto& a = report.analysis;
  const auto& run = a.data.run;
  w.run_id = run.id;
  w.section = "run";
  w.text("name", run.name);
  w.text("status", run.status);
  if (!run.status_message.empty()) w.text("status_message", run.status_message);
  w.text("host", run.host);
  w.value("world_size", run.world_size, "ranks");
  w.text("started", detail::iso_utc(run.start_unix_ns));
  if (!a.data.source_path.empty()) w.text("database", a.data.source_path);

  w.section = "config";
  for (const auto& [key, value] : a.data.config) w.text(key, value);

  w.section = "summary";
  w.value("steps_recorded", static_cast<double>(a.phases.steps.size()), "steps");
  w.value("steps_measured", static_cast<double>(a.measured.size()), "steps");
  w.value("mean_step_s", a.phases.mean_step_s, "s");
  w.optional("tokens_per_s", a.tokens_per_s, "tokens/s");
  w.optional("mfu", a.mfu, "fraction");
  w.optional("response_length", a.response_length, "tokens");
  w.optional("rollout_batch", a.rollout_batch, "sequences");

  w.section = "finding";
  for (const auto& f : report.findings) {
    w.row(f.rank, f.step, f.rule, f.title, to_string(f.severity));
    w.row(f.rank, f.step, f.rule + "/evidence", f.evidence);
    w.row(f.rank, f.step, f.rule + "/suggestion", f.suggestion);
    for (const auto& key : f.config_keys) w.row(f.rank, f.step, f.rule + "/config_key", key);
    w.row(f.rank, f.step, f.rule + "/impact", number(f.impact), "fraction");
  }

  w.section = "step_metric";
  for (const auto& m : a.data.metrics) w.row({}, m.step, m.name, number(m.value), metric_unit(m.name));
  w.section = "throughput";
  for (const auto& [step, v] : a.data.tokens_per_s_series()) w.row({}, step, "tokens_per_s", number(v), "tokens/s");

  w.section = "phase_rank";
  for (const auto& r : a.phases.per_rank) {
    w.row(r.rank, r.step, "step", number(r.step_s), "s");
    for (const auto& [phase, s] : r.phase_s) w.row(r.rank, r.step, phase, number(s), "s");
  }
  w.section = "phase_step";
  for (const auto& s : a.phases.steps) {
    w.row(s.slowest_rank, s.step, "step", number(s.step_s), "s");
    for (const auto& [phase, v] : s.phase_s) w.row({}, s.step, phase, number(v), "s");
    w.row({}, s.step, "other", number(s.other_s), "s");
  }
  w.section = "phase_mean";
  w.text("source", a.phases.source);
  w.value("step", a.phases.mean_step_s, "s");
  for (const auto& [phase, s] : a.phases.mean_phase_s) w.value(phase, s, "s");
  for (const auto& [phase, s] : a.phases.share) w.value("share/" + phase, s, "fraction");
  for (const auto& [rank, by_phase] : a.phases.rank_mean_phase_s)
    for (const auto& [phase, s] : by_phase) w.row(rank, {}, "rank_mean/" + phase, number(s), "s");

  w.section = "switch";
  for (const auto& e : a.switches.events) {
    w.row(e.slowest_rank, e.step, e.direction + "/seconds", number(e.seconds), "s");
    w.row(e.slowest_rank, e.step, e.direction + "/max_bytes_received", number(static_cast<double>(e.max_bytes_received)), "bytes");
    w.row({}, e.step, e.direction + "/total_bytes_received", number(static_cast<double>(e.total_bytes_received)), "bytes");
    if (e.wire_bound_s) w.row({}, e.step, e.direction + "/wire_bound_s", number(*e.wire_bound_s), "s");
  }
  w.section = "switch_summary";
  w.optional("bandwidth_gbps", a.switches.bandwidth_gbps, "GB/s");
  if (!a.switches.bandwidth_source.empty()) w.text("bandwidth_source", a.switches.bandwidth_source);
  if (!a.switches.headline.empty()) w.text("headline", a.switches.headline);
  for (const auto& d : a.switches.directions) {
    const std::string p = d.direction + "/";
    w.value(p + "switches", d.switches);
    w.value(p + "median_s", d.median_s, "s");
    w.value(p + "max_s", d.max_s, "s");
    w.value(p + "median_max_bytes_received", static_cast<double>(d.median_max_bytes_received), "bytes");
    w.optional(p + "wire_bound_s", d.wire_bound_s, "s");
    w.optional(p + "over_bound", d.over_bound, "ratio");
    for (const auto& [name, s] : d.components_s) w.value(p + "component/" + name, s, "s");
    w.value(p + "unaccounted_s", d.unaccounted_s, "s");
  }

  w.section = "memory";
  for (const auto& s : a.data.memory) {
    w.row(s.rank, s.step, "t_s", number(detail::seconds_since_start(run, s.ts_ns)), "s");
    w.row(s.rank, s.step, "phase", s.phase);
    if (s.allocated_bytes) w.row(s.rank, s.step, "allocated_bytes", number(static_cast<double>(*s.allocated_bytes)), "bytes");
    if (s.reserved_bytes) w.row(s.rank, s.step, "reserved_bytes", number(static_cast<double>(*s.reserved_bytes)), "bytes");
    if (s.active_bytes) w.row(s.rank, s.step, "active_bytes", number(static_cast<double>(*s.active_bytes)), "bytes");
  }
  const auto& m = a.memory;
  w.section = "memory_summary";
  w.text("device", m.device);
  w.row(m.peak_rank, m.peak_step, "peak_allocated_bytes", number(static_cast<double>(m.peak_allocated_bytes)), "bytes");
  w.optional("peak_reserved_bytes", m.peak_reserved_bytes, "bytes");
  w.optional("min_allocated_over_reserved", m.min_allocated_over_reserved, "ratio");
  w.optional("worst_reserved_slack", m.worst_reserved_slack, "fraction");
  w.optional("worst_split_fragmentation", m.worst_split_fragmentation, "fraction");
  w.optional("worst_external_fragmentation", m.worst_external_fragmentation, "fraction");
  if (m.has_allocator_counters) {  // absent: the source carried no allocator counters (not 0)
    w.value("alloc_retries", static_cast<double>(m.alloc_retries), "count");
    w.value("ooms", static_cast<double>(m.ooms), "count");
  }
  w.optional("param_bytes", m.param_bytes, "bytes");
  w.optional("peak_over_params", m.peak_over_params, "ratio");
  w.value("kv_num_blocks", static_cast<double>(m.kv_num_blocks), "blocks");
  w.value("kv_peak_blocks_used", static_cast<double>(m.kv_peak_blocks_used), "blocks");
  w.optional("kv_peak_occupancy", m.kv_peak_occupancy, "fraction");
  w.section = "memory_phase";
  for (const auto& p : m.phases) {
    w.row(p.rank, {}, p.phase + "/peak_allocated_bytes", number(static_cast<double>(p.peak_allocated_bytes)), "bytes");
    if (p.peak_reserved_bytes)
      w.row(p.rank, {}, p.phase + "/peak_reserved_bytes", number(static_cast<double>(*p.peak_reserved_bytes)), "bytes");
    if (p.min_allocated_over_reserved)
      w.row(p.rank, {}, p.phase + "/min_allocated_over_reserved", number(*p.min_allocated_over_reserved), "ratio");
  }

  w.section = "temporal";
  w.text("source", to_string(a.temporal.source));
  if (!a.temporal.note.empty()) w.text("note", a.temporal.note);
  for (const auto& b : a.temporal.breakdown) {
    w.row(b.rank, {}, "window_ns", number(static_cast<double>(b.window_ns)), "ns");
    w.row(b.rank, {}, "idle_ns", number(static_cast<double>(b.idle_ns)), "ns");
    w.row(b.rank, {}, "compute_ns", number(static_cast<double>(b.compute_ns)), "ns");
    w.row(b.rank, {}, "non_compute_ns", number(static_cast<double>(b.non_compute_ns)), "ns");
    w.row(b.rank, {}, "idle_share", number(b.idle_share), "fraction");
    w.row(b.rank, {}, "compute_share", number(b.compute_share), "fraction");
    w.row(b.rank, {}, "non_compute_share", number(b.non_compute_share), "fraction");
  }
  w.section = "overlap";
  for (const auto& o : a.temporal.overlap) {
    w.row(o.rank, {}, "comm_ns", number(static_cast<double>(o.comm_ns)), "ns");
    w.row(o.rank, {}, "compute_ns", number(static_cast<double>(o.compute_ns)), "ns");
    w.row(o.rank, {}, "overlap_ns", number(static_cast<double>(o.overlap_ns)), "ns");
    if (o.overlap_ratio) w.row(o.rank, {}, "overlap_ratio", number(*o.overlap_ratio), "fraction");
    w.row(o.rank, {}, "exposed_comm_ns", number(static_cast<double>(o.exposed_comm_ns)), "ns");
  }

  const auto& s = a.stragglers;
  w.section = "imbalance";
  w.value("world_size", s.world_size, "ranks");
  for (const auto& p : s.phases) {
    w.value(p.phase + "/min_s", p.min_s, "s");
    w.value(p.phase + "/median_s", p.median_s, "s");
    w.value(p.phase + "/max_s", p.max_s, "s");
    w.row(p.fastest_rank, {}, p.phase + "/fastest_rank", std::to_string(p.fastest_rank));
    w.row(p.slowest_rank, {}, p.phase + "/slowest_rank", std::to_string(p.slowest_rank));
    w.value(p.phase + "/spread", p.spread, "fraction");
  }
  if (s.straggler_rank) {
    w.row(*s.straggler_rank, {}, "straggler_excess_s", number(s.straggler_excess_s), "s");
    w.row(*s.straggler_rank, {}, "straggler_excess_share", number(s.straggler_excess_share), "fraction");
    w.row(*s.straggler_rank, {}, "straggler_steps", std::to_string(s.straggler_steps), "steps");
  }
  if (s.late_collective_rank)
    w.row(*s.late_collective_rank, {}, "late_collective_stddev_ms", number(s.late_collective_stddev_ms), "ms");
  for (const auto& [name, v] : s.global_seqlen) w.value(name, v, "tokens");
  w.optional("token_imbalance", s.token_imbalance, "fraction");

  w.section = "trend";
  for (const auto& t : a.trends) {
    const std::string p = t.series + "/";
    w.value(p + "n", static_cast<double>(t.n), "points");
    w.value(p + "slope", t.slope, t.unit + "/step");
    w.value(p + "slope_ci_low", t.slope_ci_low, t.unit + "/step");
    w.value(p + "slope_ci_high", t.slope_ci_high, t.unit + "/step");
    w.value(p + "intercept", t.intercept, t.unit);
    w.value(p + "mean", t.mean, t.unit);
    w.value(p + "relative_slope", t.relative_slope, "fraction/step");
    w.value(p + "first_fit", t.first_fit, t.unit);
    w.value(p + "last_fit", t.last_fit, t.unit);
    w.text(p + "verdict", t.increasing ? "increasing" : t.decreasing ? "decreasing" : "flat");
  }
}

void comparison_rows(CsvWriter& w, const RunComparison& c) {
  w.run_id.reset();
  w.section = "compare";
  w.text("old", c.old_label);
  w.text("new", c.new_label);
  for (const auto& d : c.phases) {
    const std::string p = d.phase + "/";
    w.value(p + "old_median", d.old_values.median, "s");
    w.value(p + "new_median", d.new_values.median, "s");
    w.value(p + "old_n", static_cast<double>(d.old_values.n), "steps");
    w.value(p + "new_n", static_cast<double>(d.new_values.n), "steps");
    w.value(p + "change", d.change, "fraction");
    w.value(p + "p_value", d.test.p_value);
    w.text(p + "significant", d.significant ? "true" : "false");
    w.text(p + "reliable", d.test.reliable ? "true" : "false");
  }
  for (const auto& d : c.metrics) {
    const std::string p = d.metric + "/";
    w.value(p + "old_median", d.old_values.median);
    w.value(p + "new_median", d.new_values.median);
    w.value(p + "change", d.change, "fraction");
    w.value(p + "p_value", d.test.p_value);
    w.text(p + "significant", d.significant ? "true" : "false");
  }
  w.section = "config_diff";
  for (const auto& d : c.config_diff) {
    if (d.old_value) w.text(d.key + "/old", *d.old_value);
    if (d.new_value) w.text(d.key + "/new", *d.new_value);
  }
}

void matrix_rows(CsvWriter& w, const MatrixSummary& m) {
  w.run_id.reset();
  w.section = "matrix";
  w.value("id", static_cast<double>(m.matrix.id));
  w.text("name", m.matrix.name);
  w.text("status", m.matrix.status);
  w.section = "matrix_cell";
  for (const auto& c : m.cells) {
    const std::string p = fmt::format("cell {}/", c.cell.cell_index + 1);
    w.text(p + "name", c.cell.name);
    w.value(p + "ranks", c.cell.ranks, "ranks");
    w.value(p + "completed", c.completed, "runs");
    w.value(p + "failed", c.failed, "runs");
    if (!c.cell.invalid_reason.empty()) w.text(p + "invalid_reason", c.cell.invalid_reason);
    for (const auto& [key, x] : c.metrics) {
      const auto unit = metric_info(key).unit;
      w.value(p + key + "/median", x.median, unit);
      w.value(p + key + "/min", x.min, unit);
      w.value(p + key + "/max", x.max, unit);
      w.value(p + key + "/cv", x.cv, "fraction");
      w.value(p + key + "/n", static_cast<double>(x.n), "runs");
    }
    for (const auto& s : c.scaling) {
      w.value(p + "scaling/" + s.axis + "/speedup", s.speedup, "ratio");
      w.value(p + "scaling/" + s.axis + "/efficiency_" + s.kind, s.efficiency, "fraction");
      w.value(p + "scaling/" + s.axis + "/throughput_efficiency", s.throughput_efficiency, "fraction");
    }
  }
}

}  // namespace

std::string report_csv(const Report& report) {
  CsvWriter w;
  w.section = "report";
  w.text("title", report.title);
  w.text("generated_at", report.generated_at);
  w.text("hybridscope_version", report.hybridscope_version);
  for (const auto& s : report.sources) w.text("source", s);
  for (const auto& run : report.runs) run_rows(w, run);
  if (report.comparison) comparison_rows(w, *report.comparison);
  if (report.matrix) matrix_rows(w, *report.matrix);
  return w.out;
}

}  // namespace hs::reports
