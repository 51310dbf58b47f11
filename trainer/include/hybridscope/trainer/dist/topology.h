// topology.h — who this rank is in the run and which process groups it talks over: the rank
// environment, the device, the roles' ranks (hybridscope.placement), the actor's training mesh and
// every group the loop uses — the world, the actor pool's own world (split placement), the training
// mesh's groups, the dp replica's group and HybridFlow's micro-DP groups.
//
// A value built once at start-up from the validated config and the rank environment, in two steps
// because the run database sits between them: connect() joins the c10d world (rank 0 then merges
// an earlier run's leftover rank files and every rank opens its own), open_groups() makes the rest,
// probed. Not here: the layouts of the weights on this mesh and the generation replicas, which the
// hybrid actor owns (hybrid_actor.h).
#pragma once

#include <memory>
#include <vector>

#include <torch/torch.h>

#include "hybridscope/trainer/config/config.h"
#include "hybridscope/trainer/dist/layout.h"
#include "hybridscope/trainer/dist/parallel.h"
#include "hybridscope/trainer/dist/process_group.h"

namespace hs::probes {
class RunProbes;
}

namespace hs::trainer {

struct Topology {
  DistEnv env;                         // this rank in the world (the one-rank world by default)
  torch::Device device{torch::kCPU};   // trainer.device: where every model lives (device.h)
  int memory_device = -1;              // the memory probe's device: -1 the CPU tracking allocator
  MeshShape mesh;                      // the actor's training mesh (pp, tp, dp)
  DpSharding dp_sharding = DpSharding::kReplicated;  // actor_rollout_ref.actor.strategy
  int rollout_tp = 1;                  // actor_rollout_ref.rollout.tensor_model_parallel_size
  std::vector<int> actor_ranks;        // world ranks of the actor (all when colocated)
  std::vector<int> ref_ranks;          // world ranks of a split reference; empty = colocated
  std::vector<int> rollout_ranks;      // world ranks of a split rollout pool; empty = the actor generates
  int actor_rank = 0;                  // this rank in the actor pool (its mesh rank); -1: a reference or rollout rank

  ClockSync clock_sync;                           // world > 1: the estimate of rank 0's clock (applied on other hosts)
  std::unique_ptr<C10dGroupFactory> groups;       // world > 1 only
  std::unique_ptr<C10dGroupFactory> pool_groups;  // split: the actor pool's own world (members only)
  SingleRankGroupFactory one_rank;                // a one-process run's rollout and reshard groups
  GroupFactory* actor_groups = nullptr;           // where the actor's groups are made (world > 1)
  std::shared_ptr<Communicator> global_world;     // every rank, probed: run id, stop flag, cross-pool data
  ParallelContext parallel;                       // the training mesh's groups, probed
  std::shared_ptr<Communicator> replica_group;    // split, tp·pp > 1: the ranks of this rank's dp replica
  /// HybridFlow's micro-DP group (hybrid mode, t_g <= tp): the ranks of this rank's training replica
  /// with its generation tp rank; their replicas generate exactly that training replica's prompts.
  std::shared_ptr<Communicator> micro_dp_group;
  /// Split rollout: the actor's rank 0 and the rollout ranks (group rank 0 is the actor's), over
  /// which the weights are broadcast after each update (rollout_server.h); null on other ranks.
  std::unique_ptr<C10dGroupFactory> sync_groups;
  std::shared_ptr<Communicator> sync_group;

  /// Step one: the placement and mesh from `cfg` (validated), the rank environment checked against
  /// it, the device, and (world > 1) the c10d world, not yet probed. Throws ConfigError when the
  /// launched world does not match the config.
  static Topology connect(const Config& cfg);
  /// Step two: every group of the run, each collective recorded through `probes` (which must
  /// outlive this object).
  void open_groups(const Config& cfg, const probes::RunProbes& probes);

  int rank() const { return env.rank; }
  int world() const { return env.world_size; }
  int dp_rank() const { return parallel.dp->rank(); }
  bool split() const { return !ref_ranks.empty(); }
  /// hybridscope.placement.rollout: generation runs on ranks of its own (rollout_server.h).
  bool split_rollout() const { return !rollout_ranks.empty(); }
  /// A rank of a split reference: it serves the actor's ref phase (reference_server.h).
  bool serves_ref() const { return actor_rank < 0 && split(); }
  /// A rank of a split rollout pool: it generates the actor's batches (rollout_server.h).
  bool serves_rollout() const { return actor_rank < 0 && split_rollout(); }
  /// The actor's modules hold a part of the model: tp or pp > 1, or fsdp shards over dp > 1.
  bool sharded() const { return mesh.tp > 1 || mesh.pp > 1 || (dp_sharding == DpSharding::kSharded && mesh.dp > 1); }
  /// Where the rollout's and the reshard's groups are made: the actor's groups, or one rank's.
  GroupFactory& rollout_groups() { return actor_groups ? *actor_groups : static_cast<GroupFactory&>(one_rank); }
};

/// Rank 0's parameters of `module` to every rank of `world` (replicas start identical whatever
/// each rank loaded).
void broadcast_parameters(Communicator& world, torch::nn::Module& module);

}  // namespace hs::trainer
