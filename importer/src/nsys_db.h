// nsys_db.h — an Nsight Systems SQLite export opened read-only, with what its version carries
// (tables and columns) and cursors over its rows. Private to hs_importer.
//
// Nsight Systems ships no indexes and changes table sets between versions (an empty table is left
// out by newer exports; columns are added at micro versions, renamed at minor ones), so every
// query is built from the columns present. Rows are stepped one at a time (sqlite3_step): a table
// is never loaded whole.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <unordered_map>

namespace hs::importer::detail {

class NsysDb {
 public:
  /// Opens `path` read-only; throws ImportError when it cannot be opened or is no SQLite database.
  explicit NsysDb(const std::string& path);
  ~NsysDb();
  NsysDb(const NsysDb&) = delete;
  NsysDb& operator=(const NsysDb&) = delete;

  sqlite3* handle() const { return db_; }
  const std::string& path() const { return path_; }
  bool has_table(const std::string& table) const { return columns_.count(table) > 0; }
  bool has_column(const std::string& table, const std::string& column) const;
  /// "3.13.2 (Nsight Systems 2024.5.1.113)" from EXPORT_META_DATA / META_DATA_EXPORT; "unknown" without.
  std::string version() const;
  /// The value of `name` in the export's metadata table (META_DATA_EXPORT, EXPORT_META_DATA); "" if absent.
  std::string export_meta(const std::string& name) const;

 private:
  std::string path_;
  sqlite3* db_ = nullptr;
  std::map<std::string, std::set<std::string>> columns_;  // table -> its columns
};

/// A prepared statement stepped as a cursor.
class Cursor {
 public:
  /// Throws ImportError with SQLite's message and the file.
  Cursor(const NsysDb& db, const std::string& sql);
  ~Cursor();
  Cursor(const Cursor&) = delete;
  Cursor& operator=(const Cursor&) = delete;

  void bind(int index, std::int64_t value);
  void bind_text(int index, const std::string& value);
  /// Back to before the first row (bindings kept), to run the statement again.
  void reset();
  /// The next row; false at the end. Throws ImportError on a read error.
  bool next();
  bool is_null(int col) const { return sqlite3_column_type(st_, col) == SQLITE_NULL; }
  std::int64_t i64(int col) const { return sqlite3_column_int64(st_, col); }
  /// `null_value` for NULL.
  std::int64_t i64_or(int col, std::int64_t null_value) const { return is_null(col) ? null_value : i64(col); }
  std::string text(int col) const;

 private:
  const NsysDb& db_;
  sqlite3_stmt* st_ = nullptr;
};

/// StringIds resolved one id at a time (primary-key lookups) and remembered: the export's strings
/// are interned once, so a kernel name is looked up once however often it runs.
class StringIds {
 public:
  explicit StringIds(const NsysDb& db);
  /// The string of `id`; nullptr when the id is NULL (-1) or unknown. Valid as long as this object.
  const std::string* get(std::int64_t id);

 private:
  Cursor lookup_;
  std::unordered_map<std::int64_t, std::string> cache_;
};

}  // namespace hs::importer::detail
