// timeline_live_test.cpp — the Timeline tab over a database a job is still writing: the real
// recorder commits more steps, the window re-reads the file on its own, and the timeline shows the
// new steps while keeping the time range the user was looking at.
#include <gtest/gtest.h>

#include <QTest>

#include "hybridscope/probes/recorder.h"
#include "hybridscope/viewer/main_window.h"
#include "hybridscope/viewer/timeline_view.h"
#include "viewer_fixtures.h"

namespace hs::viewer {
namespace {

constexpr int kWaitMs = 30000;
constexpr std::int64_t kMs = 1'000'000;


TEST(TimelineLive, ARunBeingWrittenGainsItsNewStepsAndKeepsTheView) {
  const std::string path = hs::test::temp_db("viewer", "timeline_live.sqlite");
  probes::Recorder rec(path, 0);
  testing::begin_one_rank_run(rec, "live-timeline");
  testing::record_one_rank_step(rec, 1);
  testing::record_one_rank_step(rec, 2);

  MainWindow window;
  window.set_live_refresh_interval_ms(50);
  window.open_files({QString::fromStdString(path)});
  ASSERT_TRUE(window.show_page(QStringLiteral("timeline")));
  TimelineView* view = window.timeline_view();
  const auto steps_read = [&]() -> std::size_t {
    const TimelineData* d = view->data();
    return d && !d->tracks.empty() && !d->tracks[0].lanes.empty() ? d->tracks[0].lanes[0].items().size() : 0;
  };
  ASSERT_TRUE(QTest::qWaitFor([&] { return !window.busy() && steps_read() == 2; }, kWaitMs));
  // Look at step 2: [2000, 2100) ms with 5 % either side.
  ASSERT_TRUE(window.show_timeline_step(2));
  const auto looked_at = view->visible_range();
  EXPECT_NEAR(static_cast<double>(looked_at.first), 1995e6, 2.0);

  testing::record_one_rank_step(rec, 3);
  testing::record_one_rank_step(rec, 4);
  ASSERT_TRUE(QTest::qWaitFor([&] { return steps_read() == 4; }, kWaitMs));
  EXPECT_EQ(view->data()->step_range(4), std::make_pair(4000 * kMs, 4100 * kMs));
  EXPECT_EQ(view->visible_range(), looked_at);  // still step 2, not fitted to the longer run
  rec.end_run(probes::RunStatus::kCompleted);
}

}  // namespace
}  // namespace hs::viewer
