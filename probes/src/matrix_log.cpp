// matrix_log.cpp — the benchmark runner's tables (see matrix_log.h).
#include "hybridscope/probes/matrix_log.h"

#include <nlohmann/json.hpp>

#include "hybridscope/probes/clock.h"
#include "hybridscope/probes/recorder.h"
#include "hybridscope/probes/schema.h"
#include "run_file.h"

namespace hs::probes {

namespace {

using detail::Statement;

void bind_text(Statement& s, int index, const std::string& text) {
  sqlite3_bind_text(s.stmt, index, text.c_str(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
}
void bind_text_or_null(Statement& s, int index, const std::string& text) {
  if (text.empty())
    sqlite3_bind_null(s.stmt, index);
  else
    bind_text(s, index, text);
}

std::int64_t unix_now_ns() { return now_ns() + epoch_offset_ns(); }

void step_done(detail::RunFile& file, Statement& s) {
  if (sqlite3_step(s.stmt) != SQLITE_DONE)
    throw RecorderError(file.path() + ": " + sqlite3_errmsg(file.get()));
}

}  // namespace

MatrixLog::MatrixLog(const std::string& db_path) : file_(new detail::RunFile(db_path, detail::RunFile::Mode::kCreate)) {}

MatrixLog::~MatrixLog() { delete file_; }

std::int64_t MatrixLog::create_matrix(const MatrixRecord& m, const std::vector<MatrixAxisRecord>& axes,
                                      const std::vector<MatrixCellRecord>& cells) {
  file_->exec("BEGIN IMMEDIATE");
  try {
    Statement s;
    file_->prepare(s, std::string("INSERT INTO ") + schema::kMatrices + "(" +
                          schema::insert_columns(schema::kMatricesTable) +
                          ") VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, NULL, 'running')");
    bind_text(s, 1, m.name);
    bind_text(s, 2, m.spec_path);
    bind_text(s, 3, m.spec_yaml);
    bind_text(s, 4, m.base_config);
    sqlite3_bind_int(s.stmt, 5, m.repetitions);
    sqlite3_bind_int(s.stmt, 6, m.warmup_steps);
    sqlite3_bind_int(s.stmt, 7, m.measured_steps);
    bind_text(s, 8, m.command_line);
    sqlite3_bind_int64(s.stmt, 9, unix_now_ns());
    step_done(*file_, s);
    const std::int64_t matrix_id = sqlite3_last_insert_rowid(file_->get());

    Statement a;
    file_->prepare(a, std::string("INSERT INTO ") + schema::kMatrixAxes + "(" +
                          schema::insert_columns(schema::kMatrixAxesTable) + ") VALUES(?1, ?2, ?3, ?4, ?5, ?6)");
    for (std::size_t i = 0; i < axes.size(); ++i) {
      sqlite3_reset(a.stmt);
      sqlite3_bind_int64(a.stmt, 1, matrix_id);
      sqlite3_bind_int(a.stmt, 2, static_cast<int>(i));
      bind_text(a, 3, axes[i].name);
      sqlite3_bind_int(a.stmt, 4, axes[i].rank_axis ? 1 : 0);
      bind_text_or_null(a, 5, axes[i].scaling);
      bind_text_or_null(a, 6, axes[i].baseline_level);
      step_done(*file_, a);
    }
    Statement c;
    file_->prepare(c, std::string("INSERT INTO ") + schema::kMatrixCells + "(" +
                          schema::insert_columns(schema::kMatrixCellsTable) +
                          ") VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)");
    for (const auto& cell : cells) {
      sqlite3_reset(c.stmt);
      sqlite3_bind_int64(c.stmt, 1, matrix_id);
      sqlite3_bind_int(c.stmt, 2, cell.cell_index);
      bind_text(c, 3, cell.name);
      bind_text(c, 4, nlohmann::json(cell.levels).dump());
      bind_text(c, 5, nlohmann::json(cell.overrides).dump());
      sqlite3_bind_int(c.stmt, 6, cell.ranks);
      sqlite3_bind_int(c.stmt, 7, cell.baseline ? 1 : 0);
      bind_text_or_null(c, 8, cell.invalid_reason);
      step_done(*file_, c);
    }
    file_->exec("COMMIT");
    return matrix_id;
  } catch (...) {
    sqlite3_exec(file_->get(), "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
}

std::optional<std::int64_t> MatrixLog::latest_matrix(const std::string& name) {
  Statement s;
  file_->prepare(s, std::string("SELECT max(id) FROM ") + schema::kMatrices + " WHERE name = ?1");
  bind_text(s, 1, name);
  if (sqlite3_step(s.stmt) == SQLITE_ROW && sqlite3_column_type(s.stmt, 0) != SQLITE_NULL)
    return sqlite3_column_int64(s.stmt, 0);
  return std::nullopt;
}

std::vector<MatrixCellRecord> MatrixLog::cells(std::int64_t matrix_id) {
  Statement s;
  file_->prepare(s, std::string("SELECT cell_index, name, levels_json, overrides_json, ranks, baseline, "
                                "coalesce(invalid_reason, '') FROM ") +
                        schema::kMatrixCells + " WHERE matrix_id = ?1 ORDER BY cell_index");
  sqlite3_bind_int64(s.stmt, 1, matrix_id);
  std::vector<MatrixCellRecord> out;
  auto text = [&](int col) { return std::string(reinterpret_cast<const char*>(sqlite3_column_text(s.stmt, col))); };
  while (sqlite3_step(s.stmt) == SQLITE_ROW) {
    MatrixCellRecord cell;
    cell.cell_index = sqlite3_column_int(s.stmt, 0);
    cell.name = text(1);
    cell.levels = nlohmann::json::parse(text(2)).get<std::vector<std::string>>();
    cell.overrides = nlohmann::json::parse(text(3)).get<std::vector<std::string>>();
    cell.ranks = sqlite3_column_int(s.stmt, 4);
    cell.baseline = sqlite3_column_int(s.stmt, 5) != 0;
    cell.invalid_reason = text(6);
    out.push_back(std::move(cell));
  }
  return out;
}

std::vector<CompletedRepetition> MatrixLog::completed(std::int64_t matrix_id) {
  Statement s;
  file_->prepare(s, std::string("SELECT c.cell_index, r.repetition FROM ") + schema::kMatrixRuns + " r JOIN " +
                        schema::kMatrixCells +
                        " c ON c.id = r.cell_id WHERE r.matrix_id = ?1 AND r.status = 'completed' "
                        "ORDER BY c.cell_index, r.repetition");
  sqlite3_bind_int64(s.stmt, 1, matrix_id);
  std::vector<CompletedRepetition> out;
  while (sqlite3_step(s.stmt) == SQLITE_ROW) out.push_back({sqlite3_column_int(s.stmt, 0), sqlite3_column_int(s.stmt, 1)});
  return out;
}

void MatrixLog::reopen_matrix(std::int64_t matrix_id) {
  const std::string id = std::to_string(matrix_id);
  file_->exec(std::string("UPDATE ") + schema::kMatrixRuns +
              " SET status = 'interrupted', error = coalesce(error, 'the runner stopped before this run ended') "
              "WHERE matrix_id = " + id + " AND status = 'running'");
  file_->exec(std::string("UPDATE ") + schema::kMatrices + " SET status = 'running', end_unix_ns = NULL WHERE id = " + id);
}

void MatrixLog::end_matrix(std::int64_t matrix_id, const std::string& status) {
  Statement s;
  file_->prepare(s, std::string("UPDATE ") + schema::kMatrices + " SET status = ?1, end_unix_ns = ?2 WHERE id = ?3");
  bind_text(s, 1, status);
  sqlite3_bind_int64(s.stmt, 2, unix_now_ns());
  sqlite3_bind_int64(s.stmt, 3, matrix_id);
  step_done(*file_, s);
}

std::int64_t MatrixLog::max_run_id() {
  Statement s;
  file_->prepare(s, std::string("SELECT coalesce(max(id), 0) FROM ") + schema::kRuns);
  return sqlite3_step(s.stmt) == SQLITE_ROW ? sqlite3_column_int64(s.stmt, 0) : 0;
}

std::optional<std::int64_t> MatrixLog::first_run_after(std::int64_t id) {
  Statement s;
  file_->prepare(s, std::string("SELECT min(id) FROM ") + schema::kRuns + " WHERE id > ?1");
  sqlite3_bind_int64(s.stmt, 1, id);
  if (sqlite3_step(s.stmt) == SQLITE_ROW && sqlite3_column_type(s.stmt, 0) != SQLITE_NULL)
    return sqlite3_column_int64(s.stmt, 0);
  return std::nullopt;
}

std::int64_t MatrixLog::cell_id(std::int64_t matrix_id, int cell_index) {
  Statement s;
  file_->prepare(s, std::string("SELECT id FROM ") + schema::kMatrixCells + " WHERE matrix_id = ?1 AND cell_index = ?2");
  sqlite3_bind_int64(s.stmt, 1, matrix_id);
  sqlite3_bind_int(s.stmt, 2, cell_index);
  if (sqlite3_step(s.stmt) != SQLITE_ROW)
    throw RecorderError(file_->path() + ": matrix " + std::to_string(matrix_id) + " has no cell " +
                        std::to_string(cell_index));
  return sqlite3_column_int64(s.stmt, 0);
}

std::int64_t MatrixLog::begin_run(std::int64_t matrix_id, int cell_index, int repetition, const std::string& log_path,
                                  const RunEnvironment& env) {
  const std::int64_t cell = cell_id(matrix_id, cell_index);
  Statement s;
  file_->prepare(s, std::string("INSERT INTO ") + schema::kMatrixRuns + "(" +
                        schema::insert_columns(schema::kMatrixRunsTable) +
                        ") VALUES(?1, ?2, ?3, NULL, 'running', NULL, ?4, ?5, NULL, ?6, ?7, ?8, ?9, NULL, ?10, ?11, "
                        "?12, ?13)");
  sqlite3_bind_int64(s.stmt, 1, matrix_id);
  sqlite3_bind_int64(s.stmt, 2, cell);
  sqlite3_bind_int(s.stmt, 3, repetition);
  bind_text(s, 4, log_path);
  sqlite3_bind_int64(s.stmt, 5, unix_now_ns());
  bind_text(s, 6, env.host);
  bind_text(s, 7, env.cpu_model);
  sqlite3_bind_int(s.stmt, 8, env.num_cpus);
  sqlite3_bind_double(s.stmt, 9, env.load_avg_before);
  bind_text(s, 10, env.torch_version);
  bind_text(s, 11, env.hybridscope_version);
  bind_text(s, 12, env.hybridscope_commit);
  bind_text(s, 13, env.thread_settings);
  step_done(*file_, s);
  return sqlite3_last_insert_rowid(file_->get());
}

void MatrixLog::end_run(std::int64_t matrix_run_id, const std::string& status, std::optional<std::int64_t> run_id,
                        const std::string& error, double load_avg_after) {
  Statement s;
  file_->prepare(s, std::string("UPDATE ") + schema::kMatrixRuns +
                        " SET status = ?1, run_id = ?2, error = ?3, end_unix_ns = ?4, load_avg_after = ?5 WHERE id = ?6");
  bind_text(s, 1, status);
  if (run_id)
    sqlite3_bind_int64(s.stmt, 2, *run_id);
  else
    sqlite3_bind_null(s.stmt, 2);
  bind_text_or_null(s, 3, error);
  sqlite3_bind_int64(s.stmt, 4, unix_now_ns());
  sqlite3_bind_double(s.stmt, 5, load_avg_after);
  sqlite3_bind_int64(s.stmt, 6, matrix_run_id);
  step_done(*file_, s);
}

}  // namespace hs::probes
