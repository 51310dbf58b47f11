// comm_model.h — the alpha-beta model of the collectives the trainer uses, per link level and
// ring algorithm, and its least-squares fit from measured (bytes, seconds) pairs such as
// hs_comm_bench's JSON (out/comm-bench.json).
//
// One point-to-point step of b bytes costs alpha + b/beta. A ring collective over n ranks takes
// latency_steps(op, n) steps and moves bus_factor(op, n) · bytes through each rank's link, where
// `bytes` is nccl-tests' size (all_gather's output, reduce_scatter's input, the tensor otherwise)
// and the bus factor is nccl-tests' (probes::bus_bandwidth_factor, profiling-facts.md):
//
//   all_reduce      2(n−1)·alpha + 2(n−1)/n · bytes/beta   (ring reduce-scatter + all-gather)
//   all_gather,
//   reduce_scatter,
//   all_to_all       (n−1)·alpha +  (n−1)/n · bytes/beta
//   broadcast        (n−1)·alpha +            bytes/beta   (pipelined chain, NCCL's ring broadcast)
//   send_recv             alpha  +            bytes/beta
//
// Not here (yet): tree and hierarchical (intra-node reduce, inter-node ring) algorithms, and
// contention between concurrent groups; a group that leaves its node runs at the inter-node
// link's alpha and beta (a flat ring is as slow as its slowest hop).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hybridscope/bench/sim/hardware.h"

namespace hs::bench::sim {

enum class Collective { kAllReduce, kAllGather, kReduceScatter, kAllToAll, kBroadcast, kSendRecv };

/// The recorder's names (comm_ops): "all_reduce", "all_gather", "reduce_scatter", "all_to_all",
/// "broadcast", "send" (a send/recv pair). collective_from_name also takes "recv" and "send_recv".
const char* collective_name(Collective op) noexcept;
std::optional<Collective> collective_from_name(std::string_view name) noexcept;

/// Point-to-point cost of one step: alpha_s + bytes / beta_bytes_per_s.
struct AlphaBeta {
  double alpha_s = 0.0;
  double beta_bytes_per_s = 0.0;
};

/// Sequential steps of the ring algorithm (the alpha term's multiplier); 0 for n <= 1.
double latency_steps(Collective op, int n) noexcept;
/// nccl-tests' bus factor (busbw = algbw × factor): the beta term's multiplier on bytes; 0 for n <= 1.
double bus_factor(Collective op, int n) noexcept;

/// Seconds for one collective of nccl-tests' `bytes` over `n` ranks on links of `link`.
double collective_seconds(Collective op, int n, double bytes, const AlphaBeta& link) noexcept;

/// The level a group of `n` consecutive ranks runs at: inside one node when it fits in one.
LinkLevel link_level_for_group(int n, int devices_per_node) noexcept;

/// Seconds on `hw`: the group's link level (link_level_for_group) gives alpha and beta.
double collective_seconds(const HardwareSpec& hw, Collective op, int n, double bytes) noexcept;

/// One measurement: a collective of nccl-tests' `bytes` over `group_size` ranks took `seconds`.
struct CommSample {
  Collective op = Collective::kAllReduce;
  int group_size = 2;
  double bytes = 0.0;
  double seconds = 0.0;
  bool in_situ = false;  // timed right after each rank computed (hs_comm_bench's BM_<Op>InSitu)
  // Ranks computing on the node while it was timed: 0 = the group's own (group_size);
  // hs_comm_bench's BM_<Op>InSituPairs: 2-rank groups among all of a larger world's ranks.
  int processes = 0;
};

enum class FitWeighting {
  kRelative,  // minimise Σ((model − t)/t)²: small messages (which pin alpha) weigh as much as big ones
  kAbsolute,  // minimise Σ(model − t)²: dominated by the largest messages
};

struct AlphaBetaFit {
  AlphaBeta params;
  int samples = 0;
  /// The unconstrained fit gave alpha < 0 (measurements with no visible latency); alpha was fixed
  /// at 0 and beta refitted alone.
  bool alpha_clamped = false;
  double mean_abs_pct_error = 0.0;  // 100 · mean |model − t| / t over the samples
};

/// Least-squares alpha and beta shared by all `samples` (filter by op or link first to fit each
/// separately): t ≈ latency_steps·alpha + bus_factor·bytes·(1/beta), linear in (alpha, 1/beta).
/// Throws SimError with the fix when the samples cannot determine both (fewer than two, one size
/// only, a non-positive time) or the bandwidth term comes out non-positive.
AlphaBetaFit fit_alpha_beta(const std::vector<CommSample>& samples, FitWeighting weighting = FitWeighting::kRelative);

/// hs_comm_bench's Google Benchmark JSON, as samples.
struct CommBenchData {
  std::vector<CommSample> samples;      // one per iteration-run row of a known collective
  std::vector<std::string> skipped;     // names of rows that are not (aggregates, unknown benchmarks)
};

/// Parses the JSON text of hs_comm_bench (out/comm-bench.json): rows BM_<Op>/ranks:N/bytes:B with
/// counters `bytes` and `group_size`, real_time in time_unit. A sample's time is real_time, the
/// mean iteration (what a phase of many calls pays per call); the `median_s` counter is not read.
/// `origin` names it in messages.
CommBenchData parse_comm_bench_json(const std::string& json_text, const std::string& origin);
CommBenchData read_comm_bench_json(const std::string& path);

/// hs_comm_bench's passes merged into its one report. Every pass runs the whole suite once; on a
/// shared machine a pass can land in a window where the host runs it several times slower
/// (2026-11-28 here: 2-rank exchanges 4-6x slow for about 20 s, in about 1 run in 10), and one
/// pass alone would calibrate the simulator on that window.
struct CommBenchPasses {
  std::string json;  // one Google Benchmark report: per benchmark the row of its median pass
  int passes = 0;
  std::size_t benchmarks = 0;  // rows in `json`
  double median_spread = 1.0;  // over benchmarks, the median of (slowest / fastest pass's real_time)
  double widest_spread = 1.0;  // the largest of them, and its benchmark
  std::string widest;
};

/// `reports`: the JSON texts of Google Benchmark reports, every benchmark name in the same number
/// of them (the passes; different group sizes are different names). Per name the row whose
/// real_time is the median of its passes' (an even count: the lower middle), in the order the
/// names first appear, with counters `passes` and `pass_spread` (slowest / fastest real_time)
/// added; the first report's context with `passes`. Throws SimError naming the benchmark a pass
/// is missing, or a report that is not such JSON (`origin` names them in messages).
CommBenchPasses merge_comm_bench_passes(const std::vector<std::string>& reports, const std::string& origin);

}  // namespace hs::bench::sim
