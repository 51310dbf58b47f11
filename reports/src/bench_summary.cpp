// bench_summary.cpp — run metrics, cell spreads and scaling of a matrix (see bench_summary.h).
#include "hybridscope/reports/bench_summary.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "hybridscope/reports/comm_time.h"
#include "hybridscope/reports/run_data.h"

namespace hs::reports {

namespace {

// Phases whose share of the step the summary reports (verl's timing_s names).
const char* const kPhases[] = {"gen",           "reward",       "old_log_prob",
                               "ref",           "values",       "adv",
                               "update_critic", "update_actor", "switch/train_to_rollout",
                               "switch/rollout_to_train"};

double median_of(std::vector<double> v) { return v.empty() ? 0.0 : spread(std::move(v)).median; }

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

// `steps` without its first `warmup_steps` (none left when it has no more than that).
std::set<std::int64_t> after_warmup(const std::set<std::int64_t>& steps, int warmup_steps) {
  auto it = steps.begin();
  for (int i = 0; i < warmup_steps && it != steps.end(); ++i) ++it;
  return {it, steps.end()};
}

}  // namespace

MetricInfo metric_info(const std::string& key) {
  static const std::map<std::string, MetricInfo> kKnown = {
      {"step_s", {"step_s", "step s", "s", true}},
      {"tokens_per_s", {"tokens_per_s", "tok/s", "tokens/s", false}},
      {"tokens_per_s_per_rank", {"tokens_per_s_per_rank", "tok/s/rank", "tokens/s", false}},
      {"gen_tokens_per_s", {"gen_tokens_per_s", "gen tok/s", "tokens/s", false}},
      {"gen_s_per_response", {"gen_s_per_response", "gen s/resp", "s", true}},
      {"switch_s", {"switch_s", "switch ms", "s", true}},
      {"switch_bytes", {"switch_bytes", "switch MB", "bytes", true}},
      {"comm_share", {"comm_share", "comm %", "fraction", true}},
      {"peak_mem_gb", {"peak_mem_gb", "peak GB", "GB", true}},
      {"reserved_slack_max", {"reserved_slack_max", "slack max", "fraction", true}},
      {"external_frag_max", {"external_frag_max", "ext frag max", "fraction", true}},
      {"mfu", {"mfu", "MFU", "fraction", false}},
  };
  if (const auto it = kKnown.find(key); it != kKnown.end()) return it->second;
  if (key.rfind("share/", 0) == 0) return {key, key.substr(6) + " %", "fraction", true};
  if (key.rfind("busbw_gbps/", 0) == 0) return {key, key.substr(11) + " busbw", "GB/s", false};
  return {key, key, "", true};
}

RunMetrics run_metrics(const RunDatabase& db, std::int64_t run_id, int warmup_steps) {
  RunMetrics out;
  out.run_id = run_id;
  out.world_size = db.run(run_id).world_size;
  // Step metrics of the measured steps, by name. The first `warmup_steps` steps recorded are
  // warm-up whatever their numbers: an imported trace numbers its steps as the profiler did
  // (ProfilerStep#551, ...), not from 1.
  const auto metrics = db.step_metrics(run_id);
  std::set<std::int64_t> metric_steps;
  for (const auto& m : metrics) metric_steps.insert(m.step);
  const auto metric_measured = after_warmup(metric_steps, warmup_steps);
  std::map<std::string, std::map<std::int64_t, double>> by_name;
  for (const auto& m : metrics)
    if (metric_measured.count(m.step)) by_name[m.name][m.step] = m.value;
  auto series = [&](const std::string& name) -> const std::map<std::int64_t, double>* {
    const auto it = by_name.find(name);
    return it == by_name.end() ? nullptr : &it->second;
  };
  auto mean = [](const std::map<std::int64_t, double>& s) {
    double sum = 0.0;
    for (const auto& [step, v] : s) sum += v;
    return s.empty() ? 0.0 : sum / static_cast<double>(s.size());
  };
  const auto* step = series("timing_s/step");
  if (!step || step->empty()) return out;  // no measured step: nothing to report
  double step_total = 0.0;
  for (const auto& [s, v] : *step) {
    out.step_seconds.push_back(v);
    step_total += v;
  }
  out.values["step_s"] = step_total / static_cast<double>(step->size());
  if (const auto* tokens = series("perf/total_num_tokens")) {
    double total = 0.0;
    for (const auto& [s, v] : *tokens) total += v;
    if (step_total > 0) {
      out.values["tokens_per_s"] = total / step_total;
      out.values["tokens_per_s_per_rank"] = total / step_total / out.world_size;
    }
  }
  const auto* gen = series("timing_s/gen");
  if (gen) {
    if (const auto* per_token = series("timing_per_token_ms/gen")) {
      double response_tokens = 0.0, gen_total = 0.0;
      for (const auto& [s, ms] : *per_token) {
        const auto g = gen->find(s);
        if (g == gen->end() || ms <= 0) continue;
        response_tokens += g->second * 1000.0 / ms;
        gen_total += g->second;
      }
      if (gen_total > 0) out.values["gen_tokens_per_s"] = response_tokens / gen_total;
    }
    const auto batch = db.config_value(run_id, "data.train_batch_size");
    const auto n = db.config_value(run_id, "actor_rollout_ref.rollout.n");
    if (batch && n) {
      const double responses = std::stod(*batch) * std::stod(*n);
      if (responses > 0) out.values["gen_s_per_response"] = mean(*gen) / responses;
    }
  }
  for (const char* phase : kPhases) {
    const auto* s = series(std::string("timing_s/") + phase);
    if (!s) continue;
    double total = 0.0;
    for (const auto& [st, v] : *s) total += v;
    if (step_total > 0) out.values[std::string("share/") + phase] = total / step_total;
  }
  if (const auto* mem = series("perf/max_memory_allocated_gb")) {
    double peak = 0.0;
    for (const auto& [s, v] : *mem) peak = std::max(peak, v);
    out.values["peak_mem_gb"] = peak;
  }
  if (const auto* mfu = series("perf/mfu/actor")) out.values["mfu"] = mean(*mfu);

  // The ranges, collectives and switches, each in the step whose range it starts in (StepWindows):
  // the final validation's switch and collectives carry the last step's number but lie after it.
  RunData data;
  data.run = db.run(run_id);
  data.ranges = db.ranges(run_id);
  data.comm_ops = db.comm_ops(run_id);
  data.switches = db.switches(run_id);
  sort_by_start(data);
  const StepWindows windows(data);
  const auto range_steps = data.steps();
  const auto measured_set = after_warmup({range_steps.begin(), range_steps.end()}, warmup_steps);
  const std::vector<std::int64_t> measured(measured_set.begin(), measured_set.end());

  // Switches: the slowest rank and the bytes all ranks received, per (step, direction). Measured:
  // a step of the measured ranges, or, for a run without step ranges, any step numbered after the
  // last warm-up step of its metrics.
  std::int64_t last_warmup = warmup_steps;
  if (!metric_steps.empty() && warmup_steps > 0) {
    const auto n = std::min(metric_steps.size(), static_cast<std::size_t>(warmup_steps));
    last_warmup = *std::next(metric_steps.begin(), static_cast<std::ptrdiff_t>(n) - 1);
  }
  const auto measured_switch = [&](std::int64_t step) {
    return range_steps.empty() ? step > last_warmup : measured_set.count(step) != 0;
  };
  // Switches: the slowest rank and the bytes all ranks received, per (step, direction).
  std::map<std::int64_t, std::pair<std::int64_t, std::int64_t>> train_to_rollout;  // step -> (max ns, bytes)
  for (const auto& sw : data.switches) {
    const auto in_step = windows.step_of(sw.rank, sw.start_ns, sw.step);
    if (!in_step || !measured_switch(*in_step) || sw.direction != "train_to_rollout") continue;
    auto& [slowest, bytes] = train_to_rollout[*in_step];
    slowest = std::max(slowest, sw.end_ns - sw.start_ns);
    bytes += sw.bytes_received;
  }
  std::vector<double> switch_bytes;
  for (const auto& [s, v] : train_to_rollout) {
    out.switch_seconds.push_back(static_cast<double>(v.first) * 1e-9);
    switch_bytes.push_back(static_cast<double>(v.second));
  }
  if (!out.switch_seconds.empty()) {
    out.values["switch_s"] = median_of(out.switch_seconds);
    out.values["switch_bytes"] = median_of(switch_bytes);
  }

  // Collectives: each rank's time inside them (the union of their intervals, comm_time.h) over its
  // measured steps, and busbw per op.
  if (const auto share = comm_time(data, measured).mean_share) out.values["comm_share"] = *share;
  std::map<std::string, std::vector<double>> busbw;
  for (const auto& c : data.comm_ops) {
    if (!windows.in(measured_set, c.rank, c.start_ns, c.step)) continue;
    if (c.busbw_gbps && c.bytes > 0) busbw[c.op].push_back(*c.busbw_gbps);
  }
  for (auto& [op, v] : busbw) out.values["busbw_gbps/" + op] = median_of(std::move(v));

  const FragmentationPeak frag = db.worst_fragmentation(run_id, warmup_steps + 1);
  if (frag.reserved_slack) out.values["reserved_slack_max"] = *frag.reserved_slack;
  if (frag.external_fragmentation) out.values["external_frag_max"] = *frag.external_fragmentation;
  return out;
}

MatrixSummary summarize_matrix(const RunDatabase& db, std::int64_t matrix_id, double cv_threshold) {
  MatrixSummary out;
  out.matrix = db.matrix(matrix_id);
  out.axes = db.matrix_axes(matrix_id);
  out.cv_threshold = cv_threshold;
  std::map<std::int64_t, std::size_t> by_id;
  for (const auto& cell : db.matrix_cells(matrix_id)) {
    by_id[cell.id] = out.cells.size();
    CellSummary summary;
    summary.cell = cell;
    out.cells.push_back(std::move(summary));
  }
  std::set<std::string> environments;
  for (const auto& r : db.matrix_runs(matrix_id)) {
    auto& cell = out.cells[by_id.at(r.cell_id)];
    environments.insert(fmt::format("{}, {} ({} cpus), torch {}, hybridscope {} ({}), {}", r.host, r.cpu_model,
                                    r.num_cpus, r.torch_version, r.hybridscope_version, r.hybridscope_commit,
                                    r.thread_settings));
    if (r.status == "failed") {
      ++cell.failed;
      cell.errors.push_back(first_line(r.error));
    } else if (r.status == "interrupted") {
      ++cell.interrupted;
    } else if (r.status == "completed" && r.run_id) {
      ++cell.completed;
      cell.runs.push_back(run_metrics(db, *r.run_id, out.matrix.warmup_steps));
    }
  }
  out.environments.assign(environments.begin(), environments.end());
  for (auto& cell : out.cells) {
    std::map<std::string, std::vector<double>> samples;
    std::vector<double> switches;
    for (const auto& run : cell.runs) {
      for (const auto& [key, value] : run.values) samples[key].push_back(value);
      switches.insert(switches.end(), run.switch_seconds.begin(), run.switch_seconds.end());
    }
    for (auto& [key, values] : samples) cell.metrics[key] = spread(std::move(values));
    if (!switches.empty()) cell.switch_latency = spread(std::move(switches));
    const auto step = cell.metrics.find("step_s");
    cell.noisy = step != cell.metrics.end() && step->second.n > 1 && step->second.cv > cv_threshold;
  }
  // Scaling along every rank axis, against the reference cell of the same other levels.
  for (const auto& axis : out.axes) {
    if (!axis.rank_axis) continue;
    const auto a = static_cast<std::size_t>(axis.axis_index);
    for (auto& cell : out.cells) {
      const CellSummary* reference = nullptr;
      for (const auto& other : out.cells) {
        bool same_elsewhere = true;
        for (std::size_t i = 0; i < other.cell.levels.size(); ++i)
          if (i != a && other.cell.levels[i] != cell.cell.levels[i]) same_elsewhere = false;
        if (!same_elsewhere || !other.cell.invalid_reason.empty()) continue;
        const bool is_reference = axis.baseline_level.empty()
                                      ? (!reference || other.cell.ranks < reference->cell.ranks)
                                      : other.cell.levels[a] == axis.baseline_level;
        if (is_reference) reference = &other;
      }
      if (!reference) continue;
      const auto t = cell.metrics.find("step_s");
      const auto t0 = reference->metrics.find("step_s");
      if (t == cell.metrics.end() || t0 == reference->metrics.end()) continue;
      ScalingPoint p;
      p.axis = axis.name;
      p.kind = axis.scaling.empty() ? "strong" : axis.scaling;
      p.reference_ranks = reference->cell.ranks;
      p.reference_cell = reference->cell.cell_index;
      const Scaling s = p.kind == "weak"
                            ? weak_scaling_from_times(p.reference_ranks, t0->second.median, cell.cell.ranks, t->second.median)
                            : strong_scaling_from_times(p.reference_ranks, t0->second.median, cell.cell.ranks,
                                                        t->second.median);
      p.speedup = s.speedup;
      p.efficiency = s.efficiency;
      const auto x = cell.metrics.find("tokens_per_s");
      const auto x0 = reference->metrics.find("tokens_per_s");
      if (x != cell.metrics.end() && x0 != reference->metrics.end() && x0->second.median > 0)
        p.throughput_efficiency =
            throughput_efficiency(p.reference_ranks, x0->second.median, cell.cell.ranks, x->second.median);
      cell.scaling.push_back(p);
    }
  }
  return out;
}

namespace {

std::string cell_value(const CellSummary& c, const std::string& key, double scale, int precision) {
  const auto it = c.metrics.find(key);
  if (it == c.metrics.end()) return "-";
  return fmt::format("{:.{}f}", it->second.median * scale, precision);
}

std::string pad(const std::string& s, std::size_t width, bool left) {
  if (s.size() >= width) return s;
  return left ? s + std::string(width - s.size(), ' ') : std::string(width - s.size(), ' ') + s;
}

// A table with a header row, columns sized to their widest entry; text columns left-aligned.
std::string render(const std::vector<std::vector<std::string>>& rows, std::size_t text_columns) {
  std::vector<std::size_t> width;
  for (const auto& row : rows)
    for (std::size_t i = 0; i < row.size(); ++i) {
      if (width.size() <= i) width.push_back(0);
      width[i] = std::max(width[i], row[i].size());
    }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t i = 0; i < row.size(); ++i) line += (i ? "  " : "") + pad(row[i], width[i], i < text_columns);
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

}  // namespace

std::string format_summary(const MatrixSummary& s) {
  std::string out = fmt::format("matrix {} '{}' ({}): {} cells, {} repetitions of {} measured steps after {} warm-up\n",
                                s.matrix.id, s.matrix.name, s.matrix.status, s.cells.size(), s.matrix.repetitions,
                                s.matrix.measured_steps, s.matrix.warmup_steps);
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> header = {"cell"};
  for (const auto& axis : s.axes) header.push_back(axis.name);
  const std::size_t text_columns = header.size();
  for (const char* h : {"ranks", "reps", "step s", "[min-max]", "CV", "tok/s", "tok/s/rank", "gen tok/s",
                        "switch ms", "switch MB", "comm %", "peak MB", "MFU %"})
    header.push_back(h);
  std::vector<std::string> scaling_axes;
  for (const auto& axis : s.axes)
    if (axis.rank_axis) {
      scaling_axes.push_back(axis.name);
      header.push_back("speedup");
      header.push_back(fmt::format("eff ({})", axis.scaling.empty() ? "strong" : axis.scaling));
    }
  rows.push_back(header);
  for (const auto& c : s.cells) {
    std::vector<std::string> row = {fmt::format("{}{}", c.cell.cell_index + 1, c.cell.baseline ? "*" : "")};
    for (const auto& level : c.cell.levels) row.push_back(level);
    row.push_back(std::to_string(c.cell.ranks));
    if (!c.cell.invalid_reason.empty()) {
      row.push_back("skipped (invalid config)");
      rows.push_back(row);
      continue;
    }
    row.push_back(c.failed ? fmt::format("{} ({} failed)", c.completed, c.failed) : std::to_string(c.completed));
    const auto step = c.metrics.find("step_s");
    if (step == c.metrics.end()) {
      row.push_back("-");
      rows.push_back(row);
      continue;
    }
    row.push_back(fmt::format("{:.3f}", step->second.median));
    row.push_back(fmt::format("[{:.3f}-{:.3f}]", step->second.min, step->second.max));
    row.push_back(fmt::format("{:.1f}%{}", 100.0 * step->second.cv, c.noisy ? " noisy" : ""));
    row.push_back(cell_value(c, "tokens_per_s", 1.0, 0));
    row.push_back(cell_value(c, "tokens_per_s_per_rank", 1.0, 0));
    row.push_back(cell_value(c, "gen_tokens_per_s", 1.0, 0));
    row.push_back(cell_value(c, "switch_s", 1e3, 2));  // the report's definition too (bench_summary.h)
    row.push_back(cell_value(c, "switch_bytes", 1e-6, 2));
    row.push_back(cell_value(c, "comm_share", 100.0, 1));
    row.push_back(cell_value(c, "peak_mem_gb", 1e3, 1));
    row.push_back(cell_value(c, "mfu", 100.0, 2));
    for (const auto& axis : scaling_axes) {
      const auto p = std::find_if(c.scaling.begin(), c.scaling.end(), [&](const ScalingPoint& x) { return x.axis == axis; });
      row.push_back(p == c.scaling.end() ? "-" : fmt::format("{:.2f}x", p->speedup));
      row.push_back(p == c.scaling.end() ? "-" : fmt::format("{:.0f}%", 100.0 * p->efficiency));
    }
    rows.push_back(row);
  }
  out += render(rows, text_columns);
  out += "(medians over repetitions; * baseline cell; switch = the median over repetitions of each run's median "
         "slowest-rank train->rollout switch; "
         "eff against the cell with the reference rank count)\n";

  // Phase shares of the step.
  std::set<std::string> phases;
  for (const auto& c : s.cells)
    for (const auto& [key, v] : c.metrics)
      if (key.rfind("share/", 0) == 0) phases.insert(key);
  if (!phases.empty()) {
    std::vector<std::vector<std::string>> share_rows;
    std::vector<std::string> h = {"cell"};
    for (const auto& p : phases) h.push_back(p.substr(6) + " %");
    share_rows.push_back(h);
    for (const auto& c : s.cells) {
      if (c.metrics.empty()) continue;
      std::vector<std::string> row = {std::to_string(c.cell.cell_index + 1)};
      for (const auto& p : phases) row.push_back(cell_value(c, p, 100.0, 1));
      share_rows.push_back(row);
    }
    out += "\nphase shares of the step (timing_s/<phase> / timing_s/step, medians):\n" + render(share_rows, 1);
  }
  for (const auto& c : s.cells) {
    for (const auto& e : c.errors) out += fmt::format("cell {} failed: {}\n", c.cell.cell_index + 1, e);
    if (!c.cell.invalid_reason.empty())
      out += fmt::format("cell {} skipped: {}\n", c.cell.cell_index + 1, c.cell.invalid_reason);
  }
  const auto noisy = std::count_if(s.cells.begin(), s.cells.end(), [](const CellSummary& c) { return c.noisy; });
  if (noisy)
    out += fmt::format("{} cell(s) noisy: step-time CV above {:.0f}% over repetitions (more repetitions, or a quieter "
                       "machine)\n", noisy, 100.0 * s.cv_threshold);
  for (const auto& e : s.environments) out += "ran on: " + e + "\n";
  return out;
}

nlohmann::json summary_json(const MatrixSummary& s) {
  using nlohmann::json;
  auto spread_json = [](const Spread& x) {
    return json{{"n", x.n},     {"median", x.median}, {"min", x.min}, {"max", x.max},      {"q1", x.q1},
                {"q3", x.q3},   {"iqr", x.iqr},       {"mean", x.mean}, {"stddev", x.stddev}, {"cv", x.cv}};
  };
  json cells = json::array();
  for (const auto& c : s.cells) {
    json metrics = json::object();
    for (const auto& [key, x] : c.metrics) metrics[key] = spread_json(x);
    json scaling = json::array();
    for (const auto& p : c.scaling)
      scaling.push_back({{"axis", p.axis}, {"kind", p.kind}, {"reference_ranks", p.reference_ranks},
                         {"reference_cell", p.reference_cell}, {"speedup", p.speedup}, {"efficiency", p.efficiency},
                         {"throughput_efficiency", p.throughput_efficiency}});
    json runs = json::array();
    for (const auto& r : c.runs) runs.push_back({{"run_id", r.run_id}, {"values", r.values}});
    json cell = {{"cell_index", c.cell.cell_index}, {"name", c.cell.name},       {"levels", c.cell.levels},
                 {"overrides", c.cell.overrides},   {"ranks", c.cell.ranks},     {"baseline", c.cell.baseline},
                 {"completed", c.completed},        {"failed", c.failed},        {"interrupted", c.interrupted},
                 {"errors", c.errors},              {"noisy", c.noisy},          {"metrics", metrics},
                 {"scaling", scaling},              {"runs", runs}};
    if (!c.cell.invalid_reason.empty()) cell["invalid_reason"] = c.cell.invalid_reason;
    if (c.switch_latency) cell["switch_latency_s"] = spread_json(*c.switch_latency);
    cells.push_back(cell);
  }
  json axes = json::array();
  for (const auto& a : s.axes)
    axes.push_back({{"name", a.name}, {"rank_axis", a.rank_axis}, {"scaling", a.scaling}, {"baseline_level", a.baseline_level}});
  return {{"matrix", {{"id", s.matrix.id}, {"name", s.matrix.name}, {"status", s.matrix.status},
                      {"spec_path", s.matrix.spec_path}, {"repetitions", s.matrix.repetitions},
                      {"warmup_steps", s.matrix.warmup_steps}, {"measured_steps", s.matrix.measured_steps}}},
          {"axes", axes}, {"cv_threshold", s.cv_threshold}, {"environments", s.environments}, {"cells", cells}};
}

std::string summary_csv(const MatrixSummary& s) {
  auto quoted = [](const std::string& text) {
    std::string out = "\"";
    for (const char ch : text) out += ch == '"' ? std::string("\"\"") : std::string(1, ch);
    return out + "\"";
  };
  std::string out = "cell_index,cell,metric,n,median,min,max,q1,q3,cv\n";
  auto row = [&](const CellSummary& c, const std::string& metric, const Spread& x) {
    out += fmt::format("{},{},{},{},{},{},{},{},{},{}\n", c.cell.cell_index + 1, quoted(c.cell.name), metric, x.n,
                       x.median, x.min, x.max, x.q1, x.q3, x.cv);
  };
  for (const auto& c : s.cells) {
    for (const auto& [key, x] : c.metrics) row(c, key, x);
    if (c.switch_latency) row(c, "switch_latency_s (pooled)", *c.switch_latency);
    for (const auto& p : c.scaling) {
      out += fmt::format("{},{},scaling/{}/speedup,1,{},,,,,\n", c.cell.cell_index + 1, quoted(c.cell.name), p.axis, p.speedup);
      out += fmt::format("{},{},scaling/{}/efficiency_{},1,{},,,,,\n", c.cell.cell_index + 1, quoted(c.cell.name), p.axis,
                         p.kind, p.efficiency);
    }
  }
  return out;
}

}  // namespace hs::reports
