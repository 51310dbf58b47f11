// sqlite_query.h — private to hs_reports: the one prepared-statement helper its readers share
// (through table_reader.h, which reads columns by name), and the connection RunDatabase holds.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <optional>
#include <string>

#include "hybridscope/reports/run_database.h"

namespace hs::reports {

struct RunDatabase::Impl {
  sqlite3* db = nullptr;
  ~Impl() {
    if (db) sqlite3_close_v2(db);
  }
};

namespace detail {

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
  void bind(int index, const std::string& value) {
    sqlite3_bind_text(stmt_, index, value.c_str(), static_cast<int>(value.size()), SQLITE_TRANSIENT);
  }
  /// Rewinds the statement to run it again with new bindings.
  void reset() { sqlite3_reset(stmt_); }
  /// Advances to the next row; false when done. Throws on an SQLite error.
  bool next() {
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    fail("read");
    return false;
  }
  /// The position of the result column named `name` (its AS name, or the column's own); throws
  /// kQuery when the statement has none. Readers look a position up once, before their first row.
  int column(const std::string& name) const {
    for (int i = 0; i < sqlite3_column_count(stmt_); ++i)
      if (const char* n = sqlite3_column_name(stmt_, i); n && name == n) return i;
    throw RunDatabaseError(RunDatabaseError::Kind::kQuery,
                           "cannot read " + path_ + ": the reader asks for a column `" + name + "` its SELECT lacks");
  }
  std::int64_t int64(int col) const { return sqlite3_column_int64(stmt_, col); }
  double real(int col) const { return sqlite3_column_double(stmt_, col); }
  bool is_null(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
  std::optional<std::int64_t> opt_int64(int col) const {
    return is_null(col) ? std::nullopt : std::optional<std::int64_t>(int64(col));
  }
  std::optional<double> opt_real(int col) const {
    return is_null(col) ? std::nullopt : std::optional<double>(real(col));
  }
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
      throw RunDatabaseError(RunDatabaseError::Kind::kNotADatabase, path_ + " is not an SQLite database (" + message +
                                                      "): pass the .sqlite file that `hybridscope train --db` wrote");
    throw RunDatabaseError(RunDatabaseError::Kind::kQuery, "cannot " + std::string(what) + " " + path_ + ": " + message);
  }

  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
  const std::string& path_;
};

}  // namespace detail

}  // namespace hs::reports
