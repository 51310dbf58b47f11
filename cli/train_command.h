// train_command.h — `hybridscope train [--config FILE] [--db PATH] [--no-progress] [key=value ...]`:
// run PPO/GRPO training (hs::trainer::PPOTrainer) and record it into a run database (docs/cli.md).
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace hs::cli {

struct TrainArgs {
  std::string config_path;             // empty: every key takes its default
  std::string db_path;                 // overrides hybridscope.db when set
  std::vector<std::string> overrides;  // key=value
  bool no_progress = false;
  std::string command_line;            // recorded in the run row (set by main before running)
};

/// Registers the subcommand on `app`, parsing into `args` (which must outlive parsing).
CLI::App* add_train_command(CLI::App& app, TrainArgs& args);

/// Loads and validates the config, trains, and prints rank 0's run summary. Throws the trainer's
/// typed errors (ConfigError, DistError, DataError, ...); main() turns them into a message and an
/// exit status.
int run_train(const TrainArgs& args);

}  // namespace hs::cli
