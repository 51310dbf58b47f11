// switch_bench_command.h — `hybridscope switch-bench`: the train->rollout and rollout->train weight
// switch timed over real ranks (run it under `hybridscope launch -n N --`), hybrid vs vanilla vs
// naive side by side for one or more model shapes, random float32 weights (docs/benchmarks.md).
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace hs::cli {

struct SwitchBenchArgs {
  std::vector<std::string> shapes{"demo", "bench-41m"};
  std::vector<std::string> modes{"hybrid", "vanilla", "naive"};
  int pp = 2;
  int tp = 2;
  int rollout_tp = 2;
  std::string strategy = "megatron";
  int warmup = 2;
  int repeat = 10;
  int threads = 1;
  std::string csv;  // optional output file (rank 0)
};

CLI::App* add_switch_bench_command(CLI::App& app, SwitchBenchArgs& args);

/// Every rank runs the same sequence of switches; rank 0 prints the table. Throws DistError,
/// LayoutError or std::invalid_argument (an unknown shape, model_shapes.h) with a message naming the fix.
int run_switch_bench(const SwitchBenchArgs& args);

}  // namespace hs::cli
