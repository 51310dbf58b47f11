// probe_math.cpp — the pure arithmetic of the probes: nccl-tests' bus-bandwidth factors, the
// algorithm bandwidth of a collective and the memory probe's fragmentation ratios (declared in
// recorder.h). No state, no I/O, no SQLite: the writer calls these when it stores a record, tests
// call them against values worked out by hand.
#include <cmath>
#include <cstring>
#include <limits>

#include "hybridscope/probes/recorder.h"

namespace hs::probes {

double bus_bandwidth_factor(const char* op, int n) noexcept {
  if (!op || n <= 0) return 0.0;
  const double ranks = static_cast<double>(n);
  auto is = [op](const char* name) { return std::strcmp(op, name) == 0; };
  if (is("all_reduce")) return 2.0 * (ranks - 1.0) / ranks;
  if (is("all_gather") || is("reduce_scatter") || is("all_to_all")) return (ranks - 1.0) / ranks;
  if (is("broadcast") || is("reduce") || is("send") || is("recv")) return 1.0;
  return 0.0;  // barrier moves no payload; unknown ops claim no bus bandwidth
}

double algorithm_bandwidth_gbps(std::int64_t bytes, std::int64_t start_ns, std::int64_t end_ns) noexcept {
  if (end_ns <= start_ns) return std::numeric_limits<double>::quiet_NaN();
  // bytes / ns == GB/s (1e9 bytes per second).
  return static_cast<double>(bytes) / static_cast<double>(end_ns - start_ns);
}

FragmentationRatios fragmentation(const MemorySample& m) noexcept {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  FragmentationRatios f{nan, nan, nan};
  if (m.reserved_bytes > 0) {
    const double reserved = static_cast<double>(m.reserved_bytes);
    if (m.allocated_bytes >= 0) f.reserved_slack = 1.0 - static_cast<double>(m.allocated_bytes) / reserved;
    if (m.inactive_split_bytes >= 0) f.split_fragmentation = static_cast<double>(m.inactive_split_bytes) / reserved;
    if (m.active_bytes >= 0 && m.largest_free_block_bytes >= 0 && m.reserved_bytes > m.active_bytes)
      f.external_fragmentation =
          1.0 - static_cast<double>(m.largest_free_block_bytes) / static_cast<double>(m.reserved_bytes - m.active_bytes);
  }
  return f;
}

}  // namespace hs::probes
