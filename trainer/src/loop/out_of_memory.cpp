// out_of_memory.cpp — see out_of_memory.h.
#include "loop/out_of_memory.h"

#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "hybridscope/trainer/config/config.h"
#include "hybridscope/trainer/memory/memory_probe.h"
#include "hybridscope/trainer/model/device.h"

namespace hs::trainer::detail {

namespace {
thread_local const char* t_current = nullptr;
thread_local const char* t_failed = nullptr;

std::string gib(std::int64_t bytes) { return fmt::format("{:.2f} GiB", static_cast<double>(bytes) / (1 << 30)); }

// The keys that bound the memory of `phase`, "key = value" each.
std::vector<std::string> keys_for(const Config& cfg, const std::string& phase) {
  const auto& arr = cfg.actor_rollout_ref;
  const auto& actor = arr.actor;
  auto key = [](const char* name, auto value) { return fmt::format("{} (now {})", name, value); };
  const std::string offload = key("actor_rollout_ref.actor.fsdp_config.param_offload / optimizer_offload",
                                  fmt::format("{} / {}", actor.fsdp_config.param_offload,
                                              actor.fsdp_config.optimizer_offload));
  if (phase == "gen" || phase == "gen_extra" || phase == "gen_max" || phase == "testing" ||
      phase.rfind("switch/", 0) == 0) {
    return {key("actor_rollout_ref.rollout.gpu_memory_utilization", arr.rollout.gpu_memory_utilization),
            key("actor_rollout_ref.rollout.max_num_seqs", arr.rollout.max_num_seqs),
            key("hybridscope.kv_num_blocks", cfg.hybridscope.kv_num_blocks),
            key("data.max_response_length", cfg.data.max_response_length), offload};
  }
  if (phase == "old_log_prob")
    return {key("actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu",
                arr.log_prob_micro_batch(arr.rollout.log_prob_micro_batch_size_per_gpu))};
  if (phase == "ref")
    return {key("actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu",
                arr.log_prob_micro_batch(arr.ref.log_prob_micro_batch_size_per_gpu)),
            key("actor_rollout_ref.ref.fsdp_config.param_offload", arr.ref.fsdp_config.param_offload)};
  if (phase == "values" || phase == "update_critic")
    return {key("critic.ppo_micro_batch_size_per_gpu", cfg.critic.ppo_micro_batch_size_per_gpu)};
  if (phase == "update_actor")
    return {key("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", actor.ppo_micro_batch_size_per_gpu),
            key("actor_rollout_ref.actor.use_dynamic_bsz / ppo_max_token_len_per_gpu",
                fmt::format("{} / {}", actor.use_dynamic_bsz, actor.ppo_max_token_len_per_gpu)),
            key("actor_rollout_ref.model.enable_gradient_checkpointing", arr.model.enable_gradient_checkpointing),
            offload};
  return {key("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", actor.ppo_micro_batch_size_per_gpu),
          key("actor_rollout_ref.rollout.gpu_memory_utilization", arr.rollout.gpu_memory_utilization), offload};
}
}  // namespace

PhaseMark::PhaseMark(const char* name) noexcept : previous_(t_current), exceptions_(std::uncaught_exceptions()) {
  t_current = name;
}

PhaseMark::~PhaseMark() {
  if (std::uncaught_exceptions() > exceptions_ && t_failed == nullptr) t_failed = t_current;
  t_current = previous_;
}

const char* PhaseMark::failed() noexcept { return t_failed; }
void PhaseMark::clear_failed() noexcept { t_failed = nullptr; }

std::string out_of_memory_message(const Config& cfg, const char* phase, std::int64_t step, int device,
                                  const std::string& what) {
  const std::string name = phase != nullptr ? phase : "step";
  std::string figures = "the CPU";
  if (device >= 0) {
    figures = fmt::format("cuda:{}", device);
    if (cuda_allocator_stats_available()) {
      try {
        const auto stats = cuda_allocator_stats(device);
        figures += fmt::format(": {} allocated, {} reserved by PyTorch (peak {} allocated), {} allocation retries",
                               gib(stats.allocated_bytes), gib(stats.reserved_bytes), gib(stats.peak_allocated_bytes),
                               stats.num_alloc_retries);
      } catch (const std::exception&) {
      }
    }
    if (const auto memory = cuda_device_memory(device))
      figures += fmt::format("; {} free of {} on the device", gib(memory->free_bytes), gib(memory->total_bytes));
  }
  std::string keys;
  for (const auto& k : keys_for(cfg, name)) keys += "\n  - " + k;
  const auto newline = what.find('\n');
  return fmt::format(
      "out of device memory in phase '{}' of step {} ({}).\nThe keys that bound this phase's memory:{}\n"
      "Lower the micro-batch or the rollout's share, or offload (docs/config.md). PyTorch said: {}",
      name, step, figures, keys, newline == std::string::npos ? what : what.substr(0, newline));
}

}  // namespace hs::trainer::detail
