// run_database.cpp — the read side of the run database. Every table's reader is generated from
// probes/schema.h's description (table_reader.h): the SELECT from the columns its fields name,
// each row filled by column name (table_rows.h), so that a column added to or moved in the schema
// cannot be misread here, and a renamed one fails at the first read, not in a user's report.
#include "hybridscope/reports/run_database.h"

#include <sqlite3.h>

#include <filesystem>
#include <utility>

#include "hybridscope/probes/schema.h"
#include "sqlite_query.h"
#include "table_rows.h"

namespace hs::reports {

namespace schema = hs::probes::schema;
using Kind = RunDatabaseError::Kind;
using namespace detail;  // Query, table_reader, field and the row field lists (table_rows.h)

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

bool has_table(sqlite3* db, const char* table, const std::string& path) {
  Query q(db, "SELECT COUNT(*) AS n FROM sqlite_master WHERE type = 'table' AND name = ?", path);
  q.bind(1, std::string(table));
  return q.next() && q.int64(q.column("n")) > 0;
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
    if (q.next()) schema_version_ = static_cast<int>(q.int64(q.column("user_version")));
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
    Query q(impl_->db, "SELECT COUNT(*) AS n FROM pragma_table_info(?) WHERE name = ?", path_);
    q.bind(1, std::string(table));
    q.bind(2, std::string(column));
    return q.next() && q.int64(q.column("n")) == 0;
  };
  for (const std::string& sql : schema::migration_statements(schema_version_, lacks_column)) exec(sql);
  exec(schema::create_statements());
}

RunDatabase::~RunDatabase() = default;
RunDatabase::RunDatabase(RunDatabase&&) noexcept = default;
RunDatabase& RunDatabase::operator=(RunDatabase&&) noexcept = default;

std::vector<RunSummary> RunDatabase::runs() const {
  return table_reader<RunSummary>(impl_->db, schema::kRunsTable, "ORDER BY t.id", path_, run_fields()).all();
}

RunSummary RunDatabase::run(std::int64_t run_id) const {
  {
    auto reader = table_reader<RunSummary>(impl_->db, schema::kRunsTable, "WHERE t.id = ?", path_, run_fields());
    reader.bind(1, run_id);
    RunSummary r;
    if (reader.next(r)) return r;
  }
  std::string ids;
  for (const auto& r : runs()) ids += (ids.empty() ? "" : ", ") + std::to_string(r.id);
  throw RunDatabaseError(Kind::kUnknownRun, path_ + " has no run " + std::to_string(run_id) +
                                                (ids.empty() ? " (it holds no runs)" : " (runs: " + ids + ")"));
}

RunSummary RunDatabase::last_run() const {
  auto reader = table_reader<RunSummary>(impl_->db, schema::kRunsTable, "ORDER BY t.id DESC LIMIT 1", path_, run_fields());
  RunSummary r;
  if (reader.next(r)) return r;
  throw RunDatabaseError(Kind::kUnknownRun, path_ + " holds no runs");
}

std::string RunDatabase::config_yaml(std::int64_t run_id) const {
  Query q(impl_->db, select_statement(schema::kRunsTable, {"config_yaml"}) + " WHERE t.id = ?", path_);
  q.bind(1, run_id);
  if (q.next()) return q.text(q.column("config_yaml"));
  run(run_id);  // throws kUnknownRun with the ids present
  return {};
}

std::vector<std::pair<std::string, std::string>> RunDatabase::config(std::int64_t run_id) const {
  run(run_id);  // throws kUnknownRun with the ids present
  auto reader = table_reader<std::pair<std::string, std::string>>(impl_->db, schema::kConfigTable,
                                                                  "WHERE t.run_id = ? ORDER BY t.key", path_, config_fields());
  reader.bind(1, run_id);
  return reader.all();
}

std::vector<RangeRow> RunDatabase::ranges(std::int64_t run_id) const {
  auto reader = table_reader<RangeRow>(impl_->db, schema::kRangesTable,
                                       "WHERE t.run_id = ? ORDER BY t.rank, t.tid, t.start_ns, t.depth, t.id", path_,
                                       range_fields());
  reader.bind(1, run_id);
  return reader.all();
}

std::vector<StepMetric> RunDatabase::step_metrics(std::int64_t run_id) const {
  auto reader = table_reader<StepMetric>(impl_->db, schema::kStepMetricsTable,
                                         "WHERE t.run_id = ? ORDER BY t.step, " + reference_alias("name_id") + ".value",
                                         path_, step_metric_fields());
  reader.bind(1, run_id);
  return reader.all();
}

std::vector<CommOpRow> RunDatabase::comm_ops(std::int64_t run_id) const {
  auto reader = table_reader<CommOpRow>(impl_->db, schema::kCommOpsTable,
                                        "WHERE t.run_id = ? ORDER BY t.rank, t.start_ns, t.rowid", path_, comm_op_fields());
  reader.bind(1, run_id);
  return reader.all();
}

std::vector<SwitchRow> RunDatabase::switches(std::int64_t run_id) const {
  std::vector<std::int64_t> ids;  // each row's switches.id, for its components
  auto reader = table_reader<SwitchRow>(
      impl_->db, schema::kSwitchesTable, "WHERE t.run_id = ? ORDER BY t.rank, t.start_ns, t.id", path_,
      std::tuple_cat(switch_fields(), std::make_tuple(field_with<std::int64_t, SwitchRow>(
                                          "id", [&ids](SwitchRow&, std::int64_t id) { ids.push_back(id); }))));
  reader.bind(1, run_id);
  std::vector<SwitchRow> out = reader.all();
  auto components = table_reader<std::pair<std::string, std::int64_t>>(
      impl_->db, schema::kSwitchComponentsTable, "WHERE t.switch_id = ? ORDER BY t.rowid", path_, switch_component_fields());
  for (std::size_t i = 0; i < out.size(); ++i) {
    components.reset();
    components.bind(1, ids[i]);
    out[i].components = components.all();
  }
  return out;
}

std::vector<MemorySampleRow> RunDatabase::memory_samples(std::int64_t run_id) const {
  auto reader = table_reader<MemorySampleRow>(impl_->db, schema::kMemorySamplesTable,
                                              "WHERE t.run_id = ? ORDER BY t.rank, t.ts_ns, t.rowid", path_,
                                              memory_sample_fields());
  reader.bind(1, run_id);
  return reader.all();
}

std::vector<KvPoolSampleRow> RunDatabase::kv_pool_samples(std::int64_t run_id) const {
  auto reader = table_reader<KvPoolSampleRow>(impl_->db, schema::kKvPoolSamplesTable,
                                              "WHERE t.run_id = ? ORDER BY t.rank, t.ts_ns, t.rowid", path_,
                                              kv_pool_sample_fields());
  reader.bind(1, run_id);
  return reader.all();
}

std::vector<GpuActivityRow> RunDatabase::gpu_activity(std::int64_t run_id) const {
  using G = GpuActivityRow;
  constexpr const char* kByStart = "WHERE t.run_id = ? ORDER BY t.rank, t.start_ns, t.rowid";
  std::vector<GpuActivityRow> out;
  {
    const auto dimension = [](const char* column, std::int64_t(G::*array)[3], int i) {
      return field_with<std::int64_t, G>(column, [array, i](G& g, std::int64_t v) { (g.*array)[i] = v; });
    };
    auto reader = table_reader<G>(
        impl_->db, schema::kKernelsTable, kByStart, path_,
        std::tuple_cat(gpu_activity_fields(),
                       std::make_tuple(field("name_id.value", &G::name), field("class_id.name", &G::detail),
                                       field("short_name_id.value", &G::short_name), dimension("grid_x", &G::grid, 0),
                                       dimension("grid_y", &G::grid, 1), dimension("grid_z", &G::grid, 2),
                                       dimension("block_x", &G::block, 0), dimension("block_y", &G::block, 1),
                                       dimension("block_z", &G::block, 2))));
    reader.bind(1, run_id);
    G g;
    while (reader.next(g)) {
      g.kind = G::Kind::kKernel;
      out.push_back(std::exchange(g, G{}));
    }
  }
  // Copies and memsets share their columns: the kind's label names them ("Memcpy HtoD").
  const auto read_transfers = [&](const schema::Table& table, const std::string& kind_column, G::Kind kind,
                                  const std::string& prefix) {
    auto reader = table_reader<G>(impl_->db, table, kByStart, path_,
                                  std::tuple_cat(gpu_activity_fields(), std::make_tuple(field(kind_column + ".label", &G::detail),
                                                                                        field("bytes", &G::bytes))));
    reader.bind(1, run_id);
    G g;
    while (reader.next(g)) {
      g.kind = kind;
      g.name = prefix + g.detail;
      g.short_name = g.name;
      out.push_back(std::exchange(g, G{}));
    }
  };
  read_transfers(schema::kMemcpyTable, "copy_kind_id", G::Kind::kMemcpy, "Memcpy ");
  read_transfers(schema::kMemsetTable, "memory_kind_id", G::Kind::kMemset, "Memset ");
  return out;
}

std::vector<RuntimeApiRow> RunDatabase::runtime_api(std::int64_t run_id) const {
  auto reader = table_reader<RuntimeApiRow>(impl_->db, schema::kRuntimeApiTable,
                                            "WHERE t.run_id = ? ORDER BY t.rank, t.start_ns, t.rowid", path_,
                                            runtime_api_fields());
  reader.bind(1, run_id);
  return reader.all();
}

}  // namespace hs::reports
