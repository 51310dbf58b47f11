// run_file.h — opening a run database file: the one place that brings a file to the current
// schema. Used by the writer (sqlite_writer.cpp) and by merge (merge.cpp). Private to hs_probes.
//
// Opening a file: create it (and its parent directories) when asked, refuse a schema version it
// cannot upgrade, switch to WAL, run the in-place migrations (schema.h's kMigrateToV*), create
// what is missing, fill the enum tables, and mark runs and ranks of this host left 'running' by a
// process that no longer exists as 'killed'. What this is not: a writer — no records go in here.
#pragma once

#include <sqlite3.h>

#include <string>

namespace hs::probes::detail {

/// This machine's host name ("unknown" when it cannot be read): the runs and ranks tables' host.
std::string host_name();

/// A prepared statement that finalizes itself.
struct Statement {
  sqlite3_stmt* stmt = nullptr;
  Statement() = default;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  ~Statement() { sqlite3_finalize(stmt); }
};

/// One connection to a run database at the current schema version (RAII: closes on destruction).
class RunFile {
 public:
  enum class Mode {
    kCreate,    // the writer: create the file when absent; SQLite's per-call mutexes off (one user)
    kExisting,  // merge: the file must exist
  };
  /// Opens and upgrades `path` (see above). Throws RecorderError, naming the file, when it cannot
  /// be opened or created, carries a schema version this build cannot upgrade, or a migration fails.
  RunFile(const std::string& path, Mode mode);
  ~RunFile();
  RunFile(const RunFile&) = delete;
  RunFile& operator=(const RunFile&) = delete;

  sqlite3* get() const noexcept { return db_; }
  const std::string& path() const noexcept { return path_; }
  /// Runs `sql` (one or more statements); throws RecorderError with SQLite's message.
  void exec(const std::string& sql);
  /// Prepares `sql` into `s` (SQLITE_PREPARE_PERSISTENT); throws RecorderError.
  void prepare(Statement& s, const std::string& sql);

 private:
  void upgrade();
  bool lacks_column(const char* table, const char* column);
  void mark_dead_runs_killed();

  std::string path_;
  sqlite3* db_ = nullptr;
};

}  // namespace hs::probes::detail
