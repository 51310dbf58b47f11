// phase_map.h — the names other RL frameworks give their phases, mapped onto hybridscope's.
//
// hybridscope's phase names are verl's `marked_timer` names (docs/metrics.md): step, gen, reward,
// old_log_prob, ref, values, adv, update_critic, update_actor, update_weights,
// sync_rollout_weights, testing, save_checkpoint. A trace or log of another framework names the
// same phases its own way; a PhaseMap renames them on import. Built in: "verl" (the names are
// hybridscope's already), "nemo-rl" and "slime" (docs/importing.md lists every entry and where it
// was read); a user's map is a YAML or JSON object `{their_name: hybridscope_phase}`, optionally
// under a top-level `phases:` key. A name no map knows stays as it is (category `op` on import).
#pragma once

#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "hybridscope/probes/recorder.h"

namespace hs::importer {

class ImportError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// hybridscope's phase names, in a step's order.
const std::vector<std::string>& hybridscope_phases();

class PhaseMap {
 public:
  /// The built-in map of `framework` ("verl", "nemo-rl", "slime"); throws ImportError naming the
  /// known ones otherwise.
  static PhaseMap builtin(const std::string& framework);
  /// Every built-in map at once (the default: a trace's names come from one framework and the
  /// maps do not collide).
  static PhaseMap all_builtin();
  /// A user's map: a YAML (`name: phase` lines) or JSON object file. Throws ImportError when it
  /// cannot be read or maps onto a name that is no hybridscope phase (with the list).
  static PhaseMap from_file(const std::string& path);

  /// Adds or replaces one entry (the user's map over a built-in one).
  void set(const std::string& name, const std::string& phase);
  /// The hybridscope phase `name` stands for; nullopt when the map does not know it.
  std::optional<std::string> phase_of(const std::string& name) const;
  /// The category a range of that phase gets: step -> kStep, update_weights and
  /// sync_rollout_weights -> kSwitch, save_checkpoint -> kCheckpoint, testing -> kValidation,
  /// the other phases -> kPhase.
  static probes::Category category_of(const std::string& phase);
  const std::map<std::string, std::string>& entries() const { return entries_; }

 private:
  std::map<std::string, std::string> entries_;
};

}  // namespace hs::importer
