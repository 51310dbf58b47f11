// run_database_scan_test.cpp — RunDatabase::scan_ranges gives the same rows as ranges() (which
// resolves names in SQL and sorts), once its interned names are resolved and the rows sorted the
// same way; each distinct name is interned once; an unknown run throws.
#include <gtest/gtest.h>

#include <optional>

#include <algorithm>
#include <set>
#include <string>
#include <tuple>

#include "hybridscope/reports/run_database.h"
#include "recorded_run.h"

using namespace hs::reports;
using hs::reports::testing::record_run;
using hs::reports::testing::temp_dir;

TEST(RunDatabaseScan, SameRowsAsRangesWithNamesInternedOnce) {
  const auto run = record_run(temp_dir("scan_ranges"));
  const RunDatabase db(run.path);
  std::vector<std::string> names = {"already here"};  // scan_ranges appends, never clears
  std::vector<RangeRow> scanned;
  db.scan_ranges(run.run_id, names, [&](const RangeScanRow& r) {
    ASSERT_LT(r.name, names.size());
    ASSERT_LT(r.category, names.size());
    const auto payload = [](std::int32_t v) { return v < 0 ? std::optional<std::int64_t>{} : std::optional<std::int64_t>{v}; };
    scanned.push_back({r.rank, r.tid, r.step, names[r.name], names[r.category], r.depth, r.start_ns, r.end_ns,
                       payload(r.batch_size), payload(r.context_len)});
  });
  const auto key = [](const RangeRow& r) { return std::tie(r.rank, r.tid, r.start_ns, r.depth, r.name); };
  std::sort(scanned.begin(), scanned.end(), [&](const RangeRow& a, const RangeRow& b) { return key(a) < key(b); });
  auto expected = db.ranges(run.run_id);
  std::sort(expected.begin(), expected.end(), [&](const RangeRow& a, const RangeRow& b) { return key(a) < key(b); });
  ASSERT_FALSE(expected.empty());
  EXPECT_EQ(scanned, expected);

  // One entry per distinct name and one per distinct category (two id spaces: "step" is both a
  // range name and a category, so it is interned twice), after the caller's own first entry.
  std::set<std::string> distinct_names, distinct_categories;
  for (const auto& r : expected) {
    distinct_names.insert(r.name);
    distinct_categories.insert(r.category);
  }
  EXPECT_EQ(names.front(), "already here");
  EXPECT_EQ(names.size(), 1 + distinct_names.size() + distinct_categories.size());
}

TEST(RunDatabaseScan, UnknownRunThrows) {
  const auto run = record_run(temp_dir("scan_unknown"));
  const RunDatabase db(run.path);
  std::vector<std::string> names;
  EXPECT_THROW(db.scan_ranges(run.run_id + 7, names, [](const RangeScanRow&) {}), RunDatabaseError);
}
