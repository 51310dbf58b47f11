// rl_summary.h — the three figures RL users ask for and no other tool gives them, said the same
// way in `hybridscope diagnose` (text and --json) and in the reports: the idle ratio of each role
// with the rollout-/train-bound verdict (role_idle.h), the weight sync per step (weight_sync.h),
// and MFU in both conventions users meet — verl's flops_counter (perf/mfu/actor) and PaLM's /
// torchtitan's (perf/mfu/actor_palm), each named (docs/metrics.md). A figure the run does not carry
// is said to be missing, never 0.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hybridscope/reports/run_analysis.h"

namespace hs::reports {

/// Three lines: "roles: …", "weight sync: …", "MFU: …".
std::vector<std::string> rl_summary_lines(const RunAnalysis& analysis);

/// {"roles": {verdict, colocated, note, roles[{role, verl_name, ranks, idle_ratio, busy_s, window_s,
/// idlest_rank, idlest_ratio}], steps[{step, idle_ratio{role: ratio}}]}, "weight_sync": {range,
/// bytes_source, link_gbps, link_source, median_s, median_bytes, median_gbps, median_of_link,
/// max_syncs, max_syncs_step, steps_with_repeats, steps[{step, syncs, rank, seconds, bytes, gbps,
/// wire_bound_s, of_link}]}, "mfu": {"verl_flops_counter", "palm_torchtitan"}}; null where missing.
nlohmann::json rl_summary_json(const RunAnalysis& analysis);

}  // namespace hs::reports
