// comm_time.cpp — each rank's time in collectives as a union of intervals (comm_time.h).
#include "hybridscope/reports/comm_time.h"

#include <set>

#include "hybridscope/reports/intervals.h"

namespace hs::reports {

std::map<int, std::int64_t> collective_union_ns(const RunData& data, const std::vector<std::int64_t>& measured,
                                                const std::function<bool(const CommOpRow&)>& select) {
  const std::set<std::int64_t> steps(measured.begin(), measured.end());
  const StepWindows windows(data);
  std::map<int, std::vector<Interval>> by_rank;
  for (const CommOpRow& c : data.comm_ops) {
    if (!windows.in(steps, c.rank, c.start_ns, c.step) || !select(c)) continue;
    by_rank[c.rank].push_back({c.start_ns, c.end_ns});
  }
  std::map<int, std::int64_t> out;
  for (auto& [rank, intervals] : by_rank)
    // Within the step ranges: an asynchronous collective may be waited for after its step ended. A
    // rank without step ranges (StepWindows' fallback to the recorded number) has no window to clip to.
    out[rank] = windows.has_ranges(rank) ? intersection_length(std::move(intervals), windows.ranges(rank, steps))
                                         : union_length(std::move(intervals));
  return out;
}

CommTime comm_time(const RunData& data, const std::vector<std::int64_t>& measured) {
  const std::set<std::int64_t> steps(measured.begin(), measured.end());
  const StepWindows windows(data);
  CommTime out;
  std::set<int> ranks;
  for (const RangeRow& r : data.ranges)
    if (r.category == "step" && steps.count(r.step)) ranks.insert(r.rank);
  const auto all = collective_union_ns(data, measured, [](const CommOpRow&) { return true; });
  std::set<std::string> groups;
  for (const CommOpRow& c : data.comm_ops) groups.insert(c.group);
  std::map<std::string, std::map<int, std::int64_t>> by_group;
  for (const auto& g : groups)
    by_group[g] = collective_union_ns(data, measured, [&g](const CommOpRow& c) { return c.group == g; });
  double share_sum = 0.0;
  for (const int rank : ranks) {
    RankCommTime r;
    r.rank = rank;
    for (const Interval& i : windows.ranges(rank, steps)) r.steps_ns += i.end_ns - i.start_ns;
    if (const auto it = all.find(rank); it != all.end()) r.comm_ns = it->second;
    for (const auto& [group, per_rank] : by_group)
      if (const auto it = per_rank.find(rank); it != per_rank.end() && it->second > 0) r.group_ns[group] = it->second;
    share_sum += r.share();
    out.ranks.push_back(std::move(r));
  }
  // An imported run without a collective: its source named none (a CPU trace's gloo calls, NCCL
  // kernels without metadata), which is no measurement of 0 % (docs/importing.md).
  if (!out.ranks.empty() && !(data.run.imported() && data.comm_ops.empty()))
    out.mean_share = share_sum / static_cast<double>(out.ranks.size());
  return out;
}

}  // namespace hs::reports
