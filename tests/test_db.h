// test_db.h — what the database tests share: a fresh scratch database path and the rows of a
// query as text.
#pragma once

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace hs::test {

/// <tmp>/hs_<suite>_<pid>/<name>, removed if it exists.
inline std::string temp_db(const std::string& suite, const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / ("hs_" + suite + "_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto path = dir / name;
  std::filesystem::remove(path);
  return path.string();
}

/// Every row of `sql` as text ("NULL" for SQL NULL), columns joined by '|'.
inline std::vector<std::string> query_rows(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  // A test polls files that a live run is writing: wait out its write locks instead of failing
  // with SQLITE_BUSY (seen under a loaded machine in RunnerTest.AKilledMatrixResumesOnlyWhatIsMissing).
  sqlite3_busy_timeout(db, 10000);
  sqlite3_stmt* st = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
  std::vector<std::string> out;
  while (st && sqlite3_step(st) == SQLITE_ROW) {
    std::string line;
    for (int c = 0; c < sqlite3_column_count(st); ++c) {
      if (c) line += "|";
      line += sqlite3_column_type(st, c) == SQLITE_NULL ? "NULL"
                                                         : reinterpret_cast<const char*>(sqlite3_column_text(st, c));
    }
    out.push_back(line);
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  return out;
}

/// The first row of `sql` ("" when none).
/// The first column of `sql`'s first row, or nullopt when the file is not (yet) a database with
/// those tables or the query fails: for polling a file that a starting run is still creating.
inline std::optional<std::string> poll_row(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  std::optional<std::string> out;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_busy_timeout(db, 10000);
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW &&
        sqlite3_column_type(st, 0) != SQLITE_NULL)
      out = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
  }
  sqlite3_close(db);
  return out;
}

inline std::string query_row(const std::string& path, const std::string& sql) {
  const auto rows = query_rows(path, sql);
  return rows.empty() ? std::string() : rows.front();
}

}  // namespace hs::test
