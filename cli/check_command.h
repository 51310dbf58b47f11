// check_command.h — `hybridscope check DB [--run ID]`: the GPU record checks that answer in
// seconds on millions of kernels (docs/cli.md): every kernel tagged with a range was launched
// inside it (reports::RunDatabase::check_kernel_correlation). Reads the database with hs_reports.
#pragma once

#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

namespace hs::cli {

struct CheckArgs {
  std::string db_path;
  std::int64_t run_id = 0;  // 0: the last run
};

CLI::App* add_check_command(CLI::App& app, CheckArgs& args);

/// Prints the counts. 0, or 1 when a kernel was launched outside the range it is attributed to.
int run_check(const CheckArgs& args);

}  // namespace hs::cli
