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
  return seconds(op, n, bytes, link_level_for_group(n, hardware_.devices_per_node));
}

double CommCalibration::seconds(Collective op, int n, double bytes, LinkLevel level) const noexcept {
  if (const Curve* c = curve(op, level, n)) return measured_seconds(*c, bytes);
  const AlphaBeta ab = alpha_beta(op, level);
  double t = collective_seconds(op, n, bytes, ab);
  // A group size the bench did not measure: the curve of the nearest measured size (the largest
  // below n, else the smallest above), scaled to n by the ring model's dependence on the group
  // size, so a projection past the measured sizes continues the measured costs instead of jumping
  // to the fit (which a cache cliff or time slicing leaves far from them).
  int below = 0, above = 0;
  for (const auto& [key, points] : curves_) {
    const auto& [c_op, c_level, c_n] = key;
    if (c_op != op || c_level != level) continue;
    if (c_n < n) below = std::max(below, c_n);
    else above = above == 0 ? c_n : std::min(above, c_n);
  }
  const int nearest = below > 0 ? below : above;
  if (nearest > 1) {
    const double at_nearest = collective_seconds(op, nearest, bytes, ab);
    if (at_nearest > 0) t = measured_seconds(*curve(op, level, nearest), bytes) * t / at_nearest;
  }
  // Between nodes a collective runs the same software stack as within one, plus the network: never
  // faster than the intra-node cost of the same group (an assumed 10 GbE link would otherwise beat
  // a measured Gloo loopback, and a projection scale superlinearly onto a second node).
  if (level == LinkLevel::kInterNode) return std::max(t, seconds(op, n, bytes, LinkLevel::kIntraNode));
  return t;
}

const CommCalibration::Curve* CommCalibration::curve(Collective op, LinkLevel level, int n) const noexcept {
  const auto it = curves_.find({op, level, n});
  return it == curves_.end() ? nullptr : &it->second;
}

double CommCalibration::measured_seconds(const Curve& curve, double bytes) noexcept {
  if (bytes <= curve.front().first) return curve.front().second;
  std::size_t hi = 1;
  while (hi + 1 < curve.size() && curve[hi].first < bytes) ++hi;
  const auto [b0, t0] = curve[hi - 1];
  const auto [b1, t1] = curve[hi];
  return std::max(0.0, t0 + (t1 - t0) * (bytes - b0) / (b1 - b0));
}

namespace {

int processes_of(const CommSample& s) { return s.processes > 0 ? s.processes : s.group_size; }

// One point per distinct size (the mean of its samples) of (op, n) among `samples` of the given
// kind (in situ: measured among `processes` ranks); empty with fewer than two sizes.
CommCalibration::Curve curve_of(const std::vector<CommSample>& samples, Collective op, int n, bool in_situ,
                                int processes = 0) {
  std::map<double, std::pair<double, int>> by_size;  // bytes -> (sum of seconds, samples)
  for (const CommSample& s : samples) {
    if (s.op != op || s.group_size != n || s.in_situ != in_situ || !(s.seconds > 0.0) || !(s.bytes > 0.0)) continue;
    if (in_situ && processes_of(s) != processes) continue;
    auto& [sum, count] = by_size[s.bytes];
    sum += s.seconds;
    ++count;
  }
  CommCalibration::Curve c;
  if (by_size.size() < 2) return c;
  for (const auto& [bytes, sum_count] : by_size) c.emplace_back(bytes, sum_count.first / sum_count.second);
  return c;
}

}  // namespace

void CommCalibration::set_curve(Collective op, LinkLevel level, int n, const std::vector<CommSample>& samples) {
  if (Curve c = curve_of(samples, op, n, false); !c.empty()) curves_[{op, level, n}] = std::move(c);
}

void CommCalibration::set_in_situ_curve(Collective op, LinkLevel level, int n, int processes,
                                        const std::vector<CommSample>& samples) {
  if (Curve c = curve_of(samples, op, n, true, processes); !c.empty())
    in_situ_curves_[{op, level, n, processes}] = std::move(c);
}

double CommCalibration::seconds_in_situ(Collective op, int n, double bytes, LinkLevel level,
                                        int processes) const noexcept {
  auto it = in_situ_curves_.find({op, level, n, std::max(n, processes)});
  if (it == in_situ_curves_.end()) it = in_situ_curves_.find({op, level, n, n});
  return it != in_situ_curves_.end() ? measured_seconds(it->second, bytes) : seconds(op, n, bytes, level);
}

void CommCalibration::set_fit(Collective op, LinkLevel level, const AlphaBetaFit& fit) { fits_[{op, level}] = fit; }

CommCalibration calibrate_comm(const HardwareSpec& hardware, const std::vector<LinkSamples>& measured,
                               FitWeighting weighting) {
  CommCalibration calibration(hardware);
  for (const LinkSamples& level_samples : measured) {
    for (Collective op : kAllCollectives) {
      std::vector<CommSample> of_op, in_situ;
      for (const CommSample& s : level_samples.samples)
        if (s.op == op) (s.in_situ ? in_situ : of_op).push_back(s);
      std::set<std::pair<int, int>> situ_sizes;  // (group size, processes)
      for (const CommSample& s : in_situ) situ_sizes.insert({s.group_size, processes_of(s)});
      for (const auto& [n, processes] : situ_sizes)
        calibration.set_in_situ_curve(op, level_samples.level, n, processes, in_situ);
      if (of_op.empty()) continue;
      std::set<int> sizes;
      for (const CommSample& s : of_op) sizes.insert(s.group_size);
      for (int n : sizes) calibration.set_curve(op, level_samples.level, n, of_op);
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
      if (s.op != op || s.in_situ || !(s.seconds > 0.0)) continue;
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
