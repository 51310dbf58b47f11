// comm_model_test.cpp — the alpha-beta model against hand arithmetic, and its fit recovering
// known parameters from synthetic measurements.
#include "hybridscope/bench/sim/comm_model.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

namespace sim = hs::bench::sim;
using sim::Collective;

TEST(CommModel, RingCostsByHand) {
  const sim::AlphaBeta link{5e-6, 100e9};  // 5 µs per step, 100 GB/s
  const double bytes = 400e6;              // bytes / beta = 4e-3 s
  // all_reduce, n = 4: 2·3·5e-6 = 30e-6 s; 2·3/4 · 4e-3 = 6e-3 s.
  EXPECT_NEAR(sim::collective_seconds(Collective::kAllReduce, 4, bytes, link), 6.030e-3, 1e-12);
  // all_gather / reduce_scatter / all_to_all, n = 4: 3·5e-6 = 15e-6; 3/4 · 4e-3 = 3e-3.
  EXPECT_NEAR(sim::collective_seconds(Collective::kAllGather, 4, bytes, link), 3.015e-3, 1e-12);
  EXPECT_NEAR(sim::collective_seconds(Collective::kReduceScatter, 4, bytes, link), 3.015e-3, 1e-12);
  EXPECT_NEAR(sim::collective_seconds(Collective::kAllToAll, 4, bytes, link), 3.015e-3, 1e-12);
  // broadcast, n = 4: 3·5e-6 + 1 · 4e-3.
  EXPECT_NEAR(sim::collective_seconds(Collective::kBroadcast, 4, bytes, link), 4.015e-3, 1e-12);
  // send/recv: 5e-6 + 4e-3, whatever the group.
  EXPECT_NEAR(sim::collective_seconds(Collective::kSendRecv, 2, bytes, link), 4.005e-3, 1e-12);
  // all_reduce, n = 8: 2·7·5e-6 = 70e-6; 2·7/8 · 4e-3 = 7e-3.
  EXPECT_NEAR(sim::collective_seconds(Collective::kAllReduce, 8, bytes, link), 7.070e-3, 1e-12);
  // A group of one moves nothing.
  EXPECT_EQ(sim::collective_seconds(Collective::kAllReduce, 1, bytes, link), 0.0);
}

TEST(CommModel, NamesRoundTripWithTheRecorders) {
  for (Collective op : {Collective::kAllReduce, Collective::kAllGather, Collective::kReduceScatter,
                        Collective::kAllToAll, Collective::kBroadcast, Collective::kSendRecv})
    EXPECT_EQ(sim::collective_from_name(sim::collective_name(op)), op);
  EXPECT_EQ(sim::collective_from_name("recv"), Collective::kSendRecv);
  EXPECT_FALSE(sim::collective_from_name("barrier").has_value());
}

TEST(CommModel, GroupsLeavingTheNodeRunAtTheInterNodeLink) {
  sim::HardwareSpec hw;
  hw.devices_per_node = 8;
  hw.intra_node = {450e9, 2e-6, sim::Basis::kSpec};
  hw.inter_node = {50e9, 5e-6, sim::Basis::kAssumed};
  EXPECT_EQ(sim::link_level_for_group(8, 8), sim::LinkLevel::kIntraNode);
  EXPECT_EQ(sim::link_level_for_group(9, 8), sim::LinkLevel::kInterNode);
  // all_gather of 1 GB over 8 (NVLink): 7·2e-6 + 7/8 · 1e9/450e9 = 14e-6 + 1.9444…e-3.
  EXPECT_NEAR(sim::collective_seconds(hw, Collective::kAllGather, 8, 1e9), 14e-6 + 0.875 / 450.0, 1e-12);
  // over 16 (InfiniBand): 15·5e-6 + 15/16 · 1e9/50e9 = 75e-6 + 18.75e-3.
  EXPECT_NEAR(sim::collective_seconds(hw, Collective::kAllGather, 16, 1e9), 75e-6 + 18.75e-3, 1e-12);
}

namespace {

// Synthetic hs_comm_bench sweep: every op, groups of 2 and 4, 4 KiB … 64 MiB (×4), timed by the
// model with `truth`, each time multiplied by (1 + noise_i) with a fixed pseudo-random noise_i in
// [-amplitude, amplitude] (a linear congruential generator: the same numbers on every platform).
std::vector<sim::CommSample> sweep(const sim::AlphaBeta& truth, double amplitude) {
  std::vector<sim::CommSample> samples;
  std::uint32_t state = 12345;
  for (Collective op : {Collective::kAllReduce, Collective::kAllGather, Collective::kReduceScatter,
                        Collective::kBroadcast, Collective::kSendRecv})
    for (int n : {2, 4})
      for (double bytes = 4096; bytes <= 64.0 * 1024 * 1024; bytes *= 4) {
        state = state * 1664525u + 1013904223u;
        const double unit = static_cast<double>(state >> 8) / static_cast<double>(1u << 24);  // [0, 1)
        const double noise = amplitude * (2.0 * unit - 1.0);
        samples.push_back({op, n, bytes, sim::collective_seconds(op, n, bytes, truth) * (1.0 + noise)});
      }
  return samples;
}

}  // namespace

TEST(CommModel, FitRecoversExactParameters) {
  const sim::AlphaBeta truth{25e-6, 12.5e9};
  for (auto weighting : {sim::FitWeighting::kRelative, sim::FitWeighting::kAbsolute}) {
    const sim::AlphaBetaFit fit = sim::fit_alpha_beta(sweep(truth, 0.0), weighting);
    EXPECT_EQ(fit.samples, 5 * 2 * 8);  // 5 ops × 2 groups × 8 sizes (4 KiB·4^0..7)
    EXPECT_NEAR(fit.params.alpha_s, 25e-6, 25e-6 * 1e-9);
    EXPECT_NEAR(fit.params.beta_bytes_per_s, 12.5e9, 12.5e9 * 1e-9);
    EXPECT_FALSE(fit.alpha_clamped);
    EXPECT_NEAR(fit.mean_abs_pct_error, 0.0, 1e-9);
  }
}

TEST(CommModel, FitRecoversParametersUnderNoise) {
  // ±5 % noise on every time: both parameters within 5 %, the model within ~2.5 % (the noise's
  // mean absolute value) of the samples.
  const sim::AlphaBeta truth{800e-6, 0.6e9};  // Gloo over loopback: ~0.8 ms, ~0.6 GB/s
  const sim::AlphaBetaFit fit = sim::fit_alpha_beta(sweep(truth, 0.05));
  EXPECT_NEAR(fit.params.alpha_s, truth.alpha_s, 0.05 * truth.alpha_s);
  EXPECT_NEAR(fit.params.beta_bytes_per_s, truth.beta_bytes_per_s, 0.05 * truth.beta_bytes_per_s);
  EXPECT_LT(fit.mean_abs_pct_error, 3.5);
  EXPECT_GT(fit.mean_abs_pct_error, 1.0);  // the noise is there: an exact fit would be wrong
}

TEST(CommModel, FitClampsANegativeLatencyToZero) {
  // Pure bandwidth (alpha = 0) and one small sample measured faster than the bandwidth term allows
  // pull the unconstrained alpha below 0; the fit fixes alpha = 0 and refits beta.
  const double beta = 10e9;
  std::vector<sim::CommSample> samples = {
      {Collective::kSendRecv, 2, 1e6, 1e6 / beta},
      {Collective::kSendRecv, 2, 1e8, 1e8 / beta},
      {Collective::kSendRecv, 2, 1e4, 0.5e4 / beta},
  };
  const sim::AlphaBetaFit fit = sim::fit_alpha_beta(samples, sim::FitWeighting::kAbsolute);
  EXPECT_TRUE(fit.alpha_clamped);
  EXPECT_EQ(fit.params.alpha_s, 0.0);
  // g = Σ b·t / Σ b² with b = bytes: (1e12 + 1e16 + 0.5e8)/beta / (1e12 + 1e16 + 1e8) ≈ 1/beta.
  const double g = (1e12 + 1e16 + 0.5e8) / beta / (1e12 + 1e16 + 1e8);
  EXPECT_NEAR(fit.params.beta_bytes_per_s, 1.0 / g, 1e-6 * beta);
}

TEST(CommModel, FitRefusesWhatCannotDetermineBoth) {
  const sim::AlphaBeta truth{1e-5, 1e9};
  auto message = [](const std::vector<sim::CommSample>& samples) -> std::string {
    try {
      sim::fit_alpha_beta(samples);
    } catch (const sim::SimError& e) {
      return e.what();
    }
    return "";
  };
  const double t = sim::collective_seconds(Collective::kAllGather, 4, 1e6, truth);
  EXPECT_NE(message({{Collective::kAllGather, 4, 1e6, t}}).find("at least two"), std::string::npos);
  EXPECT_NE(message({{Collective::kAllGather, 4, 1e6, t}, {Collective::kAllGather, 4, 1e6, 1.1 * t}})
                .find("cannot tell latency from bandwidth"),
            std::string::npos);
  EXPECT_NE(message({{Collective::kAllGather, 4, 1e6, t}, {Collective::kAllGather, 4, 1e7, 0.0}}).find("> 0"),
            std::string::npos);
  // Time falling with size: the bandwidth term would be negative.
  EXPECT_NE(message({{Collective::kAllGather, 4, 1e3, 1e-3}, {Collective::kAllGather, 4, 1e7, 1e-4}})
                .find("bandwidth term came out"),
            std::string::npos);
}

TEST(CommModel, ReadsCommBenchJson) {
  // Two rows as hs_comm_bench writes them, an aggregate row and an unknown family (both skipped).
  const std::string json = R"({"context": {}, "benchmarks": [
    {"name": "BM_AllGather/ranks:2/bytes:4096/iterations:50/manual_time", "run_type": "iteration",
     "bytes": 4096.0, "group_size": 2.0, "real_time": 835.5, "time_unit": "us"},
    {"name": "BM_AllReduce/ranks:4/bytes:65536/manual_time", "run_type": "iteration",
     "bytes": 65536.0, "group_size": 4.0, "real_time": 2.5, "time_unit": "ms", "median_s": 0.0021},
    {"name": "BM_AllReduce/ranks:4/bytes:65536/manual_time_mean", "run_type": "aggregate",
     "bytes": 65536.0, "group_size": 4.0, "real_time": 2.5, "time_unit": "ms"},
    {"name": "BM_AllReduceInSitu/ranks:2/bytes:4096/iterations:30/manual_time", "run_type": "iteration",
     "bytes": 4096.0, "group_size": 2.0, "real_time": 1500, "time_unit": "us", "median_s": 0.0012},
    {"name": "BM_AllGatherInSituPairs/ranks:4/bytes:16384/iterations:30/manual_time", "run_type": "iteration",
     "bytes": 16384.0, "group_size": 2.0, "processes": 4.0, "real_time": 700, "time_unit": "us"},
    {"name": "BM_Barrier/ranks:2", "run_type": "iteration", "real_time": 1, "time_unit": "us"}]})";
  const sim::CommBenchData data = sim::parse_comm_bench_json(json, "c.json");
  ASSERT_EQ(data.samples.size(), 4u);
  EXPECT_FALSE(data.samples[0].in_situ);
  // BM_<Op>InSitu: the same collective timed right after compute.
  EXPECT_EQ(data.samples[2].op, Collective::kAllReduce);
  EXPECT_TRUE(data.samples[2].in_situ);
  EXPECT_DOUBLE_EQ(data.samples[2].seconds, 1.5e-3);
  EXPECT_EQ(data.samples[2].processes, 0);  // the group's own
  // BM_<Op>InSituPairs: 2-rank groups timed among all of a 4-rank world's ranks.
  EXPECT_EQ(data.samples[3].op, Collective::kAllGather);
  EXPECT_TRUE(data.samples[3].in_situ);
  EXPECT_EQ(data.samples[3].group_size, 2);
  EXPECT_EQ(data.samples[3].processes, 4);
  EXPECT_DOUBLE_EQ(data.samples[3].seconds, 700e-6);
  EXPECT_EQ(data.samples[0].op, Collective::kAllGather);
  EXPECT_EQ(data.samples[0].group_size, 2);
  EXPECT_DOUBLE_EQ(data.samples[0].bytes, 4096.0);
  EXPECT_DOUBLE_EQ(data.samples[0].seconds, 835.5e-6);
  EXPECT_EQ(data.samples[1].op, Collective::kAllReduce);
  EXPECT_EQ(data.samples[1].group_size, 4);
  EXPECT_DOUBLE_EQ(data.samples[1].seconds, 2.5e-3);  // the mean iteration, not the 2.1 ms median
  EXPECT_EQ(data.skipped.size(), 2u);

  EXPECT_THROW(sim::parse_comm_bench_json(R"({"benchmarks": [{"name": "BM_Broadcast/x", "run_type": "iteration"}]})",
                                          "c.json"),
               sim::SimError);
  EXPECT_THROW(sim::parse_comm_bench_json("{", "c.json"), sim::SimError);
  // A pairs row without its processes counter cannot say among how many ranks it was timed.
  EXPECT_THROW(sim::parse_comm_bench_json(R"({"benchmarks": [{"name": "BM_AllReduceInSituPairs/ranks:4/bytes:4096",
    "run_type": "iteration", "bytes": 4096.0, "group_size": 2.0, "real_time": 1, "time_unit": "us"}]})", "c.json"),
               sim::SimError);
  EXPECT_THROW(sim::parse_comm_bench_json(R"({"rows": []})", "c.json"), sim::SimError);
}

TEST(CommModel, MergesCommBenchPassesToEachBenchmarksMedianPass) {
  // Three passes of two benchmarks; each row carries its pass's own counters.
  auto pass = [](double gather_us, double send_us, double send_algbw) {
    return fmt::format(R"({{"context": {{"group_size": "2"}}, "benchmarks": [
      {{"name": "BM_AllGather/ranks:2/bytes:4096", "run_type": "iteration", "bytes": 4096, "group_size": 2,
        "real_time": {}, "time_unit": "us"}},
      {{"name": "BM_SendRecv/ranks:2/bytes:1048576", "run_type": "iteration", "bytes": 1048576, "group_size": 2,
        "real_time": {}, "time_unit": "us", "algbw_GBps": {}}}]}})",
                       gather_us, send_us, send_algbw);
  };
  // The second pass met a slow window for the exchange (480 µs against 73-75).
  const sim::CommBenchPasses merged =
      sim::merge_comm_bench_passes({pass(5.0, 73.0, 14.4), pass(7.0, 480.0, 2.2), pass(6.0, 75.0, 14.1)}, "c.json");
  EXPECT_EQ(merged.passes, 3);
  EXPECT_EQ(merged.benchmarks, 2u);
  const sim::CommBenchData data = sim::parse_comm_bench_json(merged.json, "c.json");
  ASSERT_EQ(data.samples.size(), 2u);
  EXPECT_EQ(data.samples[0].op, Collective::kAllGather);  // the first report's order
  EXPECT_DOUBLE_EQ(data.samples[0].seconds, 6e-6);        // median of 5, 7, 6
  EXPECT_DOUBLE_EQ(data.samples[1].seconds, 75e-6);       // median of 73, 480, 75: not the slow pass
  // The whole row of the median pass, its counters with it; the spread beside it.
  EXPECT_NE(merged.json.find("\"algbw_GBps\": 14.1"), std::string::npos) << merged.json;
  EXPECT_EQ(merged.json.find("\"algbw_GBps\": 2.2"), std::string::npos) << merged.json;
  EXPECT_NE(merged.json.find("\"passes\": 3"), std::string::npos);
  EXPECT_NEAR(merged.widest_spread, 480.0 / 73.0, 1e-12);
  EXPECT_EQ(merged.widest, "BM_SendRecv/ranks:2/bytes:1048576");
  EXPECT_NEAR(merged.median_spread, 7.0 / 5.0, 1e-12);  // the lower middle of {1.4, 6.58}

  // An even count takes the lower middle: 75 of {73, 75, 90, 480}.
  const auto four = sim::merge_comm_bench_passes(
      {pass(5, 90, 1), pass(5, 480, 1), pass(5, 73, 1), pass(5, 75, 1)}, "c.json");
  EXPECT_DOUBLE_EQ(sim::parse_comm_bench_json(four.json, "c.json").samples[1].seconds, 75e-6);

  // A pass that ran fewer benchmarks (a filter given to one pass only) is refused, naming the benchmark.
  const std::string partial = R"({"benchmarks": [
    {"name": "BM_AllGather/ranks:2/bytes:4096", "run_type": "iteration", "real_time": 5, "time_unit": "us"}]})";
  try {
    sim::merge_comm_bench_passes({pass(5, 73, 1), partial}, "c.json");
    FAIL() << "a benchmark missing from a pass was merged";
  } catch (const sim::SimError& e) {
    EXPECT_NE(std::string(e.what()).find("BM_SendRecv/ranks:2/bytes:1048576 ran in 1 of 2 passes"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(sim::merge_comm_bench_passes({"{"}, "c.json"), sim::SimError);
  EXPECT_THROW(sim::merge_comm_bench_passes({}, "c.json"), sim::SimError);
}
