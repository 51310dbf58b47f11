// phase_map.cpp — the built-in phase maps and the user's map file (see phase_map.h).
#include "hybridscope/importer/phase_map.h"

#include <algorithm>
#include <fstream>

#include <yaml-cpp/yaml.h>

namespace hs::importer {

namespace {

using Entries = std::vector<std::pair<const char*, const char*>>;

// verl: `marked_timer` names in verl/trainer/ppo/ray_trainer.py, hybridscope's own.
Entries verl_entries() {
  Entries out;
  static const char* const kNames[] = {"step",          "gen",          "gen_max",       "reward",
                                       "old_log_prob",  "ref",          "values",        "adv",
                                       "update_critic", "update_actor", "update_weights", "sync_rollout_weights",
                                       "testing",       "save_checkpoint"};
  for (const char* n : kNames) out.emplace_back(n, n);
  // Older and newer spellings of the weight switch (profiling-facts.md).
  out.emplace_back("reshard", "update_weights");
  out.emplace_back("param_sync", "sync_rollout_weights");
  return out;
}

// NeMo-RL: `timer.time(...)` names in nemo_rl/algorithms/grpo.py (the GRPO loop).
// prepare_for_generation holds the refit (the weights into vLLM) in colocated runs;
// policy_and_reference_logprobs computes both the old and the reference log-probs in one timer.
Entries nemo_rl_entries() {
  return {{"total_step_time", "step"},
          {"generation", "gen"},
          {"prepare_for_generation", "update_weights"},
          {"reward_calculation", "reward"},
          {"policy_and_reference_logprobs", "old_log_prob"},
          {"policy_training", "update_actor"},
          {"checkpointing", "save_checkpoint"},
          {"validation", "testing"}};
}

// slime: `timer(...)` names in slime/backends/megatron_utils/actor.py (MegatronTrainRayActor).
// compute_log_prob times "log_probs" (the actor's old log-probs) and "ref_log_probs".
Entries slime_entries() {
  return {{"log_probs", "old_log_prob"},
          {"ref_log_probs", "ref"},
          {"actor_train", "update_actor"},
          {"update_weights", "update_weights"},
          {"save_model", "save_checkpoint"}};
}

PhaseMap from_entries(const Entries& entries) {
  PhaseMap m;
  for (const auto& [name, phase] : entries) m.set(name, phase);
  return m;
}

}  // namespace

const std::vector<std::string>& hybridscope_phases() {
  static const std::vector<std::string> kPhases = {
      "step",         "gen",           "gen_max",      "reward",         "old_log_prob",         "ref",
      "values",       "adv",           "update_critic", "update_actor",  "update_weights", "sync_rollout_weights",
      "testing",      "save_checkpoint"};
  return kPhases;
}

PhaseMap PhaseMap::builtin(const std::string& framework) {
  if (framework == "verl") return from_entries(verl_entries());
  if (framework == "nemo-rl" || framework == "nemo_rl") return from_entries(nemo_rl_entries());
  if (framework == "slime") return from_entries(slime_entries());
  throw ImportError("no built-in phase map for '" + framework + "': the built-in maps are verl, nemo-rl and slime "
                    "(or pass your own with --phase-map FILE)");
}

PhaseMap PhaseMap::all_builtin() {
  PhaseMap m = builtin("verl");
  for (const char* f : {"nemo-rl", "slime"}) {
    const PhaseMap other = builtin(f);
    for (const auto& [name, phase] : other.entries()) m.entries_.emplace(name, phase);  // verl's win
  }
  return m;
}

PhaseMap PhaseMap::from_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ImportError("cannot read the phase map " + path);
  // YAML or JSON (JSON is YAML): {name: phase}, or the same under `phases:`.
  YAML::Node root;
  try {
    root = YAML::Load(in);
  } catch (const YAML::Exception& e) {
    throw ImportError("phase map " + path + " is not valid YAML or JSON: " + e.what());
  }
  if (root.IsMap() && root["phases"]) root = root["phases"];
  if (!root.IsMap())
    throw ImportError("phase map " + path + ": expected a mapping of name: phase (optionally under `phases:`)");
  PhaseMap m;
  for (const auto& entry : root) {
    if (!entry.first.IsScalar() || !entry.second.IsScalar())
      throw ImportError("phase map " + path + " line " + std::to_string(entry.first.Mark().line + 1) +
                        ": expected `name: phase`, both strings");
    m.set(entry.first.as<std::string>(), entry.second.as<std::string>());
  }
  const auto& known = hybridscope_phases();
  for (const auto& [name, phase] : m.entries_)
    if (std::find(known.begin(), known.end(), phase) == known.end()) {
      std::string list;
      for (const auto& p : known) list += (list.empty() ? "" : ", ") + p;
      throw ImportError("phase map " + path + ": '" + name + "' maps to '" + phase +
                        "', which is no hybridscope phase (" + list + ")");
    }
  return m;
}

void PhaseMap::set(const std::string& name, const std::string& phase) { entries_[name] = phase; }

std::optional<std::string> PhaseMap::phase_of(const std::string& name) const {
  const auto it = entries_.find(name);
  if (it == entries_.end()) return std::nullopt;
  return it->second;
}

probes::Category PhaseMap::category_of(const std::string& phase) {
  if (phase == "step") return probes::Category::kStep;
  if (phase == "update_weights" || phase == "sync_rollout_weights") return probes::Category::kSwitch;
  if (phase == "save_checkpoint") return probes::Category::kCheckpoint;
  if (phase == "testing") return probes::Category::kValidation;
  return probes::Category::kPhase;
}

}  // namespace hs::importer
