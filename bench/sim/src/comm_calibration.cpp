// comm_calibration.cpp — per-collective alpha-beta calibration and its held-out check
// (see comm_calibration.h).
#include "hybridscope/bench/sim/comm_calibration.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

namespace hs::bench::sim {

namespace {

constexpr Collective kAllCollectives[] = {Collective::kAllReduce,     Collective::kAllGather,
                                          Collective::kReduceScatter, Collective::kAllToAll,
                                          Collective::kBroadcast,     Collective::kSendRecv};

}  // namespace

CommCalibration::CommCalibration(HardwareSpec hardware) : hardware_(std::move(hardware)) {}

AlphaBeta CommCalibration::alpha_beta(Collective op, LinkLevel level) const noexcept {
  if (const AlphaBetaFit* f = fit(op, level)) return f->params;
  const LinkSpec& link = hardware_.link(level);
  return AlphaBeta{link.latency_s, link.bandwidth_bytes_per_s};
}

const AlphaBetaFit* CommCalibration::fit(Collective op, LinkLevel level) const noexcept {
  const auto it = fits_.find({op, level});
  return it == fits_.end() ? nullptr : &it->second;
}

double CommCalibration::seconds(Collective op, int n, double bytes) const noexcept {
  return collective_seconds(op, n, bytes, alpha_beta(op, link_level_for_group(n, hardware_.devices_per_node)));
}

double CommCalibration::seconds(Collective op, int n, double bytes, LinkLevel level) const noexcept {
  return collective_seconds(op, n, bytes, alpha_beta(op, level));
}

void CommCalibration::set_fit(Collective op, LinkLevel level, const AlphaBetaFit& fit) { fits_[{op, level}] = fit; }

CommCalibration calibrate_comm(const HardwareSpec& hardware, const std::vector<LinkSamples>& measured,
                               FitWeighting weighting) {
  CommCalibration calibration(hardware);
  for (const LinkSamples& level_samples : measured) {
    for (Collective op : kAllCollectives) {
      std::vector<CommSample> of_op;
      for (const CommSample& s : level_samples.samples)
        if (s.op == op) of_op.push_back(s);
      if (of_op.empty()) continue;
      try {
        calibration.set_fit(op, level_samples.level, fit_alpha_beta(of_op, weighting));
      } catch (const SimError& e) {
        calibration.add_fallback_reason(fmt::format("{} at {}: {} (the hardware's link is used)", collective_name(op),
                                                    link_level_name(level_samples.level), e.what()));
      }
    }
  }
  return calibration;
}

SampleSplit split_by_message_size(const std::vector<CommSample>& samples) {
  std::set<double> sizes;
  for (const CommSample& s : samples) sizes.insert(s.bytes);
  std::set<double> fit_sizes;
  int position = 0;
  for (double size : sizes)
    if (position++ % 2 == 0) fit_sizes.insert(size);
  SampleSplit split;
  for (const CommSample& s : samples) (fit_sizes.count(s.bytes) ? split.fit : split.check).push_back(s);
  return split;
}

std::vector<CollectiveError> prediction_error(const CommCalibration& calibration, LinkLevel level,
                                              const std::vector<CommSample>& check) {
  std::vector<CollectiveError> errors;
  for (Collective op : kAllCollectives) {
    CollectiveError error;
    error.op = op;
    error.level = level;
    error.fitted = calibration.fit(op, level) != nullptr;
    const AlphaBeta params = calibration.alpha_beta(op, level);
    double sum = 0.0;
    for (const CommSample& s : check) {
      if (s.op != op || !(s.seconds > 0.0)) continue;
      sum += std::abs(collective_seconds(op, s.group_size, s.bytes, params) - s.seconds) / s.seconds;
      ++error.samples;
    }
    if (error.samples == 0) continue;
    error.mean_abs_pct_error = 100.0 * sum / error.samples;
    errors.push_back(error);
  }
  return errors;
}

}  // namespace hs::bench::sim
