// intervals.cpp — unions, intersections and gaps of half-open time intervals (intervals.h).
// Everything goes through merge_intervals(): sort by start, then sweep once, extending the current
// interval while the next one starts at or before its end. O(n log n) for n intervals.
#include "hybridscope/reports/intervals.h"

#include <algorithm>
#include <cstddef>

namespace hs::reports {

std::vector<Interval> merge_intervals(std::vector<Interval> intervals) {
  intervals.erase(std::remove_if(intervals.begin(), intervals.end(),
                                 [](const Interval& i) { return i.end_ns <= i.start_ns; }),
                  intervals.end());
  std::sort(intervals.begin(), intervals.end(), [](const Interval& a, const Interval& b) {
    return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.end_ns < b.end_ns;
  });
  std::vector<Interval> merged;
  for (const Interval& i : intervals) {
    // `<=`: [0, 10) and [10, 20) touch and become [0, 20).
    if (!merged.empty() && i.start_ns <= merged.back().end_ns) {
      merged.back().end_ns = std::max(merged.back().end_ns, i.end_ns);
    } else {
      merged.push_back(i);
    }
  }
  return merged;
}

std::int64_t union_length(std::vector<Interval> intervals) {
  std::int64_t total = 0;
  for (const Interval& i : merge_intervals(std::move(intervals))) total += i.end_ns - i.start_ns;
  return total;
}

std::int64_t intersection_length(std::vector<Interval> a, std::vector<Interval> b) {
  // Two disjoint sorted lists: walk both, adding the overlap of the current pair and advancing the
  // one that ends first (it cannot overlap anything later in the other list).
  const std::vector<Interval> x = merge_intervals(std::move(a));
  const std::vector<Interval> y = merge_intervals(std::move(b));
  std::int64_t total = 0;
  std::size_t i = 0, j = 0;
  while (i < x.size() && j < y.size()) {
    const std::int64_t start = std::max(x[i].start_ns, y[j].start_ns);
    const std::int64_t end = std::min(x[i].end_ns, y[j].end_ns);
    if (end > start) total += end - start;
    if (x[i].end_ns < y[j].end_ns) {
      ++i;
    } else {
      ++j;
    }
  }
  return total;
}

std::vector<Interval> gaps_within(const Interval& window, std::vector<Interval> covered) {
  std::vector<Interval> gaps;
  if (window.end_ns <= window.start_ns) return gaps;
  std::int64_t cursor = window.start_ns;  // everything before it is accounted for
  for (const Interval& c : merge_intervals(std::move(covered))) {
    if (c.end_ns <= cursor) continue;
    if (c.start_ns >= window.end_ns) break;
    if (c.start_ns > cursor) gaps.push_back({cursor, c.start_ns});
    cursor = c.end_ns;
    if (cursor >= window.end_ns) break;
  }
  if (cursor < window.end_ns) gaps.push_back({cursor, window.end_ns});
  return gaps;
}

std::vector<Interval> subtract_intervals(std::vector<Interval> from, std::vector<Interval> remove) {
  const std::vector<Interval> keep = merge_intervals(std::move(from));
  const std::vector<Interval> cut = merge_intervals(std::move(remove));
  std::vector<Interval> out;
  std::size_t j = 0;  // the first cut interval that can still reach the current kept one
  for (const Interval& k : keep) {
    std::int64_t cursor = k.start_ns;
    while (j < cut.size() && cut[j].end_ns <= cursor) ++j;
    for (std::size_t c = j; c < cut.size() && cut[c].start_ns < k.end_ns; ++c) {
      if (cut[c].start_ns > cursor) out.push_back({cursor, cut[c].start_ns});
      cursor = std::max(cursor, cut[c].end_ns);
    }
    if (cursor < k.end_ns) out.push_back({cursor, k.end_ns});
  }
  return out;
}

}  // namespace hs::reports
