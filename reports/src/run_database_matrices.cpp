// run_database_matrices.cpp — RunDatabase's reads of benchmark matrices (schema v6) and of the
// per-run values a matrix summary needs beyond the record tables (see run_database.h).
#include <nlohmann/json.hpp>

#include "hybridscope/probes/schema.h"
#include "hybridscope/reports/run_database.h"
#include "sqlite_query.h"

namespace hs::reports {

namespace schema = hs::probes::schema;
using detail::Query;

namespace {

std::vector<std::string> json_strings(const std::string& text, const std::string& path) {
  try {
    return nlohmann::json::parse(text).get<std::vector<std::string>>();
  } catch (const std::exception& e) {
    throw RunDatabaseError(RunDatabaseError::Kind::kQuery,
                           path + ": a matrix cell's JSON column does not read (" + e.what() + ")");
  }
}

std::string matrix_columns() {
  return "SELECT id, name, spec_path, base_config, repetitions, warmup_steps, measured_steps, command_line, "
         "start_unix_ns, end_unix_ns, status FROM " +
         std::string(schema::kMatrices);
}

MatrixRow read_matrix(const Query& q) {
  MatrixRow m;
  m.id = q.int64(0);
  m.name = q.text(1);
  m.spec_path = q.text(2);
  m.base_config = q.text(3);
  m.repetitions = static_cast<int>(q.int64(4));
  m.warmup_steps = static_cast<int>(q.int64(5));
  m.measured_steps = static_cast<int>(q.int64(6));
  m.command_line = q.text(7);
  m.start_unix_ns = q.int64(8);
  m.end_unix_ns = q.opt_int64(9);
  m.status = q.text(10);
  return m;
}

}  // namespace

std::optional<std::string> RunDatabase::config_value(std::int64_t run_id, const std::string& key) const {
  Query q(impl_->db, "SELECT value FROM " + std::string(schema::kConfig) + " WHERE run_id = ? AND key = ?", path_);
  q.bind(1, run_id);
  q.bind(2, key);
  if (q.next()) return q.text(0);
  return std::nullopt;
}

FragmentationPeak RunDatabase::worst_fragmentation(std::int64_t run_id, std::int64_t min_step) const {
  Query q(impl_->db,
          "SELECT max(reserved_slack), max(split_fragmentation), max(external_fragmentation) FROM " +
              std::string(schema::kMemorySamples) + " WHERE run_id = ? AND step >= ?",
          path_);
  q.bind(1, run_id);
  q.bind(2, min_step);
  FragmentationPeak peak;
  if (q.next()) {
    peak.reserved_slack = q.opt_real(0);
    peak.split_fragmentation = q.opt_real(1);
    peak.external_fragmentation = q.opt_real(2);
  }
  return peak;
}

std::vector<MatrixRow> RunDatabase::matrices() const {
  Query q(impl_->db, matrix_columns() + " ORDER BY id", path_);
  std::vector<MatrixRow> out;
  while (q.next()) out.push_back(read_matrix(q));
  return out;
}

MatrixRow RunDatabase::matrix(std::int64_t matrix_id) const {
  {
    Query q(impl_->db, matrix_columns() + " WHERE id = ?", path_);
    q.bind(1, matrix_id);
    if (q.next()) return read_matrix(q);
  }
  std::string ids;
  for (const auto& m : matrices()) ids += (ids.empty() ? "" : ", ") + std::to_string(m.id);
  throw RunDatabaseError(RunDatabaseError::Kind::kUnknownRun,
                         path_ + " has no matrix " + std::to_string(matrix_id) +
                             (ids.empty() ? " (it holds no matrices: `hybridscope bench` writes them)"
                                          : " (matrices: " + ids + ")"));
}

std::vector<MatrixAxisRow> RunDatabase::matrix_axes(std::int64_t matrix_id) const {
  Query q(impl_->db,
          "SELECT axis_index, name, rank_axis, coalesce(scaling, ''), coalesce(baseline_level, '') FROM " +
              std::string(schema::kMatrixAxes) + " WHERE matrix_id = ? ORDER BY axis_index",
          path_);
  q.bind(1, matrix_id);
  std::vector<MatrixAxisRow> out;
  while (q.next()) out.push_back({static_cast<int>(q.int64(0)), q.text(1), q.int64(2) != 0, q.text(3), q.text(4)});
  return out;
}

std::vector<MatrixCellRow> RunDatabase::matrix_cells(std::int64_t matrix_id) const {
  Query q(impl_->db,
          "SELECT id, cell_index, name, levels_json, overrides_json, ranks, baseline, coalesce(invalid_reason, '') "
          "FROM " + std::string(schema::kMatrixCells) + " WHERE matrix_id = ? ORDER BY cell_index",
          path_);
  q.bind(1, matrix_id);
  std::vector<MatrixCellRow> out;
  while (q.next()) {
    MatrixCellRow c;
    c.id = q.int64(0);
    c.cell_index = static_cast<int>(q.int64(1));
    c.name = q.text(2);
    c.levels = json_strings(q.text(3), path_);
    c.overrides = json_strings(q.text(4), path_);
    c.ranks = static_cast<int>(q.int64(5));
    c.baseline = q.int64(6) != 0;
    c.invalid_reason = q.text(7);
    out.push_back(std::move(c));
  }
  return out;
}

std::vector<MatrixRunRow> RunDatabase::matrix_runs(std::int64_t matrix_id) const {
  Query q(impl_->db,
          "SELECT id, cell_id, repetition, run_id, status, coalesce(error, ''), log_path, host, cpu_model, num_cpus, "
          "load_avg_before, load_avg_after, torch_version, hybridscope_version, hybridscope_commit, thread_settings "
          "FROM " + std::string(schema::kMatrixRuns) + " WHERE matrix_id = ? ORDER BY id",
          path_);
  q.bind(1, matrix_id);
  std::vector<MatrixRunRow> out;
  while (q.next()) {
    MatrixRunRow r;
    r.id = q.int64(0);
    r.cell_id = q.int64(1);
    r.repetition = static_cast<int>(q.int64(2));
    r.run_id = q.opt_int64(3);
    r.status = q.text(4);
    r.error = q.text(5);
    r.log_path = q.text(6);
    r.host = q.text(7);
    r.cpu_model = q.text(8);
    r.num_cpus = static_cast<int>(q.int64(9));
    r.load_avg_before = q.real(10);
    r.load_avg_after = q.opt_real(11);
    r.torch_version = q.text(12);
    r.hybridscope_version = q.text(13);
    r.hybridscope_commit = q.text(14);
    r.thread_settings = q.text(15);
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace hs::reports
