// config_command.cpp — see config_command.h. The loader and to_yaml are hs::trainer's (config.h).
#include "config_command.h"

#include <fmt/format.h>

#include "hybridscope/trainer/config/config.h"

namespace hs::cli {

CLI::App* add_config_command(CLI::App& app, ConfigArgs& args) {
  auto* cmd = app.add_subcommand("config", "Print the resolved configuration (every key) as YAML");
  cmd->add_option("--config,-c", args.config_path, "YAML config")->check(CLI::ExistingFile);
  cmd->add_option("overrides", args.overrides, "key=value overrides");
  return cmd;
}

int run_config(const ConfigArgs& args) {
  fmt::print("{}", trainer::to_yaml(trainer::load_config(args.config_path, args.overrides)));
  return 0;
}

}  // namespace hs::cli
