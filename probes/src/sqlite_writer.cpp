// sqlite_writer.cpp — the writer thread and the run's rows (see sqlite_writer.h). Every INSERT
// comes from schema.h's description (schema::insert_statement); the code here binds each record's
// fields in the description's column order, and the constructor refuses to start when a
// statement's parameter count and the values bound here disagree.
#include "sqlite_writer.h"

#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>

#include "hybridscope/probes/clock.h"

namespace hs::probes::detail {

namespace {

using schema::OnConflict;

// Rows per multi-row INSERT: one sqlite3_step for many rows (9 bound values each for ranges, up to
// 18 for kernels; run_id and rank are ?1 and ?2, bound once). 64 * 18 + 2 parameters stays below
// SQLITE_MAX_VARIABLE_NUMBER (32766 since SQLite 3.32).
constexpr int kRowsPerInsert = 64;
// Per row after (run_id, rank): tid, step, name_id, category_id, depth, start, end, batch_size,
// context_len.
constexpr int kRangeValues = 9;

// The reserve file's size: room for end_run's transaction (the runs row with its config_yaml
// overflow pages, the ranks row, their index pages: a few dozen 4 KiB WAL frames) with margin.
constexpr std::size_t kReserveBytes = 256 * 1024;

// A value insert_rows() binds as NULL.
constexpr std::int64_t kNull = std::numeric_limits<std::int64_t>::min();

void bind_int64_or_null(sqlite3_stmt* st, int p, std::int64_t v) {
  if (v < 0) sqlite3_bind_null(st, p);
  else sqlite3_bind_int64(st, p, v);
}
void bind_double_or_null(sqlite3_stmt* st, int p, double v) {
  if (std::isnan(v)) sqlite3_bind_null(st, p);
  else sqlite3_bind_double(st, p, v);
}

}  // namespace

SqliteWriter::SqliteWriter(const std::string& path, int rank, std::shared_ptr<RecordQueue> queue)
    : db_(path, RunFile::Mode::kCreate), rank_(rank), queue_(std::move(queue)) {
  auto prepare = [&](Statement& s, const schema::Table& table, int values, OnConflict on_conflict = OnConflict::kAbort) {
    db_.prepare(s, schema::insert_statement(table, on_conflict));
    expect_values(s, values, table);
  };
  prepare(insert_string_, schema::kStringsTable, 1, OnConflict::kIgnore);
  db_.prepare(find_string_, std::string("SELECT id FROM ") + schema::kStrings + " WHERE value = ?");
  prepare(insert_range_, schema::kRangesTable, 2 + kRangeValues);
  db_.prepare(insert_ranges_, schema::insert_statement(schema::kRangesTable, OnConflict::kAbort, kRowsPerInsert));
  expect_values(insert_ranges_, 2 + kRowsPerInsert * kRangeValues, schema::kRangesTable);
  prepare(insert_metric_, schema::kStepMetricsTable, 4, OnConflict::kReplace);
  prepare(insert_memory_, schema::kMemorySamplesTable, 18);
  prepare(insert_kv_pool_, schema::kKvPoolSamplesTable, 13);
  prepare(insert_comm_, schema::kCommOpsTable, 15);
  prepare(insert_switch_, schema::kSwitchesTable, 12);
  prepare(insert_switch_component_, schema::kSwitchComponentsTable, 3);
  prepare_batch(kernel_rows_, schema::kKernelsTable, 18);
  prepare_batch(memcpy_rows_, schema::kMemcpyTable, 10);
  prepare_batch(memset_rows_, schema::kMemsetTable, 9);
  prepare_batch(runtime_api_rows_, schema::kRuntimeApiTable, 7);
  prepare_batch(external_correlation_rows_, schema::kExternalCorrelationsTable, 2);
  prepare_batch(kernel_stat_rows_, schema::kKernelStatsTable, 13, OnConflict::kReplace);
  prepare_batch(stream_busy_rows_, schema::kStreamBusyTable, 7, OnConflict::kReplace);
  prepare(insert_correlation_range_, schema::kCorrelationRangesTable, 7, OnConflict::kReplace);
  prepare(insert_overhead_, schema::kCuptiOverheadTable, 5);
  prepare(insert_collector_stats_, schema::kCollectorStatsTable, 10);
  db_.prepare(update_counters_, "UPDATE runs SET dropped_records = ?, write_errors = ? WHERE id = ?");
  reserve_space();
  thread_ = std::thread([this] { writer_loop(); });
}

SqliteWriter::~SqliteWriter() {
  queue_->stop();
  if (thread_.joinable()) thread_.join();
  release_reserve();
}

// A full disk must not cost the run its ending: PATH-reserve holds kReserveBytes of written
// blocks from here on, given back in end_run once a write failed, so the row that says how the run
// ended (and that records were lost) still fits. Best effort: without room for it there is none.
void SqliteWriter::reserve_space() {
  reserve_path_ = db_.path() + "-reserve";
  const int fd = ::open(reserve_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  bool ok = fd >= 0;
  static const char kZeros[4096] = {};
  for (std::size_t written = 0; ok && written < kReserveBytes; written += sizeof(kZeros))
    ok = ::write(fd, kZeros, sizeof(kZeros)) == static_cast<ssize_t>(sizeof(kZeros));
  if (fd >= 0) ::close(fd);
  if (!ok) release_reserve();
}

void SqliteWriter::release_reserve() noexcept {
  if (reserve_path_.empty()) return;
  ::unlink(reserve_path_.c_str());
  reserve_path_.clear();
}

void SqliteWriter::expect_values(const Statement& s, int values, const schema::Table& table) const {
  const int described = sqlite3_bind_parameter_count(s.stmt);
  if (described != values)
    throw RecorderError(std::string("the writer binds ") + std::to_string(values) + " values per INSERT into " +
                        table.name + " but schema.h describes " + std::to_string(described) +
                        ": bind the new columns in probes/src/sqlite_writer.cpp");
}

// (run_id, rank) then `values_per_row` per row, one row and kRowsPerInsert rows.
void SqliteWriter::prepare_batch(BatchInsert& b, const schema::Table& table, int values_per_row,
                                 OnConflict on_conflict) {
  db_.prepare(b.single, schema::insert_statement(table, on_conflict));
  expect_values(b.single, 2 + values_per_row, table);
  db_.prepare(b.multi, schema::insert_statement(table, on_conflict, kRowsPerInsert));
  expect_values(b.multi, 2 + kRowsPerInsert * values_per_row, table);
}

std::int64_t SqliteWriter::intern_value(const std::string& value) {
  auto it = ids_by_value_.find(value);
  if (it != ids_by_value_.end()) return it->second;
  sqlite3_bind_text(insert_string_.stmt, 1, value.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_step(insert_string_.stmt);
  sqlite3_reset(insert_string_.stmt);
  sqlite3_bind_text(find_string_.stmt, 1, value.c_str(), -1, SQLITE_TRANSIENT);
  std::int64_t id = -1;
  if (sqlite3_step(find_string_.stmt) == SQLITE_ROW) id = sqlite3_column_int64(find_string_.stmt, 0);
  sqlite3_reset(find_string_.stmt);
  if (id < 0) throw RecorderError("SQLite: could not intern a string");
  ids_by_value_.emplace(value, id);
  return id;
}

std::int64_t SqliteWriter::intern(const char* name) {
  if (name == last_name_ && last_name_id_ >= 0) return last_name_id_;
  last_name_ = name;
  last_name_id_ = intern_pointer(name);
  return last_name_id_;
}

std::int64_t SqliteWriter::intern_pointer(const char* name) {
  auto it = ids_by_pointer_.find(name);
  if (it != ids_by_pointer_.end()) return it->second;
  const std::int64_t id = intern_value(name ? name : "(null)");
  ids_by_pointer_.emplace(name, id);
  return id;
}

// The connection's last error as a user reads it: SQLite's message, the OS error under it and the
// file. SQLite's unix VFS answers a short write with SQLITE_FULL and clears the errno it saw
// (ENOSPC: "not a system error"), so a full disk is named here, with the space the filesystem has.
std::string SqliteWriter::describe_error() {
  sqlite3* db = db_.get();
  std::string text = sqlite3_errmsg(db);
  int os_error = sqlite3_system_errno(db);
  if (os_error == 0 && sqlite3_errcode(db) == SQLITE_FULL) os_error = ENOSPC;
  if (os_error != 0) {
    const char* name = strerrorname_np(os_error);
    text += std::string(" (") + (name ? name : std::to_string(os_error).c_str()) + ": " + std::strerror(os_error);
    struct statvfs fs {};
    if (os_error == ENOSPC && ::statvfs(db_.path().c_str(), &fs) == 0)
      text += "; " + std::to_string(static_cast<std::uint64_t>(fs.f_bavail) * fs.f_frsize / 1024) + " KiB free there";
    text += ")";
  }
  return text + " writing " + db_.path();
}

// Keeps the first failed write's description. Under db_mutex_, before anything resets the error.
void SqliteWriter::note_error() {
  std::string text = describe_error();
  std::lock_guard<std::mutex> lock(error_mutex_);
  if (first_error_.empty()) first_error_ = std::move(text);
}

std::string SqliteWriter::first_error() const {
  std::lock_guard<std::mutex> lock(error_mutex_);
  return first_error_;
}

// Steps `st`, which writes `rows` records, and counts them lost when it fails. Bindings stay
// (the multi-row statements bind run_id and rank once per transaction). SQLite may roll the
// whole transaction back on SQLITE_FULL or SQLITE_IOERR: then the rest of the drain would commit
// statement by statement outside it, so the drain is abandoned (write() counts all its records).
void SqliteWriter::step(sqlite3_stmt* st, std::int64_t rows) {
  if (sqlite3_step(st) != SQLITE_DONE) {
    transaction_errors_ += rows;
    note_error();
    const bool rolled_back = sqlite3_get_autocommit(db_.get()) != 0;
    sqlite3_reset(st);
    if (rolled_back) throw RecorderError("SQLite rolled the drain's transaction back");
    return;
  }
  sqlite3_reset(st);
}

// A range timed in clock ticks becomes ns here, off the hot path (clock.h: the same map now_ns()
// reads through, so it lands on the timeline of every other record).
void SqliteWriter::bind_range(sqlite3_stmt* st, int row, const QueuedRange& r, std::int64_t tid) {
  const int p = 3 + row * kRangeValues;
  sqlite3_bind_int64(st, p + 0, tid);
  sqlite3_bind_int64(st, p + 1, r.step);
  sqlite3_bind_int64(st, p + 2, intern(r.name));
  sqlite3_bind_int(st, p + 3, r.category);
  sqlite3_bind_int(st, p + 4, r.depth);
  sqlite3_bind_int64(st, p + 5, r.in_ticks ? ticks_to_ns(r.start) : r.start);
  sqlite3_bind_int64(st, p + 6, r.in_ticks ? ticks_to_ns(r.end) : r.end);
  bind_int64_or_null(st, p + 7, r.batch_size);
  bind_int64_or_null(st, p + 8, r.context_len);
}

// Writes the ranges of the handed-off chunks, then of the live ones, and the cold records, in one
// transaction. A transaction that fails loses every record of the drain: they are counted (not 1).
void SqliteWriter::write(Drain& d) {
  std::lock_guard<std::mutex> lock(db_mutex_);
  const std::int64_t run_id = d.run_id;
  // What this drain covers, fixed now: records published later wait for the next drain.
  std::int64_t rows = 0;
  drain_ends_.clear();
  auto snapshot = [&](Chunk* c) {
    const int end = c->published.load(std::memory_order_acquire);
    drain_ends_.push_back(end);
    rows += end - c->consumed;
  };
  transaction_errors_ = 0;
  try {
    for (Chunk* c : d.full) snapshot(c);
    for (Chunk* c : d.live) snapshot(c);
    rows += d.cold.rows();
    db_.exec("BEGIN");
    sqlite3_bind_int64(insert_ranges_.stmt, 1, run_id);
    sqlite3_bind_int(insert_ranges_.stmt, 2, rank_);
    sqlite3_bind_int64(insert_range_.stmt, 1, run_id);
    sqlite3_bind_int(insert_range_.stmt, 2, rank_);
    pending_.clear();
    pending_.reserve(kRowsPerInsert);
    std::size_t chunk_index = 0;
    auto drain = [&](Chunk& c) {
      const int end = drain_ends_[chunk_index++];
      for (int i = c.consumed; i < end; ++i) {
        pending_.emplace_back(&c.records[i], c.tid);
        if (static_cast<int>(pending_.size()) == kRowsPerInsert) flush_pending();
      }
      c.consumed = end;
    };
    for (Chunk* c : d.full) drain(*c);
    for (Chunk* c : d.live) drain(*c);
    flush_pending();
    for (const auto& m : d.cold.memory) write_memory(m, run_id);
    for (const auto& k : d.cold.kv_pool) write_kv_pool(k, run_id);
    for (const auto& c : d.cold.comm) write_comm(c, run_id);
    for (const auto& w : d.cold.switches) write_switch(w, run_id);
    for (const auto& b : d.cold.gpu) write_gpu(b, run_id);
    for (const auto& a : d.cold.gpu_aggregates) write_gpu_aggregates(a, run_id);
    for (const auto& c : d.cold.collector_stats) write_collector_stats(c, run_id);
    for (const auto& m : d.cold.metrics) write_metric(m, run_id);
    write_counters(run_id);
    db_.exec("COMMIT");
    queue_->add_write_errors(transaction_errors_);
  } catch (...) {
    if (sqlite3_errcode(db_.get()) != SQLITE_OK) note_error();  // BEGIN or COMMIT failed
    sqlite3_exec(db_.get(), "ROLLBACK", nullptr, nullptr, nullptr);
    // Strings interned in this transaction are gone with it: forget every cached id, so that no
    // later row references a string that was never committed (each is looked up again).
    ids_by_pointer_.clear();
    ids_by_value_.clear();
    last_name_ = nullptr;
    last_name_id_ = -1;
    // The drained ranges are gone with the transaction: never written twice, counted once.
    std::size_t i = 0;
    for (Chunk* c : d.full)
      if (i < drain_ends_.size()) c->consumed = drain_ends_[i++];
    for (Chunk* c : d.live)
      if (i < drain_ends_.size()) c->consumed = drain_ends_[i++];
    queue_->add_write_errors(rows);
  }
}

// Rows in `pending_`: full multi-row statements, then the remainder one row at a time.
void SqliteWriter::flush_pending() {
  const int n = static_cast<int>(pending_.size());
  if (n == kRowsPerInsert) {
    for (int row = 0; row < n; ++row) bind_range(insert_ranges_.stmt, row, *pending_[row].first, pending_[row].second);
    step(insert_ranges_.stmt, n);
  } else {
    for (int row = 0; row < n; ++row) {
      bind_range(insert_range_.stmt, 0, *pending_[row].first, pending_[row].second);
      step(insert_range_.stmt, 1);
    }
  }
  pending_.clear();
}

void SqliteWriter::write_metric(const Metric& m, std::int64_t run_id) {
  sqlite3_stmt* st = insert_metric_.stmt;
  sqlite3_bind_int64(st, 1, run_id);
  sqlite3_bind_int64(st, 2, m.step);
  sqlite3_bind_int64(st, 3, intern_value(m.name));
  sqlite3_bind_double(st, 4, m.value);
  step(st, 1);
}

void SqliteWriter::write_memory(const MemorySample& m, std::int64_t run_id) {
  sqlite3_stmt* st = insert_memory_.stmt;
  int p = 1;
  sqlite3_bind_int64(st, p++, run_id);
  sqlite3_bind_int(st, p++, rank_);
  sqlite3_bind_int64(st, p++, m.step);
  sqlite3_bind_int64(st, p++, m.ts_ns);
  sqlite3_bind_int64(st, p++, intern(m.phase));
  sqlite3_bind_int(st, p++, m.device);
  for (std::int64_t v : {m.allocated_bytes, m.reserved_bytes, m.active_bytes, m.inactive_split_bytes,
                         m.largest_free_block_bytes, m.peak_allocated_bytes, m.num_allocs, m.num_alloc_retries,
                         m.num_ooms})
    bind_int64_or_null(st, p++, v);
  const FragmentationRatios f = fragmentation(m);
  for (double v : {f.reserved_slack, f.split_fragmentation, f.external_fragmentation}) bind_double_or_null(st, p++, v);
  step(st, 1);
}

void SqliteWriter::write_kv_pool(const KvPoolSample& k, std::int64_t run_id) {
  sqlite3_stmt* st = insert_kv_pool_.stmt;
  int p = 1;
  sqlite3_bind_int64(st, p++, run_id);
  sqlite3_bind_int(st, p++, rank_);
  sqlite3_bind_int64(st, p++, k.step);
  sqlite3_bind_int64(st, p++, k.ts_ns);
  sqlite3_bind_int64(st, p++, intern(k.phase));
  for (std::int64_t v : {k.num_blocks, k.block_size, k.blocks_used, k.shared_blocks, k.num_sequences,
                         k.tokens_stored, k.token_capacity_used, k.cache_bytes})
    sqlite3_bind_int64(st, p++, v);
  step(st, 1);
}

void SqliteWriter::write_comm(const CommRecord& c, std::int64_t run_id) {
  sqlite3_stmt* st = insert_comm_.stmt;
  int p = 1;
  sqlite3_bind_int64(st, p++, run_id);
  sqlite3_bind_int(st, p++, rank_);
  sqlite3_bind_int64(st, p++, c.step);
  sqlite3_bind_int64(st, p++, intern_pointer(c.op));
  sqlite3_bind_int64(st, p++, intern_pointer(c.group));
  sqlite3_bind_int(st, p++, c.group_size);
  sqlite3_bind_int64(st, p++, c.bytes);
  sqlite3_bind_int64(st, p++, intern_pointer(c.dtype));
  sqlite3_bind_int64(st, p++, c.start_ns);
  sqlite3_bind_int64(st, p++, c.end_ns);
  const double algbw = algorithm_bandwidth_gbps(c.bytes, c.start_ns, c.end_ns);
  for (double v : {algbw, algbw * bus_bandwidth_factor(c.op, c.group_size)}) bind_double_or_null(st, p++, v);
  for (std::int64_t v : {c.posted_ns, c.wait_start_ns, c.wait_end_ns}) bind_int64_or_null(st, p++, v);
  step(st, 1);
}

// The switch row, then its components referencing the row's id.
void SqliteWriter::write_switch(const SwitchRecord& w, std::int64_t run_id) {
  sqlite3_stmt* st = insert_switch_.stmt;
  int p = 1;
  sqlite3_bind_int64(st, p++, run_id);
  sqlite3_bind_int(st, p++, rank_);
  sqlite3_bind_int64(st, p++, w.step);
  sqlite3_bind_int64(st, p++, intern(w.direction));
  for (std::int64_t v : {w.start_ns, w.end_ns, w.bytes_sent, w.bytes_received, w.bytes_local})
    sqlite3_bind_int64(st, p++, v);
  for (std::int64_t v : {w.memory_before_bytes, w.memory_after_bytes, w.peak_memory_bytes}) bind_int64_or_null(st, p++, v);
  const bool ok = sqlite3_step(st) == SQLITE_DONE;
  if (!ok) {  // the components have nothing to reference: lost with their switch
    transaction_errors_ += 1 + static_cast<std::int64_t>(w.components.size());
    note_error();
    const bool rolled_back = sqlite3_get_autocommit(db_.get()) != 0;
    sqlite3_reset(st);
    if (rolled_back) throw RecorderError("SQLite rolled the drain's transaction back");
    return;
  }
  sqlite3_reset(st);
  const std::int64_t switch_id = sqlite3_last_insert_rowid(db_.get());
  sqlite3_stmt* sc = insert_switch_component_.stmt;
  for (const auto& [name, duration_ns] : w.components) {
    sqlite3_bind_int64(sc, 1, switch_id);
    sqlite3_bind_int64(sc, 2, intern(name));
    sqlite3_bind_int64(sc, 3, duration_ns);
    step(sc, 1);
  }
}

// Writes `rows` through `b`; values(row) gives the N column values after run_id and rank.
template <std::size_t N, typename Rows, typename Values>
void SqliteWriter::insert_rows(BatchInsert& b, std::int64_t run_id, const Rows& rows, Values values) {
  for (sqlite3_stmt* st : {b.single.stmt, b.multi.stmt}) {
    sqlite3_bind_int64(st, 1, run_id);
    sqlite3_bind_int(st, 2, rank_);
  }
  std::size_t i = 0;
  for (; i + kRowsPerInsert <= rows.size(); i += kRowsPerInsert) {
    for (int r = 0; r < kRowsPerInsert; ++r) {
      const std::array<std::int64_t, N> v = values(rows[i + static_cast<std::size_t>(r)]);
      for (std::size_t c = 0; c < N; ++c) {
        const int p = 3 + r * static_cast<int>(N) + static_cast<int>(c);
        if (v[c] == kNull) sqlite3_bind_null(b.multi.stmt, p);
        else sqlite3_bind_int64(b.multi.stmt, p, v[c]);
      }
    }
    step(b.multi.stmt, kRowsPerInsert);
  }
  for (; i < rows.size(); ++i) {
    const std::array<std::int64_t, N> v = values(rows[i]);
    for (std::size_t c = 0; c < N; ++c) {
      if (v[c] == kNull) sqlite3_bind_null(b.single.stmt, 3 + static_cast<int>(c));
      else sqlite3_bind_int64(b.single.stmt, 3 + static_cast<int>(c), v[c]);
    }
    step(b.single.stmt, 1);
  }
}

void SqliteWriter::write_gpu(const GpuActivityBatch& b, std::int64_t run_id) {
  using I = std::int64_t;
  insert_rows<18>(kernel_rows_, run_id, b.kernels, [this](const KernelActivity& k) {
    return std::array<I, 18>{I{k.device}, I{k.context}, I{k.stream}, I{k.correlation_id}, k.start_ns, k.end_ns,
                             intern_pointer(k.name), intern_pointer(k.short_name ? k.short_name : k.name),
                             I{static_cast<int>(k.kernel_class)}, I{k.grid[0]},
                             I{k.grid[1]}, I{k.grid[2]}, I{k.block[0]}, I{k.block[1]}, I{k.block[2]},
                             I{k.registers_per_thread}, I{k.static_shared_memory}, I{k.dynamic_shared_memory}};
  });
  insert_rows<10>(memcpy_rows_, run_id, b.memcpys, [](const MemcpyActivity& m) {
    return std::array<I, 10>{I{m.device}, I{m.context}, I{m.stream}, I{m.correlation_id}, m.start_ns, m.end_ns,
                             m.bytes, I{m.copy_kind}, I{m.src_kind}, I{m.dst_kind}};
  });
  insert_rows<9>(memset_rows_, run_id, b.memsets, [](const MemsetActivity& m) {
    return std::array<I, 9>{I{m.device}, I{m.context}, I{m.stream}, I{m.correlation_id}, m.start_ns, m.end_ns,
                            m.bytes, I{m.value}, I{m.memory_kind}};
  });
  insert_rows<7>(runtime_api_rows_, run_id, b.runtime_api, [this](const RuntimeApiActivity& a) {
    return std::array<I, 7>{a.tid, I{a.correlation_id}, I{a.cbid}, intern_pointer(a.name), a.start_ns, a.end_ns,
                            a.return_value};
  });
  insert_rows<2>(external_correlation_rows_, run_id, b.external_correlations, [](const ExternalCorrelation& e) {
    return std::array<I, 2>{I{e.correlation_id}, static_cast<I>(e.external_id)};
  });
  for (const auto& c : b.correlation_ranges) {
    sqlite3_stmt* st = insert_correlation_range_.stmt;
    sqlite3_bind_int64(st, 1, run_id);
    sqlite3_bind_int(st, 2, rank_);
    int p = 3;
    for (std::int64_t v : {static_cast<std::int64_t>(c.external_id), c.tid, std::int64_t{c.depth}, c.start_ns,
                           intern_pointer(c.name)})
      sqlite3_bind_int64(st, p++, v);
    step(st, 1);
  }
  for (const auto& o : b.overhead) {
    sqlite3_stmt* st = insert_overhead_.stmt;
    sqlite3_bind_int64(st, 1, run_id);
    sqlite3_bind_int(st, 2, rank_);
    int p = 3;
    for (std::int64_t v : {intern_pointer(o.kind), o.start_ns, o.end_ns}) sqlite3_bind_int64(st, p++, v);
    step(st, 1);
  }
}

void SqliteWriter::write_gpu_aggregates(const GpuAggregates& a, std::int64_t run_id) {
  using I = std::int64_t;
  insert_rows<13>(kernel_stat_rows_, run_id, a.kernels, [this](const KernelStat& k) {
    return std::array<I, 13>{k.step, static_cast<I>(k.external_id), intern_pointer(k.name),
                             intern_pointer(k.short_name), I{static_cast<int>(k.kernel_class)}, k.count, k.total_ns,
                             k.min_ns, k.max_ns, k.bytes, k.launched, k.launched > 0 ? k.launch_first_ns : kNull,
                             k.launched > 0 ? k.launch_last_ns : kNull};
  });
  insert_rows<7>(stream_busy_rows_, run_id, a.streams, [](const StreamBusy& s) {
    return std::array<I, 7>{s.step, I{s.device}, I{s.stream}, s.activities, s.busy_ns, s.first_start_ns, s.last_end_ns};
  });
}

void SqliteWriter::write_collector_stats(const CollectorStats& c, std::int64_t run_id) {
  sqlite3_stmt* st = insert_collector_stats_.stmt;
  sqlite3_bind_int64(st, 1, run_id);
  sqlite3_bind_int(st, 2, rank_);
  int p = 3;
  for (std::int64_t v : {c.ts_ns, intern_value(c.status), c.buffers_requested, c.buffers_refused,
                         c.buffers_completed, c.records, c.dropped_records, c.peak_buffer_bytes})
    sqlite3_bind_int64(st, p++, v);
  step(st, 1);
}

// runs.dropped_records and runs.write_errors as they stand, inside the drain's transaction
// (written only when they changed).
void SqliteWriter::write_counters(std::int64_t run_id) {
  const std::int64_t dropped = queue_->dropped();
  const std::int64_t errors = queue_->write_errors() + transaction_errors_;
  if (dropped == written_dropped_ && errors == written_errors_) return;
  sqlite3_bind_int64(update_counters_.stmt, 1, dropped);
  sqlite3_bind_int64(update_counters_.stmt, 2, errors);
  sqlite3_bind_int64(update_counters_.stmt, 3, run_id);
  if (sqlite3_step(update_counters_.stmt) == SQLITE_DONE) {
    written_dropped_ = dropped;
    written_errors_ = errors;
  } else {
    ++transaction_errors_;
    note_error();
  }
  sqlite3_reset(update_counters_.stmt);
}

void SqliteWriter::writer_loop() noexcept {
  for (;;) {
    Drain drain;
    queue_->take(drain);
    refine_clock();  // at most once a second (clock.h)
    if (drain.run_id >= 0) write(drain);
    queue_->finish(drain);
    if (drain.stopping) return;
  }
}

std::int64_t SqliteWriter::insert_run(const RunInfo& info) {
  std::lock_guard<std::mutex> lock(db_mutex_);
  const std::string host = info.imported_host.empty() ? host_name() : info.imported_host;
  const std::int64_t start_unix_ns =
      info.imported_start_unix_ns >= 0 ? info.imported_start_unix_ns : now_ns() + epoch_offset_ns();
  imported_end_unix_ns_ = info.imported_end_unix_ns;
  // The run row, its config and this rank's row together or not at all: a run that cannot begin
  // (a full disk) leaves no 'running' row behind.
  db_.exec("BEGIN IMMEDIATE");
  try {
    const std::int64_t run_id = insert_run_rows(info, host, start_unix_ns);
    if (sqlite3_exec(db_.get(), "COMMIT", nullptr, nullptr, nullptr) != SQLITE_OK)
      throw RecorderError("cannot insert the run: " + describe_error());
    return run_id;
  } catch (...) {
    sqlite3_exec(db_.get(), "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
}

// insert_run's rows, inside its transaction.
std::int64_t SqliteWriter::insert_run_rows(const RunInfo& info, const std::string& host, std::int64_t start_unix_ns) {
  const auto& runs = schema::kRunsTable;
  auto p = [&](const char* column) { return schema::insert_parameter(runs, column); };
  Statement s;
  db_.prepare(s, schema::insert_statement(runs));
  expect_values(s, 17, runs);
  const std::int64_t clock_offset_ns =
      info.imported_clock_offset_ns >= 0 ? info.imported_clock_offset_ns : epoch_offset_ns();
  const std::int64_t pid = info.imported_pid >= 0 ? info.imported_pid : static_cast<std::int64_t>(getpid());
  if (info.run_id >= 0) sqlite3_bind_int64(s.stmt, p("id"), info.run_id);  // else NULL: the next free id
  sqlite3_bind_text(s.stmt, p("name"), info.name.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(s.stmt, p("command_line"), info.command_line.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(s.stmt, p("config_yaml"), info.config_yaml.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(s.stmt, p("host"), host.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_int64(s.stmt, p("pid"), pid);
  sqlite3_bind_int(s.stmt, p("world_size"), info.world_size);
  sqlite3_bind_text(s.stmt, p("hybridscope_version"), HS_VERSION_STRING, -1, SQLITE_STATIC);
  sqlite3_bind_text(s.stmt, p("torch_version"), info.torch_version.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_int64(s.stmt, p("start_unix_ns"), start_unix_ns);
  sqlite3_bind_int64(s.stmt, p("clock_offset_ns"), clock_offset_ns);
  sqlite3_bind_text(s.stmt, p("source"), info.source.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(s.stmt, p("status"), to_string(RunStatus::kRunning), -1, SQLITE_STATIC);
  sqlite3_bind_int64(s.stmt, p("dropped_records"), 0);
  sqlite3_bind_int64(s.stmt, p("write_errors"), 0);
  // end_unix_ns and status_message stay NULL while the run runs.
  if (sqlite3_step(s.stmt) != SQLITE_DONE)
    throw RecorderError("cannot insert the run row: " + describe_error());
  const std::int64_t run_id = sqlite3_last_insert_rowid(db_.get());
  if (!info.config.empty()) {
    Statement c;
    db_.prepare(c, schema::insert_statement(schema::kConfigTable, OnConflict::kReplace));
    expect_values(c, 3, schema::kConfigTable);
    for (const auto& [key, value] : info.config) {
      sqlite3_bind_int64(c.stmt, 1, run_id);
      sqlite3_bind_text(c.stmt, 2, key.c_str(), -1, SQLITE_TRANSIENT);
      sqlite3_bind_text(c.stmt, 3, value.c_str(), -1, SQLITE_TRANSIENT);
      if (sqlite3_step(c.stmt) != SQLITE_DONE)
        throw RecorderError("cannot insert the run's config: " + describe_error());
      sqlite3_reset(c.stmt);
    }
  }
  const auto& ranks = schema::kRanksTable;
  auto q = [&](const char* column) { return schema::insert_parameter(ranks, column); };
  Statement r;
  db_.prepare(r, schema::insert_statement(ranks, OnConflict::kReplace));
  expect_values(r, 19, ranks);
  sqlite3_bind_int64(r.stmt, q("run_id"), run_id);
  sqlite3_bind_int(r.stmt, q("rank"), rank_);
  sqlite3_bind_int(r.stmt, q("local_rank"), info.local_rank);
  sqlite3_bind_text(r.stmt, q("host"), host.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_int64(r.stmt, q("pid"), pid);
  sqlite3_bind_text(r.stmt, q("device"), info.device.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_int64(r.stmt, q("clock_offset_ns"), clock_offset_ns);
  sqlite3_bind_int64(r.stmt, q("start_unix_ns"), start_unix_ns);
  sqlite3_bind_text(r.stmt, q("status"), to_string(RunStatus::kRunning), -1, SQLITE_STATIC);
  sqlite3_bind_int64(r.stmt, q("dropped_records"), 0);
  sqlite3_bind_int64(r.stmt, q("write_errors"), 0);
  sqlite3_bind_int64(r.stmt, q("clock_sync_offset_ns"), info.clock_sync_offset_ns);
  sqlite3_bind_int64(r.stmt, q("clock_sync_error_ns"), info.clock_sync_error_ns);
  sqlite3_bind_int(r.stmt, q("clock_sync_applied"), info.clock_sync_applied ? 1 : 0);
  const ClockInfo clock = clock_info();
  sqlite3_bind_text(r.stmt, q("clock_source"), to_string(clock.source), -1, SQLITE_STATIC);
  bind_double_or_null(r.stmt, q("tsc_hz"), clock.source == ClockSource::kTsc ? clock.tsc_hz : std::nan(""));
  sqlite3_bind_int64(r.stmt, q("clock_calibration_error_ns"), clock.calibration_error_ns);
  if (sqlite3_step(r.stmt) != SQLITE_DONE)
    throw RecorderError("cannot insert the ranks row: " + describe_error());
  return run_id;
}

bool SqliteWriter::end_run(std::int64_t run_id, RunStatus status, const std::string& message) {
  std::lock_guard<std::mutex> lock(db_mutex_);
  refine_clock(/*force=*/true);  // the run's last measurement of the clock against CLOCK_MONOTONIC
  const ClockInfo clock = clock_info();
  const std::int64_t end_unix_ns = imported_end_unix_ns_ >= 0 ? imported_end_unix_ns_ : now_ns() + epoch_offset_ns();
  const std::int64_t dropped = queue_->dropped();
  const std::int64_t errors = queue_->write_errors();
  // Lost records are part of how the run ended: a completed run whose database misses records
  // says so in its own row, where every reader of the file sees it.
  std::string text = message;
  const std::string error = first_error();
  if (errors > 0 && !error.empty() && text.find(error) == std::string::npos)
    text += (text.empty() ? "" : "; ") + std::string("the recorder lost ") + std::to_string(errors) +
            " records it could not write: " + error;
  if (!error.empty()) release_reserve();  // the room kept for this transaction
  // Both rows in one transaction: they agree, whether the disk had room for them or not.
  bool ok = sqlite3_exec(db_.get(), "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) == SQLITE_OK;
  auto update = [&](const char* sql, bool with_rank) {
    if (!ok) return;
    Statement s;
    db_.prepare(s, sql);
    sqlite3_bind_text(s.stmt, 1, to_string(status), -1, SQLITE_STATIC);
    sqlite3_bind_text(s.stmt, 2, text.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(s.stmt, 3, end_unix_ns);
    sqlite3_bind_int64(s.stmt, 4, dropped);
    sqlite3_bind_int64(s.stmt, 5, errors);
    sqlite3_bind_int64(s.stmt, 6, run_id);
    if (with_rank) {
      sqlite3_bind_int(s.stmt, 7, rank_);
      bind_double_or_null(s.stmt, 8, clock.source == ClockSource::kTsc ? clock.tsc_hz : std::nan(""));
      sqlite3_bind_int64(s.stmt, 9, clock.calibration_error_ns);
    }
    if (sqlite3_step(s.stmt) != SQLITE_DONE) {
      queue_->add_write_errors(1);
      ok = false;
    }
  };
  update("UPDATE runs SET status = ?, status_message = ?, end_unix_ns = ?, dropped_records = ?, write_errors = ? "
         "WHERE id = ?",
         false);
  update("UPDATE ranks SET status = ?1, status_message = ?2, end_unix_ns = ?3, dropped_records = ?4, write_errors = ?5, "
         "tsc_hz = ?8, clock_calibration_error_ns = ?9 WHERE run_id = ?6 AND rank = ?7",
         true);
  if (ok && sqlite3_exec(db_.get(), "COMMIT", nullptr, nullptr, nullptr) != SQLITE_OK) ok = false;
  if (ok) {  // a later drain (the destructor's) leaves them alone: a merge may have summed the ranks' since
    written_dropped_ = dropped;
    written_errors_ = errors;
  }
  if (!ok) {
    note_error();
    sqlite3_exec(db_.get(), "ROLLBACK", nullptr, nullptr, nullptr);
  }
  return ok;
}

}  // namespace hs::probes::detail
