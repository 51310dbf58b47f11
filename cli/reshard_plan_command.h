// reshard_plan_command.h — `hybridscope reshard-plan`: what the train->rollout switch of a config
// would move on a world of N ranks, per rank, for the configured mode and side by side for all
// three (docs/resharding.md). Planning only: no processes, no tensors.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace hs::cli {

struct ReshardPlanArgs {
  std::string config_path;
  int world = 0;
  std::vector<std::string> overrides;
};

/// Registers the subcommand on `app`, parsing into `args` (which must outlive parsing).
CLI::App* add_reshard_plan_command(CLI::App& app, ReshardPlanArgs& args);

/// Prints the plan. Throws hs::trainer::ConfigError or hs::trainer::LayoutError (main() turns them
/// into a message and exit status 2).
int run_reshard_plan(const ReshardPlanArgs& args);

}  // namespace hs::cli
