// dist_env.h — who started this process and where it sits in the world: the rank environment of
// `hybridscope launch`, PyTorch's torchrun, a Slurm step (srun) or Open MPI's mpirun, read once at
// start-up into a DistEnv. LibTorch-free (hs_trainer_core): the launcher, the trainer and the tests
// read it the same way.
//
// Precedence, innermost launcher first (docs/launching.md):
//   1. `hybridscope launch` (HS_LAUNCHER=hybridscope) or torchrun (TORCHELASTIC_RUN_ID): RANK,
//      WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT. Slurm's or Open MPI's variables beside them
//      describe the outer job that started the launcher (one task per node) and are not read.
//   2. mpirun: OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _NODE_RANK; MASTER_ADDR/MASTER_PORT as set
//      with `mpirun -x` (defaults: loopback when every rank is on one node, port 29500). Slurm's
//      variables beside them are the daemons' step inside an allocation and are not read.
//   3. a Slurm step (srun: SLURM_STEP_ID set): SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID,
//      SLURM_NODEID; MASTER_ADDR else the first host of SLURM_STEP_NODELIST (SLURM_JOB_NODELIST);
//      MASTER_PORT else 20000 + SLURM_JOB_ID mod 20000.
//   4. RANK and WORLD_SIZE set by anything else (exported by hand, another launcher).
//   5. none of them: the one-rank world.
// A RANK, WORLD_SIZE or LOCAL_RANK set beside an mpirun or Slurm step (2, 3) without a launcher
// of (1) must agree with it: a conflicting environment (a stale `export RANK=...` in a job script)
// is a DistError naming the variables that disagree and their values.
#pragma once

#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace hs::trainer {

/// A rendezvous or process-group problem: names the variable, the peer or the timeout involved.
class DistError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Which launcher's variables DistEnv was read from.
enum class Launcher { kNone, kHybridscope, kTorchrun, kMpirun, kSlurm, kEnvironment };
const char* launcher_name(Launcher launcher);

/// Where this rank sits in the world and how to reach rank 0's store.
struct DistEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int node_rank = 0;                      // the launcher's node (host) index; 0 when it has none
  std::string master_addr = "127.0.0.1";  // loopback unless told otherwise
  int master_port = 29500;
  Launcher launcher = Launcher::kNone;
  /// torchrun (TORCHELASTIC_USE_AGENT_STORE=True): its agent already serves the TCPStore at
  /// MASTER_ADDR:MASTER_PORT, so rank 0 connects to it as a client instead of serving one.
  bool store_served_by_launcher = false;
  /// Prefix for this world's keys in the store: torchrun's agent store outlives worker restarts
  /// ("hs/<run id>/<restart>/"); empty for a store of our own.
  std::string store_prefix;

  /// "rank 3 of 4 (local 1, node 1) under torchrun, store at 10.0.0.1:29500".
  std::string describe() const;
};

/// Reads a variable: nullptr when unset. Empty values count as unset.
using EnvLookup = std::function<const char*(const char*)>;

/// The rank environment from `lookup` (see the precedence above). Throws DistError naming a missing,
/// invalid or conflicting variable (e.g. RANK set without WORLD_SIZE, RANK >= WORLD_SIZE,
/// RANK=1 beside SLURM_PROCID=0).
DistEnv dist_env_from(const EnvLookup& lookup);
/// dist_env_from(getenv).
DistEnv dist_env_from_environment();

/// Slurm's compact host list expanded: "node[01-03,7],gpu-a" -> node01 node02 node03 node7 gpu-a
/// (zero padding kept). Throws DistError naming the list when a bracket is malformed.
std::vector<std::string> expand_slurm_nodelist(const std::string& list);

}  // namespace hs::trainer
