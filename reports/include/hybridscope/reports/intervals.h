// intervals.h — unions and intersections of time intervals: the arithmetic under HTA's temporal
// breakdown and comm/compute overlap. Summed durations are not wall time (profiling-facts,
// "Diagnosis pitfalls"): two overlapping 10 ms kernels cover 10–20 ms, not 20.
#pragma once

#include <cstdint>
#include <vector>

namespace hs::reports {

/// [start_ns, end_ns); an interval with end <= start is empty.
struct Interval {
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  bool operator==(const Interval& o) const { return start_ns == o.start_ns && end_ns == o.end_ns; }
};

/// The union as disjoint intervals sorted by start; touching intervals merge; empty ones vanish.
/// The input need not be sorted.
std::vector<Interval> merge_intervals(std::vector<Interval> intervals);
/// Total length of the union of `intervals` (any order, overlaps counted once).
std::int64_t union_length(std::vector<Interval> intervals);
/// Length of the intersection of two unions (each may be unsorted and overlapping).
std::int64_t intersection_length(std::vector<Interval> a, std::vector<Interval> b);
/// The parts of `window` not covered by `covered` (the gaps), sorted.
std::vector<Interval> gaps_within(const Interval& window, std::vector<Interval> covered);
/// The union of `from` minus the union of `remove`, as disjoint sorted intervals: one sort of each
/// and one sweep, O((n + m) log(n + m)) however many intervals `from` holds.
std::vector<Interval> subtract_intervals(std::vector<Interval> from, std::vector<Interval> remove);

}  // namespace hs::reports
