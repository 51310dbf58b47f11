// nsys_db.cpp — see nsys_db.h.
#include "nsys_db.h"

#include "hybridscope/importer/phase_map.h"

namespace hs::importer::detail {

NsysDb::NsysDb(const std::string& path) : path_(path) {
  if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    const std::string why = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    db_ = nullptr;
    throw ImportError("cannot open " + path + ": " + why);
  }
  // The sorts of the GPU pass spill to temporary files, not to memory (bounded memory on any size).
  sqlite3_exec(db_, "PRAGMA temp_store = FILE; PRAGMA cache_size = -16384;", nullptr, nullptr, nullptr);
  try {
    Cursor tables(*this, "SELECT name FROM sqlite_master WHERE type = 'table'");
    std::set<std::string> names;
    while (tables.next()) names.insert(tables.text(0));
    Cursor cols(*this, "SELECT name FROM pragma_table_info(?1)");
    for (const std::string& t : names) {
      auto& set = columns_[t];
      cols.reset();
      cols.bind_text(1, t);
      while (cols.next()) set.insert(cols.text(0));
    }
  } catch (...) {
    sqlite3_close(db_);
    throw;
  }
}

NsysDb::~NsysDb() { sqlite3_close(db_); }

bool NsysDb::has_column(const std::string& table, const std::string& column) const {
  const auto it = columns_.find(table);
  return it != columns_.end() && it->second.count(column) > 0;
}

std::string NsysDb::export_meta(const std::string& name) const {
  for (const char* table : {"META_DATA_EXPORT", "EXPORT_META_DATA"}) {
    if (!has_table(table) || !has_column(table, "name") || !has_column(table, "value")) continue;
    Cursor c(*this, std::string("SELECT value FROM ") + table + " WHERE name = '" + name + "'");
    if (c.next() && !c.is_null(0)) return c.text(0);
  }
  return "";
}

std::string NsysDb::version() const {
  const std::string schema = export_meta("EXPORT_SCHEMA_VERSION");
  const std::string product = export_meta("EXPORT_PRODUCT_VERSION");
  if (schema.empty() && product.empty()) return "unknown (no export metadata table)";
  return (schema.empty() ? "unknown" : schema) + " (Nsight Systems " + (product.empty() ? "unknown" : product) + ")";
}

Cursor::Cursor(const NsysDb& db, const std::string& sql) : db_(db) {
  if (sqlite3_prepare_v2(db.handle(), sql.c_str(), -1, &st_, nullptr) != SQLITE_OK) {
    const std::string why = sqlite3_errmsg(db.handle());
    sqlite3_finalize(st_);
    throw ImportError("cannot read " + db.path() + ": " + why + " (in: " + sql + ")");
  }
}

Cursor::~Cursor() { sqlite3_finalize(st_); }

void Cursor::bind(int index, std::int64_t value) { sqlite3_bind_int64(st_, index, value); }
void Cursor::bind_text(int index, const std::string& value) {
  sqlite3_bind_text(st_, index, value.c_str(), static_cast<int>(value.size()), SQLITE_TRANSIENT);
}
void Cursor::reset() { sqlite3_reset(st_); }

bool Cursor::next() {
  const int rc = sqlite3_step(st_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  throw ImportError("cannot read " + db_.path() + ": " + sqlite3_errmsg(db_.handle()));
}

std::string Cursor::text(int col) const {
  const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(st_, col));
  return p ? std::string(p, static_cast<std::size_t>(sqlite3_column_bytes(st_, col))) : std::string();
}

StringIds::StringIds(const NsysDb& db) : lookup_(db, "SELECT value FROM StringIds WHERE id = ?1") {}

const std::string* StringIds::get(std::int64_t id) {
  if (id < 0) return nullptr;
  const auto it = cache_.find(id);
  if (it != cache_.end()) return &it->second;
  lookup_.reset();
  lookup_.bind(1, id);
  if (!lookup_.next()) return nullptr;
  std::string value = lookup_.text(0);
  return &cache_.emplace(id, std::move(value)).first->second;
}

}  // namespace hs::importer::detail
