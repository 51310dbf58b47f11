// weight_sync.h — the weight sync (trainer → rollout) of every measured step: its time, the bytes
// it moved, the rate that makes, that rate against the link's bandwidth, and how many syncs the
// step ran. More than one sync per step is a finding of its own (verl #3672: weights synced twice
// per step, the second time for nothing).
//
// A sync is a range named `switch/train_to_rollout` (hybridscope's own switch), `update_weights`
// or `sync_rollout_weights` (verl's names, also what the importer's phase maps give NeMo-RL's
// refit and slime's update). Per rank and step: syncs = such ranges (outermost ones: a sync range
// inside another counts once), seconds = their summed length, bytes =
//   - own runs: the `switches` rows of direction train_to_rollout in the step, their
//     bytes_received (what the reshard executor counted);
//   - otherwise (imported runs): the bytes of the rank's `comm_ops` rows that start inside one of
//     its sync ranges (the NCCL kernels' metadata, docs/importing.md); none there → unknown.
// The step's figures are its busiest rank's (the most bytes; with no bytes, the slowest rank):
// GB/s = its bytes ÷ its sync seconds (1e9 bytes/s), and the wire bound = its bytes ÷ the link's
// bandwidth (the switch analysis' bandwidth: a communication micro-benchmark, a given hardware
// link, or the run's own fastest collective — switch_analysis.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hybridscope/reports/run_data.h"

namespace hs::reports {

/// The range names that are a weight sync.
const std::vector<std::string>& weight_sync_range_names();

struct WeightSyncStep {
  std::int64_t step = 0;
  int syncs = 0;               // the most sync ranges any rank ran in the step
  int rank = 0;                // the busiest rank (most bytes, else the slowest)
  double seconds = 0.0;        // its summed sync time
  std::optional<std::int64_t> bytes;  // its bytes; absent: nothing says (no switch rows, no collectives)
  std::optional<double> gbps;          // bytes / seconds, GB/s
  std::optional<double> wire_bound_s;  // bytes / link bandwidth
  std::optional<double> of_link;       // gbps / link bandwidth
};

struct WeightSyncAnalysis {
  std::vector<WeightSyncStep> steps;   // measured steps with at least one sync, by step
  std::string range_name;              // the sync ranges' name in this run (the first one seen)
  std::string bytes_source;            // "switches" | "collectives inside the sync ranges" | ""
  std::optional<double> link_gbps;     // the bandwidth compared against
  std::string link_source;             // where it came from (switch_analysis' bandwidth_source)
  double median_s = 0.0;               // per step
  std::optional<double> median_bytes;  // per step, over steps with bytes
  std::optional<double> median_gbps;
  std::optional<double> median_of_link;
  int max_syncs = 0;                   // the most syncs in one step
  std::int64_t max_syncs_step = 0;     // the first step with that many
  int steps_with_repeats = 0;          // measured steps with more than one sync
};

/// The weight sync of each of the `measured` steps; `link_gbps` and `link_source` from the switch
/// analysis (absent: no GB/s comparison).
WeightSyncAnalysis weight_sync_analysis(const RunData& data, const std::vector<std::int64_t>& measured,
                                        std::optional<double> link_gbps, const std::string& link_source);

}  // namespace hs::reports
