// run_database_matrices.cpp — RunDatabase's reads of benchmark matrices (schema v6) and of the
// per-run values a matrix summary needs beyond the record tables (see run_database.h), through the
// readers generated from the schema's description (table_reader.h).
#include <nlohmann/json.hpp>

#include "hybridscope/probes/schema.h"
#include "hybridscope/reports/run_database.h"
#include "sqlite_query.h"
#include "table_rows.h"

namespace hs::reports {

namespace schema = hs::probes::schema;
using namespace detail;  // Query, table_reader, read_query, field and the row field lists (table_rows.h)

namespace {

std::vector<std::string> json_strings(const std::string& text, const std::string& path) {
  try {
    return nlohmann::json::parse(text).get<std::vector<std::string>>();
  } catch (const std::exception& e) {
    throw RunDatabaseError(RunDatabaseError::Kind::kQuery,
                           path + ": a matrix cell's JSON column does not read (" + e.what() + ")");
  }
}

}  // namespace

std::optional<std::string> RunDatabase::config_value(std::int64_t run_id, const std::string& key) const {
  Query q(impl_->db, select_statement(schema::kConfigTable, {"value"}) + " WHERE t.run_id = ? AND t.key = ?", path_);
  q.bind(1, run_id);
  q.bind(2, key);
  if (q.next()) return q.text(q.column("value"));
  return std::nullopt;
}

FragmentationPeak RunDatabase::worst_fragmentation(std::int64_t run_id, std::int64_t min_step) const {
  using F = FragmentationPeak;
  auto reader = read_query<F>(impl_->db,
                              "SELECT max(reserved_slack) AS reserved_slack, max(split_fragmentation) AS split_fragmentation, "
                              "max(external_fragmentation) AS external_fragmentation FROM " +
                                  std::string(schema::kMemorySamples) + " WHERE run_id = ? AND step >= ?",
                              path_,
                              std::make_tuple(field("reserved_slack", &F::reserved_slack),
                                              field("split_fragmentation", &F::split_fragmentation),
                                              field("external_fragmentation", &F::external_fragmentation)));
  reader.bind(1, run_id);
  reader.bind(2, min_step);
  FragmentationPeak peak;
  reader.next(peak);
  return peak;
}

std::vector<MatrixRow> RunDatabase::matrices() const {
  return table_reader<MatrixRow>(impl_->db, schema::kMatricesTable, "ORDER BY t.id", path_, matrix_fields()).all();
}

MatrixRow RunDatabase::matrix(std::int64_t matrix_id) const {
  {
    auto reader = table_reader<MatrixRow>(impl_->db, schema::kMatricesTable, "WHERE t.id = ?", path_, matrix_fields());
    reader.bind(1, matrix_id);
    MatrixRow m;
    if (reader.next(m)) return m;
  }
  std::string ids;
  for (const auto& m : matrices()) ids += (ids.empty() ? "" : ", ") + std::to_string(m.id);
  throw RunDatabaseError(RunDatabaseError::Kind::kUnknownRun,
                         path_ + " has no matrix " + std::to_string(matrix_id) +
                             (ids.empty() ? " (it holds no matrices: `hybridscope bench` writes them)"
                                          : " (matrices: " + ids + ")"));
}

std::vector<MatrixAxisRow> RunDatabase::matrix_axes(std::int64_t matrix_id) const {
  auto reader = table_reader<MatrixAxisRow>(impl_->db, schema::kMatrixAxesTable,
                                            "WHERE t.matrix_id = ? ORDER BY t.axis_index", path_, matrix_axis_fields());
  reader.bind(1, matrix_id);
  return reader.all();
}

std::vector<MatrixCellRow> RunDatabase::matrix_cells(std::int64_t matrix_id) const {
  using C = MatrixCellRow;
  const auto list = [&](const char* column, std::vector<std::string> C::*member) {
    return field_with<std::string, C>(column, [this, member](C& c, std::string json) { c.*member = json_strings(json, path_); });
  };
  auto reader = table_reader<C>(
      impl_->db, schema::kMatrixCellsTable, "WHERE t.matrix_id = ? ORDER BY t.cell_index", path_,
      std::make_tuple(field("id", &C::id), field("cell_index", &C::cell_index), field("name", &C::name),
                      list("levels_json", &C::levels), list("overrides_json", &C::overrides), field("ranks", &C::ranks),
                      field("baseline", &C::baseline), field("invalid_reason", &C::invalid_reason)));
  reader.bind(1, matrix_id);
  return reader.all();
}

std::vector<MatrixRunRow> RunDatabase::matrix_runs(std::int64_t matrix_id) const {
  auto reader = table_reader<MatrixRunRow>(impl_->db, schema::kMatrixRunsTable, "WHERE t.matrix_id = ? ORDER BY t.id",
                                           path_, matrix_run_fields());
  reader.bind(1, matrix_id);
  return reader.all();
}

}  // namespace hs::reports
