// trainer.h — the PPO/GRPO training loop (verl's RayPPOTrainer.fit for one process).
//
// Per step, in verl's order, each phase a probe range whose name is verl's timing_s key:
//   gen → reward → old_log_prob → ref → values → adv → update_critic → update_actor
// plus validation (testing) every trainer.test_freq steps and checkpoints (save_checkpoint) every
// trainer.save_freq steps, resumable with resume_mode=auto.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "hybridscope/trainer/config/config.h"

namespace hs::probes {
class Recorder;
}

namespace hs::trainer {

/// What a run produced (also printed as the closing summary).
struct FitSummary {
  int steps_run = 0;
  int first_step = 1;           // > 1 when resumed
  double val_before = -1;       // mean@1 before training (-1: not measured)
  double val_after = -1;        // mean@1 after the last step
  double mean_step_seconds = 0;
  double warmup_seconds = 0;
  std::string checkpoint_dir;   // last checkpoint written or resumed from ("" if none)
  std::string db_path;
  int rank = 0;                 // this process's rank: rank 0 speaks for the run
};

struct TrainerOptions {
  std::string command_line;   // stored in the run row
  bool show_progress = true;  // the progress bar on stderr (off when not a TTY)
};

class PPOTrainer {
 public:
  PPOTrainer(Config config, TrainerOptions options = {});
  ~PPOTrainer();
  PPOTrainer(const PPOTrainer&) = delete;
  PPOTrainer& operator=(const PPOTrainer&) = delete;

  /// Runs the whole training (warm-up if configured, validation, steps, checkpoints) and records it.
  FitSummary fit();

  /// One training step outside fit(), for benchmarks that interleave trainers: the first call
  /// begins the run and does fit()'s preparation (resume or warm-up, reference and critic set-up,
  /// trainer.val_before_train); each call runs the next step, records and flushes its metrics
  /// and returns them. The run ends (completed) with the trainer, or failed when a step throws.
  /// Steps past trainer.total_training_steps are not refused. Returns metrics.h's Metrics (spelled
  /// out here to keep LibTorch out of this header).
  std::vector<std::pair<std::string, double>> train_step();

  /// Greedy mean@1 reward on the validation set with the current actor.
  double validate();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace hs::trainer
