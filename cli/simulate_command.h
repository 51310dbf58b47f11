// simulate_command.h — `hybridscope simulate`: project a config's RL step onto a cluster described
// by a hardware file, over world sizes, and search its layouts (bench/sim/projection.h;
// docs/simulator.md). No processes, no tensors: the step model, the reshard planner's bytes and
// the calibrated collectives.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace hs::cli {

struct SimulateArgs {
  std::string hardware_path;
  std::string config_path;
  std::string model;                 // a model_shapes.h name; overrides the config's shape
  std::vector<std::string> overrides;
  std::string ranks_list;            // world sizes to project, comma-separated ("": 8..1024)
  double prompt_length = 0;          // mean tokens (0: data.max_prompt_length)
  double response_length = 0;        // mean tokens (0: data.max_response_length)
  std::string calibrate_db;          // fit the efficiencies on this benchmark database's cells
  bool validate = false;             // with calibrate_db: print the model's error on held-out cells first
  std::string comm_bench;            // hs_comm_bench JSON: fit the collectives' alpha and beta
  std::vector<std::string> efficiency;  // name=value, after calibration
  int search = 0;                    // search the layouts on this many ranks (0: no search)
  int top = 5;
  std::string json_path;             // "-": standard output
};

CLI::App* add_simulate_command(CLI::App& app, SimulateArgs& args);

/// Prints the projection (and search). The config is parsed (key spellings and types) but not
/// validated against this build's trainer, which does not run every plan the simulator costs. Throws hs::trainer::ConfigError for a bad config and
/// hs::bench::sim::SimError for a bad hardware file, calibration or option (main() reports them).
int run_simulate(const SimulateArgs& args);

}  // namespace hs::cli
