// report_tables.cpp — the report's tables as text cells (report_tables.h).
#include "report_tables.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>

#include "report_content.h"

namespace hs::reports::detail {
namespace {

ReportTable key_value_table(const char* key_heading) {
  ReportTable t;
  t.headers = {key_heading, "value"};
  t.numeric = {false, false};
  return t;
}

void add(ReportTable& t, std::vector<std::string> cells, bool highlight = false) {
  t.rows.push_back({std::move(cells), highlight});
}

std::string ms(std::int64_t ns) { return format_number(static_cast<double>(ns) * 1e-6); }

template <typename T>
std::string or_dash(const std::optional<T>& value, std::string (*format)(double)) {
  return value ? format(static_cast<double>(*value)) : "-";
}

std::string fit_interval(double low, double high) {
  if (std::isinf(low) || std::isinf(high)) return "(too few points)";
  return fmt::format("[{}, {}]", format_number(low), format_number(high));
}

}  // namespace

ReportTable run_summary_table(const RunReport& report) {
  const auto& a = report.analysis;
  const auto& run = a.data.run;
  ReportTable t = key_value_table("field");
  add(t, {"run id", std::to_string(run.id)});
  add(t, {"name", run.name});
  add(t, {"status", run.status_message.empty() ? run.status : run.status + ": " + run.status_message});
  if (!run.host.empty()) add(t, {"host", run.host});
  if (run.start_unix_ns) add(t, {"started", iso_utc(run.start_unix_ns)});
  if (run.end_unix_ns && run.start_unix_ns)
    add(t, {"duration", format_seconds(static_cast<double>(*run.end_unix_ns - run.start_unix_ns) * 1e-9)});
  if (run.imported()) add(t, {"source", "imported: " + run.source + " (docs/importing.md)"});
  add(t, {"world size", std::to_string(run.world_size)});
  for (const auto& [key, value] : layout_entries(a.data)) add(t, {key, value});
  add(t, {"steps", fmt::format("{} recorded, {} measured", a.phases.steps.size(), a.measured.size())});
  const std::string no_steps = why_no_measured_steps(a);
  add(t, {"mean step", no_steps.empty() ? format_seconds(a.phases.mean_step_s) : no_steps});
  add(t, {"tokens/s", a.tokens_per_s ? format_number(*a.tokens_per_s) : "not recorded"});
  add(t, {"MFU, verl flops_counter (perf/mfu/actor)", a.mfu ? format_percent(*a.mfu) : "not recorded"});
  add(t, {"MFU, PaLM/torchtitan (perf/mfu/actor_palm)", a.mfu_palm ? format_percent(*a.mfu_palm) : "not recorded"});
  if (a.response_length) add(t, {"mean response length (tokens)", format_number(*a.response_length)});
  if (a.rollout_batch) add(t, {"sequences generated per step", format_number(*a.rollout_batch)});
  if (!a.data.source_path.empty()) add(t, {"database", a.data.source_path});
  return t;
}

ReportTable per_step_table(const RunAnalysis& a) {
  const auto throughput = a.data.tokens_per_s_series();
  const auto reward = reward_per_step(a.data);
  const std::map<std::int64_t, double> tokens_per_s(throughput.begin(), throughput.end());
  const std::map<std::int64_t, double> score(reward.begin(), reward.end());
  std::set<std::int64_t> steps;
  for (const auto& s : a.phases.steps) steps.insert(s.step);
  for (const auto& [step, v] : throughput) steps.insert(step);
  for (const auto& [step, v] : reward) steps.insert(step);
  ReportTable t;
  t.headers = {"step", "step (ms)", "slowest rank"};
  // Top-level phases only: with "other" they add up to the step (sub-phases are in phase_table).
  for (const auto& phase : a.phases.top_phases) t.headers.push_back(phase + " (ms)");
  for (const char* h : {"other (ms)", "tokens/s", "critic/score/mean"}) t.headers.push_back(h);
  t.numeric.assign(t.headers.size(), true);
  for (const auto step : steps) {
    TableRow row;
    const bool warmup = std::find(a.measured.begin(), a.measured.end(), step) == a.measured.end();
    row.cells.push_back(warmup ? fmt::format("{} (warm-up)", step) : std::to_string(step));
    const auto s = std::find_if(a.phases.steps.begin(), a.phases.steps.end(),
                                [&](const StepPhases& x) { return x.step == step; });
    const bool has = s != a.phases.steps.end();
    row.cells.push_back(has ? ms_cell(s->step_s) : "-");
    row.cells.push_back(has ? std::to_string(s->slowest_rank) : "-");
    for (const auto& phase : a.phases.top_phases) {
      const auto it = has ? s->phase_s.find(phase) : std::map<std::string, double>::const_iterator{};
      row.cells.push_back(has && it != s->phase_s.end() ? ms_cell(it->second) : "-");
    }
    row.cells.push_back(has ? ms_cell(s->other_s) : "-");
    const auto x = tokens_per_s.find(step);
    row.cells.push_back(x == tokens_per_s.end() ? "-" : format_number(x->second));
    const auto r = score.find(step);
    row.cells.push_back(r == score.end() ? "-" : format_number(r->second));
    t.rows.push_back(std::move(row));
  }
  t.note = "tokens/s = perf/total_num_tokens ÷ timing_s/step; warm-up steps are left out of the means.";
  return t;
}

ReportTable phase_table(const PhaseBreakdown& phases) {
  ReportTable t;
  t.headers = {"phase", "mean (ms)", "share of step"};
  t.numeric = {false, true, true};
  for (const auto& phase : phases.phases) {
    const auto mean = phases.mean_phase_s.find(phase);
    if (mean == phases.mean_phase_s.end()) continue;
    const auto share = phases.share.find(phase);
    // A sub-phase is listed under its parent, indented: it is part of the parent's time, not beside it.
    const std::string name = is_top_level(phases, phase) ? phase : "↳ " + phase;
    add(t, {name, ms_cell(mean->second), share == phases.share.end() ? "-" : format_percent(share->second)});
  }
  // "other": the slowest rank's step outside its phases, averaged like the phases.
  double other = 0.0;
  std::size_t n = 0;
  for (const auto& s : phases.steps)
    if (std::find(phases.measured.begin(), phases.measured.end(), s.step) != phases.measured.end()) {
      other += s.other_s;
      ++n;
    }
  if (n) {
    other /= static_cast<double>(n);
    add(t, {"other", ms_cell(other),
            phases.mean_step_s > 0 ? format_percent(other / phases.mean_step_s) : "-"});
  }
  add(t, {"step", ms_cell(phases.mean_step_s), phases.mean_step_s > 0 ? format_percent(1.0) : "-"});
  t.note = fmt::format("From {}: each phase's slowest rank, the step's slowest rank; means over {} measured step(s). "
                       "↳ marks a sub-phase, part of the phase above it: only the others add up to the step.",
                       phases.source.empty() ? "no records" : phases.source, phases.measured.size());
  return t;
}

ReportTable switch_table(const SwitchAnalysis& switches) {
  ReportTable t;
  t.headers = {"direction", "switches", "median", "max", "bytes received (busiest rank)", "wire bound",
               "× bound", "components (mean, slowest rank)"};
  t.numeric = {false, true, true, true, true, true, true, false};
  for (const auto& d : switches.directions) {
    std::string components;
    for (const auto& [name, s] : d.components_s)
      components += fmt::format("{}{} {}", components.empty() ? "" : ", ", name, format_seconds(s));
    if (d.unaccounted_s > 0)
      components += fmt::format("{}unaccounted {}", components.empty() ? "" : ", ", format_seconds(d.unaccounted_s));
    add(t, {d.direction, std::to_string(d.switches), format_seconds(d.median_s), format_seconds(d.max_s),
            format_bytes(static_cast<double>(d.median_max_bytes_received)),
            d.wire_bound_s ? format_seconds(*d.wire_bound_s) : "-",
            d.over_bound ? fmt::format("{:.1f}×", *d.over_bound) : "-", components});
  }
  t.note = switches.bandwidth_gbps
               ? fmt::format("Wire bound = bytes the busiest rank received ÷ {} GB/s ({}).",
                             format_number(*switches.bandwidth_gbps), switches.bandwidth_source)
               : "No link bandwidth measured (no communication benchmark, no large collective): no wire bound.";
  return t;
}

ReportTable role_table(const RoleIdleAnalysis& roles) {
  ReportTable t;
  t.headers = {"step"};
  t.numeric = {true};
  for (const auto& r : roles.roles) {
    t.headers.push_back(r.verl_name.empty() ? r.role + " idle" : r.verl_name);
    t.numeric.push_back(true);
  }
  for (const auto& s : roles.steps) {
    std::vector<std::string> row = {std::to_string(s.step)};
    for (const auto& r : roles.roles) {
      const auto it = s.idle_ratio.find(r.role);
      row.push_back(it == s.idle_ratio.end() ? "-" : format_percent(it->second));
    }
    add(t, row);
  }
  std::vector<std::string> mean = {"mean"};
  for (const auto& r : roles.roles) mean.push_back(format_percent(r.idle_ratio));
  if (!roles.roles.empty()) add(t, mean);
  t.note = "Idle ratio per rank and step = 1 − |∪ the role's phase ranges| ÷ the step range (every gap counted), "
           "the mean over the role's ranks" +
           (roles.verdict.empty() ? std::string(".") : "; verdict: " + roles.verdict + ".");
  return t;
}

ReportTable weight_sync_table(const WeightSyncAnalysis& w) {
  ReportTable t;
  t.headers = {"step", "syncs", "time", "bytes (busiest rank)", "GB/s", "wire bound", "of the link"};
  t.numeric = {true, true, true, true, true, true, true};
  for (const auto& s : w.steps)
    add(t, {std::to_string(s.step), std::to_string(s.syncs), format_seconds(s.seconds),
            s.bytes ? format_bytes(static_cast<double>(*s.bytes)) : "unknown", s.gbps ? format_number(*s.gbps) : "-",
            s.wire_bound_s ? format_seconds(*s.wire_bound_s) : "-", s.of_link ? format_percent(*s.of_link) : "-"},
        s.syncs > 1);
  t.note = fmt::format("Syncs: `{}` ranges per rank; bytes from {}; link: {}.", w.range_name,
                       w.bytes_source.empty() ? "nothing (unknown)" : w.bytes_source,
                       w.link_gbps ? fmt::format("{} GB/s ({})", format_number(*w.link_gbps), w.link_source)
                                   : std::string("none measured or given"));
  return t;
}

ReportTable memory_table(const MemoryAnalysis& m, const RunSummary& run) {
  ReportTable t = key_value_table("measure");
  // Neither a sample nor perf/max_memory_allocated_gb in the measured steps: no peak to quote (a
  // 0 B peak on "cpu" would read as a measurement).
  if (!m.has_samples && m.peak_allocated_bytes == 0) {
    add(t, {"memory samples", "none in the measured steps: " + run.missing()});
  } else {
    add(t, {"device", m.device.empty() ? "-" : m.device});
    add(t, {"peak allocated", fmt::format("{} (rank {}, step {})",
                                          format_bytes(static_cast<double>(m.peak_allocated_bytes)), m.peak_rank,
                                          m.peak_step)});
  }
  if (m.peak_reserved_bytes) add(t, {"peak reserved", format_bytes(static_cast<double>(*m.peak_reserved_bytes))});
  if (m.min_allocated_over_reserved) add(t, {"lowest allocated / reserved", format_number(*m.min_allocated_over_reserved)});
  if (m.worst_reserved_slack) add(t, {"worst reserved slack", format_percent(*m.worst_reserved_slack)});
  if (m.worst_split_fragmentation) add(t, {"worst split fragmentation", format_percent(*m.worst_split_fragmentation)});
  if (m.worst_external_fragmentation)
    add(t, {"worst external fragmentation", format_percent(*m.worst_external_fragmentation)});
  add(t, {"allocation retries", m.has_allocator_counters ? std::to_string(m.alloc_retries) : run.missing()});
  add(t, {"OOMs", m.has_allocator_counters ? std::to_string(m.ooms) : run.missing()});
  if (m.param_bytes) add(t, {"model parameters", format_bytes(static_cast<double>(*m.param_bytes))});
  if (m.peak_over_params) add(t, {"peak / parameter bytes", fmt::format("{:.2f}×", *m.peak_over_params)});
  if (m.kv_num_blocks) {
    add(t, {"KV pool blocks", fmt::format("{} used of {} at peak", m.kv_peak_blocks_used, m.kv_num_blocks)});
    if (m.kv_peak_occupancy) add(t, {"KV pool peak occupancy", format_percent(*m.kv_peak_occupancy)});
  }
  return t;
}

ReportTable memory_phase_table(const MemoryAnalysis& m) {
  ReportTable t;
  t.headers = {"rank", "phase", "peak allocated", "peak reserved", "lowest allocated / reserved"};
  t.numeric = {true, false, true, true, true};
  for (const auto& p : m.phases)
    add(t, {std::to_string(p.rank), p.phase, format_bytes(static_cast<double>(p.peak_allocated_bytes)),
            p.peak_reserved_bytes ? format_bytes(static_cast<double>(*p.peak_reserved_bytes)) : "-",
            or_dash(p.min_allocated_over_reserved, format_number)});
  return t;
}

ReportTable temporal_table(const TemporalAnalysis& temporal) {
  ReportTable t;
  t.headers = {"rank", "window (ms)", "idle (ms)", "compute (ms)", "non-compute (ms)", "idle", "compute", "non-compute"};
  t.numeric = {true, true, true, true, true, true, true, true};
  for (const auto& b : temporal.breakdown)
    add(t, {std::to_string(b.rank), ms(b.window_ns), ms(b.idle_ns), ms(b.compute_ns), ms(b.non_compute_ns),
            format_percent(b.idle_share), format_percent(b.compute_share), format_percent(b.non_compute_share)});
  t.note = "Source: " + temporal.note;
  return t;
}

ReportTable overlap_table(const TemporalAnalysis& temporal) {
  ReportTable t;
  t.headers = {"rank", "communication (ms)", "compute (ms)", "overlap (ms)", "overlap ratio", "exposed communication (ms)"};
  t.numeric = {true, true, true, true, true, true};
  for (const auto& o : temporal.overlap)
    add(t, {std::to_string(o.rank), ms(o.comm_ns), ms(o.compute_ns), ms(o.overlap_ns),
            o.overlap_ratio ? format_percent(*o.overlap_ratio) : "-", ms(o.exposed_comm_ns)});
  t.note = fmt::format("Source: {}. Overlap ratio = overlap ÷ communication (HTA): the share of communication "
                       "hidden under compute.",
                       to_string(temporal.source));
  return t;
}

ReportTable gpu_kernel_table(const GpuKernelSummary& gpu) {
  ReportTable t;
  t.headers = {"range", "kernel", "class", "count", "total (ms)", "min (ms)", "max (ms)", "share"};
  t.numeric = {false, false, false, true, true, true, true, true};
  for (const auto& k : gpu.top)
    add(t, {k.range.empty() ? "-" : k.range, k.kernel, k.kernel_class, std::to_string(k.count), ms(k.total_ns),
            ms(k.min_ns), ms(k.max_ns), format_percent(k.share)});
  if (!gpu.source.empty())
    t.note = fmt::format("Source: {}: {} GPU records, {} ms summed{}. Share = of the summed durations (not wall time).",
                         gpu.source, gpu.records, ms(gpu.total_ns),
                         gpu.busy_ns > 0 ? fmt::format(", {} ms of stream busy time (union per stream)", ms(gpu.busy_ns))
                                         : std::string());
  return t;
}

ReportTable straggler_table(const StragglerAnalysis& s) {
  ReportTable t;
  t.headers = {"phase", "fastest rank", "min (ms)", "median (ms)", "max (ms)", "slowest rank", "spread"};
  t.numeric = {false, true, true, true, true, true, true};
  for (const auto& p : s.phases)
    add(t, {p.phase, std::to_string(p.fastest_rank), ms_cell(p.min_s), ms_cell(p.median_s),
            ms_cell(p.max_s), std::to_string(p.slowest_rank), format_percent(p.spread)});
  t.note = "Over the ranks' mean times per measured step; spread = (max − min) ÷ median.";
  return t;
}

ReportTable imbalance_table(const StragglerAnalysis& s) {
  ReportTable t = key_value_table("measure");
  add(t, {"world size", std::to_string(s.world_size)});
  if (s.straggler_rank)
    add(t, {"straggler rank", fmt::format("rank {}: slowest in {} step(s), {} ({}) above the median rank",
                                          *s.straggler_rank, s.straggler_steps, format_seconds(s.straggler_excess_s),
                                          format_percent(s.straggler_excess_share))});
  if (s.late_collective_rank)
    add(t, {"last collective starts latest (HTA)",
            fmt::format("rank {} (std across ranks {} ms)", *s.late_collective_rank,
                        format_number(s.late_collective_stddev_ms))});
  if (s.token_imbalance) add(t, {"token imbalance (max − min) ÷ mean", format_percent(*s.token_imbalance)});
  for (const auto& [name, value] : s.global_seqlen) add(t, {name, format_number(value)});
  return t;
}

ReportTable trend_table(const std::vector<LinearTrend>& trends) {
  ReportTable t;
  t.headers = {"series", "unit", "points", "slope per step", "95 % CI", "relative slope per step", "fit first → last",
               "verdict"};
  t.numeric = {false, false, true, true, true, true, true, false};
  for (const auto& tr : trends) {
    // One point has no slope (its 0 is no measurement), and below kTrendMinPoints no verdict is
    // drawn (trends.h): "too few points", not "flat".
    if (tr.n < 2) {
      add(t, {tr.series, tr.unit, std::to_string(tr.n), "-", "(too few points)", "-", "-",
              fmt::format("too few points (fewer than {})", kTrendMinPoints)});
      continue;
    }
    const std::string verdict = tr.increasing ? "increasing"
                                : tr.decreasing ? "decreasing"
                                : tr.n < kTrendMinPoints ? fmt::format("too few points (fewer than {})", kTrendMinPoints)
                                                         : "flat";
    add(t, {tr.series, tr.unit, std::to_string(tr.n), format_number(tr.slope), fit_interval(tr.slope_ci_low, tr.slope_ci_high),
            format_percent(tr.relative_slope),
            fmt::format("{} → {}", format_number(tr.first_fit), format_number(tr.last_fit)), verdict},
        tr.increasing);
  }
  t.note = "Least-squares line over the measured steps; a trend counts only when its whole 95 % interval lies "
           "on one side of zero.";
  return t;
}

ReportTable comparison_table(const RunComparison& c) {
  ReportTable t;
  t.headers = {"phase", "old median (ms)", "new median (ms)", "change", "p-value (U test)", "n old / new", "verdict"};
  t.numeric = {false, true, true, true, true, true, false};
  for (const auto& d : c.phases) {
    std::string verdict = d.significant ? (d.change > 0 ? "significantly slower" : "significantly faster")
                                        : "not significant";
    if (!d.test.reliable) verdict += fmt::format(" (fewer than {} samples: unreliable)", kMinReliableRepetitions);
    add(t, {d.phase, ms_cell(d.old_values.median), ms_cell(d.new_values.median),
            std::isnan(d.change) ? "n/a" : fmt::format("{:+.1f} %", 100.0 * d.change), format_number(d.test.p_value),
            fmt::format("{} / {}", d.old_values.n, d.new_values.n), verdict},
        d.significant);
  }
  t.note = fmt::format("Old: {}. New: {}. Two-sided Mann–Whitney U test, alpha {}.", c.old_label, c.new_label,
                       format_number(kAlpha));
  return t;
}

ReportTable metric_comparison_table(const RunComparison& c) {
  ReportTable t;
  t.headers = {"step metric", "old median", "new median", "change", "p-value (U test)", "n old / new", "verdict"};
  t.numeric = {false, true, true, true, true, true, false};
  for (const auto& d : c.metrics) {
    std::string verdict = "not significant";
    if (d.significant) {
      const bool up = d.change > 0;
      verdict = d.better == Better::kNeither ? (up ? "significantly higher" : "significantly lower")
                : (up == (d.better == Better::kHigher)) ? "significantly better"
                                                         : "significantly worse";
    }
    if (!d.test.reliable) verdict += fmt::format(" (fewer than {} samples: unreliable)", kMinReliableRepetitions);
    add(t, {d.metric, format_number(d.old_values.median), format_number(d.new_values.median),
            std::isnan(d.change) ? "n/a" : fmt::format("{:+.1f} %", 100.0 * d.change), format_number(d.test.p_value),
            fmt::format("{} / {}", d.old_values.n, d.new_values.n), verdict},
        d.significant);
  }
  t.note = "Medians over the measured steps; tokens/s is each step's tokens over its time.";
  return t;
}

ReportTable config_diff_table(const RunComparison& c) {
  ReportTable t;
  t.headers = {"key", "old", "new"};
  t.numeric = {false, false, false};
  for (const auto& d : c.config_diff)
    add(t, {d.key, d.old_value.value_or("(absent)"), d.new_value.value_or("(absent)")});
  return t;
}

ReportTable matrix_table(const MatrixSummary& m) {
  const auto columns = matrix_columns(m);
  std::vector<std::string> rank_axes;
  for (const auto& axis : m.axes)
    if (axis.rank_axis) rank_axes.push_back(axis.name);
  ReportTable t;
  // One short column per axis (its level) instead of the cell's full name, which made the table
  // too wide for a page; the axes' full names are in the line above the table.
  t.headers = {"cell"};
  t.numeric = {false};
  for (const auto& axis : m.axes) {
    const auto dot = axis.name.rfind('.');
    t.headers.push_back(dot == std::string::npos ? axis.name : axis.name.substr(dot + 1));
    t.numeric.push_back(false);
  }
  for (const char* h : {"ranks", "runs"}) {
    t.headers.push_back(h);
    t.numeric.push_back(true);
  }
  for (const auto& key : columns) {
    const auto info = metric_info(key);
    t.headers.push_back(info.unit == "fraction" ? info.label + (info.label.back() == '%' ? "" : " %") : info.label);
    t.numeric.push_back(true);
  }
  for (const auto& axis : rank_axes) {
    t.headers.push_back("speedup (" + axis + ")");
    t.headers.push_back("efficiency (" + axis + ")");
    t.numeric.push_back(true);
    t.numeric.push_back(true);
  }
  for (const auto& c : m.cells) {
    TableRow row;
    row.cells = {fmt::format("{}{}", c.cell.cell_index + 1, c.cell.baseline ? "*" : "")};
    for (std::size_t i = 0; i < m.axes.size(); ++i) row.cells.push_back(i < c.cell.levels.size() ? c.cell.levels[i] : "");
    row.cells.push_back(std::to_string(c.cell.ranks));
    row.cells.push_back(c.failed ? fmt::format("{} ({} failed)", c.completed, c.failed) : std::to_string(c.completed));
    for (const auto& key : columns) {
      const auto it = c.metrics.find(key);
      if (!c.cell.invalid_reason.empty()) {
        row.cells.push_back("skipped: " + c.cell.invalid_reason);
        break;
      }
      if (it == c.metrics.end()) {
        row.cells.push_back("-");
        continue;
      }
      const double v = it->second.median;
      const auto info = metric_info(key);
      if (key == "step_s")
        row.cells.push_back(fmt::format("{} (CV {}){}", format_number(v), format_percent(it->second.cv), c.noisy ? " noisy" : ""));
      else if (key == "switch_s") row.cells.push_back(format_number(v * 1e3));     // label: "switch ms"
      else if (key == "switch_bytes") row.cells.push_back(format_number(v * 1e-6));  // label: "switch MB"
      else if (info.unit == "fraction") row.cells.push_back(format_number(100.0 * v));
      else row.cells.push_back(format_number(v));
    }
    if (c.cell.invalid_reason.empty())
      for (const auto& axis : rank_axes) {
        const auto p = std::find_if(c.scaling.begin(), c.scaling.end(), [&](const ScalingPoint& x) { return x.axis == axis; });
        row.cells.push_back(p == c.scaling.end() ? "-" : fmt::format("{:.2f}×", p->speedup));
        row.cells.push_back(p == c.scaling.end() ? "-" : format_percent(p->efficiency));
      }
    row.cells.resize(t.headers.size());
    t.rows.push_back(std::move(row));
  }
  t.note = fmt::format("Medians over completed repetitions ({} × {} measured steps after {} warm-up); * = baseline "
                       "cell; noisy = step-time CV above {}.",
                       m.matrix.repetitions, m.matrix.measured_steps, m.matrix.warmup_steps,
                       format_percent(m.cv_threshold));
  return t;
}

}  // namespace hs::reports::detail
