// comm_calibration_test.cpp — per-collective calibration recovering known parameters from
// synthetic sweeps, its held-out error against hand arithmetic, the size split, the fallbacks.
#include "hybridscope/bench/sim/comm_calibration.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <tuple>
#include <vector>

namespace sim = hs::bench::sim;
using sim::Collective;
using sim::LinkLevel;

namespace {

sim::HardwareSpec two_level_hardware() {
  sim::HardwareSpec hw;
  hw.name = "test";
  hw.devices_per_node = 4;
  hw.intra_node = {100e9, 2e-6, sim::Basis::kSpec};
  hw.inter_node = {10e9, 10e-6, sim::Basis::kAssumed};
  return hw;
}

// A synthetic hs_comm_bench sweep: each op in `truth` over groups of 2 and 4, 4 KiB … 64 MiB (×4),
// timed by the ring model with the op's own (alpha, beta) times (1 + noise), noise from a fixed
// linear congruential generator in [-amplitude, amplitude].
std::vector<sim::CommSample> sweep(const std::map<Collective, sim::AlphaBeta>& truth, double amplitude) {
  std::vector<sim::CommSample> samples;
  std::uint32_t state = 777;
  for (const auto& [op, params] : truth)
    for (int n : {2, 4})
      for (double bytes = 4096; bytes <= 64.0 * 1024 * 1024; bytes *= 4) {
        state = state * 1664525u + 1013904223u;
        const double unit = static_cast<double>(state >> 8) / static_cast<double>(1u << 24);  // [0, 1)
        const double noise = amplitude * (2.0 * unit - 1.0);
        samples.push_back({op, n, bytes, sim::collective_seconds(op, n, bytes, params) * (1.0 + noise)});
      }
  return samples;
}

// Gloo-over-loopback-like parameters, a different pair per collective.
const std::map<Collective, sim::AlphaBeta> kTruth = {
    {Collective::kAllReduce, {1.0e-3, 1.2e9}},
    {Collective::kAllGather, {0.8e-3, 0.5e9}},
    {Collective::kBroadcast, {0.3e-3, 2.4e9}},
};

}  // namespace

TEST(CommCalibration, SplitsByAlternateMessageSizes) {
  const sim::SampleSplit split = sim::split_by_message_size(sweep(kTruth, 0.0));
  // 3 ops × 2 groups × 8 sizes = 48 samples; 4 sizes each side -> 24 and 24.
  ASSERT_EQ(split.fit.size(), 24u);
  ASSERT_EQ(split.check.size(), 24u);
  for (const auto& s : split.fit)  // 4096·4^{0,2,4,6}
    EXPECT_TRUE(s.bytes == 4096.0 || s.bytes == 65536.0 || s.bytes == 1048576.0 || s.bytes == 16777216.0) << s.bytes;
  for (const auto& s : split.check)  // 4096·4^{1,3,5,7}
    EXPECT_TRUE(s.bytes == 16384.0 || s.bytes == 262144.0 || s.bytes == 4194304.0 || s.bytes == 67108864.0) << s.bytes;
}

TEST(CommCalibration, RecoversEachCollectivesParametersAndPredictsTheHeldOutSizes) {
  const sim::SampleSplit split = sim::split_by_message_size(sweep(kTruth, 0.0));
  const sim::CommCalibration cal =
      sim::calibrate_comm(two_level_hardware(), {{LinkLevel::kIntraNode, split.fit}});
  for (const auto& [op, truth] : kTruth) {
    ASSERT_NE(cal.fit(op, LinkLevel::kIntraNode), nullptr) << sim::collective_name(op);
    EXPECT_NEAR(cal.alpha_beta(op, LinkLevel::kIntraNode).alpha_s, truth.alpha_s, truth.alpha_s * 1e-9);
    EXPECT_NEAR(cal.alpha_beta(op, LinkLevel::kIntraNode).beta_bytes_per_s, truth.beta_bytes_per_s,
                truth.beta_bytes_per_s * 1e-9);
  }
  const auto errors = sim::prediction_error(cal, LinkLevel::kIntraNode, split.check);
  ASSERT_EQ(errors.size(), 3u);  // all_reduce, all_gather, broadcast, in Collective's order
  EXPECT_EQ(errors[0].op, Collective::kAllReduce);
  EXPECT_EQ(errors[1].op, Collective::kAllGather);
  EXPECT_EQ(errors[2].op, Collective::kBroadcast);
  for (const auto& e : errors) {
    EXPECT_EQ(e.samples, 8);  // 2 groups × 4 held-out sizes
    EXPECT_TRUE(e.fitted);
    EXPECT_NEAR(e.mean_abs_pct_error, 0.0, 1e-7);
  }
  // Nothing measured for reduce_scatter, nor anything inter-node: the hardware's links.
  EXPECT_EQ(cal.fit(Collective::kReduceScatter, LinkLevel::kIntraNode), nullptr);
  EXPECT_EQ(cal.alpha_beta(Collective::kReduceScatter, LinkLevel::kIntraNode).beta_bytes_per_s, 100e9);
  EXPECT_EQ(cal.alpha_beta(Collective::kAllReduce, LinkLevel::kInterNode).alpha_s, 10e-6);
}

TEST(CommCalibration, HeldOutErrorUnderNoiseIsTheNoisesSize) {
  // ±5 % noise: the fit on half the sizes predicts the other half within about the noise's mean
  // absolute value (2.5 %), and not exactly (the noise is there).
  const sim::SampleSplit split = sim::split_by_message_size(sweep(kTruth, 0.05));
  const sim::CommCalibration cal =
      sim::calibrate_comm(two_level_hardware(), {{LinkLevel::kIntraNode, split.fit}});
  for (const auto& e : sim::prediction_error(cal, LinkLevel::kIntraNode, split.check)) {
    EXPECT_LT(e.mean_abs_pct_error, 5.0) << sim::collective_name(e.op);
    EXPECT_GT(e.mean_abs_pct_error, 0.5) << sim::collective_name(e.op);
  }
}

TEST(CommCalibration, HeldOutErrorByHand) {
  const sim::CommCalibration cal =
      sim::calibrate_comm(two_level_hardware(), {{LinkLevel::kIntraNode, sweep(kTruth, 0.0)}});
  // all_reduce over 4 ranks of 1 MB with alpha 1 ms, beta 1.2 GB/s:
  //   2·3·1e-3 + 2·3/4 · 1e6/1.2e9 = 6e-3 + 1.25e-3 = 7.25e-3 s.
  const double model = 7.25e-3;
  EXPECT_NEAR(cal.seconds(Collective::kAllReduce, 4, 1e6), model, 1e-12);
  // Measured 1.25× and 0.8× the model: |m − 1.25m|/1.25m = 0.2, |m − 0.8m|/0.8m = 0.25 -> 22.5 %.
  const std::vector<sim::CommSample> check = {{Collective::kAllReduce, 4, 1e6, 1.25 * model},
                                              {Collective::kAllReduce, 4, 1e6, 0.8 * model}};
  const auto errors = sim::prediction_error(cal, LinkLevel::kIntraNode, check);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].samples, 2);
  EXPECT_NEAR(errors[0].mean_abs_pct_error, 22.5, 1e-9);
}

TEST(CommCalibration, GroupsLeavingTheNodeUseTheInterNodeCalibration) {
  // Intra-node fitted from the sweep; inter-node from the hardware (10 µs, 10 GB/s), 8 > 4 per node.
  const sim::CommCalibration cal =
      sim::calibrate_comm(two_level_hardware(), {{LinkLevel::kIntraNode, sweep(kTruth, 0.0)}});
  // all_gather of 1e8 bytes over 8 on the hardware's links: 7·10e-6 + 7/8 · 1e8/10e9 = 70e-6 + 8.75e-3.
  const sim::CommCalibration links(two_level_hardware());
  EXPECT_NEAR(links.seconds(Collective::kAllGather, 8, 1e8), 70e-6 + 8.75e-3, 1e-12);
  // With the intra-node all_gather fitted at 0.8 ms and 0.5 GB/s, the network cannot beat it: the
  // same group within a node, 7·0.8e-3 + 7/8 · 1e8/0.5e9 = 5.6e-3 + 0.175, is the floor.
  EXPECT_NEAR(cal.seconds(Collective::kAllGather, 8, 1e8), 5.6e-3 + 0.175, 1e-9);
  // An op the sweep did not measure keeps the inter-node link (intra-node 2 µs, 100 GB/s is faster):
  // reduce_scatter 7·10e-6 + 7/8 · 1e8/10e9.
  EXPECT_NEAR(cal.seconds(Collective::kReduceScatter, 8, 1e8), 70e-6 + 8.75e-3, 1e-12);
  // over 4 (intra, fitted 0.8 ms, 0.5 GB/s): 3·0.8e-3 + 3/4 · 1e8/0.5e9 = 2.4e-3 + 0.15.
  EXPECT_NEAR(cal.seconds(Collective::kAllGather, 4, 1e8), 2.4e-3 + 0.15, 1e-9);
}

TEST(CommCalibration, AFitThatFailsFallsBackWithItsReason) {
  // Broadcast measured at one size only: latency and bandwidth cannot be told apart.
  const std::vector<sim::CommSample> one_size = {{Collective::kBroadcast, 2, 1e6, 1e-3},
                                                 {Collective::kBroadcast, 2, 1e6, 1.1e-3}};
  const sim::CommCalibration cal = sim::calibrate_comm(two_level_hardware(), {{LinkLevel::kIntraNode, one_size}});
  EXPECT_EQ(cal.fit(Collective::kBroadcast, LinkLevel::kIntraNode), nullptr);
  EXPECT_EQ(cal.alpha_beta(Collective::kBroadcast, LinkLevel::kIntraNode).alpha_s, 2e-6);
  ASSERT_EQ(cal.fallback_reasons().size(), 1u);
  EXPECT_NE(cal.fallback_reasons()[0].find("broadcast at intra_node"), std::string::npos);
  EXPECT_NE(cal.fallback_reasons()[0].find("cannot tell latency from bandwidth"), std::string::npos);
}

// A group size the bench measured is served by its measured times, read off linearly between the
// two sizes around the message; the alpha-beta fit serves the group sizes it did not measure.
TEST(CommCalibration, MeasuredGroupSizesReadTheirCurve) {
  // Gloo-like: 2-rank all-gathers of 1 MiB 2 ms, 16 MiB 12 ms, 64 MiB 92 ms (the cache cliff no
  // single alpha-beta line goes through), 1 MiB measured twice (1.8 and 2.2 ms: mean 2 ms).
  const std::vector<sim::CommSample> samples = {
      {Collective::kAllGather, 2, 1048576.0, 1.8e-3},  {Collective::kAllGather, 2, 1048576.0, 2.2e-3},
      {Collective::kAllGather, 2, 16777216.0, 12e-3},  {Collective::kAllGather, 2, 67108864.0, 92e-3},
      {Collective::kAllGather, 4, 1048576.0, 4e-3},    {Collective::kAllGather, 4, 67108864.0, 200e-3},
      {Collective::kAllReduce, 2, 1048576.0, 1e-3}};  // one size only: no curve
  const sim::CommCalibration cal = sim::calibrate_comm(two_level_hardware(), {{LinkLevel::kIntraNode, samples}});
  ASSERT_NE(cal.curve(Collective::kAllGather, LinkLevel::kIntraNode, 2), nullptr);
  EXPECT_EQ(cal.curve(Collective::kAllGather, LinkLevel::kIntraNode, 2)->size(), 3u);
  EXPECT_EQ(cal.curve(Collective::kAllReduce, LinkLevel::kIntraNode, 2), nullptr);
  EXPECT_EQ(cal.curve(Collective::kAllGather, LinkLevel::kIntraNode, 8), nullptr);
  // 50 MiB at 2 ranks: 12 ms + (92 − 12) ms · (50 − 16)/(64 − 16) = 12 + 56.6667 = 68.6667 ms.
  EXPECT_NEAR(cal.seconds(Collective::kAllGather, 2, 50.0 * 1048576.0, LinkLevel::kIntraNode), 68.666666667e-3, 1e-12);
  // 8.5 MiB: 2 + 10 · 7.5/15 = 7 ms; below the smallest size, the smallest's 2 ms.
  EXPECT_NEAR(cal.seconds(Collective::kAllGather, 2, 8.5 * 1048576.0), 7e-3, 1e-12);
  EXPECT_NEAR(cal.seconds(Collective::kAllGather, 2, 4096.0), 2e-3, 1e-15);
  // 128 MiB: the last segment's slope continued, 92 + 80 · 64/48 = 198.6667 ms.
  EXPECT_NEAR(cal.seconds(Collective::kAllGather, 2, 128.0 * 1048576.0), 198.666666667e-3, 1e-12);
  // 4 ranks: its own curve, 4 + 196 · (32 − 1)/63 = 100.4444 ms at 32 MiB.
  EXPECT_NEAR(cal.seconds(Collective::kAllGather, 4, 32.0 * 1048576.0), 100.444444444e-3, 1e-12);
  // 8 ranks were not measured: the 4-rank curve (the nearest measured size) scaled by the ring
  // model's ratio at the fitted alpha-beta, 4 ms · t_ab(8)/t_ab(4) at 1 MiB.
  const sim::AlphaBeta ab = cal.alpha_beta(Collective::kAllGather, LinkLevel::kIntraNode);
  EXPECT_NEAR(cal.seconds(Collective::kAllGather, 8, 1048576.0, LinkLevel::kIntraNode),
              4e-3 * sim::collective_seconds(Collective::kAllGather, 8, 1048576.0, ab) /
                  sim::collective_seconds(Collective::kAllGather, 4, 1048576.0, ab),
              1e-15);
  // The all-reduce's single size keeps the alpha-beta route at 2 ranks too.
  EXPECT_DOUBLE_EQ(cal.seconds(Collective::kAllReduce, 2, 4096.0),
                   sim::collective_seconds(Collective::kAllReduce, 2, 4096.0,
                                           cal.alpha_beta(Collective::kAllReduce, LinkLevel::kIntraNode)));
}

// Between nodes never faster than within one: an assumed fast network link is floored by the
// measured intra-node cost of the same group and size.
TEST(CommCalibration, InterNodeIsNeverFasterThanIntraNode) {
  sim::HardwareSpec hw = two_level_hardware();  // intra 100 GB/s 2 µs, inter 10 GB/s 10 µs
  hw.inter_node = {1000e9, 1e-7, sim::Basis::kAssumed};  // a network link "faster" than the node
  const std::vector<sim::CommSample> samples = {{Collective::kAllGather, 4, 1048576.0, 4e-3},
                                                {Collective::kAllGather, 4, 16777216.0, 40e-3}};
  const sim::CommCalibration cal = sim::calibrate_comm(hw, {{LinkLevel::kIntraNode, samples}});
  // 4 ranks, 8 MiB: the measured intra-node curve, 4 + 36 · 7/15 = 20.8 ms, not the link's 6 µs.
  EXPECT_NEAR(cal.seconds(Collective::kAllGather, 4, 8.0 * 1048576.0, LinkLevel::kInterNode), 20.8e-3, 1e-12);
  // The hardware file's usual order (the network slower) is untouched: 3·10 µs + 3/4 · 1 MiB/10 GB/s.
  const sim::CommCalibration plain(two_level_hardware());
  EXPECT_DOUBLE_EQ(plain.seconds(Collective::kAllGather, 4, 1048576.0, LinkLevel::kInterNode),
                   3 * 10e-6 + 0.75 * 1048576.0 / 10e9);
}

// In-situ samples (timed right after compute) make their own curves, read by seconds_in_situ only:
// they neither enter the alpha-beta fit nor the ordinary curves, and a size without them falls
// back to the ordinary cost.
TEST(CommCalibration, InSituSamplesServeOnlyTheInSituCost) {
  std::vector<sim::CommSample> samples = {{Collective::kAllReduce, 2, 4096.0, 1e-3},
                                          {Collective::kAllReduce, 2, 1048576.0, 2e-3}};
  for (auto [bytes, t] : {std::pair{4096.0, 3e-3}, std::pair{1048576.0, 5e-3}}) {
    sim::CommSample s{Collective::kAllReduce, 2, bytes, t};
    s.in_situ = true;
    samples.push_back(s);
  }
  const sim::CommCalibration cal = sim::calibrate_comm(two_level_hardware(), {{LinkLevel::kIntraNode, samples}});
  // Midway (526336 bytes): ordinary 1.5 ms, in situ 4 ms.
  const double mid = (4096.0 + 1048576.0) / 2.0;
  EXPECT_NEAR(cal.seconds(Collective::kAllReduce, 2, mid, LinkLevel::kIntraNode), 1.5e-3, 1e-15);
  EXPECT_NEAR(cal.seconds_in_situ(Collective::kAllReduce, 2, mid, LinkLevel::kIntraNode), 4e-3, 1e-15);
  // The alpha-beta fit saw the two ordinary samples only: it goes through both exactly.
  const sim::AlphaBeta ab = cal.alpha_beta(Collective::kAllReduce, LinkLevel::kIntraNode);
  EXPECT_NEAR(sim::collective_seconds(Collective::kAllReduce, 2, 4096.0, ab), 1e-3, 1e-12);
  EXPECT_NEAR(sim::collective_seconds(Collective::kAllReduce, 2, 1048576.0, ab), 2e-3, 1e-12);
  // 4 ranks have no in-situ curve: the ordinary cost.
  EXPECT_DOUBLE_EQ(cal.seconds_in_situ(Collective::kAllReduce, 4, mid, LinkLevel::kIntraNode),
                   cal.seconds(Collective::kAllReduce, 4, mid, LinkLevel::kIntraNode));
  // No curve measured among more ranks: a 2-rank group among 4 reads the group's own.
  EXPECT_NEAR(cal.seconds_in_situ(Collective::kAllReduce, 2, mid, LinkLevel::kIntraNode, 4), 4e-3, 1e-15);
}

// 2-rank in-situ samples timed among 4 ranks (BM_<Op>InSituPairs) make a curve of their own, read
// where the node runs 4 ranks; with 2 (or no count) the group's own curve still answers.
TEST(CommCalibration, PairsAmongMoreRanksHaveTheirOwnInSituCurve) {
  std::vector<sim::CommSample> samples;
  for (auto [bytes, own, among4] : {std::tuple{4096.0, 1e-4, 1e-3}, std::tuple{1048576.0, 3e-4, 2e-3}}) {
    sim::CommSample s{Collective::kAllReduce, 2, bytes, own};
    s.in_situ = true;
    samples.push_back(s);
    s.seconds = among4;
    s.processes = 4;
    samples.push_back(s);
  }
  const sim::CommCalibration cal = sim::calibrate_comm(two_level_hardware(), {{LinkLevel::kIntraNode, samples}});
  const double mid = (4096.0 + 1048576.0) / 2.0;
  EXPECT_NEAR(cal.seconds_in_situ(Collective::kAllReduce, 2, mid, LinkLevel::kIntraNode), 2e-4, 1e-15);
  EXPECT_NEAR(cal.seconds_in_situ(Collective::kAllReduce, 2, mid, LinkLevel::kIntraNode, 2), 2e-4, 1e-15);
  EXPECT_NEAR(cal.seconds_in_situ(Collective::kAllReduce, 2, mid, LinkLevel::kIntraNode, 4), 1.5e-3, 1e-15);
  // 8 ranks on the node were not measured: the group's own curve, not the 4-rank one.
  EXPECT_NEAR(cal.seconds_in_situ(Collective::kAllReduce, 2, mid, LinkLevel::kIntraNode, 8), 2e-4, 1e-15);
}
