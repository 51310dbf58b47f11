// hs_sim_validate DB COMM_BENCH HARDWARE — the step model against a measured benchmark matrix:
// calibrates the collectives from hs_comm_bench's JSON, fits the efficiencies on the cells with
// fewer ranks than the largest and predicts the largest-rank cells (extrapolation in ranks, the
// direction a projection goes), then again on alternate cells of each rank count, and prints
// predicted vs measured per cell, the errors and the ordering: docs/simulator.md's tables.
#include <cstdio>
#include <exception>
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
    std::printf("%s: %zu measured cells\n", argv[1], cells.size());
    std::printf("\n%s", sim::format_validations(cells, comm).c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hs_sim_validate: %s\n", e.what());
    return 1;
  }
}
