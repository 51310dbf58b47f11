// merge.cpp — per-rank files into the run database (see merge.h).
#include "hybridscope/probes/merge.h"

#include <sqlite3.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include "hybridscope/probes/recorder.h"

namespace hs::probes {

namespace {

namespace fs = std::filesystem;

class Db {
 public:
  explicit Db(const std::string& path) {
    if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
      const std::string err = db_ ? sqlite3_errmsg(db_) : "out of memory";
      sqlite3_close(db_);
      throw RecorderError("cannot open " + path + ": " + err);
    }
    sqlite3_busy_timeout(db_, 5000);
  }
  ~Db() { sqlite3_close(db_); }
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  void exec(const std::string& sql) {
    char* err = nullptr;
    if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
      const std::string message = err ? err : "unknown error";
      sqlite3_free(err);
      throw RecorderError("merge: " + message + " in: " + sql.substr(0, 120));
    }
  }
  /// Each row's columns as text.
  std::vector<std::vector<std::string>> rows(const std::string& sql) {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &st, nullptr) != SQLITE_OK)
      throw RecorderError(std::string("merge: ") + sqlite3_errmsg(db_) + " in: " + sql.substr(0, 120));
    std::vector<std::vector<std::string>> out;
    while (sqlite3_step(st) == SQLITE_ROW) {
      std::vector<std::string> row;
      for (int c = 0; c < sqlite3_column_count(st); ++c) {
        const auto* text = sqlite3_column_text(st, c);
        row.emplace_back(text ? reinterpret_cast<const char*>(text) : "");
      }
      out.push_back(std::move(row));
    }
    sqlite3_finalize(st);
    return out;
  }
  std::int64_t changes() const { return sqlite3_changes64(db_); }

 private:
  sqlite3* db_ = nullptr;
};

void remove_file_set(const std::string& path) {
  std::error_code ec;
  for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(path + suffix, ec);
}

std::string quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

}  // namespace

std::vector<std::string> rank_files(const std::string& db_path) {
  const fs::path db(db_path);
  const fs::path dir = db.parent_path().empty() ? fs::path(".") : db.parent_path();
  const std::string prefix = db.filename().string() + ".rank";
  std::vector<std::pair<int, std::string>> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    const std::string digits = name.substr(prefix.size());
    if (digits.empty() || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
      continue;  // RUN.sqlite.rank3-wal and the like
    found.emplace_back(std::stoi(digits), (db.parent_path() / name).string());
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> out;
  for (auto& [rank, path] : found) out.push_back(std::move(path));
  return out;
}

MergeReport merge_rank_files(const std::string& db_path) {
  MergeReport report;
  if (!fs::exists(db_path)) throw RecorderError("merge: no run database at " + db_path);
  // Opening with a Recorder brings each file to the current schema and marks runs and ranks left
  // 'running' by dead processes as killed.
  { Recorder upgrade(db_path); }
  for (const std::string& file : rank_files(db_path)) {
    { Recorder upgrade(file); }
    Db db(db_path);
    db.exec("ATTACH DATABASE " + quote(file) + " AS src");
    const auto runs = db.rows("SELECT r.id, r.status, (SELECT COUNT(*) FROM main.runs m WHERE m.id = r.id) FROM src.runs r");
    bool keep_file = false;
    db.exec("BEGIN IMMEDIATE");
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
        const std::string ranks_of = "(SELECT rank FROM src.ranks WHERE run_id = " + id + ")";
        // Replace this rank's earlier rows of the run (idempotence).
        db.exec("DELETE FROM main.switch_components WHERE switch_id IN (SELECT id FROM main.switches WHERE run_id = " +
                id + " AND rank IN " + ranks_of + ")");
        for (const char* table : {"switches", "ranges", "comm_ops", "memory_samples", "kv_pool_samples", "ranks",
                                  "kernels", "memcpy", "memset", "runtime_api", "external_correlations",
                                  "correlation_ranges", "cupti_overhead", "collector_stats"})
          db.exec(std::string("DELETE FROM main.") + table + " WHERE run_id = " + id + " AND rank IN " + ranks_of);
        std::int64_t copied = 0;
        auto copy = [&](const std::string& sql) {
          db.exec(sql);
          copied += db.changes();
        };
        copy("INSERT INTO main.ranges(run_id, rank, tid, step, name_id, category_id, depth, start_ns, end_ns) "
             "SELECT r.run_id, r.rank, r.tid, r.step, n.new, r.category_id, r.depth, r.start_ns, r.end_ns "
             "FROM src.ranges r JOIN temp.smap n ON n.old = r.name_id WHERE r.run_id = " + id);
        copy("INSERT INTO main.comm_ops(run_id, rank, step, op_id, group_id, group_size, bytes, dtype_id, start_ns, "
             "end_ns, algbw_gbps, busbw_gbps) SELECT c.run_id, c.rank, c.step, o.new, g.new, c.group_size, c.bytes, "
             "d.new, c.start_ns, c.end_ns, c.algbw_gbps, c.busbw_gbps FROM src.comm_ops c JOIN temp.smap o ON "
             "o.old = c.op_id JOIN temp.smap g ON g.old = c.group_id JOIN temp.smap d ON d.old = c.dtype_id "
             "WHERE c.run_id = " + id);
        copy("INSERT INTO main.memory_samples(run_id, rank, step, ts_ns, phase_id, device, allocated_bytes, "
             "reserved_bytes, active_bytes, inactive_split_bytes, largest_free_block_bytes, peak_allocated_bytes, "
             "num_allocs, num_alloc_retries, num_ooms, reserved_slack, split_fragmentation, external_fragmentation) "
             "SELECT m.run_id, m.rank, m.step, m.ts_ns, p.new, m.device, m.allocated_bytes, m.reserved_bytes, "
             "m.active_bytes, m.inactive_split_bytes, m.largest_free_block_bytes, m.peak_allocated_bytes, "
             "m.num_allocs, m.num_alloc_retries, m.num_ooms, m.reserved_slack, m.split_fragmentation, "
             "m.external_fragmentation FROM src.memory_samples m JOIN temp.smap p ON p.old = m.phase_id "
             "WHERE m.run_id = " + id);
        copy("INSERT INTO main.kv_pool_samples(run_id, rank, step, ts_ns, phase_id, num_blocks, block_size, "
             "blocks_used, shared_blocks, num_sequences, tokens_stored, token_capacity_used, cache_bytes) "
             "SELECT k.run_id, k.rank, k.step, k.ts_ns, p.new, k.num_blocks, k.block_size, k.blocks_used, "
             "k.shared_blocks, k.num_sequences, k.tokens_stored, k.token_capacity_used, k.cache_bytes "
             "FROM src.kv_pool_samples k JOIN temp.smap p ON p.old = k.phase_id WHERE k.run_id = " + id);
        // Switch ids are renumbered above the run database's largest.
        const std::string offset = db.rows("SELECT COALESCE(MAX(id), 0) FROM main.switches")[0][0];
        copy("INSERT INTO main.switches(id, run_id, rank, step, direction_id, start_ns, end_ns, bytes_sent, "
             "bytes_received, bytes_local, memory_before_bytes, memory_after_bytes, peak_memory_bytes) SELECT s.id + " +
             offset + ", s.run_id, s.rank, s.step, d.new, s.start_ns, s.end_ns, s.bytes_sent, s.bytes_received, "
             "s.bytes_local, s.memory_before_bytes, s.memory_after_bytes, s.peak_memory_bytes FROM src.switches s "
             "JOIN temp.smap d ON d.old = s.direction_id WHERE s.run_id = " + id);
        copy("INSERT INTO main.switch_components(switch_id, name_id, duration_ns) SELECT c.switch_id + " + offset +
             ", n.new, c.duration_ns FROM src.switch_components c JOIN src.switches s ON s.id = c.switch_id "
             "JOIN temp.smap n ON n.old = c.name_id WHERE s.run_id = " + id);
        // GPU activity (CUPTI): names remapped; the enum tables' ids are CUPTI's, the same in every file.
        copy("INSERT INTO main.kernels(run_id, rank, device, context, stream, correlation_id, start_ns, end_ns, "
             "name_id, short_name_id, class_id, grid_x, grid_y, grid_z, block_x, block_y, block_z, "
             "registers_per_thread, static_shared_memory, dynamic_shared_memory) SELECT k.run_id, k.rank, k.device, "
             "k.context, k.stream, k.correlation_id, k.start_ns, k.end_ns, n.new, sn.new, k.class_id, k.grid_x, "
             "k.grid_y, k.grid_z, k.block_x, k.block_y, k.block_z, k.registers_per_thread, k.static_shared_memory, "
             "k.dynamic_shared_memory FROM src.kernels k JOIN temp.smap n ON n.old = k.name_id "
             "JOIN temp.smap sn ON sn.old = k.short_name_id WHERE k.run_id = " + id);
        copy("INSERT INTO main.memcpy SELECT * FROM src.memcpy WHERE run_id = " + id);
        copy("INSERT INTO main.memset SELECT * FROM src.memset WHERE run_id = " + id);
        copy("INSERT INTO main.runtime_api(run_id, rank, tid, correlation_id, cbid, name_id, start_ns, end_ns, "
             "return_value) SELECT a.run_id, a.rank, a.tid, a.correlation_id, a.cbid, n.new, a.start_ns, a.end_ns, "
             "a.return_value FROM src.runtime_api a JOIN temp.smap n ON n.old = a.name_id WHERE a.run_id = " + id);
        copy("INSERT INTO main.external_correlations SELECT * FROM src.external_correlations WHERE run_id = " + id);
        copy("INSERT INTO main.correlation_ranges(run_id, rank, external_id, tid, depth, start_ns, name_id) "
             "SELECT c.run_id, c.rank, c.external_id, c.tid, c.depth, c.start_ns, n.new FROM src.correlation_ranges c "
             "JOIN temp.smap n ON n.old = c.name_id WHERE c.run_id = " + id);
        copy("INSERT INTO main.cupti_overhead(run_id, rank, kind_id, start_ns, end_ns) SELECT o.run_id, o.rank, "
             "n.new, o.start_ns, o.end_ns FROM src.cupti_overhead o JOIN temp.smap n ON n.old = o.kind_id "
             "WHERE o.run_id = " + id);
        copy("INSERT INTO main.collector_stats(run_id, rank, ts_ns, status_id, buffers_requested, buffers_refused, "
             "buffers_completed, records, dropped_records, peak_buffer_bytes) SELECT c.run_id, c.rank, c.ts_ns, "
             "n.new, c.buffers_requested, c.buffers_refused, c.buffers_completed, c.records, c.dropped_records, "
             "c.peak_buffer_bytes FROM src.collector_stats c JOIN temp.smap n ON n.old = c.status_id "
             "WHERE c.run_id = " + id);
        copy("INSERT INTO main.ranks SELECT * FROM src.ranks WHERE run_id = " + id);
        report.rows_copied += copied;
        report.messages.push_back(file + ": run " + id + ", " + std::to_string(copied) + " rows");
      }
      // How the run ended: a completed run with a rank that did not complete has failed.
      for (const auto& run : runs) {
        if (run[2] == "0") continue;
        const auto bad = db.rows("SELECT rank, status, COALESCE(status_message, '') FROM main.ranks WHERE run_id = " +
                                 run[0] + " AND status <> 'completed' ORDER BY rank LIMIT 1");
        if (bad.empty()) continue;
        db.exec("UPDATE main.runs SET status = 'failed', status_message = " +
                quote("rank " + bad[0][0] + " " + bad[0][1] + (bad[0][2].empty() ? "" : ": " + bad[0][2])) +
                " WHERE id = " + run[0] + " AND status = 'completed'");
      }
      db.exec("DROP TABLE temp.smap");
      db.exec("COMMIT");
    } catch (...) {
      db.exec("ROLLBACK");
      throw;
    }
    db.exec("DETACH DATABASE src");
    if (!keep_file) {
      remove_file_set(file);
      ++report.files_merged;
    }
  }
  return report;
}

}  // namespace hs::probes
