// switch_model.cpp — the executor's concurrent exchange and copies over the planner's byte counts
// (switch_model.h).
#include "hybridscope/bench/sim/switch_model.h"

#include <algorithm>
#include <array>
#include <vector>

namespace hs::bench::sim {

SwitchTimes cost_switch(const trainer::ReshardTraffic& traffic, const CommCalibration& comm, int ranks_per_node,
                        double device_share, double copy_bandwidth) {
  SwitchTimes out;
  const int world = static_cast<int>(traffic.ranks.size());
  bool differs = false;
  for (const auto& r : traffic.ranks) {
    out.max_bytes_received = std::max(out.max_bytes_received, r.bytes_received);
    out.max_peak_parameter_bytes = std::max(out.max_peak_parameter_bytes, r.peak_parameter_bytes);
    out.max_redundant_bytes = std::max(out.max_redundant_bytes, r.redundant_bytes);
    differs = differs || r.bytes_received > 0 || r.redundant_bytes > 0 || r.generation_bytes != r.training_bytes;
  }
  if (!differs) return out;

  const int node = std::max(1, ranks_per_node);
  const bool slices = traffic.mode != trainer::ReshardMode::kHybrid;
  auto copy_seconds = [&](double bytes) { return device_share * 2.0 * bytes / copy_bandwidth; };  // read + write
  // Each rank's copies before it posts: its kept pieces and its packed send buffers.
  std::vector<double> posted(static_cast<std::size_t>(world));
  for (int r = 0; r < world; ++r) {
    const auto& t = traffic.ranks[static_cast<std::size_t>(r)];
    posted[static_cast<std::size_t>(r)] = copy_seconds(static_cast<double>(t.bytes_local + t.packed_bytes_sent));
  }
  double end = -1;
  for (int r = 0; r < world; ++r) {
    const auto& t = traffic.ranks[static_cast<std::size_t>(r)];
    // Every message of every rank is in flight at once: the rank's link carries what it sends and
    // what it receives at each level together, as in nccl-tests' sendrecv, whose bus bandwidth the
    // calibration's send_recv is; the levels run side by side. Its receives start when it and
    // its senders have posted.
    std::array<double, 2> sent{}, received{};  // intra-node, inter-node
    double start = posted[static_cast<std::size_t>(r)];
    for (const auto& [peer, bytes] : t.sent_to) sent[peer / node == r / node ? 0 : 1] += static_cast<double>(bytes);
    for (const auto& [peer, bytes] : t.received_from) {
      received[peer / node == r / node ? 0 : 1] += static_cast<double>(bytes);
      start = std::max(start, posted[static_cast<std::size_t>(peer)]);
    }
    // Within a node its ranks all exchange at once: the sendrecv of that many ranks (what a measured
    // curve of that group size holds: on a shared-core machine 4 ranks' exchange is slower per byte
    // than 2's; the alpha-beta formula of a send/recv does not depend on the group size).
    const int node_exchanging = std::max(2, std::min(world, node));
    double wire = 0;
    for (const int level : {0, 1}) {
      const double bytes = std::max(sent[static_cast<std::size_t>(level)], received[static_cast<std::size_t>(level)]);
      if (bytes > 0)
        wire = std::max(wire, level == 0 ? comm.seconds(Collective::kSendRecv, node_exchanging, bytes, LinkLevel::kIntraNode)
                                         : comm.seconds(Collective::kSendRecv, 2, bytes, LinkLevel::kInterNode));
    }
    // After the last message: its packed buffer's unpacking, (vanilla, naive) the slice of the
    // generation shard out of the full tensors, and the install: the rollout model's parameters
    // take the generation shard, one more copy of its bytes (hybrid_actor.cpp, reshard_install).
    const double after = copy_seconds(static_cast<double>(t.packed_bytes_received) +
                                      (slices ? static_cast<double>(t.generation_bytes) : 0.0) +
                                      static_cast<double>(t.generation_bytes));
    if (start + wire + after > end) {
      end = start + wire + after;
      out.critical_rank = r;
      out.copy_s = posted[static_cast<std::size_t>(r)] + after;
      out.wire_s = wire;
    }
  }
  out.barrier_s = comm.seconds(Collective::kAllReduce, world, 4.0,
                               world > node ? LinkLevel::kInterNode : LinkLevel::kIntraNode);
  out.train_to_rollout_s = end + out.barrier_s;
  return out;
}

}  // namespace hs::bench::sim
