// config_command.h — `hybridscope config [--config FILE] [key=value ...]`: the resolved
// configuration, every key, as YAML, after the validation `train` does (docs/cli.md).
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace hs::cli {

struct ConfigArgs {
  std::string config_path;             // empty: every key takes its default
  std::vector<std::string> overrides;  // key=value
};

/// Registers the subcommand on `app`, parsing into `args` (which must outlive parsing).
CLI::App* add_config_command(CLI::App& app, ConfigArgs& args);

/// Prints the YAML. Throws hs::trainer::ConfigError for a config validate() refuses.
int run_config(const ConfigArgs& args);

}  // namespace hs::cli
