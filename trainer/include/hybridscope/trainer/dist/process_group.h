// process_group.h — real process groups: c10d Gloo (CPU tensors) and NCCL (CUDA tensors) behind
// the Communicator/GroupFactory interface of parallel.h, and the rendezvous that builds them from
// the rank environment (dist_env.h: hybridscope launch, torchrun, srun, mpirun) over one
// c10d::TCPStore served by rank 0 on MASTER_ADDR only (or by torchrun's agent).
//
// Every collective waits for its c10d work (`work->wait()`) before returning, so the
// communication probe (ProbedCommunicator) in front of it times complete operations; a collective
// that a peer never joins fails after the configured timeout instead of hanging.
//
// Deliberately free of c10d headers (they pull in Gloo's): the c10d objects live in
// process_group.cpp.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "hybridscope/trainer/dist/dist_env.h"
#include "hybridscope/trainer/dist/parallel.h"

namespace hs::probes {
class RunProbes;
}

namespace hs::trainer {

enum class DistBackend { kGloo, kNccl };

struct ProcessGroupOptions {
  DistBackend backend = DistBackend::kGloo;
  /// Rendezvous (store connect and key waits) and every collective fail after this long.
  std::chrono::milliseconds timeout{std::chrono::seconds(300)};
  /// Gloo groups whose ranks share one host: blocking CPU all-reduces and all-gathers of up to this
  /// many bytes, and barriers, go through shared memory instead (shm_collectives.h in src/dist);
  /// 0: Gloo for all.
  std::int64_t shm_bytes = 1 << 20;
};

/// Every rank's estimate of rank 0's monotonic clock, made at the rendezvous (Cristian's algorithm:
/// of 16 timestamp exchanges with rank 0, the one with the shortest round trip). A rank on another
/// host than rank 0 (another boot: /proc/sys/kernel/random/boot_id differs) has another
/// CLOCK_MONOTONIC; the trainer shifts its probes' clock by offset_ns (probes::set_clock_shift_ns)
/// so that all records share rank 0's timeline, within ± error_ns.
struct ClockSync {
  std::int64_t offset_ns = 0;  // rank 0's clock minus this rank's (0 on rank 0)
  std::int64_t error_ns = 0;   // half the round trip of the exchange used
  bool same_host = true;       // booted with rank 0: one clock, the estimate's true value is 0
};

/// The groups of one world over c10d. Construction is the rendezvous: rank 0 serves the TCPStore,
/// every rank connects and the world group is formed. Each group gets its own PrefixStore over
/// the one TCPStore ("group/<n>/", n counting new_group calls, which every rank makes in the same
/// order — c10d's rule). Given `probes` (non-null, outliving the factory) every communicator is
/// wrapped in a ProbedCommunicator, so every collective lands in comm_ops under the current step.
class C10dGroupFactory final : public GroupFactory {
 public:
  C10dGroupFactory(const DistEnv& env, ProcessGroupOptions options, const probes::RunProbes* probes = nullptr);
  ~C10dGroupFactory() override;
  C10dGroupFactory(const C10dGroupFactory&) = delete;
  C10dGroupFactory& operator=(const C10dGroupFactory&) = delete;

  std::shared_ptr<Communicator> world() override;
  std::shared_ptr<Communicator> new_group(const std::vector<int>& ranks, const std::string& name) override;

  const DistEnv& env() const;
  /// Every world rank's host as the rendezvous exchanged it ("name address"; the name alone on
  /// loopback), indexed by world rank.
  const std::vector<std::string>& hosts() const;
  /// This rank's estimate of rank 0's clock, made when the world was formed.
  const ClockSync& clock_sync() const;
  /// Groups made from now on are wrapped in a ProbedCommunicator recording through `probes`
  /// (null: unprobed). For a trainer that needs the world before its rank's database is open.
  void set_probes(const probes::RunProbes* probes);

  /// A world of its own for the ranks `ranks` (ascending world ranks) — a resource pool of a split
  /// placement: its world group is named `name`, its rank i is ranks[i], and the groups it makes
  /// involve only its members (no call by ranks outside it), over the same TCPStore under the
  /// prefix "pool/<name>/". Not collective: each member calls it; others get nullptr. Groups made
  /// by the returned factory are probed as this factory's are (set_probes first).
  std::unique_ptr<C10dGroupFactory> sub_world(const std::vector<int>& ranks, const std::string& name);

 private:
  struct Impl;
  explicit C10dGroupFactory(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace hs::trainer
