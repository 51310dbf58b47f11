// imported_ranges.cpp — see imported_ranges.h.
#include "imported_ranges.h"

#include <algorithm>
#include <iterator>

namespace hs::importer::detail {

StepStarts number_step_ranges(const std::vector<ImportedRange>& ranges, std::int64_t first_step) {
  std::vector<std::int64_t> starts;
  for (const ImportedRange& r : ranges)
    if (r.category == probes::Category::kStep) starts.push_back(r.start);
  std::sort(starts.begin(), starts.end());
  starts.erase(std::unique(starts.begin(), starts.end()), starts.end());
  StepStarts steps;
  for (std::size_t i = 0; i < starts.size(); ++i) steps.emplace_back(starts[i], first_step + static_cast<std::int64_t>(i));
  return steps;
}

std::int64_t step_at(const StepStarts& steps, std::int64_t t) {
  auto it = std::upper_bound(steps.begin(), steps.end(), t,
                             [](std::int64_t v, const std::pair<std::int64_t, std::int64_t>& s) { return v < s.first; });
  return it == steps.begin() ? 0 : std::prev(it)->second;
}

void nest_ranges(std::vector<ImportedRange>& ranges, const StepStarts& steps) {
  std::sort(ranges.begin(), ranges.end(), [](const ImportedRange& a, const ImportedRange& b) {
    if (a.tid != b.tid) return a.tid < b.tid;
    if (a.start != b.start) return a.start < b.start;
    return a.end > b.end;
  });
  std::vector<std::int32_t> stack;
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    ImportedRange& r = ranges[i];
    if (i == 0 || ranges[i - 1].tid != r.tid) stack.clear();
    while (!stack.empty() && ranges[static_cast<std::size_t>(stack.back())].end <= r.start) stack.pop_back();
    r.parent = stack.empty() ? -1 : stack.back();
    r.depth = static_cast<std::int32_t>(stack.size());
    r.step = step_at(steps, r.start);
    stack.push_back(static_cast<std::int32_t>(i));
  }
}

std::int32_t innermost_range(const std::vector<ImportedRange>& ranges, std::int64_t tid, std::int64_t t) {
  auto it = std::upper_bound(ranges.begin(), ranges.end(), std::make_pair(tid, t),
                             [](const std::pair<std::int64_t, std::int64_t>& v, const ImportedRange& r) {
                               return v.first != r.tid ? v.first < r.tid : v.second < r.start;
                             });
  if (it == ranges.begin()) return -1;
  auto i = static_cast<std::int32_t>(std::prev(it) - ranges.begin());
  if (ranges[static_cast<std::size_t>(i)].tid != tid) return -1;
  while (i >= 0 && ranges[static_cast<std::size_t>(i)].end < t) i = ranges[static_cast<std::size_t>(i)].parent;
  return i;
}

}  // namespace hs::importer::detail
