// rollout_server.h — split rollout (hybridscope.placement.rollout): generation on ranks of their
// own, fed the actor's weights after its updates, synchronously or one step off policy
// (hybridscope.async_mode; verl's one-step-off-policy trainer).
//
// Per step k, in the order both sides take part in the world's collectives:
//   sync          actor: [sync w_{k-1}] -> gen: receive batch k -> train (w_k)
//                 rollout: [receive w_{k-1}] -> generate batch k -> hand it over
//   one_step_off  actor: gen: receive batch k -> [sync w_{k-1}] -> train (w_k)
//                 rollout: hand over batch k -> [receive w_{k-1}] -> generate batch k+1
// so in one_step_off batch k+1 is generated while the actor trains on batch k, with the weights
// of one update before the ones it is trained with (batch 1: the initial weights, no lag).
// syncs_weights_at() says which steps sync; both sides ask it.
//
// The weights go from the actor's rank 0 (which holds the whole model: the actor is unsharded,
// validate()) to every rollout rank over the group `sync_rollout`: the parameter version first,
// then the parameters in buckets of at most actor_rollout_ref.rollout.update_weights_bucket_megabytes,
// one broadcast per bucket; recorded on those ranks as a switch `sync_rollout_weights` with its
// components (sync_pack, sync_broadcast on the sender; sync_broadcast, sync_unpack on a receiver)
// and the bytes (the parameters' bytes: sent by the actor's rank 0, received by each rollout rank).
// Batches come back as one broadcast per rollout rank over the world: a float64 header (the
// generating weights' version, the generation's seconds), then the share's packed rows
// (pack_rollouts), every rank receiving every share.
//
// fully_async (verl's fully-async rollouter/trainer): the pool streams prompt groups into a queue
// instead, and the sync comes every async_training.trigger_parameter_sync_step steps (fully_async.h).
//
// Before the base weights, the actor's rank 0 tells the pool how the run starts (share_pool_start):
// fresh (the pool warms up as the actor did), resumed from a checkpoint (no warm-up: the base
// broadcast carries the resumed weights; the pool takes the step, the loader's position and the
// parameter version from it), or refused (the actor's ranks throw; the pool stops too). A resumed
// one_step_off run then sends the checkpoint's rollout weights (the ones the batch after the saved
// step was generated with) by one more sync, so the resumed run generates what the uninterrupted
// one did.
//
// Not here: what the actor does with the batch (trainer.cpp), validation (on the actor's ranks,
// with the current weights).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "hybridscope/probes/recorder.h"
#include "hybridscope/trainer/config/config.h"
#include "hybridscope/trainer/data/dataset.h"
#include "hybridscope/trainer/loop/rollout_phase.h"
#include "hybridscope/trainer/model/model.h"

namespace hs::trainer {

class RolloutEngine;
class RunRecording;
class Tokenizer;
struct Topology;

/// One step's batch as the actor receives it from the rollout pool.
struct RolloutHandoff {
  Rollouts rollouts;                          // every response of the step, prompt-major
  std::vector<std::int64_t> param_versions;   // per rollout rank (its contiguous share): the updates its weights had
  double generate_seconds = 0;                // the slowest rollout rank's generation of this batch
};

/// What one weight sync moved (on every rank of the actor and of the rollout pool).
struct WeightSync {
  std::int64_t bytes = 0;    // parameter bytes each rollout rank received (numel x element size)
  std::int64_t buckets = 0;  // broadcasts of parameters
};

/// How a run starts, from the actor's rank 0 to the split rollout pool (prepare(), trainer_start.cpp).
struct PoolStart {
  enum class Kind : std::int64_t { kFresh = 0, kResumed = 1, kRefused = 2 };
  Kind kind = Kind::kFresh;
  std::int64_t step = 0;              // the checkpoint's step: the run goes on with step + 1
  DataLoader::State data{};           // the loader's position after the checkpoint's step
  std::int64_t param_version = 0;     // the version of the base weights (the actor's, resumed)
  std::int64_t rollout_version = -1;  // >= 0: a sync of the checkpoint's rollout weights, of this version, follows
};

/// Every rank of the world: rank 0's `start` (the argument elsewhere is ignored). Throws on a
/// rollout rank when the actor refused (kRefused: the actor's ranks throw their own error).
PoolStart share_pool_start(const Topology& topology, const PoolStart& start);

/// Whether step `step` (1-based) of `total_steps` syncs the weights. sync: every step but the
/// first (every rank starts from the same weights); one_step_off: steps 2 .. total-1 (step k's
/// weights feed batch k+1: the first step's would be the initial ones again, the last step's feed
/// no batch); fully_async: steps T+1, 2T+1, ... (T = `trigger_parameter_sync_step`: after every T
/// updates, before the next step takes its batch; fully_async.h).
bool syncs_weights_at(AsyncMode mode, std::int64_t step, std::int64_t total_steps, int trigger_parameter_sync_step = 1);

/// A rollout rank's engine over `model`: the rollout config's pool, the tokenizer's stop ids, the
/// KV blocks allocated for good (the pool only generates).
std::unique_ptr<RolloutEngine> make_pool_engine(const Config& cfg, Transformer& model, const Tokenizer& tokenizer);

/// Actor side: the batch of `prompts` prompts x `n` responses from the rollout ranks.
RolloutHandoff receive_rollouts(const Topology& topology, std::size_t prompts, int n, int max_response_length);

/// Both sides: `model`'s parameters from the sync group's rank 0 (the actor's rank 0, sending
/// `version`) to the rollout ranks (which take `version` from it); recorded as a switch of `step`
/// through `recorder` when non-null. An actor rank outside the group computes the same sizes and
/// moves nothing.
WeightSync sync_rollout_weights(const Topology& topology, Transformer& model, std::int64_t& version,
                                std::int64_t bucket_bytes, std::int64_t step, probes::Recorder* recorder);

/// On a rollout rank: the base policy as the actor's (the same warm-up, then rank 0's weights),
/// then one batch per training step until `total_steps` (in `cfg.hybridscope.async_mode`'s order),
/// drawing the prompts from `loader` as the actor draws them. A stop request (`stop_signal`
/// non-zero on any rank) ends the run as killed and throws. Returns the batches handed over.
/// fully_async: serve_fully_async instead (fully_async.h), returning the prompt groups put.
int serve_rollout(const Config& cfg, Topology& topology, RunRecording& recording, Transformer& model,
                  const RLDataset& train_data, DataLoader& loader, const Tokenizer& tokenizer,
                  std::int64_t total_steps, const std::atomic<int>& stop_signal);

}  // namespace hs::trainer
