// readability_test.cpp — what a user reads at the window's default size (1440×860) on a run shaped
// like a real FSDP one (busy_run_fixture.h): the Overview's share chart shows its phase names
// whole, each rank's 40 lanes of overlapping collectives fold into one row so that every rank is
// on screen, and two open databases' runs with the same id get distinct names. With
// HS_SCREENSHOT_DIR set, the Overview, Phases and Timeline pages are saved there as PNG
// (docs/images/viewer-*.png are made this way).
#include <gtest/gtest.h>

#include <algorithm>

#include <QApplication>
#include <QChartView>
#include <QDir>
#include <QGraphicsSimpleTextItem>
#include <QGraphicsTextItem>
#include <QMouseEvent>
#include <QScrollBar>
#include <QTest>

#include "busy_run_fixture.h"
#include "hybridscope/viewer/main_window.h"
#include "hybridscope/viewer/runs_model.h"
#include "hybridscope/viewer/timeline_data.h"
#include "hybridscope/viewer/timeline_view.h"
#include "viewer_fixtures.h"

namespace hs::viewer {
namespace {

constexpr int kWaitMs = 60000;

QString q(const std::string& s) { return QString::fromStdString(s); }

void save_screenshot(QWidget& window, const char* name) {
  const QByteArray dir = qgetenv("HS_SCREENSHOT_DIR");
  if (dir.isEmpty()) return;
  QApplication::processEvents();
  const QString file = QDir(QString::fromLocal8Bit(dir)).filePath(QString::fromLatin1(name));
  EXPECT_TRUE(window.grab().save(file)) << file.toStdString();
}

// The texts a chart draws (axis labels, bar labels, title), as its scene holds them.
QStringList chart_texts(QChartView* view) {
  QStringList out;
  for (QGraphicsItem* item : view->scene()->items()) {
    if (!item->isVisible()) continue;
    if (auto* t = dynamic_cast<QGraphicsTextItem*>(item)) out << t->toPlainText();
    else if (auto* s = dynamic_cast<QGraphicsSimpleTextItem*>(item)) out << s->text();
  }
  return out;
}

TEST(Readability, EachRanksOverlappingCollectivesFoldIntoOneRowUntilUnfolded) {
  const std::string path = testing::write_busy_run_db("busy_timeline.sqlite");
  auto data = std::make_shared<const TimelineData>(load_timeline(path, 1));
  ASSERT_TRUE(data->ok()) << data->error;
  std::vector<std::size_t> comm_tracks;
  for (std::size_t t = 0; t < data->tracks.size(); ++t)
    if (data->tracks[t].kind == TrackKind::kComm) {
      comm_tracks.push_back(t);
      EXPECT_EQ(data->tracks[t].lanes.size(), static_cast<std::size_t>(testing::kBusyGatherLanes));
    }
  ASSERT_EQ(comm_tracks.size(), static_cast<std::size_t>(testing::kBusyRanks));

  TimelineView view;
  view.resize(1200, 700);
  view.set_data(data);
  view.show();
  ASSERT_TRUE(QTest::qWaitForWindowExposed(&view));
  // Folded: one row per rank's collectives, every rank's rows within the window's height.
  int comm_rows = 0;
  for (int r = 0; r < view.row_count(); ++r) comm_rows += data->tracks[view.row_track(r)].kind == TrackKind::kComm;
  EXPECT_EQ(comm_rows, testing::kBusyRanks);
  for (std::size_t t : comm_tracks) {
    EXPECT_TRUE(view.track_foldable(t));
    EXPECT_FALSE(view.track_expanded(t));
  }
  const int folded_rows = view.row_count();
  EXPECT_LE(TimelineView::kRulerHeight + folded_rows * TimelineView::kLaneHeight +
                view.track_count() * TimelineView::kTrackGap,
            700)
      << "every rank on one screen";
  // The folded row draws every lane's collectives: 48 gathers + 1 reduce-scatter per step, 3 steps.
  int folded_row = -1;
  for (int r = 0; r < view.row_count() && folded_row < 0; ++r)
    if (view.row_track(r) == comm_tracks[0]) folded_row = r;
  ASSERT_GE(folded_row, 0);
  view.show_step(2, 0);
  std::uint32_t drawn = 0;
  for (const auto& e : view.row_entries(folded_row)) drawn += e.count;
  EXPECT_EQ(drawn, static_cast<std::uint32_t>(testing::kBusyGathersPerStep + 1));

  // Unfolded (a click on its label): its 40 lanes; the other ranks stay folded; a click folds it.
  int label_y = TimelineView::kRulerHeight + 2;
  for (int r = 0; r < folded_row; ++r) label_y += TimelineView::kLaneHeight;
  view.verticalScrollBar()->setValue(0);
  // Rows above it: lanes of earlier tracks plus their gaps.
  label_y += static_cast<int>(view.row_track(folded_row)) * TimelineView::kTrackGap;
  QTest::mouseClick(view.viewport(), Qt::LeftButton, {}, QPoint(20, label_y + TimelineView::kLaneHeight / 2));
  EXPECT_TRUE(view.track_expanded(comm_tracks[0]));
  EXPECT_EQ(view.row_count(), folded_rows + testing::kBusyGatherLanes - 1);
  EXPECT_FALSE(view.track_expanded(comm_tracks[1]));
  QTest::mouseClick(view.viewport(), Qt::LeftButton, {}, QPoint(20, label_y + TimelineView::kLaneHeight / 2));
  EXPECT_FALSE(view.track_expanded(comm_tracks[0]));
  EXPECT_EQ(view.row_count(), folded_rows);
}

TEST(Readability, RunsWithTheSameIdInTwoDatabasesHaveDistinctNames) {
  EXPECT_EQ(database_tags({"/w/out/bench.sqlite", "/w/old/bench.sqlite", "/w/out/other.sqlite"}),
            (QStringList{"out/bench", "old/bench", "other"}));
  EXPECT_EQ(database_tags({"/w/out/bench.sqlite"}), QStringList{"bench"});

  MainWindow window;
  bool idle = false;
  QObject::connect(&window, &MainWindow::became_idle, [&] { idle = true; });
  window.open_files({q(testing::write_run_db("same_id_a.sqlite", "alpha", false)),
                     q(testing::write_run_db("same_id_b.sqlite", "beta", false))});
  ASSERT_TRUE(QTest::qWaitFor([&] { return idle; }, kWaitMs));
  const RunsModel* runs = window.runs_model();
  ASSERT_EQ(runs->rowCount(), 2);
  ASSERT_EQ(runs->entry(0)->run.id, runs->entry(1)->run.id) << "both files number their run 1";
  // The files load concurrently: their rows come in whichever order they finish.
  const int a = runs->run_label(0) == QStringLiteral("same_id_a#1") ? 0 : 1, b = 1 - a;
  EXPECT_EQ(runs->run_label(a), QStringLiteral("same_id_a#1"));
  EXPECT_EQ(runs->run_label(b), QStringLiteral("same_id_b#1"));
  EXPECT_EQ(runs->data(runs->index(b, RunsModel::kRunId)).toString(), QStringLiteral("same_id_b#1"));
  // A bare id is ambiguous now; the database's tag (or file name) says which.
  EXPECT_EQ(runs->find_run({}, 1), -2);
  EXPECT_FALSE(window.select_run(1));
  idle = false;
  EXPECT_TRUE(window.select_runs(QStringList{"same_id_b#1"}));
  ASSERT_TRUE(QTest::qWaitFor([&] { return window.shown_diagnosis() && window.shown_diagnosis()->run_name == "beta"; },
                              kWaitMs));
  EXPECT_EQ(runs->find_run(QStringLiteral("same_id_a.sqlite"), 1), a);
}

TEST(Readability, OverviewPhasesAndTimelineReadAtTheDefaultSize) {
  const std::string path = testing::write_busy_run_db("busy_window.sqlite");
  MainWindow window;
  ASSERT_EQ(window.size(), QSize(1440, 860)) << "the default size the issue measures at";
  window.show();
  ASSERT_TRUE(QTest::qWaitForWindowExposed(&window));
  bool idle = false;
  QObject::connect(&window, &MainWindow::became_idle, [&] { idle = true; });
  window.open_files({q(path)});
  ASSERT_TRUE(QTest::qWaitFor([&] { return idle; }, kWaitMs));
  ASSERT_NE(window.shown_diagnosis(), nullptr);
  ASSERT_TRUE(window.shown_diagnosis()->ok());
  window.show_page(QStringLiteral("overview"));
  QApplication::processEvents();
  QTest::qWait(200);

  // The share chart: the visible chart view on the Overview, every phase name drawn whole.
  QChartView* share = nullptr;
  for (QChartView* v : window.findChildren<QChartView*>())
    if (v->isVisible() && v->chart()->title() == QStringLiteral("Share of the step")) share = v;
  ASSERT_NE(share, nullptr);
  const QStringList texts = chart_texts(share);
  // 11 phases and "other" do not fit its height: the largest keep their bars, whole; the smallest
  // are summed into one bar that says how many it holds (the table beside lists each).
  for (const char* phase : {"gen", "update_actor", "update_critic", "old_log_prob", "ref"})
    EXPECT_TRUE(texts.contains(QString::fromLatin1(phase))) << phase << " not drawn whole; drawn: "
                                                            << texts.join(QStringLiteral(" | ")).toStdString();
  const auto others = std::find_if(texts.begin(), texts.end(), [](const QString& t) { return t.endsWith(" others"); });
  ASSERT_NE(others, texts.end()) << texts.join(QStringLiteral(" | ")).toStdString();
  EXPECT_FALSE(texts.contains(QStringLiteral("adv"))) << "0.5 % of the step: among the others";
  for (const QString& t : texts) EXPECT_FALSE(t.endsWith(QStringLiteral("...")) || t.contains(QChar(0x2026))) << t.toStdString();
  save_screenshot(window, "viewer-overview.png");

  window.show_page(QStringLiteral("phases"));
  QTest::qWait(200);
  save_screenshot(window, "viewer-phases.png");

  window.show_page(QStringLiteral("timeline"));
  ASSERT_TRUE(QTest::qWaitFor([&] { return window.timeline_view()->data() != nullptr; }, kWaitMs));
  TimelineView* timeline = window.timeline_view();
  timeline->show_step(2, -1);
  QTest::qWait(200);
  // Every rank's collectives on screen: the last rank's comm row starts within the view.
  int last_comm_row = -1;
  for (int r = 0; r < timeline->row_count(); ++r)
    if (timeline->data()->tracks[timeline->row_track(r)].kind == TrackKind::kComm) last_comm_row = r;
  ASSERT_GE(last_comm_row, 0);
  EXPECT_EQ(timeline->data()->tracks[timeline->row_track(last_comm_row)].rank, testing::kBusyRanks - 1);
  EXPECT_LT(TimelineView::kRulerHeight + (last_comm_row + 1) * TimelineView::kLaneHeight +
                static_cast<int>(timeline->row_track(last_comm_row)) * TimelineView::kTrackGap,
            timeline->viewport()->height());
  save_screenshot(window, "viewer-timeline.png");
}

}  // namespace
}  // namespace hs::viewer
