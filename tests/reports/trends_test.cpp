// trends_test.cpp — Student's t quantiles and least-squares trends against scipy, and the series
// run_trends() builds from a hand-made run.
//
// Golden numbers from scipy 1.17.1 (pip install scipy), e.g.
//   python3 -c "from scipy import stats; print(stats.t.ppf(0.975, 10))"
//   python3 -c "from scipy import stats; r = stats.linregress(x, y); t = stats.t.ppf(0.975, len(x) - 2);
//               print(r.slope, r.intercept, r.slope - t * r.stderr, r.slope + t * r.stderr)"
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "hybridscope/reports/trends.h"

using namespace hs::reports;

namespace {

constexpr double kSecond = 1e9;  // ns

std::vector<std::pair<double, double>> points(const std::vector<double>& x, const std::vector<double>& y) {
  std::vector<std::pair<double, double>> p;
  for (std::size_t i = 0; i < x.size(); ++i) p.emplace_back(x[i], y[i]);
  return p;
}

const LinearTrend* find(const std::vector<LinearTrend>& trends, const std::string& series) {
  for (const LinearTrend& t : trends) {
    if (t.series == series) return &t;
  }
  return nullptr;
}

RangeRow range(int rank, std::int64_t step, const std::string& name, const std::string& category, double start_s,
               double seconds) {
  RangeRow r;
  r.rank = rank;
  r.tid = 100 + rank;
  r.step = step;
  r.name = name;
  r.category = category;
  r.depth = category == "step" ? 0 : 1;
  r.start_ns = static_cast<std::int64_t>(start_s * kSecond);
  r.end_ns = r.start_ns + static_cast<std::int64_t>(std::llround(seconds * kSecond));
  return r;
}

}  // namespace

TEST(StudentTQuantileTest, MatchesScipy) {
  struct Case {
    double df, p, expected;  // scipy.stats.t.ppf(p, df)
  };
  const Case cases[] = {
      {1, 0.975, 12.706204736174694},   {1, 0.995, 63.656741162871526},   {1, 0.9, 3.0776835371752544},
      {2, 0.975, 4.302652729749462},    {2, 0.995, 9.924843200918287},    {2, 0.9, 1.8856180831641272},
      {3, 0.975, 3.1824463052837078},   {3, 0.995, 5.840909309733355},    {3, 0.9, 1.637744353696209},
      {5, 0.975, 2.5705818356363146},   {5, 0.995, 4.032142983555228},    {5, 0.9, 1.4758840488244815},
      {10, 0.975, 2.228138851986274},   {10, 0.995, 3.16927267261695},    {10, 0.9, 1.372183641110336},
      {30, 0.975, 2.0422724563012378},  {30, 0.995, 2.7499956535672254},  {30, 0.9, 1.3104150253913955},
      {100, 0.975, 1.9839715185235518}, {100, 0.995, 2.6258905214380173}, {100, 0.9, 1.290074761346516},
      {7, 0.025, -2.3646242515927844},  {4, 0.999999, 41.5778541501515},   {2.5, 0.6, 0.2814595127485477},
  };
  for (const Case& c : cases) {
    EXPECT_NEAR(student_t_quantile(c.p, c.df), c.expected, 1e-10 * std::fabs(c.expected))
        << "df=" << c.df << " p=" << c.p;
  }
  EXPECT_EQ(student_t_quantile(0.5, 9), 0.0);
  // df = 1 is the Cauchy distribution: the quantile is tan(π(p − ½)).
  EXPECT_NEAR(student_t_quantile(0.8, 1), std::tan(0.3 * 4.0 * std::atan(1.0)), 1e-12);
}

TEST(StudentTQuantileTest, RejectsBadArguments) {
  EXPECT_THROW(student_t_quantile(0.0, 5), std::invalid_argument);
  EXPECT_THROW(student_t_quantile(1.0, 5), std::invalid_argument);
  EXPECT_THROW(student_t_quantile(std::nan(""), 5), std::invalid_argument);
  EXPECT_THROW(student_t_quantile(0.975, 0.5), std::invalid_argument);
  EXPECT_THROW(student_t_quantile(0.975, std::nan("")), std::invalid_argument);
}

TEST(FitTrendTest, MatchesScipyLinregress) {
  // scipy.stats.linregress(x, y): slope 0.04424242424242424, intercept 1.3984242424242423,
  // stderr 0.004498341700366899; t.ppf(0.975, 8) = 2.306004135204166 ->
  // CI [0.033869229679816835, 0.05461561880503165].
  const std::vector<double> x{2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
  const std::vector<double> y{1.52, 1.49, 1.61, 1.58, 1.70, 1.66, 1.79, 1.75, 1.86, 1.90};
  const LinearTrend t = fit_trend("timing_s/update_actor", "s", points(x, y));
  EXPECT_EQ(t.series, "timing_s/update_actor");
  EXPECT_EQ(t.unit, "s");
  EXPECT_EQ(t.n, 10u);
  EXPECT_NEAR(t.slope, 0.04424242424242424, 1e-12);
  EXPECT_NEAR(t.intercept, 1.3984242424242423, 1e-12);
  EXPECT_NEAR(t.slope_ci_low, 0.033869229679816835, 1e-12);
  EXPECT_NEAR(t.slope_ci_high, 0.05461561880503165, 1e-12);
  EXPECT_NEAR(t.mean, 1.686, 1e-12);
  EXPECT_NEAR(t.relative_slope, 0.04424242424242424 / 1.686, 1e-12);
  EXPECT_NEAR(t.first_fit, 1.3984242424242423 + 2 * 0.04424242424242424, 1e-12);
  EXPECT_NEAR(t.last_fit, 1.3984242424242423 + 11 * 0.04424242424242424, 1e-12);
  EXPECT_TRUE(t.increasing);
  EXPECT_FALSE(t.decreasing);
}

TEST(FitTrendTest, FlatNoisySeriesIsNotATrend) {
  // linregress: slope −0.001293706293706284, CI [−0.007868763881266335, 0.005281351293853768].
  const std::vector<double> x{2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13};
  const std::vector<double> y{2.03, 1.97, 2.05, 1.95, 2.01, 2.04, 1.96, 2.02, 1.98, 2.03, 1.97, 2.00};
  const LinearTrend t = fit_trend("timing_s/gen", "s", points(x, y));
  EXPECT_NEAR(t.slope, -0.001293706293706284, 1e-12);
  EXPECT_NEAR(t.slope_ci_low, -0.007868763881266335, 1e-12);
  EXPECT_NEAR(t.slope_ci_high, 0.005281351293853768, 1e-12);
  EXPECT_FALSE(t.increasing);
  EXPECT_FALSE(t.decreasing);
  // The first-vs-last comparison a trend must not rest on: 2.03 -> 2.00 "fell", 1.97 -> 2.00 "grew".
}

TEST(FitTrendTest, DecreasingSeries) {
  const LinearTrend t = fit_trend("switch/train_to_rollout", "s", points({1, 2, 3, 4}, {4.0, 3.1, 1.9, 1.0}));
  EXPECT_LT(t.slope_ci_high, 0);
  EXPECT_TRUE(t.decreasing);
  EXPECT_FALSE(t.increasing);
}

TEST(FitTrendTest, TooFewPointsGiveAnInfiniteInterval) {
  const double inf = std::numeric_limits<double>::infinity();
  // Two points: the line is exact (slope (5 − 3)/(4 − 2) = 1) but there is no residual to judge it.
  const LinearTrend two = fit_trend("s", "s", points({2, 4}, {3, 5}));
  EXPECT_EQ(two.n, 2u);
  EXPECT_DOUBLE_EQ(two.slope, 1.0);
  EXPECT_DOUBLE_EQ(two.intercept, 1.0);
  EXPECT_EQ(two.slope_ci_low, -inf);
  EXPECT_EQ(two.slope_ci_high, inf);
  EXPECT_FALSE(two.increasing);
  // All x equal: no slope at all.
  const LinearTrend same_x = fit_trend("s", "s", points({3, 3, 3}, {1, 2, 3}));
  EXPECT_DOUBLE_EQ(same_x.slope, 0.0);
  EXPECT_DOUBLE_EQ(same_x.mean, 2.0);
  EXPECT_EQ(same_x.slope_ci_high, inf);
  EXPECT_FALSE(same_x.increasing || same_x.decreasing);
  const LinearTrend none = fit_trend("s", "s", {});
  EXPECT_EQ(none.n, 0u);
  EXPECT_FALSE(none.increasing || none.decreasing);
}

TEST(FitTrendTest, RejectsNaN) {
  EXPECT_THROW(fit_trend("s", "s", points({1, 2, 3}, {1, std::nan(""), 3})), std::invalid_argument);
}

TEST(RunTrendsTest, SeriesFromRangesSwitchesAndMemory) {
  // Two ranks, steps 0..6, step 0 warm-up (a 100 s step that would dominate any fit). Step s starts
  // at 100·s seconds. Rank 1 is the slower rank in the step and in update_actor; rank 0 in gen.
  RunData data;
  data.run.world_size = 2;
  const std::vector<double> gen{3.02, 2.97, 3.04, 2.96, 3.01, 2.99};  // rank 0, steps 1..6: flat
  for (std::int64_t s = 0; s <= 6; ++s) {
    const double t0 = 100.0 * static_cast<double>(s);
    const double sd = static_cast<double>(s);
    for (int rank = 0; rank < 2; ++rank) {
      const double step_s = s == 0 ? 100.0 : (rank == 0 ? 10.0 : 10.2) + 0.5 * sd;
      data.ranges.push_back(range(rank, s, "step", "step", t0, step_s));
      // gen in two ranges on rank 0 (summed per step: 1.0 + (gen − 1.0)); one 2.5 s range on rank 1.
      const double g = s == 0 ? 50.0 : gen[static_cast<std::size_t>(s - 1)];
      if (rank == 0) {
        data.ranges.push_back(range(rank, s, "gen", "phase", t0 + 0.1, 1.0));
        data.ranges.push_back(range(rank, s, "gen", "phase", t0 + 1.2, g - 1.0));
      } else {
        data.ranges.push_back(range(rank, s, "gen", "phase", t0 + 0.1, 2.5));
      }
      // update_actor: rank 0 flat 4.0 s, rank 1 4.0 + 0.2·s.
      data.ranges.push_back(range(rank, s, "update_actor", "phase", t0 + 5.0, rank == 0 ? 4.0 : 4.0 + 0.2 * sd));
      // Switch ranges are not phases: they must not show up as timing_s/switch/...
      data.ranges.push_back(range(rank, s, "switch/train_to_rollout", "switch", t0 + 0.01, 0.05));

      SwitchRow sw;
      sw.rank = rank;
      sw.step = s;
      sw.direction = "train_to_rollout";
      sw.start_ns = static_cast<std::int64_t>(t0 * kSecond);
      sw.end_ns = sw.start_ns + static_cast<std::int64_t>(std::llround(((rank == 0 ? 0.10 : 0.12) + 0.01 * sd) * kSecond));
      data.switches.push_back(sw);
      sw.direction = "rollout_to_train";
      sw.end_ns = sw.start_ns + static_cast<std::int64_t>(0.05 * kSecond);
      data.switches.push_back(sw);

      // GPU peak allocated on rank 1: (2 + 0.1·s) GB; rank 0 below it; a CPU sample (device −1)
      // of 50 GB that must not mix into the GPU series.
      for (const double gb : {1.0, rank == 0 ? 1.5 : 2.0 + 0.1 * sd}) {
        MemorySampleRow m;
        m.rank = rank;
        m.step = s;
        m.ts_ns = static_cast<std::int64_t>((t0 + 1.0) * kSecond);  // inside the step's range
        m.device = 0;
        m.allocated_bytes = static_cast<std::int64_t>(std::llround(gb * 1e9));
        data.memory.push_back(m);
      }
      MemorySampleRow cpu;
      cpu.rank = rank;
      cpu.step = s;
      cpu.ts_ns = static_cast<std::int64_t>((t0 + 1.0) * kSecond);
      cpu.device = -1;
      cpu.allocated_bytes = static_cast<std::int64_t>(50e9);
      data.memory.push_back(cpu);
    }
  }
  const std::vector<LinearTrend> trends = run_trends(data, phase_breakdown(data, 1));  // measured: steps 1..6

  std::vector<std::string> names;
  for (const LinearTrend& t : trends) names.push_back(t.series);
  EXPECT_EQ(names, (std::vector<std::string>{"timing_s/step", "timing_s/gen", "timing_s/update_actor",
                                             "switch/rollout_to_train", "switch/train_to_rollout",
                                             "memory/peak_allocated_gb"}));

  // Step: rank 1's 10.2 + 0.5·s exactly -> slope 0.5, intercept 10.2, a zero-width interval.
  const LinearTrend* step = find(trends, "timing_s/step");
  ASSERT_NE(step, nullptr);
  EXPECT_EQ(step->n, 6u);
  EXPECT_NEAR(step->slope, 0.5, 1e-9);
  EXPECT_NEAR(step->intercept, 10.2, 1e-9);
  EXPECT_TRUE(step->increasing);

  // gen: rank 0's two ranges summed = the flat series; linregress(1..6, gen): slope
  // −0.003142857142857152, intercept 3.0093333333333336, CI [−0.025429839460698447, 0.019144125174984143].
  const LinearTrend* g = find(trends, "timing_s/gen");
  ASSERT_NE(g, nullptr);
  EXPECT_NEAR(g->slope, -0.003142857142857152, 1e-8);
  EXPECT_NEAR(g->intercept, 3.0093333333333336, 1e-8);
  EXPECT_NEAR(g->slope_ci_low, -0.025429839460698447, 1e-8);
  EXPECT_NEAR(g->slope_ci_high, 0.019144125174984143, 1e-8);
  EXPECT_FALSE(g->increasing);

  // update_actor: rank 1's 4.0 + 0.2·s -> slope 0.2, first fit 4.2 (step 1), last 5.2 (step 6).
  const LinearTrend* actor = find(trends, "timing_s/update_actor");
  ASSERT_NE(actor, nullptr);
  EXPECT_NEAR(actor->slope, 0.2, 1e-9);
  EXPECT_NEAR(actor->first_fit, 4.2, 1e-9);
  EXPECT_NEAR(actor->last_fit, 5.2, 1e-9);
  EXPECT_TRUE(actor->increasing);

  // Switch: rank 1's 0.12 + 0.01·s -> slope 0.01; rollout_to_train flat 0.05 -> slope 0, not a trend.
  const LinearTrend* to_rollout = find(trends, "switch/train_to_rollout");
  ASSERT_NE(to_rollout, nullptr);
  EXPECT_NEAR(to_rollout->slope, 0.01, 1e-9);
  EXPECT_NEAR(to_rollout->intercept, 0.12, 1e-9);
  EXPECT_TRUE(to_rollout->increasing);
  const LinearTrend* to_train = find(trends, "switch/rollout_to_train");
  ASSERT_NE(to_train, nullptr);
  EXPECT_NEAR(to_train->slope, 0.0, 1e-12);
  EXPECT_FALSE(to_train->increasing || to_train->decreasing);

  // Memory: rank 1's GPU peak 2 + 0.1·s GB (the 50 GB CPU samples left out).
  const LinearTrend* memory = find(trends, "memory/peak_allocated_gb");
  ASSERT_NE(memory, nullptr);
  EXPECT_EQ(memory->unit, "GB");
  EXPECT_NEAR(memory->slope, 0.1, 1e-9);
  EXPECT_NEAR(memory->intercept, 2.0, 1e-9);
  EXPECT_TRUE(memory->increasing);
}

TEST(RunTrendsTest, FallsBackToStepMetricsWithoutRanges) {
  // Probes off: no ranges, only the trainer's reduced timing_s/* metrics (and others, ignored).
  RunData data;
  const std::vector<double> step{99.0, 5.1, 5.0, 5.3, 5.2, 5.5, 5.4, 5.7};  // steps 0..7, 0 = warm-up
  for (std::int64_t s = 0; s < 8; ++s) {
    data.metrics.push_back({s, "actor/pg_loss", 0.1});
    data.metrics.push_back({s, "timing_s/gen", 2.0});
    data.metrics.push_back({s, "timing_s/step", step[static_cast<std::size_t>(s)]});
  }
  const std::vector<LinearTrend> trends = run_trends(data, phase_breakdown(data, 1));  // measured: steps 1..7
  ASSERT_EQ(trends.size(), 2u);
  EXPECT_EQ(trends[0].series, "timing_s/step");
  EXPECT_EQ(trends[1].series, "timing_s/gen");
  // linregress(1..7, [5.1, 5.0, 5.3, 5.2, 5.5, 5.4, 5.7]): slope 0.10000000000000009,
  // intercept 4.914285714285715, CI [0.04310959634581313, 0.15689040365418705].
  EXPECT_EQ(trends[0].n, 7u);
  EXPECT_NEAR(trends[0].slope, 0.1, 1e-12);
  EXPECT_NEAR(trends[0].intercept, 4.914285714285715, 1e-12);
  EXPECT_NEAR(trends[0].slope_ci_low, 0.04310959634581313, 1e-12);
  EXPECT_NEAR(trends[0].slope_ci_high, 0.15689040365418705, 1e-12);
  EXPECT_TRUE(trends[0].increasing);
  EXPECT_FALSE(trends[1].increasing);
  EXPECT_DOUBLE_EQ(trends[1].slope, 0.0);
}

TEST(FitTrendTest, ThreePointsAreTooFewToCallATrend) {
  // A steep, clean rise over 3 points has a 95 % interval above zero (one residual degree of
  // freedom), but the rule needs kTrendMinPoints (4): the report must not say "increasing" where
  // the diagnosis stays silent.
  const LinearTrend three = fit_trend("s", "s", points({1, 2, 3}, {1.0, 2.0, 3.01}));
  EXPECT_GT(three.slope_ci_low, 0.0) << "the interval alone would call it";
  EXPECT_FALSE(three.increasing);
  const LinearTrend falling = fit_trend("s", "s", points({1, 2, 3}, {3.0, 2.0, 1.01}));
  EXPECT_FALSE(falling.decreasing);
  const LinearTrend four = fit_trend("s", "s", points({1, 2, 3, 4}, {1.0, 2.0, 3.01, 4.0}));
  EXPECT_TRUE(four.increasing);
}
