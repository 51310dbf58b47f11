// comm_calibration.h — one alpha-beta pair per (collective, link level), fitted from measured
// collectives (hs_comm_bench's JSON) where there are measurements and taken from the hardware
// description's links where there are none; and the check of a calibration on measurements it was
// not fitted to (mean absolute percentage error per collective).
//
// Why per collective: Gloo's (and NCCL's tree) algorithms are not the ring of comm_model.h, so one
// link's alpha and beta predict them badly (56 % mean error on this machine's JSON with one pair
// shared by all ops, 14–39 % with one pair per op; docs/simulator.md). Fitting each collective
// folds its algorithm's constants into its own alpha and beta.
//
// Where the measurements cover a group size, the measured times themselves serve it (a curve
// per (collective, level, group size), interpolated in bytes): Gloo on a shared-core machine
// leaves the alpha-beta line (a 64 MiB all-gather costs 8-10x a 16 MiB one once the buffers leave
// the last-level cache, 4-rank groups on 2 cores pay the time slicing), and the cells a projection
// is validated on run at the measured group sizes. Other group sizes (a projection to 8, 16, …
// ranks) use the per-collective alpha-beta fit.
//
// Not here: contention between concurrent groups, message-size-dependent algorithm switches
// (NCCL's tree below a threshold, ring above) beyond what a measured curve shows.
#pragma once

#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "hybridscope/bench/sim/comm_model.h"
#include "hybridscope/bench/sim/hardware.h"

namespace hs::bench::sim {

/// Measured collectives of one link level. hs_comm_bench starts every rank on one host, so its
/// samples are all intra-node; inter-node samples need a run across nodes.
struct LinkSamples {
  LinkLevel level = LinkLevel::kIntraNode;
  std::vector<CommSample> samples;
};

/// (collective, link level) -> AlphaBeta: fitted where calibrate_comm had samples, the hardware
/// file's link otherwise.
class CommCalibration {
 public:
  /// Nothing fitted: every collective at the hardware's links.
  explicit CommCalibration(HardwareSpec hardware);

  /// The fitted pair for (op, level), or the hardware's link (latency_s, bandwidth_bytes_per_s).
  AlphaBeta alpha_beta(Collective op, LinkLevel level) const noexcept;
  /// The fit behind alpha_beta(op, level); nullptr where it falls back to the hardware.
  const AlphaBetaFit* fit(Collective op, LinkLevel level) const noexcept;
  /// Seconds for `op` of nccl-tests' `bytes` over `n` consecutive ranks at the level from the group
  /// size and the hardware's devices_per_node (link_level_for_group): the measured curve of (op,
  /// level, n) where there is one (measured_seconds), else comm_model's formula with alpha_beta.
  double seconds(Collective op, int n, double bytes) const noexcept;
  /// The same at a given level (a strided group: step_model's link_level_for_strided_group). An
  /// inter-node collective costs at least the intra-node one of the same group and size: the same
  /// stack plus the network.
  double seconds(Collective op, int n, double bytes, LinkLevel level) const noexcept;

  /// A collective called between bursts of compute (tensor-parallel generation's): the in-situ
  /// curve of (op, level, n) where hs_comm_bench measured one (BM_<Op>InSitu: the call right after
  /// each rank computed, the ranks' skew included), else seconds(). `processes`: the ranks that
  /// compute on the group's node meanwhile (more than n where several groups share it): the curve
  /// measured with that many (BM_<Op>InSituPairs), else the group's own.
  double seconds_in_situ(Collective op, int n, double bytes, LinkLevel level, int processes = 0) const noexcept;

  /// A measured curve: (bytes, seconds) ascending in bytes, one point per distinct size (the mean
  /// of that size's samples).
  using Curve = std::vector<std::pair<double, double>>;
  /// The curve of (op, level, n), or nullptr (fewer than two measured sizes at that group size).
  const Curve* curve(Collective op, LinkLevel level, int n) const noexcept;
  /// Seconds read off a curve: linear between the two measured sizes around `bytes`; below the
  /// smallest size that size's time (latency dominates there: a smaller message is not slower);
  /// above the largest, the last segment's slope continued.
  static double measured_seconds(const Curve& curve, double bytes) noexcept;

  const HardwareSpec& hardware() const noexcept { return hardware_; }
  /// Why a measured (op, level) kept the hardware's link (a fit that failed: its SimError text).
  const std::vector<std::string>& fallback_reasons() const noexcept { return fallback_reasons_; }

  void set_fit(Collective op, LinkLevel level, const AlphaBetaFit& fit);
  /// Keeps `samples`' curve for (op, level, n) (samples of other ops or sizes ignored); needs two
  /// distinct message sizes, else nothing is kept.
  void set_curve(Collective op, LinkLevel level, int n, const std::vector<CommSample>& samples);
  /// The same for the in-situ samples of (op, n) measured among `processes` ranks
  /// (CommSample::in_situ, CommSample::processes), read by seconds_in_situ.
  void set_in_situ_curve(Collective op, LinkLevel level, int n, int processes, const std::vector<CommSample>& samples);
  void add_fallback_reason(std::string reason) { fallback_reasons_.push_back(std::move(reason)); }

 private:
  HardwareSpec hardware_;
  std::map<std::pair<Collective, LinkLevel>, AlphaBetaFit> fits_;
  std::map<std::tuple<Collective, LinkLevel, int>, Curve> curves_;
  std::map<std::tuple<Collective, LinkLevel, int, int>, Curve> in_situ_curves_;  // (op, level, n, processes)
  std::vector<std::string> fallback_reasons_;
};

/// Fits one AlphaBeta per (collective, level) present in `measured` (fit_alpha_beta over all its
/// group sizes and message sizes) and keeps each (collective, level, group size)'s curve; in-situ
/// samples only make in-situ curves. A group whose fit fails (one message size, time falling with
/// size) keeps the hardware's link and its reason is kept in fallback_reasons().
CommCalibration calibrate_comm(const HardwareSpec& hardware, const std::vector<LinkSamples>& measured,
                               FitWeighting weighting = FitWeighting::kRelative);

/// Disjoint subsets of the samples by message size: the distinct sizes sorted ascending, sizes at
/// even positions (0, 2, …) go to `fit`, odd positions to `check`. On hs_comm_bench's sweep
/// 4 KiB·4^k: fit on 4 KiB, 64 KiB, 1 MiB, 16 MiB; check on 16 KiB, 256 KiB, 4 MiB, 64 MiB.
struct SampleSplit {
  std::vector<CommSample> fit;
  std::vector<CommSample> check;
};
SampleSplit split_by_message_size(const std::vector<CommSample>& samples);

/// A calibration's error on one collective's samples at one level.
struct CollectiveError {
  Collective op = Collective::kAllReduce;
  LinkLevel level = LinkLevel::kIntraNode;
  int samples = 0;
  bool fitted = false;                // false: predicted with the hardware's link (no fit for it)
  double mean_abs_pct_error = 0.0;    // 100 · mean |predicted − measured| / measured
};

/// Per collective (in Collective's order), the mean absolute percentage error of `calibration`
/// on `check` (samples of `level`, e.g. split_by_message_size's check half): each predicted with
/// alpha_beta(op, level) at the sample's group size.
std::vector<CollectiveError> prediction_error(const CommCalibration& calibration, LinkLevel level,
                                              const std::vector<CommSample>& check);

}  // namespace hs::bench::sim
