// intervals_test.cpp — unions, intersections and gaps of time intervals, against results worked by
// hand and against a brute-force count of covered nanoseconds on random inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "hybridscope/reports/intervals.h"

using namespace hs::reports;

namespace {

using Intervals = std::vector<Interval>;

// Nanoseconds in [0, horizon) covered by at least one interval, counted one by one.
std::vector<bool> coverage(const Intervals& intervals, std::int64_t horizon) {
  std::vector<bool> covered(static_cast<std::size_t>(horizon), false);
  for (const Interval& i : intervals) {
    for (std::int64_t t = std::max<std::int64_t>(i.start_ns, 0); t < std::min(i.end_ns, horizon); ++t) {
      covered[static_cast<std::size_t>(t)] = true;
    }
  }
  return covered;
}

}  // namespace

TEST(IntervalsTest, MergesOverlappingTouchingAndNested) {
  // [0,10) and [5,15) overlap -> [0,15); [15,20) touches it -> [0,20);
  // [30,50) contains [35,40) -> [30,50); [60,60) is empty and vanishes.
  const Intervals merged = merge_intervals({{0, 10}, {5, 15}, {15, 20}, {30, 50}, {35, 40}, {60, 60}});
  EXPECT_EQ(merged, (Intervals{{0, 20}, {30, 50}}));
}

TEST(IntervalsTest, SortsUnsortedInputAndDropsReversedIntervals) {
  // The input comes in any order; [90, 80) has end < start and counts as empty.
  const Intervals merged = merge_intervals({{40, 45}, {90, 80}, {0, 5}, {20, 30}, {3, 8}});
  EXPECT_EQ(merged, (Intervals{{0, 8}, {20, 30}, {40, 45}}));
}

TEST(IntervalsTest, EmptyInputs) {
  EXPECT_TRUE(merge_intervals({}).empty());
  EXPECT_EQ(union_length({}), 0);
  EXPECT_EQ(union_length({{5, 5}, {9, 3}}), 0);
  EXPECT_EQ(intersection_length({}, {{0, 10}}), 0);
  EXPECT_EQ(intersection_length({{0, 10}}, {}), 0);
  EXPECT_EQ(gaps_within({10, 10}, {}), Intervals{});        // empty window: no gaps
  EXPECT_EQ(gaps_within({0, 100}, {}), (Intervals{{0, 100}}));  // nothing covered: one gap
}

TEST(IntervalsTest, UnionLengthCountsOverlapsOnce) {
  // Two overlapping 10 ns kernels cover 15 ns, not 20: [0,10) ∪ [5,15) = [0,15).
  EXPECT_EQ(union_length({{0, 10}, {5, 15}}), 15);
  // Nested: [0,100) ∪ [10,20) ∪ [30,40) = 100. Touching: [0,10) ∪ [10,20) = 20.
  EXPECT_EQ(union_length({{10, 20}, {0, 100}, {30, 40}}), 100);
  EXPECT_EQ(union_length({{10, 20}, {0, 10}}), 20);
}

TEST(IntervalsTest, IntersectionOfTwoUnions) {
  // a = [0,10) ∪ [20,30) ∪ [25,40) = [0,10) ∪ [20,40); b = [5,22) ∪ [35,50).
  // a ∩ b = [5,10) + [20,22) + [35,40) = 5 + 2 + 5 = 12.
  EXPECT_EQ(intersection_length({{25, 40}, {0, 10}, {20, 30}}, {{35, 50}, {5, 22}}), 12);
  // Touching is not overlapping: [0,10) ∩ [10,20) = 0.
  EXPECT_EQ(intersection_length({{0, 10}}, {{10, 20}}), 0);
  // One interval spanning several of the other: [0,100) ∩ ([10,20) ∪ [50,60)) = 20.
  EXPECT_EQ(intersection_length({{0, 100}}, {{50, 60}, {10, 20}}), 20);
  // Overlap inside one side does not double the result: ([0,10) ∪ [0,10)) ∩ [0,10) = 10.
  EXPECT_EQ(intersection_length({{0, 10}, {0, 10}}, {{0, 10}}), 10);
}

TEST(IntervalsTest, GapsWithinWindow) {
  // Window [0,100); covered [10,20) ∪ [15,30) ∪ [50,60) ∪ [95,120) ∪ [-5,2).
  // Gaps: [2,10), [30,50), [60,95).
  EXPECT_EQ(gaps_within({0, 100}, {{95, 120}, {10, 20}, {50, 60}, {15, 30}, {-5, 2}}),
            (Intervals{{2, 10}, {30, 50}, {60, 95}}));
  // Covered entirely: no gaps. Covered outside the window only: the window is one gap.
  EXPECT_EQ(gaps_within({10, 20}, {{0, 30}}), Intervals{});
  EXPECT_EQ(gaps_within({10, 20}, {{0, 10}, {20, 30}}), (Intervals{{10, 20}}));
}

TEST(IntervalsTest, AgreesWithBruteForceOnRandomIntervals) {
  constexpr std::int64_t kHorizon = 400;
  std::mt19937 rng(14);
  std::uniform_int_distribution<std::int64_t> start(-20, kHorizon);
  std::uniform_int_distribution<std::int64_t> length(-5, 60);  // some empty or reversed
  std::uniform_int_distribution<int> count(0, 12);
  const auto random_set = [&] {
    Intervals set(static_cast<std::size_t>(count(rng)));
    for (Interval& i : set) {
      i.start_ns = start(rng);
      i.end_ns = i.start_ns + length(rng);
    }
    return set;
  };
  for (int trial = 0; trial < 300; ++trial) {
    const Intervals a = random_set(), b = random_set();
    // Clip to [0, horizon) so brute force sees everything.
    Intervals a_in, b_in;
    for (const Interval& i : a) a_in.push_back({std::max<std::int64_t>(i.start_ns, 0), std::min(i.end_ns, kHorizon)});
    for (const Interval& i : b) b_in.push_back({std::max<std::int64_t>(i.start_ns, 0), std::min(i.end_ns, kHorizon)});
    const auto ca = coverage(a_in, kHorizon), cb = coverage(b_in, kHorizon);
    std::int64_t in_a = 0, in_both = 0;
    for (std::size_t t = 0; t < ca.size(); ++t) {
      in_a += ca[t];
      in_both += ca[t] && cb[t];
    }
    EXPECT_EQ(union_length(a_in), in_a) << "trial " << trial;
    EXPECT_EQ(intersection_length(a_in, b_in), in_both) << "trial " << trial;

    const Intervals merged = merge_intervals(a_in);
    for (std::size_t k = 1; k < merged.size(); ++k) {
      EXPECT_LT(merged[k - 1].end_ns, merged[k].start_ns) << "merged intervals must be disjoint and not touch";
    }
    // a minus b covers exactly the ns in a and not in b.
    const auto cs = coverage(subtract_intervals(a_in, b_in), kHorizon);
    for (std::size_t t = 0; t < ca.size(); ++t)
      EXPECT_EQ(cs[t] != 0, ca[t] && !cb[t]) << "trial " << trial << " t " << t;
    const Intervals difference = subtract_intervals(a_in, b_in);
    for (std::size_t k = 1; k < difference.size(); ++k) EXPECT_LE(difference[k - 1].end_ns, difference[k].start_ns);

    // Gaps and covered parts partition the window: every ns is in exactly one.
    const Interval window{50, 350};
    const auto cg = coverage(gaps_within(window, a), kHorizon);
    for (std::int64_t t = window.start_ns; t < window.end_ns; ++t) {
      EXPECT_NE(cg[static_cast<std::size_t>(t)], ca[static_cast<std::size_t>(t)]) << "trial " << trial << " t " << t;
    }
  }
}
