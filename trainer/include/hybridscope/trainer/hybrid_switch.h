// hybrid_switch.h — the hybrid engine's two switches as explicit, timed operations (design brief
// §2 "The switch"): train->rollout saves the RNG state, reshards the weights and allocates the KV
// blocks; rollout->train frees the KV blocks and restores the RNG state. Each switch returns (and,
// given a recorder, records) a probes::SwitchRecord with one duration per component.
//
// What this is not: a multi-rank resharder. In the single-process trainer the rollout engine holds
// the actor's own module, so reshard_weights moves nothing: it counts the parameter bytes that are
// already in place (bytes_local) and sends/receives 0.
#pragma once

#include <cstdint>

#include <ATen/core/Tensor.h>

#include "hybridscope/probes/recorder.h"
#include "hybridscope/trainer/model.h"
#include "hybridscope/trainer/rollout.h"

namespace hs::trainer {

class HybridSwitch {
 public:
  /// `actor` is the module `rollout` generates with. `recorder` null: time, do not record.
  HybridSwitch(Transformer actor, RolloutEngine& rollout, bool free_cache_engine, probes::Recorder* recorder);

  /// train->rollout: rng_save, reshard_weights, kv_allocate (when the cache is not allocated).
  probes::SwitchRecord to_rollout(std::int64_t step);
  /// rollout->train: kv_release (when free_cache_engine), rng_restore.
  probes::SwitchRecord to_train(std::int64_t step);

  /// The default CPU generator's state saved by the last to_rollout (undefined before it).
  const at::Tensor& saved_rng_state() const { return saved_rng_state_; }

 private:
  probes::SwitchRecord finish(probes::SwitchRecord record);

  Transformer actor_;
  RolloutEngine& rollout_;
  bool free_cache_engine_;
  probes::Recorder* recorder_;
  at::Tensor saved_rng_state_;  // (N,) uint8: at::detail::getDefaultCPUGenerator().get_state()
};

/// Bytes of every parameter of `model` (numel * element size, summed).
std::int64_t parameter_bytes(const Transformer& model);

}  // namespace hs::trainer
