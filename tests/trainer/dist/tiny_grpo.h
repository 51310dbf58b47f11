// tiny_grpo.h — the tiny GRPO run the multi-process tests launch (launch_test, launchers_test,
// multihost_test): `hybridscope train` arguments for a run of a few seconds per step on 4 ranks.
#pragma once

#include <string>
#include <vector>

namespace hs::test {

inline const std::string kBinary = std::string{HS_BINARY_DIR} + "/cli/hybridscope";

// A tiny GRPO run that would take many steps: 4 ranks x 2 prompts x 2 samples.
inline std::vector<std::string> tiny_grpo(const std::string& dir, int steps) {
  return {"train", "--config", std::string{HS_SOURCE_DIR} + "/configs/demo_grpo.yaml", "--no-progress",
          "--db", dir + "/run.sqlite",
          "data.train_files=" + std::string{HS_SOURCE_DIR} + "/datasets/addition/train.jsonl",
          "data.val_files=" + std::string{HS_SOURCE_DIR} + "/datasets/addition/val.jsonl",
          "data.train_batch_size=8", "actor_rollout_ref.actor.ppo_mini_batch_size=8",
          "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=-1", "actor_rollout_ref.rollout.n=2",
          "hybridscope.model.hidden_size=32", "hybridscope.model.intermediate_size=64",
          "hybridscope.model.num_hidden_layers=1", "hybridscope.model.num_attention_heads=2",
          "hybridscope.model.num_key_value_heads=1", "hybridscope.warmup.steps=0", "hybridscope.num_threads=1",
          "hybridscope.peak_flops=1e9", "trainer.val_before_train=false", "trainer.test_freq=-1",
          "trainer.save_freq=-1", "trainer.resume_mode=disable", "trainer.default_local_dir=" + dir + "/ckpt",
          "trainer.total_training_steps=" + std::to_string(steps), "trainer.n_gpus_per_node=4",
          "hybridscope.dist.timeout_s=20"};
}

// tiny_grpo on `ranks` ranks instead of 4.
inline std::vector<std::string> tiny_grpo_on(const std::string& dir, int steps, int ranks) {
  auto args = tiny_grpo(dir, steps);
  for (auto& a : args)
    if (a == "trainer.n_gpus_per_node=4") a = "trainer.n_gpus_per_node=" + std::to_string(ranks);
  return args;
}

}  // namespace hs::test
