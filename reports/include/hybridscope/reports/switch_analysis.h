// switch_analysis.h — the weight switch (3D-HybridEngine resharding) against what it had to do:
// per direction, the slowest rank's time per switch (NeMo-RL's refit latency), its components
// (docs/schema.md `switch_components`), and its lower bound on the wire: the bytes the busiest
// receiver took ÷ the measured bus bandwidth of the link. "The switch moved 51 MiB in 372 ms; the
// wire needs 60 ms; 84 % of it is packing and waiting."
//
// The bandwidth comes, in this order, from the communication micro-benchmarks (hs_comm_bench's
// JSON, docs/benchmarks.md) at the run's world size — the highest bus bandwidth any collective
// reached there, so that the bound is a true lower bound — or from the run's own collectives (the
// highest busbw of an all-reduce, all-gather, reduce-scatter or broadcast of at least 1 MiB; sends
// are timed while posted, not while delivered), and is named in `bandwidth_source`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hybridscope/reports/run_data.h"

namespace hs::reports {

/// One measured point of a communication micro-benchmark.
struct LinkMeasurement {
  std::string op;  // all_gather, all_reduce, reduce_scatter, broadcast, send_recv, ...
  int ranks = 0;
  std::int64_t bytes = 0;
  double busbw_gbps = 0.0;  // GB/s (1e9 bytes/s), nccl-tests factors
};

/// Reads hs_comm_bench's Google Benchmark JSON (`out/comm-bench.json`). Throws std::runtime_error
/// naming the file and what is wrong when it is not such a file.
std::vector<LinkMeasurement> load_comm_bench(const std::string& path);

/// One switch (one step, one direction), over its ranks.
struct SwitchEvent {
  std::int64_t step = 0;
  std::string direction;
  double seconds = 0.0;     // the slowest rank's
  int slowest_rank = 0;
  std::int64_t max_bytes_received = 0;  // the busiest receiver's bytes
  std::int64_t total_bytes_received = 0;
  std::optional<double> wire_bound_s;   // max_bytes_received / bandwidth
};

struct SwitchDirectionSummary {
  std::string direction;  // train_to_rollout | rollout_to_train
  int switches = 0;       // measured
  double median_s = 0.0;  // of the per-switch slowest rank
  double max_s = 0.0;
  std::int64_t median_max_bytes_received = 0;
  std::optional<double> wire_bound_s;  // median over switches
  std::optional<double> over_bound;    // median_s / wire_bound_s
  /// Mean seconds per component on the slowest rank of each switch, in execution order; the
  /// remainder of the switch (time not inside any component) is "unaccounted".
  std::vector<std::pair<std::string, double>> components_s;
  double unaccounted_s = 0.0;
};

struct SwitchAnalysis {
  std::optional<double> bandwidth_gbps;  // GB/s used for the bounds; absent: no bound
  std::string bandwidth_source;          // "comm-bench all_gather 4 ranks 64 MiB" / "run's own all_reduce"
  std::vector<SwitchEvent> events;       // measured steps, by step then direction
  std::vector<SwitchDirectionSummary> directions;
  std::string headline;  // the sentence above, for the slower direction; empty without switches
};

/// The switch analysis over the `measured` steps. `links` may be empty (then the run's own
/// collectives give the bandwidth, or no bound is given).
SwitchAnalysis switch_analysis(const RunData& data, const std::vector<std::int64_t>& measured,
                               const std::vector<LinkMeasurement>& links = {});

}  // namespace hs::reports
