// statistics_test.cpp — the statistics behind benchmark summaries and `hybridscope compare`,
// checked against values worked by hand and against independent computations done here: the
// exact Mann–Whitney p by enumerating every assignment of ranks, U by counting pairs, the normal
// approximation from the textbook formula with tie groups counted in a map.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <stdexcept>
#include <vector>

#include "hybridscope/reports/statistics.h"

using namespace hs::reports;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// U of `a` by its definition: pairs (x in a, y in b) with x > y, ties counting one half.
double u_by_pairs(const std::vector<double>& a, const std::vector<double>& b) {
  double u = 0;
  for (double x : a)
    for (double y : b) u += x > y ? 1.0 : (x == y ? 0.5 : 0.0);
  return u;
}

// Null distribution of U by brute force: every choice of n1 of the ranks 1..n1+n2 for the
// first sample is equally likely; counts[u] = how many choices give U = rank sum - n1(n1+1)/2.
std::vector<double> brute_force_u_counts(std::size_t n1, std::size_t n2) {
  std::vector<bool> chosen(n1 + n2, false);
  std::fill(chosen.begin(), chosen.begin() + static_cast<std::ptrdiff_t>(n1), true);
  std::vector<double> counts(n1 * n2 + 1, 0.0);
  do {
    std::size_t rank_sum = 0;
    for (std::size_t k = 0; k < chosen.size(); ++k) rank_sum += chosen[k] ? k + 1 : 0;
    counts.at(rank_sum - n1 * (n1 + 1) / 2) += 1;
  } while (std::prev_permutation(chosen.begin(), chosen.end()));
  return counts;
}

// Two-sided exact p = min(1, 2·min(P(U <= u), P(U >= u))) from the enumerated counts.
double p_from_counts(const std::vector<double>& counts, double u_observed) {
  double at_most = 0, at_least = 0, total = 0;
  for (std::size_t u = 0; u < counts.size(); ++u) {
    total += counts[u];
    if (static_cast<double>(u) <= u_observed) at_most += counts[u];
    if (static_cast<double>(u) >= u_observed) at_least += counts[u];
  }
  return std::min(1.0, 2.0 * std::min(at_most, at_least) / total);
}

// Textbook normal approximation (scipy method='asymptotic', use_continuity=True), with the tie
// groups counted in a map and U counted by pairs.
double textbook_asymptotic_p(const std::vector<double>& a, const std::vector<double>& b) {
  const double n1 = static_cast<double>(a.size()), n2 = static_cast<double>(b.size()), n = n1 + n2;
  std::map<double, double> group;
  for (double x : a) group[x] += 1;
  for (double x : b) group[x] += 1;
  double ties = 0;
  for (const auto& [value, t] : group) ties += t * t * t - t;
  const double sigma = std::sqrt(n1 * n2 / 12.0 * ((n + 1) - ties / (n * (n - 1))));
  const double u = std::max(u_by_pairs(a, b), u_by_pairs(b, a));
  const double z = (u - n1 * n2 / 2.0 - 0.5) / sigma;
  return std::min(1.0, std::erfc(z / std::sqrt(2.0)));
}

}  // namespace

TEST(Statistics, SpreadOfFourValuesUsesType7Quantiles) {
  const Spread s = spread({4, 1, 3, 2});
  EXPECT_EQ(s.n, 4u);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 4);
  EXPECT_DOUBLE_EQ(s.median, 2.5);
  EXPECT_DOUBLE_EQ(s.q1, 1.75);  // h = 3·0.25 = 0.75: 1 + 0.75·(2 - 1)
  EXPECT_DOUBLE_EQ(s.q3, 3.25);
  EXPECT_DOUBLE_EQ(s.iqr, 1.5);
  EXPECT_DOUBLE_EQ(s.mean, 2.5);
  EXPECT_NEAR(s.stddev, 1.2909944487358056, 1e-15);  // sqrt(5/3): squares 2.25+0.25+0.25+2.25
  EXPECT_NEAR(s.cv, 0.5163977794943222, 1e-15);
}

TEST(Statistics, SpreadUsesTheSampleStandardDeviation) {
  const Spread s = spread({9, 4, 2, 5, 4, 7, 4, 5});
  EXPECT_DOUBLE_EQ(s.mean, 5);
  EXPECT_NEAR(s.stddev, 2.138089935299395, 1e-14);  // sqrt(32/7); the population form would be 2
  EXPECT_DOUBLE_EQ(s.median, 4.5);
  EXPECT_DOUBLE_EQ(s.q1, 4);    // h = 1.75 between 4 and 4
  EXPECT_DOUBLE_EQ(s.q3, 5.5);  // h = 5.25: 5 + 0.25·(7 - 5)
  const Spread odd = spread({5, 1, 3});
  EXPECT_DOUBLE_EQ(odd.median, 3);
  EXPECT_DOUBLE_EQ(odd.q1, 2);
  EXPECT_DOUBLE_EQ(odd.q3, 4);
}

TEST(Statistics, SpreadOfOneSampleAndOfZeroMean) {
  const Spread one = spread({3.5});
  EXPECT_EQ(one.n, 1u);
  EXPECT_DOUBLE_EQ(one.median, 3.5);
  EXPECT_DOUBLE_EQ(one.q1, 3.5);
  EXPECT_DOUBLE_EQ(one.q3, 3.5);
  EXPECT_DOUBLE_EQ(one.iqr, 0);
  EXPECT_DOUBLE_EQ(one.stddev, 0);
  EXPECT_DOUBLE_EQ(one.cv, 0);
  EXPECT_DOUBLE_EQ(spread({-1, 1}).cv, 0);  // mean 0: cv reported as 0, not inf
  EXPECT_THROW(spread({}), std::invalid_argument);
  EXPECT_THROW(spread({1, kNaN}), std::invalid_argument);
}

TEST(Statistics, TrimmedMeanDropsOneFastestAndOneSlowest) {
  EXPECT_DOUBLE_EQ(trimmed_mean({10, 1, 5, 7, 100}), 22.0 / 3);  // (5 + 7 + 10) / 3
  EXPECT_DOUBLE_EQ(trimmed_mean({1, 1, 5, 9, 9}), 5);             // only one of each tied extreme
  EXPECT_DOUBLE_EQ(trimmed_mean({2, 9, 2}), 2);
  EXPECT_DOUBLE_EQ(trimmed_mean({4, 8}), 6);  // n < 3: plain mean
  EXPECT_DOUBLE_EQ(trimmed_mean({3}), 3);
  EXPECT_THROW(trimmed_mean({}), std::invalid_argument);
}

TEST(Statistics, MannWhitneyExactMatchesBruteForceEnumeration) {
  const std::vector<std::pair<std::size_t, std::size_t>> sizes = {{3, 3}, {4, 5}, {5, 5}, {2, 7},
                                                                  {6, 6}, {9, 10}, {12, 12}};
  std::mt19937 rng(20240611);
  for (const auto& [n1, n2] : sizes) {
    std::vector<double> values(n1 + n2);
    std::iota(values.begin(), values.end(), 1.0);
    const std::vector<double> counts = brute_force_u_counts(n1, n2);
    for (int trial = 0; trial < 6; ++trial) {
      if (trial == 1) std::reverse(values.begin(), values.end());  // 0: old lowest, 1: old highest
      if (trial > 1) std::shuffle(values.begin(), values.end(), rng);
      std::vector<double> old_s, new_s;
      for (std::size_t k = 0; k < values.size(); ++k) (k < n1 ? old_s : new_s).push_back(0.25 + 1.5 * values[k]);
      SCOPED_TRACE(::testing::Message() << n1 << " v " << n2 << ", trial " << trial);
      const MannWhitney r = mann_whitney_u(old_s, new_s);
      EXPECT_TRUE(r.exact);
      EXPECT_DOUBLE_EQ(r.u_old, u_by_pairs(old_s, new_s));
      EXPECT_DOUBLE_EQ(r.u_new, u_by_pairs(new_s, old_s));
      EXPECT_NEAR(r.p_value, p_from_counts(counts, r.u_old), 1e-12);
    }
  }
}

TEST(Statistics, MannWhitneyExactTotalSeparation) {
  EXPECT_NEAR(mann_whitney_u({1, 2, 3}, {4, 5, 6}).p_value, 0.1, 1e-15);  // 2 / C(6,3)
  const MannWhitney five = mann_whitney_u({6, 7, 8, 9, 10}, {1, 2, 3, 4, 5});
  EXPECT_DOUBLE_EQ(five.u_old, 25);
  EXPECT_DOUBLE_EQ(five.u_new, 0);
  EXPECT_NEAR(five.p_value, 2.0 / 252, 1e-15);  // 0.0079365...
  // 50 v 50: 2 / C(100, 50) ~ 2e-29, far beyond 64-bit counts; C(100, 50) by its product here.
  std::vector<double> low(50), high(50);
  std::iota(low.begin(), low.end(), 0.0);
  std::iota(high.begin(), high.end(), 100.0);
  long double choose = 1;
  for (int k = 1; k <= 50; ++k) choose = choose * (50 + k) / k;
  const MannWhitney big = mann_whitney_u(high, low);
  EXPECT_TRUE(big.exact);
  EXPECT_NEAR(big.p_value / static_cast<double>(2 / choose), 1.0, 1e-9);
}

TEST(Statistics, MannWhitneyTextbookValues) {
  // scipy.stats.mannwhitneyu's documented example: U1 = 17, exact p = 0.1111...
  const MannWhitney sc = mann_whitney_u({19, 22, 16, 29, 24}, {20, 11, 17, 12});
  EXPECT_DOUBLE_EQ(sc.u_old, 17);
  EXPECT_NEAR(sc.p_value, 1.0 / 9, 1e-12);
  // Table of critical values, n1 = n2 = 10, two-sided alpha 0.05: U <= 23 is significant.
  // Ranks of the first sample {1..7, 11, 19, 20} give U = 23; {1..7, 12, 19, 20} give U = 24.
  const auto split = [](std::vector<int> ranks) {
    std::pair<std::vector<double>, std::vector<double>> s;
    for (int r = 1; r <= 20; ++r)
      (std::find(ranks.begin(), ranks.end(), r) != ranks.end() ? s.first : s.second).push_back(r);
    return s;
  };
  const auto [a23, b23] = split({1, 2, 3, 4, 5, 6, 7, 11, 19, 20});
  const auto [a24, b24] = split({1, 2, 3, 4, 5, 6, 7, 12, 19, 20});
  const MannWhitney at23 = mann_whitney_u(a23, b23), at24 = mann_whitney_u(a24, b24);
  EXPECT_DOUBLE_EQ(at23.u_old, 23);
  EXPECT_LT(at23.p_value, kAlpha);
  EXPECT_DOUBLE_EQ(at24.u_old, 24);
  EXPECT_GT(at24.p_value, kAlpha);
}

TEST(Statistics, MannWhitneyNormalApproximationWithTies) {
  const std::vector<double> old_s = {1, 2, 2, 3, 3, 3, 4, 5};
  const std::vector<double> new_s = {3, 4, 4, 5, 5, 6, 7, 7, 8};
  const MannWhitney r = mann_whitney_u(old_s, new_s);
  EXPECT_FALSE(r.exact);
  EXPECT_DOUBLE_EQ(r.u_old, u_by_pairs(old_s, new_s));
  EXPECT_DOUBLE_EQ(r.u_old + r.u_new, 8.0 * 9.0);
  EXPECT_NEAR(r.p_value, textbook_asymptotic_p(old_s, new_s), 1e-12);
  EXPECT_LT(r.p_value, 0.05);
  // No ties but 51 samples on one side: beyond the exact range, no tie term.
  std::vector<double> many(51), few = {10.5, 20.5, 30.5, 40.5, 60.5};
  std::iota(many.begin(), many.end(), 0.0);
  const MannWhitney wide = mann_whitney_u(many, few);
  EXPECT_FALSE(wide.exact);
  EXPECT_NEAR(wide.p_value, textbook_asymptotic_p(many, few), 1e-12);
}

TEST(Statistics, MannWhitneyProperties) {
  const std::vector<double> a = {1.1, 2.3, 2.9, 4.0, 5.5, 6.1};
  EXPECT_DOUBLE_EQ(mann_whitney_u(a, a).p_value, 1.0);  // identical samples (all tied in pairs)
  EXPECT_DOUBLE_EQ(mann_whitney_u({5, 5, 5}, {5, 5}).p_value, 1.0);  // every value equal
  const std::vector<double> b = {0.7, 3.3, 3.4, 8.0, 9.1, 9.2, 9.9};
  const std::vector<double> tied = {2.3, 2.3, 6.1, 7.0};
  for (const auto& other : {b, tied}) {
    const MannWhitney forward = mann_whitney_u(a, other), backward = mann_whitney_u(other, a);
    EXPECT_DOUBLE_EQ(forward.p_value, backward.p_value);
    EXPECT_DOUBLE_EQ(forward.u_old, backward.u_new);
    EXPECT_DOUBLE_EQ(forward.u_old + forward.u_new, static_cast<double>(a.size() * other.size()));
  }
  EXPECT_THROW(mann_whitney_u({}, a), std::invalid_argument);
  EXPECT_THROW(mann_whitney_u(a, {}), std::invalid_argument);
  EXPECT_THROW(mann_whitney_u(a, {1, kNaN}), std::invalid_argument);
}

TEST(Statistics, ReliableFromNineRepetitionsOnBothSides) {
  const auto samples = [](std::size_t n, double offset) {
    std::vector<double> v(n);
    std::iota(v.begin(), v.end(), offset);
    return v;
  };
  EXPECT_EQ(kMinReliableRepetitions, 9u);
  EXPECT_FALSE(mann_whitney_u(samples(8, 0.5), samples(9, 0)).reliable);
  EXPECT_FALSE(mann_whitney_u(samples(9, 0.5), samples(8, 0)).reliable);
  const MannWhitney nine = mann_whitney_u(samples(9, 0.5), samples(9, 0));
  EXPECT_TRUE(nine.reliable);
  EXPECT_EQ(nine.n_old, 9u);
  EXPECT_EQ(nine.n_new, 9u);
}

TEST(Statistics, RelativeChange) {
  EXPECT_DOUBLE_EQ(relative_change(100, 110), 0.1);
  EXPECT_DOUBLE_EQ(relative_change(100, 75), -0.25);
  EXPECT_DOUBLE_EQ(relative_change(-2, -1), 0.5);  // divided by |old|
  EXPECT_TRUE(std::isnan(relative_change(0, 3)));
}

TEST(Statistics, Scaling) {
  const Scaling strong = strong_scaling_from_times(1, 10, 4, 3);  // 1 rank 10 s, 4 ranks 3 s
  EXPECT_NEAR(strong.speedup, 10.0 / 3, 1e-12);
  EXPECT_NEAR(strong.efficiency, 10.0 / 12, 1e-12);
  const Scaling from_two = strong_scaling_from_times(2, 10, 8, 3);  // 2·10 rank-s vs 8·3
  EXPECT_NEAR(from_two.speedup, 3.3333333333333335, 1e-12);
  EXPECT_NEAR(from_two.efficiency, 20.0 / 24, 1e-12);
  const Scaling weak = weak_scaling_from_times(1, 10, 4, 12.5);
  EXPECT_NEAR(weak.efficiency, 0.8, 1e-12);
  EXPECT_NEAR(weak.speedup, 3.2, 1e-12);  // 4× the work in 1.25× the time
  EXPECT_NEAR(throughput_efficiency(8, 1000, 32, 3000), 0.75, 1e-12);  // 3000 of an ideal 4000
  // HybridFlow-style: 16 GPUs at 1000 tokens/s, 128 GPUs at 5344 tokens/s -> 5.344× for 8× GPUs.
  EXPECT_NEAR(hybridflow_strong_efficiency(16, 1000, 128, 5344), 0.668, 1e-12);
  EXPECT_THROW(strong_scaling_from_times(0, 10, 4, 3), std::invalid_argument);
  EXPECT_THROW(strong_scaling_from_times(1, 10, 4, 0), std::invalid_argument);
  EXPECT_THROW(weak_scaling_from_times(1, -1, 4, 3), std::invalid_argument);
  EXPECT_THROW(weak_scaling_from_times(1, 10, -4, 3), std::invalid_argument);
  EXPECT_THROW(throughput_efficiency(1, kNaN, 4, 3), std::invalid_argument);
  EXPECT_THROW(hybridflow_strong_efficiency(16, 1000, 128, std::numeric_limits<double>::infinity()),
               std::invalid_argument);
}
