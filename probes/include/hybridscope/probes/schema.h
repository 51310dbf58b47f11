// schema.h — the one place that knows the run database's schema (SQLite). The writer
// (recorder.cpp) and every reader (reports, viewer, tests) use these names. Bump kSchemaVersion
// on any change and document it in docs/schema.md.
#pragma once

namespace hs::probes::schema {

/// PRAGMA user_version of databases this build writes.
inline constexpr int kSchemaVersion = 4;
/// Oldest version the recorder upgrades in place (kMigrateToV2, kMigrateToV4; v3 only adds
/// tables, which kCreateStatements creates); older or newer ones are refused.
inline constexpr int kOldestMigratableVersion = 1;

inline constexpr const char* kRuns = "runs";
inline constexpr const char* kConfig = "config";
inline constexpr const char* kStrings = "strings";
inline constexpr const char* kRangeCategories = "range_categories";
inline constexpr const char* kRanges = "ranges";
inline constexpr const char* kStepMetrics = "step_metrics";
inline constexpr const char* kMemorySamples = "memory_samples";
inline constexpr const char* kKvPoolSamples = "kv_pool_samples";
inline constexpr const char* kCommOps = "comm_ops";
inline constexpr const char* kSwitches = "switches";
inline constexpr const char* kSwitchComponents = "switch_components";

/// Statements that create the current schema (idempotent).
inline constexpr const char* kCreateStatements = R"sql(
CREATE TABLE IF NOT EXISTS runs (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  command_line TEXT NOT NULL,
  config_yaml TEXT NOT NULL,
  host TEXT NOT NULL,
  pid INTEGER NOT NULL,
  world_size INTEGER NOT NULL,
  hybridscope_version TEXT NOT NULL,
  torch_version TEXT NOT NULL,
  start_unix_ns INTEGER NOT NULL,
  end_unix_ns INTEGER,
  clock_offset_ns INTEGER NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('running', 'completed', 'failed', 'killed')),
  status_message TEXT,
  dropped_records INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS config (
  run_id INTEGER NOT NULL REFERENCES runs(id),
  key TEXT NOT NULL,
  value TEXT NOT NULL,
  PRIMARY KEY (run_id, key)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS strings (
  id INTEGER PRIMARY KEY,
  value TEXT NOT NULL UNIQUE
);
CREATE TABLE IF NOT EXISTS range_categories (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,
  label TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS ranges (
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs(id),
  rank INTEGER NOT NULL,
  tid INTEGER NOT NULL,
  step INTEGER NOT NULL,
  name_id INTEGER NOT NULL REFERENCES strings(id),
  category_id INTEGER NOT NULL REFERENCES range_categories(id),
  depth INTEGER NOT NULL,
  start_ns INTEGER NOT NULL,
  end_ns INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS ranges_by_run_step ON ranges(run_id, step, rank);
CREATE TABLE IF NOT EXISTS step_metrics (
  run_id INTEGER NOT NULL REFERENCES runs(id),
  step INTEGER NOT NULL,
  name_id INTEGER NOT NULL REFERENCES strings(id),
  value REAL NOT NULL,
  PRIMARY KEY (run_id, step, name_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS memory_samples (
  run_id INTEGER NOT NULL REFERENCES runs(id),
  rank INTEGER NOT NULL,
  step INTEGER NOT NULL,
  ts_ns INTEGER NOT NULL,
  phase_id INTEGER NOT NULL REFERENCES strings(id),
  device INTEGER NOT NULL,
  allocated_bytes INTEGER,
  reserved_bytes INTEGER,
  active_bytes INTEGER,
  inactive_split_bytes INTEGER,
  largest_free_block_bytes INTEGER,
  peak_allocated_bytes INTEGER,
  num_allocs INTEGER,
  num_alloc_retries INTEGER,
  num_ooms INTEGER,
  reserved_slack REAL,
  split_fragmentation REAL,
  external_fragmentation REAL
);
CREATE INDEX IF NOT EXISTS memory_samples_by_run ON memory_samples(run_id, rank, ts_ns);
CREATE TABLE IF NOT EXISTS kv_pool_samples (
  run_id INTEGER NOT NULL REFERENCES runs(id),
  rank INTEGER NOT NULL,
  step INTEGER NOT NULL,
  ts_ns INTEGER NOT NULL,
  phase_id INTEGER NOT NULL REFERENCES strings(id),
  num_blocks INTEGER NOT NULL,
  block_size INTEGER NOT NULL,
  blocks_used INTEGER NOT NULL,
  shared_blocks INTEGER NOT NULL,
  num_sequences INTEGER NOT NULL,
  tokens_stored INTEGER NOT NULL,
  token_capacity_used INTEGER NOT NULL,
  cache_bytes INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS kv_pool_samples_by_run ON kv_pool_samples(run_id, rank, ts_ns);
CREATE TABLE IF NOT EXISTS comm_ops (
  run_id INTEGER NOT NULL REFERENCES runs(id),
  rank INTEGER NOT NULL,
  step INTEGER NOT NULL,
  op_id INTEGER NOT NULL REFERENCES strings(id),
  group_id INTEGER NOT NULL REFERENCES strings(id),
  group_size INTEGER NOT NULL,
  bytes INTEGER NOT NULL,
  dtype_id INTEGER NOT NULL REFERENCES strings(id),
  start_ns INTEGER NOT NULL,
  end_ns INTEGER NOT NULL,
  algbw_gbps REAL,
  busbw_gbps REAL
);
CREATE INDEX IF NOT EXISTS comm_ops_by_run ON comm_ops(run_id, rank, start_ns);
CREATE TABLE IF NOT EXISTS switches (
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs(id),
  rank INTEGER NOT NULL,
  step INTEGER NOT NULL,
  direction_id INTEGER NOT NULL REFERENCES strings(id),
  start_ns INTEGER NOT NULL,
  end_ns INTEGER NOT NULL,
  bytes_sent INTEGER NOT NULL,
  bytes_received INTEGER NOT NULL,
  bytes_local INTEGER NOT NULL,
  memory_before_bytes INTEGER,
  memory_after_bytes INTEGER,
  peak_memory_bytes INTEGER
);
CREATE INDEX IF NOT EXISTS switches_by_run_step ON switches(run_id, step, rank);
CREATE TABLE IF NOT EXISTS switch_components (
  switch_id INTEGER NOT NULL REFERENCES switches(id),
  name_id INTEGER NOT NULL REFERENCES strings(id),
  duration_ns INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS switch_components_by_switch ON switch_components(switch_id);
)sql";

/// v1 -> v2: runs.dropped_records (records the recorder dropped because its queue was full).
inline constexpr const char* kMigrateToV2 =
    "ALTER TABLE runs ADD COLUMN dropped_records INTEGER NOT NULL DEFAULT 0";

/// v3 -> v4: the switch's memory columns say what they hold (live bytes at the edges) and the
/// switch gains its true peak.
inline constexpr const char* kMigrateToV4 = R"sql(
ALTER TABLE switches RENAME COLUMN peak_memory_before TO memory_before_bytes;
ALTER TABLE switches RENAME COLUMN peak_memory_after TO memory_after_bytes;
ALTER TABLE switches ADD COLUMN peak_memory_bytes INTEGER;
)sql";

}  // namespace hs::probes::schema
