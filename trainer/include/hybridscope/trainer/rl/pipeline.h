// pipeline.h — pipeline-parallel execution of a staged Transformer (model.h) over the micro-batches
// of a mini-batch: the 1F1B schedule (PipeDream-flush, as Megatron-LM's
// forward_backward_pipelining_without_interleaving) for training, a plain stage-to-stage forward
// for log-probs.
//
// Every rank of a pp group holds the same micro-batches (the ranks of one pp group share their tp
// and dp coordinates, so their dp share of the batch is the same rows). Stage s receives its input
// activations (B, T, C) from stage s-1 and sends its output to s+1; in the backward pass it
// receives the gradient of its output from s+1 and sends the gradient of its input to s-1, all
// with Communicator::send/recv on the model's pp group. Sends run on a background thread per
// direction, in order, so a stage never blocks on a send (c10d's Gloo send waits for the matching
// recv); the only waits are receives of data the other stage's schedule produces before it needs
// anything from this stage, so the 1F1B order cannot deadlock.
//
// With one stage everything is local: forward then backward per micro-batch, in order, exactly
// the gradient accumulation of the non-pipelined trainer. See docs/parallelism.md.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include <torch/types.h>

#include "hybridscope/trainer/data/batch.h"
#include "hybridscope/trainer/rl/metrics.h"
#include "hybridscope/trainer/model/model.h"
#include "hybridscope/trainer/dist/parallel.h"

namespace hs::trainer {

/// One step of a stage's schedule: the forward or the backward of micro-batch `micro`.
struct PipelineOp {
  enum class Kind { kForward, kBackward };
  Kind kind = Kind::kForward;
  int micro = 0;
  bool operator==(const PipelineOp& o) const { return kind == o.kind && micro == o.micro; }
};

/// The 1F1B order of stage `stage` (0-based) of `stages` over `micro_batches`: min(p − s − 1, m)
/// warm-up forwards, then one forward and one backward alternating, then the remaining backwards
/// (Narayanan et al., "Efficient Large-Scale Language Model Training on GPU Clusters", §2.2).
/// At most p − s micro-batches are in flight on stage s.
std::vector<PipelineOp> one_f_one_b_order(int stages, int stage, int micro_batches);

/// Called on the last stage with micro-batch `micro`'s model output (logits (B, T, V), final hidden
/// states (B, T, C) with LmOutput::kHidden, or values (B, T)); returns the scalar to backpropagate (pipeline_forward_backward) or is only observed
/// (pipeline_forward, whose result is ignored).
using StageOutputFn = std::function<torch::Tensor(std::size_t micro, const torch::Tensor& output)>;

/// Forward of every micro-batch through the stages in order, no autograd; `on_output` runs on the
/// last stage only.
/// `output`: what the last stage of an LM model hands on (LmOutput::kHidden: the final hidden
/// states, for response_log_probs_of_hidden).
void pipeline_forward(Transformer& model, const std::vector<RolloutBatch>& micro_batches,
                      const StageOutputFn& on_output, LmOutput output = LmOutput::kLogits);

/// One forward and backward of every micro-batch in the 1F1B order; gradients accumulate into
/// this stage's parameters (call Optimizer::zero_grad before, Optimizer::step after). `loss_of`
/// runs on the last stage only. `trace`, when given, receives the ops in the order they ran.
void pipeline_forward_backward(Transformer& model, const std::vector<RolloutBatch>& micro_batches,
                               const StageOutputFn& loss_of, std::vector<PipelineOp>* trace = nullptr,
                               LmOutput output = LmOutput::kLogits);

/// Response log-probs (B, R) of `model` (a whole model or one pipeline stage) on `batch` in
/// micro-batches of `micro` rows (whole batch when micro <= 0), logits / temperature, no
/// gradient; on every rank of the model's pp group (broadcast from the last stage). The actor's
/// compute_log_prob and the reference policy (same layout) both use it.
torch::Tensor micro_batched_log_probs(Transformer& model, const RolloutBatch& batch, std::int64_t micro,
                                      double temperature);

/// Replaces `metrics` on every rank of `group` by rank `root`'s (names and values); the identity
/// in a one-rank group. Collective over `group`.
void broadcast_metrics(Metrics& metrics, Communicator& group, int root);

}  // namespace hs::trainer
