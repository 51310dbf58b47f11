// rl_summary.cpp — the roles, weight-sync and MFU lines and JSON (rl_summary.h).
#include "hybridscope/reports/rl_summary.h"

#include <fmt/format.h>

#include "text_format.h"

namespace hs::reports {

namespace {

using detail::format_bytes;
using detail::format_number;
using detail::format_percent;
using detail::format_seconds;

template <typename T>
nlohmann::json opt(const std::optional<T>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

std::string ranks_text(const std::vector<int>& ranks) {
  std::string out = ranks.size() == 1 ? "rank " : "ranks ";
  for (std::size_t i = 0; i < ranks.size(); ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
  return out;
}

}  // namespace

std::vector<std::string> rl_summary_lines(const RunAnalysis& a) {
  std::vector<std::string> out;
  const RoleIdleAnalysis& r = a.roles;
  if (r.roles.empty()) {
    out.push_back("roles: " + r.note);
  } else {
    std::string line = "roles (idle ratio from the timeline):";
    for (std::size_t i = 0; i < r.roles.size(); ++i) {
      const RoleIdle& role = r.roles[i];
      line += fmt::format("{} {} {} ({} role, {})", i ? ";" : "", role.verl_name.empty() ? role.role + " idle" : role.verl_name,
                          format_percent(role.idle_ratio), role.role, ranks_text(role.ranks));
    }
    line += r.verdict.empty() ? " — " + r.note
                              : fmt::format(" — {}{}", r.verdict, r.colocated ? " (colocated: the roles take turns)" : "");
    out.push_back(line);
  }
  const WeightSyncAnalysis& w = a.weight_sync;
  if (w.steps.empty()) {
    out.push_back("weight sync: no switch/train_to_rollout, update_weights or sync_rollout_weights range in the measured steps");
  } else {
    std::string line = fmt::format("weight sync ({}): up to {} per step, median {} per step", w.range_name, w.max_syncs,
                                   format_seconds(w.median_s));
    if (w.median_bytes && *w.median_bytes == 0) {
      // Nothing moved (one rank, or layouts that coincide): no rate, and nothing to hold against a link.
      line += fmt::format(", moving nothing (0 B on the busiest rank, from {}: the generation layout's weights are "
                          "the training layout's)",
                          w.bytes_source);
    } else {
      if (w.median_bytes)
        line += fmt::format(", {} (busiest rank, from {})", format_bytes(*w.median_bytes), w.bytes_source);
      else
        line += ", bytes unknown (no switch rows and no collectives with sizes inside the sync ranges)";
      if (w.median_gbps) line += fmt::format(" at {} GB/s", format_number(*w.median_gbps));
      if (w.median_of_link)
        line += fmt::format(" = {} of the link's {} GB/s ({})", format_percent(*w.median_of_link),
                            format_number(*w.link_gbps), w.link_source);
      else if (w.median_gbps)
        line += "; no link bandwidth to compare with (give --comm-bench or --hardware)";
    }
    out.push_back(line);
  }
  out.push_back(fmt::format("MFU: verl flops_counter {} (perf/mfu/actor); PaLM/torchtitan {} (perf/mfu/actor_palm)",
                            a.mfu ? format_percent(*a.mfu) : "not recorded",
                            a.mfu_palm ? format_percent(*a.mfu_palm) : "not recorded"));
  return out;
}

nlohmann::json rl_summary_json(const RunAnalysis& a) {
  nlohmann::json roles = nlohmann::json::array();
  for (const RoleIdle& r : a.roles.roles)
    roles.push_back({{"role", r.role},
                     {"verl_name", r.verl_name.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.verl_name)},
                     {"ranks", r.ranks},
                     {"idle_ratio", r.idle_ratio},
                     {"busy_s", r.busy_s},
                     {"window_s", r.window_s},
                     {"idlest_rank", r.idlest_rank},
                     {"idlest_ratio", r.idlest_ratio}});
  nlohmann::json role_steps = nlohmann::json::array();
  for (const StepRoleIdle& s : a.roles.steps) role_steps.push_back({{"step", s.step}, {"idle_ratio", s.idle_ratio}});
  nlohmann::json sync_steps = nlohmann::json::array();
  for (const WeightSyncStep& s : a.weight_sync.steps)
    sync_steps.push_back({{"step", s.step},
                          {"syncs", s.syncs},
                          {"rank", s.rank},
                          {"seconds", s.seconds},
                          {"bytes", opt(s.bytes)},
                          {"gbps", opt(s.gbps)},
                          {"wire_bound_s", opt(s.wire_bound_s)},
                          {"of_link", opt(s.of_link)}});
  const WeightSyncAnalysis& w = a.weight_sync;
  return {{"roles",
           {{"verdict", a.roles.verdict.empty() ? nlohmann::json(nullptr) : nlohmann::json(a.roles.verdict)},
            {"colocated", a.roles.colocated},
            {"note", a.roles.note},
            {"roles", roles},
            {"steps", role_steps}}},
          {"weight_sync",
           {{"range", w.range_name.empty() ? nlohmann::json(nullptr) : nlohmann::json(w.range_name)},
            {"bytes_source", w.bytes_source.empty() ? nlohmann::json(nullptr) : nlohmann::json(w.bytes_source)},
            {"link_gbps", opt(w.link_gbps)},
            {"link_source", w.link_source},
            {"median_s", w.steps.empty() ? nlohmann::json(nullptr) : nlohmann::json(w.median_s)},
            {"median_bytes", opt(w.median_bytes)},
            {"median_gbps", opt(w.median_gbps)},
            {"median_of_link", opt(w.median_of_link)},
            {"max_syncs", w.max_syncs},
            {"max_syncs_step", w.steps.empty() ? nlohmann::json(nullptr) : nlohmann::json(w.max_syncs_step)},
            {"steps_with_repeats", w.steps_with_repeats},
            {"steps", sync_steps}}},
          {"mfu", {{"verl_flops_counter", opt(a.mfu)}, {"palm_torchtitan", opt(a.mfu_palm)}}}};
}

}  // namespace hs::reports
