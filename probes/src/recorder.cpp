// recorder.cpp — the one writer of the run database: per-thread chunks on the hot path, one
// background writer thread that owns the SQLite work.
//
// Threads and ownership:
//   * a recording thread owns the chunk it fills (records [published, capacity) are its own);
//   * the writer reads [consumed, published) of every chunk, live or handed off; only the writer
//     touches `consumed` and recycles chunks, so a record is written exactly once;
//   * Hub (shared_ptr) owns every chunk; a thread's slot keeps a weak_ptr so a thread that exits
//     after its Recorder is gone touches nothing.
#include "hybridscope/probes/recorder.h"

#include <signal.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <filesystem>
#include <limits>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "hybridscope/probes/clock.h"
#include "hybridscope/probes/schema.h"

namespace hs::probes {

const char* to_string(RunStatus status) {
  switch (status) {
    case RunStatus::kRunning: return "running";
    case RunStatus::kCompleted: return "completed";
    case RunStatus::kFailed: return "failed";
    case RunStatus::kKilled: return "killed";
  }
  return "failed";
}

namespace {

constexpr std::pair<Category, const char*> kCategoryNames[] = {
    {Category::kStep, "step"},           {Category::kPhase, "phase"},
    {Category::kSwitch, "switch"},       {Category::kCheckpoint, "checkpoint"},
    {Category::kValidation, "validation"}, {Category::kSetup, "setup"},
};

// Rows per multi-row INSERT: one sqlite3_step for many rows (7 bound ints each; run_id and rank
// are ?1 and ?2, bound once). 64 * 7 + 2 parameters stays far below SQLITE_MAX_VARIABLE_NUMBER.
constexpr int kRowsPerInsert = 64;
constexpr int kRangeColumns = 7;

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "unknown";
  return buf;
}

struct Statement {
  sqlite3_stmt* stmt = nullptr;
  Statement() = default;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  ~Statement() { sqlite3_finalize(stmt); }
};

std::atomic<std::uint64_t> g_next_hub_id{1};

struct Chunk {
  explicit Chunk(int cap, std::int64_t thread_id) : records(new RangeRecord[cap]), capacity(cap), tid(thread_id) {}
  std::unique_ptr<RangeRecord[]> records;
  const int capacity;
  std::int64_t tid;
  std::atomic<int> published{0};  // producer: release store after writing records[published]
  int consumed = 0;               // writer only
  int queued = 0;                 // records counted in Hub::queued while in `full` (under Hub::mutex)
};

struct Metric {
  std::int64_t step;
  std::string name;
  double value;
};

// What the writer takes from the hub besides range chunks: the cold-path records.
struct ColdRecords {
  std::vector<Metric> metrics;
  std::vector<MemorySample> memory;
  std::vector<KvPoolSample> kv_pool;
  std::vector<CommRecord> comm;
  std::vector<SwitchRecord> switches;
  void swap(ColdRecords& other) noexcept {
    metrics.swap(other.metrics);
    memory.swap(other.memory);
    kv_pool.swap(other.kv_pool);
    comm.swap(other.comm);
    switches.swap(other.switches);
  }
};

// State shared by the recording threads, the writer thread and the Recorder.
struct Hub {
  explicit Hub(const RecorderOptions& o) : id(g_next_hub_id.fetch_add(1)), options(o) {}

  const std::uint64_t id;
  const RecorderOptions options;
  std::mutex mutex;
  std::condition_variable wake;     // the writer waits here
  std::condition_variable flushed;  // flush() waits here
  std::vector<std::unique_ptr<Chunk>> chunks;  // owns every chunk (under mutex)
  std::vector<Chunk*> live;                    // one per recording thread, being filled
  std::deque<Chunk*> full;                     // handed off, oldest first
  std::vector<Chunk*> spare;                   // recycled by the writer
  ColdRecords cold;
  std::atomic<std::int64_t> queued{0};         // records in `full` (written under mutex)
  std::atomic<std::int64_t> dropped{0};
  std::atomic<std::int64_t> write_errors{0};
  std::atomic<std::int64_t> run_id{-1};
  std::uint64_t flush_requested = 0, flush_done = 0;
  bool stop = false;

  // Under mutex. May throw std::bad_alloc.
  Chunk* take_chunk_locked(std::int64_t tid) {
    Chunk* c;
    if (!spare.empty()) {
      c = spare.back();
      spare.pop_back();
      c->tid = tid;
    } else {
      chunks.push_back(std::make_unique<Chunk>(std::max(1, options.chunk_records), tid));
      c = chunks.back().get();
    }
    return c;
  }
  std::int64_t wake_threshold() const {
    return std::min<std::int64_t>(8LL * options.chunk_records, std::max<std::int64_t>(1, options.max_queued_records / 2));
  }
  // Under mutex: moves `c` from live to full.
  void enqueue_locked(Chunk* c) {
    live.erase(std::remove(live.begin(), live.end(), c), live.end());
    c->queued = c->published.load(std::memory_order_relaxed);
    full.push_back(c);
    queued.store(queued.load(std::memory_order_relaxed) + c->queued, std::memory_order_relaxed);
    if (queued.load(std::memory_order_relaxed) >= wake_threshold()) wake.notify_one();
  }
  // A thread stops using `c` (it exits or records into another Recorder).
  void retire(Chunk* c) noexcept {
    std::lock_guard<std::mutex> lock(mutex);
    if (std::find(live.begin(), live.end(), c) != live.end()) enqueue_locked(c);
  }
};

// The calling thread's chunk. One slot per thread: a thread that alternates between Recorders
// retires its chunk to the old one at each switch.
struct ThreadSlot {
  std::uint64_t hub_id = 0;
  Chunk* chunk = nullptr;
  std::weak_ptr<Hub> hub;
  void release() noexcept {
    if (auto h = hub.lock()) h->retire(chunk);
    hub.reset();
    hub_id = 0;
    chunk = nullptr;
  }
  ~ThreadSlot() { release(); }
};
thread_local ThreadSlot t_slot;

// Slow path: give the calling thread a chunk of `hub`. nullptr when memory ran out.
Chunk* attach(const std::shared_ptr<Hub>& hub) noexcept {
  t_slot.release();
  try {
    std::lock_guard<std::mutex> lock(hub->mutex);
    Chunk* c = hub->take_chunk_locked(static_cast<std::int64_t>(gettid()));
    hub->live.push_back(c);
    t_slot.hub = hub;
    t_slot.hub_id = hub->id;
    t_slot.chunk = c;
    return c;
  } catch (...) {
    return nullptr;
  }
}

// Slow path: the calling thread's chunk is full; swap it for an empty one unless the queue is at
// its cap. nullptr: drop the record.
Chunk* hand_off(Hub& hub, Chunk* c) noexcept {
  if (hub.queued.load(std::memory_order_relaxed) + c->capacity > hub.options.max_queued_records) return nullptr;
  try {
    std::lock_guard<std::mutex> lock(hub.mutex);
    if (hub.queued.load(std::memory_order_relaxed) + c->capacity > hub.options.max_queued_records) return nullptr;
    Chunk* next = hub.take_chunk_locked(c->tid);
    hub.live.push_back(next);
    hub.enqueue_locked(c);
    t_slot.chunk = next;
    return next;
  } catch (...) {
    return nullptr;
  }
}

}  // namespace

struct Recorder::Impl {
  // Opened SQLITE_OPEN_NOMUTEX (SQLite's per-call mutexes cost ~5% of the writer): db_mutex
  // serializes the writer thread and begin_run/end_run instead. The constructor runs before the
  // writer starts.
  sqlite3* db = nullptr;
  std::mutex db_mutex;
  Statement insert_string, find_string, insert_range, insert_ranges, insert_metric, insert_memory, insert_kv_pool,
      update_dropped, insert_comm;
  Statement insert_switch, insert_switch_component;
  std::shared_ptr<Hub> hub;
  std::thread writer;
  int rank = 0;
  std::int64_t written_dropped = 0;  // runs.dropped_records as last written (writer only)
  // Writer-only interning caches: names are string literals, so the pointer is the fast key.
  std::unordered_map<const char*, std::int64_t> ids_by_pointer;
  std::unordered_map<std::string, std::int64_t> ids_by_value;
  // Rows waiting for a full multi-row INSERT: (record in its chunk, tid). The chunks stay put
  // until the writer recycles them after the transaction.
  std::vector<std::pair<const RangeRecord*, std::int64_t>> pending;
  const char* last_name = nullptr;  // consecutive records mostly share a name: skip the lookup
  std::int64_t last_name_id = -1;

  ~Impl() {
    // Statements must be finalized before the connection closes.
    for (Statement* s : {&insert_string, &find_string, &insert_range, &insert_ranges, &insert_metric, &insert_memory,
                         &insert_kv_pool, &update_dropped, &insert_comm, &insert_switch,
                         &insert_switch_component}) {
      sqlite3_finalize(s->stmt);
      s->stmt = nullptr;
    }
    if (db) sqlite3_close_v2(db);
  }

  void exec(const char* sql) {
    char* err = nullptr;
    if (sqlite3_exec(db, sql, nullptr, nullptr, &err) != SQLITE_OK) {
      std::string message = err ? err : "unknown error";
      sqlite3_free(err);
      throw RecorderError("SQLite: " + message + " in: " + std::string(sql).substr(0, 80));
    }
  }
  void prepare(Statement& s, const std::string& sql) {
    if (sqlite3_prepare_v3(db, sql.c_str(), -1, SQLITE_PREPARE_PERSISTENT, &s.stmt, nullptr) != SQLITE_OK)
      throw RecorderError(std::string("SQLite prepare failed: ") + sqlite3_errmsg(db));
  }
  std::int64_t intern_value(const std::string& value) {
    auto it = ids_by_value.find(value);
    if (it != ids_by_value.end()) return it->second;
    sqlite3_bind_text(insert_string.stmt, 1, value.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_step(insert_string.stmt);
    sqlite3_reset(insert_string.stmt);
    sqlite3_bind_text(find_string.stmt, 1, value.c_str(), -1, SQLITE_TRANSIENT);
    std::int64_t id = -1;
    if (sqlite3_step(find_string.stmt) == SQLITE_ROW) id = sqlite3_column_int64(find_string.stmt, 0);
    sqlite3_reset(find_string.stmt);
    if (id < 0) throw RecorderError("SQLite: could not intern a string");
    ids_by_value.emplace(value, id);
    return id;
  }
  std::int64_t intern(const char* name) {
    if (name == last_name && last_name_id >= 0) return last_name_id;
    last_name = name;
    last_name_id = intern_pointer(name);
    return last_name_id;
  }
  std::int64_t intern_pointer(const char* name) {
    auto it = ids_by_pointer.find(name);
    if (it != ids_by_pointer.end()) return it->second;
    const std::int64_t id = intern_value(name ? name : "(null)");
    ids_by_pointer.emplace(name, id);
    return id;
  }

  void step_range_statement(sqlite3_stmt* st, int rows) {
    if (sqlite3_step(st) != SQLITE_DONE) hub->write_errors.fetch_add(rows, std::memory_order_relaxed);
    sqlite3_reset(st);  // bindings of ?1 (run_id) and ?2 (rank) stay
  }
  void bind_range(sqlite3_stmt* st, int row, const RangeRecord& r, std::int64_t tid) {
    const int p = 3 + row * kRangeColumns;
    sqlite3_bind_int64(st, p + 0, tid);
    sqlite3_bind_int64(st, p + 1, r.step);
    sqlite3_bind_int64(st, p + 2, intern(r.name));
    sqlite3_bind_int(st, p + 3, static_cast<int>(r.category));
    sqlite3_bind_int(st, p + 4, r.depth);
    sqlite3_bind_int64(st, p + 5, r.start_ns);
    sqlite3_bind_int64(st, p + 6, r.end_ns);
  }
  // Writes the ranges of `full` then of the live chunks, and the cold records, in one transaction.
  void write(const std::deque<Chunk*>& full, const std::vector<Chunk*>& live, const ColdRecords& cold,
             std::int64_t run_id) {
    std::lock_guard<std::mutex> lock(db_mutex);
    try {
      exec("BEGIN");
      sqlite3_bind_int64(insert_ranges.stmt, 1, run_id);
      sqlite3_bind_int(insert_ranges.stmt, 2, rank);
      sqlite3_bind_int64(insert_range.stmt, 1, run_id);
      sqlite3_bind_int(insert_range.stmt, 2, rank);
      pending.clear();
      pending.reserve(kRowsPerInsert);
      auto drain = [&](Chunk& c) {
        const int end = c.published.load(std::memory_order_acquire);
        for (int i = c.consumed; i < end; ++i) {
          pending.emplace_back(&c.records[i], c.tid);
          if (static_cast<int>(pending.size()) == kRowsPerInsert) flush_pending();
        }
        c.consumed = end;
      };
      for (Chunk* c : full) drain(*c);
      for (Chunk* c : live) drain(*c);
      flush_pending();
      for (const auto& m : cold.memory) write_memory(m, run_id);
      for (const auto& k : cold.kv_pool) write_kv_pool(k, run_id);
      for (const auto& c : cold.comm) write_comm(c, run_id);
      for (const auto& w : cold.switches) write_switch(w, run_id);
      for (const auto& m : cold.metrics) {
        sqlite3_stmt* st = insert_metric.stmt;
        sqlite3_bind_int64(st, 1, run_id);
        sqlite3_bind_int64(st, 2, m.step);
        sqlite3_bind_int64(st, 3, intern_value(m.name));
        sqlite3_bind_double(st, 4, m.value);
        if (sqlite3_step(st) != SQLITE_DONE) hub->write_errors.fetch_add(1, std::memory_order_relaxed);
        sqlite3_reset(st);
      }
      write_dropped(run_id);
      exec("COMMIT");
    } catch (...) {
      hub->write_errors.fetch_add(1, std::memory_order_relaxed);
      sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
    }
  }
  // Rows in `pending`: full multi-row statements, then the remainder one row at a time.
  void flush_pending() {
    const int n = static_cast<int>(pending.size());
    if (n == kRowsPerInsert) {
      for (int row = 0; row < n; ++row) bind_range(insert_ranges.stmt, row, *pending[row].first, pending[row].second);
      step_range_statement(insert_ranges.stmt, n);
    } else {
      for (int row = 0; row < n; ++row) {
        bind_range(insert_range.stmt, 0, *pending[row].first, pending[row].second);
        step_range_statement(insert_range.stmt, 1);
      }
    }
    pending.clear();
  }
  void write_memory(const MemorySample& m, std::int64_t run_id) {
    sqlite3_stmt* st = insert_memory.stmt;
    int p = 1;
    sqlite3_bind_int64(st, p++, run_id);
    sqlite3_bind_int(st, p++, rank);
    sqlite3_bind_int64(st, p++, m.step);
    sqlite3_bind_int64(st, p++, m.ts_ns);
    sqlite3_bind_int64(st, p++, intern(m.phase));
    sqlite3_bind_int(st, p++, m.device);
    for (std::int64_t v : {m.allocated_bytes, m.reserved_bytes, m.active_bytes, m.inactive_split_bytes,
                           m.largest_free_block_bytes, m.peak_allocated_bytes, m.num_allocs, m.num_alloc_retries,
                           m.num_ooms}) {
      if (v < 0) sqlite3_bind_null(st, p++);
      else sqlite3_bind_int64(st, p++, v);
    }
    const FragmentationRatios f = fragmentation(m);
    for (double v : {f.reserved_slack, f.split_fragmentation, f.external_fragmentation}) {
      if (std::isnan(v)) sqlite3_bind_null(st, p++);
      else sqlite3_bind_double(st, p++, v);
    }
    if (sqlite3_step(st) != SQLITE_DONE) hub->write_errors.fetch_add(1, std::memory_order_relaxed);
    sqlite3_reset(st);
  }
  void write_kv_pool(const KvPoolSample& k, std::int64_t run_id) {
    sqlite3_stmt* st = insert_kv_pool.stmt;
    int p = 1;
    sqlite3_bind_int64(st, p++, run_id);
    sqlite3_bind_int(st, p++, rank);
    sqlite3_bind_int64(st, p++, k.step);
    sqlite3_bind_int64(st, p++, k.ts_ns);
    sqlite3_bind_int64(st, p++, intern(k.phase));
    for (std::int64_t v : {k.num_blocks, k.block_size, k.blocks_used, k.shared_blocks, k.num_sequences,
                           k.tokens_stored, k.token_capacity_used, k.cache_bytes})
      sqlite3_bind_int64(st, p++, v);
    if (sqlite3_step(st) != SQLITE_DONE) hub->write_errors.fetch_add(1, std::memory_order_relaxed);
    sqlite3_reset(st);
  }
  void write_comm(const CommRecord& c, std::int64_t run_id) {
    sqlite3_stmt* st = insert_comm.stmt;
    int p = 1;
    sqlite3_bind_int64(st, p++, run_id);
    sqlite3_bind_int(st, p++, rank);
    sqlite3_bind_int64(st, p++, c.step);
    sqlite3_bind_int64(st, p++, intern_pointer(c.op));
    sqlite3_bind_int64(st, p++, intern_pointer(c.group));
    sqlite3_bind_int(st, p++, c.group_size);
    sqlite3_bind_int64(st, p++, c.bytes);
    sqlite3_bind_int64(st, p++, intern_pointer(c.dtype));
    sqlite3_bind_int64(st, p++, c.start_ns);
    sqlite3_bind_int64(st, p++, c.end_ns);
    const double algbw = algorithm_bandwidth_gbps(c.bytes, c.start_ns, c.end_ns);
    for (double v : {algbw, algbw * bus_bandwidth_factor(c.op, c.group_size)}) {
      if (std::isnan(v)) sqlite3_bind_null(st, p++);
      else sqlite3_bind_double(st, p++, v);
    }
    if (sqlite3_step(st) != SQLITE_DONE) hub->write_errors.fetch_add(1, std::memory_order_relaxed);
    sqlite3_reset(st);
  }
  // The switch row, then its components referencing the row's id.
  void write_switch(const SwitchRecord& w, std::int64_t run_id) {
    sqlite3_stmt* st = insert_switch.stmt;
    int p = 1;
    sqlite3_bind_int64(st, p++, run_id);
    sqlite3_bind_int(st, p++, rank);
    sqlite3_bind_int64(st, p++, w.step);
    sqlite3_bind_int64(st, p++, intern(w.direction));
    for (std::int64_t v : {w.start_ns, w.end_ns, w.bytes_sent, w.bytes_received, w.bytes_local})
      sqlite3_bind_int64(st, p++, v);
    for (std::int64_t v : {w.memory_before_bytes, w.memory_after_bytes, w.peak_memory_bytes}) {
      if (v < 0) sqlite3_bind_null(st, p++);
      else sqlite3_bind_int64(st, p++, v);
    }
    const bool ok = sqlite3_step(st) == SQLITE_DONE;
    sqlite3_reset(st);
    if (!ok) {
      hub->write_errors.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    const std::int64_t switch_id = sqlite3_last_insert_rowid(db);
    sqlite3_stmt* sc = insert_switch_component.stmt;
    for (const auto& [name, duration_ns] : w.components) {
      sqlite3_bind_int64(sc, 1, switch_id);
      sqlite3_bind_int64(sc, 2, intern(name));
      sqlite3_bind_int64(sc, 3, duration_ns);
      if (sqlite3_step(sc) != SQLITE_DONE) hub->write_errors.fetch_add(1, std::memory_order_relaxed);
      sqlite3_reset(sc);
    }
  }
  void write_dropped(std::int64_t run_id) {
    const std::int64_t dropped = hub->dropped.load(std::memory_order_relaxed);
    if (dropped == written_dropped) return;
    sqlite3_bind_int64(update_dropped.stmt, 1, dropped);
    sqlite3_bind_int64(update_dropped.stmt, 2, run_id);
    if (sqlite3_step(update_dropped.stmt) == SQLITE_DONE) written_dropped = dropped;
    else hub->write_errors.fetch_add(1, std::memory_order_relaxed);
    sqlite3_reset(update_dropped.stmt);
  }

  void writer_loop() noexcept {
    Hub& h = *hub;
    std::unique_lock<std::mutex> lock(h.mutex);
    for (;;) {
      h.wake.wait_for(lock, std::chrono::milliseconds(std::max(1, h.options.flush_interval_ms)), [&] {
        // Before begin_run nothing can be written: a full queue must not wake the writer then,
        // or it would spin.
        return h.stop || h.flush_requested > h.flush_done ||
               (h.run_id.load() >= 0 && h.queued.load(std::memory_order_relaxed) >= h.wake_threshold());
      });
      const bool stopping = h.stop;
      const std::uint64_t target = h.flush_requested;
      const std::int64_t run_id = h.run_id.load();
      if (run_id >= 0) {
        std::deque<Chunk*> full;
        full.swap(h.full);
        std::vector<Chunk*> live;
        ColdRecords cold;
        try {
          live = h.live;
        } catch (...) {
          h.write_errors.fetch_add(1, std::memory_order_relaxed);
        }
        cold.swap(h.cold);
        lock.unlock();
        write(full, live, cold, run_id);
        lock.lock();
        for (Chunk* c : full) {
          h.queued.store(h.queued.load(std::memory_order_relaxed) - c->queued, std::memory_order_relaxed);
          c->queued = 0;
          c->consumed = 0;
          c->published.store(0, std::memory_order_relaxed);
          try {
            h.spare.push_back(c);
          } catch (...) {
          }
        }
      }
      h.flush_done = target;
      h.flushed.notify_all();
      if (stopping) return;
    }
  }
};

Recorder::Recorder(const std::string& path, int rank, RecorderOptions options)
    : impl_(std::make_unique<Impl>()), path_(path), rank_(rank) {
  impl_->rank = rank;
  impl_->hub = std::make_shared<Hub>(options);
  const auto parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(parent, ec);
    if (ec) throw RecorderError("cannot create directory " + parent.string() + ": " + ec.message());
  }
  if (sqlite3_open_v2(path.c_str(), &impl_->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr) != SQLITE_OK)
    throw RecorderError("cannot open run database " + path + ": " + sqlite3_errmsg(impl_->db));
  sqlite3_busy_timeout(impl_->db, 5000);

  int version = 0;
  {
    Statement s;
    impl_->prepare(s, "PRAGMA user_version");
    if (sqlite3_step(s.stmt) == SQLITE_ROW) version = sqlite3_column_int(s.stmt, 0);
  }
  if (version != 0 && (version < schema::kOldestMigratableVersion || version > schema::kSchemaVersion))
    throw RecorderError(path + " has schema version " + std::to_string(version) + ", this build writes " +
                        std::to_string(schema::kSchemaVersion) + ": write the run to a new file (--db)");
  impl_->exec("PRAGMA journal_mode=WAL");
  impl_->exec("PRAGMA synchronous=NORMAL");
  // Writer throughput: a 64 MiB page cache keeps the ranges index in memory, and checkpoints
  // every 16k pages (64 MiB of WAL) instead of 1k move pages back in fewer, larger batches.
  impl_->exec("PRAGMA cache_size=-65536");
  impl_->exec("PRAGMA wal_autocheckpoint=16384");
  impl_->exec("BEGIN");
  if (version == 1) impl_->exec(schema::kMigrateToV2);
  // v1-v2 files get their switches table from kCreateStatements; only an existing one moves.
  if (version == 3) impl_->exec(schema::kMigrateToV4);
  impl_->exec(schema::kCreateStatements);
  for (const auto& [category, name] : kCategoryNames) {
    const std::string sql = "INSERT OR IGNORE INTO range_categories(id, name, label) VALUES(" +
                            std::to_string(static_cast<int>(category)) + ", '" + name + "', '" + name + "')";
    impl_->exec(sql.c_str());
  }
  impl_->exec(("PRAGMA user_version=" + std::to_string(schema::kSchemaVersion)).c_str());

  // Runs of this host left 'running' by a process that no longer exists died without end_run
  // (SIGKILL, OOM killer, crash). A reused pid that is alive again hides a dead run: it stays
  // 'running' until that process is gone too.
  {
    const std::string host = host_name();
    Statement find, mark;
    impl_->prepare(find, "SELECT id, pid FROM runs WHERE status = 'running' AND host = ?");
    impl_->prepare(mark, "UPDATE runs SET status = 'killed', status_message = ? WHERE id = ? AND status = 'running'");
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
    }
  }
  impl_->exec("COMMIT");

  impl_->prepare(impl_->insert_string, "INSERT OR IGNORE INTO strings(value) VALUES(?)");
  impl_->prepare(impl_->find_string, "SELECT id FROM strings WHERE value = ?");
  const std::string columns = "INSERT INTO ranges(run_id, rank, tid, step, name_id, category_id, depth, start_ns, end_ns) VALUES";
  auto row_sql = [](int row) {
    std::string s = "(?1, ?2";
    for (int c = 0; c < kRangeColumns; ++c) s += ", ?" + std::to_string(3 + row * kRangeColumns + c);
    return s + ")";
  };
  impl_->prepare(impl_->insert_range, columns + row_sql(0));
  std::string multi = columns;
  for (int row = 0; row < kRowsPerInsert; ++row) multi += (row ? "," : "") + row_sql(row);
  impl_->prepare(impl_->insert_ranges, multi);
  impl_->prepare(impl_->insert_metric,
                 "INSERT OR REPLACE INTO step_metrics(run_id, step, name_id, value) VALUES(?, ?, ?, ?)");
  impl_->prepare(impl_->insert_memory,
                 "INSERT INTO memory_samples(run_id, rank, step, ts_ns, phase_id, device, allocated_bytes, "
                 "reserved_bytes, active_bytes, inactive_split_bytes, largest_free_block_bytes, peak_allocated_bytes, "
                 "num_allocs, num_alloc_retries, num_ooms, reserved_slack, split_fragmentation, external_fragmentation) "
                 "VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
  impl_->prepare(impl_->insert_kv_pool,
                 "INSERT INTO kv_pool_samples(run_id, rank, step, ts_ns, phase_id, num_blocks, block_size, "
                 "blocks_used, shared_blocks, num_sequences, tokens_stored, token_capacity_used, cache_bytes) "
                 "VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?)");
  impl_->prepare(impl_->insert_comm,
                 "INSERT INTO comm_ops(run_id, rank, step, op_id, group_id, group_size, bytes, dtype_id, start_ns, "
                 "end_ns, algbw_gbps, busbw_gbps) VALUES(?,?,?,?,?,?,?,?,?,?,?,?)");
  impl_->prepare(impl_->insert_switch,
                 "INSERT INTO switches(run_id, rank, step, direction_id, start_ns, end_ns, bytes_sent, bytes_received, "
                 "bytes_local, memory_before_bytes, memory_after_bytes, peak_memory_bytes) "
                 "VALUES(?,?,?,?,?,?,?,?,?,?,?,?)");
  impl_->prepare(impl_->insert_switch_component,
                 "INSERT INTO switch_components(switch_id, name_id, duration_ns) VALUES(?,?,?)");
  impl_->prepare(impl_->update_dropped, "UPDATE runs SET dropped_records = ? WHERE id = ?");

  impl_->writer = std::thread([impl = impl_.get()] { impl->writer_loop(); });
}

Recorder::~Recorder() {
  if (run_id_ >= 0) flush();
  {
    std::lock_guard<std::mutex> lock(impl_->hub->mutex);
    impl_->hub->stop = true;
  }
  impl_->hub->wake.notify_one();
  if (impl_->writer.joinable()) impl_->writer.join();
}

std::int64_t Recorder::begin_run(const RunInfo& info) {
  std::lock_guard<std::mutex> lock(impl_->db_mutex);
  Statement s;
  impl_->prepare(s,
                 "INSERT INTO runs(name, command_line, config_yaml, host, pid, world_size, hybridscope_version, "
                 "torch_version, start_unix_ns, clock_offset_ns, status) VALUES(?,?,?,?,?,?,?,?,?,?, 'running')");
  const std::string host = host_name();
  sqlite3_bind_text(s.stmt, 1, info.name.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(s.stmt, 2, info.command_line.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(s.stmt, 3, info.config_yaml.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(s.stmt, 4, host.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_int64(s.stmt, 5, static_cast<std::int64_t>(getpid()));
  sqlite3_bind_int(s.stmt, 6, info.world_size);
  sqlite3_bind_text(s.stmt, 7, HS_VERSION_STRING, -1, SQLITE_STATIC);
  sqlite3_bind_text(s.stmt, 8, info.torch_version.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_int64(s.stmt, 9, now_ns() + epoch_offset_ns());
  sqlite3_bind_int64(s.stmt, 10, epoch_offset_ns());
  if (sqlite3_step(s.stmt) != SQLITE_DONE)
    throw RecorderError(std::string("cannot insert the run row: ") + sqlite3_errmsg(impl_->db));
  run_id_ = sqlite3_last_insert_rowid(impl_->db);
  if (!info.config.empty()) {
    Statement c;
    impl_->prepare(c, "INSERT OR REPLACE INTO config(run_id, key, value) VALUES(?,?,?)");
    for (const auto& [key, value] : info.config) {
      sqlite3_bind_int64(c.stmt, 1, run_id_);
      sqlite3_bind_text(c.stmt, 2, key.c_str(), -1, SQLITE_TRANSIENT);
      sqlite3_bind_text(c.stmt, 3, value.c_str(), -1, SQLITE_TRANSIENT);
      if (sqlite3_step(c.stmt) != SQLITE_DONE)
        throw RecorderError(std::string("cannot insert the run's config: ") + sqlite3_errmsg(impl_->db));
      sqlite3_reset(c.stmt);
    }
  }
  impl_->hub->run_id.store(run_id_);
  return run_id_;
}

void Recorder::end_run(RunStatus status, const std::string& message) {
  flush();
  std::lock_guard<std::mutex> lock(impl_->db_mutex);
  Statement s;
  impl_->prepare(s, "UPDATE runs SET status = ?, status_message = ?, end_unix_ns = ?, dropped_records = ? WHERE id = ?");
  sqlite3_bind_text(s.stmt, 1, to_string(status), -1, SQLITE_STATIC);
  sqlite3_bind_text(s.stmt, 2, message.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_int64(s.stmt, 3, now_ns() + epoch_offset_ns());
  sqlite3_bind_int64(s.stmt, 4, dropped_records());
  sqlite3_bind_int64(s.stmt, 5, run_id_);
  if (sqlite3_step(s.stmt) != SQLITE_DONE) impl_->hub->write_errors.fetch_add(1, std::memory_order_relaxed);
}

void Recorder::record_range(const RangeRecord& range) noexcept {
  Hub& hub = *impl_->hub;
  Chunk* c = t_slot.chunk;
  if (t_slot.hub_id != hub.id) {
    c = attach(impl_->hub);
    if (!c) {
      hub.dropped.fetch_add(1, std::memory_order_relaxed);
      return;
    }
  }
  int n = c->published.load(std::memory_order_relaxed);
  if (n == c->capacity) {
    c = hand_off(hub, c);
    if (!c) {
      hub.dropped.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    n = 0;
  }
  c->records[n] = range;
  c->published.store(n + 1, std::memory_order_release);
}

void Recorder::record_metrics(std::int64_t step, const std::vector<std::pair<std::string, double>>& metrics) noexcept {
  Hub& hub = *impl_->hub;
  try {
    std::lock_guard<std::mutex> lock(hub.mutex);
    for (const auto& [name, value] : metrics) hub.cold.metrics.push_back({step, name, value});
  } catch (...) {
    hub.write_errors.fetch_add(static_cast<std::int64_t>(metrics.size()), std::memory_order_relaxed);
  }
}

void Recorder::record_memory(const MemorySample& sample) noexcept {
  Hub& hub = *impl_->hub;
  try {
    std::lock_guard<std::mutex> lock(hub.mutex);
    hub.cold.memory.push_back(sample);
  } catch (...) {
    hub.write_errors.fetch_add(1, std::memory_order_relaxed);
  }
}

void Recorder::record_kv_pool(const KvPoolSample& sample) noexcept {
  Hub& hub = *impl_->hub;
  try {
    std::lock_guard<std::mutex> lock(hub.mutex);
    hub.cold.kv_pool.push_back(sample);
  } catch (...) {
    hub.write_errors.fetch_add(1, std::memory_order_relaxed);
  }
}

void Recorder::record_comm(const CommRecord& comm) noexcept {
  Hub& hub = *impl_->hub;
  try {
    std::lock_guard<std::mutex> lock(hub.mutex);
    hub.cold.comm.push_back(comm);
  } catch (...) {
    hub.write_errors.fetch_add(1, std::memory_order_relaxed);
  }
}

void Recorder::record_switch(const SwitchRecord& record) noexcept {
  Hub& hub = *impl_->hub;
  try {
    std::lock_guard<std::mutex> lock(hub.mutex);
    hub.cold.switches.push_back(record);
  } catch (...) {
    hub.write_errors.fetch_add(1, std::memory_order_relaxed);
  }
}

double bus_bandwidth_factor(const char* op, int n) noexcept {
  if (!op || n <= 0) return 0.0;
  const double ranks = static_cast<double>(n);
  auto is = [op](const char* name) { return std::strcmp(op, name) == 0; };
  if (is("all_reduce")) return 2.0 * (ranks - 1.0) / ranks;
  if (is("all_gather") || is("reduce_scatter") || is("all_to_all")) return (ranks - 1.0) / ranks;
  if (is("broadcast") || is("reduce") || is("send") || is("recv")) return 1.0;
  return 0.0;  // barrier moves no payload; unknown ops claim no bus bandwidth
}

double algorithm_bandwidth_gbps(std::int64_t bytes, std::int64_t start_ns, std::int64_t end_ns) noexcept {
  if (end_ns <= start_ns) return std::numeric_limits<double>::quiet_NaN();
  // bytes / ns == GB/s (1e9 bytes per second).
  return static_cast<double>(bytes) / static_cast<double>(end_ns - start_ns);
}

FragmentationRatios fragmentation(const MemorySample& m) noexcept {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  FragmentationRatios f{nan, nan, nan};
  if (m.reserved_bytes > 0) {
    const double reserved = static_cast<double>(m.reserved_bytes);
    if (m.allocated_bytes >= 0) f.reserved_slack = 1.0 - static_cast<double>(m.allocated_bytes) / reserved;
    if (m.inactive_split_bytes >= 0) f.split_fragmentation = static_cast<double>(m.inactive_split_bytes) / reserved;
    if (m.active_bytes >= 0 && m.largest_free_block_bytes >= 0 && m.reserved_bytes > m.active_bytes)
      f.external_fragmentation =
          1.0 - static_cast<double>(m.largest_free_block_bytes) / static_cast<double>(m.reserved_bytes - m.active_bytes);
  }
  return f;
}

void Recorder::flush() noexcept {
  if (run_id_ < 0) return;
  Hub& hub = *impl_->hub;
  std::unique_lock<std::mutex> lock(hub.mutex);
  const std::uint64_t ticket = ++hub.flush_requested;
  hub.wake.notify_one();
  hub.flushed.wait(lock, [&] { return hub.flush_done >= ticket; });
}

std::int64_t Recorder::write_errors() const noexcept {
  return impl_->hub->write_errors.load(std::memory_order_relaxed) + dropped_records();
}

std::int64_t Recorder::dropped_records() const noexcept { return impl_->hub->dropped.load(std::memory_order_relaxed); }

}  // namespace hs::probes
