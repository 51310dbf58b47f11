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
// Between uses the module's parameters hold no storage (0 elements; the shard is all this rank
// keeps). Around a use:
//   gather()               one flat all_gather over dp rebuilds every full (tp-shard) parameter;
//   forward / backward     on the full parameters, as without sharding;
//   reduce_scatter_grads() one flat reduce_scatter over dp leaves this rank's rows of the summed
//                          gradient on its shards and frees the full gradients;
//   release()              frees the full parameters again.
// Bytes per step (nccl-tests' convention, probed_communicator.h), with S = this rank's tp shard
// of the stage in bytes: all_gather S (= dp × shard bytes), reduce_scatter S.
//
// What this is not: a per-layer prefetching FSDP (the whole module is gathered at once, so the
// peak during a use is the full tp shard, as in FSDP with one wrapping unit) or a mixed-precision
// one (shards, gathers and gradients share the parameters' dtype).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <torch/nn/module.h>
#include <torch/types.h>

#include "hybridscope/trainer/dist/parallel.h"

namespace hs::trainer {

class ZeroShards {
 public:
  /// Takes this rank's row block of every parameter of `module` (named_parameters order) as its
  /// shard, then releases the module's full parameters. `dp` must be non-null; every rank of it
  /// constructs its ZeroShards over a module with the same parameter names and shapes.
  ZeroShards(torch::nn::Module& module, std::shared_ptr<Communicator> dp);
  ZeroShards(const ZeroShards&) = delete;
  ZeroShards& operator=(const ZeroShards&) = delete;

  /// All-gathers every parameter's full tensor into the module (collective over dp). A no-op when
  /// the module already holds the current shards (gathered and not stepped since).
  void gather();
  /// Frees the module's full parameters (each becomes a 0-element tensor) and their gradients.
  void release();
  /// After backward: reduce-scatters the full gradients (summed over dp; an undefined gradient
  /// counts as zeros) into the shards' gradients, frees the full gradients and marks the module
  /// stale (the optimizer is about to change the shards). Collective over dp.
  void reduce_scatter_grads();
  bool gathered() const { return gathered_; }

  /// RAII: gather() now, release() at scope end (also when an exception leaves the scope).
  class Scope {
   public:
    explicit Scope(ZeroShards* shards);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

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
    std::int64_t offset = 0;             // in a rank's flat chunk (elements)
  };
  // Gathers the flat shards: (dp, chunk) with rank j's chunk in row j.
  torch::Tensor gather_flat();
  // Parameter `i`'s full tensor out of gather_flat()'s result.
  torch::Tensor unflatten(const torch::Tensor& gathered, std::size_t i) const;

  std::shared_ptr<Communicator> dp_;
  std::vector<Param> params_;
  std::vector<std::string> names_;
  std::vector<torch::Tensor> shards_;
  std::int64_t chunk_ = 0;  // elements of one rank's padded flat chunk
  bool gathered_ = false;
};

}  // namespace hs::trainer
