// sqlite_writer.h — the one writer of the run database: a background thread that drains the
// record queue into SQLite (prepared statements generated from schema.h's description, multi-row
// INSERTs, one transaction per drain), and the run's own rows (begin and end of a run). Private to
// hs_probes; Recorder is its only user.
//
// What this is not: the hot path (record_queue.h) or the schema upgrade (run_file.h).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "hybridscope/probes/recorder.h"
#include "hybridscope/probes/schema.h"
#include "record_queue.h"
#include "run_file.h"

namespace hs::probes::detail {

class SqliteWriter {
 public:
  /// Opens `path` (RunFile: created and upgraded), prepares every statement and starts the
  /// writer thread, which drains `queue` until the destructor stops it. Throws RecorderError.
  SqliteWriter(const std::string& path, int rank, std::shared_ptr<RecordQueue> queue);
  /// Stops the queue, lets the writer take its last drain, joins the thread.
  ~SqliteWriter();
  SqliteWriter(const SqliteWriter&) = delete;
  SqliteWriter& operator=(const SqliteWriter&) = delete;

  /// Inserts the run row (status running) and this rank's ranks row; returns the run id.
  std::int64_t insert_run(const RunInfo& info);
  /// Records how the run and this rank ended, with the queue's dropped and failed-write counts
  /// (and, when writes failed, why: appended to `message`). False when a row could not be updated.
  bool end_run(std::int64_t run_id, RunStatus status, const std::string& message);
  /// The first failed write as a user reads it (Recorder::write_error()); empty when none failed.
  std::string first_error() const;

 private:
  // The per-launch tables get multi-row INSERTs (one sqlite3_step per kRowsPerInsert rows), with
  // a single-row statement for the remainder.
  struct BatchInsert {
    Statement single, multi;
  };

  void prepare_batch(BatchInsert& b, const schema::Table& table, int values_per_row,
                     schema::OnConflict on_conflict = schema::OnConflict::kAbort);
  void writer_loop() noexcept;
  void write(Drain& drain);
  std::int64_t intern_value(const std::string& value);
  std::int64_t intern(const char* name);
  std::int64_t intern_pointer(const char* name);
  void step(sqlite3_stmt* st, std::int64_t rows);
  void bind_range(sqlite3_stmt* st, int row, const QueuedRange& r, std::int64_t tid);
  void flush_pending();
  void expect_values(const Statement& s, int values, const schema::Table& table) const;
  void write_metric(const Metric& m, std::int64_t run_id);
  void write_memory(const MemorySample& m, std::int64_t run_id);
  void write_kv_pool(const KvPoolSample& k, std::int64_t run_id);
  void write_comm(const CommRecord& c, std::int64_t run_id);
  void write_switch(const SwitchRecord& w, std::int64_t run_id);
  template <std::size_t N, typename Rows, typename Values>
  void insert_rows(BatchInsert& b, std::int64_t run_id, const Rows& rows, Values values);
  void write_gpu(const GpuActivityBatch& b, std::int64_t run_id);
  void write_gpu_aggregates(const GpuAggregates& a, std::int64_t run_id);
  void write_collector_stats(const CollectorStats& c, std::int64_t run_id);
  void write_counters(std::int64_t run_id);
  std::string describe_error();
  void reserve_space();
  void release_reserve() noexcept;
  void note_error();
  std::int64_t insert_run_rows(const RunInfo& info, const std::string& host, std::int64_t start_unix_ns);

  // Declared first: destroyed last, after every statement is finalized.
  RunFile db_;
  const int rank_;
  std::shared_ptr<RecordQueue> queue_;
  // The connection is opened without SQLite's mutexes: db_mutex_ serializes the writer thread and
  // insert_run/end_run.
  std::mutex db_mutex_;
  // The first failed write, described from the connection's error state when it happened.
  mutable std::mutex error_mutex_;
  std::string first_error_;
  std::int64_t imported_end_unix_ns_ = -1;  // RunInfo::imported_end_unix_ns: end_run's end, not now
  std::string reserve_path_;  // PATH-reserve while it holds room for end_run (reserve_space())
  Statement insert_string_, find_string_, insert_range_, insert_ranges_, insert_metric_, insert_memory_,
      insert_kv_pool_, insert_comm_, insert_switch_, insert_switch_component_, insert_correlation_range_,
      insert_overhead_, insert_collector_stats_, update_counters_;
  BatchInsert kernel_rows_, memcpy_rows_, memset_rows_, runtime_api_rows_, external_correlation_rows_;
  // v10 aggregates: a row is replaced each time it changes (its values so far).
  BatchInsert kernel_stat_rows_, stream_busy_rows_;
  // Records lost inside the current transaction; added to the queue's count only if it commits
  // (a rolled-back transaction counts all its rows instead).
  std::int64_t transaction_errors_ = 0;
  // runs.dropped_records and runs.write_errors as last written (writer only).
  std::int64_t written_dropped_ = 0, written_errors_ = 0;
  // Writer-only interning caches: names are string literals, so the pointer is the fast key.
  std::unordered_map<const char*, std::int64_t> ids_by_pointer_;
  std::unordered_map<std::string, std::int64_t> ids_by_value_;
  // Rows waiting for a full multi-row INSERT: (record in its chunk, tid). The chunks stay put
  // until the queue recycles them after the transaction.
  std::vector<std::pair<const QueuedRange*, std::int64_t>> pending_;
  std::vector<int> drain_ends_;  // per chunk of the drain: the published records it ends at
  const char* last_name_ = nullptr;  // consecutive records mostly share a name: skip the lookup
  std::int64_t last_name_id_ = -1;
  std::thread thread_;  // last: started once everything above is ready
};

}  // namespace hs::probes::detail
