// report_content.cpp — the series, labels and text helpers every exporter shares (report_content.h).
#include "report_content.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <map>
#include <tuple>

#include <fmt/format.h>

namespace hs::reports::detail {

std::string html_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size() + text.size() / 8);
  for (const char ch : text) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += ch;
    }
  }
  return out;
}

std::string markdown_cell(const std::string& text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    if (ch == '|') out += "\\|";
    else if (ch == '\r') continue;
    else if (ch == '\n') out += "<br>";
    else if (ch == '&') out += "&amp;";
    else if (ch == '<') out += "&lt;";
    else if (ch == '>') out += "&gt;";
    else out += ch;
  }
  return out;
}

std::string run_label(const RunSummary& run) { return fmt::format("run {} '{}'", run.id, run.name); }

std::string run_title(const RunReport& run) {
  const std::string label = run_label(run.analysis.data.run);
  return run.label.empty() ? label : run.label + " — " + label;
}

std::string ms_cell(double seconds) {
  if (std::isnan(seconds)) return "n/a";
  const double ms = seconds * 1e3;
  if (std::fabs(ms) >= 100.0) return fmt::format("{:.0f}", ms);
  if (std::fabs(ms) >= 1.0) return fmt::format("{:.1f}", ms);
  return fmt::format("{:.3f}", ms);
}

std::string iso_utc(std::int64_t unix_ns) {
  if (unix_ns == 0) return "";
  const std::time_t seconds = static_cast<std::time_t>(unix_ns / 1000000000);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

std::vector<std::pair<std::string, std::string>> layout_entries(const RunData& data) {
  // The keys that decide a step's shape (docs/config.md): training layout, generation layout,
  // algorithm and batch. A run lists those it has.
  static const char* const kKeys[] = {
      "actor_rollout_ref.actor.strategy",
      "actor_rollout_ref.actor.megatron.tensor_model_parallel_size",
      "actor_rollout_ref.actor.megatron.pipeline_model_parallel_size",
      "actor_rollout_ref.actor.fsdp_config.param_offload",
      "actor_rollout_ref.actor.fsdp_config.optimizer_offload",
      "actor_rollout_ref.rollout.tensor_model_parallel_size",
      "actor_rollout_ref.rollout.n",
      "algorithm.adv_estimator",
      "data.train_batch_size",
  };
  std::vector<std::pair<std::string, std::string>> out;
  for (const char* key : kKeys)
    if (auto value = data.config_value(key)) out.emplace_back(key, *value);
  return out;
}


std::vector<std::pair<std::int64_t, double>> reward_per_step(const RunData& data) {
  return data.metric_series("critic/score/mean");
}

double seconds_since_start(const RunSummary& run, std::int64_t monotonic_ns) {
  const std::int64_t start_monotonic_ns = run.start_unix_ns - run.clock_offset_ns;
  return static_cast<double>(monotonic_ns - start_monotonic_ns) * 1e-9;
}

std::vector<RankMemoryTimeline> memory_timeline(const RunData& data) {
  std::map<int, RankMemoryTimeline> by_rank;
  std::vector<const MemorySampleRow*> samples;
  for (const auto& s : data.memory) samples.push_back(&s);
  std::sort(samples.begin(), samples.end(), [](const MemorySampleRow* a, const MemorySampleRow* b) {
    return std::tie(a->ts_ns, a->rank) < std::tie(b->ts_ns, b->rank);
  });
  for (const auto* s : samples) {
    auto& line = by_rank[s->rank];
    line.rank = s->rank;
    const double t = seconds_since_start(data.run, s->ts_ns);
    if (s->allocated_bytes) line.allocated_gib.emplace_back(t, static_cast<double>(*s->allocated_bytes) / kGiB);
    if (s->reserved_bytes) line.reserved_gib.emplace_back(t, static_cast<double>(*s->reserved_bytes) / kGiB);
  }
  std::vector<RankMemoryTimeline> out;
  for (auto& [rank, line] : by_rank) out.push_back(std::move(line));
  return out;
}

std::vector<std::string> matrix_columns(const MatrixSummary& matrix) {
  static const char* const kHeadline[] = {"step_s",   "tokens_per_s", "tokens_per_s_per_rank",
                                          "gen_tokens_per_s", "switch_s", "switch_bytes",
                                          "comm_share", "peak_mem_gb", "mfu"};
  std::vector<std::string> out;
  for (const char* key : kHeadline)
    for (const auto& cell : matrix.cells)
      if (cell.metrics.count(key)) {
        out.emplace_back(key);
        break;
      }
  return out;
}

std::vector<ScalingCurve> scaling_curves(const MatrixSummary& matrix) {
  std::map<std::pair<std::string, int>, ScalingCurve> curves;  // (axis, reference cell) -> curve
  for (const auto& cell : matrix.cells)
    for (const auto& point : cell.scaling) {
      auto& curve = curves[{point.axis, point.reference_cell}];
      if (curve.axis.empty()) {
        curve.axis = point.axis;
        curve.kind = point.kind;
        std::string reference_name;
        for (const auto& c : matrix.cells)
          if (c.cell.cell_index == point.reference_cell) reference_name = c.cell.name;
        curve.label = fmt::format("{} (ref cell {}: {})", point.axis, point.reference_cell + 1, reference_name);
      }
      curve.efficiency.emplace_back(cell.cell.ranks, point.efficiency);
      curve.throughput_efficiency.emplace_back(cell.cell.ranks, point.throughput_efficiency);
    }
  std::vector<ScalingCurve> out;
  for (auto& [key, curve] : curves) {
    std::sort(curve.efficiency.begin(), curve.efficiency.end());
    std::sort(curve.throughput_efficiency.begin(), curve.throughput_efficiency.end());
    out.push_back(std::move(curve));
  }
  return out;
}

std::vector<RankedFinding> ranked_findings(const Report& report) {
  std::map<std::pair<std::string, std::string>, RankedFinding> by_key;  // (rule, range) ->
  for (std::size_t r = 0; r < report.runs.size(); ++r) {
    const double step_s = report.runs[r].analysis.phases.mean_step_s;
    for (const auto& f : report.runs[r].findings) {
      RankedFinding& m = by_key[{f.rule, f.range}];
      const double at_stake = f.impact * step_s;
      if (m.instances == 0 || at_stake > m.seconds_at_stake ||
          (at_stake == m.seconds_at_stake && f.severity > m.finding.severity)) {
        m.finding = f;
        m.seconds_at_stake = at_stake;
        m.step_s = step_s;
        m.run_index = r;
      }
      if (m.runs.empty() || m.runs.back() != r) m.runs.push_back(r);
      ++m.instances;
    }
  }
  std::vector<RankedFinding> out;
  for (auto& [key, m] : by_key) out.push_back(std::move(m));
  // Most step time at stake first; equal stakes (a run without step times) by severity, then rule.
  std::stable_sort(out.begin(), out.end(), [](const RankedFinding& a, const RankedFinding& b) {
    return std::make_tuple(-a.seconds_at_stake, -static_cast<int>(a.finding.severity), a.finding.rule) <
           std::make_tuple(-b.seconds_at_stake, -static_cast<int>(b.finding.severity), b.finding.rule);
  });
  return out;
}

std::vector<std::string> verdict(const Report& report, const std::vector<RankedFinding>& ranked) {
  std::vector<std::string> out;
  if (report.matrix) {
    const MatrixSummary& m = *report.matrix;
    const CellSummary* fastest = nullptr;
    for (const auto& c : m.cells) {
      const auto it = c.metrics.find("step_s");
      if (it == c.metrics.end()) continue;
      if (!fastest || it->second.median < fastest->metrics.at("step_s").median) fastest = &c;
    }
    if (fastest)
      out.push_back(fmt::format("Matrix '{}': the fastest cell is {} ({} rank{}) at {} per step.", m.matrix.name,
                                fastest->cell.name, fastest->cell.ranks, fastest->cell.ranks == 1 ? "" : "s",
                                format_seconds(fastest->metrics.at("step_s").median)));
    for (const auto& curve : scaling_curves(m)) {
      if (curve.efficiency.size() < 2) continue;
      const auto& [ranks, efficiency] = curve.efficiency.back();
      out.push_back(fmt::format("{} scaling along '{}' reaches {} efficiency at {} ranks ({}).",
                                curve.kind == "weak" ? "Weak" : "Strong", curve.axis, format_percent(efficiency),
                                static_cast<int>(ranks), curve.label));
    }
  }
  if (!ranked.empty()) {
    const RankedFinding& top = ranked.front();
    const std::size_t n_runs = report.runs.size();
    if (top.seconds_at_stake > 0)
      out.push_back(fmt::format("The costliest finding: {} — about {} of the {} step at stake{}.", top.finding.title,
                                format_seconds(top.seconds_at_stake), format_seconds(top.step_s),
                                n_runs > 1 ? fmt::format(", on {} of {} runs", top.runs.size(), n_runs) : ""));
    else
      out.push_back(fmt::format("The first finding: {}.", top.finding.title));
  } else if (!report.runs.empty()) {
    out.push_back("No diagnosis rule fired on any run.");
  }
  if (report.comparison) {
    for (const auto& d : report.comparison->phases) {
      if (d.phase != "step") continue;
      out.push_back(fmt::format("Against {}: the median step changed by {} ({}, p = {:.3g}).",
                                report.comparison->old_label,
                                std::isnan(d.change) ? std::string("n/a") : fmt::format("{:+.1f} %", 100.0 * d.change),
                                d.significant ? "significant" : "not significant", d.test.p_value));
    }
  }
  return out;
}

}  // namespace hs::reports::detail
