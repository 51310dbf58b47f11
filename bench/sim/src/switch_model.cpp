// switch_model.cpp — the executor's pair schedule and copies over the planner's byte counts
// (switch_model.h).
#include "hybridscope/bench/sim/switch_model.h"

#include <algorithm>
#include <vector>

namespace hs::bench::sim {

namespace {

// Bytes `from` sends `to` (0 when none): `to`'s received_from is sorted by peer.
std::int64_t bytes_between(const trainer::ReshardTraffic& traffic, int from, int to) {
  const auto& in = traffic.ranks[static_cast<std::size_t>(to)].received_from;
  const auto it = std::lower_bound(in.begin(), in.end(), std::make_pair(from, std::int64_t{0}),
                                   [](const auto& a, const auto& b) { return a.first < b.first; });
  return it != in.end() && it->first == from ? it->second : 0;
}

}  // namespace

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

  // The pairs in global order; a pair starts when both ranks are free.
  std::vector<double> free_at(static_cast<std::size_t>(world), 0.0);
  const int node = std::max(1, ranks_per_node);
  for (int a = 0; a < world; ++a) {
    // Peers of a above it that exchange anything, ascending: sent_to ∪ received_from.
    const auto& sends = traffic.ranks[static_cast<std::size_t>(a)].sent_to;
    const auto& recvs = traffic.ranks[static_cast<std::size_t>(a)].received_from;
    std::vector<int> peers;
    for (const auto& [p, bytes] : sends)
      if (p > a) peers.push_back(p);
    for (const auto& [p, bytes] : recvs)
      if (p > a) peers.push_back(p);
    std::sort(peers.begin(), peers.end());
    peers.erase(std::unique(peers.begin(), peers.end()), peers.end());
    for (const int b : peers) {
      const LinkLevel level = a / node == b / node ? LinkLevel::kIntraNode : LinkLevel::kInterNode;
      double d = 0;
      if (const auto x = bytes_between(traffic, a, b)) d += comm.seconds(Collective::kSendRecv, 2, static_cast<double>(x), level);
      if (const auto x = bytes_between(traffic, b, a)) d += comm.seconds(Collective::kSendRecv, 2, static_cast<double>(x), level);
      const double start = std::max(free_at[static_cast<std::size_t>(a)], free_at[static_cast<std::size_t>(b)]);
      free_at[static_cast<std::size_t>(a)] = free_at[static_cast<std::size_t>(b)] = start + d;
    }
  }
  const bool slices = traffic.mode != trainer::ReshardMode::kHybrid;
  double end = -1;
  for (int r = 0; r < world; ++r) {
    const auto& t = traffic.ranks[static_cast<std::size_t>(r)];
    const double copied = static_cast<double>(t.bytes_local + t.bytes_sent + t.bytes_received) +
                          (slices ? static_cast<double>(t.generation_bytes) : 0.0);
    const double copy_s = device_share * 2.0 * copied / copy_bandwidth;  // read + write
    if (free_at[static_cast<std::size_t>(r)] + copy_s > end) {
      end = free_at[static_cast<std::size_t>(r)] + copy_s;
      out.critical_rank = r;
      out.copy_s = copy_s;
      out.wire_s = free_at[static_cast<std::size_t>(r)];
    }
  }
  out.train_to_rollout_s = end;
  return out;
}

}  // namespace hs::bench::sim
