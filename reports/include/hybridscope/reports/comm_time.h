// comm_time.h — how long each rank spent in collectives: the one definition behind the matrix
// summary's `comm_share`, the report and the viewer's Comm page.
//
// Summed durations are not wall time (profiling-facts, "Diagnosis pitfalls"): a rank runs the
// reshard exchange's point-to-point calls concurrently and keeps fsdp's asynchronous gathers and
// reduce-scatters in flight while it computes (174 at once on one rank of the demo: 24.0 s summed
// over 0.20 s of wall time). A rank's communication time is therefore the UNION of its
// collectives' intervals (comm_ops start..end), measured within its measured `step` ranges; a
// collective belongs to the step whose range it starts in (StepWindows, run_data.h). Its share of
// the step is that union over the rank's step time, so it lies in [0, 1].
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "hybridscope/reports/run_data.h"

namespace hs::reports {

/// One rank's collectives over the measured steps.
struct RankCommTime {
  int rank = 0;
  std::int64_t comm_ns = 0;   // |∪ its collectives| within its measured step ranges
  std::int64_t steps_ns = 0;  // Σ its measured step ranges
  std::map<std::string, std::int64_t> group_ns;  // process group -> |∪ that group's collectives|, same window
  /// comm_ns / steps_ns, in [0, 1]; 0 without a step range.
  double share() const { return steps_ns > 0 ? static_cast<double>(comm_ns) / static_cast<double>(steps_ns) : 0.0; }
};

struct CommTime {
  std::vector<RankCommTime> ranks;  // by rank; only ranks with a measured step range
  /// The mean over ranks of each rank's share: the run's `comm_share`. nullopt without a rank, and
  /// for an imported run whose source carried no collective (unknown, not 0).
  std::optional<double> mean_share;
};

/// Each rank's time in collectives over `measured` steps (union of intervals, see above).
CommTime comm_time(const RunData& data, const std::vector<std::int64_t>& measured);

/// Per rank, the union of the intervals of the collectives `select` keeps, within the rank's
/// measured step ranges (ns; a rank without step ranges: its collectives numbered with a measured
/// step, unclipped). What comm_time() measures, for any subset (one op on one group: the
/// viewer's Comm table).
std::map<int, std::int64_t> collective_union_ns(const RunData& data, const std::vector<std::int64_t>& measured,
                                                const std::function<bool(const CommOpRow&)>& select);

}  // namespace hs::reports
