// range_observer_test.cpp — an installed range observer sees every scoped range open and close,
// in LIFO order, with the range's name, depth and start time; removed, it sees nothing.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "hybridscope/probes/range.h"
#include "hybridscope/probes/range_observer.h"

using namespace hs::probes;

namespace {

struct Seen {
  std::vector<std::string> events;
  std::vector<std::int64_t> starts;
};

void on_push(void* context, const char* name, int depth, std::int64_t start_ns) noexcept {
  auto* seen = static_cast<Seen*>(context);
  seen->events.push_back(std::string("push ") + name + " " + std::to_string(depth));
  seen->starts.push_back(start_ns);
}
void on_pop(void* context) noexcept { static_cast<Seen*>(context)->events.push_back("pop"); }

}  // namespace

TEST(RangeObserver, SeesEveryRangeOpenAndCloseInOrder) {
  Seen seen;
  const RangeObserver observer{&on_push, &on_pop, &seen};
  StepTimings timings;  // no recorder: timing only
  timings.begin_step(1);
  ASSERT_EQ(set_range_observer(&observer), nullptr);
  const std::int64_t before = now_ns();
  {
    HS_PROBE_RANGE(timings, "step", kStep);
    { HS_PROBE_RANGE(timings, "gen", kPhase); }
    { HS_PROBE_RANGE(timings, "update_actor", kPhase); }
  }
  const std::int64_t after = now_ns();
  EXPECT_EQ(set_range_observer(nullptr), &observer);
  { HS_PROBE_RANGE(timings, "unobserved", kPhase); }

  EXPECT_EQ(seen.events, (std::vector<std::string>{"push step 0", "push gen 1", "pop", "push update_actor 1", "pop",
                                                   "pop"}));
  ASSERT_EQ(seen.starts.size(), 3u);
  for (std::size_t i = 0; i < seen.starts.size(); ++i) {
    EXPECT_GE(seen.starts[i], before);
    EXPECT_LE(seen.starts[i], after);
    if (i) {
      EXPECT_GE(seen.starts[i], seen.starts[i - 1]);
    }
  }
  EXPECT_EQ(timings.totals().size(), 4u);  // the unobserved range was still timed
}
