// recorder.cpp — the one writer of the run database.
#include "hybridscope/probes/recorder.h"

#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>
#include <unordered_map>

#include "hybridscope/probes/clock.h"
#include "hybridscope/probes/schema.h"

namespace hs::probes {

const char* to_string(RunStatus status) {
  switch (status) {
    case RunStatus::kRunning: return "running";
    case RunStatus::kCompleted: return "completed";
    case RunStatus::kFailed: return "failed";
    case RunStatus::kKilled: return "killed";
  }
  return "failed";
}

namespace {

constexpr std::pair<Category, const char*> kCategoryNames[] = {
    {Category::kStep, "step"},           {Category::kPhase, "phase"},
    {Category::kSwitch, "switch"},       {Category::kCheckpoint, "checkpoint"},
    {Category::kValidation, "validation"}, {Category::kSetup, "setup"},
};

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "unknown";
  return buf;
}

struct Statement {
  sqlite3_stmt* stmt = nullptr;
  ~Statement() { sqlite3_finalize(stmt); }
};

}  // namespace

struct Recorder::Impl {
  sqlite3* db = nullptr;
  Statement insert_string, find_string, insert_range, insert_metric;
  std::unordered_map<std::string, std::int64_t> string_ids;
  std::vector<RangeRecord> ranges;
  struct Metric {
    std::int64_t step;
    std::string name;
    double value;
  };
  std::vector<Metric> metrics;

  // sqlite3_close_v2 defers the close until the member statements are finalized below.
  ~Impl() {
    if (db) sqlite3_close_v2(db);
  }

  void exec(const char* sql) {
    char* err = nullptr;
    if (sqlite3_exec(db, sql, nullptr, nullptr, &err) != SQLITE_OK) {
      std::string message = err ? err : "unknown error";
      sqlite3_free(err);
      throw RecorderError("SQLite: " + message + " in: " + std::string(sql).substr(0, 80));
    }
  }
  void prepare(Statement& s, const char* sql) {
    if (sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, &s.stmt, nullptr) != SQLITE_OK)
      throw RecorderError(std::string("SQLite prepare failed: ") + sqlite3_errmsg(db));
  }
  std::int64_t intern(const std::string& value) {
    auto it = string_ids.find(value);
    if (it != string_ids.end()) return it->second;
    sqlite3_bind_text(insert_string.stmt, 1, value.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_step(insert_string.stmt);
    sqlite3_reset(insert_string.stmt);
    sqlite3_bind_text(find_string.stmt, 1, value.c_str(), -1, SQLITE_TRANSIENT);
    std::int64_t id = -1;
    if (sqlite3_step(find_string.stmt) == SQLITE_ROW) id = sqlite3_column_int64(find_string.stmt, 0);
    sqlite3_reset(find_string.stmt);
    if (id < 0) throw RecorderError("SQLite: could not intern a string");
    string_ids.emplace(value, id);
    return id;
  }
};

Recorder::Recorder(const std::string& path, int rank) : impl_(std::make_unique<Impl>()), path_(path), rank_(rank) {
  const auto parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(parent, ec);
    if (ec) throw RecorderError("cannot create directory " + parent.string() + ": " + ec.message());
  }
  if (sqlite3_open_v2(path.c_str(), &impl_->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) != SQLITE_OK)
    throw RecorderError("cannot open run database " + path + ": " + sqlite3_errmsg(impl_->db));
  sqlite3_busy_timeout(impl_->db, 5000);

  int version = 0;
  {
    Statement s;
    impl_->prepare(s, "PRAGMA user_version");
    if (sqlite3_step(s.stmt) == SQLITE_ROW) version = sqlite3_column_int(s.stmt, 0);
  }
  if (version != 0 && version != schema::kSchemaVersion)
    throw RecorderError(path + " has schema version " + std::to_string(version) + ", this build writes " +
                        std::to_string(schema::kSchemaVersion) + ": write the run to a new file (--db)");
  impl_->exec("PRAGMA journal_mode=WAL");
  impl_->exec("PRAGMA synchronous=NORMAL");
  impl_->exec("BEGIN");
  impl_->exec(schema::kCreateStatements);
  for (const auto& [category, name] : kCategoryNames) {
    const std::string sql = "INSERT OR IGNORE INTO range_categories(id, name, label) VALUES(" +
                            std::to_string(static_cast<int>(category)) + ", '" + name + "', '" + name + "')";
    impl_->exec(sql.c_str());
  }
  impl_->exec(("PRAGMA user_version=" + std::to_string(schema::kSchemaVersion)).c_str());
  impl_->exec("COMMIT");

  impl_->prepare(impl_->insert_string, "INSERT OR IGNORE INTO strings(value) VALUES(?)");
  impl_->prepare(impl_->find_string, "SELECT id FROM strings WHERE value = ?");
  impl_->prepare(impl_->insert_range,
                 "INSERT INTO ranges(run_id, rank, tid, step, name_id, category_id, depth, start_ns, end_ns) "
                 "VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?)");
  impl_->prepare(impl_->insert_metric,
                 "INSERT OR REPLACE INTO step_metrics(run_id, step, name_id, value) VALUES(?, ?, ?, ?)");
}

Recorder::~Recorder() {
  if (run_id_ >= 0) flush();
}

std::int64_t Recorder::begin_run(const RunInfo& info) {
  Statement s;
  impl_->prepare(s,
                 "INSERT INTO runs(name, command_line, config_yaml, host, pid, world_size, hybridscope_version, "
                 "torch_version, start_unix_ns, clock_offset_ns, status) VALUES(?,?,?,?,?,?,?,?,?,?, 'running')");
  const std::string host = host_name();
  sqlite3_bind_text(s.stmt, 1, info.name.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(s.stmt, 2, info.command_line.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(s.stmt, 3, info.config_yaml.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(s.stmt, 4, host.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_int64(s.stmt, 5, static_cast<std::int64_t>(getpid()));
  sqlite3_bind_int(s.stmt, 6, info.world_size);
  sqlite3_bind_text(s.stmt, 7, HS_VERSION_STRING, -1, SQLITE_STATIC);
  sqlite3_bind_text(s.stmt, 8, info.torch_version.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_int64(s.stmt, 9, now_ns() + epoch_offset_ns());
  sqlite3_bind_int64(s.stmt, 10, epoch_offset_ns());
  if (sqlite3_step(s.stmt) != SQLITE_DONE)
    throw RecorderError(std::string("cannot insert the run row: ") + sqlite3_errmsg(impl_->db));
  run_id_ = sqlite3_last_insert_rowid(impl_->db);
  return run_id_;
}

void Recorder::end_run(RunStatus status, const std::string& message) {
  flush();
  Statement s;
  impl_->prepare(s, "UPDATE runs SET status = ?, status_message = ?, end_unix_ns = ? WHERE id = ?");
  sqlite3_bind_text(s.stmt, 1, to_string(status), -1, SQLITE_STATIC);
  sqlite3_bind_text(s.stmt, 2, message.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_int64(s.stmt, 3, now_ns() + epoch_offset_ns());
  sqlite3_bind_int64(s.stmt, 4, run_id_);
  if (sqlite3_step(s.stmt) != SQLITE_DONE) ++write_errors_;
}

void Recorder::record_range(const RangeRecord& range) noexcept {
  try {
    impl_->ranges.push_back(range);
  } catch (...) {
    ++write_errors_;
  }
}

void Recorder::record_metrics(std::int64_t step, const std::vector<std::pair<std::string, double>>& metrics) noexcept {
  try {
    for (const auto& [name, value] : metrics) impl_->metrics.push_back({step, name, value});
  } catch (...) {
    ++write_errors_;
  }
}

void Recorder::flush() noexcept {
  if (run_id_ < 0 || (impl_->ranges.empty() && impl_->metrics.empty())) return;
  try {
    impl_->exec("BEGIN");
    const std::int64_t tid = static_cast<std::int64_t>(gettid());
    for (const auto& r : impl_->ranges) {
      sqlite3_stmt* st = impl_->insert_range.stmt;
      sqlite3_bind_int64(st, 1, run_id_);
      sqlite3_bind_int(st, 2, rank_);
      sqlite3_bind_int64(st, 3, tid);
      sqlite3_bind_int64(st, 4, r.step);
      sqlite3_bind_int64(st, 5, impl_->intern(r.name));
      sqlite3_bind_int(st, 6, static_cast<int>(r.category));
      sqlite3_bind_int(st, 7, r.depth);
      sqlite3_bind_int64(st, 8, r.start_ns);
      sqlite3_bind_int64(st, 9, r.end_ns);
      if (sqlite3_step(st) != SQLITE_DONE) ++write_errors_;
      sqlite3_reset(st);
    }
    for (const auto& m : impl_->metrics) {
      sqlite3_stmt* st = impl_->insert_metric.stmt;
      sqlite3_bind_int64(st, 1, run_id_);
      sqlite3_bind_int64(st, 2, m.step);
      sqlite3_bind_int64(st, 3, impl_->intern(m.name));
      sqlite3_bind_double(st, 4, m.value);
      if (sqlite3_step(st) != SQLITE_DONE) ++write_errors_;
      sqlite3_reset(st);
    }
    impl_->exec("COMMIT");
  } catch (...) {
    ++write_errors_;
    sqlite3_exec(impl_->db, "ROLLBACK", nullptr, nullptr, nullptr);
  }
  impl_->ranges.clear();
  impl_->metrics.clear();
}

}  // namespace hs::probes
