// chart_data_test.cpp — the run page's and the scaling view's chart data (chart_data.h), checked
// without rendering: series count, names and values against the two-rank fixture
// (reports/analysis_fixture.h) and a hand-built matrix summary.
#include <gtest/gtest.h>

#include "hybridscope/reports/run_analysis.h"
#include "hybridscope/viewer/chart_data.h"
#include "hybridscope/viewer/loaded_database.h"
#include "matrix_db.h"
#include "viewer_fixtures.h"

namespace hs::viewer {
namespace {

reports::RunAnalysis fixture_analysis(const std::string& file) {
  const std::string path = testing::write_run_db(file, "charts", false);
  reports::RunDatabase db(path);
  return reports::analyze_run(reports::load_run(db, db.runs().front().id));
}

TEST(ChartData, StepMetricChartsOnlyForRecordedMetrics) {
  const auto analysis = fixture_analysis("chart_metrics.sqlite");
  const auto charts = step_metric_charts(analysis.data);
  // The fixture records timing_s/step and perf/total_num_tokens (plus two uncharted perf/*):
  // tokens/s and step time, no reward, entropy, KL or response length.
  ASSERT_EQ(charts.size(), 2u);
  EXPECT_EQ(charts[0].title, "Throughput (tokens/s)");
  EXPECT_EQ(charts[1].series.at(0).name, "timing_s/step");
  ASSERT_EQ(charts[0].series.size(), 1u);
  const auto& tokens = charts[0].series[0].points;
  ASSERT_EQ(tokens.size(), 4u);  // warm-up step 1 included
  // Step k lasts 185 + 10·k ms and processes 1000 tokens: step 1 1000/0.195, step 4 1000/0.225.
  EXPECT_DOUBLE_EQ(tokens[0].first, 1.0);
  EXPECT_NEAR(tokens[0].second, 1000.0 / 0.195, 1e-9);
  EXPECT_DOUBLE_EQ(tokens[3].first, 4.0);
  EXPECT_NEAR(tokens[3].second, 1000.0 / 0.225, 1e-9);
  EXPECT_NEAR(charts[1].series[0].points[2].second, 0.215, 1e-12);
}

// A run of `steps` steps recorded as step metrics only: step k lasts 0.1·k s over 100 tokens.
reports::RunData metric_run(int steps) {
  reports::RunData data;
  for (int k = 1; k <= steps; ++k) {
    data.metrics.push_back({k, "timing_s/step", 0.1 * k});
    data.metrics.push_back({k, "perf/total_num_tokens", 100.0});
  }
  reports::sort_by_start(data);
  return data;
}

TEST(ChartData, OverlaidChartsNormaliseUnequalStepCounts) {
  const auto four = metric_run(4), eight = metric_run(8), other_four = metric_run(4);
  // Equal step counts: x is the step.
  auto charts = overlay_metric_charts({&four, &other_four}, {"a", "b"});
  ASSERT_EQ(charts.size(), 2u);  // tokens/s and step time
  EXPECT_EQ(charts[0].title, "Throughput (tokens/s)");
  ASSERT_EQ(charts[0].series.size(), 2u);
  EXPECT_EQ(charts[0].series[1].name, "b");
  EXPECT_EQ(charts[0].x_label, "step");
  EXPECT_DOUBLE_EQ(charts[0].series[0].points[3].first, 4.0);
  // 4 against 8 steps: x is 100·step/last step, so both runs end at 100 %: the 4-step run's step 2
  // is at 50 %, the 8-step run's step 2 at 25 %; y is untouched (100 tokens / 0.2 s = 500 tokens/s).
  charts = overlay_metric_charts({&four, &eight}, {"short", "long"});
  ASSERT_EQ(charts.size(), 2u);
  EXPECT_NE(charts[1].x_label.find("progress"), std::string::npos);
  const auto& shorter = charts[0].series[0].points;
  const auto& longer = charts[0].series[1].points;
  ASSERT_EQ(shorter.size(), 4u);
  ASSERT_EQ(longer.size(), 8u);
  EXPECT_DOUBLE_EQ(shorter[1].first, 50.0);
  EXPECT_NEAR(shorter[1].second, 500.0, 1e-9);
  EXPECT_DOUBLE_EQ(longer[1].first, 25.0);
  EXPECT_DOUBLE_EQ(shorter.back().first, 100.0);
  EXPECT_DOUBLE_EQ(longer.back().first, 100.0);
  EXPECT_NEAR(charts[1].series[1].points[7].second, 0.8, 1e-12);  // step time of step 8
}

TEST(ChartData, StepPhaseBarsStackEachPhaseAndOther) {
  const auto bars = step_phase_bars(fixture_analysis("chart_steps.sqlite").phases);
  EXPECT_EQ(bars.categories, (std::vector<std::string>{"1", "2", "3", "4"}));
  std::vector<std::string> names;
  for (const auto& s : bars.sets) names.push_back(s.name);
  EXPECT_EQ(names, (std::vector<std::string>{"switch/train_to_rollout", "gen", "switch/rollout_to_train",
                                             "update_actor", "other"}));
  // Per step: switch 20 ms, gen 100 ms, switch back 10 ms, update 50 + 10·k ms on rank 1 (the
  // slowest), then 5 ms outside any phase.
  EXPECT_NEAR(bars.sets[0].values[0], 0.020, 1e-9);
  EXPECT_NEAR(bars.sets[1].values[2], 0.100, 1e-9);
  EXPECT_NEAR(bars.sets[3].values[0], 0.060, 1e-9);
  EXPECT_NEAR(bars.sets[3].values[3], 0.090, 1e-9);
  EXPECT_NEAR(bars.sets[4].values[1], 0.005, 1e-9);
}

TEST(ChartData, RankPhaseBarsAreTheMeansOverMeasuredSteps) {
  const auto bars = rank_phase_bars(fixture_analysis("chart_ranks.sqlite").phases);
  EXPECT_EQ(bars.categories, (std::vector<std::string>{"rank 0", "rank 1"}));
  ASSERT_EQ(bars.sets.size(), 4u);  // no "other" per rank
  EXPECT_EQ(bars.sets[3].name, "update_actor");
  // Steps 2..4 measured: rank 0 50 ms each; rank 1 70, 80, 90 ms -> 80 ms.
  EXPECT_NEAR(bars.sets[3].values[0], 0.050, 1e-9);
  EXPECT_NEAR(bars.sets[3].values[1], 0.080, 1e-9);
  EXPECT_NEAR(bars.sets[1].values[1], 0.100, 1e-9);
}

reports::CellSummary cell(int index, const std::string& world, const std::string& mode, double efficiency,
                          double tokens_per_s) {
  reports::CellSummary c;
  c.cell.cell_index = index;
  c.cell.levels = {world, mode};
  c.cell.ranks = std::stoi(world);
  c.scaling.push_back({"world", "strong", 1, mode == "naive" ? 0 : 1, 0.0, efficiency, 0.0});
  reports::Spread x;
  x.n = 1;
  x.median = tokens_per_s;
  c.metrics["tokens_per_s"] = x;
  return c;
}

TEST(ChartData, ScalingChartsOneLinePerOtherLevelWithTheIdeal) {
  reports::MatrixSummary m;
  m.axes = {{0, "world", true, "strong", "1"}, {1, "hybridscope.reshard.mode", false, "", "naive"}};
  m.cells = {cell(0, "1", "naive", 1.0, 600), cell(1, "1", "hybrid", 1.0, 650), cell(2, "2", "naive", 0.6, 720),
             cell(3, "2", "hybrid", 0.5, 760), cell(4, "4", "naive", 0.25, 500), cell(5, "4", "hybrid", 0.375, 620)};
  m.cells[5].metrics.clear();  // no throughput: left out of the throughput line only
  const auto charts = scaling_charts(m);
  ASSERT_EQ(charts.size(), 2u);
  const auto& eff = charts[0];
  EXPECT_EQ(eff.title, "Efficiency (strong) vs ranks along world");
  ASSERT_EQ(eff.series.size(), 3u);
  EXPECT_EQ(eff.series[0].name, "mode=naive");
  EXPECT_EQ(eff.series[1].name, "mode=hybrid");
  EXPECT_EQ(eff.series[2].name, "ideal");
  EXPECT_TRUE(eff.series[2].dashed);
  // Efficiencies chosen so that 100·e is exact in binary (0.5, 0.375, 0.25, 0.6 -> 60 rounds exactly).
  using P = std::vector<std::pair<double, double>>;
  EXPECT_EQ(eff.series[0].points, (P{{1, 100}, {2, 60}, {4, 25}}));
  EXPECT_EQ(eff.series[1].points, (P{{1, 100}, {2, 50}, {4, 37.5}}));
  EXPECT_EQ(eff.series[2].points, (P{{1, 100}, {4, 100}}));
  const auto& thr = charts[1];
  ASSERT_EQ(thr.series.size(), 2u);
  EXPECT_EQ(thr.series[0].points, (P{{1, 600}, {2, 720}, {4, 500}}));
  EXPECT_EQ(thr.series[1].points, (P{{1, 650}, {2, 760}}));
}

TEST(ChartData, LoadDatabaseBuildsTheScalingChartsOfARealMatrix) {
  const std::string path = hs::test::temp_db("viewer", "chart_matrix.sqlite");
  // One measured step per cell (after a 10 s warm-up step), 1000 tokens each.
  hs::test::write_matrix_db(path, "m", {{"world", true, "strong", "1"}, {"mode", false, "", ""}},
                            {{{"1", "naive"}, {"n=1"}, 1, {8.0}, 1000},
                             {{"1", "hybrid"}, {"h=1"}, 1, {8.0}, 1000},
                             {{"2", "naive"}, {"n=2"}, 2, {5.0}, 1000},
                             {{"2", "hybrid"}, {"h=2"}, 2, {4.0}, 1000}});
  const LoadedDatabase db = load_database(path);
  ASSERT_TRUE(db.ok()) << db.error;
  ASSERT_EQ(db.scaling_charts.size(), 2u);
  const auto& eff = db.scaling_charts[0];
  EXPECT_EQ(eff.title, "m: Efficiency (strong) vs ranks along world");
  ASSERT_EQ(eff.series.size(), 3u);
  // Strong efficiency t0·n0/(n·t) against each mode's 1-rank cell: naive 8/(2·5) = 80 %,
  // hybrid 8/(2·4) = 100 %.
  EXPECT_EQ(eff.series[0].name, "mode=naive");
  ASSERT_EQ(eff.series[0].points.size(), 2u);
  EXPECT_NEAR(eff.series[0].points[0].second, 100.0, 1e-9);
  EXPECT_NEAR(eff.series[0].points[1].second, 80.0, 1e-9);
  EXPECT_NEAR(eff.series[1].points[1].second, 100.0, 1e-9);
  // Throughput: 1000 tokens / 8, 5 and 4 s.
  const auto& thr = db.scaling_charts[1];
  ASSERT_EQ(thr.series.size(), 2u);
  EXPECT_NEAR(thr.series[0].points[0].second, 125.0, 1e-9);
  EXPECT_NEAR(thr.series[0].points[1].second, 200.0, 1e-9);
  EXPECT_NEAR(thr.series[1].points[1].second, 250.0, 1e-9);
}

TEST(ChartData, NoRankAxisNoScalingChart) {
  reports::MatrixSummary m;
  m.axes = {{0, "hybridscope.reshard.mode", false, "", ""}};
  m.cells = {cell(0, "1", "naive", 1.0, 600)};
  EXPECT_TRUE(scaling_charts(m).empty());
}

}  // namespace
}  // namespace hs::viewer
