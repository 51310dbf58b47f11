// switch_model.h — the train->rollout weight switch of the 3D-HybridEngine, costed from the reshard
// planner's own byte counts (trainer/hybrid/reshard_planner.h: reshard_traffic, the walk
// plan_reshard takes), not from a formula copy of HybridFlow's Table 2.
//
// What hybridscope's executor does (reshard_executor.h), and so what is costed:
//   wire   every unordered rank pair (a, b), a < b, in ascending global order: a sends its pieces
//          for b, then receives b's (each rank walks its pairs in that order, so a pair starts when
//          both ranks finished their earlier pairs). The list schedule of those pairs is computed
//          exactly; one pair costs send_recv(bytes a→b) + send_recv(bytes b→a) by the calibrated
//          alpha-beta model at the pair's link level (same node: intra, else inter).
//   copies each rank packs what it sends, unpacks what it receives, copies what it keeps, and
//          (vanilla, naive) slices its generation shard out of the full tensors: every byte read
//          and written once at the device's memory bandwidth × switch_copy efficiency, after its
//          pairs (the switch ends when the slowest rank's pairs and copies end).
//   none   when no rank's generation shard differs from its training shard the trainer makes no
//          executor (hybrid_actor.cpp): the switch moves and copies nothing.
// rollout->train moves nothing (the planner's rollout->train direction): not costed. The KV
// cache's allocation inside the switch (a few ms on CPU) is not modelled.
#pragma once

#include <cstdint>

#include "hybridscope/bench/sim/comm_calibration.h"
#include "hybridscope/trainer/hybrid/reshard_planner.h"

namespace hs::bench::sim {

struct SwitchTimes {
  double wire_s = 0;   // the pair schedule's length
  double copy_s = 0;   // the critical rank's copies
  double train_to_rollout_s = 0;
  int critical_rank = 0;                   // the rank whose pairs + copies end last
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
