// live_refresh_test.cpp — a database a job is still writing: the real recorder commits steps into
// a file the window has open, and the window re-reads it without being asked, keeps the selection,
// and re-analyses the shown run.
#include <gtest/gtest.h>

#include <QItemSelectionModel>
#include <QSortFilterProxyModel>
#include <QTableView>
#include <QTest>

#include "hybridscope/probes/recorder.h"
#include "hybridscope/viewer/main_window.h"
#include "hybridscope/viewer/runs_model.h"
#include "viewer_fixtures.h"

namespace hs::viewer {
namespace {

constexpr int kWaitMs = 30000;

TEST(LiveRefresh, AFileBeingWrittenRefreshesTheBrowserAndTheShownRun) {
  const std::string path = hs::test::temp_db("viewer", "live.sqlite");
  const std::string other = testing::write_run_db("live_other.sqlite", "other", false);
  probes::Recorder rec(path, 0);
  testing::begin_one_rank_run(rec, "live-run");
  testing::record_one_rank_step(rec, 1);
  testing::record_one_rank_step(rec, 2);

  MainWindow window;
  window.set_live_refresh_interval_ms(50);
  bool idle = false;
  QObject::connect(&window, &MainWindow::became_idle, [&] { idle = true; });
  window.open_files({QString::fromStdString(other), QString::fromStdString(path)});
  ASSERT_TRUE(QTest::qWaitFor([&] { return idle && window.runs_model()->rowCount() == 2; }, kWaitMs));
  // Select the live run (both files number their run 1: pick it by name).
  int live_row = -1;
  for (int row = 0; row < window.runs_proxy()->rowCount(); ++row)
    if (window.runs_proxy()->index(row, RunsModel::kName).data().toString() == QLatin1String("live-run")) live_row = row;
  ASSERT_GE(live_row, 0);
  // The files load in parallel, so the live run may already be the first row, selected and shown
  // when both are loaded: selecting it again starts nothing and emits no became_idle. Wait for
  // what must hold instead.
  window.runs_view()->selectRow(live_row);
  ASSERT_TRUE(QTest::qWaitFor(
      [&] { return !window.busy() && window.shown_diagnosis() && window.shown_diagnosis()->run_name == "live-run"; },
      kWaitMs));
  const auto steps_shown = [&] {
    for (int row = 0; row < window.runs_proxy()->rowCount(); ++row)
      if (window.runs_proxy()->index(row, RunsModel::kName).data().toString() == QLatin1String("live-run"))
        return window.runs_proxy()->index(row, RunsModel::kSteps).data().toInt();
    return -1;
  };
  const auto status_shown = [&] {
    for (int row = 0; row < window.runs_proxy()->rowCount(); ++row)
      if (window.runs_proxy()->index(row, RunsModel::kName).data().toString() == QLatin1String("live-run"))
        return window.runs_proxy()->index(row, RunsModel::kStatus).data().toString();
    return QString();
  };
  EXPECT_EQ(steps_shown(), 2);
  EXPECT_EQ(status_shown(), QLatin1String("running"));
  // 2 steps, 1 of warm-up: one measured step.
  EXPECT_EQ(window.shown_diagnosis()->measured_steps, 1u);

  // The job goes on: two more steps, then it ends. Nobody tells the window.
  testing::record_one_rank_step(rec, 3);
  testing::record_one_rank_step(rec, 4);
  ASSERT_TRUE(QTest::qWaitFor([&] { return steps_shown() == 4; }, kWaitMs));
  // The shown run is analysed again with its new steps, and it is still the one selected.
  ASSERT_TRUE(QTest::qWaitFor([&] { return window.shown_diagnosis()->measured_steps == 3u; }, kWaitMs));
  EXPECT_EQ(window.shown_diagnosis()->run_name, "live-run");
  const QModelIndexList selected = window.runs_view()->selectionModel()->selectedRows(RunsModel::kName);
  ASSERT_EQ(selected.size(), 1);
  EXPECT_EQ(selected.front().data().toString(), QLatin1String("live-run"));

  rec.end_run(probes::RunStatus::kCompleted);
  rec.flush();
  ASSERT_TRUE(QTest::qWaitFor([&] { return status_shown() == QLatin1String("completed"); }, kWaitMs));
  EXPECT_TRUE(window.errors().isEmpty()) << window.errors().join('\n').toStdString();
}

}  // namespace
}  // namespace hs::viewer
