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

// verl times validation (`testing`) and checkpoints inside the step as phases too (verl_phase_order).
bool is_phase_category(const std::string& category) {
  return category == "phase" || category == "switch" || category == "validation" || category == "checkpoint";
}

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

// One rank's step from its ranges: the phase and switch ranges that start inside its `step` range.
struct RankAccumulator {
  RankStep row;
  std::vector<const RangeRow*> ranges;
  double top_s = 0.0;  // the union of its top-level phase ranges
};

// Lists each top-level phase, then its sub-phases (sorted), into out.phases and out.top_phases.
void order_tree(PhaseBreakdown& out, const std::set<std::string>& present) {
  std::set<std::string> top;
  for (const auto& name : present)
    if (!out.parent.count(name)) top.insert(name);
  out.top_phases = ordered(top);
  out.phases.clear();
  for (const auto& name : out.top_phases) {
    out.phases.push_back(name);
    std::set<std::string> children;
    for (const auto& [child, parent] : out.parent)
      if (parent == name) children.insert(child);
    for (const auto& child : ordered(children)) out.phases.push_back(child);
  }
}

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
    for (const auto& m : data.metrics) {
      if (m.step != step || m.name.rfind(kTimingPrefix, 0) != 0) continue;
      const std::string name = m.name.substr(std::char_traits<char>::length(kTimingPrefix));
      // gen_max repeats gen (the slowest replica's generation); step is the whole.
      if (name == "step" || name == "gen_max") continue;
      s.phase_s[name] = m.value;
      present.insert(name);
    }
    out.steps.push_back(std::move(s));
  }
  // Without ranges there is no nesting to see: `a/b` is a sub-phase of `a` when `a` was timed too.
  for (const auto& name : present) {
    const auto slash = name.find('/');
    if (slash != std::string::npos && present.count(name.substr(0, slash))) out.parent[name] = name.substr(0, slash);
  }
  for (auto& s : out.steps) {
    double top_s = 0.0;
    for (const auto& [name, seconds] : s.phase_s)
      if (!out.parent.count(name)) top_s += seconds;
    s.other_s = std::max(0.0, s.step_s - top_s);
  }
  order_tree(out, present);
  return out;
}

}  // namespace

bool is_top_level(const PhaseBreakdown& breakdown, const std::string& phase) {
  return breakdown.parent.count(phase) == 0;
}

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
    }
    const StepWindows windows(data);
    for (const auto& r : data.ranges) {
      if (!is_phase_category(r.category)) continue;
      const auto step = windows.step_of(r.rank, r.start_ns, r.step);
      if (!step) continue;  // outside every step range (setup, the final validation)
      const auto it = acc.find({*step, r.rank});
      if (it == acc.end()) continue;
      it->second.ranges.push_back(&r);
    }
    // Nesting by time, per rank and step, over every thread: sorted by start (the longer first on a
    // tie), a range that ends no later than the current outermost range lies inside it.
    std::set<std::string> present, top_level_somewhere;
    std::map<std::string, std::string> parent;
    for (auto& [key, a] : acc) {
      std::stable_sort(a.ranges.begin(), a.ranges.end(), [](const RangeRow* x, const RangeRow* y) {
        if (x->start_ns != y->start_ns) return x->start_ns < y->start_ns;
        if (x->end_ns != y->end_ns) return x->end_ns > y->end_ns;
        return x->depth < y->depth;
      });
      const RangeRow* outer = nullptr;
      std::vector<Interval> top;
      for (const RangeRow* r : a.ranges) {
        a.row.phase_s[r->name] += static_cast<double>(r->end_ns - r->start_ns) / kNsPerSecond;
        present.insert(r->name);
        if (outer != nullptr && r->end_ns <= outer->end_ns) {
          parent.try_emplace(r->name, outer->name);
          continue;
        }
        outer = r;
        top_level_somewhere.insert(r->name);
        top.push_back({r->start_ns, r->end_ns});
      }
      a.top_s = static_cast<double>(union_length(std::move(top))) / kNsPerSecond;
    }
    // A name is a sub-phase when none of its ranges stands at the top (a `gen` that is once nested
    // in a validation's `testing` is still a phase of its own).
    for (const auto& [name, p] : parent)
      if (!top_level_somewhere.count(name) && name != p) out.parent[name] = p;
    order_tree(out, present);
    std::map<std::int64_t, StepPhases> by_step;
    for (auto& [key, a] : acc) {
      const bool first_rank = !by_step.count(key.first);
      auto& s = by_step[key.first];
      s.step = key.first;
      if (first_rank || a.row.step_s > s.step_s) {
        s.step_s = a.row.step_s;
        s.slowest_rank = a.row.rank;
        s.other_s = std::max(0.0, a.row.step_s - a.top_s);
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
