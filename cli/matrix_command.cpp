// matrix_command.cpp — `hybridscope matrix plan` (see matrix_command.h).
#include "matrix_command.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include <fmt/format.h>

#include "hybridscope/bench/matrix.h"

namespace hs::cli {

CLI::App* add_matrix_command(CLI::App& app, MatrixArgs& args) {
  auto* matrix = app.add_subcommand("matrix", "Benchmark matrix specs (bench/matrices/)");
  matrix->require_subcommand(1);
  auto* plan = matrix->add_subcommand(
      "plan", "List a spec's cells, valid or skipped with the reason, without running anything");
  plan->add_option("spec", args.spec_path, "Matrix spec (YAML), e.g. bench/matrices/gpu-shapes.yaml")->required();
  plan->add_flag("--commands", args.commands, "Also print the command line that runs each valid cell");
  return matrix;
}

int run_matrix_plan(const MatrixArgs& args) {
  const bench::MatrixSpec spec = bench::load_matrix(args.spec_path);
  const auto cells = bench::expand_matrix(spec);
  const auto valid = std::count_if(cells.begin(), cells.end(), [](const bench::MatrixCell& c) { return c.valid(); });
  fmt::print("matrix {} ({})\n", spec.name, spec.path);
  if (!spec.description.empty()) fmt::print("  {}\n", spec.description);
  fmt::print("base config {}; {} axes, {} cells: {} valid, {} skipped\n", spec.base_config, spec.axes.size(),
             cells.size(), valid, cells.size() - static_cast<std::size_t>(valid));
  fmt::print("each valid cell: {} repetition(s) of {} warm-up + {} measured steps\n\n", spec.repetitions,
             spec.warmup_steps, spec.measured_steps);

  // One column per axis, then ranks and the status.
  std::vector<std::size_t> width;
  for (std::size_t a = 0; a < spec.axes.size(); ++a) {
    std::size_t w = spec.axes[a].name.size();
    for (const auto& level : spec.axes[a].levels) w = std::max(w, level.name.size());
    width.push_back(w);
  }
  std::string header = fmt::format("{:>4}  ", "cell");
  for (std::size_t a = 0; a < spec.axes.size(); ++a) header += fmt::format("{:<{}}  ", spec.axes[a].name, width[a]);
  fmt::print("{}{:>5}  status\n", header, "ranks");
  for (const auto& cell : cells) {
    std::string line = fmt::format("{:>4}  ", cell.index + 1);
    for (std::size_t a = 0; a < cell.levels.size(); ++a) line += fmt::format("{:<{}}  ", cell.levels[a], width[a]);
    const std::string status = cell.valid() ? (cell.baseline ? "ok (baseline)" : "ok") : "skipped: " + cell.invalid_reason;
    fmt::print("{}{:>5}  {}\n", line, cell.ranks, status);
  }
  if (args.commands) {
    fmt::print("\ncommands (one run of each valid cell; run from the repository root):\n");
    for (const auto& cell : cells)
      if (cell.valid()) fmt::print("# cell {} {}\n{}\n", cell.index + 1, cell.name, bench::cell_command(spec, cell));
  }
  std::fflush(stdout);
  return valid > 0 ? 0 : 2;
}

}  // namespace hs::cli
