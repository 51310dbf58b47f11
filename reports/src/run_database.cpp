// run_database.cpp — the read side of the run database. Every SQL string names tables through
// probes/schema.h so that a rename there breaks the build here, not a user's report.
#include "hybridscope/reports/run_database.h"

#include <sqlite3.h>

#include <filesystem>
#include <utility>

#include "hybridscope/probes/schema.h"

namespace hs::reports {

namespace schema = hs::probes::schema;
using Kind = RunDatabaseError::Kind;

bool RunSummary::operator==(const RunSummary& o) const {
  return id == o.id && name == o.name && status == o.status && status_message == o.status_message &&
         host == o.host && command_line == o.command_line && hybridscope_version == o.hybridscope_version &&
         world_size == o.world_size && start_unix_ns == o.start_unix_ns && end_unix_ns == o.end_unix_ns &&
         clock_offset_ns == o.clock_offset_ns;
}

bool RangeRow::operator==(const RangeRow& o) const {
  return rank == o.rank && tid == o.tid && step == o.step && name == o.name && category == o.category &&
         depth == o.depth && start_ns == o.start_ns && end_ns == o.end_ns;
}

bool StepMetric::operator==(const StepMetric& o) const {
  return step == o.step && name == o.name && value == o.value;
}

namespace {

// A prepared statement that finalizes itself; reads are one-shot, so nothing is cached.
class Query {
 public:
  Query(sqlite3* db, const std::string& sql, const std::string& path) : db_(db), path_(path) {
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt_, nullptr) != SQLITE_OK) fail("prepare");
  }
  ~Query() { sqlite3_finalize(stmt_); }
  Query(const Query&) = delete;
  Query& operator=(const Query&) = delete;

  void bind(int index, std::int64_t value) { sqlite3_bind_int64(stmt_, index, value); }
  /// Advances to the next row; false when done. Throws on an SQLite error.
  bool next() {
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    fail("read");
    return false;
  }
  std::int64_t int64(int col) const { return sqlite3_column_int64(stmt_, col); }
  double real(int col) const { return sqlite3_column_double(stmt_, col); }
  bool is_null(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
  std::string text(int col) const {
    const auto* p = sqlite3_column_text(stmt_, col);
    return p ? std::string(reinterpret_cast<const char*>(p), static_cast<std::size_t>(sqlite3_column_bytes(stmt_, col)))
             : std::string();
  }

 private:
  [[noreturn]] void fail(const char* what) const {
    const int code = sqlite3_errcode(db_);
    const std::string message = sqlite3_errmsg(db_);
    if (code == SQLITE_NOTADB)
      throw RunDatabaseError(Kind::kNotADatabase, path_ + " is not an SQLite database (" + message +
                                                      "): pass the .sqlite file that `hybridscope train --db` wrote");
    throw RunDatabaseError(Kind::kQuery, "cannot " + std::string(what) + " " + path_ + ": " + message);
  }

  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
  const std::string& path_;
};

std::string run_columns() {
  return "SELECT id, name, status, status_message, host, command_line, hybridscope_version, world_size, "
         "start_unix_ns, end_unix_ns, clock_offset_ns FROM " +
         std::string(schema::kRuns);
}

RunSummary read_run(const Query& q) {
  RunSummary r;
  r.id = q.int64(0);
  r.name = q.text(1);
  r.status = q.text(2);
  r.status_message = q.text(3);
  r.host = q.text(4);
  r.command_line = q.text(5);
  r.hybridscope_version = q.text(6);
  r.world_size = static_cast<int>(q.int64(7));
  r.start_unix_ns = q.int64(8);
  if (!q.is_null(9)) r.end_unix_ns = q.int64(9);
  r.clock_offset_ns = q.int64(10);
  return r;
}

}  // namespace

struct RunDatabase::Impl {
  sqlite3* db = nullptr;
  ~Impl() {
    if (db) sqlite3_close_v2(db);
  }
};

RunDatabase::RunDatabase(const std::string& path) : impl_(std::make_unique<Impl>()), path_(path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw RunDatabaseError(Kind::kMissingFile,
                           "no run database at " + path + ": check the path (`hybridscope train --db` sets it)");
  // Read-only: a report must never change a run, nor create a file. A WAL-mode database still
  // needs its -shm file, which SQLite creates beside it when the directory allows.
  if (sqlite3_open_v2(path.c_str(), &impl_->db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK)
    throw RunDatabaseError(Kind::kMissingFile,
                           "cannot open run database " + path + ": " + sqlite3_errmsg(impl_->db));
  sqlite3_busy_timeout(impl_->db, 5000);  // a training run may be committing a step right now

  {
    Query q(impl_->db, "PRAGMA user_version", path_);
    if (q.next()) schema_version_ = static_cast<int>(q.int64(0));
  }
  if (schema_version_ == 0) {
    // SQLite, but never written by the recorder (it sets user_version in its first transaction).
    throw RunDatabaseError(Kind::kNotADatabase, path + " is an SQLite file but not a hybridscope run database "
                                                       "(schema version 0, no runs table)");
  }
  if (schema_version_ != schema::kSchemaVersion)
    throw RunDatabaseError(Kind::kSchemaVersion,
                           path + " has schema version " + std::to_string(schema_version_) + ", this build reads " +
                               std::to_string(schema::kSchemaVersion) +
                               ": open it with the hybridscope version that wrote it");
}

RunDatabase::~RunDatabase() = default;
RunDatabase::RunDatabase(RunDatabase&&) noexcept = default;
RunDatabase& RunDatabase::operator=(RunDatabase&&) noexcept = default;

std::vector<RunSummary> RunDatabase::runs() const {
  Query q(impl_->db, run_columns() + " ORDER BY id", path_);
  std::vector<RunSummary> out;
  while (q.next()) out.push_back(read_run(q));
  return out;
}

RunSummary RunDatabase::run(std::int64_t run_id) const {
  {
    Query q(impl_->db, run_columns() + " WHERE id = ?", path_);
    q.bind(1, run_id);
    if (q.next()) return read_run(q);
  }
  std::string ids;
  for (const auto& r : runs()) ids += (ids.empty() ? "" : ", ") + std::to_string(r.id);
  throw RunDatabaseError(Kind::kUnknownRun, path_ + " has no run " + std::to_string(run_id) +
                                                (ids.empty() ? " (it holds no runs)" : " (runs: " + ids + ")"));
}

RunSummary RunDatabase::last_run() const {
  Query q(impl_->db, run_columns() + " ORDER BY id DESC LIMIT 1", path_);
  if (q.next()) return read_run(q);
  throw RunDatabaseError(Kind::kUnknownRun, path_ + " holds no runs");
}

std::string RunDatabase::config_yaml(std::int64_t run_id) const {
  Query q(impl_->db, "SELECT config_yaml FROM " + std::string(schema::kRuns) + " WHERE id = ?", path_);
  q.bind(1, run_id);
  if (q.next()) return q.text(0);
  run(run_id);  // throws kUnknownRun with the ids present
  return {};
}

std::vector<RangeRow> RunDatabase::ranges(std::int64_t run_id) const {
  const std::string sql = "SELECT r.rank, r.tid, r.step, s.value, c.name, r.depth, r.start_ns, r.end_ns FROM " +
                          std::string(schema::kRanges) + " r JOIN " + schema::kStrings + " s ON s.id = r.name_id JOIN " +
                          schema::kRangeCategories +
                          " c ON c.id = r.category_id WHERE r.run_id = ? "
                          "ORDER BY r.rank, r.tid, r.start_ns, r.depth, r.id";
  Query q(impl_->db, sql, path_);
  q.bind(1, run_id);
  std::vector<RangeRow> out;
  while (q.next()) {
    RangeRow r;
    r.rank = static_cast<int>(q.int64(0));
    r.tid = q.int64(1);
    r.step = q.int64(2);
    r.name = q.text(3);
    r.category = q.text(4);
    r.depth = static_cast<int>(q.int64(5));
    r.start_ns = q.int64(6);
    r.end_ns = q.int64(7);
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<StepMetric> RunDatabase::step_metrics(std::int64_t run_id) const {
  const std::string sql = "SELECT m.step, s.value, m.value FROM " + std::string(schema::kStepMetrics) + " m JOIN " +
                          schema::kStrings + " s ON s.id = m.name_id WHERE m.run_id = ? ORDER BY m.step, s.value";
  Query q(impl_->db, sql, path_);
  q.bind(1, run_id);
  std::vector<StepMetric> out;
  while (q.next()) out.push_back({q.int64(0), q.text(1), q.real(2)});
  return out;
}

}  // namespace hs::reports
