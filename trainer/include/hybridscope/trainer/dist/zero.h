// zero.h — ZeRO-3 / FSDP sharding of a module's parameters, gradients and optimizer state over
// the data-parallel group (actor_rollout_ref.actor.strategy: fsdp; design brief §2
// "Parallelism"; docs/parallelism.md).
//
// Each parameter of the module (a tp shard when the module is tensor parallel) is split along
// dim 0 into dp row blocks of ceil(rows/dp) rows; dp rank j owns block j as a tensor of its own,
// the *shard*, which is what the optimizer steps (so AdamW's moments are 1/dp too). This is
// training_layout(..., DpSharding::kSharded)'s box for the rank whenever the layout accepts the
// shape (it requires dp to divide the rows; here an uneven last block is padded on the wire, which
// serves modules outside the layouts such as the critic's 1-row value head).
//
// Wrapping units (FSDP's): every parameter belongs to one unit, and a unit is gathered and
// reduce-scattered as one flat collective. By default the whole module is one unit. wrap_layers()
// makes verl's auto-wrap units (fsdp_config.per_layer): each decoder layer's parameters
// (model.layers.{i}.*) are a unit, and the rest — embeddings, final norm, head — the root unit, as
// FSDP's root module holds them.
//
// Between uses the module's parameters hold no storage (0 elements; the shard is all this rank
// keeps). Around a use (PassScope in the workers; Scope gathers the whole module for readers):
//   one unit           gather() all-gathers the module; forward and backward run on the full
//                      parameters; reduce_scatter_grads() reduce-scatters the summed gradients onto
//                      the shards and frees them; release() frees the parameters.
//   per-layer units    the PassScope gathers the root unit only, which stays full until the optimizer
//                      step (as FSDP's root unit does not reshard after forward). The backbone's
//                      layer loop (layer_hooks.h) drives the layers: before a layer's forward its
//                      unit is gathered, after it freed; before its backward gathered again, after
//                      its backward its gradients are reduce-scattered onto the shards (summed into
//                      the shards' gradients, one reduce-scatter per backward pass) and the unit
//                      freed. reduce_scatter_grads() then reduces the root unit (and any unit still
//                      full) and waits for what is in flight.
//   forward_prefetch   (fsdp_config.forward_prefetch, per-layer units only) the next unit's
//                      all_gather is issued before the current layer runs — layer i+1 in the
//                      forward, layer i-1 in the backward (verl's FSDP prefetches the backward with
//                      its default backward_prefetch=BACKWARD_PRE) — and a layer's gradient
//                      reduce-scatter is waited only after the previous layer's backward: both run
//                      on Gloo's threads (pending_collective.h) while this one computes. Without it
//                      every collective is waited at once, in the same order.
// Peak full parameters per rank: one unit — the whole tp shard; per-layer — the root unit plus
// one layer, plus the one in flight with forward_prefetch (≤ root + 2 layers; peak_full_bytes()).
// Bytes per step (nccl-tests' convention, probed_communicator.h), with S = this rank's tp shard
// of the stage in bytes: one unit — all_gather S and reduce_scatter S per use; per-layer — the
// layers' S_l gathered twice per forward/backward pass and reduce-scattered once per pass.
//
// What this is not: a mixed-precision FSDP (shards, gathers and gradients share the parameters'
// dtype) or one that overlaps the root unit's collectives. In bf16 (autocast) the casts of a
// layer's weights that autograd saves for the backward stay alive until it, so the bound above is
// the fp32 one.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <torch/nn/module.h>
#include <torch/types.h>

#include "hybridscope/trainer/dist/parallel.h"
#include "hybridscope/trainer/dist/pending_collective.h"
#include "hybridscope/trainer/dist/layer_hooks.h"

namespace hs::trainer {

/// What the per-layer units' collectives did since reset_stats(), on the training thread's clock
/// (probes::now_ns()): the reports' comm/compute overlap (temporal_breakdown.h: overlap = |∪ comm ∩
/// ∪ compute|, compute with the thread's own waiting cut out) over fsdp's collectives, where a
/// collective runs from its issue to its completion and the thread computes except while it waits.
struct ZeroCommStats {
  std::int64_t comm_ns = 0;     // |∪ collectives|
  std::int64_t exposed_ns = 0;  // |∪ collectives ∩ ∪ waits|: what the training thread waited
  std::int64_t overlap_ns() const { return comm_ns - exposed_ns; }
  double overlap_ratio() const { return comm_ns > 0 ? static_cast<double>(overlap_ns()) / comm_ns : 0.0; }
  std::int64_t collectives = 0;  // all_gathers and reduce_scatters
};

class ZeroShards final : public LayerHooks {
 public:
  /// Takes this rank's row block of every parameter of `module` (named_parameters order) as its
  /// shard, then releases the module's full parameters. `dp` must be non-null; every rank of it
  /// constructs its ZeroShards over a module with the same parameter names and shapes.
  ZeroShards(torch::nn::Module& module, std::shared_ptr<Communicator> dp);
  ZeroShards(const ZeroShards&) = delete;
  ZeroShards& operator=(const ZeroShards&) = delete;

  ~ZeroShards() override;

  /// Splits the module into per-layer units (above): parameters named `prefix`{i}.* form layer
  /// i's unit, the rest the root unit. Call before the first use, on every rank alike, and set the
  /// backbone's layer hooks to this object. `forward_prefetch`: issue the next unit's gather (and
  /// wait a layer's reduce-scatter) while computing. Throws std::invalid_argument when no
  /// parameter has the prefix.
  void wrap_layers(bool forward_prefetch, const std::string& prefix = "model.layers.");
  bool per_layer() const { return layer_units_ > 0; }
  bool forward_prefetch() const { return prefetch_; }

  /// All-gathers every unit's full tensors into the module (collective over dp). A no-op for a
  /// unit that already holds the current shards (gathered and not stepped since).
  void gather();
  /// Frees the module's full parameters (each becomes a 0-element tensor) and their gradients;
  /// a collective still in flight is waited for and dropped. Never throws a DistError.
  void release();
  /// After backward: reduce-scatters the full gradients of every unit still full (summed over dp;
  /// an undefined gradient counts as zeros) into the shards' gradients (added to what per-layer
  /// reduce-scatters left there), waits for the collectives in flight, frees the full tensors and
  /// marks the module stale (the optimizer is about to change the shards). Collective over dp.
  void reduce_scatter_grads();
  /// True while any unit holds full parameters.
  bool gathered() const;

  // LayerHooks (per-layer units; layer_hooks.h): no-ops for a layer that is not a unit.
  void before_forward(int layer) override;
  void after_forward(int layer) override;
  void before_backward(int layer) override;
  void after_backward(int layer) override;

  /// RAII: gather() now (the whole module, whatever the units), release() at scope end (also when
  /// an exception leaves the scope). For whoever reads the module's parameters.
  class Scope {
   public:
    explicit Scope(ZeroShards* shards);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    ZeroShards* shards_;
  };
  /// RAII around forward/backward passes of the workers (PPOActor, PPOCritic): with one unit as
  /// Scope; with per-layer units it gathers the root unit only and the backbone's layer hooks
  /// gather each layer in turn. release() at scope end.
  class PassScope {
   public:
    explicit PassScope(ZeroShards* shards);
    ~PassScope();
    PassScope(const PassScope&) = delete;
    PassScope& operator=(const PassScope&) = delete;

   private:
    ZeroShards* shards_;
  };

  /// The optimizer's leaves: this rank's rows of each parameter, shape (rows_j, rest...).
  const std::vector<torch::Tensor>& shards() const { return shards_; }
  /// Parameter names, in the order of shards().
  const std::vector<std::string>& names() const { return names_; }
  /// [begin, end) rows of parameter `i`'s dim 0 this rank owns (end = begin when it owns none).
  std::pair<std::int64_t, std::int64_t> rows(std::size_t i) const;
  /// (name, shard) pairs: this rank's boxes of training_layout(kSharded) for the resharder.
  std::vector<std::pair<std::string, torch::Tensor>> named_shards() const;

  /// Bytes of the shards (what stays resident between uses).
  std::int64_t shard_bytes() const;
  /// Bytes of the module's parameter storage right now (0 between uses; the full tp shard while
  /// gathered).
  std::int64_t module_parameter_bytes() const;
  /// The most full-parameter bytes alive at once since reset_stats(): the module's parameter
  /// storage plus the buffers of gathers in flight, sampled whenever a gather is issued or lands.
  std::int64_t peak_full_bytes() const { return peak_full_bytes_; }
  /// Full bytes of the whole module (every unit gathered) and of the largest layer unit (0
  /// without per-layer units): the bounds peak_full_bytes() is compared with.
  std::int64_t full_bytes() const;
  std::int64_t largest_layer_unit_bytes() const;
  std::int64_t root_unit_bytes() const;
  ZeroCommStats comm_stats() const;
  /// Starts peak_full_bytes() and comm_stats() afresh (PPOActor: at each update).
  void reset_stats();

  /// Every parameter's full (tp-shard) tensor, gathered over dp (collective over dp; the module
  /// stays as it is): for checkpoints (save_safetensors) and tests.
  std::vector<std::pair<std::string, torch::Tensor>> full_state_dict();
  /// Loads full (tp-shard) tensors: each rank keeps its rows. Every parameter must be present with
  /// its full shape, else std::invalid_argument naming it. Local (no communication); releases the
  /// module (its full tensors are stale).
  void load_full_state_dict(const std::vector<std::pair<std::string, torch::Tensor>>& state);

 private:
  struct Param {
    torch::Tensor full;                  // the module's parameter (a 0-element tensor while released)
    std::vector<std::int64_t> shape;     // its full shape
    std::int64_t rows = 1;               // dim 0 (1 for a 0-dim parameter)
    std::int64_t row_numel = 1;          // elements per row
    std::int64_t block = 1;              // rows per rank on the wire: ceil(rows / dp)
    std::int64_t offset = 0;             // in a rank's flat chunk of its unit (elements)
  };
  // Parameters gathered and reduce-scattered together: one flat chunk per rank.
  struct Unit {
    std::vector<std::size_t> params;  // indices into params_
    std::int64_t chunk = 0;           // elements of one rank's padded flat chunk
    bool gathered = false;            // the module holds this unit's current full tensors
    std::unique_ptr<PendingCollective> gather;  // an all_gather in flight (prefetch)
    std::int64_t gather_issued_ns = 0;
    std::int64_t gather_posted_ns = 0;  // the post's return (the training thread's part of it ends)
  };
  // Lays params_ out into units_ by `unit_of` (unit index per parameter).
  void build_units(const std::vector<std::size_t>& unit_of, std::size_t units);
  // Unit `u`'s flat shard chunk (chunk).
  torch::Tensor flat_shards(const Unit& u) const;
  // Issues unit u's all_gather unless it is full or one is in flight.
  void issue_gather(std::size_t u);
  // Makes unit u full: waits for its gather in flight (or runs a blocking one) and unflattens.
  void ensure_full(std::size_t u);
  // Frees unit u's full tensors (and gradients when `grads`).
  void release_unit(std::size_t u, bool grads);
  // Drops unit u's gather in flight, if any, once it completed (the shards are about to change).
  void drop_gather(std::size_t u);
  // Issues unit u's gradient reduce_scatter and frees its full gradients; waited at once unless
  // `async`, else by finish_reduce_scatter().
  void reduce_scatter_unit(std::size_t u, bool async);
  // Waits for the reduce_scatter in flight, if any, and adds its rows to the shards' gradients.
  void finish_reduce_scatter();
  // Adds `mine` (chunk: this rank's row of unit u's reduced gradients) to its shards' gradients.
  void add_to_shard_grads(std::size_t u, const torch::Tensor& mine);
  // Parameter `i`'s full tensor out of its unit's gathered (dp, chunk).
  torch::Tensor unflatten(const torch::Tensor& gathered, std::size_t i) const;
  // Gathers every unit's flat shards (each (dp, chunk)) without touching the module.
  std::vector<torch::Tensor> gather_all_flat();
  // The unit of decoder layer `layer`, or -1.
  std::ptrdiff_t unit_of_layer(int layer) const;
  // Records a collective [issued, completed] and the training thread's part of it: its post
  // [issued, posted] and its wait [wait_begin, wait_end].
  void account(std::int64_t issued, std::int64_t posted, std::int64_t completed, std::int64_t wait_begin,
               std::int64_t wait_end);
  void sample_peak();

  std::shared_ptr<Communicator> dp_;
  std::vector<Param> params_;
  std::vector<std::string> names_;
  std::vector<torch::Tensor> shards_;
  std::vector<std::size_t> unit_of_param_;
  std::vector<Unit> units_;           // units_[0] the root (or the whole module)
  std::vector<int> unit_layer_;       // decoder layer of each unit, -1 for the root
  std::size_t layer_units_ = 0;
  bool prefetch_ = false;
  std::unique_ptr<PendingCollective> reduce_scatter_;  // in flight (forward_prefetch)
  std::size_t reduce_scatter_unit_ = 0;
  std::int64_t reduce_scatter_issued_ns_ = 0;
  std::int64_t reduce_scatter_posted_ns_ = 0;
  std::int64_t peak_full_bytes_ = 0;
  std::int64_t collectives_ = 0;
  std::vector<std::pair<std::int64_t, std::int64_t>> comm_intervals_, wait_intervals_;
};

}  // namespace hs::trainer
