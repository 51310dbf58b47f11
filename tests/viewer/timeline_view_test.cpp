// timeline_view_test.cpp — the timeline read from the two-rank fixture database (tracks, lanes,
// steps), selection statistics against hand-computed sums, the selection table under
// QAbstractItemModelTester, the view's jumps and tool tips, and the window's Timeline tab reading
// the run off the GUI thread only once the tab is shown.
#include <gtest/gtest.h>

#include <tuple>

#include <QAbstractItemModelTester>
#include <QApplication>
#include <QTabWidget>
#include <QWheelEvent>
#include <QTest>

#include "hybridscope/reports/run_data.h"
#include "hybridscope/viewer/findings_model.h"
#include "hybridscope/viewer/main_window.h"
#include "hybridscope/viewer/timeline_stats_model.h"
#include "hybridscope/viewer/timeline_view.h"
#include "viewer_fixtures.h"

namespace hs::viewer {
namespace {

using reports::testing::kMs;
constexpr int kWaitMs = 30000;

const TimelineTrack* find_track(const TimelineData& d, TrackKind kind, int rank, std::size_t* index = nullptr) {
  for (std::size_t i = 0; i < d.tracks.size(); ++i)
    if (d.tracks[i].kind == kind && d.tracks[i].rank == rank) {
      if (index) *index = i;
      return &d.tracks[i];
    }
  return nullptr;
}

TEST(TimelineData, FixtureRunGivesThreadCollectiveAndSwitchTracksPerRank) {
  const std::string path = testing::write_run_db("timeline_tracks.sqlite", "tl", false);
  const TimelineData d = load_timeline(path, 1);
  ASSERT_TRUE(d.ok()) << d.error;
  EXPECT_EQ(d.run_name, "tl");
  // Per rank: its thread (depth 0 steps, depth 1 phases and switch ranges), its collectives, its
  // switches (spans, components); the fixture records no memory samples and no GPU activity.
  ASSERT_EQ(d.tracks.size(), 6u);
  for (int rank = 0; rank < 2; ++rank) {
    const TimelineTrack* thread = find_track(d, TrackKind::kThread, rank);
    ASSERT_NE(thread, nullptr);
    ASSERT_EQ(thread->lanes.size(), 2u);
    EXPECT_EQ(thread->lanes[0].items().size(), 4u);   // 4 steps
    EXPECT_EQ(thread->lanes[1].items().size(), 16u);  // 4 × (2 switches + gen + update_actor)
    const TimelineTrack* comm = find_track(d, TrackKind::kComm, rank);
    ASSERT_NE(comm, nullptr);
    ASSERT_EQ(comm->lanes.size(), 1u);
    EXPECT_EQ(comm->lanes[0].items().size(), 4u);
    const TimelineTrack* switches = find_track(d, TrackKind::kSwitches, rank);
    ASSERT_NE(switches, nullptr);
    ASSERT_EQ(switches->lanes.size(), 2u);
    EXPECT_EQ(switches->lanes[0].items().size(), 8u);
    EXPECT_EQ(switches->lanes[1].items().size(), 16u);  // 2 components each
    // Components run one after another from the switch's start: reshard_weights [t0, t0+12 ms).
    const TimelineItem& c = switches->lanes[1].items()[0];
    EXPECT_EQ(d.names[c.name], "reshard_weights");
    EXPECT_EQ(c.start_ns, 1000 * kMs);
    EXPECT_EQ(c.end_ns, 1012 * kMs);
  }
  // 2 ranks × (4 + 16 + 4 + 8 + 16) items.
  EXPECT_EQ(d.item_count, 96u);
  EXPECT_EQ(d.start_ns, 1000 * kMs);  // step 1 starts at 1 s
  EXPECT_EQ(d.end_ns, 4225 * kMs);    // step 4 ends on rank 1 at 4 s + 185 + 40 ms
  // Step 2 on rank 1 lasts 185 + 20 ms; over both ranks it spans the slower one.
  EXPECT_EQ(d.step_range(2, 1), std::make_pair(2000 * kMs, 2205 * kMs));
  EXPECT_EQ(d.step_range(2), std::make_pair(2000 * kMs, 2205 * kMs));
  EXPECT_EQ(d.step_range(2, 0), std::make_pair(2000 * kMs, 2185 * kMs));
  EXPECT_EQ(d.step_range(9).second, 0);
  // Where a finding points: rank 1's update_actor of step 3 is [3130, 3130 + 50 + 30) ms; over both
  // ranks it spans the longer one; a name the step lacks gives nothing.
  EXPECT_EQ(d.named_range(3, 1, "update_actor"), std::make_pair(3130 * kMs, 3210 * kMs));
  EXPECT_EQ(d.named_range(3, -1, "update_actor"), std::make_pair(3130 * kMs, 3210 * kMs));
  EXPECT_EQ(d.named_range(3, 0, "update_actor"), std::make_pair(3130 * kMs, 3180 * kMs));
  EXPECT_EQ(d.named_range(3, 0, "switch/train_to_rollout"), std::make_pair(3000 * kMs, 3020 * kMs));
  EXPECT_EQ(d.named_range(3, 0, "no-such-phase").second, 0);

  // The same tracks from a RunData (the strings path).
  const TimelineData from_data = build_timeline(reports::load_run(reports::RunDatabase(path), 1));
  EXPECT_EQ(from_data.tracks.size(), d.tracks.size());
  EXPECT_EQ(from_data.item_count, d.item_count);
}

// A range's payload (ranges.batch_size, context_len) reaches its item through range_details, by
// both readers; a range without one keeps only its category.
TEST(TimelineData, RangePayloadReachesTheItemsDetail) {
  const std::string path = hs::test::temp_db("viewer", "timeline_payload.sqlite");
  {
    probes::Recorder rec(path);
    testing::begin_one_rank_run(rec, "payload");
    rec.record_range({"step", probes::Category::kStep, 0, 1, 0, 100 * kMs});
    rec.record_range({"gen/decode_step", probes::Category::kPhase, 1, 1, 10 * kMs, 20 * kMs, 8, 513});
    rec.record_range({"gen", probes::Category::kPhase, 1, 1, 30 * kMs, 40 * kMs});
    rec.end_run(probes::RunStatus::kCompleted);
  }
  for (const TimelineData& d : {load_timeline(path, 1), build_timeline(reports::load_run(reports::RunDatabase(path), 1))}) {
    ASSERT_TRUE(d.ok()) << d.error;
    const TimelineTrack* thread = find_track(d, TrackKind::kThread, 0);
    ASSERT_NE(thread, nullptr);
    ASSERT_EQ(thread->lanes.size(), 2u);
    const auto& items = thread->lanes[1].items();
    ASSERT_EQ(items.size(), 2u);
    ASSERT_LT(items[0].detail, d.range_details.size());
    ASSERT_LT(items[1].detail, d.range_details.size());
    const RangeDetail& decode = d.range_details[items[0].detail];
    EXPECT_EQ(d.names[items[0].name], "gen/decode_step");
    EXPECT_EQ(d.names[decode.category], "phase");
    EXPECT_EQ(decode.batch_size, 8);
    EXPECT_EQ(decode.context_len, 513);
    const RangeDetail& gen = d.range_details[items[1].detail];
    EXPECT_EQ(d.names[gen.category], "phase");
    EXPECT_EQ(gen.batch_size, -1);
    EXPECT_EQ(gen.context_len, -1);
  }
}

TEST(TimelineData, GpuStreamsAndMemoryCountersFromARunData) {
  // A hand-built CUDA run of one rank: two kernels and a copy on stream 7 (the copy overlaps
  // sgemm, so it takes a second lane of the stream's track), memory sampled three times.
  reports::RunData run;
  run.run.id = 3;
  run.run.name = "cuda";
  const auto gpu = [](reports::GpuActivityRow::Kind kind, std::int64_t start, std::int64_t end, const char* name) {
    reports::GpuActivityRow g;
    g.kind = kind;
    g.device = 0;
    g.stream = 7;
    g.start_ns = start;
    g.end_ns = end;
    g.name = g.short_name = name;
    g.detail = kind == reports::GpuActivityRow::Kind::kKernel ? "gemm" : "HtoD";
    g.bytes = kind == reports::GpuActivityRow::Kind::kKernel ? 0 : 4096;
    return g;
  };
  run.gpu = {gpu(reports::GpuActivityRow::Kind::kKernel, 100, 200, "sgemm"),
             gpu(reports::GpuActivityRow::Kind::kMemcpy, 150, 400, "Memcpy HtoD"),
             gpu(reports::GpuActivityRow::Kind::kKernel, 300, 350, "softmax")};
  for (const auto& [ts, allocated, reserved] : {std::tuple{50, 10, 40}, std::tuple{250, 30, 40}, std::tuple{450, 20, 60}}) {
    reports::MemorySampleRow m;
    m.device = 0;
    m.ts_ns = ts;
    m.allocated_bytes = allocated;
    m.reserved_bytes = reserved;
    run.memory.push_back(m);
  }
  const TimelineData d = build_timeline(run);
  ASSERT_EQ(d.tracks.size(), 2u);
  const TimelineTrack& stream = d.tracks[0];
  EXPECT_EQ(stream.kind, TrackKind::kGpuStream);
  EXPECT_EQ(stream.label, "rank 0 GPU 0 stream 7");
  ASSERT_EQ(stream.lanes.size(), 2u);  // sgemm, softmax | the copy
  ASSERT_EQ(stream.lanes[1].items().size(), 1u);
  EXPECT_EQ(item_kind(d, stream.lanes[1], stream.lanes[1].items()[0]), TimelineKind::kMemcpy);
  EXPECT_EQ(item_kind(d, stream.lanes[0], stream.lanes[0].items()[1]), TimelineKind::kKernel);
  const TimelineTrack& memory = d.tracks[1];
  EXPECT_EQ(memory.kind, TrackKind::kMemory);
  EXPECT_EQ(memory.label, "rank 0 memory (cuda:0)");
  ASSERT_EQ(memory.counters.size(), 2u);
  EXPECT_EQ(memory.counters[0].name, "allocated");
  EXPECT_EQ(memory.counters[0].max_value, 30);
  EXPECT_EQ(memory.counters[1].max_value, 60);
  EXPECT_EQ(d.start_ns, 50);  // the first sample
  EXPECT_EQ(d.end_ns, 450);   // the last sample (after the copy's end at 400)
  // [120, 320): sgemm 80 of 100 ns, the copy 170 of 250, softmax 20 of 50; by kind and name.
  const auto rows = selection_statistics(d, {0, 1}, 120, 320);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].name, "Memcpy HtoD");
  EXPECT_EQ(rows[0].kind, TimelineKind::kMemcpy);
  EXPECT_EQ(rows[0].covered_ns, 170);
  EXPECT_EQ(rows[1].name, "sgemm");
  EXPECT_EQ(rows[1].covered_ns, 80);
  EXPECT_EQ(rows[2].name, "softmax");
  EXPECT_EQ(rows[2].covered_ns, 20);
  EXPECT_EQ(rows[2].total_ns, 50);
}

TEST(TimelineData, BadFileGivesAnErrorNotAnException) {
  const TimelineData d = load_timeline(testing::write_text_db("timeline_bad.sqlite"), 1);
  EXPECT_FALSE(d.ok());
  EXPECT_NE(d.error.find("timeline_bad.sqlite"), std::string::npos) << d.error;
  const TimelineData missing_run = load_timeline(testing::write_run_db("timeline_one.sqlite", "x", false), 42);
  EXPECT_FALSE(missing_run.ok());
}

TEST(TimelineSelection, StatisticsOfAWindowOverBothThreadsAndACollectiveTrack) {
  const std::string path = testing::write_run_db("timeline_select.sqlite", "tl", false);
  const TimelineData d = load_timeline(path, 1);
  ASSERT_TRUE(d.ok()) << d.error;
  std::size_t r0 = 0, r0_comm = 0, r1 = 0;
  ASSERT_NE(find_track(d, TrackKind::kThread, 0, &r0), nullptr);
  ASSERT_NE(find_track(d, TrackKind::kComm, 0, &r0_comm), nullptr);
  ASSERT_NE(find_track(d, TrackKind::kThread, 1, &r1), nullptr);
  // Window [2100, 2155) ms of step 2 (t0 = 2000 ms). Rank 0: step [2000, 2185), gen [2020, 2120),
  // switch/rollout_to_train [2120, 2130), update_actor [2130, 2180); rank 1 the same but
  // update_actor [2130, 2200) and step [2000, 2205); rank 0's all_reduce [2150, 2160).
  const auto rows = selection_statistics(d, {r0, r0_comm, r1}, 2100 * kMs, 2155 * kMs);
  ASSERT_EQ(rows.size(), 5u);
  // By time inside the window: step 2 × 55 = 110 ms, update_actor 2 × 25 (2130..2155) = 50,
  // gen 2 × 20 (2100..2120) = 40, the switch 2 × 10 = 20, all_reduce 5 (2150..2155).
  EXPECT_EQ(rows[0].name, "step");
  EXPECT_EQ(rows[0].count, 2u);
  EXPECT_EQ(rows[0].covered_ns, 110 * kMs);
  EXPECT_EQ(rows[0].total_ns, (185 + 205) * kMs);
  EXPECT_DOUBLE_EQ(rows[0].mean_ns(), 195.0 * kMs);
  EXPECT_EQ(rows[1].name, "update_actor");
  EXPECT_EQ(rows[1].covered_ns, 50 * kMs);
  EXPECT_EQ(rows[1].total_ns, (50 + 70) * kMs);
  EXPECT_EQ(rows[2].name, "gen");
  EXPECT_EQ(rows[2].covered_ns, 40 * kMs);
  EXPECT_EQ(rows[2].total_ns, 200 * kMs);
  EXPECT_EQ(rows[3].name, "switch/rollout_to_train");
  EXPECT_EQ(rows[3].covered_ns, 20 * kMs);
  EXPECT_EQ(rows[4].name, "all_reduce");
  EXPECT_EQ(rows[4].kind, TimelineKind::kComm);
  EXPECT_EQ(rows[4].count, 1u);
  EXPECT_EQ(rows[4].covered_ns, 5 * kMs);
  EXPECT_EQ(rows[4].total_ns, 10 * kMs);
  // A window ending where the collective starts leaves it out (half-open).
  const auto before = selection_statistics(d, {r0_comm}, 2100 * kMs, 2150 * kMs);
  EXPECT_TRUE(before.empty());
  EXPECT_TRUE(selection_statistics(d, {r0}, 2155 * kMs, 2100 * kMs).empty());

  // The table over them, under the tester while it changes.
  SelectionStatsModel model;
  QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::Fatal);
  model.set_rows(rows, 55 * kMs);
  ASSERT_EQ(model.rowCount(), 5);
  EXPECT_EQ(model.data(model.index(0, SelectionStatsModel::kName)).toString(), "step");
  EXPECT_EQ(model.data(model.index(0, SelectionStatsModel::kCount)).toString(), "2");
  EXPECT_EQ(model.data(model.index(0, SelectionStatsModel::kCovered)).toString(), "110.000 (200.0 %)");  // 110 of 55 ms, 2 tracks
  EXPECT_EQ(model.data(model.index(0, SelectionStatsModel::kMean)).toString(), "195.000");
  EXPECT_EQ(model.data(model.index(4, SelectionStatsModel::kKind)).toString(), "collective");
  EXPECT_EQ(model.data(model.index(1, SelectionStatsModel::kTotal), SelectionStatsModel::kSortRole).toLongLong(), 120 * kMs);
  model.set_rows({}, 0);
  EXPECT_EQ(model.rowCount(), 0);
}

TEST(TimelineView, JumpsToAStepAndTellsWhatIsUnderTheCursor) {
  const std::string path = testing::write_run_db("timeline_view.sqlite", "tl", false);
  auto data = std::make_shared<const TimelineData>(load_timeline(path, 1));
  ASSERT_TRUE(data->ok());
  TimelineView view;
  view.resize(1200, 600);
  EXPECT_TRUE(view.show_step(2, 1));  // kept until the data comes
  view.set_data(data);
  view.show();
  ASSERT_TRUE(QTest::qWaitForWindowExposed(&view));
  EXPECT_EQ(view.track_count(), 6);
  EXPECT_EQ(view.row_count(), 10);  // per rank: 2 thread lanes, 1 collective lane, 2 switch lanes
  // Step 2 on rank 1, [2000, 2205) ms, with 5 % of it on either side.
  const auto [t0, t1] = view.visible_range();
  EXPECT_NEAR(static_cast<double>(t0), 2000e6 - 0.05 * 205e6, 2.0);
  EXPECT_NEAR(static_cast<double>(t1), 2205e6 + 0.05 * 205e6, 2.0);
  EXPECT_FALSE(view.show_step(9));
  // A finding's (rank 1, step 3, "gen"): [3020, 3120) ms with 5 % either side.
  ASSERT_TRUE(view.show_named_range(3, 1, "gen"));
  EXPECT_NEAR(static_cast<double>(view.visible_range().first), 3020e6 - 5e6, 2.0);
  EXPECT_NEAR(static_cast<double>(view.visible_range().second), 3120e6 + 5e6, 2.0);
  EXPECT_FALSE(view.show_named_range(3, 1, "no-such-phase"));

  // Rank 0's gen of step 2, [2020, 2120) ms, on row 1 (its thread's depth-1 lane).
  ASSERT_TRUE(view.show_step(2, 0));
  const auto [v0, v1] = view.visible_range();
  const double width = view.viewport()->width() - TimelineView::kLabelWidth;
  const double x = TimelineView::kLabelWidth + (2070e6 - static_cast<double>(v0)) / (static_cast<double>(v1 - v0) / width);
  const int y = TimelineView::kRulerHeight + TimelineView::kLaneHeight + TimelineView::kLaneHeight / 2;
  const QString tip = view.tool_tip_at(QPoint(static_cast<int>(x), y));
  EXPECT_TRUE(tip.contains("gen")) << tip.toStdString();
  EXPECT_TRUE(tip.contains("100.00 ms")) << tip.toStdString();
  EXPECT_TRUE(tip.contains("phase")) << tip.toStdString();
  EXPECT_TRUE(view.tool_tip_at(QPoint(5, y)).isEmpty());  // the labels column

  // Painting records a frame time.
  view.clear_frame_times();
  view.viewport()->repaint();
  EXPECT_EQ(view.frame_times().size(), 1u);

  // Selecting rank 0's thread track over the gen: gen and its step, 100 ms each (a tie: by name).
  bool changed = false;
  QObject::connect(&view, &TimelineView::selection_changed, [&] { changed = true; });
  view.select(2020 * kMs, 2120 * kMs, {0});
  EXPECT_TRUE(changed);
  ASSERT_FALSE(view.selection().empty());
  ASSERT_EQ(view.selection().size(), 2u);  // the switches end at 2020 and start at 2120: outside
  EXPECT_EQ(view.selection()[0].name, "gen");
  EXPECT_EQ(view.selection()[0].covered_ns, 100 * kMs);
  EXPECT_EQ(view.selection()[1].name, "step");
  EXPECT_EQ(view.selection()[1].covered_ns, 100 * kMs);
}

TEST(TimelineView, MouseAndKeysZoomPanAndSelect) {
  const std::string path = testing::write_run_db("timeline_input.sqlite", "tl", false);
  TimelineView view;
  view.resize(1200, 600);
  view.set_data(std::make_shared<const TimelineData>(load_timeline(path, 1)));
  view.show();
  ASSERT_TRUE(QTest::qWaitForWindowExposed(&view));
  ASSERT_TRUE(view.show_step(2, 0));
  QWidget* vp = view.viewport();
  const auto span = [&] { return static_cast<double>(view.visible_range().second - view.visible_range().first); };
  const double width = vp->width() - TimelineView::kLabelWidth;

  // '+' zooms in 1.5× about the centre, '-' back, Home shows the whole run (1.02 × its 3.225 s).
  const double before = span();
  QTest::keyClick(&view, Qt::Key_Plus);
  EXPECT_NEAR(span(), before / 1.5, 2.0);
  QTest::keyClick(&view, Qt::Key_Minus);
  EXPECT_NEAR(span(), before, 2.0);
  // → pans a tenth of the window later.
  const auto t0 = view.visible_range().first;
  QTest::keyClick(&view, Qt::Key_Right);
  EXPECT_NEAR(static_cast<double>(view.visible_range().first - t0), before / 10, 2.0);

  // Dragging 100 px to the left shows 100 px later.
  const auto d0 = view.visible_range().first;
  const int y = TimelineView::kRulerHeight + 5;
  QTest::mousePress(vp, Qt::LeftButton, Qt::NoModifier, QPoint(600, y));
  QTest::mouseMove(vp, QPoint(500, y));
  QTest::mouseRelease(vp, Qt::LeftButton, Qt::NoModifier, QPoint(500, y));
  EXPECT_NEAR(static_cast<double>(view.visible_range().first - d0), 100 * span() / width, 2.0);

  // Shift+drag from rank 0's thread (row 0) to its collectives (row 2): two tracks selected over
  // the time between the two x positions.
  const auto time_at = [&](int x) { return view.visible_range().first + static_cast<std::int64_t>((x - TimelineView::kLabelWidth) * span() / width); };
  const int y_comm = TimelineView::kRulerHeight + 2 * TimelineView::kLaneHeight + 5;
  QTest::mousePress(vp, Qt::LeftButton, Qt::ShiftModifier, QPoint(400, y));
  QTest::mouseMove(vp, QPoint(700, y_comm));
  QTest::mouseRelease(vp, Qt::LeftButton, Qt::ShiftModifier, QPoint(700, y_comm));
  const auto [s0, s1] = view.selection_range();
  EXPECT_NEAR(static_cast<double>(s0), static_cast<double>(time_at(400)), span() / width + 2);
  EXPECT_NEAR(static_cast<double>(s1), static_cast<double>(time_at(700)), span() / width + 2);
  EXPECT_EQ(view.selection_tracks(), (std::vector<std::size_t>{0, 1}));
  EXPECT_FALSE(view.selection().empty());
  QTest::keyClick(&view, Qt::Key_Escape);
  EXPECT_TRUE(view.selection().empty());

  // Ctrl+wheel, one notch up, zooms in 1.25× keeping the time under the cursor in place.
  const double wheel_before = span();
  const QPointF at(800, y);
  const auto under = time_at(800);
  QWheelEvent wheel(at, vp->mapToGlobal(at), QPoint(), QPoint(0, 120), Qt::NoButton, Qt::ControlModifier,
                    Qt::NoScrollPhase, false);
  QApplication::sendEvent(vp, &wheel);
  EXPECT_NEAR(span(), wheel_before / 1.25, 2.0);
  EXPECT_NEAR(static_cast<double>(time_at(800)), static_cast<double>(under), span() / width + 2);
  QTest::keyClick(&view, Qt::Key_Home);
  EXPECT_NEAR(span(), 1.02 * 3225e6, 2.0);
}

TEST(TimelineView, ZoomedOutThousandsOfTinyItemsBecomeOneAggregateWithItsCount) {
  auto data = std::make_shared<TimelineData>();
  data->names = {"k"};
  std::vector<TimelineItem> items;
  for (int i = 0; i < 5000; ++i) items.push_back({i * 10LL, i * 10LL + 2, 0, 0});  // 2 ns every 10 ns
  TimelineTrack track;
  track.label = "rank 0 / tid 1";
  track.lanes.emplace_back(TimelineKind::kRange, 0, std::move(items));
  data->tracks.push_back(std::move(track));
  data->start_ns = 0;
  data->end_ns = 49992;
  data->item_count = 5000;
  TimelineView view;
  view.resize(800, 300);
  view.set_data(data);
  view.show();
  ASSERT_TRUE(QTest::qWaitForWindowExposed(&view));
  // Fitted: ~50 µs over ~600 px, 80+ ns per pixel: every gap (8 ns) is under a pixel, one box.
  const auto entries = view.row_entries(0);
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].count, 5000u);
  EXPECT_EQ(entries[0].covered_ns, 10000);  // 5000 × 2 ns
  const QString tip = view.tool_tip_at(QPoint(TimelineView::kLabelWidth + 100, TimelineView::kRulerHeight + 5));
  EXPECT_TRUE(tip.contains("5000 items")) << tip.toStdString();
  // Zoomed in as far as it goes (100 ns across the plot), a 2 ns item is a dozen pixels: singles.
  view.zoom(1000.0);
  for (const auto& e : view.row_entries(0)) EXPECT_EQ(e.count, 1u);
}

TEST(MainWindow, TimelineTabReadsTheSelectedRunOnlyOnceShown) {
  const std::string path = testing::write_run_db("timeline_window.sqlite", "tl", false);
  MainWindow window;
  bool idle = false;
  QObject::connect(&window, &MainWindow::became_idle, [&] { idle = true; });
  window.open_files({QString::fromStdString(path)});
  ASSERT_TRUE(QTest::qWaitFor([&] { return idle && window.shown_diagnosis() != nullptr; }, kWaitMs));
  EXPECT_EQ(window.timeline_view()->data(), nullptr);  // the Overview is shown: nothing read yet
  idle = false;
  ASSERT_TRUE(window.show_page(QStringLiteral("timeline")));
  EXPECT_TRUE(window.busy());
  ASSERT_TRUE(QTest::qWaitFor([&] { return idle && window.timeline_view()->data() != nullptr; }, kWaitMs));
  EXPECT_EQ(window.timeline_view()->track_count(), 6);
  EXPECT_EQ(window.timeline_view()->data()->item_count, 96u);
  // A jump (what the diagnosis panel will do): step 3 on rank 1, [3000, 3215) ms.
  EXPECT_TRUE(window.show_timeline_step(3, 1));
  const auto [t0, t1] = window.timeline_view()->visible_range();
  EXPECT_NEAR(static_cast<double>(t0), 3000e6 - 0.05 * 215e6, 2.0);
  EXPECT_NEAR(static_cast<double>(t1), 3215e6 + 0.05 * 215e6, 2.0);
  EXPECT_FALSE(window.show_timeline_range(7, 3000 * kMs, 3100 * kMs));  // no rank 7
}

TEST(MainWindow, AFindingJumpsToItsRangeStepAndRankInTheTimeline) {
  const std::string path = testing::write_run_db("timeline_finding.sqlite", "jump", false);
  MainWindow window;
  bool idle = false;
  QObject::connect(&window, &MainWindow::became_idle, [&] { idle = true; });
  window.open_files({QString::fromStdString(path)});
  ASSERT_TRUE(QTest::qWaitFor([&] { return idle && window.shown_diagnosis() != nullptr; }, kWaitMs));
  // The fixture's decode finding: decode is memory-bound (32 sequences), about the range "gen",
  // with no step and no rank: the jump shows gen in the first measured step (2) over every rank,
  // [2020, 2120) ms on both. (Its other finding is the role verdict.)
  int row = -1;
  for (int i = 0; i < window.findings_model()->rowCount(); ++i)
    if (window.findings_model()->finding(i)->rule == "decode-memory-bound") row = i;
  ASSERT_GE(row, 0);
  const reports::Finding& f = *window.findings_model()->finding(row);
  EXPECT_EQ(f.rule, "decode-memory-bound");
  EXPECT_EQ(f.range, "gen");
  EXPECT_FALSE(f.step);
  EXPECT_FALSE(f.rank);
  EXPECT_FALSE(window.jump_to_finding(99));
  idle = false;
  ASSERT_TRUE(window.jump_to_finding(row));  // kept until the timeline arrives
  ASSERT_TRUE(QTest::qWaitFor([&] { return idle && window.timeline_view()->data() != nullptr; }, kWaitMs));
  const auto* pages = window.findChild<QTabWidget*>();
  EXPECT_TRUE(pages->tabText(pages->currentIndex()).startsWith(QStringLiteral("Timeline")));
  auto [t0, t1] = window.timeline_view()->visible_range();
  EXPECT_NEAR(static_cast<double>(t0), 2020e6 - 0.05 * 100e6, 2.0);
  EXPECT_NEAR(static_cast<double>(t1), 2120e6 + 0.05 * 100e6, 2.0);
}

}  // namespace
}  // namespace hs::viewer

namespace hs::viewer {
namespace {

// A one_step_off run with a split rollout pool (hybridscope.placement.rollout=[1]) on 3 ranks:
// ranks 0 and 2 train, rank 1 generates. Step 2 is [0, 1000) ms everywhere; the actor's rank 0
// sends the weights [100, 150) ms, rank 1 receives them [102, 152) ms (1675776 bytes, the demo's).
reports::RunData split_pool_run(bool with_placement) {
  reports::RunData d;
  d.run.id = 1;
  d.run.name = "osp";
  d.run.world_size = 3;
  if (with_placement) d.config = {{"hybridscope.async_mode", "one_step_off"}, {"hybridscope.placement.rollout", "[1]"}};
  auto range = [](int rank, const std::string& name, std::int64_t t0_ms, std::int64_t t1_ms, int depth) {
    reports::RangeRow r;
    r.rank = rank;
    r.tid = 100 + rank;
    r.step = 2;
    r.name = name;
    r.category = depth == 0 ? "step" : "phase";
    r.depth = depth;
    r.start_ns = t0_ms * kMs;
    r.end_ns = t1_ms * kMs;
    return r;
  };
  for (int rank = 0; rank < 3; ++rank) d.ranges.push_back(range(rank, "step", 0, 1000, 0));
  d.ranges.push_back(range(0, "gen", 0, 100, 1));
  d.ranges.push_back(range(0, "update_actor", 150, 900, 1));
  d.ranges.push_back(range(2, "update_actor", 150, 900, 1));
  d.ranges.push_back(range(1, "gen", 152, 552, 1));
  auto sync = [](int rank, std::int64_t t0_ms, std::int64_t t1_ms, std::int64_t sent, std::int64_t received) {
    reports::SwitchRow w;
    w.rank = rank;
    w.step = 2;
    w.direction = "sync_rollout_weights";
    w.start_ns = t0_ms * kMs;
    w.end_ns = t1_ms * kMs;
    w.bytes_sent = sent;
    w.bytes_received = received;
    w.components = {{sent ? "sync_pack" : "sync_broadcast", 10 * kMs}, {sent ? "sync_broadcast" : "sync_unpack", 40 * kMs}};
    return w;
  };
  d.switches = {sync(0, 100, 150, 1675776, 0), sync(1, 102, 152, 0, 1675776)};
  return d;
}

TEST(TimelineData, ASplitRolloutPoolGroupsTracksByRoleAndLinksTheSync) {
  const TimelineData d = build_timeline(split_pool_run(true));
  ASSERT_TRUE(d.ok()) << d.error;
  // The actor's ranks first (0, then 2), then the pool's rank 1, each labelled with its role.
  ASSERT_EQ(d.role_groups.size(), 2u);
  EXPECT_EQ(d.role_groups[0].role, "actor");
  EXPECT_EQ(d.role_groups[0].ranks, (std::vector<int>{0, 2}));
  EXPECT_EQ(d.role_groups[1].role, "rollout");
  EXPECT_EQ(d.role_groups[1].ranks, std::vector<int>{1});
  std::vector<int> order;
  for (const auto& t : d.tracks)
    if (order.empty() || order.back() != t.rank) order.push_back(t.rank);
  EXPECT_EQ(order, (std::vector<int>{0, 2, 1}));
  EXPECT_EQ(d.tracks.front().label, "actor · rank 0 / tid 100");
  EXPECT_EQ(d.tracks.back().role, "rollout");
  EXPECT_EQ(role_of_rank(d, 2), "actor");
  EXPECT_EQ(role_of_rank(d, 1), "rollout");
  // The sync: rank 0 to rank 1, from the sender's start to the receiver's end.
  ASSERT_EQ(d.syncs.size(), 1u);
  EXPECT_EQ(d.syncs[0].step, 2);
  EXPECT_EQ(d.syncs[0].sender, 0);
  EXPECT_EQ(d.syncs[0].receivers, std::vector<int>{1});
  EXPECT_EQ(d.syncs[0].bytes, 1675776);
  EXPECT_EQ(d.syncs[0].start_ns, 100 * kMs);
  EXPECT_EQ(d.syncs[0].end_ns, 152 * kMs);

  // Without the placement (a colocated run's tracks): no roles, ranks in order.
  const TimelineData plain = build_timeline(split_pool_run(false));
  EXPECT_TRUE(plain.role_groups.empty());
  EXPECT_TRUE(plain.tracks.front().role.empty());
  EXPECT_EQ(plain.tracks.back().rank, 2);
  EXPECT_EQ(role_of_rank(plain, 1), "");
}

TEST(TimelineView, ASplitPoolsRolesHaveHeadersAndTheSyncIsABandBetweenThem) {
  auto data = std::make_shared<const TimelineData>(build_timeline(split_pool_run(true)));
  TimelineView view;
  view.resize(1000, 500);
  view.set_data(data);
  view.show();
  ASSERT_TRUE(QTest::qWaitForWindowExposed(&view));
  // A header row where each role's tracks begin: row 0, and the row before rank 1's first track.
  std::vector<int> headers;
  for (int r = 0; r < view.row_count(); ++r)
    if (view.row_is_header(r)) headers.push_back(r);
  ASSERT_EQ(headers.size(), 2u);
  EXPECT_EQ(headers[0], 0);
  EXPECT_TRUE(view.row_label(0).contains("ACTOR — ranks 0, 2"));
  EXPECT_TRUE(view.row_label(headers[1]).contains("ROLLOUT POOL — rank 1"));
  EXPECT_EQ(data->tracks[view.row_track(headers[1] + 1)].rank, 1);
  EXPECT_TRUE(view.row_entries(headers[1]).empty());  // a header draws no items
  EXPECT_TRUE(view.tool_tip_at(QPoint(TimelineView::kLabelWidth + 50, view.row_top(headers[1]) + 5)).isEmpty());

  // The sync's band runs from rank 0's switches row down to rank 1's, across the rollout header.
  const auto [top, bottom] = view.sync_band_rows(0);
  int sender_row = -1, receiver_row = -1;
  for (int r = 0; r < view.row_count(); ++r) {
    if (view.row_is_header(r)) continue;
    const TimelineTrack& t = data->tracks[view.row_track(r)];
    if (t.kind != TrackKind::kSwitches) continue;
    if (t.rank == 0 && sender_row < 0) sender_row = r;
    if (t.rank == 1) receiver_row = r;
  }
  ASSERT_GE(sender_row, 0);
  ASSERT_GE(receiver_row, 0);
  EXPECT_EQ(top, view.row_top(sender_row));
  EXPECT_EQ(bottom, view.row_top(receiver_row) + TimelineView::kLaneHeight);
  EXPECT_LT(top, view.row_top(headers[1]));
  EXPECT_GT(bottom, view.row_top(headers[1]) + TimelineView::kLaneHeight);
  // It is drawn: on the rollout header, at the link's x, the picture differs from the same run
  // without its sync.
  const auto [t0, t1] = view.visible_range();
  const double px = static_cast<double>(t1 - t0) / (view.viewport()->width() - TimelineView::kLabelWidth);
  const double x0 = TimelineView::kLabelWidth + static_cast<double>(100 * kMs - t0) / px;
  const double w = std::max(3.0, 52.0 * kMs / px);
  const QPoint at(static_cast<int>(x0 + w / 2.0), view.row_top(headers[1]) + TimelineView::kLaneHeight / 2);
  const QImage with_sync = view.viewport()->grab().toImage();
  TimelineData no_sync = build_timeline(split_pool_run(true));
  no_sync.syncs.clear();
  view.set_data(std::make_shared<const TimelineData>(std::move(no_sync)));
  const QImage without = view.viewport()->grab().toImage();
  EXPECT_NE(with_sync.pixel(at), without.pixel(at));
  // Away from the sync (at 700 ms) the header reads the same either way.
  const QPoint away(static_cast<int>(TimelineView::kLabelWidth + static_cast<double>(700 * kMs - t0) / px), at.y());
  EXPECT_EQ(with_sync.pixel(away), without.pixel(away));
}

}  // namespace
}  // namespace hs::viewer
