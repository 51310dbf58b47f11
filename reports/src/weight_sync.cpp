// weight_sync.cpp — the weight sync per step (weight_sync.h).
#include "hybridscope/reports/weight_sync.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "hybridscope/reports/statistics.h"

namespace hs::reports {

namespace {

constexpr double kNsPerSecond = 1e9;
constexpr double kBytesPerGB = 1e9;

struct RankSync {
  int syncs = 0;
  std::int64_t ns = 0;
  std::vector<Interval> ranges;           // the outermost sync ranges, for the collectives inside them
  std::optional<std::int64_t> switch_bytes;  // Σ bytes_received of its train_to_rollout switch rows
  std::optional<std::int64_t> comm_bytes;    // Σ bytes of its collectives inside the ranges
};

std::optional<double> median_of(const std::vector<double>& v) {
  if (v.empty()) return std::nullopt;
  return spread(v).median;
}

}  // namespace

const std::vector<std::string>& weight_sync_range_names() {
  static const std::vector<std::string> names = {"switch/train_to_rollout", "update_weights", "sync_rollout_weights"};
  return names;
}

WeightSyncAnalysis weight_sync_analysis(const RunData& data, const std::vector<std::int64_t>& measured,
                                        std::optional<double> link_gbps, const std::string& link_source) {
  WeightSyncAnalysis out;
  out.link_gbps = link_gbps;
  if (link_gbps) out.link_source = link_source;
  const std::set<std::int64_t> steps(measured.begin(), measured.end());
  const StepWindows windows(data);
  const auto& names = weight_sync_range_names();

  // (step, rank) -> its syncs. Ranges are sorted by start, so an enclosing sync range comes before
  // the ones inside it: a range starting before the rank's last counted sync range ends is nested.
  std::map<std::pair<std::int64_t, int>, RankSync> cells;
  std::map<int, std::int64_t> open_until;
  for (const RangeRow& r : data.ranges) {
    if (std::find(names.begin(), names.end(), r.name) == names.end()) continue;
    const auto step = windows.step_of(r.rank, r.start_ns, r.step);
    if (!step || !steps.count(*step)) continue;
    const auto open = open_until.find(r.rank);
    if (open != open_until.end() && r.start_ns < open->second) continue;  // inside a counted one
    open_until[r.rank] = r.end_ns;
    if (out.range_name.empty()) out.range_name = r.name;
    RankSync& c = cells[{*step, r.rank}];
    ++c.syncs;
    c.ns += r.end_ns - r.start_ns;
    c.ranges.push_back({r.start_ns, r.end_ns});
  }
  if (cells.empty()) return out;

  bool any_switch_bytes = false;
  for (const SwitchRow& w : data.switches) {
    if (w.direction != "train_to_rollout") continue;
    const auto step = windows.step_of(w.rank, w.start_ns, w.step);
    if (!step) continue;
    const auto it = cells.find({*step, w.rank});
    if (it == cells.end()) continue;
    it->second.switch_bytes = it->second.switch_bytes.value_or(0) + w.bytes_received;
    any_switch_bytes = true;
  }
  bool any_comm_bytes = false;
  if (!any_switch_bytes) {
    for (const CommOpRow& c : data.comm_ops) {
      const auto step = windows.step_of(c.rank, c.start_ns, c.step);
      if (!step) continue;
      const auto it = cells.find({*step, c.rank});
      if (it == cells.end()) continue;
      for (const Interval& range : it->second.ranges) {
        if (c.start_ns >= range.start_ns && c.start_ns < range.end_ns) {
          it->second.comm_bytes = it->second.comm_bytes.value_or(0) + c.bytes;
          any_comm_bytes = true;
          break;
        }
      }
    }
  }
  out.bytes_source = any_switch_bytes ? "switches" : any_comm_bytes ? "collectives inside the sync ranges" : "";

  std::map<std::int64_t, std::vector<std::pair<int, const RankSync*>>> by_step;
  for (const auto& [key, c] : cells) by_step[key.first].push_back({key.second, &c});
  std::vector<double> seconds, bytes, gbps, of_link;
  for (const auto& [step, ranks] : by_step) {
    WeightSyncStep s;
    s.step = step;
    const auto bytes_of = [&](const RankSync& c) { return any_switch_bytes ? c.switch_bytes : c.comm_bytes; };
    const RankSync* busiest = nullptr;
    for (const auto& [rank, c] : ranks) {
      s.syncs = std::max(s.syncs, c->syncs);
      bool better = busiest == nullptr;
      if (!better) {
        const auto mine = bytes_of(*c), theirs = bytes_of(*busiest);
        better = mine.value_or(-1) > theirs.value_or(-1) || (mine.value_or(-1) == theirs.value_or(-1) && c->ns > busiest->ns);
      }
      if (better) busiest = c, s.rank = rank;
    }
    s.seconds = static_cast<double>(busiest->ns) / kNsPerSecond;
    s.bytes = bytes_of(*busiest);
    if (s.bytes && s.seconds > 0) s.gbps = static_cast<double>(*s.bytes) / s.seconds / kBytesPerGB;
    if (s.bytes && link_gbps && *link_gbps > 0) {
      s.wire_bound_s = static_cast<double>(*s.bytes) / (*link_gbps * kBytesPerGB);
      if (s.gbps) s.of_link = *s.gbps / *link_gbps;
    }
    seconds.push_back(s.seconds);
    if (s.bytes) bytes.push_back(static_cast<double>(*s.bytes));
    if (s.gbps) gbps.push_back(*s.gbps);
    if (s.of_link) of_link.push_back(*s.of_link);
    if (s.syncs > out.max_syncs) out.max_syncs = s.syncs, out.max_syncs_step = step;
    if (s.syncs > 1) ++out.steps_with_repeats;
    out.steps.push_back(s);
  }
  out.median_s = *median_of(seconds);
  out.median_bytes = median_of(bytes);
  out.median_gbps = median_of(gbps);
  out.median_of_link = median_of(of_link);
  return out;
}

}  // namespace hs::reports
