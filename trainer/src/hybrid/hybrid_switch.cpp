// hybrid_switch.cpp — the train<->rollout switches, one now_ns() pair per component.
#include "hybridscope/trainer/hybrid/hybrid_switch.h"

#include <map>
#include <mutex>
#include <string>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "hybridscope/probes/clock.h"
#include "hybridscope/trainer/memory/cpu_memory_tracker.h"
#include "hybridscope/trainer/memory/memory_probe.h"

namespace hs::trainer {

namespace {

// Bytes in use on the memory probe's `device`: the CUDA caching allocator's allocated bytes, or
// the CPU tracking allocator's live bytes; -1 when nothing is counted there.
std::int64_t memory_in_use(int device) {
  if (device >= 0) return cuda_allocator_stats_available() ? cuda_allocator_stats(device).allocated_bytes : -1;
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
                           const probes::RunProbes& probes, int memory_device)
    : actor_(std::move(actor)),
      rollout_(rollout),
      free_cache_engine_(free_cache_engine),
      recorder_(probes.recorder()),
      memory_device_(memory_device) {}

void HybridSwitch::set_resharder(std::shared_ptr<ReshardExecutor> executor,
                                 std::function<void(const std::vector<at::Tensor>&)> install,
                                 const std::vector<std::pair<std::string, at::Tensor>>& training_shards,
                                 std::optional<at::ScalarType> wire_dtype) {
  TORCH_CHECK(executor && install, "HybridSwitch::set_resharder: the executor and the install callback must be set");
  std::map<std::string, at::Tensor> by_name;
  if (training_shards.empty()) {
    for (const auto& item : actor_->named_parameters()) by_name[item.key()] = item.value();
  } else {
    for (const auto& [name, tensor] : training_shards) by_name[name] = tensor;
  }
  actor_shards_.clear();
  for (const auto& p : executor->plan().training.params) {
    auto it = by_name.find(p.spec.name);
    actor_shards_.push_back(it == by_name.end() ? at::Tensor() : it->second);
  }
  executor_ = std::move(executor);
  install_ = std::move(install);
  wire_dtype_ = wire_dtype;
}

void HybridSwitch::set_offload(std::function<std::vector<at::Tensor>()> collect) {
  TORCH_CHECK(collect, "HybridSwitch::set_offload: the collect callback must be set");
  collect_offload_ = std::move(collect);
}

probes::SwitchRecord HybridSwitch::to_rollout(std::int64_t step) {
  probes::SwitchRecord record;
  record.step = step;
  record.direction = "train_to_rollout";
  record.memory_before_bytes = memory_in_use(memory_device_);
  const MemoryPeakWindow window(memory_device_);
  record.start_ns = probes::now_ns();
  timed(record, "rng_save", [&] {
    auto gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    saved_rng_state_ = gen.get_state();
  });
  if (!executor_) {
    // One process: the rollout engine generates with the actor's module, so every weight is
    // already where generation needs it.
    timed(record, "reshard_weights", [&] { record.bytes_local = parameter_bytes(actor_); });
  } else {
    // The executor's four consecutive parts, then handing the shards to the rollout model.
    torch::NoGradGuard no_grad;
    std::vector<at::Tensor> training;
    for (const auto& t : actor_shards_) training.push_back(t.defined() ? t.detach() : t);
    generation_ = executor_->to_generation(training, wire_dtype_);
    const ReshardTimes& times = executor_->last_times();
    record.components.emplace_back("reshard_pack", times.pack_ns);
    record.components.emplace_back("reshard_wire", times.wire_ns);
    record.components.emplace_back("reshard_unpack", times.unpack_ns);
    record.components.emplace_back("reshard_wait", times.wait_ns);
    timed(record, "reshard_install", [&] {
      install_(generation_);
      if (wire_dtype_) generation_.clear();  // rounded copies, installed: nothing to restore from them
    });
    const ReshardBytes& bytes = executor_->last_bytes();
    record.bytes_sent = bytes.sent;
    record.bytes_received = bytes.received;
    record.bytes_local = bytes.local;
  }
  if (collect_offload_) timed(record, "offload", [&] { offload_.offload(collect_offload_()); });
  // The training phases' cached blocks go back before the KV pool is allocated (verl's
  // empty_cache on entering the rollout layout); only on a CUDA device.
  if (memory_device_ >= 0) timed(record, "empty_cache", [&] { release_cached_device_memory(memory_device_); });
  timed(record, "kv_allocate", [&] {
    if (!rollout_.cache_allocated()) rollout_.allocate_cache();
  });
  record.end_ns = probes::now_ns();
  record.memory_after_bytes = memory_in_use(memory_device_);
  record.peak_memory_bytes = window.peak_bytes();
  return finish(std::move(record));
}

probes::SwitchRecord HybridSwitch::to_train(std::int64_t step) {
  probes::SwitchRecord record;
  record.step = step;
  record.direction = "rollout_to_train";
  record.memory_before_bytes = memory_in_use(memory_device_);
  const MemoryPeakWindow window(memory_device_);
  record.start_ns = probes::now_ns();
  timed(record, "kv_release", [&] {
    if (free_cache_engine_) rollout_.release_cache();
  });
  // The freed KV pool goes back to the driver rather than staying cached for training's shapes.
  if (memory_device_ >= 0) timed(record, "empty_cache", [&] { release_cached_device_memory(memory_device_); });
  if (collect_offload_) timed(record, "onload", [&] { offload_.onload(); });
  if (executor_ && !wire_dtype_) {
    timed(record, "restore_weights", [&] {
      if (generation_.empty()) return;  // no train->rollout switch since the last restore
      torch::NoGradGuard no_grad;
      const auto restored = executor_->to_training(generation_);
      for (std::size_t p = 0; p < actor_shards_.size(); ++p) {
        if (actor_shards_[p].defined() && restored[p].defined() && !restored[p].is_same(actor_shards_[p])) {
          actor_shards_[p].detach().copy_(restored[p]);
        }
      }
      generation_.clear();
    });
  }
  timed(record, "rng_restore", [&] {
    if (!saved_rng_state_.defined()) return;
    auto gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(saved_rng_state_);
  });
  record.end_ns = probes::now_ns();
  record.memory_after_bytes = memory_in_use(memory_device_);
  record.peak_memory_bytes = window.peak_bytes();
  return finish(std::move(record));
}

probes::SwitchRecord HybridSwitch::finish(probes::SwitchRecord record) {
  if (recorder_) recorder_->record_switch(record);
  return record;
}

}  // namespace hs::trainer
