// run_database_scan.cpp — RunDatabase::scan_ranges: the ranges of a run without a std::string per
// row. ranges() joins `strings` and `range_categories` and sorts in SQL, which for 5 million rows
// costs a temporary B-tree and ~10 strings' worth of allocations per row; here the rows stream
// out in storage order and each distinct name id is resolved once.
#include <optional>
#include <unordered_map>

#include "hybridscope/probes/schema.h"
#include "hybridscope/reports/run_database.h"
#include "sqlite_query.h"
#include "table_reader.h"

namespace hs::reports {

namespace schema = hs::probes::schema;
using namespace detail;  // Query, table_reader, field

void RunDatabase::scan_ranges(std::int64_t run_id, std::vector<std::string>& names,
                              const std::function<void(const RangeScanRow&)>& visit) const {
  run(run_id);  // throws kUnknownRun with the ids present
  Query name_of(impl_->db, select_statement(schema::kStringsTable, {"value"}) + " WHERE t.id = ?", path_);
  Query category_of(impl_->db, select_statement(schema::kRangeCategoriesTable, {"name"}) + " WHERE t.id = ?", path_);
  const int name_text = name_of.column("value"), category_text = category_of.column("name");
  // The two id spaces (strings.id, range_categories.id) map into the one table of `names`.
  std::unordered_map<std::int64_t, std::uint32_t> name_index, category_index;
  const auto intern = [&](std::unordered_map<std::int64_t, std::uint32_t>& index, Query& lookup, int text,
                          std::int64_t id) {
    if (const auto it = index.find(id); it != index.end()) return it->second;
    lookup.reset();
    lookup.bind(1, id);
    std::string value = lookup.next() ? lookup.text(text) : "?" + std::to_string(id);  // a dangling id still shows
    const auto at = static_cast<std::uint32_t>(names.size());
    names.push_back(std::move(value));
    index.emplace(id, at);
    return at;
  };
  using R = RangeScanRow;
  const auto payload = [](const char* column, std::int32_t R::*member) {  // NULL: -1 (none)
    return field_with<std::optional<std::int64_t>, R>(column, [member](R& r, std::optional<std::int64_t> v) {
      r.*member = v ? static_cast<std::int32_t>(*v) : -1;
    });
  };
  auto reader = table_reader<R>(
      impl_->db, schema::kRangesTable, "WHERE t.run_id = ?", path_,
      std::make_tuple(field("rank", &R::rank), field("tid", &R::tid), field("step", &R::step),
                      field_with<std::int64_t, R>("name_id", [&](R& r, std::int64_t id) {
                        r.name = intern(name_index, name_of, name_text, id);
                      }),
                      field_with<std::int64_t, R>("category_id", [&](R& r, std::int64_t id) {
                        r.category = intern(category_index, category_of, category_text, id);
                      }),
                      field("depth", &R::depth), field("start_ns", &R::start_ns), field("end_ns", &R::end_ns),
                      payload("batch_size", &R::batch_size), payload("context_len", &R::context_len)));
  reader.bind(1, run_id);
  R row;
  while (reader.next(row)) visit(row);
}

}  // namespace hs::reports
