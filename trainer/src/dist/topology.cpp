// topology.cpp — the rank environment, the placement, the training mesh and the run's groups,
// made in the same order on every rank (c10d's rule for new groups).
#include "hybridscope/trainer/dist/topology.h"

#include <algorithm>
#include <chrono>
#include <string>

#include <fmt/format.h>

#include "hybridscope/probes/clock.h"
#include "hybridscope/probes/run_probes.h"
#include "hybridscope/trainer/dist/rank_device.h"
#include "hybridscope/trainer/dist/mesh_groups.h"
#include "hybridscope/trainer/dist/probed_communicator.h"

namespace hs::trainer {

Topology Topology::connect(const Config& cfg) {
  Topology t;
  const int world = cfg.world_size();
  const Placement placement = resolved_placement(cfg);
  t.actor_ranks = placement.actor;
  t.ref_ranks = placement.ref;
  t.rollout_ranks = placement.rollout;
  const auto& mega = cfg.actor_rollout_ref.actor.megatron;
  const int actors = static_cast<int>(t.actor_ranks.size());
  t.mesh = {mega.pipeline_model_parallel_size, mega.tensor_model_parallel_size,
            actors / (mega.tensor_model_parallel_size * mega.pipeline_model_parallel_size)};
  t.dp_sharding = dp_sharding_for_strategy(cfg.actor_rollout_ref.actor.strategy);
  t.rollout_tp = cfg.actor_rollout_ref.rollout.tensor_model_parallel_size;

  t.env = dist_env_from_environment();
  if (t.env.world_size != world) {
    throw ConfigError(t.env.world_size == 1
                          ? fmt::format("trainer.nnodes x trainer.n_gpus_per_node = {} ranks, but this process was "
                                        "started alone (no RANK/WORLD_SIZE): start it with `hybridscope launch -n {} "
                                        "-- train ...` (or torchrun/srun/mpirun)",
                                        world, world)
                          : fmt::format("WORLD_SIZE={} from the launcher, but trainer.nnodes x trainer.n_gpus_per_node "
                                        "= {}: set trainer.n_gpus_per_node={} (with trainer.nnodes=1) to match",
                                        t.env.world_size, world, t.env.world_size));
  }
  // Before any group: NCCL takes the process's current CUDA device, which this sets.
  t.device = trainer_device(cfg.trainer.device, t.env.local_rank, cfg.hybridscope.expandable_segments);
  t.memory_device = memory_device_index(t.device);
  const auto in_pool = std::find(t.actor_ranks.begin(), t.actor_ranks.end(), t.rank());
  t.actor_rank = in_pool == t.actor_ranks.end() ? -1 : static_cast<int>(in_pool - t.actor_ranks.begin());
  if (world > 1) {
    ProcessGroupOptions pg;
    const DistBackendChoice backend = cfg.hybridscope.dist.backend;  // auto: nccl on cuda, gloo on cpu
    const bool nccl = backend == DistBackendChoice::kNccl || (backend == DistBackendChoice::kAuto && t.device.is_cuda());
    pg.backend = nccl ? DistBackend::kNccl : DistBackend::kGloo;
    pg.timeout = std::chrono::milliseconds(static_cast<std::int64_t>(cfg.hybridscope.dist.timeout_s * 1000.0));
    pg.shm_bytes = cfg.hybridscope.dist.shm_bytes;
    fmt::print("dist: {}\n", t.env.describe());  // before the rendezvous: a rank that waits says for what
    std::fflush(stdout);
    t.groups = std::make_unique<C10dGroupFactory>(t.env, pg);
    // Before anything is recorded: a rank on another host records on rank 0's clock.
    t.clock_sync = t.groups->clock_sync();
    if (!t.clock_sync.same_host) probes::set_clock_shift_ns(t.clock_sync.offset_ns);
  }
  return t;
}

void Topology::open_groups(const Config& cfg, const probes::RunProbes& probes) {
  if (world() == 1) {
    global_world = parallel.world;
    return;
  }
  // Every collective of the run goes through the communication probe: the world here, every group
  // the factory makes from now on (mesh, rollout, reshard) there.
  groups->set_probes(&probes);
  global_world = std::make_shared<ProbedCommunicator>(groups->world(), probes);
  if (split() || split_rollout()) {
    // The actor pool is a world of its own: its groups never involve the reference's or the
    // rollout pool's ranks.
    pool_groups = groups->sub_world(actor_ranks, "actor");
    actor_groups = pool_groups.get();
  } else {
    actor_groups = groups.get();
  }
  if (split_rollout()) {
    std::vector<int> members{actor_ranks.front()};
    members.insert(members.end(), rollout_ranks.begin(), rollout_ranks.end());
    sync_groups = groups->sub_world(members, "sync_rollout");
    if (sync_groups) sync_group = sync_groups->world();
  }
  if (actor_rank < 0) return;  // a reference or rollout rank: no actor groups
  const int actors = static_cast<int>(actor_ranks.size());
  const int model_parallel = mesh.tp * mesh.pp;
  if (actors > 1) {
    parallel = make_training_context(*actor_groups, mesh, actor_rank);
    parallel.dp_sharding = dp_sharding;  // fsdp: the optimizers keep dp row blocks (zero.h)
    if (!split() && !split_rollout()) parallel.world = global_world;  // the pool's own world is probed already
    if (split() && model_parallel > 1) {
      for (int j = 0; j < mesh.dp; ++j) {  // every dp replica's group, in order, on every actor rank
        std::vector<int> members;
        for (int r = 0; r < actors; ++r)
          if (megatron_coord(mesh, r).dp == j) members.push_back(r);
        auto group = actor_groups->new_group(members, "replica");
        if (group) replica_group = std::move(group);
      }
    }
  }
  if (actors > 1 && cfg.hybridscope.reshard.mode == ReshardMode::kHybrid && rollout_tp <= mesh.tp) {
    // Every micro-DP group, in order, on every actor rank. Ascending ranks are ascending replicas
    // (replica = tp mod stride + stride·(pp + PP·dp)), i.e. the training share's prompt order.
    const int stride = mesh.tp / rollout_tp;
    for (int j = 0; j < mesh.dp; ++j) {
      for (int g = 0; g < rollout_tp; ++g) {
        std::vector<int> members;
        for (int r = 0; r < actors; ++r) {
          const MeshCoord c = megatron_coord(mesh, r);
          if (c.dp == j && c.tp / stride == g) members.push_back(r);
        }
        std::shared_ptr<Communicator> group;
        if (members.size() > 1) {
          group = actor_groups->new_group(members, "micro_dp");
        } else if (members.front() == actor_rank) {
          group = std::make_shared<SingleRankCommunicator>("micro_dp");
        }
        if (group) micro_dp_group = std::move(group);
      }
    }
  }
}

void broadcast_parameters(Communicator& world, torch::nn::Module& module) {
  torch::NoGradGuard no_grad;
  for (auto& p : module.parameters()) {
    auto buffer = p.detach().contiguous();
    world.broadcast(buffer, 0);
    if (!buffer.is_same(p)) p.copy_(buffer);
  }
}

}  // namespace hs::trainer
