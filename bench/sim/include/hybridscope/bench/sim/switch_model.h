// switch_model.h — the train->rollout weight switch of the 3D-HybridEngine, costed from the reshard
// planner's own byte counts (trainer/hybrid/reshard_planner.h: reshard_traffic, the walk
// plan_reshard takes), not from a formula copy of HybridFlow's Table 2.
//
// What hybridscope's executor does (reshard_executor.h), and so what is costed:
//   copies each rank first copies the pieces it keeps and packs what does not move directly
//          (RankTraffic::packed_bytes_sent: pieces below kDirectMinElements or not contiguous on
//          both sides); after its last message it unpacks its packed buffers, (vanilla, naive)
//          slices its generation shard out of the full tensors, and installs the generation shard
//          into the rollout model's parameters (a copy of generation_bytes): every byte read and
//          written once at the device's memory bandwidth × switch_copy efficiency.
//   wire   then every rank posts all its sends and receives at once (Communicator::exchange).
//          A rank's receives start when it and all its senders have posted; its link carries
//          max(bytes sent, bytes received) at each link level (same node: intra, else inter),
//          the levels side by side, costed as one send_recv of that size by the calibrated
//          alpha-beta model — the calibration's send_recv is nccl-tests' sendrecv, where every
//          rank sends and receives at once (bench/micro/comm_bench.cpp).
//   end    the switch ends when the slowest rank's copies, wire and unpacking end, plus the
//          executor's closing barrier (c10d's barrier over the world: costed as a 4-byte
//          all-reduce, a round of the smallest messages).
//   none   when no rank's generation shard differs from its training shard the trainer makes no
//          executor (hybrid_actor.cpp): the switch moves and copies nothing.
// rollout->train moves nothing (the planner's rollout->train direction): not costed. The KV
// pool's allocation inside the switch is the step model's (step_model.h, kv_allocate).
#pragma once

#include <cstdint>

#include "hybridscope/bench/sim/comm_calibration.h"
#include "hybridscope/trainer/hybrid/reshard_planner.h"

namespace hs::bench::sim {

struct SwitchTimes {
  double wire_s = 0;   // the critical rank's wire time (after it and its senders posted)
  double copy_s = 0;   // the critical rank's copies (before posting and after the last message)
  double barrier_s = 0;  // the closing barrier
  double train_to_rollout_s = 0;
  int critical_rank = 0;                   // the rank whose copies + wire end last
  std::int64_t max_bytes_received = 0;     // over ranks
  std::int64_t max_peak_parameter_bytes = 0;  // assembled ∪ training shard, over ranks
  std::int64_t max_redundant_bytes = 0;    // training bytes kept through rollout, over ranks
};

/// Costs `traffic` (reshard_traffic of the layouts) for ranks placed `ranks_per_node` to a node in
/// rank order. `device_share`: rank processes per device (copies run that much slower); `copy_bandwidth`
/// bytes/s a rank's copies reach at full device (bandwidth × efficiency).
SwitchTimes cost_switch(const trainer::ReshardTraffic& traffic, const CommCalibration& comm, int ranks_per_node,
                        double device_share, double copy_bandwidth);

}  // namespace hs::bench::sim
