// run_database_scan.cpp — RunDatabase::scan_ranges: the ranges of a run without a std::string per
// row. ranges() joins `strings` and `range_categories` and sorts in SQL, which for 5 million rows
// costs a temporary B-tree and ~10 strings' worth of allocations per row; here the rows stream
// out in storage order and each distinct name id is resolved once.
#include <unordered_map>

#include "hybridscope/probes/schema.h"
#include "hybridscope/reports/run_database.h"
#include "sqlite_query.h"

namespace hs::reports {

namespace schema = hs::probes::schema;
using detail::Query;

void RunDatabase::scan_ranges(std::int64_t run_id, std::vector<std::string>& names,
                              const std::function<void(const RangeScanRow&)>& visit) const {
  run(run_id);  // throws kUnknownRun with the ids present
  Query name_of(impl_->db, "SELECT value FROM " + std::string(schema::kStrings) + " WHERE id = ?", path_);
  Query category_of(impl_->db, "SELECT name FROM " + std::string(schema::kRangeCategories) + " WHERE id = ?", path_);
  // The two id spaces (strings.id, range_categories.id) map into the one table of `names`.
  std::unordered_map<std::int64_t, std::uint32_t> name_index, category_index;
  const auto intern = [&](std::unordered_map<std::int64_t, std::uint32_t>& index, Query& lookup, std::int64_t id) {
    if (const auto it = index.find(id); it != index.end()) return it->second;
    lookup.reset();
    lookup.bind(1, id);
    std::string text = lookup.next() ? lookup.text(0) : "?" + std::to_string(id);  // a dangling id still shows
    const auto at = static_cast<std::uint32_t>(names.size());
    names.push_back(std::move(text));
    index.emplace(id, at);
    return at;
  };
  Query q(impl_->db,
          "SELECT rank, tid, step, name_id, category_id, depth, start_ns, end_ns, batch_size, context_len FROM " +
              std::string(schema::kRanges) + " WHERE run_id = ?",
          path_);
  q.bind(1, run_id);
  RangeScanRow row;
  while (q.next()) {
    row.rank = static_cast<int>(q.int64(0));
    row.tid = q.int64(1);
    row.step = q.int64(2);
    row.name = intern(name_index, name_of, q.int64(3));
    row.category = intern(category_index, category_of, q.int64(4));
    row.depth = static_cast<int>(q.int64(5));
    row.start_ns = q.int64(6);
    row.end_ns = q.int64(7);
    row.batch_size = q.is_null(8) ? -1 : static_cast<std::int32_t>(q.int64(8));
    row.context_len = q.is_null(9) ? -1 : static_cast<std::int32_t>(q.int64(9));
    visit(row);
  }
}

}  // namespace hs::reports
