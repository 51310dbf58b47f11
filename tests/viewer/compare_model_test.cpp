// compare_model_test.cpp — the Compare page: compare_selected_runs on two fixture runs whose
// rank 1 update_actor grows by 10 and 25 ms per step (reports/analysis_fixture.h), CompareModel
// and ConfigDiffModel under QAbstractItemModelTester, their cells against hand-computed deltas,
// the colours of significant changes, and the window comparing two selected runs.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>

#include <QAbstractItemModelTester>
#include <QBrush>
#include <QItemSelectionModel>
#include <QTableView>
#include <QTest>

#include "hybridscope/viewer/compare_model.h"
#include "hybridscope/viewer/main_window.h"
#include "hybridscope/viewer/runs_model.h"
#include "viewer_fixtures.h"

namespace hs::viewer {
namespace {

constexpr auto kFatal = QAbstractItemModelTester::FailureReportingMode::Fatal;

struct TwoRuns {
  std::string old_path, new_path;
};

TwoRuns write_two_runs(const std::string& prefix) {
  TwoRuns out;
  out.old_path = hs::test::temp_db("viewer", prefix + "_old.sqlite");
  out.new_path = hs::test::temp_db("viewer", prefix + "_new.sqlite");
  reports::testing::FixtureOptions old_options;
  old_options.name = "old";
  reports::testing::write_two_rank_run(out.old_path, old_options);
  reports::testing::FixtureOptions new_options;
  new_options.name = "new";
  new_options.update_extra_ms_per_step = 25.0;
  new_options.config = {{"data.train_batch_size", "16"}, {"actor_rollout_ref.rollout.n", "4"}};
  reports::testing::write_two_rank_run(out.new_path, new_options);
  return out;
}

int row_of(const CompareModel& m, const QString& phase) {
  for (int r = 0; r < m.rowCount(); ++r)
    if (m.index(r, CompareModel::kPhase).data().toString() == phase) return r;
  return -1;
}

TEST(CompareModel, PhaseDeltasAndConfigDiffOfTwoFixtureRuns) {
  const TwoRuns files = write_two_runs("compare_model");
  const auto comparison = std::make_shared<const RunsComparison>(
      compare_selected_runs({{files.old_path, 1, 1, ""}, {files.new_path, 1, 1, "the new one"}}));
  ASSERT_TRUE(comparison->ok()) << comparison->error;
  ASSERT_EQ(comparison->labels.size(), 2u);
  EXPECT_EQ(comparison->labels[0], "run 1 'old' (compare_model_old.sqlite)");
  EXPECT_EQ(comparison->labels[1], "the new one");

  CompareModel model;
  QAbstractItemModelTester tester(&model, kFatal);
  EXPECT_EQ(model.rowCount(), 0);
  model.set_comparison(comparison);
  // The step metrics first (tokens/s and MFU: the fixture records no reward, KL, ...), then the phases.
  ASSERT_EQ(comparison->against.at(0).metrics.size(), 2u);
  ASSERT_EQ(model.rowCount(), 2 + static_cast<int>(comparison->against.at(0).phases.size()));
  EXPECT_EQ(model.columnCount(), CompareModel::kColumnCount);
  EXPECT_EQ(model.index(0, CompareModel::kPhase).data().toString(), "tokens/s");
  EXPECT_EQ(model.index(1, CompareModel::kPhase).data().toString(), "perf/mfu/actor");
  EXPECT_EQ(model.index(2, CompareModel::kPhase).data().toString(), "step");
  EXPECT_EQ(model.delta(0), nullptr);
  ASSERT_NE(model.metric_delta(0), nullptr);
  // tokens/s: 1000 tokens over 205, 215, 225 ms (median 1000/0.215 = 4651.2) against 235, 260,
  // 285 ms (median 1000/0.26 = 3846.2): −805.01, 0.215/0.26 − 1 = −17.31 %, p = 0.1 (3 v 3).
  EXPECT_EQ(model.index(0, CompareModel::kBaselineMedian).data().toString(), "4651.2");
  EXPECT_EQ(model.index(0, CompareModel::kMedian).data().toString(), "3846.2");
  EXPECT_EQ(model.index(0, CompareModel::kDelta).data().toString(), "-805.01");
  EXPECT_EQ(model.index(0, CompareModel::kChange).data().toString(), "-17.31 %");
  EXPECT_EQ(model.change_of(0), CompareModel::Change::kNone);  // p = 0.1: not significant
  EXPECT_EQ(model.index(0, CompareModel::kRun).data().toString(), "the new one");

  // update_actor (rank 1, the slowest): old 70, 80, 90 ms (median 80), new 100, 125, 150 ms
  // (median 125) over steps 2..4: +45 ms, +56.25 %; every new sample above every old one, 3 v 3:
  // exact two-sided p = 2 / C(6,3) = 0.1, not significant at 0.05, so not coloured.
  const int update = row_of(model, "update_actor");
  ASSERT_GE(update, 0);
  EXPECT_EQ(model.index(update, CompareModel::kBaselineMedian).data().toString(), "0.0800");
  EXPECT_EQ(model.index(update, CompareModel::kMedian).data().toString(), "0.1250");
  EXPECT_EQ(model.index(update, CompareModel::kDelta).data().toString(), "+0.0450");
  EXPECT_EQ(model.index(update, CompareModel::kChange).data().toString(), "+56.25 %");
  EXPECT_EQ(model.index(update, CompareModel::kPValue).data().toString(), "0.1");
  EXPECT_EQ(model.index(update, CompareModel::kSamples).data().toString(), "3 / 3");
  EXPECT_NEAR(model.index(update, CompareModel::kChange).data(CompareModel::kSortRole).toDouble(), 0.5625, 1e-12);
  EXPECT_FALSE(model.index(update, CompareModel::kChange).data(Qt::ForegroundRole).isValid());
  // The step: 185 + 10·k ms -> 205, 215, 225 (median 215); 185 + 25·k -> 235, 260, 285 (260):
  // +45/215 = +20.93 %.
  EXPECT_EQ(model.index(row_of(model, "step"), CompareModel::kChange).data().toString(), "+20.93 %");
  // gen lasts 100 ms on both sides.
  EXPECT_EQ(model.index(row_of(model, "gen"), CompareModel::kChange).data().toString(), "+0.00 %");

  ConfigDiffModel diff;
  QAbstractItemModelTester diff_tester(&diff, kFatal);
  diff.set_comparison(comparison);
  ASSERT_EQ(diff.rowCount(), 1);
  EXPECT_EQ(diff.index(0, ConfigDiffModel::kKey).data().toString(), "data.train_batch_size");
  EXPECT_EQ(diff.index(0, ConfigDiffModel::kBaselineValue).data().toString(), "8");
  EXPECT_EQ(diff.index(0, ConfigDiffModel::kValue).data().toString(), "16");

  model.set_comparison(nullptr);
  diff.set_comparison(nullptr);
  EXPECT_EQ(model.rowCount(), 0);
  EXPECT_EQ(diff.rowCount(), 0);
}

TEST(CompareModel, SignificantChangesAreColouredByWhichWayIsBetter) {
  auto c = std::make_shared<RunsComparison>();
  c->labels = {"base", "other"};
  reports::RunComparison rc;
  reports::PhaseDelta slower, faster, noise;
  slower.phase = "gen";
  slower.change = 0.5;
  slower.significant = true;
  faster.phase = "update_actor";
  faster.change = -0.25;
  faster.significant = true;
  noise.phase = "adv";
  noise.change = 0.5;
  rc.phases = {slower, faster, noise};
  rc.config_diff = {{"only.new", std::nullopt, std::string("1")}};
  reports::MetricDelta more_tokens, longer_answers;
  more_tokens.metric = "tokens/s";
  more_tokens.change = 0.2;
  more_tokens.significant = true;
  more_tokens.better = reports::Better::kHigher;
  longer_answers.metric = "response_length/mean";
  longer_answers.change = 0.3;
  longer_answers.significant = true;
  longer_answers.better = reports::Better::kNeither;
  rc.metrics = {more_tokens, longer_answers};
  c->against.push_back(rc);
  CompareModel model;
  QAbstractItemModelTester tester(&model, kFatal);
  model.set_comparison(c);
  const auto colour = [&](int row) {
    return model.index(row, CompareModel::kChange).data(Qt::ForegroundRole).value<QBrush>().color();
  };
  // Rows: tokens/s, response_length/mean, then gen, update_actor, adv.
  // More tokens/s is better (green) though the number went up; a longer answer is neither (blue).
  EXPECT_EQ(model.change_of(0), CompareModel::Change::kBetter);
  EXPECT_GT(colour(0).green(), colour(0).red());
  EXPECT_EQ(model.change_of(1), CompareModel::Change::kNeutral);
  EXPECT_GT(colour(1).blue(), colour(1).red());
  EXPECT_GT(colour(1).blue(), colour(1).green());
  // A slower phase is worse (red), a faster one better (green), an insignificant one uncoloured.
  EXPECT_EQ(model.change_of(2), CompareModel::Change::kWorse);
  EXPECT_GT(colour(2).red(), colour(2).green());
  EXPECT_EQ(model.change_of(3), CompareModel::Change::kBetter);
  EXPECT_GT(colour(3).green(), colour(3).red());
  EXPECT_FALSE(model.index(4, CompareModel::kChange).data(Qt::ForegroundRole).isValid());
  EXPECT_TRUE(model.index(2, CompareModel::kPValue).data().toString().endsWith(" *"));
  EXPECT_EQ(model.index(3, CompareModel::kChange).data().toString(), "-25.00 %");

  ConfigDiffModel diff;
  QAbstractItemModelTester diff_tester(&diff, kFatal);
  diff.set_comparison(c);
  EXPECT_EQ(diff.index(0, ConfigDiffModel::kBaselineValue).data().toString(), "(absent)");
}

TEST(CompareModel, BadInputIsAnErrorNotACrash) {
  EXPECT_FALSE(compare_selected_runs({}).ok());
  const std::string text = testing::write_text_db("compare_text.sqlite");
  const std::string good = testing::write_run_db("compare_good.sqlite", "alpha", false);
  const auto c = compare_selected_runs({{good, 1, 1, ""}, {text, 1, 1, ""}});
  EXPECT_FALSE(c.ok());
  EXPECT_TRUE(c.against.empty());
}

TEST(MainWindow, TwoSelectedRunsAreComparedOffTheGuiThread) {
  const TwoRuns files = write_two_runs("compare_window");
  MainWindow window;
  bool idle = false;
  QObject::connect(&window, &MainWindow::became_idle, [&] { idle = true; });
  window.open_files({QString::fromStdString(files.old_path), QString::fromStdString(files.new_path)});
  ASSERT_TRUE(QTest::qWaitFor([&] { return idle && window.runs_model()->rowCount() == 2; }, 30000));
  EXPECT_EQ(window.compare_model()->rowCount(), 0);  // one run selected: nothing to compare
  // The first run's page data came with its analysis: tokens/s and step time charts, 4 steps of phases.
  ASSERT_NE(window.shown_diagnosis(), nullptr);
  EXPECT_EQ(window.shown_diagnosis()->metric_charts.size(), 2u);
  EXPECT_EQ(window.shown_diagnosis()->step_phases.categories.size(), 4u);
  EXPECT_EQ(window.shown_diagnosis()->rank_phases.categories.size(), 2u);
  idle = false;
  window.runs_view()->selectAll();
  ASSERT_TRUE(QTest::qWaitFor([&] { return idle && window.compare_model()->rowCount() > 0; }, 30000));
  EXPECT_EQ(window.config_diff_model()->rowCount(), 1);
  ASSERT_NE(window.shown_comparison(), nullptr);
  // The baseline is the run highest in the table (the files load in parallel: either may be first).
  const std::string top = window.runs_proxy()->index(0, RunsModel::kName).data().toString().toStdString();
  const std::string second = top == "old" ? "new" : "old";
  // Both files number their run 1: a label names the database too ("run old#1: old").
  const auto label_of_row = [&](int row) {
    return window.runs_model()->run_label(window.runs_proxy()->mapToSource(window.runs_proxy()->index(row, 0)).row())
        .toStdString();
  };
  const std::string top_label = "run " + label_of_row(0) + ": " + top;
  const std::string second_label = "run " + label_of_row(1) + ": " + second;
  EXPECT_NE(label_of_row(0), label_of_row(1));
  EXPECT_EQ(window.shown_comparison()->labels.front(), top_label);
  // Both runs' tokens/s and step time overlaid, one line per run (4 steps each: x is the step).
  ASSERT_EQ(window.shown_comparison()->overlay_charts.size(), 2u);
  EXPECT_EQ(window.shown_comparison()->overlay_charts[0].series.size(), 2u);
  EXPECT_EQ(window.shown_comparison()->overlay_charts[0].x_label, "step");

  // Choosing the other run as the baseline flips the comparison. With "new" as the baseline
  // tokens/s went up by 0.26/0.215 − 1 = +20.93 %; with "old" down by 0.215/0.26 − 1 = −17.31 %.
  idle = false;
  ASSERT_TRUE(window.set_baseline(1));
  ASSERT_TRUE(QTest::qWaitFor([&] { return idle && window.shown_comparison()->labels.front() == second_label; }, 30000));
  ASSERT_NE(window.compare_model()->metric_delta(0), nullptr);
  EXPECT_EQ(window.compare_model()->index(0, CompareModel::kChange).data().toString(),
            second == "new" ? "+20.93 %" : "-17.31 %");
  EXPECT_FALSE(window.set_baseline(2));  // two runs selected: no third
  EXPECT_TRUE(window.show_page(QStringLiteral("compare")));
  EXPECT_FALSE(window.show_page(QStringLiteral("no-such-page")));
}

}  // namespace
}  // namespace hs::viewer
