// hs_sim_validate DB COMM_BENCH HARDWARE — the step model against a measured benchmark matrix:
// calibrates the collectives from hs_comm_bench's JSON, fits the efficiencies on the cells with
// fewer ranks than the largest and predicts the largest-rank cells (extrapolation in ranks, the
// direction a projection goes), then again on alternate cells of each rank count, and prints
// predicted vs measured per cell, the errors and the ordering: docs/simulator.md's tables.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <map>
#include <set>
#include <string>

#include "hybridscope/bench/sim/measured_cells.h"
#include "hybridscope/reports/run_database.h"

namespace sim = hs::bench::sim;

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr,
                 "usage: %s DB COMM_BENCH HARDWARE\n"
                 "  DB          a benchmark matrix's database (hybridscope bench --db), its newest matrix\n"
                 "  COMM_BENCH  hs_comm_bench's JSON (out/comm-bench.json)\n"
                 "  HARDWARE    a hardware description (bench/hardware/cpu-local.yaml)\n",
                 argv[0]);
    return 2;
  }
  try {
    const hs::reports::RunDatabase db(argv[1]);
    const std::vector<sim::MeasuredCell> cells = sim::read_measured_cells(db);
    const sim::HardwareSpec hardware = sim::read_hardware(argv[3]);
    const sim::CommCalibration comm =
        sim::calibrate_comm(hardware, {{sim::LinkLevel::kIntraNode, sim::read_comm_bench_json(argv[2]).samples}});
    int largest = 0;
    for (const auto& c : cells) largest = std::max(largest, c.ranks);
    std::printf("%s: %zu measured cells\n\n== split 1: fit on cells with < %d ranks, predict the %d-rank cells ==\n",
                argv[1], cells.size(), largest, largest);
    std::printf("%s", sim::format_validation(sim::validate_step_model(
                          cells, [&](const sim::MeasuredCell& c) { return c.ranks < largest; }, comm))
                          .c_str());
    // Split 2: alternate cells of each rank count, in matrix order (on demo-cpu: the naive cells fit
    // and the hybrid ones are predicted at every rank count; on sim-cpu: every other shape at each
    // rank count), so the ranks are interpolated, not extrapolated.
    std::set<int> fit_cells;
    std::map<int, int> seen;  // ranks -> cells met so far
    for (const auto& c : cells)
      if (seen[c.ranks]++ % 2 == 0) fit_cells.insert(c.cell_index);
    std::printf("\n== split 2: fit on alternate cells of each rank count, predict the others ==\n");
    std::printf("%s", sim::format_validation(sim::validate_step_model(
                          cells, [&](const sim::MeasuredCell& c) { return fit_cells.count(c.cell_index) > 0; }, comm))
                          .c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hs_sim_validate: %s\n", e.what());
    return 1;
  }
}
