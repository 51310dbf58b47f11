// bench_compare.cpp — matching cells of two benchmark databases and testing each metric's change
// (see bench_compare.h).
#include "hybridscope/reports/bench_compare.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>

#include "hybridscope/reports/bench_summary.h"

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
                                 std::vector<double> new_values) {
  MetricComparison m;
  m.metric = metric;
  m.old_values = spread(old_values);
  m.new_values = spread(new_values);
  m.change = relative_change(m.old_values.median, m.new_values.median);
  m.test = mann_whitney_u(old_values, new_values);
  m.significant = m.test->p_value < kAlpha;
  const bool higher = m.new_values.median > m.old_values.median;
  m.worse = metric_info(metric).lower_is_better ? higher : (m.new_values.median < m.old_values.median);
  if (metric == "step_s") {
    m.old_trimmed_mean = trimmed_mean(old_values);
    m.new_trimmed_mean = trimmed_mean(new_values);
  }
  return m;
}

// Per-metric samples of a cell: one value per completed repetition.
std::map<std::string, std::vector<double>> repetition_samples(const CellSummary& cell) {
  std::map<std::string, std::vector<double>> out;
  for (const auto& run : cell.runs)
    for (const auto& [key, value] : run.values) out[key].push_back(value);
  return out;
}

CellComparison compare_cells(const std::string& name, const std::map<std::string, std::vector<double>>& old_samples,
                             const std::map<std::string, std::vector<double>>& new_samples) {
  CellComparison c;
  c.name = name;
  for (const char* metric : kCompared) {
    const auto o = old_samples.find(metric);
    const auto n = new_samples.find(metric);
    if (o == old_samples.end() || n == new_samples.end() || o->second.empty() || n->second.empty()) continue;
    c.metrics.push_back(compare_samples(metric, o->second, n->second));
  }
  return c;
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
  for (const auto& c : new_matrix.cells) {
    if (!c.cell.invalid_reason.empty()) continue;
    const auto key = cell_key(c.cell);
    const auto o = old_cells.find(key);
    if (o == old_cells.end()) {
      out.only_new.push_back(c.cell.name);
      continue;
    }
    matched.insert(key);
    out.cells.push_back(compare_cells(c.cell.name, repetition_samples(*o->second), repetition_samples(c)));
  }
  for (const auto& [key, c] : old_cells)
    if (!matched.count(key)) out.only_old.push_back(c->cell.name);
  return out;
}

Comparison compare_runs(const RunDatabase& old_db, const RunDatabase& new_db) {
  Comparison out;
  out.mode = "run";
  const auto old_run = old_db.last_run();
  const auto new_run = new_db.last_run();
  out.old_label = fmt::format("run {} '{}'", old_run.id, old_run.name);
  out.new_label = fmt::format("run {} '{}'", new_run.id, new_run.name);
  // A plain run has no warm-up setting: its first step (compilation, allocator growth) is left out.
  auto samples = [](const RunMetrics& r) {
    std::map<std::string, std::vector<double>> s;
    s["step_s"] = r.step_seconds;
    s["switch_s"] = r.switch_seconds;
    for (const auto& [key, value] : r.values)
      if (key != "step_s" && key != "switch_s") s[key].push_back(value);
    return s;
  };
  out.cells.push_back(compare_cells(new_run.name, samples(run_metrics(old_db, old_run.id, 1)),
                                    samples(run_metrics(new_db, new_run.id, 1))));
  return out;
}

}  // namespace

Comparison compare_databases(const RunDatabase& old_db, const RunDatabase& new_db) {
  const bool matrices = !old_db.matrices().empty() && !new_db.matrices().empty();
  Comparison out = matrices ? compare_matrices(old_db, new_db) : compare_runs(old_db, new_db);
  out.old_path = old_db.path();
  out.new_path = new_db.path();
  return out;
}

std::string format_comparison(const Comparison& c) {
  std::string out = fmt::format("old: {} ({})\nnew: {} ({})\n", c.old_path, c.old_label, c.new_path, c.new_label);
  out += fmt::format("{:<18} {:>12} {:>12} {:>9} {:>8}  {}\n", "metric", "old median", "new median", "change",
                     "p-value", "verdict");
  bool any_unreliable = false;
  for (const auto& cell : c.cells) {
    out += fmt::format("\n{}\n", cell.name);
    for (const auto& m : cell.metrics) {
      std::string verdict;
      if (!m.test || !m.significant)
        verdict = "no significant change";
      else
        verdict = m.worse ? "WORSE" : "better";
      if (m.test && !m.test->reliable) {
        verdict += fmt::format(" (unreliable: {} v {} samples)", m.test->n_old, m.test->n_new);
        any_unreliable = true;
      }
      const std::string change = std::isnan(m.change) ? "n/a" : fmt::format("{:+.1f}%", 100.0 * m.change);
      out += fmt::format("  {:<16} {:>12.6g} {:>12.6g} {:>9} {:>8.4f}  {}\n", m.metric, m.old_values.median,
                         m.new_values.median, change, m.test ? m.test->p_value : 1.0, verdict);
      if (m.old_trimmed_mean && m.new_trimmed_mean)
        out += fmt::format("  {:<16} {:>12.6g} {:>12.6g} {:>9}\n", "step_s trimmed", *m.old_trimmed_mean,
                           *m.new_trimmed_mean,
                           fmt::format("{:+.1f}%", 100.0 * relative_change(*m.old_trimmed_mean, *m.new_trimmed_mean)));
    }
  }
  for (const auto& name : c.only_old) out += "only in old: " + name + "\n";
  for (const auto& name : c.only_new) out += "only in new: " + name + "\n";
  if (any_unreliable)
    out += fmt::format("\nfewer than {} samples on a side: the U test cannot reach significance with so few (run the "
                       "matrix with repetitions >= {}).\n", kMinReliableRepetitions, kMinReliableRepetitions);
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
  return {{"old", c.old_path}, {"new", c.new_path}, {"mode", c.mode},         {"old_label", c.old_label},
          {"new_label", c.new_label}, {"cells", cells}, {"only_old", c.only_old}, {"only_new", c.only_new}};
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
