// role_idle.h — how long each RL role's ranks wait with no work, per step, read from the timeline:
// what verl's fully-async trainer reports as `trainer/idle_ratio` and `rollouter/idle_ratio`, and
// the verdict users draw from the two (verl #7601): a high trainer idle ratio with a low rollouter
// one is rollout-bound, the reverse train-bound.
//
// Definition (docs/metrics.md, "Idle ratios per role"): a role is a set of phases —
//   rollout: gen, gen_max, gen_extra
//   train:   old_log_prob, ref, values, adv, update_critic, update_actor
//   reference: ref, on a rank that runs no other phase (a split reference placement,
//              hybridscope.placement.ref); such a rank is not a train rank
// A rank holds a role when it recorded one of the role's phase ranges in the measured steps. With a
// split rollout pool (a hybridscope run's hybridscope.placement.rollout) the pool's ranks hold the
// rollout role and the actor's `gen` ranges are its wait for the pool's batch (verl's one-step-off
// trainer times that wait as `gen` too): idle, not rollout work. Per
// rank and step: idle = 1 − |∪ the role's phase ranges ∩ the rank's step range| / |step range|
// (the union: nested and overlapping ranges count once; without a step range on the rank, the
// span of the rank's ranges of that step is the window). A role's idle ratio of a step is the mean
// over its ranks; over the run, the mean over measured steps.
//
// Where verl differs (verl/experimental/fully_async_policy): `trainer/idle_ratio` is
// timing_s/gen ÷ timing_s/step of the trainer, where its `gen` timer wraps the wait for samples
// (detach_utils.py MetricsAggregator) — the same number as ours for a trainer whose only wait is
// that one, but blind to waits outside the timer (the weight sync, the reward); and
// `rollouter/idle_ratio` = 1 − (idle_start − version_start) ÷ (now − version_start), one pause
// window per parameter version (fully_async_rollouter.py reset_staleness): pauses before the last
// one are lost, which is why it read ≈ 0 on a run that was train-bound (verl #6693). Ours sums every
// gap of every rank. In a colocated (hybrid-engine) run every rank holds both roles and they take
// turns, so the two ratios are the shares of the step each role leaves to the other (plus the
// switch and other host work, which neither role counts as its own).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "hybridscope/reports/run_data.h"

namespace hs::reports {

/// The phases of each role (the names of the `ranges` table, verl's marked_timer names).
const std::vector<std::string>& rollout_role_phases();
const std::vector<std::string>& train_role_phases();

/// One role over the measured steps.
struct RoleIdle {
  std::string role;             // rollout | train | reference
  std::string verl_name;        // rollouter/idle_ratio, trainer/idle_ratio; "" for reference
  std::vector<int> ranks;       // the ranks holding it
  double idle_ratio = 0.0;      // mean over measured steps of the mean over its ranks
  double busy_s = 0.0;          // mean per step and rank of |∪ its phase ranges|
  double window_s = 0.0;        // mean per step and rank of the step window
  int idlest_rank = 0;          // the rank with the highest mean idle ratio
  double idlest_ratio = 0.0;
};

/// One measured step: each present role's idle ratio (mean over its ranks).
struct StepRoleIdle {
  std::int64_t step = 0;
  std::map<std::string, double> idle_ratio;  // role -> ratio
};

struct RoleIdleAnalysis {
  std::vector<RoleIdle> roles;      // rollout, train, reference, those present
  std::vector<StepRoleIdle> steps;  // measured steps with at least one role
  bool colocated = false;           // some rank holds both rollout and train (the hybrid engine)
  /// "rollout-bound" when the train role's idle ratio exceeds the rollout role's (the trainer waits
  /// for samples), "train-bound" otherwise; "" when the run lacks either role.
  std::string verdict;
  std::string note;  // why there is no verdict, when there is none
};

/// The ranks of a rank-list config value as runs store it ("[1]", "[2, 3]", "[]": none).
std::vector<int> parse_rank_list(const std::string& value);

/// The ranks of a hybridscope run's split rollout pool (hybridscope.placement.rollout, "[1]",
/// "[2, 3]"); empty for a colocated or an imported run.
std::vector<int> split_rollout_ranks(const RunData& data);

/// The idle ratios over the `measured` steps.
RoleIdleAnalysis role_idle_analysis(const RunData& data, const std::vector<std::int64_t>& measured);

}  // namespace hs::reports
