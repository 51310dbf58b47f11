// imbalance.cpp — stragglers and load imbalance across ranks (imbalance.h).
//
// Three independent views:
// - per phase, the spread of the ranks' mean times (from the phase breakdown);
// - the straggler: the rank that is slowest in a step most often, with its excess over the median
//   rank; and HTA's view (hta/analyzers/straggler*.py: the rank whose last collective starts latest,
//   judged by the spread of that start across ranks). Start times are compared across ranks as
//   recorded: one host's ranks share CLOCK_MONOTONIC; across hosts the offsets of the clocks add in.
// - verl's token balance, from the `global_seqlen/*` step metrics that verl's
//   `log_seqlen_unbalance` (verl/utils/seqlen_balancing.py) emits from `_balance_batch`:
//   min, max, minmax_diff (the per-rank token sums of the batch split as it came), balanced_min,
//   balanced_max (the sums after the balancing reorder, which verl applies before dispatch), and
//   mean (total tokens / ranks).
#include "hybridscope/reports/imbalance.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>

namespace hs::reports {
namespace {

double median_of(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

// The spread of one quantity over ranks; ties go to the lower rank (std::map order).
PhaseSpread spread_of(const std::string& phase, const std::map<int, double>& by_rank) {
  PhaseSpread s;
  s.phase = phase;
  std::vector<double> values;
  bool first = true;
  for (const auto& [rank, seconds] : by_rank) {
    values.push_back(seconds);
    if (first || seconds > s.max_s) {
      s.max_s = seconds;
      s.slowest_rank = rank;
    }
    if (first || seconds < s.min_s) {
      s.min_s = seconds;
      s.fastest_rank = rank;
    }
    first = false;
  }
  s.median_s = median_of(values);
  s.spread = s.median_s != 0.0 ? (s.max_s - s.min_s) / s.median_s : 0.0;
  return s;
}

// Sample standard deviation (n − 1), n >= 2.
double sample_stddev(const std::vector<double>& x) {
  double mean = 0;
  for (double v : x) mean += v;
  mean /= static_cast<double>(x.size());
  double ss = 0;
  for (double v : x) ss += (v - mean) * (v - mean);
  return std::sqrt(ss / static_cast<double>(x.size() - 1));
}

void add_phase_spreads(const PhaseBreakdown& breakdown, StragglerAnalysis& a) {
  // The breakdown's phases in its order, then any phase only the per-rank means name.
  std::vector<std::string> phases = breakdown.phases;
  std::set<std::string> extra;
  for (const auto& [rank, phase_s] : breakdown.rank_mean_phase_s) {
    for (const auto& [phase, seconds] : phase_s) {
      if (std::find(phases.begin(), phases.end(), phase) == phases.end()) extra.insert(phase);
    }
  }
  phases.insert(phases.end(), extra.begin(), extra.end());
  for (const std::string& phase : phases) {
    std::map<int, double> by_rank;  // ranks that ran the phase (a critic phase may run on some only)
    for (const auto& [rank, phase_s] : breakdown.rank_mean_phase_s) {
      if (const auto it = phase_s.find(phase); it != phase_s.end()) by_rank[rank] = it->second;
    }
    if (!by_rank.empty()) a.phases.push_back(spread_of(phase, by_rank));
  }
  if (!breakdown.rank_mean_step_s.empty()) a.phases.push_back(spread_of("step", breakdown.rank_mean_step_s));
}

void find_straggler(const PhaseBreakdown& breakdown, const std::set<std::int64_t>& measured, StragglerAnalysis& a) {
  // Per measured step, the rank with the longest step (the lower rank on a tie).
  std::map<std::int64_t, std::pair<int, double>> slowest;  // step -> (rank, step_s)
  std::map<std::int64_t, int> ranks_in_step;
  for (const RankStep& r : breakdown.per_rank) {
    if (measured.count(r.step) == 0) continue;
    ++ranks_in_step[r.step];
    const auto [it, inserted] = slowest.emplace(r.step, std::make_pair(r.rank, r.step_s));
    if (!inserted && (r.step_s > it->second.second || (r.step_s == it->second.second && r.rank < it->second.first))) {
      it->second = {r.rank, r.step_s};
    }
  }
  std::map<int, int> times_slowest;  // rank -> steps in which it was the slowest
  for (const auto& [step, rank_s] : slowest) {
    if (ranks_in_step[step] >= 2) ++times_slowest[rank_s.first];  // one rank alone is no straggler
  }
  if (times_slowest.empty() || breakdown.rank_mean_step_s.size() < 2) return;

  const auto mean_step = [&](int rank) {
    const auto it = breakdown.rank_mean_step_s.find(rank);
    return it != breakdown.rank_mean_step_s.end() ? it->second : 0.0;
  };
  // Most steps; on a tie the rank with the longer mean step, then the lower rank.
  int best = times_slowest.begin()->first;
  for (const auto& [rank, count] : times_slowest) {
    const int best_count = times_slowest[best];
    if (count > best_count || (count == best_count && mean_step(rank) > mean_step(best))) best = rank;
  }
  std::vector<double> means;
  for (const auto& [rank, seconds] : breakdown.rank_mean_step_s) means.push_back(seconds);
  const double median = median_of(means);
  a.straggler_rank = best;
  a.straggler_steps = times_slowest[best];
  a.straggler_excess_s = mean_step(best) - median;
  a.straggler_excess_share = median != 0.0 ? a.straggler_excess_s / median : 0.0;
}

void find_late_collective(const RunData& data, const std::set<std::int64_t>& measured, StragglerAnalysis& a) {
  // step -> rank -> start of the rank's last collective in the step (the latest start).
  std::map<std::int64_t, std::map<int, std::int64_t>> last_start;
  const StepWindows windows(data);
  for (const CommOpRow& c : data.comm_ops) {
    const auto step = windows.step_of(c.rank, c.start_ns, c.step);  // the final validation's lie after the step
    if (!step || measured.count(*step) == 0) continue;
    const auto [it, inserted] = last_start[*step].emplace(c.rank, c.start_ns);
    if (!inserted) it->second = std::max(it->second, c.start_ns);
  }
  std::map<int, int> times_latest;
  double stddev_sum_ms = 0;
  int steps = 0;
  for (const auto& [step, by_rank] : last_start) {
    if (by_rank.size() < 2) continue;
    std::vector<double> starts_ms;
    auto latest = by_rank.begin();
    for (auto it = by_rank.begin(); it != by_rank.end(); ++it) {
      starts_ms.push_back(static_cast<double>(it->second) / 1e6);
      if (it->second > latest->second) latest = it;  // the lower rank on a tie
    }
    ++times_latest[latest->first];
    stddev_sum_ms += sample_stddev(starts_ms);
    ++steps;
  }
  if (steps == 0) return;
  auto best = times_latest.begin();
  for (auto it = times_latest.begin(); it != times_latest.end(); ++it) {
    if (it->second > best->second) best = it;
  }
  a.late_collective_rank = best->first;
  a.late_collective_stddev_ms = stddev_sum_ms / steps;
}

void add_global_seqlen(const RunData& data, const std::set<std::int64_t>& measured, StragglerAnalysis& a) {
  std::map<std::string, std::pair<double, int>> sums;  // name -> (sum, count) over measured steps
  for (const StepMetric& m : data.metrics) {
    if (m.name.rfind("global_seqlen/", 0) != 0 || measured.count(m.step) == 0) continue;
    auto& [sum, count] = sums[m.name];
    sum += m.value;
    ++count;
  }
  for (const auto& [name, sum_count] : sums) a.global_seqlen[name] = sum_count.first / sum_count.second;

  const auto get = [&](const char* name) -> std::optional<double> {
    const auto it = a.global_seqlen.find(name);
    return it != a.global_seqlen.end() ? std::optional<double>(it->second) : std::nullopt;
  };
  // The ranks train on the balanced split whenever verl logs these metrics (it reorders the batch
  // in the same call), so balanced_max/balanced_min are the token counts the ranks waited on;
  // plain max/min (the split as it came) serve when the balanced pair is absent.
  std::optional<double> max = get("global_seqlen/balanced_max");
  std::optional<double> min = get("global_seqlen/balanced_min");
  if (!max || !min) {
    max = get("global_seqlen/max");
    min = get("global_seqlen/min");
  }
  if (!max || !min) return;
  // verl's mean is total tokens / ranks; without it, the midrange stands in for the mean.
  const double mean = get("global_seqlen/mean").value_or(0.5 * (*max + *min));
  if (mean > 0) a.token_imbalance = (*max - *min) / mean;
}

}  // namespace

StragglerAnalysis straggler_analysis(const RunData& data, const PhaseBreakdown& breakdown) {
  StragglerAnalysis a;
  std::set<int> ranks;
  for (const RankStep& r : breakdown.per_rank) ranks.insert(r.rank);
  for (const auto& [rank, seconds] : breakdown.rank_mean_step_s) ranks.insert(rank);
  a.world_size = std::max(data.run.world_size, static_cast<int>(ranks.size()));
  const std::set<std::int64_t> measured(breakdown.measured.begin(), breakdown.measured.end());

  add_phase_spreads(breakdown, a);
  find_straggler(breakdown, measured, a);
  find_late_collective(data, measured, a);
  add_global_seqlen(data, measured, a);
  return a;
}

}  // namespace hs::reports
