// train_command.cpp — see train_command.h. Wiring only: the training is hs::trainer::PPOTrainer's.
#include "train_command.h"

#include <fmt/format.h>

#include "hybridscope/trainer/config/config.h"
#include "hybridscope/trainer/loop/trainer.h"

namespace hs::cli {

namespace {

void print_summary(const trainer::FitSummary& s, const trainer::Config& cfg) {
  fmt::print("\n=== hybridscope train: run summary ===\n");
  fmt::print("algorithm         {} ({} steps, {} prompts x {} samples per step)\n",
             trainer::to_string(cfg.algorithm.adv_estimator), s.steps_run, cfg.data.train_batch_size,
             cfg.actor_rollout_ref.rollout.n);
  if (s.warmup_seconds > 0) fmt::print("warm-up           {:.1f} s\n", s.warmup_seconds);
  if (s.steps_run > 0) fmt::print("mean step time    {:.2f} s\n", s.mean_step_seconds);
  if (s.val_before >= 0) fmt::print("held-out mean@1   before {:.1f}%\n", 100.0 * s.val_before);
  // Without a validation before training the "after" line carries the label itself.
  if (s.val_after >= 0)
    fmt::print("{}after  {:.1f}%\n", s.val_before >= 0 ? "                  " : "held-out mean@1   ", 100.0 * s.val_after);
  if (s.val_before >= 0 && s.val_after >= 0)
    fmt::print("                  change {:+.1f} points\n", 100.0 * (s.val_after - s.val_before));
  if (!s.checkpoint_dir.empty()) fmt::print("checkpoint        {}\n", s.checkpoint_dir);
  fmt::print("run database      {}\n", s.db_path);
}

}  // namespace

CLI::App* add_train_command(CLI::App& app, TrainArgs& args) {
  auto* cmd = app.add_subcommand("train", "Run PPO/GRPO training and record it into a run database");
  cmd->add_option("--config,-c", args.config_path, "YAML config (verl key names; see docs/config.md)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--db", args.db_path, "Run database to write (SQLite); overrides hybridscope.db");
  cmd->add_flag("--no-progress", args.no_progress, "Do not draw the progress bar");
  cmd->add_option("overrides", args.overrides, "key=value overrides, e.g. data.train_batch_size=32");
  return cmd;
}

int run_train(const TrainArgs& args) {
  auto overrides = args.overrides;
  if (!args.db_path.empty()) overrides.push_back("hybridscope.db=" + args.db_path);
  const auto config = trainer::load_config(args.config_path, overrides);
  trainer::TrainerOptions options;
  options.command_line = args.command_line;
  options.show_progress = !args.no_progress;
  trainer::PPOTrainer ppo(config, options);
  const auto summary = ppo.fit();
  if (summary.rank == 0) print_summary(summary, config);  // one summary per run, not per rank
  return 0;
}

}  // namespace hs::cli
