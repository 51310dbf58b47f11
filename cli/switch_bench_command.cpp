// switch_bench_command.cpp — `hybridscope switch-bench` (see switch_bench_command.h).
//
// Per shape and mode: one plan, one executor (its "reshard" group), `warmup` untimed switches, then
// `repeat` timed ones. Each timed switch starts after a world barrier; a rank's time is its own
// to_generation (train->rollout) or to_training (rollout->train) call, and the switch's latency is
// the slowest rank's (all-reduced max), which is what the step waits for. The train->rollout parts
// (ReshardTimes: pack, wire, unpack, wait) are each the slowest rank's too, medians over switches.
#include "switch_bench_command.h"

#include <algorithm>
#include <fstream>
#include <stdexcept>

#include <fmt/format.h>
#include <torch/torch.h>

#include "hybridscope/probes/clock.h"
#include "hybridscope/trainer/model/model_shapes.h"
#include "hybridscope/trainer/dist/process_group.h"
#include "hybridscope/trainer/hybrid/reshard_planner.h"
#include "hybridscope/trainer/hybrid/reshard_executor.h"

namespace hs::cli {

namespace {

constexpr double kMiB = 1024.0 * 1024.0;

struct Stats {
  double median = 0, min = 0, max = 0;
};

Stats stats_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v.front(), v.back()};
}

}  // namespace

CLI::App* add_switch_bench_command(CLI::App& app, SwitchBenchArgs& args) {
  auto* cmd = app.add_subcommand(
      "switch-bench", "Time the weight switch over real ranks, hybrid vs vanilla vs naive (run under `launch -n N --`)");
  std::string names;
  for (const auto& n : hs::trainer::model_shape_names()) names += (names.empty() ? "" : ", ") + n;
  cmd->add_option("--shapes", args.shapes, "Model shapes (model_shapes.h): " + names)->delimiter(',')->capture_default_str();
  cmd->add_option("--modes", args.modes, "Reshard modes: hybrid, vanilla, naive")
      ->delimiter(',')
      ->check(CLI::IsMember(hs::trainer::spellings<hs::trainer::ReshardMode>()))
      ->capture_default_str();
  cmd->add_option("--pp", args.pp, "Training pipeline-parallel size")->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--tp", args.tp, "Training tensor-parallel size")->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--rollout-tp", args.rollout_tp, "Generation tensor-parallel size t_g")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--strategy", args.strategy, "Along dp: megatron (replicated) or fsdp (sharded)")
      ->check(CLI::IsMember(hs::trainer::spellings<hs::trainer::ActorStrategy>()))
      ->capture_default_str();
  cmd->add_option("--warmup", args.warmup, "Untimed switches per shape and mode")->check(CLI::NonNegativeNumber)->capture_default_str();
  cmd->add_option("--repeat", args.repeat, "Timed switches per shape and mode")->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--threads", args.threads, "Torch threads per rank")->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--csv", args.csv, "Also write the table as CSV (rank 0)");
  return cmd;
}

int run_switch_bench(const SwitchBenchArgs& args) {
  using namespace hs::trainer;
  torch::set_num_threads(args.threads);
  const DistEnv env = dist_env_from_environment();
  if (env.world_size % (args.pp * args.tp) != 0)
    throw LayoutError(fmt::format("switch-bench: {} ranks are not a multiple of --pp {} x --tp {}: run it under "
                                  "`hybridscope launch -n N --` with N a multiple of pp*tp",
                                  env.world_size, args.pp, args.tp));
  const MeshShape mesh{args.pp, args.tp, env.world_size / (args.pp * args.tp)};
  // The option checks accept only spellings of these enums (spellings<E>() above).
  const DpSharding dp = dp_sharding_for_strategy(from_string<ActorStrategy>(args.strategy).value());
  ProcessGroupOptions options;
  options.timeout = std::chrono::seconds(300);
  C10dGroupFactory groups(env, options);
  auto world = groups.world();
  const bool lead = env.rank == 0;
  std::ofstream csv;
  if (lead && !args.csv.empty()) {
    csv.open(args.csv);
    if (!csv) throw std::runtime_error("switch-bench: cannot write " + args.csv);
    csv << "shape,model_mib,mode,train_to_rollout_ms_median,train_to_rollout_ms_min,train_to_rollout_ms_max,"
           "rollout_to_train_ms_median,received_mib_per_rank_max,peak_parameter_mib_per_rank_max,pack_ms,wire_ms,"
           "unpack_ms,wait_ms\n";
  }
  if (lead) {
    fmt::print("switch-bench: {} ranks (CPU, Gloo), training pp={} tp={} dp={} {} -> rollout tp={}; {} warm-up + {} "
               "timed switches each; latency = slowest rank, median [min, max]\n",
               env.world_size, mesh.pp, mesh.tp, mesh.dp, args.strategy, args.rollout_tp, args.warmup, args.repeat);
    fmt::print("{:<6} {:>9} {:<8} {:>28} {:>17} {:>16} {:>15}   {}\n", "shape", "model MiB", "mode",
               "train->rollout ms", "rollout->train ms", "received MiB/rk", "peak MiB/rk",
               "pack / wire / unpack / wait ms");
  }
  for (const auto& shape_name : args.shapes) {
    const auto params = llama_parameters(model_shape_by_name(shape_name));
    for (const auto& mode_name : args.modes) {
      const ReshardMode mode = from_string<ReshardMode>(mode_name).value();
      auto plan = std::make_shared<const ReshardPlan>(plan_reshard(params, mesh, dp, args.rollout_tp, mode));
      ReshardExecutor executor(plan, env.rank, groups);
      std::vector<at::Tensor> training;
      torch::manual_seed(env.rank + 1);
      for (std::size_t p = 0; p < plan->training.params.size(); ++p) {
        const auto box = plan->training.box(p, env.rank);
        training.push_back(box ? torch::randn(box->shape()) : at::Tensor());
      }
      std::vector<double> to_gen, to_train, pack, wire, unpack, wait;
      for (int i = 0; i < args.warmup + args.repeat; ++i) {
        world->barrier();
        auto t0 = probes::now_ns();
        const auto generation = executor.to_generation(training);
        auto t1 = probes::now_ns();
        world->barrier();
        const auto t2 = probes::now_ns();
        const auto restored = executor.to_training(generation);
        if (restored.size() != training.size()) throw std::logic_error("switch-bench: to_training lost parameters");
        const auto t3 = probes::now_ns();
        const ReshardTimes& parts = executor.last_times();
        auto times = torch::tensor({static_cast<double>(t1 - t0), static_cast<double>(t3 - t2),
                                    static_cast<double>(parts.pack_ns), static_cast<double>(parts.wire_ns),
                                    static_cast<double>(parts.unpack_ns), static_cast<double>(parts.wait_ns)},
                                   torch::kFloat64);
        world->all_reduce(times, ReduceOp::kMax);
        if (i >= args.warmup) {
          to_gen.push_back(times[0].item<double>() * 1e-6);
          to_train.push_back(times[1].item<double>() * 1e-6);
          pack.push_back(times[2].item<double>() * 1e-6);
          wire.push_back(times[3].item<double>() * 1e-6);
          unpack.push_back(times[4].item<double>() * 1e-6);
          wait.push_back(times[5].item<double>() * 1e-6);
        }
      }
      auto bytes = torch::tensor({static_cast<double>(executor.last_bytes().received),
                                  static_cast<double>(plan->ranks[static_cast<std::size_t>(env.rank)].peak_parameter_bytes)},
                                 torch::kFloat64);
      world->all_reduce(bytes, ReduceOp::kMax);
      const Stats g = stats_of(to_gen), t = stats_of(to_train);
      const double pack_ms = stats_of(pack).median, wire_ms = stats_of(wire).median,
                   unpack_ms = stats_of(unpack).median, wait_ms = stats_of(wait).median;
      const double model_mib = static_cast<double>(plan->training.model_bytes()) / kMiB;
      if (lead) {
        fmt::print("{:<6} {:>9.1f} {:<8} {:>10.2f} [{:>7.2f}, {:>7.2f}] {:>17.3f} {:>16.2f} {:>15.2f}   {:.1f} / {:.1f} / "
                   "{:.1f} / {:.1f}\n",
                   shape_name, model_mib, mode_name, g.median, g.min, g.max, t.median, bytes[0].item<double>() / kMiB,
                   bytes[1].item<double>() / kMiB, pack_ms, wire_ms, unpack_ms, wait_ms);
        if (csv.is_open())
          csv << fmt::format("{},{:.3f},{},{:.3f},{:.3f},{:.3f},{:.3f},{:.3f},{:.3f},{:.3f},{:.3f},{:.3f},{:.3f}\n",
                             shape_name, model_mib, mode_name, g.median, g.min, g.max, t.median,
                             bytes[0].item<double>() / kMiB, bytes[1].item<double>() / kMiB, pack_ms, wire_ms,
                             unpack_ms, wait_ms);
      }
    }
  }
  world->barrier();
  return 0;
}

}  // namespace hs::cli
