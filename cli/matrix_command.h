// matrix_command.h — `hybridscope matrix plan SPEC`: the cells of a benchmark matrix spec
// (bench/matrices/, docs/benchmarks.md "Matrix specs"), which of them are valid and why the others
// are skipped, and with --commands the command line that runs each valid cell by hand.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace hs::cli {

struct MatrixArgs {
  std::string spec_path;
  bool commands = false;
};

/// Registers `matrix` and its `plan` subcommand on `app`, parsing into `args` (which must outlive
/// parsing); returns the `matrix` subcommand.
CLI::App* add_matrix_command(CLI::App& app, MatrixArgs& args);

/// Prints the plan. Exit status 0 when at least one cell is valid, 2 when none is. Throws
/// hs::bench::MatrixError for a spec that cannot be read.
int run_matrix_plan(const MatrixArgs& args);

}  // namespace hs::cli
