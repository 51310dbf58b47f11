// reference_server.h — split placement (hybridscope.placement.ref): the reference policy on ranks
// of its own, serving the actor's ref phase over the world.
//
// Each step the lead of every actor dp replica (its tp = pp = 0 rank) sends its rows in contiguous
// chunks, one per reference rank: a header (rows, tokens, prompt length), then input_ids,
// attention_mask and position_ids; all sends first, then the (rows, R) float32 log-probs come
// back. The reference ranks serve replica 0, 1, ... in order, so the transfers form no cycle; the
// replica's other ranks receive the result by broadcast. Not here: the colocated reference, which
// is a model of the actor's ranks (trainer.cpp).
#pragma once

#include <atomic>
#include <cstdint>

#include <torch/torch.h>

#include "hybridscope/trainer/data/batch.h"
#include "hybridscope/trainer/config/config.h"
#include "hybridscope/trainer/data/dataset.h"
#include "hybridscope/trainer/model/model.h"

namespace hs::trainer {

class RunRecording;
class Tokenizer;
struct Topology;

/// On an actor rank: the reference log-probs (rows, R) of this rank's `batch`, computed on the
/// reference ranks.
torch::Tensor remote_ref_log_probs(const Topology& topology, const RolloutBatch& batch);

/// On a rank of another role's pool (a split reference or rollout): `model` becomes the actor's
/// base policy. The actor's supervised warm-up first (hybridscope.warmup, when the model is not
/// loaded from a path), which keeps the rank busy while the actor warms up (within the collective
/// timeout); then rank 0's weights over `world`, frozen in eval mode; then the step the actor
/// starts from (0, or a resumed step), set on `recording` and returned. `warm_up` false: no
/// warm-up (a resumed run: rank 0 sends the checkpoint's weights).
std::int64_t take_the_actors_base(const Config& cfg, RunRecording& recording, Communicator& world, Transformer& model,
                                  const RLDataset& train_data, const Tokenizer& tokenizer, bool warm_up = true);

/// On a reference rank: the reference policy `ref_model` set up like the actor's base (the same
/// warm-up on `train_data`, then rank 0's weights), then one ref phase per training step until the
/// actor's `total_steps`. A stop request (`stop_signal` non-zero on any rank) ends the run as killed
/// and throws. Returns the steps served.
int serve_reference(const Config& cfg, Topology& topology, RunRecording& recording, Transformer& ref_model,
                    const RLDataset& train_data, const Tokenizer& tokenizer, std::int64_t total_steps,
                    const std::atomic<int>& stop_signal);

}  // namespace hs::trainer
