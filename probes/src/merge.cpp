// merge.cpp — per-rank files into the run database (see merge.h). Which tables are copied, and
// every column of each, comes from schema.h's description: a per-rank table (run_id, rank) is
// copied for the run, a table whose rows hang off one (switch_components) follows its parent;
// string ids are remapped, ids that other tables reference are renumbered above the run
// database's largest. Both files are opened through RunFile, which brings them to the current
// schema and marks runs left 'running' by dead processes as killed.
#include "hybridscope/probes/merge.h"

#include <sqlite3.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "hybridscope/probes/recorder.h"
#include "hybridscope/probes/schema.h"
#include "run_file.h"

namespace hs::probes {

namespace {

namespace fs = std::filesystem;
using detail::RunFile;
using schema::Column;
using schema::Table;

/// Each row's columns as text.
std::vector<std::vector<std::string>> rows(RunFile& db, const std::string& sql) {
  detail::Statement st;
  if (sqlite3_prepare_v2(db.get(), sql.c_str(), -1, &st.stmt, nullptr) != SQLITE_OK)
    throw RecorderError(std::string("merge: ") + sqlite3_errmsg(db.get()) + " in: " + sql.substr(0, 120));
  std::vector<std::vector<std::string>> out;
  while (sqlite3_step(st.stmt) == SQLITE_ROW) {
    std::vector<std::string> row;
    for (int c = 0; c < sqlite3_column_count(st.stmt); ++c) {
      const auto* text = sqlite3_column_text(st.stmt, c);
      row.emplace_back(text ? reinterpret_cast<const char*>(text) : "");
    }
    out.push_back(std::move(row));
  }
  return out;
}

std::string quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

bool referenced(const Table& t) {
  for (const Table* other : schema::kTables)
    for (const Column& c : other->columns)
      if (c.references && schema::detail::same(c.references, t.name)) return true;
  return false;
}

/// A per-rank table whose auto-assigned ids other rows reference: copied under new ids.
bool renumbered(const Table& t) {
  if (!t.per_rank() || !referenced(t)) return false;
  for (const Column& c : t.columns)
    if (c.auto_id()) return true;
  return false;
}

/// The column of `t` that references a per-rank table (its parent); nullptr when there is none.
const Column* parent_column(const Table& t) {
  for (const Column& c : t.columns) {
    if (!c.references) continue;
    const Table* parent = schema::find_table(c.references);
    if (parent && parent->per_rank()) return &c;
  }
  return nullptr;
}

/// A table merge copies: per-rank, or a child of a per-rank table.
bool merged(const Table& t) { return t.per_rank() || parent_column(t) != nullptr; }

/// `INSERT INTO main.T(all columns) SELECT ... FROM src.T` for run `run`, every described column:
/// string ids through temp.smap, renumbered ids and references to them shifted by `offsets`.
std::string copy_statement(const Table& t, const std::string& run, const std::map<std::string, std::string>& offsets) {
  std::string columns, values, joins;
  int join = 0;
  for (const Column& c : t.columns) {
    std::string value = std::string("x.") + c.name;
    if (c.auto_id()) {
      if (!renumbered(t)) continue;  // SQLite assigns a fresh id
      value += " + " + offsets.at(t.name);
    } else if (c.references && schema::detail::same(c.references, schema::kStrings)) {
      const std::string alias = "s" + std::to_string(join++);
      joins += std::string(c.not_null() ? " JOIN" : " LEFT JOIN") + " temp.smap " + alias + " ON " + alias +
               ".old = x." + c.name;
      value = alias + ".new";
    } else if (c.references && offsets.count(c.references)) {
      value += " + " + offsets.at(c.references);
    }
    columns += (columns.empty() ? "" : ", ") + std::string(c.name);
    values += (values.empty() ? "" : ", ") + value;
  }
  std::string where;
  if (t.per_rank()) {
    where = " WHERE x.run_id = " + run;
  } else {
    const Column& parent = *parent_column(t);
    where = std::string(" WHERE x.") + parent.name + " IN (SELECT id FROM src." + parent.references +
            " WHERE run_id = " + run + ")";
  }
  return std::string("INSERT INTO main.") + t.name + "(" + columns + ") SELECT " + values + " FROM src." + t.name +
         " x" + joins + where;
}

/// Deletes this run's rows of the ranks in `ranks_of` from main.T (children through their parent).
std::string delete_statement(const Table& t, const std::string& run, const std::string& ranks_of) {
  if (t.per_rank())
    return std::string("DELETE FROM main.") + t.name + " WHERE run_id = " + run + " AND rank IN " + ranks_of;
  const Column& parent = *parent_column(t);
  return std::string("DELETE FROM main.") + t.name + " WHERE " + parent.name + " IN (SELECT id FROM main." +
         parent.references + " WHERE run_id = " + run + " AND rank IN " + ranks_of + ")";
}

}  // namespace

MergeReport merge_rank_files(const std::string& db_path) {
  MergeReport report;
  if (!fs::exists(db_path)) throw RecorderError("merge: no run database at " + db_path);
  RunFile db(db_path, RunFile::Mode::kExisting);
  for (const std::string& file : rank_files(db_path)) {
    // A failure (a full disk, most likely) leaves nothing of this file merged, and the user must
    // learn how to finish once it is fixed.
    auto kept = [&](const std::exception& e) {
      return RecorderError(std::string("merge: ") + e.what() + "; " + file + " is kept, not merged: run `hybridscope merge " +
                           db_path + "` once that is fixed (what was merged before stays)");
    };
    try {
      { RunFile upgrade(file, RunFile::Mode::kExisting); }
      db.exec("ATTACH DATABASE " + quote(file) + " AS src");
    } catch (const std::exception& e) {
      throw kept(e);
    }
    std::vector<std::vector<std::string>> runs;
    try {
      runs = rows(db, "SELECT r.id, r.status, (SELECT COUNT(*) FROM main.runs m WHERE m.id = r.id) FROM src.runs r");
      db.exec("BEGIN IMMEDIATE");
    } catch (const std::exception& e) {
      sqlite3_exec(db.get(), "DETACH DATABASE src", nullptr, nullptr, nullptr);
      throw kept(e);
    }
    bool keep_file = false;
    try {
      db.exec("CREATE TEMP TABLE smap(old INTEGER PRIMARY KEY, new INTEGER NOT NULL)");
      db.exec("INSERT OR IGNORE INTO main.strings(value) SELECT value FROM src.strings");
      db.exec("INSERT INTO temp.smap SELECT s.id, m.id FROM src.strings s JOIN main.strings m ON m.value = s.value");
      for (const auto& run : runs) {
        const std::string id = run[0];
        if (run[2] == "0") {
          report.messages.push_back(file + ": run " + id + " is not in " + db_path + "; left in place");
          keep_file = true;
          continue;
        }
        if (run[1] == "running") {
          report.messages.push_back(file + ": run " + id + " is still running there; merge it when it ends");
          keep_file = true;
          continue;
        }
        // Replace this rank's earlier rows of the run (idempotence): children before parents.
        const std::string ranks_of = "(SELECT rank FROM src.ranks WHERE run_id = " + id + ")";
        for (const Table* t : schema::kTables)
          if (merged(*t) && !t->per_rank()) db.exec(delete_statement(*t, id, ranks_of));
        for (const Table* t : schema::kTables)
          if (t->per_rank()) db.exec(delete_statement(*t, id, ranks_of));
        std::map<std::string, std::string> offsets;
        for (const Table* t : schema::kTables)
          if (renumbered(*t))
            offsets[t->name] = rows(db, std::string("SELECT COALESCE(MAX(id), 0) FROM main.") + t->name)[0][0];
        std::int64_t copied = 0;
        for (const Table* t : schema::kTables) {  // parents before children
          if (!merged(*t)) continue;
          db.exec(copy_statement(*t, id, offsets));
          copied += sqlite3_changes64(db.get());
        }
        report.rows_copied += copied;
        report.messages.push_back(file + ": run " + id + ", " + std::to_string(copied) + " rows");
      }
      // How the run ended: a completed run with a rank that did not complete has failed. Its lost
      // records are every rank's (each ranks row counts its own; the runs row only rank 0's until
      // now).
      for (const auto& run : runs) {
        if (run[2] == "0") continue;
        db.exec("UPDATE main.runs SET dropped_records = (SELECT COALESCE(SUM(dropped_records), 0) FROM main.ranks "
                "WHERE run_id = " + run[0] + "), write_errors = (SELECT COALESCE(SUM(write_errors), 0) FROM "
                "main.ranks WHERE run_id = " + run[0] + ") WHERE id = " + run[0]);
        const auto bad = rows(db, "SELECT rank, status, COALESCE(status_message, '') FROM main.ranks WHERE run_id = " +
                                      run[0] + " AND status <> 'completed' ORDER BY rank LIMIT 1");
        if (bad.empty()) continue;
        db.exec("UPDATE main.runs SET status = 'failed', status_message = " +
                quote("rank " + bad[0][0] + " " + bad[0][1] + (bad[0][2].empty() ? "" : ": " + bad[0][2])) +
                " WHERE id = " + run[0] + " AND status = 'completed'");
      }
      db.exec("DROP TABLE temp.smap");
      db.exec("COMMIT");
    } catch (const std::exception& e) {
      sqlite3_exec(db.get(), "ROLLBACK", nullptr, nullptr, nullptr);
      sqlite3_exec(db.get(), "DETACH DATABASE src", nullptr, nullptr, nullptr);
      throw kept(e);
    }
    db.exec("DETACH DATABASE src");
    if (!keep_file) {
      remove_run_file(file);
      ++report.files_merged;
    }
  }
  return report;
}

}  // namespace hs::probes
