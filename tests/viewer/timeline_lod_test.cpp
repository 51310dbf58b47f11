// timeline_lod_test.cpp — the timeline's level of detail (TimelineLane::query) against a
// brute-force count: on a lane of 20 000 items (wide phases, bursts of tiny kernels, instants),
// for random windows and widths, every item overlapping the window is in exactly one entry, each
// entry's count and covered time equal a sum over its items, no aggregate holds a wide item, and
// the entries equal those of a plain linear reference of the merging rule. Plus hand-worked cases,
// lane packing and counter decimation.
#include <gtest/gtest.h>

#include <random>

#include "hybridscope/viewer/timeline_data.h"

namespace hs::viewer {
namespace {

// The merging rule written as one linear pass over every item (O(n) per query): the reference
// the binary-search version must match entry for entry.
std::vector<LodEntry> reference_query(const std::vector<TimelineItem>& items, std::int64_t t0, std::int64_t t1,
                                      double width_px) {
  const double min_ns = static_cast<double>(t1 - t0) / width_px;
  std::vector<LodEntry> out;
  bool open = false;  // an aggregate being built in out.back()
  for (std::size_t i = 0; i < items.size(); ++i) {
    const TimelineItem& it = items[i];
    if (!overlaps(it, t0, t1)) continue;
    const std::int64_t d = it.end_ns - it.start_ns;
    const bool narrow = static_cast<double>(d) < min_ns;
    if (open && narrow && static_cast<double>(it.start_ns) < static_cast<double>(out.back().end_ns) + min_ns) {
      out.back().end_ns = it.end_ns;
      out.back().count += 1;
      out.back().covered_ns += d;
      continue;
    }
    out.push_back({it.start_ns, it.end_ns, static_cast<std::uint32_t>(i), 1, d});
    open = narrow;
  }
  return out;
}

// A lane like a busy GPU stream under a training loop: per "step" a wide phase, then a burst of
// 1-20 ns kernels 0-30 ns apart, some zero-length instants, then idle gaps of up to 50 µs.
std::vector<TimelineItem> fixture_items(std::size_t n, std::uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<TimelineItem> items;
  std::int64_t t = 1'000'000'000;  // monotonic ns, far from 0 like a real clock
  while (items.size() < n) {
    const std::int64_t wide = 20'000 + static_cast<std::int64_t>(rng() % 200'000);
    items.push_back({t, t + wide, 0, 0});
    t += wide + static_cast<std::int64_t>(rng() % 3);
    const int burst = 1 + static_cast<int>(rng() % 400);
    for (int k = 0; k < burst && items.size() < n; ++k) {
      const std::int64_t d = (rng() % 10 == 0) ? 0 : 1 + static_cast<std::int64_t>(rng() % 20);
      items.push_back({t, t + d, static_cast<std::uint32_t>(1 + rng() % 5), 0});
      t += d + static_cast<std::int64_t>(rng() % 31);
    }
    t += static_cast<std::int64_t>(rng() % 50'000);
  }
  return items;
}

TEST(TimelineLod, EveryItemOnceCountsAndCoveredTimeMatchBruteForceOnRandomWindows) {
  const auto items = fixture_items(20'000, 7);
  const TimelineLane lane(TimelineKind::kKernel, 0, items);
  const std::int64_t first = items.front().start_ns, last = items.back().end_ns;
  std::mt19937_64 rng(11);
  std::vector<LodEntry> entries;
  std::size_t aggregates_seen = 0, singles_seen = 0;
  for (int trial = 0; trial < 400; ++trial) {
    // Windows from the whole lane down to ~100 ns, anywhere (also past either end).
    const double span = std::exp(std::uniform_real_distribution<double>(std::log(100.0), std::log(1.2 * static_cast<double>(last - first)))(rng));
    const auto t0 = first - static_cast<std::int64_t>(0.1 * static_cast<double>(last - first)) +
                    static_cast<std::int64_t>(std::uniform_real_distribution<double>(0.0, 1.2)(rng) * static_cast<double>(last - first));
    const std::int64_t t1 = t0 + std::max<std::int64_t>(1, static_cast<std::int64_t>(span));
    const double width = std::uniform_int_distribution<int>(1, 2400)(rng);
    const double min_ns = static_cast<double>(t1 - t0) / width;
    entries.clear();
    lane.query(t0, t1, width, entries);

    // Brute force: which items overlap the window, counted by walking all of them.
    std::vector<int> seen(items.size(), 0);
    std::size_t overlapping = 0;
    for (const auto& it : items) overlapping += overlaps(it, t0, t1) ? 1 : 0;
    std::size_t in_entries = 0;
    for (std::size_t e = 0; e < entries.size(); ++e) {
      const LodEntry& entry = entries[e];
      ASSERT_GE(entry.count, 1u);
      std::int64_t covered = 0;
      for (std::size_t i = entry.first; i < entry.first + entry.count; ++i) {
        ASSERT_TRUE(overlaps(items[i], t0, t1)) << "trial " << trial << ": item " << i << " outside the window";
        ++seen[i];
        covered += items[i].end_ns - items[i].start_ns;
        // An aggregate holds only items narrower than a pixel.
        if (entry.aggregate()) {
          ASSERT_LT(static_cast<double>(items[i].end_ns - items[i].start_ns), min_ns);
        }
      }
      in_entries += entry.count;
      EXPECT_EQ(entry.covered_ns, covered);
      EXPECT_EQ(entry.start_ns, items[entry.first].start_ns);
      EXPECT_EQ(entry.end_ns, items[entry.first + entry.count - 1].end_ns);
      EXPECT_LE(entry.covered_ns, entry.end_ns - entry.start_ns);
      // Two narrow entries side by side are more than a pixel apart (else they would be one).
      if (e > 0) {
        const LodEntry& prev = entries[e - 1];
        const bool prev_narrow = prev.aggregate() || static_cast<double>(prev.end_ns - prev.start_ns) < min_ns;
        const bool this_narrow = entry.aggregate() || static_cast<double>(entry.end_ns - entry.start_ns) < min_ns;
        if (prev_narrow && this_narrow) {
          EXPECT_GE(static_cast<double>(entry.start_ns), static_cast<double>(prev.end_ns) + min_ns) << "trial " << trial;
        }
      }
      aggregates_seen += entry.aggregate() ? 1 : 0;
      singles_seen += entry.aggregate() ? 0 : 1;
    }
    EXPECT_EQ(in_entries, overlapping) << "trial " << trial;
    for (std::size_t i = 0; i < items.size(); ++i)
      ASSERT_EQ(seen[i], overlaps(items[i], t0, t1) ? 1 : 0) << "trial " << trial << ": item " << i;

    // Bounded by pixels: narrow entries are a pixel apart, so at most one per pixel plus one per
    // wide item in view and the edges.
    std::size_t wide = 0;
    for (const auto& it : items)
      wide += overlaps(it, t0, t1) && static_cast<double>(it.end_ns - it.start_ns) >= min_ns ? 1 : 0;
    EXPECT_LE(entries.size(), 2 * wide + static_cast<std::size_t>(width) + 2) << "trial " << trial;

    // And the very entries of the linear reference.
    const auto expected = reference_query(items, t0, t1, width);
    ASSERT_EQ(entries.size(), expected.size()) << "trial " << trial;
    for (std::size_t e = 0; e < entries.size(); ++e) {
      EXPECT_EQ(entries[e].first, expected[e].first);
      EXPECT_EQ(entries[e].count, expected[e].count);
      EXPECT_EQ(entries[e].covered_ns, expected[e].covered_ns);
    }
  }
  // The windows exercised both sides of the rule.
  EXPECT_GT(aggregates_seen, 1000u);
  EXPECT_GT(singles_seen, 1000u);
}

TEST(TimelineLod, HandWorkedWindow) {
  // [0,100) wide; three 1 ns items 1 ns apart; [200,300) wide; at 400 px over [0,400): 1 ns/px,
  // so everything is >= 1 px and comes back alone. At 40 px: 10 ns/px, the three merge.
  const std::vector<TimelineItem> items = {{0, 100, 0, 0}, {100, 101, 1, 0}, {102, 103, 1, 0}, {104, 105, 1, 0}, {200, 300, 2, 0}};
  const TimelineLane lane(TimelineKind::kRange, 0, items);
  std::vector<LodEntry> out;
  lane.query(0, 400, 400, out);
  ASSERT_EQ(out.size(), 5u);
  out.clear();
  lane.query(0, 400, 40, out);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].count, 1u);
  EXPECT_EQ(out[1].first, 1u);
  EXPECT_EQ(out[1].count, 3u);
  EXPECT_EQ(out[1].start_ns, 100);
  EXPECT_EQ(out[1].end_ns, 105);
  EXPECT_EQ(out[1].covered_ns, 3);  // 3 × 1 ns of the 5 ns it spans
  EXPECT_EQ(out[2].first, 4u);
  // At 2 px: 200 ns/px, [0,100) is narrow too and takes the three in (each starts < 1 px after
  // the previous end); [200,300) starts 95 ns after 105 (< 200): also narrow, so one box of 5.
  out.clear();
  lane.query(0, 400, 2, out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].count, 5u);
  EXPECT_EQ(out[0].covered_ns, 100 + 3 + 100);
  // A window inside the wide first item: just it.
  out.clear();
  lane.query(10, 20, 100, out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].first, 0u);
  // An empty window or no pixels: nothing.
  out.clear();
  lane.query(20, 20, 100, out);
  lane.query(0, 400, 0, out);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(lane.covered_ns(1, 3), 3);
}

TEST(TimelineLod, OverlappingItemsArePackedIntoLanesThatDoNotOverlap) {
  // Two async collectives overlap the first: 3 items, 2 lanes; nested ranges of one depth: 1 lane.
  auto lanes = pack_lanes(TimelineKind::kComm, 0, {{10, 50, 0, 0}, {0, 20, 0, 1}, {30, 40, 0, 2}});
  ASSERT_EQ(lanes.size(), 2u);
  ASSERT_EQ(lanes[0].items().size(), 2u);  // [0,20) then [30,40)
  EXPECT_EQ(lanes[0].items()[0].detail, 1u);
  EXPECT_EQ(lanes[0].items()[1].detail, 2u);
  ASSERT_EQ(lanes[1].items().size(), 1u);
  EXPECT_EQ(lanes[1].items()[0].detail, 0u);
  EXPECT_EQ(pack_lanes(TimelineKind::kRange, 1, {{5, 10, 0, 0}, {0, 5, 0, 0}}).size(), 1u);
  EXPECT_TRUE(pack_lanes(TimelineKind::kRange, 1, {}).empty());
}

TEST(TimelineLod, CounterDecimationKeepsTheValueAtTheWindowStartAndEachColumnsExtremes) {
  CounterSeries s;
  s.points = {{0, 5}, {100, 7}, {101, 1}, {102, 9}, {250, 3}, {1000, 4}};
  // Window [50, 350) at 3 px: 100 ns per column. Column 0 starts with 5 (in force at 50) and
  // takes nothing else ([50,150) holds 100..102 -> column 0 too): first 5, min 1, max 9, last 9.
  const auto c = decimate(s, 50, 350, 3);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].x, 0);
  EXPECT_EQ(c[0].first, 5);
  EXPECT_EQ(c[0].min, 1);
  EXPECT_EQ(c[0].max, 9);
  EXPECT_EQ(c[0].last, 9);
  EXPECT_EQ(c[1].x, 2);  // 250 -> (250 − 50)/100 = column 2
  EXPECT_EQ(c[1].first, 3);
  EXPECT_TRUE(decimate(s, -100, -50, 10).empty());  // before the first sample: nothing in force
}

}  // namespace
}  // namespace hs::viewer
