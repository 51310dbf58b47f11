// hybrid_switch.cpp — the train<->rollout switches, one now_ns() pair per component.
#include "hybridscope/trainer/hybrid_switch.h"

#include <mutex>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "hybridscope/probes/clock.h"
#include "hybridscope/trainer/cpu_memory_tracker.h"
#include "hybridscope/trainer/memory_probe.h"

namespace hs::trainer {

namespace {

constexpr int kCpuDevice = -1;  // the trainer runs on CPU (trainer.device=cuda is refused for now)

// Live bytes of the CPU tracking allocator; -1 when it is not installed (nothing counted).
std::int64_t memory_in_use() {
  return cpu_memory_tracker_installed() ? cpu_memory_stats().live_bytes : -1;
}

// Runs `fn` and appends (name, its duration) to the record's components.
template <typename Fn>
void timed(probes::SwitchRecord& record, const char* name, Fn&& fn) {
  const std::int64_t start = probes::now_ns();
  fn();
  record.components.emplace_back(name, probes::now_ns() - start);
}

}  // namespace

std::int64_t parameter_bytes(const Transformer& model) {
  std::int64_t bytes = 0;
  for (const auto& p : model->parameters()) bytes += static_cast<std::int64_t>(p.nbytes());
  return bytes;
}

HybridSwitch::HybridSwitch(Transformer actor, RolloutEngine& rollout, bool free_cache_engine,
                           probes::Recorder* recorder)
    : actor_(std::move(actor)), rollout_(rollout), free_cache_engine_(free_cache_engine), recorder_(recorder) {}

probes::SwitchRecord HybridSwitch::to_rollout(std::int64_t step) {
  probes::SwitchRecord record;
  record.step = step;
  record.direction = "train_to_rollout";
  record.memory_before_bytes = memory_in_use();
  const MemoryPeakWindow window(kCpuDevice);
  record.start_ns = probes::now_ns();
  timed(record, "rng_save", [&] {
    auto gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    saved_rng_state_ = gen.get_state();
  });
  // One process: the rollout engine generates with the actor's module, so every weight is
  // already where generation needs it.
  timed(record, "reshard_weights", [&] { record.bytes_local = parameter_bytes(actor_); });
  timed(record, "kv_allocate", [&] {
    if (!rollout_.cache_allocated()) rollout_.allocate_cache();
  });
  record.end_ns = probes::now_ns();
  record.memory_after_bytes = memory_in_use();
  record.peak_memory_bytes = window.peak_bytes();
  return finish(std::move(record));
}

probes::SwitchRecord HybridSwitch::to_train(std::int64_t step) {
  probes::SwitchRecord record;
  record.step = step;
  record.direction = "rollout_to_train";
  record.memory_before_bytes = memory_in_use();
  const MemoryPeakWindow window(kCpuDevice);
  record.start_ns = probes::now_ns();
  timed(record, "kv_release", [&] {
    if (free_cache_engine_) rollout_.release_cache();
  });
  timed(record, "rng_restore", [&] {
    if (!saved_rng_state_.defined()) return;
    auto gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(saved_rng_state_);
  });
  record.end_ns = probes::now_ns();
  record.memory_after_bytes = memory_in_use();
  record.peak_memory_bytes = window.peak_bytes();
  return finish(std::move(record));
}

probes::SwitchRecord HybridSwitch::finish(probes::SwitchRecord record) {
  if (recorder_) recorder_->record_switch(record);
  return record;
}

}  // namespace hs::trainer
