// external_points.h — published RL step times the simulator was not fitted to (bench/sim/external/
// points.yaml), read into step-model inputs, for the honest check hs_sim_external prints
// (issue 16: "a check against published numbers you did not fit to").
#pragma once

#include <string>
#include <vector>

#include "hybridscope/bench/sim/step_model.h"

namespace hs::bench::sim {

struct ExternalPoint {
  std::string name, source, quote;
  std::string hardware_path;  // resolved against the points file's directory
  StepInputs inputs;          // efficiencies left at their defaults: the caller picks them
  double measured_step_s = 0;
  double measured_tokens_per_s_per_device = 0;  // 0: not published
  std::vector<std::string> assumptions;
};

/// Reads a points file (the schema is points.yaml's). Unknown or missing keys throw SimError naming
/// the point and the key.
std::vector<ExternalPoint> read_external_points(const std::string& path);

}  // namespace hs::bench::sim
