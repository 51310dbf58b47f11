// run_file.cpp — open a run database and bring it to the current schema (see run_file.h).
#include "run_file.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <utility>
#include <vector>

#include "hybridscope/probes/gpu_activity.h"
#include "hybridscope/probes/recorder.h"
#include "hybridscope/probes/schema.h"

namespace hs::probes::detail {

namespace {

constexpr std::pair<KernelClass, const char*> kKernelClassNames[] = {
    {KernelClass::kCompute, "compute"}, {KernelClass::kNccl, "nccl"}, {KernelClass::kMemory, "memory"}};

// CUpti_ActivityMemcpyKind and CUpti_ActivityMemoryKind values with Nsight Systems' names and labels
// (its ENUM_CUPTI_MEMCPY_KIND / ENUM_CUDA_MEM_KIND tables). Numbers are CUPTI's ABI, stable across
// releases; listed here so hs_probes needs no CUPTI header.
struct EnumRow {
  int id;
  const char* name;
  const char* label;
};
constexpr EnumRow kMemcpyKinds[] = {
    {0, "CUPTI_ACTIVITY_MEMCPY_KIND_UNKNOWN", "Unknown"},
    {1, "CUPTI_ACTIVITY_MEMCPY_KIND_HTOD", "Host-to-Device"},
    {2, "CUPTI_ACTIVITY_MEMCPY_KIND_DTOH", "Device-to-Host"},
    {3, "CUPTI_ACTIVITY_MEMCPY_KIND_HTOA", "Host-to-Array"},
    {4, "CUPTI_ACTIVITY_MEMCPY_KIND_ATOH", "Array-to-Host"},
    {5, "CUPTI_ACTIVITY_MEMCPY_KIND_ATOA", "Array-to-Array"},
    {6, "CUPTI_ACTIVITY_MEMCPY_KIND_ATOD", "Array-to-Device"},
    {7, "CUPTI_ACTIVITY_MEMCPY_KIND_DTOA", "Device-to-Array"},
    {8, "CUPTI_ACTIVITY_MEMCPY_KIND_DTOD", "Device-to-Device"},
    {9, "CUPTI_ACTIVITY_MEMCPY_KIND_HTOH", "Host-to-Host"},
    {10, "CUPTI_ACTIVITY_MEMCPY_KIND_PTOP", "Peer-to-Peer"},
};
constexpr EnumRow kMemoryKinds[] = {
    {0, "CUPTI_ACTIVITY_MEMORY_KIND_UNKNOWN", "Unknown"},
    {1, "CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE", "Pageable"},
    {2, "CUPTI_ACTIVITY_MEMORY_KIND_PINNED", "Pinned"},
    {3, "CUPTI_ACTIVITY_MEMORY_KIND_DEVICE", "Device"},
    {4, "CUPTI_ACTIVITY_MEMORY_KIND_ARRAY", "Array"},
    {5, "CUPTI_ACTIVITY_MEMORY_KIND_MANAGED", "Managed"},
    {6, "CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC", "Device Static"},
    {7, "CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC", "Managed Static"},
};

}  // namespace

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "unknown";
  return buf;
}

RunFile::RunFile(const std::string& path, Mode mode) : path_(path) {
  int flags = SQLITE_OPEN_READWRITE;
  if (mode == Mode::kCreate) {
    const auto parent = std::filesystem::path(path).parent_path();
    if (!parent.empty()) {
      std::error_code ec;
      std::filesystem::create_directories(parent, ec);
      if (ec) throw RecorderError("cannot create directory " + parent.string() + ": " + ec.message());
    }
    // SQLite's per-call mutexes cost ~5% of the writer; the writer serializes its users itself.
    flags |= SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
  }
  if (sqlite3_open_v2(path.c_str(), &db_, flags, nullptr) != SQLITE_OK) {
    const std::string err = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close_v2(db_);
    db_ = nullptr;
    throw RecorderError("cannot open run database " + path + ": " + err);
  }
  sqlite3_busy_timeout(db_, 5000);
  try {
    upgrade();
    mark_dead_runs_killed();
  } catch (...) {
    sqlite3_close_v2(db_);
    db_ = nullptr;
    throw;
  }
}

RunFile::~RunFile() {
  if (db_) sqlite3_close_v2(db_);
}

void RunFile::exec(const std::string& sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    const std::string message = err ? err : "unknown error";
    sqlite3_free(err);
    throw RecorderError("SQLite: " + message + " in " + path_ + ": " + sql.substr(0, 120));
  }
}

void RunFile::prepare(Statement& s, const std::string& sql) {
  if (sqlite3_prepare_v3(db_, sql.c_str(), -1, SQLITE_PREPARE_PERSISTENT, &s.stmt, nullptr) != SQLITE_OK)
    throw RecorderError("SQLite prepare failed in " + path_ + ": " + sqlite3_errmsg(db_) + " in: " + sql.substr(0, 120));
}

// True when `table` exists without `column`: the file needs that column added.
bool RunFile::lacks_column(const char* table, const char* column) {
  Statement s;
  prepare(s, "SELECT (SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = ?1), "
             "(SELECT COUNT(*) FROM pragma_table_info(?1) WHERE name = ?2)");
  sqlite3_bind_text(s.stmt, 1, table, -1, SQLITE_STATIC);
  sqlite3_bind_text(s.stmt, 2, column, -1, SQLITE_STATIC);
  return sqlite3_step(s.stmt) == SQLITE_ROW && sqlite3_column_int(s.stmt, 0) > 0 && sqlite3_column_int(s.stmt, 1) == 0;
}

void RunFile::upgrade() {
  int version = 0;
  {
    Statement s;
    prepare(s, "PRAGMA user_version");
    if (sqlite3_step(s.stmt) == SQLITE_ROW) version = sqlite3_column_int(s.stmt, 0);
  }
  if (version != 0 && (version < schema::kOldestMigratableVersion || version > schema::kSchemaVersion))
    throw RecorderError(path_ + " has schema version " + std::to_string(version) + ", this build writes " +
                        std::to_string(schema::kSchemaVersion) + ": write the run to a new file (--db)");
  exec("PRAGMA journal_mode=WAL");
  exec("PRAGMA synchronous=NORMAL");
  // Writer throughput: a 64 MiB page cache keeps the ranges index in memory, and checkpoints
  // every 16k pages (64 MiB of WAL) instead of 1k move pages back in fewer, larger batches.
  exec("PRAGMA cache_size=-65536");
  exec("PRAGMA wal_autocheckpoint=16384");
  exec("BEGIN");
  try {
    for (const std::string& sql : schema::migration_statements(
             version, [this](const char* table, const char* column) { return lacks_column(table, column); }))
      exec(sql);
    exec(schema::create_statements());
    for (const Category category : kCategories) {
      const std::string name = to_string(category);
      exec("INSERT OR IGNORE INTO " + std::string(schema::kRangeCategories) + "(id, name, label) VALUES(" +
           std::to_string(static_cast<int>(category)) + ", '" + name + "', '" + name + "')");
    }
    auto insert_enum = [&](const char* table, int id, const char* name, const char* label) {
      exec(std::string("INSERT OR IGNORE INTO ") + table + "(id, name, label) VALUES(" + std::to_string(id) + ", '" +
           name + "', '" + label + "')");
    };
    for (const auto& [kernel_class, name] : kKernelClassNames)
      insert_enum(schema::kKernelClasses, static_cast<int>(kernel_class), name, name);
    for (const auto& row : kMemcpyKinds) insert_enum(schema::kMemcpyKinds, row.id, row.name, row.label);
    for (const auto& row : kMemoryKinds) insert_enum(schema::kMemoryKinds, row.id, row.name, row.label);
    exec("PRAGMA user_version=" + std::to_string(schema::kSchemaVersion));
    exec("COMMIT");
  } catch (...) {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
}

// Runs of this host left 'running' by a process that no longer exists died without end_run
// (SIGKILL, OOM killer, crash). A reused pid that is alive again hides a dead run: it stays
// 'running' until that process is gone too.
void RunFile::mark_dead_runs_killed() {
  const std::string host = host_name();
  Statement find, mark, mark_rank;
  prepare(find, "SELECT id, pid FROM runs WHERE status = 'running' AND host = ?");
  prepare(mark, "UPDATE runs SET status = 'killed', status_message = ? WHERE id = ? AND status = 'running'");
  prepare(mark_rank, "UPDATE ranks SET status = 'killed', status_message = ? WHERE status = 'running' AND host = ? AND "
                     "pid = ?");
  sqlite3_bind_text(find.stmt, 1, host.c_str(), -1, SQLITE_TRANSIENT);
  std::vector<std::pair<std::int64_t, std::int64_t>> dead;
  while (sqlite3_step(find.stmt) == SQLITE_ROW) {
    const std::int64_t id = sqlite3_column_int64(find.stmt, 0);
    const std::int64_t pid = sqlite3_column_int64(find.stmt, 1);
    if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) dead.emplace_back(id, pid);
  }
  for (const auto& [id, pid] : dead) {
    const std::string message = "found dead: process " + std::to_string(pid) + " on " + host +
                                " no longer existed when the database was next opened (killed or crashed "
                                "without end_run); records up to its last flush are kept";
    sqlite3_bind_text(mark.stmt, 1, message.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(mark.stmt, 2, id);
    sqlite3_step(mark.stmt);
    sqlite3_reset(mark.stmt);
    sqlite3_bind_text(mark_rank.stmt, 1, message.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(mark_rank.stmt, 2, host.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(mark_rank.stmt, 3, pid);
    sqlite3_step(mark_rank.stmt);
    sqlite3_reset(mark_rank.stmt);
  }
}

}  // namespace hs::probes::detail
