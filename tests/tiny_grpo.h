// tiny_grpo.h — the tiny GRPO run the multi-process tests launch (trainer/dist: launch_test,
// launchers_test, multihost_test; faults/full_disk_test): `hybridscope train` arguments for a run
// of a few milliseconds per step, and reading a process's output file.
#pragma once

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "test_db.h"

namespace hs::test {

/// A new directory for one test's run: temp_db(suite, tag) (test_db.h), created.
inline std::string fresh_dir(const std::string& suite, const std::string& tag) {
  const std::string dir = std::filesystem::path(temp_db(suite, tag)).string();
  std::filesystem::create_directories(dir);
  return dir;
}

/// The whole of `path` ("" when it cannot be read).
inline std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline const std::string kBinary = std::string{HS_BINARY_DIR} + "/cli/hybridscope";

/// The tiny GRPO run's `train` arguments (a few ms per step), its database `db`, checkpoints under
/// `ckpt`; the world and the collective timeout are the caller's.
inline std::vector<std::string> tiny_grpo_run(const std::string& db, const std::string& ckpt, int steps) {
  const std::string src = HS_SOURCE_DIR;
  return {"train", "--config", src + "/configs/demo_grpo.yaml", "--no-progress", "--db", db,
          "data.train_files=" + src + "/datasets/addition/train.jsonl",
          "data.val_files=" + src + "/datasets/addition/val.jsonl",
          "data.train_batch_size=8", "actor_rollout_ref.actor.ppo_mini_batch_size=8",
          "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=-1", "actor_rollout_ref.rollout.n=2",
          "hybridscope.model.hidden_size=32", "hybridscope.model.intermediate_size=64",
          "hybridscope.model.num_hidden_layers=1", "hybridscope.model.num_attention_heads=2",
          "hybridscope.model.num_key_value_heads=1", "hybridscope.warmup.steps=0", "hybridscope.num_threads=1",
          "hybridscope.peak_flops=1e9", "trainer.val_before_train=false", "trainer.test_freq=-1",
          "trainer.save_freq=-1", "trainer.resume_mode=disable", "trainer.default_local_dir=" + ckpt,
          "trainer.total_training_steps=" + std::to_string(steps)};
}

/// tiny_grpo_run in `dir` (DIR/run.sqlite, DIR/ckpt) on 4 ranks (4 x 2 prompts x 2 samples), the
/// collective timeout last (tests that change it replace the last argument).
inline std::vector<std::string> tiny_grpo(const std::string& dir, int steps) {
  auto args = tiny_grpo_run(dir + "/run.sqlite", dir + "/ckpt", steps);
  args.insert(args.end(), {"trainer.n_gpus_per_node=4", "hybridscope.dist.timeout_s=20"});
  return args;
}

// tiny_grpo on `ranks` ranks instead of 4.
inline std::vector<std::string> tiny_grpo_on(const std::string& dir, int steps, int ranks) {
  auto args = tiny_grpo(dir, steps);
  for (auto& a : args)
    if (a == "trainer.n_gpus_per_node=4") a = "trainer.n_gpus_per_node=" + std::to_string(ranks);
  return args;
}

}  // namespace hs::test
