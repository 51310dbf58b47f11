// phase_breakdown.cpp — per-step phase times from the probe ranges (or, with probes off, from the
// `timing_s/*` metrics), per rank and aggregated by the slowest rank.
#include "hybridscope/reports/phase_breakdown.h"

#include <algorithm>
#include <set>

namespace hs::reports {

const std::vector<std::string>& verl_phase_order() {
  static const std::vector<std::string> order = {
      "switch/train_to_rollout", "gen",        "switch/rollout_to_train", "reward",      "old_log_prob", "ref",
      "values",                  "adv",        "update_critic",           "update_actor", "testing",      "save_checkpoint"};
  return order;
}

namespace {

constexpr double kNsPerSecond = 1e9;
constexpr const char* kTimingPrefix = "timing_s/";

bool is_phase_category(const std::string& category) { return category == "phase" || category == "switch"; }

// The phases present, in verl's order, then the unknown ones sorted.
std::vector<std::string> ordered(const std::set<std::string>& present) {
  std::vector<std::string> out;
  for (const auto& name : verl_phase_order())
    if (present.count(name)) out.push_back(name);
  for (const auto& name : present)
    if (std::find(verl_phase_order().begin(), verl_phase_order().end(), name) == verl_phase_order().end())
      out.push_back(name);
  return out;
}

// One rank's step from its ranges; `direct_s` is the time of the phases directly under the step
// (nested phases are counted in their own row but not twice in "other").
struct RankAccumulator {
  RankStep row;
  double direct_s = 0.0;
  int step_depth = 0;
};

void add_means(PhaseBreakdown& out) {
  const std::set<std::int64_t> measured(out.measured.begin(), out.measured.end());
  double step_sum = 0.0;
  std::size_t n = 0;
  std::map<std::string, double> phase_sum;
  for (const auto& s : out.steps) {
    if (!measured.count(s.step)) continue;
    step_sum += s.step_s;
    ++n;
    for (const auto& [name, seconds] : s.phase_s) phase_sum[name] += seconds;
  }
  if (n == 0) return;
  out.mean_step_s = step_sum / static_cast<double>(n);
  for (const auto& name : out.phases) {
    out.mean_phase_s[name] = phase_sum[name] / static_cast<double>(n);
    out.share[name] = out.mean_step_s > 0 ? out.mean_phase_s[name] / out.mean_step_s : 0.0;
  }
  std::map<int, std::size_t> rank_steps;
  for (const auto& r : out.per_rank) {
    if (!measured.count(r.step)) continue;
    ++rank_steps[r.rank];
    out.rank_mean_step_s[r.rank] += r.step_s;
    for (const auto& [name, seconds] : r.phase_s) out.rank_mean_phase_s[r.rank][name] += seconds;
  }
  for (auto& [rank, total] : out.rank_mean_step_s) {
    const double count = static_cast<double>(rank_steps[rank]);
    total /= count;
    for (const auto& name : out.phases) out.rank_mean_phase_s[rank][name] /= count;  // absent phases become 0
  }
}

PhaseBreakdown from_metrics(const RunData& data, const std::vector<std::int64_t>& steps) {
  PhaseBreakdown out;
  out.source = "step_metrics";
  std::set<std::string> present;
  for (const auto step : steps) {
    StepPhases s;
    s.step = step;
    s.step_s = data.metric(step, "timing_s/step").value_or(0.0);
    double phases_s = 0.0;
    for (const auto& m : data.metrics) {
      if (m.step != step || m.name.rfind(kTimingPrefix, 0) != 0) continue;
      const std::string name = m.name.substr(std::char_traits<char>::length(kTimingPrefix));
      // gen_max repeats gen (the slowest replica's generation); step is the whole.
      if (name == "step" || name == "gen_max") continue;
      s.phase_s[name] = m.value;
      phases_s += m.value;
      present.insert(name);
    }
    s.other_s = std::max(0.0, s.step_s - phases_s);
    out.steps.push_back(std::move(s));
  }
  out.phases = ordered(present);
  return out;
}

}  // namespace

PhaseBreakdown phase_breakdown(const RunData& data, int warmup_steps) {
  const auto steps = data.steps();
  const bool has_ranges = std::any_of(data.ranges.begin(), data.ranges.end(),
                                      [](const RangeRow& r) { return r.category == "step"; });
  PhaseBreakdown out;
  if (!has_ranges) {
    out = from_metrics(data, steps);
  } else {
    out.source = "ranges";
    std::map<std::pair<std::int64_t, int>, RankAccumulator> acc;  // (step, rank)
    for (const auto& r : data.ranges) {
      if (r.category != "step") continue;
      auto& a = acc[{r.step, r.rank}];
      a.row.rank = r.rank;
      a.row.step = r.step;
      a.row.step_s += static_cast<double>(r.end_ns - r.start_ns) / kNsPerSecond;
      a.step_depth = r.depth;
    }
    std::set<std::string> present;
    for (const auto& r : data.ranges) {
      if (!is_phase_category(r.category)) continue;
      const auto it = acc.find({r.step, r.rank});
      if (it == acc.end()) continue;  // outside any step (setup, final validation)
      const double seconds = static_cast<double>(r.end_ns - r.start_ns) / kNsPerSecond;
      it->second.row.phase_s[r.name] += seconds;
      if (r.depth == it->second.step_depth + 1) it->second.direct_s += seconds;
      present.insert(r.name);
    }
    out.phases = ordered(present);
    std::map<std::int64_t, StepPhases> by_step;
    for (auto& [key, a] : acc) {
      const bool first_rank = !by_step.count(key.first);
      auto& s = by_step[key.first];
      s.step = key.first;
      if (first_rank || a.row.step_s > s.step_s) {
        s.step_s = a.row.step_s;
        s.slowest_rank = a.row.rank;
        s.other_s = std::max(0.0, a.row.step_s - a.direct_s);
      }
      for (const auto& [name, seconds] : a.row.phase_s) s.phase_s[name] = std::max(s.phase_s[name], seconds);
      out.per_rank.push_back(std::move(a.row));
    }
    for (auto& [step, s] : by_step) out.steps.push_back(std::move(s));
  }
  out.measured = measured_steps(data, warmup_steps);
  add_means(out);
  return out;
}

}  // namespace hs::reports
