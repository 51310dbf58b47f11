// main_window_test.cpp — the window and its loader with the event loop running: files load on
// worker threads, bad ones become messages and the window keeps going, the first run is analysed
// and its findings reach the Diagnosis panel.
#include <gtest/gtest.h>

#include <QApplication>
#include <QPalette>
#include <QSettings>
#include <QSortFilterProxyModel>
#include <QTabWidget>
#include <QTableView>
#include <QTest>

#include "hybridscope/viewer/database_loader.h"
#include "hybridscope/viewer/findings_model.h"
#include "hybridscope/viewer/main_window.h"
#include "hybridscope/viewer/runs_model.h"
#include "viewer_fixtures.h"

namespace hs::viewer {
namespace {

constexpr int kWaitMs = 30000;

QString q(const std::string& s) { return QString::fromStdString(s); }

TEST(DatabaseLoader, EveryFileAnswersOnceOnTheGuiThread) {
  DatabaseLoader loader;
  const std::string good = testing::write_run_db("loader_good.sqlite", "alpha", false);
  const std::string bad = testing::write_foreign_db("loader_foreign.sqlite");
  std::vector<std::shared_ptr<const LoadedDatabase>> answers;
  std::vector<std::pair<int, int>> progress;
  bool all = false;
  QObject::connect(&loader, &DatabaseLoader::database_loaded, [&](std::shared_ptr<const LoadedDatabase> d) {
    EXPECT_EQ(QThread::currentThread(), qApp->thread());
    answers.push_back(std::move(d));
  });
  QObject::connect(&loader, &DatabaseLoader::progress, [&](int done, int total) { progress.emplace_back(done, total); });
  QObject::connect(&loader, &DatabaseLoader::all_loaded, [&] { all = true; });
  loader.load({q(good), q(bad)});
  EXPECT_EQ(loader.pending(), 2);
  ASSERT_TRUE(QTest::qWaitFor([&] { return all; }, kWaitMs));
  EXPECT_EQ(loader.pending(), 0);
  ASSERT_EQ(answers.size(), 2u);
  int ok = 0;
  for (const auto& a : answers) ok += a->ok() ? 1 : 0;
  EXPECT_EQ(ok, 1);
  ASSERT_FALSE(progress.empty());
  EXPECT_EQ(progress.front(), std::make_pair(0, 2));
  EXPECT_EQ(progress.back(), std::make_pair(2, 2));

  // Of two diagnosis requests, each answer carries its own request number.
  std::vector<std::uint64_t> answered;
  QObject::connect(&loader, &DatabaseLoader::diagnosis_ready,
                   [&](std::uint64_t request, std::shared_ptr<const RunDiagnosis>) { answered.push_back(request); });
  const auto first = loader.diagnose(q(good), 1, 1);
  const auto second = loader.diagnose(q(good), 1, 1);
  EXPECT_NE(first, second);
  ASSERT_TRUE(QTest::qWaitFor([&] { return answered.size() == 2; }, kWaitMs));
}

TEST(MainWindow, ABadFileBesideAGoodOneGivesOneErrorAndOneDatabase) {
  MainWindow window;
  window.show();
  const std::string good = testing::write_run_db("window_good.sqlite", "alpha", false);
  const std::string text = testing::write_text_db("window_text.sqlite");
  bool idle = false;
  QObject::connect(&window, &MainWindow::became_idle, [&] { idle = true; });
  window.open_files({q(text), q(good)});
  EXPECT_TRUE(window.busy());
  ASSERT_TRUE(QTest::qWaitFor([&] { return idle; }, kWaitMs));

  ASSERT_EQ(window.errors().size(), 1);
  EXPECT_TRUE(window.errors().front().contains(QStringLiteral("window_text.sqlite"))) << window.errors().front().toStdString();
  EXPECT_EQ(window.runs_model()->database_count(), 1);
  EXPECT_EQ(window.runs_model()->rowCount(), 1);
  // The first run was selected and analysed off the GUI thread; its findings are on the right.
  ASSERT_NE(window.shown_diagnosis(), nullptr);
  EXPECT_TRUE(window.shown_diagnosis()->ok());
  EXPECT_EQ(window.shown_diagnosis()->run_name, "alpha");
  EXPECT_EQ(window.findings_model()->rowCount(), static_cast<int>(window.shown_diagnosis()->findings.size()));
  EXPECT_GT(window.findings_model()->rowCount(), 0);
  // The good file went to the recent files; the bad one did not.
  const QStringList recent = QSettings().value(QStringLiteral("recent_files")).toStringList();
  EXPECT_TRUE(recent.contains(q(good)));
  EXPECT_FALSE(recent.contains(q(text)));
}

TEST(MainWindow, ForeignAndNewerSchemaFilesAreReportedAndTheWindowKeepsWorking) {
  MainWindow window;
  bool idle = false;
  QObject::connect(&window, &MainWindow::became_idle, [&] { idle = true; });
  window.open_files({q(testing::write_foreign_db("window_foreign.sqlite")),
                     q(testing::write_newer_schema_db("window_newer.sqlite"))});
  ASSERT_TRUE(QTest::qWaitFor([&] { return idle; }, kWaitMs));
  ASSERT_EQ(window.errors().size(), 2);
  EXPECT_TRUE(window.errors().join('\n').contains(QStringLiteral("not a hybridscope run database")));
  EXPECT_TRUE(window.errors().join('\n').contains(QStringLiteral("newer")));
  EXPECT_EQ(window.runs_model()->rowCount(), 0);
  EXPECT_EQ(window.shown_diagnosis(), nullptr);

  // Afterwards a good file still opens, and selecting a run by id analyses that run.
  idle = false;
  window.open_files({q(testing::write_run_db("window_after.sqlite", "beta", true))});
  ASSERT_TRUE(QTest::qWaitFor([&] { return idle; }, kWaitMs));
  EXPECT_EQ(window.runs_model()->rowCount(), 1);
  ASSERT_NE(window.shown_diagnosis(), nullptr);
  EXPECT_EQ(window.shown_diagnosis()->run_name, "beta");
  EXPECT_FALSE(window.select_run(12345));
}

TEST(MainWindow, TheFilterNarrowsTheRunsBrowser) {
  MainWindow window;
  bool idle = false;
  QObject::connect(&window, &MainWindow::became_idle, [&] { idle = true; });
  window.open_files({q(testing::write_run_db("filter_a.sqlite", "alpha", true)),
                     q(testing::write_run_db("filter_b.sqlite", "beta", false))});
  ASSERT_TRUE(QTest::qWaitFor([&] { return idle && window.runs_model()->rowCount() == 2; }, kWaitMs));
  window.runs_proxy()->setFilterFixedString(QStringLiteral("fsdp"));
  ASSERT_EQ(window.runs_proxy()->rowCount(), 1);
  EXPECT_EQ(window.runs_proxy()->index(0, RunsModel::kName).data().toString(), "beta");
}

}  // namespace
}  // namespace hs::viewer

namespace hs::viewer {
namespace {

TEST(MainWindow, NextFindingWrapsAroundAndThemesSwitchThePalette) {
  MainWindow window;
  EXPECT_FALSE(window.step_finding(1));  // nothing loaded: no findings
  bool idle = false;
  QObject::connect(&window, &MainWindow::became_idle, [&] { idle = true; });
  window.open_files({q(testing::write_run_db("findings_walk.sqlite", "walk", false))});
  ASSERT_TRUE(QTest::qWaitFor([&] { return idle && window.shown_diagnosis(); }, kWaitMs));
  const int count = window.findings_model()->rowCount();
  ASSERT_GE(count, 1) << "the fixture's straggler at least";
  EXPECT_EQ(window.current_finding(), 0);  // the first is selected when the run is shown
  window.show_page(QStringLiteral("metrics"));
  ASSERT_TRUE(window.step_finding(1));
  EXPECT_EQ(window.current_finding(), 1 % count);
  EXPECT_EQ(window.findChild<QTabWidget*>()->currentIndex(), 0) << "F8 shows the Overview with the Diagnosis panel";
  ASSERT_TRUE(window.step_finding(-2));  // wraps below the first to the end
  EXPECT_EQ(window.current_finding(), ((1 - 2) % count + count) % count);
  ASSERT_TRUE(window.step_finding(count));  // a whole turn comes back
  EXPECT_EQ(window.current_finding(), ((1 - 2) % count + count) % count);

  EXPECT_FALSE(window.set_theme(QStringLiteral("sepia")));
  ASSERT_TRUE(window.set_theme(QStringLiteral("dark")));
  EXPECT_LT(QApplication::palette().color(QPalette::Window).lightness(), 100);
  EXPECT_EQ(QSettings().value(QStringLiteral("view/theme")).toString(), QStringLiteral("dark"));
  ASSERT_TRUE(window.set_theme(QStringLiteral("light")));
  EXPECT_GT(QApplication::palette().color(QPalette::Window).lightness(), 150);
  ASSERT_TRUE(window.set_theme(QStringLiteral("system")));
  EXPECT_EQ(QSettings().value(QStringLiteral("view/theme")).toString(), QStringLiteral("system"));
}

}  // namespace
}  // namespace hs::viewer
