// reshard_plan_command.cpp — `hybridscope reshard-plan` (see reshard_plan_command.h). Wiring and
// printing only: layouts and plans come from hs::trainer (layout.h, reshard.h).
#include "reshard_plan_command.h"

#include <fmt/format.h>

#include "hybridscope/trainer/config/config.h"
#include "hybridscope/trainer/hybrid/reshard_planner.h"
#include "hybridscope/trainer/data/tokenizer.h"

namespace hs::cli {

namespace {

constexpr double kMiB = 1024.0 * 1024.0;

}  // namespace

CLI::App* add_reshard_plan_command(CLI::App& app, ReshardPlanArgs& args) {
  auto* cmd = app.add_subcommand("reshard-plan",
                                 "Plan the train->rollout weight switch of a config on N ranks (bytes per rank, per mode)");
  cmd->add_option("--config,-c", args.config_path, "YAML config")->check(CLI::ExistingFile);
  cmd->add_option("--world,-n", args.world, "Number of ranks (world = pp * tp * dp)")->required()->check(CLI::PositiveNumber);
  cmd->add_option("overrides", args.overrides, "key=value overrides");
  return cmd;
}

int run_reshard_plan(const ReshardPlanArgs& args) {
  using namespace hs::trainer;
  const Config cfg = load_config(args.config_path, args.overrides);
  ModelShape shape = cfg.hybridscope.model;
  if (shape.vocab_size <= 0) shape.vocab_size = make_tokenizer(resolved_tokenizer(cfg))->vocab_size();
  const auto& megatron = cfg.actor_rollout_ref.actor.megatron;
  const int tp = megatron.tensor_model_parallel_size, pp = megatron.pipeline_model_parallel_size;
  if (args.world % (tp * pp) != 0) {
    throw LayoutError("--world " + std::to_string(args.world) + " is not a multiple of tensor_model_parallel_size * " +
                      "pipeline_model_parallel_size = " + std::to_string(tp * pp));
  }
  const MeshShape mesh{pp, tp, args.world / (tp * pp)};
  const DpSharding dp = dp_sharding_for_strategy(cfg.actor_rollout_ref.actor.strategy);
  const int t_g = cfg.actor_rollout_ref.rollout.tensor_model_parallel_size;
  const ReshardMode configured = cfg.hybridscope.reshard.mode;
  const auto params = llama_parameters(shape);
  const ReshardPlan plan = plan_reshard(params, mesh, dp, t_g, configured);
  fmt::print("{} -> {}, {} mode; model {:.3f} MiB ({} parameters, float32)\n", plan.training.description,
             plan.generation.description, to_string(configured), plan.training.model_bytes() / kMiB,
             params.size());
  fmt::print("{:>5} {:>13} {:>13} {:>13} {:>13} {:>13} {:>13}\n", "rank", "training MiB", "received MiB",
             "sent MiB", "kept MiB", "peak MiB", "redundant MiB");
  for (int r = 0; r < args.world; ++r) {
    const RankPlan& p = plan.ranks[static_cast<std::size_t>(r)];
    fmt::print("{:>5} {:>13.3f} {:>13.3f} {:>13.3f} {:>13.3f} {:>13.3f} {:>13.3f}\n", r, p.training_bytes / kMiB,
               p.bytes_received / kMiB, p.bytes_sent / kMiB, p.bytes_local / kMiB, p.peak_parameter_bytes / kMiB,
               p.redundant_bytes / kMiB);
  }
  fmt::print("\nall modes, mean over ranks:\n{:>8} {:>13} {:>13}\n", "mode", "received MiB", "peak MiB");
  for (ReshardMode mode : {ReshardMode::kHybrid, ReshardMode::kVanilla, ReshardMode::kNaive}) {
    try {
      const ReshardPlan other = plan_reshard(params, mesh, dp, t_g, mode);
      double received = 0, peak = 0;
      for (const auto& p : other.ranks) received += p.bytes_received, peak += p.peak_parameter_bytes;
      fmt::print("{:>8} {:>13.3f} {:>13.3f}\n", to_string(mode), received / args.world / kMiB,
                 peak / args.world / kMiB);
    } catch (const LayoutError& e) {
      fmt::print("{:>8} not possible: {}\n", to_string(mode), e.what());
    }
  }
  return 0;
}

}  // namespace hs::cli
