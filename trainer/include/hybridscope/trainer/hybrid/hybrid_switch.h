// hybrid_switch.h — the hybrid engine's two switches as explicit, timed operations (design brief
// §2 "The switch"): train->rollout saves the RNG state, reshards the weights and allocates the KV
// blocks; rollout->train frees the KV blocks and restores the RNG state. Each switch returns (and,
// when its probes are on, records) a probes::SwitchRecord with one duration per component.
//
// One process: the rollout engine holds the actor's own module, so reshard_weights moves nothing:
// it counts the parameter bytes that are already in place (bytes_local) and sends/receives 0.
// Several ranks (set_resharder): the ReshardExecutor runs over the actor's training shards — its
// parts are the components reshard_pack, reshard_wire, reshard_unpack, reshard_wait
// (ReshardTimes) in place of reshard_weights — and reshard_install hands the generation shards to
// an install callback (the rollout engine's module); rollout->train adds restore_weights, which copies the restored training shards back
// (bit-identical) and drops the generation shards. The bytes_* columns are the executor's.
// Offloading (set_offload; actor.fsdp_config.param_offload / optimizer_offload): train->rollout
// ends its weight work with `offload`, which moves the actor's training state to host memory before
// the KV cache is allocated; rollout->train brings it back (`onload`) right after freeing the cache.
// Without it the actor's parameter storage stays allocated during rollout (the plan's
// peak_parameter_bytes says what a zero-redundancy engine would hold).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

#include "hybridscope/probes/recorder.h"
#include "hybridscope/probes/run_probes.h"
#include "hybridscope/trainer/model/model.h"
#include "hybridscope/trainer/hybrid/offload.h"
#include "hybridscope/trainer/hybrid/reshard_executor.h"
#include "hybridscope/trainer/rollout/rollout.h"

namespace hs::trainer {

class HybridSwitch {
 public:
  /// `actor` is the module `rollout` generates with. Each switch is recorded through `probes`
  /// (which must outlive this object); off: timed, not recorded.
  /// `memory_device`: the memory probe's device of the actor (-1 the CPU tracking allocator, >= 0
  /// that CUDA device's caching allocator; rank_device.h memory_device_index): memory_before/after and
  /// the peak of every switch record are read there.
  HybridSwitch(Transformer actor, RolloutEngine& rollout, bool free_cache_engine, const probes::RunProbes& probes,
               int memory_device = -1);

  /// Multi-rank resharding: `executor`'s plan names the parameters (parameter_specs of the full
  /// model); the actor holds this rank's training shard of those it has (by name). After each
  /// reshard, `install` receives the generation shard of every plan parameter, in plan order
  /// (the actor's own tensor where its training box is the generation box: copy, do not keep, it).
  /// `training_shards` (by name), when given, are the training tensors instead of the actor's
  /// parameters: the dp row blocks of an fsdp optimizer (ZeroShards::named_shards), whose module
  /// holds no storage between uses.
  /// `wire_dtype` (the rollout model's 16-bit dtype under fp32 masters): the shards are cast while
  /// they are packed and move in it (ReshardExecutor::to_generation); rollout->train then restores
  /// nothing — the masters never left — and records no restore_weights.
  void set_resharder(std::shared_ptr<ReshardExecutor> executor,
                     std::function<void(const std::vector<at::Tensor>&)> install,
                     const std::vector<std::pair<std::string, at::Tensor>>& training_shards = {},
                     std::optional<at::ScalarType> wire_dtype = std::nullopt);

  /// Offload at every train->rollout what `collect` returns then (the tensors can change between
  /// steps: AdamW's state appears at the first update), and bring it back at rollout->train. The
  /// rollout must not read these tensors: offloaded parameters need a rollout model of their own
  /// (set_resharder).
  void set_offload(std::function<std::vector<at::Tensor>()> collect);

  /// train->rollout: rng_save, reshard_weights (one process) or reshard_pack, reshard_wire,
  /// reshard_unpack, reshard_wait, reshard_install (with set_resharder), offload (with
  /// set_offload), kv_allocate (when the cache is not allocated).
  probes::SwitchRecord to_rollout(std::int64_t step);
  /// rollout->train: kv_release (when free_cache_engine), onload (with set_offload),
  /// restore_weights (with a resharder in the training dtype), rng_restore.
  probes::SwitchRecord to_train(std::int64_t step);

  /// The default CPU generator's state saved by the last to_rollout (undefined before it).
  const at::Tensor& saved_rng_state() const { return saved_rng_state_; }

 private:
  probes::SwitchRecord finish(probes::SwitchRecord record);

  Transformer actor_;
  RolloutEngine& rollout_;
  bool free_cache_engine_;
  probes::Recorder* recorder_;
  int memory_device_;
  std::shared_ptr<ReshardExecutor> executor_;
  std::optional<at::ScalarType> wire_dtype_;
  std::function<void(const std::vector<at::Tensor>&)> install_;
  std::vector<at::Tensor> actor_shards_;  // per plan parameter: the actor's tensor, undefined if absent
  std::vector<at::Tensor> generation_;    // the generation shards between the two switches
  std::function<std::vector<at::Tensor>()> collect_offload_;
  HostOffload offload_;
  at::Tensor saved_rng_state_;  // (N,) uint8: at::detail::getDefaultCPUGenerator().get_state()
};

/// Bytes of every parameter of `model` (numel * element size, summed).
std::int64_t parameter_bytes(const Transformer& model);

}  // namespace hs::trainer
