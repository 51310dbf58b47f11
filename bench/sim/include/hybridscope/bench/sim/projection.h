// projection.h — `hybridscope simulate`: the step model (step_model.h) over cluster sizes, and the
// search over layouts (HybridFlow's auto-mapping, §6, made measurable: every candidate's phases
// and memory are printed, not only the winner).
//
// Projection: for each world size N the base inputs keep their training tp and pp (fsdp: 1, 1),
// dp = N / (tp · pp), the same rollout tp, and verl's batch keys (resolve_batches derives the
// micro-batch counts for the new dp). Strong scaling keeps the global batch; weak scaling
// multiplies train_batch_size and ppo_mini_batch_size by N / N₀ (N₀ the first feasible size).
//   strong efficiency  (T(N₀) · N₀) / (T(N) · N)          1 = perfectly linear speed-up
//   weak efficiency    T(N₀) / T_weak(N)                   1 = constant step time
//   tokens/s           sequences · (P + R) / T(N); per device ÷ N (verl's perf/throughput)
//   MFU                the actor update's FLOPs (verl's formula, model_flops.h) ÷ (time · N ·
//                      peak): over update_actor (verl's perf/mfu/actor) and over the whole step
// A size whose layout the model or the planner refuses, or whose memory does not fit, is kept
// with the reason instead of a time.
//
// Search: for one N, every (strategy, training tp, pp, rollout tp, reshard mode) with tp and
// rollout tp in {1, 2, 4, 8} up to the node's devices and dividing the heads and KV heads, pp in
// {1, 2, 4, 8} dividing the layers, tp · pp dividing N; placement colocated (the trainer's
// hybrid engine; split placements are not searched). Feasible ones ranked by predicted step time.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "hybridscope/bench/sim/step_model.h"

namespace hs::bench::sim {

/// The efficiencies a projection assumes for an H100-class GPU where nothing is calibrated:
/// prefill 0.5 (vLLM's prefill GEMMs), decode bandwidth 0.6 (weight + KV reads against the HBM
/// peak), forward 0.45, train 0.4 (FSDP/Megatron on a 7B dense model), switch copies 0.5.
/// Engineering guesses, listed among every projection's assumptions (docs/simulator.md).
Efficiencies assumed_gpu_efficiencies();

struct SizeProjection {
  int ranks = 0;
  StepInputs inputs;      // at this size (strong scaling)
  bool feasible = false;
  std::string refusal;    // why not (the model's, the planner's or the memory's reason)
  PhaseTimes times;
  double tokens_per_s = 0, tokens_per_s_per_device = 0;
  double mfu_actor = 0, mfu_step = 0;
  double strong_efficiency = 0;  // 0 where not computable
  bool weak_feasible = false;
  std::string weak_refusal;
  double weak_step_s = 0, weak_efficiency = 0;
};

struct Projection {
  std::vector<SizeProjection> sizes;
  std::vector<std::string> assumptions;  // every number the projection did not measure
};

/// `base` at `ranks` ranks: dp from the world, batches re-derived; `batch_scale` multiplies the
/// prompts and the mini-batch (weak scaling).
StepInputs at_world(const StepInputs& base, int ranks, double batch_scale = 1.0);

/// Simulates `inputs` and checks its memory: feasible, or the reason. Never throws SimError (the
/// reason is kept), other exceptions pass.
struct Outcome {
  bool feasible = false;
  std::string refusal;
  PhaseTimes times;
};
Outcome try_step(const StepInputs& inputs, const CommCalibration& comm);

/// The reason a memory estimate does not fit ("" when it fits), with its terms in GB.
std::string memory_refusal(const MemoryEstimate& memory);

Projection project(const StepInputs& base, const CommCalibration& comm, const std::vector<int>& ranks);

struct LayoutCandidate {
  StepInputs inputs;
  std::string label;  // "fsdp dp 64 → rollout tp 2, hybrid"
  Outcome outcome;
  std::string why;    // feasible: where its time goes and what it loses against the best
};

/// Every candidate for `ranks` ranks: feasible ones by predicted step time, then the refused.
/// `progress` (may be null) is called after each candidate with (done, total).
std::vector<LayoutCandidate> search_layouts(const StepInputs& base, const CommCalibration& comm, int ranks,
                                            const std::function<void(int, int)>& progress = {});

/// The assumptions behind a projection of `base` on `comm`'s hardware: every hardware number that
/// is not measured, the efficiencies' origin, and what the model leaves out.
std::vector<std::string> projection_assumptions(const StepInputs& base, const CommCalibration& comm,
                                                const std::string& efficiency_origin);

/// The tables a person reads.
std::string format_projection(const Projection& projection, const StepInputs& base, const CommCalibration& comm);
std::string format_search(const std::vector<LayoutCandidate>& candidates, int ranks, int top);

/// JSON for the viewer and scripts: {"hardware", "model", "assumptions", "efficiency", "sizes": [...],
/// "search": [...]} (docs/simulator.md lists the fields). `search` may be empty.
std::string projection_json(const Projection& projection, const StepInputs& base, const CommCalibration& comm,
                            const std::vector<LayoutCandidate>& search, int search_ranks);

}  // namespace hs::bench::sim
