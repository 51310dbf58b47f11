// run_database.cpp — the read side of the run database. Every SQL string names tables through
// probes/schema.h so that a rename there breaks the build here, not a user's report.
#include "hybridscope/reports/run_database.h"

#include <sqlite3.h>

#include <filesystem>
#include <utility>

#include "hybridscope/probes/schema.h"
#include "sqlite_query.h"

namespace hs::reports {

namespace schema = hs::probes::schema;
using Kind = RunDatabaseError::Kind;
using detail::Query;

bool RunSummary::operator==(const RunSummary& o) const {
  return id == o.id && name == o.name && status == o.status && status_message == o.status_message &&
         host == o.host && command_line == o.command_line && hybridscope_version == o.hybridscope_version &&
         world_size == o.world_size && start_unix_ns == o.start_unix_ns && end_unix_ns == o.end_unix_ns &&
         clock_offset_ns == o.clock_offset_ns && source == o.source;
}

std::string RunSummary::missing() const {
  return imported() ? "not in the source (an imported " + source + " run)" : "not recorded";
}

bool RangeRow::operator==(const RangeRow& o) const {
  return rank == o.rank && tid == o.tid && step == o.step && name == o.name && category == o.category &&
         depth == o.depth && start_ns == o.start_ns && end_ns == o.end_ns && batch_size == o.batch_size &&
         context_len == o.context_len;
}

bool StepMetric::operator==(const StepMetric& o) const {
  return step == o.step && name == o.name && value == o.value;
}

bool CommOpRow::operator==(const CommOpRow& o) const {
  return rank == o.rank && step == o.step && op == o.op && group == o.group && group_size == o.group_size &&
         bytes == o.bytes && dtype == o.dtype && start_ns == o.start_ns && end_ns == o.end_ns &&
         algbw_gbps == o.algbw_gbps && busbw_gbps == o.busbw_gbps && posted_ns == o.posted_ns &&
         wait_start_ns == o.wait_start_ns &&
         wait_end_ns == o.wait_end_ns;
}

bool SwitchRow::operator==(const SwitchRow& o) const {
  return rank == o.rank && step == o.step && direction == o.direction && start_ns == o.start_ns &&
         end_ns == o.end_ns && bytes_sent == o.bytes_sent && bytes_received == o.bytes_received &&
         bytes_local == o.bytes_local && components == o.components;
}

bool MemorySampleRow::operator==(const MemorySampleRow& o) const {
  return rank == o.rank && step == o.step && ts_ns == o.ts_ns && phase == o.phase && device == o.device &&
         allocated_bytes == o.allocated_bytes && reserved_bytes == o.reserved_bytes && active_bytes == o.active_bytes &&
         inactive_split_bytes == o.inactive_split_bytes && largest_free_block_bytes == o.largest_free_block_bytes &&
         peak_allocated_bytes == o.peak_allocated_bytes && num_alloc_retries == o.num_alloc_retries &&
         num_ooms == o.num_ooms && reserved_slack == o.reserved_slack && split_fragmentation == o.split_fragmentation &&
         external_fragmentation == o.external_fragmentation;
}

bool KvPoolSampleRow::operator==(const KvPoolSampleRow& o) const {
  return rank == o.rank && step == o.step && ts_ns == o.ts_ns && phase == o.phase && num_blocks == o.num_blocks &&
         blocks_used == o.blocks_used && shared_blocks == o.shared_blocks && block_size == o.block_size &&
         num_sequences == o.num_sequences && tokens_stored == o.tokens_stored && cache_bytes == o.cache_bytes;
}

namespace {

std::string run_columns() {
  return "SELECT id, name, status, status_message, host, command_line, hybridscope_version, world_size, "
         "start_unix_ns, end_unix_ns, clock_offset_ns, source FROM " +
         std::string(schema::kRuns);
}

bool has_table(sqlite3* db, const char* table, const std::string& path) {
  Query q(db, "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = ?", path);
  q.bind(1, std::string(table));
  return q.next() && q.int64(0) > 0;
}

RunSummary read_run(const Query& q) {
  RunSummary r;
  r.id = q.int64(0);
  r.name = q.text(1);
  r.status = q.text(2);
  r.status_message = q.text(3);
  r.host = q.text(4);
  r.command_line = q.text(5);
  r.hybridscope_version = q.text(6);
  r.world_size = static_cast<int>(q.int64(7));
  r.start_unix_ns = q.int64(8);
  if (!q.is_null(9)) r.end_unix_ns = q.int64(9);
  r.clock_offset_ns = q.int64(10);
  r.source = q.text(11);
  return r;
}

}  // namespace


RunDatabase::RunDatabase(const std::string& path) : impl_(std::make_unique<Impl>()), path_(path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw RunDatabaseError(Kind::kMissingFile,
                           "no run database at " + path + ": check the path (`hybridscope train --db` sets it)");
  // Read-only: a report must never change a run, nor create a file. A WAL-mode database still
  // needs its -shm file, which SQLite creates beside it when the directory allows.
  if (sqlite3_open_v2(path.c_str(), &impl_->db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK)
    throw RunDatabaseError(Kind::kMissingFile,
                           "cannot open run database " + path + ": " + sqlite3_errmsg(impl_->db));
  sqlite3_busy_timeout(impl_->db, 5000);  // a training run may be committing a step right now

  {
    Query q(impl_->db, "PRAGMA user_version", path_);
    if (q.next()) schema_version_ = static_cast<int>(q.int64(0));
  }
  if (schema_version_ == 0 || !has_table(impl_->db, schema::kRuns, path_)) {
    // SQLite, but never written by the recorder (it sets user_version in its first transaction).
    throw RunDatabaseError(Kind::kNotADatabase, path + " is an SQLite file but not a hybridscope run database "
                                                       "(no runs table, schema version " +
                                                       std::to_string(schema_version_) + ")");
  }
  if (schema_version_ > schema::kSchemaVersion)
    throw RunDatabaseError(Kind::kSchemaVersion,
                           path + " has schema version " + std::to_string(schema_version_) + ", newer than the " +
                               std::to_string(schema::kSchemaVersion) +
                               " this build reads: it was written by a newer hybridscope; read it with that version");
  if (schema_version_ < schema::kOldestMigratableVersion)
    throw RunDatabaseError(Kind::kSchemaVersion,
                           path + " has schema version " + std::to_string(schema_version_) +
                               ", older than any this build can upgrade (" +
                               std::to_string(schema::kOldestMigratableVersion) +
                               "): read it with the hybridscope version that wrote it");
  if (schema_version_ < schema::kSchemaVersion) upgrade_in_memory();
}

// An older file is read through an upgraded in-memory copy (the writer's own migration
// statements, schema.h), so that every query below is written once, for the current schema, and
// the file itself is never touched. Old files are small enough for this: they predate the
// benchmark runner's multi-run databases.
void RunDatabase::upgrade_in_memory() {
  sqlite3* memory = nullptr;
  if (sqlite3_open_v2(":memory:", &memory, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) != SQLITE_OK) {
    sqlite3_close_v2(memory);
    throw RunDatabaseError(Kind::kQuery, "cannot open an in-memory database to upgrade " + path_);
  }
  sqlite3_backup* backup = sqlite3_backup_init(memory, "main", impl_->db, "main");
  const int rc = backup ? sqlite3_backup_step(backup, -1) : SQLITE_ERROR;
  sqlite3_backup_finish(backup);
  if (rc != SQLITE_DONE) {
    const std::string message = sqlite3_errmsg(memory);
    sqlite3_close_v2(memory);
    throw RunDatabaseError(Kind::kQuery, "cannot copy " + path_ + " to upgrade it from schema version " +
                                             std::to_string(schema_version_) + ": " + message);
  }
  sqlite3_close_v2(impl_->db);
  impl_->db = memory;
  const auto exec = [&](const std::string& sql) {
    char* err = nullptr;
    if (sqlite3_exec(impl_->db, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
      const std::string message = err ? err : "unknown error";
      sqlite3_free(err);
      throw RunDatabaseError(Kind::kSchemaVersion, "cannot upgrade " + path_ + " from schema version " +
                                                       std::to_string(schema_version_) + ": " + message);
    }
  };
  const auto lacks_column = [&](const char* table, const char* column) {
    if (!has_table(impl_->db, table, path_)) return false;
    Query q(impl_->db, "SELECT COUNT(*) FROM pragma_table_info(?) WHERE name = ?", path_);
    q.bind(1, std::string(table));
    q.bind(2, std::string(column));
    return q.next() && q.int64(0) == 0;
  };
  for (const std::string& sql : schema::migration_statements(schema_version_, lacks_column)) exec(sql);
  exec(schema::create_statements());
}

RunDatabase::~RunDatabase() = default;
RunDatabase::RunDatabase(RunDatabase&&) noexcept = default;
RunDatabase& RunDatabase::operator=(RunDatabase&&) noexcept = default;

std::vector<RunSummary> RunDatabase::runs() const {
  Query q(impl_->db, run_columns() + " ORDER BY id", path_);
  std::vector<RunSummary> out;
  while (q.next()) out.push_back(read_run(q));
  return out;
}

RunSummary RunDatabase::run(std::int64_t run_id) const {
  {
    Query q(impl_->db, run_columns() + " WHERE id = ?", path_);
    q.bind(1, run_id);
    if (q.next()) return read_run(q);
  }
  std::string ids;
  for (const auto& r : runs()) ids += (ids.empty() ? "" : ", ") + std::to_string(r.id);
  throw RunDatabaseError(Kind::kUnknownRun, path_ + " has no run " + std::to_string(run_id) +
                                                (ids.empty() ? " (it holds no runs)" : " (runs: " + ids + ")"));
}

RunSummary RunDatabase::last_run() const {
  Query q(impl_->db, run_columns() + " ORDER BY id DESC LIMIT 1", path_);
  if (q.next()) return read_run(q);
  throw RunDatabaseError(Kind::kUnknownRun, path_ + " holds no runs");
}

std::string RunDatabase::config_yaml(std::int64_t run_id) const {
  Query q(impl_->db, "SELECT config_yaml FROM " + std::string(schema::kRuns) + " WHERE id = ?", path_);
  q.bind(1, run_id);
  if (q.next()) return q.text(0);
  run(run_id);  // throws kUnknownRun with the ids present
  return {};
}

std::vector<std::pair<std::string, std::string>> RunDatabase::config(std::int64_t run_id) const {
  run(run_id);  // throws kUnknownRun with the ids present
  Query q(impl_->db, "SELECT key, value FROM " + std::string(schema::kConfig) + " WHERE run_id = ? ORDER BY key", path_);
  q.bind(1, run_id);
  std::vector<std::pair<std::string, std::string>> out;
  while (q.next()) out.emplace_back(q.text(0), q.text(1));
  return out;
}

std::vector<RangeRow> RunDatabase::ranges(std::int64_t run_id) const {
  const std::string sql = "SELECT r.rank, r.tid, r.step, s.value, c.name, r.depth, r.start_ns, r.end_ns, "
                          "r.batch_size, r.context_len FROM " +
                          std::string(schema::kRanges) + " r JOIN " + schema::kStrings + " s ON s.id = r.name_id JOIN " +
                          schema::kRangeCategories +
                          " c ON c.id = r.category_id WHERE r.run_id = ? "
                          "ORDER BY r.rank, r.tid, r.start_ns, r.depth, r.id";
  Query q(impl_->db, sql, path_);
  q.bind(1, run_id);
  std::vector<RangeRow> out;
  while (q.next()) {
    RangeRow r;
    r.rank = static_cast<int>(q.int64(0));
    r.tid = q.int64(1);
    r.step = q.int64(2);
    r.name = q.text(3);
    r.category = q.text(4);
    r.depth = static_cast<int>(q.int64(5));
    r.start_ns = q.int64(6);
    r.end_ns = q.int64(7);
    r.batch_size = q.opt_int64(8);
    r.context_len = q.opt_int64(9);
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<StepMetric> RunDatabase::step_metrics(std::int64_t run_id) const {
  const std::string sql = "SELECT m.step, s.value, m.value FROM " + std::string(schema::kStepMetrics) + " m JOIN " +
                          schema::kStrings + " s ON s.id = m.name_id WHERE m.run_id = ? ORDER BY m.step, s.value";
  Query q(impl_->db, sql, path_);
  q.bind(1, run_id);
  std::vector<StepMetric> out;
  while (q.next()) out.push_back({q.int64(0), q.text(1), q.real(2)});
  return out;
}

std::vector<CommOpRow> RunDatabase::comm_ops(std::int64_t run_id) const {
  const std::string sql = "SELECT c.rank, c.step, o.value, g.value, c.group_size, c.bytes, d.value, c.start_ns, "
                          "c.end_ns, c.algbw_gbps, c.busbw_gbps, c.posted_ns, c.wait_start_ns, c.wait_end_ns FROM " +
                          std::string(schema::kCommOps) + " c JOIN " + schema::kStrings + " o ON o.id = c.op_id JOIN " +
                          schema::kStrings + " g ON g.id = c.group_id JOIN " + schema::kStrings +
                          " d ON d.id = c.dtype_id WHERE c.run_id = ? ORDER BY c.rank, c.start_ns, c.rowid";
  Query q(impl_->db, sql, path_);
  q.bind(1, run_id);
  std::vector<CommOpRow> out;
  while (q.next()) {
    CommOpRow c;
    c.rank = static_cast<int>(q.int64(0));
    c.step = q.int64(1);
    c.op = q.text(2);
    c.group = q.text(3);
    c.group_size = static_cast<int>(q.int64(4));
    c.bytes = q.int64(5);
    c.dtype = q.text(6);
    c.start_ns = q.int64(7);
    c.end_ns = q.int64(8);
    c.algbw_gbps = q.opt_real(9);
    c.busbw_gbps = q.opt_real(10);
    c.posted_ns = q.opt_int64(11);
    c.wait_start_ns = q.opt_int64(12);
    c.wait_end_ns = q.opt_int64(13);
    out.push_back(std::move(c));
  }
  return out;
}

std::vector<SwitchRow> RunDatabase::switches(std::int64_t run_id) const {
  const std::string sql = "SELECT w.id, w.rank, w.step, d.value, w.start_ns, w.end_ns, w.bytes_sent, w.bytes_received, "
                          "w.bytes_local FROM " +
                          std::string(schema::kSwitches) + " w JOIN " + schema::kStrings +
                          " d ON d.id = w.direction_id WHERE w.run_id = ? ORDER BY w.rank, w.start_ns, w.id";
  Query q(impl_->db, sql, path_);
  q.bind(1, run_id);
  std::vector<std::int64_t> ids;
  std::vector<SwitchRow> out;
  while (q.next()) {
    ids.push_back(q.int64(0));
    SwitchRow w;
    w.rank = static_cast<int>(q.int64(1));
    w.step = q.int64(2);
    w.direction = q.text(3);
    w.start_ns = q.int64(4);
    w.end_ns = q.int64(5);
    w.bytes_sent = q.int64(6);
    w.bytes_received = q.int64(7);
    w.bytes_local = q.int64(8);
    out.push_back(std::move(w));
  }
  Query c(impl_->db,
          "SELECT s.value, c.duration_ns FROM " + std::string(schema::kSwitchComponents) + " c JOIN " +
              schema::kStrings + " s ON s.id = c.name_id WHERE c.switch_id = ? ORDER BY c.rowid",
          path_);
  for (std::size_t i = 0; i < out.size(); ++i) {
    c.reset();
    c.bind(1, ids[i]);
    while (c.next()) out[i].components.emplace_back(c.text(0), c.int64(1));
  }
  return out;
}

std::vector<MemorySampleRow> RunDatabase::memory_samples(std::int64_t run_id) const {
  const std::string sql = "SELECT m.rank, m.step, m.ts_ns, p.value, m.device, m.allocated_bytes, m.reserved_bytes, "
                          "m.active_bytes, m.inactive_split_bytes, m.largest_free_block_bytes, m.peak_allocated_bytes, "
                          "m.num_alloc_retries, m.num_ooms, m.reserved_slack, m.split_fragmentation, "
                          "m.external_fragmentation FROM " +
                          std::string(schema::kMemorySamples) + " m JOIN " + schema::kStrings +
                          " p ON p.id = m.phase_id WHERE m.run_id = ? ORDER BY m.rank, m.ts_ns, m.rowid";
  Query q(impl_->db, sql, path_);
  q.bind(1, run_id);
  std::vector<MemorySampleRow> out;
  while (q.next()) {
    MemorySampleRow m;
    m.rank = static_cast<int>(q.int64(0));
    m.step = q.int64(1);
    m.ts_ns = q.int64(2);
    m.phase = q.text(3);
    m.device = static_cast<int>(q.int64(4));
    m.allocated_bytes = q.opt_int64(5);
    m.reserved_bytes = q.opt_int64(6);
    m.active_bytes = q.opt_int64(7);
    m.inactive_split_bytes = q.opt_int64(8);
    m.largest_free_block_bytes = q.opt_int64(9);
    m.peak_allocated_bytes = q.opt_int64(10);
    m.num_alloc_retries = q.opt_int64(11);
    m.num_ooms = q.opt_int64(12);
    m.reserved_slack = q.opt_real(13);
    m.split_fragmentation = q.opt_real(14);
    m.external_fragmentation = q.opt_real(15);
    out.push_back(std::move(m));
  }
  return out;
}

std::vector<KvPoolSampleRow> RunDatabase::kv_pool_samples(std::int64_t run_id) const {
  const std::string sql = "SELECT k.rank, k.step, k.ts_ns, p.value, k.num_blocks, k.blocks_used, k.shared_blocks, "
                          "k.block_size, k.num_sequences, k.tokens_stored, k.cache_bytes FROM " +
                          std::string(schema::kKvPoolSamples) + " k JOIN " + schema::kStrings +
                          " p ON p.id = k.phase_id WHERE k.run_id = ? ORDER BY k.rank, k.ts_ns, k.rowid";
  Query q(impl_->db, sql, path_);
  q.bind(1, run_id);
  std::vector<KvPoolSampleRow> out;
  while (q.next())
    out.push_back({static_cast<int>(q.int64(0)), q.int64(1), q.int64(2), q.text(3), q.int64(4), q.int64(5),
                   q.int64(6), q.int64(7), q.int64(8), q.int64(9), q.int64(10)});
  return out;
}

std::vector<GpuActivityRow> RunDatabase::gpu_activity(std::int64_t run_id) const {
  std::vector<GpuActivityRow> out;
  {
    const std::string sql = "SELECT k.rank, k.device, k.stream, k.correlation_id, k.start_ns, k.end_ns, s.value, "
                            "c.name, k.grid_x, k.grid_y, k.grid_z, k.block_x, k.block_y, k.block_z, h.value FROM " +
                            std::string(schema::kKernels) + " k JOIN " + schema::kStrings +
                            " s ON s.id = k.name_id JOIN " + schema::kStrings + " h ON h.id = k.short_name_id JOIN " +
                            schema::kKernelClasses +
                            " c ON c.id = k.class_id WHERE k.run_id = ? ORDER BY k.rank, k.start_ns, k.rowid";
    Query q(impl_->db, sql, path_);
    q.bind(1, run_id);
    while (q.next()) {
      GpuActivityRow g;
      g.kind = GpuActivityRow::Kind::kKernel;
      g.rank = static_cast<int>(q.int64(0));
      g.device = static_cast<int>(q.int64(1));
      g.stream = q.int64(2);
      g.correlation_id = q.int64(3);
      g.start_ns = q.int64(4);
      g.end_ns = q.int64(5);
      g.name = q.text(6);
      g.detail = q.text(7);
      for (int i = 0; i < 3; ++i) {
        g.grid[i] = q.int64(8 + i);
        g.block[i] = q.int64(11 + i);
      }
      g.short_name = q.text(14);
      out.push_back(std::move(g));
    }
  }
  // Copies and memsets share their columns: the kind's label names them ("Memcpy HtoD").
  const auto read_transfers = [&](const char* table, const char* kinds, const char* kind_column,
                                  GpuActivityRow::Kind kind, const std::string& prefix) {
    const std::string sql = "SELECT m.rank, m.device, m.stream, m.correlation_id, m.start_ns, m.end_ns, k.label, "
                            "m.bytes FROM " + std::string(table) + " m JOIN " + kinds + " k ON k.id = m." +
                            kind_column + " WHERE m.run_id = ? ORDER BY m.rank, m.start_ns, m.rowid";
    Query q(impl_->db, sql, path_);
    q.bind(1, run_id);
    while (q.next()) {
      GpuActivityRow g;
      g.kind = kind;
      g.rank = static_cast<int>(q.int64(0));
      g.device = static_cast<int>(q.int64(1));
      g.stream = q.int64(2);
      g.correlation_id = q.int64(3);
      g.start_ns = q.int64(4);
      g.end_ns = q.int64(5);
      g.detail = q.text(6);
      g.name = prefix + g.detail;
      g.short_name = g.name;
      g.bytes = q.int64(7);
      out.push_back(std::move(g));
    }
  };
  read_transfers(schema::kMemcpy, schema::kMemcpyKinds, "copy_kind_id", GpuActivityRow::Kind::kMemcpy, "Memcpy ");
  read_transfers(schema::kMemset, schema::kMemoryKinds, "memory_kind_id", GpuActivityRow::Kind::kMemset, "Memset ");
  return out;
}

std::vector<RuntimeApiRow> RunDatabase::runtime_api(std::int64_t run_id) const {
  const std::string sql = "SELECT a.rank, a.tid, a.correlation_id, s.value, a.start_ns, a.end_ns FROM " +
                          std::string(schema::kRuntimeApi) + " a JOIN " + schema::kStrings +
                          " s ON s.id = a.name_id WHERE a.run_id = ? ORDER BY a.rank, a.start_ns, a.rowid";
  Query q(impl_->db, sql, path_);
  q.bind(1, run_id);
  std::vector<RuntimeApiRow> out;
  while (q.next()) out.push_back({static_cast<int>(q.int64(0)), q.int64(1), q.int64(2), q.text(3), q.int64(4), q.int64(5)});
  return out;
}

}  // namespace hs::reports
