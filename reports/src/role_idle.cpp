// role_idle.cpp — idle ratios per role from the timeline (role_idle.h).
#include "hybridscope/reports/role_idle.h"

#include <algorithm>
#include <set>
#include <utility>

namespace hs::reports {

namespace {

constexpr double kNsPerSecond = 1e9;
constexpr const char* kRollout = "rollout";
constexpr const char* kTrain = "train";
constexpr const char* kReference = "reference";
constexpr const char* kRef = "ref";

bool contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

struct RankStep {
  std::vector<Interval> rollout, train;  // the rank's phase ranges of the step (train includes ref)
  std::vector<Interval> ref;
  std::int64_t span_start = 0, span_end = 0;  // every range of the rank in the step
  bool any = false;
};

}  // namespace

const std::vector<std::string>& rollout_role_phases() {
  static const std::vector<std::string> phases = {"gen", "gen_max", "gen_extra"};
  return phases;
}

const std::vector<std::string>& train_role_phases() {
  static const std::vector<std::string> phases = {"old_log_prob", "ref", "values", "adv", "update_critic", "update_actor"};
  return phases;
}

std::vector<int> parse_rank_list(const std::string& value) {
  std::vector<int> out;
  std::string digits;
  for (const char c : value + ",") {
    if (c >= '0' && c <= '9') {
      digits += c;
    } else if (!digits.empty()) {
      out.push_back(std::stoi(digits));
      digits.clear();
    }
  }
  return out;
}

std::vector<int> split_rollout_ranks(const RunData& data) {
  if (data.run.imported()) return {};
  return parse_rank_list(data.config_value("hybridscope.placement.rollout").value_or("[]"));
}

RoleIdleAnalysis role_idle_analysis(const RunData& data, const std::vector<std::int64_t>& measured) {
  RoleIdleAnalysis out;
  const std::set<std::int64_t> steps(measured.begin(), measured.end());
  const StepWindows windows(data);
  // A split rollout pool: its ranks generate; on the actor's ranks `gen` is the wait for the
  // pool's batch (trainer.cpp, receive_split_rollout), idle time rather than rollout work.
  const std::vector<int> pool = split_rollout_ranks(data);
  const std::set<int> pool_ranks(pool.begin(), pool.end());

  std::map<std::pair<int, std::int64_t>, RankStep> cells;  // (rank, step)
  std::map<int, std::set<std::string>> phases_of_rank;     // rollout | train | ref, what the rank ran
  for (const RangeRow& r : data.ranges) {
    const auto step = windows.step_of(r.rank, r.start_ns, r.step);
    if (!step || !steps.count(*step)) continue;
    RankStep& c = cells[{r.rank, *step}];
    if (!c.any) c.span_start = r.start_ns, c.span_end = r.end_ns;
    c.any = true;
    c.span_start = std::min(c.span_start, r.start_ns);
    c.span_end = std::max(c.span_end, r.end_ns);
    const Interval interval{r.start_ns, r.end_ns};
    if (contains(rollout_role_phases(), r.name)) {
      if (!pool_ranks.empty() && !pool_ranks.count(r.rank)) continue;  // the actor waiting for the pool
      c.rollout.push_back(interval);
      phases_of_rank[r.rank].insert(kRollout);
    } else if (contains(train_role_phases(), r.name)) {
      c.train.push_back(interval);
      if (r.name == kRef) {
        c.ref.push_back(interval);
        phases_of_rank[r.rank].insert(kRef);
      } else {
        phases_of_rank[r.rank].insert(kTrain);
      }
    }
  }

  // Which roles each rank holds: a rank that ran only `ref` is a reference rank (split placement).
  std::map<std::string, std::vector<int>> ranks_of_role;
  for (const auto& [rank, ran] : phases_of_rank) {
    if (ran.count(kRollout)) ranks_of_role[kRollout].push_back(rank);
    if (ran.count(kTrain) || (ran.count(kRef) && ran.count(kRollout))) ranks_of_role[kTrain].push_back(rank);
    else if (ran.count(kRef)) ranks_of_role[kReference].push_back(rank);
  }
  for (const int rank : ranks_of_role[kRollout])
    if (std::find(ranks_of_role[kTrain].begin(), ranks_of_role[kTrain].end(), rank) != ranks_of_role[kTrain].end())
      out.colocated = true;

  // The actor's step window of a step: its step ranges over the ranks outside the pool.
  const auto actor_step_window = [&](std::int64_t step) {
    std::vector<Interval> out;
    for (const auto& [rank, ran] : phases_of_rank) {
      if (pool_ranks.count(rank)) continue;
      for (const Interval& w : windows.ranges(rank, {step})) {
        if (out.empty()) out.push_back(w);
        out.front().start_ns = std::min(out.front().start_ns, w.start_ns);
        out.front().end_ns = std::max(out.front().end_ns, w.end_ns);
      }
    }
    return out;
  };
  std::map<std::int64_t, StepRoleIdle> per_step;
  for (const char* role : {kRollout, kTrain, kReference}) {
    const auto& ranks = ranks_of_role[role];
    if (ranks.empty()) continue;
    RoleIdle summary;
    summary.role = role;
    summary.verl_name = role == std::string(kRollout) ? "rollouter/idle_ratio"
                        : role == std::string(kTrain) ? "trainer/idle_ratio"
                                                      : "";
    summary.ranks = ranks;
    std::map<std::int64_t, std::pair<double, int>> step_sum;  // step -> (Σ idle over ranks, ranks)
    std::map<int, std::pair<double, int>> rank_sum;           // rank -> (Σ idle over steps, steps)
    double busy_total = 0.0, window_total = 0.0;
    int cells_counted = 0;
    for (const int rank : ranks) {
      for (const std::int64_t step : measured) {
        const auto it = cells.find({rank, step});
        Interval window;
        const auto step_ranges = windows.ranges(rank, {step});
        if (!step_ranges.empty()) {
          window = step_ranges.front();
        } else if (pool_ranks.count(rank) && !actor_step_window(step).empty()) {
          // A pool rank records no step range of its own (rollout_server.cpp): the actor's step is
          // its window, so its waits between the hand-over and the next batch count.
          window = actor_step_window(step).front();
        } else if (it != cells.end()) {
          window = {it->second.span_start, it->second.span_end};
        } else {
          continue;  // the rank recorded nothing in this step
        }
        if (window.end_ns <= window.start_ns) continue;
        std::vector<Interval> busy;
        if (it != cells.end())
          busy = role == std::string(kRollout) ? it->second.rollout
                 : role == std::string(kTrain) ? it->second.train
                                               : it->second.ref;
        const double window_ns = static_cast<double>(window.end_ns - window.start_ns);
        const double busy_ns = static_cast<double>(intersection_length(std::move(busy), {window}));
        const double idle = 1.0 - busy_ns / window_ns;
        step_sum[step].first += idle;
        ++step_sum[step].second;
        rank_sum[rank].first += idle;
        ++rank_sum[rank].second;
        busy_total += busy_ns / kNsPerSecond;
        window_total += window_ns / kNsPerSecond;
        ++cells_counted;
      }
    }
    if (step_sum.empty()) continue;
    double idle_total = 0.0;
    for (const auto& [step, sum] : step_sum) {
      const double ratio = sum.first / sum.second;
      per_step[step].step = step;
      per_step[step].idle_ratio[role] = ratio;
      idle_total += ratio;
    }
    summary.idle_ratio = idle_total / static_cast<double>(step_sum.size());
    summary.busy_s = busy_total / cells_counted;
    summary.window_s = window_total / cells_counted;
    bool first = true;
    for (const auto& [rank, sum] : rank_sum) {
      const double ratio = sum.first / sum.second;
      if (first || ratio > summary.idlest_ratio) summary.idlest_rank = rank, summary.idlest_ratio = ratio;
      first = false;
    }
    out.roles.push_back(std::move(summary));
  }
  for (auto& [step, s] : per_step) out.steps.push_back(std::move(s));

  const auto find = [&](const char* role) -> const RoleIdle* {
    for (const auto& r : out.roles)
      if (r.role == role) return &r;
    return nullptr;
  };
  const RoleIdle* rollout = find(kRollout);
  const RoleIdle* train = find(kTrain);
  if (rollout && train) {
    out.verdict = train->idle_ratio > rollout->idle_ratio ? "rollout-bound" : "train-bound";
  } else if (out.roles.empty()) {
    out.note = "no role phases in the measured steps: the run names no rollout (gen) or training (old_log_prob, ref, "
               "values, adv, update_critic, update_actor) ranges — an imported trace needs a phase map for its names "
               "(docs/importing.md)";
  } else {
    out.note = std::string("only the ") + out.roles.front().role + " role recorded its phases: no verdict without both "
               "rollout and training ranges";
  }
  return out;
}

}  // namespace hs::reports
