// bench_compare.cpp — matching cells of two benchmark databases and testing each metric's change
// (see bench_compare.h).
#include "hybridscope/reports/bench_compare.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "hybridscope/reports/bench_summary.h"
#include "hybridscope/reports/run_data.h"

namespace hs::reports {

namespace {

// The metrics compare reports, in this order.
const char* const kCompared[] = {"step_s",     "tokens_per_s", "gen_tokens_per_s", "switch_s",
                                 "switch_bytes", "comm_share",  "peak_mem_gb",      "mfu"};

// A cell's identity across files: its rank count and overrides, without the step count.
std::string cell_key(const MatrixCellRow& cell) {
  std::vector<std::string> overrides;
  for (const auto& o : cell.overrides)
    if (o.rfind("trainer.total_training_steps=", 0) != 0) overrides.push_back(o);
  std::sort(overrides.begin(), overrides.end());
  std::string key = fmt::format("ranks={}", cell.ranks);
  for (const auto& o : overrides) key += "\n" + o;
  return key;
}

MetricComparison compare_samples(const std::string& metric, std::vector<double> old_values,
                                 std::vector<double> new_values, const std::string& what) {
  MetricComparison m;
  m.metric = metric;
  m.samples = what;
  m.old_values = spread(old_values);
  m.new_values = spread(new_values);
  m.change = relative_change(m.old_values.median, m.new_values.median);
  // One value a side has no spread to test against: shown, not tested (the U test of 1 v 1 is p = 1
  // whatever the change, which read as "no significant change").
  if (old_values.size() >= 2 && new_values.size() >= 2) {
    m.test = mann_whitney_u(old_values, new_values);
    m.significant = m.test->p_value < kAlpha;
  }
  const bool higher = m.new_values.median > m.old_values.median;
  m.worse = metric_info(metric).lower_is_better ? higher : (m.new_values.median < m.old_values.median);
  if (metric == "step_s") {
    m.old_trimmed_mean = trimmed_mean(old_values);
    m.new_trimmed_mean = trimmed_mean(new_values);
  }
  return m;
}

// A metric's per-step delta from compare_runs(), as compare shows it.
MetricComparison from_step_delta(const std::string& metric, const Spread& old_values, const Spread& new_values,
                                 const MannWhitney& test) {
  MetricComparison m;
  m.metric = metric;
  m.samples = "steps";
  m.old_values = old_values;
  m.new_values = new_values;
  m.change = relative_change(old_values.median, new_values.median);
  m.test = test;
  m.significant = test.p_value < kAlpha;
  const bool higher = new_values.median > old_values.median;
  m.worse = metric_info(metric).lower_is_better ? higher : (new_values.median < old_values.median);
  return m;
}

// The samples of one side of a cell: the metric's values and what one of them is.
using Samples = std::map<std::string, std::pair<std::vector<double>, std::string>>;

// Per-metric samples of a cell: one value per completed repetition.
Samples repetition_samples(const CellSummary& cell) {
  Samples out;
  for (const auto& run : cell.runs)
    for (const auto& [key, value] : run.values) {
      out[key].first.push_back(value);
      out[key].second = "repetitions";
    }
  return out;
}

// One run: its measured steps and switches where it has them, else its one value per metric.
Samples single_run_samples(const RunMetrics& r) {
  Samples s;
  for (const auto& [key, value] : r.values) s[key] = {{value}, "repetitions"};
  if (!r.step_seconds.empty()) s["step_s"] = {r.step_seconds, "steps"};
  if (!r.switch_seconds.empty()) s["switch_s"] = {r.switch_seconds, "switches"};
  return s;
}

// compare's metric -> the per-step delta of compare_runs() that measures it.
std::optional<MetricComparison> per_step_metric(const std::string& metric, const RunComparison& runs) {
  if (metric == "step_s") {
    for (const auto& d : runs.phases)
      if (d.phase == "step") return from_step_delta(metric, d.old_values, d.new_values, d.test);
    return std::nullopt;
  }
  const char* step_metric = metric == "tokens_per_s" ? "tokens/s" : metric == "mfu" ? "perf/mfu/actor" : nullptr;
  if (!step_metric) return std::nullopt;
  for (const auto& d : runs.metrics)
    if (d.metric == step_metric) return from_step_delta(metric, d.old_values, d.new_values, d.test);
  return std::nullopt;
}

// `per_step`: both sides are one run each; its per-step deltas replace the single values.
CellComparison compare_cells(const std::string& name, const Samples& old_samples, const Samples& new_samples,
                             const std::optional<RunComparison>& per_step = std::nullopt) {
  CellComparison c;
  c.name = name;
  for (const char* metric : kCompared) {
    const auto o = old_samples.find(metric);
    const auto n = new_samples.find(metric);
    if (per_step) {
      if (auto m = per_step_metric(metric, *per_step)) {
        if (o != old_samples.end() && n != new_samples.end() && std::string(metric) == "step_s") {
          m->old_trimmed_mean = trimmed_mean(o->second.first);
          m->new_trimmed_mean = trimmed_mean(n->second.first);
        }
        c.metrics.push_back(std::move(*m));
        continue;
      }
    }
    if (o == old_samples.end() || n == new_samples.end() || o->second.first.empty() || n->second.first.empty()) continue;
    const std::string what = o->second.second == n->second.second ? o->second.second : "repetitions";
    c.metrics.push_back(compare_samples(metric, o->second.first, n->second.first, what));
  }
  // One run a side: then every phase both recorded, step by step (verl's timing_s/ names; lower
  // is better), after the cell's own metrics.
  if (per_step)
    for (const auto& d : per_step->phases)
      if (d.phase != "step") c.metrics.push_back(from_step_delta("timing_s/" + d.phase, d.old_values, d.new_values, d.test));
  return c;
}

// The per-step comparison of two runs, by the function `report --compare` uses.
RunComparison per_step_comparison(const RunDatabase& old_db, std::int64_t old_run, const RunDatabase& new_db,
                                  std::int64_t new_run, int warmup_steps) {
  return compare_runs(load_run(old_db, old_run), load_run(new_db, new_run), warmup_steps);
}

// "config differs in 2 keys: a (old 1, new 2); b (old —, new x)", the first few keys by name.
std::string config_mismatch(const std::vector<ConfigDifference>& diff) {
  constexpr std::size_t kShown = 6;
  auto value = [](const std::optional<std::string>& v) { return v ? *v : std::string("unset"); };
  std::string out = fmt::format("config differs in {} key{}: ", diff.size(), diff.size() == 1 ? "" : "s");
  for (std::size_t i = 0; i < diff.size() && i < kShown; ++i)
    out += fmt::format("{}{} (old {}, new {})", i ? "; " : "", diff[i].key, value(diff[i].old_value),
                       value(diff[i].new_value));
  if (diff.size() > kShown) out += fmt::format("; and {} more (--json lists them all)", diff.size() - kShown);
  return out;
}

void add_config_mismatch(Comparison& out, std::vector<ConfigDifference> diff) {
  if (diff.empty()) return;
  out.mismatches.push_back(config_mismatch(diff));
  out.config_diff = std::move(diff);
}

Comparison compare_matrices(const RunDatabase& old_db, const RunDatabase& new_db) {
  Comparison out;
  out.mode = "matrix";
  const auto old_matrix = summarize_matrix(old_db, old_db.matrices().back().id);
  const auto new_matrix = summarize_matrix(new_db, new_db.matrices().back().id);
  out.old_label = fmt::format("matrix {} '{}'", old_matrix.matrix.id, old_matrix.matrix.name);
  out.new_label = fmt::format("matrix {} '{}'", new_matrix.matrix.id, new_matrix.matrix.name);
  std::map<std::string, const CellSummary*> old_cells;
  for (const auto& c : old_matrix.cells)
    if (c.cell.invalid_reason.empty()) old_cells[cell_key(c.cell)] = &c;
  std::set<std::string> matched;
  std::map<std::string, ConfigDifference> config_diff;  // over the matched cells' first runs, by key
  for (const auto& c : new_matrix.cells) {
    if (!c.cell.invalid_reason.empty()) continue;
    const auto key = cell_key(c.cell);
    const auto o = old_cells.find(key);
    if (o == old_cells.end()) {
      out.only_new.push_back(c.cell.name);
      continue;
    }
    matched.insert(key);
    const CellSummary& old_cell = *o->second;
    if (!old_cell.runs.empty() && !c.runs.empty())
      for (auto& d : config_differences(old_db.config(old_cell.runs.front().run_id), new_db.config(c.runs.front().run_id)))
        config_diff.emplace(d.key, d);
    if (old_cell.runs.size() == 1 && c.runs.size() == 1) {
      // One repetition a side: the per-step samples (the same warm-up the summary left out).
      out.cells.push_back(compare_cells(
          c.cell.name, single_run_samples(old_cell.runs.front()), single_run_samples(c.runs.front()),
          per_step_comparison(old_db, old_cell.runs.front().run_id, new_db, c.runs.front().run_id,
                              std::max(old_matrix.matrix.warmup_steps, new_matrix.matrix.warmup_steps))));
    } else {
      out.cells.push_back(compare_cells(c.cell.name, repetition_samples(old_cell), repetition_samples(c)));
    }
  }
  for (const auto& [key, c] : old_cells)
    if (!matched.count(key)) out.only_old.push_back(c->cell.name);
  std::vector<ConfigDifference> diff;
  for (auto& [key, d] : config_diff) diff.push_back(std::move(d));
  add_config_mismatch(out, std::move(diff));
  return out;
}

std::string file_holds(const RunDatabase& db) {
  const auto matrices = db.matrices();
  if (matrices.empty()) return "plain runs";
  return fmt::format("matrix {} '{}'", matrices.back().id, matrices.back().name);
}

// "recorded by hybridscope" or "imported (kineto)".
std::string origin(const RunSummary& run) {
  return run.imported() ? "imported (" + run.source + ")" : "recorded by hybridscope";
}

Comparison compare_runs(const RunDatabase& old_db, const RunDatabase& new_db, std::optional<std::int64_t> old_id,
                        std::optional<std::int64_t> new_id) {
  Comparison out;
  out.mode = "run";
  const auto old_run = old_id ? old_db.run(*old_id) : old_db.last_run();
  const auto new_run = new_id ? new_db.run(*new_id) : new_db.last_run();
  out.old_label = fmt::format("run {} '{}'", old_run.id, old_run.name);
  out.new_label = fmt::format("run {} '{}'", new_run.id, new_run.name);
  if (!old_id && !new_id && (!old_db.matrices().empty() || !new_db.matrices().empty()))
    out.mismatches.push_back(fmt::format("old holds {}, new {}: comparing the last run of each, not cell by cell",
                                         file_holds(old_db), file_holds(new_db)));
  if (old_run.source != new_run.source)
    out.mismatches.push_back(fmt::format("source differs: old {}, new {}", origin(old_run), origin(new_run)));
  if (old_run.world_size != new_run.world_size)
    out.mismatches.push_back(
        fmt::format("rank count differs: old {}, new {}", old_run.world_size, new_run.world_size));
  // A plain run has no warm-up setting: its first step (compilation, allocator growth) is left out.
  constexpr int kWarmup = 1;
  const auto per_step = per_step_comparison(old_db, old_run.id, new_db, new_run.id, kWarmup);
  // An imported run has no config: every key of the other side would read as "changed". Two
  // imported runs lack it alike, which is no difference between them.
  if (old_run.imported() != new_run.imported())
    out.mismatches.push_back(per_step.config_note);
  else if (!old_run.imported())
    add_config_mismatch(out, config_differences(old_db.config(old_run.id), new_db.config(new_run.id)));
  if (!per_step.only_old_phases.empty() || !per_step.only_new_phases.empty()) {
    auto list = [](const std::vector<std::string>& names) {
      std::string out;
      for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
      return out.empty() ? std::string("none") : out;
    };
    out.mismatches.push_back(fmt::format("phases on one side only, not compared: old {}; new {}",
                                         list(per_step.only_old_phases), list(per_step.only_new_phases)));
  }
  out.cells.push_back(compare_cells(new_run.name, single_run_samples(run_metrics(old_db, old_run.id, kWarmup)),
                                    single_run_samples(run_metrics(new_db, new_run.id, kWarmup)), per_step));
  return out;
}

}  // namespace

Comparison compare_databases(const RunDatabase& old_db, const RunDatabase& new_db, std::optional<std::int64_t> old_run,
                             std::optional<std::int64_t> new_run) {
  const bool matrices = !old_run && !new_run && !old_db.matrices().empty() && !new_db.matrices().empty();
  Comparison out = matrices ? compare_matrices(old_db, new_db) : compare_runs(old_db, new_db, old_run, new_run);
  out.old_path = old_db.path();
  out.new_path = new_db.path();
  return out;
}

std::string format_comparison(const Comparison& c) {
  std::string out = fmt::format("old: {} ({})\nnew: {} ({})\n", c.old_path, c.old_label, c.new_path, c.new_label);
  if (!c.mismatches.empty()) {
    out += "\nNOT LIKE FOR LIKE — read the changes below with this in mind:\n";
    for (const auto& m : c.mismatches) out += "  - " + m + "\n";
    out += "\n";
  }
  out += fmt::format("{:<26} {:>12} {:>12} {:>9} {:>8}  {}\n", "metric", "old median", "new median", "change",
                     "p-value", "verdict");
  bool any_unreliable = false;
  for (const auto& cell : c.cells) {
    out += fmt::format("\n{}\n", cell.name);
    for (const auto& m : cell.metrics) {
      std::string verdict;
      if (!m.test)
        verdict = fmt::format("not tested ({} v {} value{})", m.old_values.n, m.new_values.n,
                              m.new_values.n == 1 ? "" : "s");
      else if (!m.significant)
        verdict = "no significant change";
      else
        verdict = m.worse ? "WORSE" : "better";
      if (m.test) verdict += fmt::format(" ({} v {} {})", m.test->n_old, m.test->n_new, m.samples);
      if (m.test && !m.test->reliable) {
        verdict += " unreliable";
        any_unreliable = true;
      }
      const std::string change = std::isnan(m.change) ? "n/a" : fmt::format("{:+.1f}%", 100.0 * m.change);
      // Four decimals, or the order of magnitude below them (10 v 10 steps apart: p = 1.1e-05, not 0.0000).
      const std::string p = !m.test                   ? "-"
                            : m.test->p_value >= 1e-4 ? fmt::format("{:.4f}", m.test->p_value)
                                                      : fmt::format("{:.1e}", m.test->p_value);
      out += fmt::format("  {:<24} {:>12.6g} {:>12.6g} {:>9} {:>8}  {}\n", m.metric, m.old_values.median,
                         m.new_values.median, change, p, verdict);
      if (m.old_trimmed_mean && m.new_trimmed_mean)
        out += fmt::format("  {:<24} {:>12.6g} {:>12.6g} {:>9}\n", "step_s trimmed", *m.old_trimmed_mean,
                           *m.new_trimmed_mean,
                           fmt::format("{:+.1f}%", 100.0 * relative_change(*m.old_trimmed_mean, *m.new_trimmed_mean)));
    }
  }
  for (const auto& name : c.only_old) out += "only in old: " + name + "\n";
  for (const auto& name : c.only_new) out += "only in new: " + name + "\n";
  if (any_unreliable)
    out += fmt::format("\nfewer than {} samples on a side: the U test cannot reach significance with so few (more "
                       "measured steps, or repetitions >= {}).\n", kMinReliableRepetitions, kMinReliableRepetitions);
  return out;
}

nlohmann::json comparison_json(const Comparison& c) {
  using nlohmann::json;
  json cells = json::array();
  for (const auto& cell : c.cells) {
    json metrics = json::array();
    for (const auto& m : cell.metrics) {
      json j = {{"metric", m.metric},
                {"old_median", m.old_values.median},
                {"new_median", m.new_values.median},
                {"old_n", m.old_values.n},
                {"new_n", m.new_values.n},
                {"change", std::isnan(m.change) ? json(nullptr) : json(m.change)},
                {"significant", m.significant},
                {"samples", m.samples},
                {"worse", m.worse}};
      if (m.test) {
        j["p_value"] = m.test->p_value;
        j["exact"] = m.test->exact;
        j["reliable"] = m.test->reliable;
      }
      if (m.old_trimmed_mean) j["old_trimmed_mean"] = *m.old_trimmed_mean;
      if (m.new_trimmed_mean) j["new_trimmed_mean"] = *m.new_trimmed_mean;
      metrics.push_back(j);
    }
    cells.push_back({{"name", cell.name}, {"metrics", metrics}});
  }
  json config_diff = json::array();
  for (const auto& d : c.config_diff)
    config_diff.push_back({{"key", d.key},
                           {"old", d.old_value ? json(*d.old_value) : json(nullptr)},
                           {"new", d.new_value ? json(*d.new_value) : json(nullptr)}});
  return {{"old", c.old_path},         {"new", c.new_path},           {"mode", c.mode},
          {"old_label", c.old_label},  {"new_label", c.new_label},    {"mismatches", c.mismatches},
          {"config_diff", config_diff}, {"cells", cells},             {"only_old", c.only_old},
          {"only_new", c.only_new}};
}

std::vector<std::string> significant_slowdowns(const Comparison& c, double percent) {
  std::vector<std::string> out;
  for (const auto& cell : c.cells)
    for (const auto& m : cell.metrics)
      if (m.metric == "step_s" && m.significant && m.worse && m.change * 100.0 > percent)
        out.push_back(fmt::format("{}: step time {:+.1f}% (p = {:.4f})", cell.name, 100.0 * m.change, m.test->p_value));
  return out;
}

}  // namespace hs::reports
