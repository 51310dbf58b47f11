// schema.h — the one place that knows the run database's schema (SQLite): every table described
// once, as data (name, columns with their SQL types and constraints, primary key, indexes), and the
// SQL generated from that description — the CREATE statements, the writer's INSERT statements and
// the column lists that merge copies. The writer (probes/src/sqlite_writer.cpp), merge
// (probes/src/merge.cpp) and every reader (reports, viewer, tests) use these names.
//
// Header-only and free of SQLite: the readers get it through the hs::schema target alone. What it
// is not: a query builder; analytical SELECTs stay hand-written where they are used.
//
// Changing a table: edit its description below, bump kSchemaVersion, add an in-place migration
// (kMigrateToV*, run by probes/src/run_file.cpp) and document it in docs/schema.md.
// tests/probes/schema_test.cpp checks that a fresh database, the writer and merge all follow the
// description.
#pragma once

#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

namespace hs::probes::schema {

/// PRAGMA user_version of databases this build writes.
inline constexpr int kSchemaVersion = 11;
/// Oldest version opened files are upgraded from in place (kMigrateToV2, kMigrateToV4,
/// kMigrateToV5*; v3, v4 and v6 also add tables, which create_statements() creates); older or newer
/// ones are refused.
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
// v4: GPU activity from the CUPTI collector (hs_cupti), Nsight Systems' CUPTI_ACTIVITY_KIND_* shape.
inline constexpr const char* kKernels = "kernels";
inline constexpr const char* kMemcpy = "memcpy";
inline constexpr const char* kMemset = "memset";
inline constexpr const char* kRuntimeApi = "runtime_api";
inline constexpr const char* kKernelClasses = "kernel_classes";
inline constexpr const char* kMemcpyKinds = "memcpy_kinds";
inline constexpr const char* kMemoryKinds = "memory_kinds";
inline constexpr const char* kExternalCorrelations = "external_correlations";
inline constexpr const char* kCorrelationRanges = "correlation_ranges";
inline constexpr const char* kCuptiOverhead = "cupti_overhead";
inline constexpr const char* kCollectorStats = "collector_stats";
inline constexpr const char* kRanks = "ranks";
// v10: GPU activity at any scale -- aggregates the recorder keeps of every kernel, copy and memset
// (the raw tables above hold only the steps asked for: RecorderOptions::gpu, docs/schema.md).
inline constexpr const char* kKernelStats = "kernel_stats";
inline constexpr const char* kStreamBusy = "stream_busy";
// v6: benchmark matrices (`hybridscope bench`): the spec, its cells and every run of a cell, with
// the environment it ran in. The runs themselves are ordinary runs of this file.
inline constexpr const char* kMatrices = "matrices";
inline constexpr const char* kMatrixAxes = "matrix_axes";
inline constexpr const char* kMatrixCells = "matrix_cells";
inline constexpr const char* kMatrixRuns = "matrix_runs";

/// SQLite column types (the declared type, as PRAGMA table_info reports it).
inline constexpr const char* kInteger = "INTEGER";
inline constexpr const char* kReal = "REAL";
inline constexpr const char* kText = "TEXT";

/// Column flags.
inline constexpr unsigned kNotNull = 1u;     // NOT NULL
inline constexpr unsigned kUnique = 2u;      // UNIQUE
inline constexpr unsigned kPrimaryKey = 4u;  // INTEGER PRIMARY KEY (the rowid)
inline constexpr unsigned kAutoId = 8u;      // a primary key that SQLite assigns: writers leave it out

struct Column {
  const char* name;
  const char* type;  // kInteger | kReal | kText
  unsigned flags = 0;
  const char* references = nullptr;     // the table whose `id` this column holds; nullptr: none
  const char* default_value = nullptr;  // SQL literal; nullptr: none
  const char* check = nullptr;          // CHECK expression; nullptr: none

  constexpr bool not_null() const { return (flags & kNotNull) != 0; }
  constexpr bool primary_key() const { return (flags & kPrimaryKey) != 0; }
  constexpr bool auto_id() const { return (flags & kAutoId) != 0; }
};

struct Index {
  const char* name;
  const char* columns;  // "run_id, step, rank"
};

/// A constant array seen through a pointer and a size (C++17 has no std::span).
template <typename T>
struct List {
  const T* items = nullptr;
  std::size_t size = 0;
  constexpr List() = default;
  template <std::size_t N>
  constexpr List(const T (&array)[N]) : items(array), size(N) {}  // NOLINT(google-explicit-constructor)
  constexpr const T* begin() const { return items; }
  constexpr const T* end() const { return items + size; }
  constexpr const T& operator[](std::size_t i) const { return items[i]; }
};

namespace detail {
constexpr bool same(const char* a, const char* b) {
  while (*a && *a == *b) ++a, ++b;
  return *a == *b;
}
}  // namespace detail

struct Table {
  const char* name;
  List<Column> columns;
  const char* primary_key = nullptr;  // a composite PRIMARY KEY ("run_id, key"); nullptr: none
  bool without_rowid = false;
  List<Index> indexes = {};

  /// The column's position in `columns`; -1 when the table has no such column.
  constexpr int find(const char* column) const {
    for (std::size_t i = 0; i < columns.size; ++i)
      if (detail::same(columns[i].name, column)) return static_cast<int>(i);
    return -1;
  }
  constexpr bool has(const char* column) const { return find(column) >= 0; }
  /// A per-rank table: its rows carry (run_id, rank), and merge copies them from the rank files.
  constexpr bool per_rank() const { return has("run_id") && has("rank"); }
};

// The tables, in creation order (a table after those it references). See docs/schema.md for
// what each column holds.
inline constexpr Column kRunsColumns[] = {
    {"id", kInteger, kPrimaryKey},
    {"name", kText, kNotNull},
    {"command_line", kText, kNotNull},
    {"config_yaml", kText, kNotNull},
    {"host", kText, kNotNull},
    {"pid", kInteger, kNotNull},
    {"world_size", kInteger, kNotNull},
    {"hybridscope_version", kText, kNotNull},
    {"torch_version", kText, kNotNull},
    {"start_unix_ns", kInteger, kNotNull},
    {"end_unix_ns", kInteger, 0},
    {"clock_offset_ns", kInteger, kNotNull},
    {"status", kText, kNotNull, nullptr, nullptr, "status IN ('running', 'completed', 'failed', 'killed')"},
    {"status_message", kText, 0},
    {"dropped_records", kInteger, kNotNull, nullptr, "0"},
    {"write_errors", kInteger, kNotNull, nullptr, "0"},  // v5
    // v11: where the records come from: "hybridscope" (this recorder) or an importer's source
    // ("kineto", "verl-log"; docs/importing.md).
    {"source", kText, kNotNull, nullptr, "'hybridscope'"},
};
inline constexpr Column kConfigColumns[] = {
    {"run_id", kInteger, kNotNull, kRuns},
    {"key", kText, kNotNull},
    {"value", kText, kNotNull},
};
inline constexpr Column kStringsColumns[] = {
    {"id", kInteger, kPrimaryKey | kAutoId},
    {"value", kText, kNotNull | kUnique},
};
inline constexpr Column kRangeCategoriesColumns[] = {
    {"id", kInteger, kPrimaryKey},
    {"name", kText, kNotNull | kUnique},
    {"label", kText, kNotNull},
};
inline constexpr Column kRangesColumns[] = {
    {"id", kInteger, kPrimaryKey | kAutoId},
    {"run_id", kInteger, kNotNull, kRuns},
    {"rank", kInteger, kNotNull},
    {"tid", kInteger, kNotNull},
    {"step", kInteger, kNotNull},
    {"name_id", kInteger, kNotNull, kStrings},
    {"category_id", kInteger, kNotNull, kRangeCategories},
    {"depth", kInteger, kNotNull},
    {"start_ns", kInteger, kNotNull},
    {"end_ns", kInteger, kNotNull},
    {"batch_size", kInteger, 0},   // v8: optional payload (NULL: none)
    {"context_len", kInteger, 0},  // v8
};
inline constexpr Index kRangesIndexes[] = {
    {"ranges_by_run_step", "run_id, step, rank"},
    // v10: the join from correlation_ranges (a kernel's range) to its ranges row.
    {"ranges_by_thread", "run_id, rank, tid, start_ns"},
};
inline constexpr Column kStepMetricsColumns[] = {
    {"run_id", kInteger, kNotNull, kRuns},
    {"step", kInteger, kNotNull},
    {"name_id", kInteger, kNotNull, kStrings},
    {"value", kReal, kNotNull},
};
inline constexpr Column kMemorySamplesColumns[] = {
    {"run_id", kInteger, kNotNull, kRuns},
    {"rank", kInteger, kNotNull},
    {"step", kInteger, kNotNull},
    {"ts_ns", kInteger, kNotNull},
    {"phase_id", kInteger, kNotNull, kStrings},
    {"device", kInteger, kNotNull},
    {"allocated_bytes", kInteger, 0},
    {"reserved_bytes", kInteger, 0},
    {"active_bytes", kInteger, 0},
    {"inactive_split_bytes", kInteger, 0},
    {"largest_free_block_bytes", kInteger, 0},
    {"peak_allocated_bytes", kInteger, 0},
    {"num_allocs", kInteger, 0},
    {"num_alloc_retries", kInteger, 0},
    {"num_ooms", kInteger, 0},
    {"reserved_slack", kReal, 0},
    {"split_fragmentation", kReal, 0},
    {"external_fragmentation", kReal, 0},
};
inline constexpr Index kMemorySamplesIndexes[] = {
    {"memory_samples_by_run", "run_id, rank, ts_ns"},
};
inline constexpr Column kKvPoolSamplesColumns[] = {
    {"run_id", kInteger, kNotNull, kRuns},
    {"rank", kInteger, kNotNull},
    {"step", kInteger, kNotNull},
    {"ts_ns", kInteger, kNotNull},
    {"phase_id", kInteger, kNotNull, kStrings},
    {"num_blocks", kInteger, kNotNull},
    {"block_size", kInteger, kNotNull},
    {"blocks_used", kInteger, kNotNull},
    {"shared_blocks", kInteger, kNotNull},
    {"num_sequences", kInteger, kNotNull},
    {"tokens_stored", kInteger, kNotNull},
    {"token_capacity_used", kInteger, kNotNull},
    {"cache_bytes", kInteger, kNotNull},
};
inline constexpr Index kKvPoolSamplesIndexes[] = {
    {"kv_pool_samples_by_run", "run_id, rank, ts_ns"},
};
inline constexpr Column kCommOpsColumns[] = {
    {"run_id", kInteger, kNotNull, kRuns},
    {"rank", kInteger, kNotNull},
    {"step", kInteger, kNotNull},
    {"op_id", kInteger, kNotNull, kStrings},
    {"group_id", kInteger, kNotNull, kStrings},
    {"group_size", kInteger, kNotNull},
    {"bytes", kInteger, kNotNull},
    {"dtype_id", kInteger, kNotNull, kStrings},
    {"start_ns", kInteger, kNotNull},
    {"end_ns", kInteger, kNotNull},
    {"algbw_gbps", kReal, 0},
    {"busbw_gbps", kReal, 0},
    // v9: an asynchronous collective -- when the call that issued it returned, and the issuing
    // thread's wait for it: the thread was blocked on it from start_ns to posted_ns and from
    // wait_start_ns to wait_end_ns. NULL: synchronous (blocked from start_ns to end_ns).
    {"posted_ns", kInteger, 0},
    {"wait_start_ns", kInteger, 0},
    {"wait_end_ns", kInteger, 0},
};
inline constexpr Index kCommOpsIndexes[] = {
    {"comm_ops_by_run", "run_id, rank, start_ns"},
};
inline constexpr Column kSwitchesColumns[] = {
    {"id", kInteger, kPrimaryKey | kAutoId},
    {"run_id", kInteger, kNotNull, kRuns},
    {"rank", kInteger, kNotNull},
    {"step", kInteger, kNotNull},
    {"direction_id", kInteger, kNotNull, kStrings},
    {"start_ns", kInteger, kNotNull},
    {"end_ns", kInteger, kNotNull},
    {"bytes_sent", kInteger, kNotNull},
    {"bytes_received", kInteger, kNotNull},
    {"bytes_local", kInteger, kNotNull},
    {"memory_before_bytes", kInteger, 0},
    {"memory_after_bytes", kInteger, 0},
    {"peak_memory_bytes", kInteger, 0},
};
inline constexpr Index kSwitchesIndexes[] = {
    {"switches_by_run_step", "run_id, step, rank"},
};
inline constexpr Column kSwitchComponentsColumns[] = {
    {"switch_id", kInteger, kNotNull, kSwitches},
    {"name_id", kInteger, kNotNull, kStrings},
    {"duration_ns", kInteger, kNotNull},
};
inline constexpr Index kSwitchComponentsIndexes[] = {
    {"switch_components_by_switch", "switch_id"},
};
inline constexpr Column kKernelClassesColumns[] = {
    {"id", kInteger, kPrimaryKey},
    {"name", kText, kNotNull | kUnique},
    {"label", kText, kNotNull},
};
inline constexpr Column kMemcpyKindsColumns[] = {
    {"id", kInteger, kPrimaryKey},
    {"name", kText, kNotNull | kUnique},
    {"label", kText, kNotNull},
};
inline constexpr Column kMemoryKindsColumns[] = {
    {"id", kInteger, kPrimaryKey},
    {"name", kText, kNotNull | kUnique},
    {"label", kText, kNotNull},
};
inline constexpr Column kKernelsColumns[] = {
    {"run_id", kInteger, kNotNull, kRuns},
    {"rank", kInteger, kNotNull},
    {"device", kInteger, kNotNull},
    {"context", kInteger, kNotNull},
    {"stream", kInteger, kNotNull},
    {"correlation_id", kInteger, kNotNull},
    {"start_ns", kInteger, kNotNull},
    {"end_ns", kInteger, kNotNull},
    {"name_id", kInteger, kNotNull, kStrings},
    {"short_name_id", kInteger, kNotNull, kStrings},
    {"class_id", kInteger, kNotNull, kKernelClasses},
    {"grid_x", kInteger, kNotNull},
    {"grid_y", kInteger, kNotNull},
    {"grid_z", kInteger, kNotNull},
    {"block_x", kInteger, kNotNull},
    {"block_y", kInteger, kNotNull},
    {"block_z", kInteger, kNotNull},
    {"registers_per_thread", kInteger, kNotNull},
    {"static_shared_memory", kInteger, kNotNull},
    {"dynamic_shared_memory", kInteger, kNotNull},
};
inline constexpr Index kKernelsIndexes[] = {
    {"kernels_by_run_start", "run_id, rank, start_ns"},
    {"kernels_by_correlation", "run_id, rank, correlation_id"},
};
inline constexpr Column kMemcpyColumns[] = {
    {"run_id", kInteger, kNotNull, kRuns},
    {"rank", kInteger, kNotNull},
    {"device", kInteger, kNotNull},
    {"context", kInteger, kNotNull},
    {"stream", kInteger, kNotNull},
    {"correlation_id", kInteger, kNotNull},
    {"start_ns", kInteger, kNotNull},
    {"end_ns", kInteger, kNotNull},
    {"bytes", kInteger, kNotNull},
    {"copy_kind_id", kInteger, kNotNull, kMemcpyKinds},
    {"src_kind_id", kInteger, kNotNull, kMemoryKinds},
    {"dst_kind_id", kInteger, kNotNull, kMemoryKinds},
};
inline constexpr Index kMemcpyIndexes[] = {
    {"memcpy_by_run_start", "run_id, rank, start_ns"},
    {"memcpy_by_correlation", "run_id, rank, correlation_id"},
};
inline constexpr Column kMemsetColumns[] = {
    {"run_id", kInteger, kNotNull, kRuns},
    {"rank", kInteger, kNotNull},
    {"device", kInteger, kNotNull},
    {"context", kInteger, kNotNull},
    {"stream", kInteger, kNotNull},
    {"correlation_id", kInteger, kNotNull},
    {"start_ns", kInteger, kNotNull},
    {"end_ns", kInteger, kNotNull},
    {"bytes", kInteger, kNotNull},
    {"value", kInteger, kNotNull},
    {"memory_kind_id", kInteger, kNotNull, kMemoryKinds},
};
inline constexpr Index kMemsetIndexes[] = {
    {"memset_by_run_start", "run_id, rank, start_ns"},
    {"memset_by_correlation", "run_id, rank, correlation_id"},
};
inline constexpr Column kRuntimeApiColumns[] = {
    {"run_id", kInteger, kNotNull, kRuns},
    {"rank", kInteger, kNotNull},
    {"tid", kInteger, kNotNull},
    {"correlation_id", kInteger, kNotNull},
    {"cbid", kInteger, kNotNull},
    {"name_id", kInteger, kNotNull, kStrings},
    {"start_ns", kInteger, kNotNull},
    {"end_ns", kInteger, kNotNull},
    {"return_value", kInteger, kNotNull},
};
inline constexpr Index kRuntimeApiIndexes[] = {
    {"runtime_api_by_run_start", "run_id, rank, start_ns"},
    {"runtime_api_by_correlation", "run_id, rank, correlation_id"},
};
inline constexpr Column kExternalCorrelationsColumns[] = {
    {"run_id", kInteger, kNotNull, kRuns},
    {"rank", kInteger, kNotNull},
    {"correlation_id", kInteger, kNotNull},
    {"external_id", kInteger, kNotNull},
};
inline constexpr Index kExternalCorrelationsIndexes[] = {
    {"external_correlations_by_correlation", "run_id, rank, correlation_id"},
};
inline constexpr Column kCorrelationRangesColumns[] = {
    {"run_id", kInteger, kNotNull, kRuns},
    {"rank", kInteger, kNotNull},
    {"external_id", kInteger, kNotNull},
    {"tid", kInteger, kNotNull},
    {"depth", kInteger, kNotNull},
    {"start_ns", kInteger, kNotNull},
    {"name_id", kInteger, kNotNull, kStrings},
};
inline constexpr Column kCuptiOverheadColumns[] = {
    {"run_id", kInteger, kNotNull, kRuns},
    {"rank", kInteger, kNotNull},
    {"kind_id", kInteger, kNotNull, kStrings},
    {"start_ns", kInteger, kNotNull},
    {"end_ns", kInteger, kNotNull},
};
inline constexpr Index kCuptiOverheadIndexes[] = {
    {"cupti_overhead_by_run", "run_id, rank, start_ns"},
};
inline constexpr Column kCollectorStatsColumns[] = {
    {"run_id", kInteger, kNotNull, kRuns},
    {"rank", kInteger, kNotNull},
    {"ts_ns", kInteger, kNotNull},
    {"status_id", kInteger, kNotNull, kStrings},
    {"buffers_requested", kInteger, kNotNull},
    {"buffers_refused", kInteger, kNotNull},
    {"buffers_completed", kInteger, kNotNull},
    {"records", kInteger, kNotNull},
    {"dropped_records", kInteger, kNotNull},
    {"peak_buffer_bytes", kInteger, kNotNull},
};
inline constexpr Index kCollectorStatsIndexes[] = {
    {"collector_stats_by_run", "run_id, rank, ts_ns"},
};
// v10: per (step, range, kernel name): what every kernel, copy and memset did, aggregated by the
// recorder before the writer (probes/src/gpu_aggregator.cpp), so a run of millions of kernels
// stays a few thousand rows. Copies and memsets are named "Memcpy <copy kind>" and "Memset
// <memory kind>" with class memory, as the reports name them.
inline constexpr Column kKernelStatsColumns[] = {
    {"run_id", kInteger, kNotNull, kRuns},
    {"rank", kInteger, kNotNull},
    {"step", kInteger, kNotNull},         // the step current when the record started (Recorder::set_step)
    {"external_id", kInteger, kNotNull},  // -> correlation_ranges.external_id: the range that launched it; 0: none
    {"name_id", kInteger, kNotNull, kStrings},
    {"short_name_id", kInteger, kNotNull, kStrings},
    {"class_id", kInteger, kNotNull, kKernelClasses},
    {"count", kInteger, kNotNull},
    {"total_ns", kInteger, kNotNull},  // sum of end_ns - start_ns
    {"min_ns", kInteger, kNotNull},
    {"max_ns", kInteger, kNotNull},
    {"bytes", kInteger, kNotNull},     // copies and memsets: bytes moved or set; kernels 0
    {"launched", kInteger, kNotNull},  // records whose launching runtime API call was seen
    {"launch_first_ns", kInteger, 0},  // earliest start of those calls; NULL when launched = 0
    {"launch_last_ns", kInteger, 0},   // latest end of those calls
};
inline constexpr Index kKernelStatsIndexes[] = {
    {"kernel_stats_by_range", "run_id, rank, external_id"},
};
// v10: per (step, device, stream): how long the stream was busy (the union of its kernels, copies
// and memsets, each placed in the step current at its start).
inline constexpr Column kStreamBusyColumns[] = {
    {"run_id", kInteger, kNotNull, kRuns},
    {"rank", kInteger, kNotNull},
    {"step", kInteger, kNotNull},
    {"device", kInteger, kNotNull},
    {"stream", kInteger, kNotNull},
    {"activities", kInteger, kNotNull},  // kernels, copies and memsets
    {"busy_ns", kInteger, kNotNull},     // |union of their [start_ns, end_ns)|
    {"first_start_ns", kInteger, kNotNull},
    {"last_end_ns", kInteger, kNotNull},
};
inline constexpr Column kRanksColumns[] = {
    {"run_id", kInteger, kNotNull, kRuns},
    {"rank", kInteger, kNotNull},
    {"local_rank", kInteger, kNotNull},
    {"host", kText, kNotNull},
    {"pid", kInteger, kNotNull},
    {"device", kText, kNotNull},
    {"clock_offset_ns", kInteger, kNotNull},
    {"start_unix_ns", kInteger, kNotNull},
    {"end_unix_ns", kInteger, 0},
    {"status", kText, kNotNull, nullptr, nullptr, "status IN ('running', 'completed', 'failed', 'killed')"},
    {"status_message", kText, 0},
    {"dropped_records", kInteger, kNotNull, nullptr, "0"},
    {"write_errors", kInteger, kNotNull, nullptr, "0"},  // v5
    {"clock_sync_offset_ns", kInteger, kNotNull, nullptr, "0"},  // v7
    {"clock_sync_error_ns", kInteger, kNotNull, nullptr, "0"},   // v7
    {"clock_sync_applied", kInteger, kNotNull, nullptr, "0"},    // v7
    {"clock_source", kText, kNotNull, nullptr, "'steady_clock'", "clock_source IN ('tsc', 'steady_clock')"},  // v8
    {"tsc_hz", kReal, 0},                                        // v8: NULL on steady_clock
    {"clock_calibration_error_ns", kInteger, kNotNull, nullptr, "0"},  // v8
};
// v6: benchmark matrices.
inline constexpr Column kMatricesColumns[] = {
    {"id", kInteger, kPrimaryKey | kAutoId},
    {"name", kText, kNotNull},
    {"spec_path", kText, kNotNull},
    {"spec_yaml", kText, kNotNull},       // the spec file's text as it was run
    {"base_config", kText, kNotNull},
    {"repetitions", kInteger, kNotNull},
    {"warmup_steps", kInteger, kNotNull},
    {"measured_steps", kInteger, kNotNull},
    {"command_line", kText, kNotNull},
    {"start_unix_ns", kInteger, kNotNull},
    {"end_unix_ns", kInteger, 0},
    {"status", kText, kNotNull, nullptr, nullptr, "status IN ('running', 'completed', 'interrupted', 'killed')"},
};
inline constexpr Column kMatrixAxesColumns[] = {
    {"matrix_id", kInteger, kNotNull, kMatrices},
    {"axis_index", kInteger, kNotNull},  // 0-based, spec order (the first varies slowest)
    {"name", kText, kNotNull},
    {"rank_axis", kInteger, kNotNull},   // 1 when its levels set the cell's rank count
    {"scaling", kText, 0, nullptr, nullptr, "scaling IN ('strong', 'weak')"},  // rank axes only
    {"baseline_level", kText, 0},        // the spec's baseline level on this axis; NULL: none named
};
inline constexpr Column kMatrixCellsColumns[] = {
    {"id", kInteger, kPrimaryKey | kAutoId},
    {"matrix_id", kInteger, kNotNull, kMatrices},
    {"cell_index", kInteger, kNotNull},  // 0-based, expansion order
    {"name", kText, kNotNull},           // "ranks=2,hybridscope.reshard.mode=hybrid"
    {"levels_json", kText, kNotNull},    // ["2", "hybrid"]: one level name per axis, axis order
    {"overrides_json", kText, kNotNull},  // every key=value override, in the order they apply
    {"ranks", kInteger, kNotNull},
    {"baseline", kInteger, kNotNull},
    {"invalid_reason", kText, 0},        // NULL: valid; else the validator's refusal (not run)
};
inline constexpr Index kMatrixCellsIndexes[] = {
    {"matrix_cells_by_matrix", "matrix_id, cell_index"},
};
inline constexpr Column kMatrixRunsColumns[] = {
    {"id", kInteger, kPrimaryKey | kAutoId},
    {"matrix_id", kInteger, kNotNull, kMatrices},
    {"cell_id", kInteger, kNotNull, kMatrixCells},
    {"repetition", kInteger, kNotNull},  // 1-based
    {"run_id", kInteger, 0, kRuns},      // NULL when the cell failed before its run was recorded
    {"status", kText, kNotNull, nullptr, nullptr, "status IN ('running', 'completed', 'failed', 'interrupted')"},
    {"error", kText, 0},                 // what failed: exit status and the last lines of the log
    {"log_path", kText, kNotNull},
    {"start_unix_ns", kInteger, kNotNull},
    {"end_unix_ns", kInteger, 0},
    // The environment the run ran in.
    {"host", kText, kNotNull},
    {"cpu_model", kText, kNotNull},
    {"num_cpus", kInteger, kNotNull},
    {"load_avg_before", kReal, kNotNull},  // 1-minute load average (/proc/loadavg)
    {"load_avg_after", kReal, 0},
    {"torch_version", kText, kNotNull},
    {"hybridscope_version", kText, kNotNull},
    {"hybridscope_commit", kText, kNotNull},  // git describe of the build; "unknown" outside git
    {"thread_settings", kText, kNotNull},     // OMP_NUM_THREADS=1 OMP_WAIT_POLICY=... hybridscope.num_threads=...
};
inline constexpr Index kMatrixRunsIndexes[] = {
    {"matrix_runs_by_matrix", "matrix_id, cell_id, repetition"},
};

inline constexpr Table kRunsTable{kRuns, kRunsColumns, nullptr, false};
inline constexpr Table kConfigTable{kConfig, kConfigColumns, "run_id, key", true};
inline constexpr Table kStringsTable{kStrings, kStringsColumns, nullptr, false};
inline constexpr Table kRangeCategoriesTable{kRangeCategories, kRangeCategoriesColumns, nullptr, false};
inline constexpr Table kRangesTable{kRanges, kRangesColumns, nullptr, false, kRangesIndexes};
inline constexpr Table kStepMetricsTable{kStepMetrics, kStepMetricsColumns, "run_id, step, name_id", true};
inline constexpr Table kMemorySamplesTable{kMemorySamples, kMemorySamplesColumns, nullptr, false, kMemorySamplesIndexes};
inline constexpr Table kKvPoolSamplesTable{kKvPoolSamples, kKvPoolSamplesColumns, nullptr, false, kKvPoolSamplesIndexes};
inline constexpr Table kCommOpsTable{kCommOps, kCommOpsColumns, nullptr, false, kCommOpsIndexes};
inline constexpr Table kSwitchesTable{kSwitches, kSwitchesColumns, nullptr, false, kSwitchesIndexes};
inline constexpr Table kSwitchComponentsTable{kSwitchComponents, kSwitchComponentsColumns, nullptr, false, kSwitchComponentsIndexes};
inline constexpr Table kKernelClassesTable{kKernelClasses, kKernelClassesColumns, nullptr, false};
inline constexpr Table kMemcpyKindsTable{kMemcpyKinds, kMemcpyKindsColumns, nullptr, false};
inline constexpr Table kMemoryKindsTable{kMemoryKinds, kMemoryKindsColumns, nullptr, false};
inline constexpr Table kKernelsTable{kKernels, kKernelsColumns, nullptr, false, kKernelsIndexes};
inline constexpr Table kMemcpyTable{kMemcpy, kMemcpyColumns, nullptr, false, kMemcpyIndexes};
inline constexpr Table kMemsetTable{kMemset, kMemsetColumns, nullptr, false, kMemsetIndexes};
inline constexpr Table kRuntimeApiTable{kRuntimeApi, kRuntimeApiColumns, nullptr, false, kRuntimeApiIndexes};
inline constexpr Table kExternalCorrelationsTable{kExternalCorrelations, kExternalCorrelationsColumns, nullptr, false, kExternalCorrelationsIndexes};
inline constexpr Table kCorrelationRangesTable{kCorrelationRanges, kCorrelationRangesColumns, "run_id, rank, external_id", true};
inline constexpr Table kCuptiOverheadTable{kCuptiOverhead, kCuptiOverheadColumns, nullptr, false, kCuptiOverheadIndexes};
inline constexpr Table kCollectorStatsTable{kCollectorStats, kCollectorStatsColumns, nullptr, false, kCollectorStatsIndexes};
inline constexpr Table kRanksTable{kRanks, kRanksColumns, "run_id, rank", true};
inline constexpr Table kKernelStatsTable{kKernelStats, kKernelStatsColumns, "run_id, rank, step, external_id, name_id",
                                         true, kKernelStatsIndexes};
inline constexpr Table kStreamBusyTable{kStreamBusy, kStreamBusyColumns, "run_id, rank, step, device, stream", true};
inline constexpr Table kMatricesTable{kMatrices, kMatricesColumns, nullptr, false};
inline constexpr Table kMatrixAxesTable{kMatrixAxes, kMatrixAxesColumns, "matrix_id, axis_index", true};
inline constexpr Table kMatrixCellsTable{kMatrixCells, kMatrixCellsColumns, nullptr, false, kMatrixCellsIndexes};
inline constexpr Table kMatrixRunsTable{kMatrixRuns, kMatrixRunsColumns, nullptr, false, kMatrixRunsIndexes};
inline constexpr const Table* kTables[] = {
    &kRunsTable,
    &kConfigTable,
    &kStringsTable,
    &kRangeCategoriesTable,
    &kRangesTable,
    &kStepMetricsTable,
    &kMemorySamplesTable,
    &kKvPoolSamplesTable,
    &kCommOpsTable,
    &kSwitchesTable,
    &kSwitchComponentsTable,
    &kKernelClassesTable,
    &kMemcpyKindsTable,
    &kMemoryKindsTable,
    &kKernelsTable,
    &kMemcpyTable,
    &kMemsetTable,
    &kRuntimeApiTable,
    &kExternalCorrelationsTable,
    &kCorrelationRangesTable,
    &kCuptiOverheadTable,
    &kCollectorStatsTable,
    &kRanksTable,
    &kKernelStatsTable,
    &kStreamBusyTable,
    &kMatricesTable,
    &kMatrixAxesTable,
    &kMatrixCellsTable,
    &kMatrixRunsTable};

/// The description of `name`; nullptr for a table this schema does not have.
inline const Table* find_table(const char* name) {
  for (const Table* t : kTables)
    if (std::strcmp(t->name, name) == 0) return t;
  return nullptr;
}

/// `CREATE TABLE IF NOT EXISTS ...` and its `CREATE INDEX IF NOT EXISTS ...` statements.
inline std::string create_statement(const Table& t) {
  std::string sql = std::string("CREATE TABLE IF NOT EXISTS ") + t.name + " (";
  for (std::size_t i = 0; i < t.columns.size; ++i) {
    const Column& c = t.columns[i];
    sql += std::string(i ? ",\n  " : "\n  ") + c.name + " " + c.type;
    if (c.primary_key()) sql += " PRIMARY KEY";
    if (c.not_null()) sql += " NOT NULL";
    if (c.flags & kUnique) sql += " UNIQUE";
    if (c.default_value) sql += std::string(" DEFAULT ") + c.default_value;
    if (c.check) sql += std::string(" CHECK (") + c.check + ")";
    if (c.references) sql += std::string(" REFERENCES ") + c.references + "(id)";
  }
  if (t.primary_key) sql += std::string(",\n  PRIMARY KEY (") + t.primary_key + ")";
  sql += t.without_rowid ? "\n) WITHOUT ROWID;\n" : "\n);\n";
  for (const Index& index : t.indexes)
    sql += std::string("CREATE INDEX IF NOT EXISTS ") + index.name + " ON " + t.name + "(" + index.columns + ");\n";
  return sql;
}

/// Statements that create the current schema (idempotent): every table of kTables.
inline std::string create_statements() {
  std::string sql;
  for (const Table* t : kTables) sql += create_statement(*t);
  return sql;
}

/// The columns a writer supplies: all but an auto-assigned id.
inline std::string insert_columns(const Table& t) {
  std::string out;
  for (const Column& c : t.columns)
    if (!c.auto_id()) out += (out.empty() ? "" : ", ") + std::string(c.name);
  return out;
}

/// Parameters that insert_statement() shares between the rows of a multi-row INSERT: 2 when the
/// inserted columns begin with (run_id, rank) -- bound once as ?1 and ?2 -- else 0.
inline int insert_shared_parameters(const Table& t) {
  std::size_t first = 0;
  while (first < t.columns.size && t.columns[first].auto_id()) ++first;
  return first + 1 < t.columns.size && detail::same(t.columns[first].name, "run_id") &&
                 detail::same(t.columns[first + 1].name, "rank")
             ? 2
             : 0;
}

/// Parameters per row of insert_statement() after the shared ones.
inline int insert_row_parameters(const Table& t) {
  int n = 0;
  for (const Column& c : t.columns) n += c.auto_id() ? 0 : 1;
  return n - insert_shared_parameters(t);
}

/// The 1-based parameter of `column` in the first row of insert_statement(t); 0 when it is not
/// inserted (absent or auto-assigned).
inline int insert_parameter(const Table& t, const char* column) {
  int p = 0;
  for (const Column& c : t.columns) {
    if (c.auto_id()) continue;
    ++p;
    if (detail::same(c.name, column)) return p;
  }
  return 0;
}

enum class OnConflict { kAbort, kIgnore, kReplace };

/// `INSERT INTO t(columns) VALUES(...)` with `rows` value tuples, numbered parameters: (run_id,
/// rank) shared by every row when the table starts with them (insert_shared_parameters), then
/// insert_row_parameters() per row, in the description's column order.
inline std::string insert_statement(const Table& t, OnConflict on_conflict = OnConflict::kAbort, int rows = 1) {
  const char* verb = on_conflict == OnConflict::kIgnore    ? "INSERT OR IGNORE INTO "
                     : on_conflict == OnConflict::kReplace ? "INSERT OR REPLACE INTO "
                                                           : "INSERT INTO ";
  const int shared = insert_shared_parameters(t);
  const int per_row = insert_row_parameters(t);
  std::string sql = verb + std::string(t.name) + "(" + insert_columns(t) + ") VALUES";
  for (int row = 0; row < rows; ++row) {
    sql += row ? ",(" : "(";
    for (int p = 1; p <= shared; ++p) sql += (p > 1 ? ", ?" : "?") + std::to_string(p);
    for (int c = 0; c < per_row; ++c)
      sql += (shared + c > 0 ? ", ?" : "?") + std::to_string(shared + 1 + row * per_row + c);
    sql += ")";
  }
  return sql;
}

/// Every column of `t`, comma-separated, each prefixed with `alias.` when an alias is given.
inline std::string column_list(const Table& t, const char* alias = nullptr) {
  std::string out;
  for (const Column& c : t.columns) {
    if (!out.empty()) out += ", ";
    if (alias) out += std::string(alias) + ".";
    out += c.name;
  }
  return out;
}

// In-place migrations (probes/src/run_file.cpp runs them before create_statements(), in order).

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

/// v4 -> v5: records lost to failed SQLite writes are kept in the run (runs.write_errors) and per
/// rank (ranks.write_errors), beside dropped_records. Each runs only on a file that has the table
/// (ranks is new in v4; a missing table is created with the column).
inline constexpr const char* kMigrateToV5Runs = "ALTER TABLE runs ADD COLUMN write_errors INTEGER NOT NULL DEFAULT 0";
inline constexpr const char* kMigrateToV5Ranks =
    "ALTER TABLE ranks ADD COLUMN write_errors INTEGER NOT NULL DEFAULT 0";

/// v6 -> v7: each rank's estimate of rank 0's monotonic clock from the rendezvous (ranks on other
/// hosts record on rank 0's clock). Only on a file that has the ranks table.
inline constexpr const char* kMigrateToV7[] = {
    "ALTER TABLE ranks ADD COLUMN clock_sync_offset_ns INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE ranks ADD COLUMN clock_sync_error_ns INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE ranks ADD COLUMN clock_sync_applied INTEGER NOT NULL DEFAULT 0",
};

/// v7 -> v8: the one clock may be a calibrated TSC: which clock each rank used, its rate and the
/// calibration's largest measured error; ranges gain an optional payload (batch_size,
/// context_len). Files before v8 were all on steady_clock (the defaults).
inline constexpr const char* kMigrateToV8Ranks[] = {
    "ALTER TABLE ranks ADD COLUMN clock_source TEXT NOT NULL DEFAULT 'steady_clock' "
    "CHECK (clock_source IN ('tsc', 'steady_clock'))",
    "ALTER TABLE ranks ADD COLUMN tsc_hz REAL",
    "ALTER TABLE ranks ADD COLUMN clock_calibration_error_ns INTEGER NOT NULL DEFAULT 0",
};
inline constexpr const char* kMigrateToV8Ranges[] = {
    "ALTER TABLE ranges ADD COLUMN batch_size INTEGER",
    "ALTER TABLE ranges ADD COLUMN context_len INTEGER",
};

/// v8 -> v9: an asynchronous collective's row carries when its issuing call returned and the
/// issuing thread's wait for it (the reports' overlap credits the time between to the compute it
/// ran under). Files before v9 recorded every collective as synchronous (NULL).
inline constexpr const char* kMigrateToV9CommOps[] = {
    "ALTER TABLE comm_ops ADD COLUMN posted_ns INTEGER",
    "ALTER TABLE comm_ops ADD COLUMN wait_start_ns INTEGER",
    "ALTER TABLE comm_ops ADD COLUMN wait_end_ns INTEGER",
};

/// v9 -> v10: no statement: the aggregate tables kernel_stats and stream_busy and the index
/// ranges_by_thread come from create_statements(). A file before v10 holds every GPU record raw
/// and no aggregates; readers aggregate its raw tables themselves (reports/run_database.cpp).

/// v10 -> v11: runs.source (every run before v11 was recorded by hybridscope itself); the
/// range category 7 `op` (imported operators and unmapped annotations) is an enum row that
/// probes/src/run_file.cpp inserts into every file it opens.
inline constexpr const char* kMigrateToV11Runs = "ALTER TABLE runs ADD COLUMN source TEXT NOT NULL DEFAULT 'hybridscope'";

/// The statements that bring a file of schema `version` (kOldestMigratableVersion..kSchemaVersion)
/// up to kSchemaVersion, in order; create_statements() runs after them and adds the tables the file
/// lacks. `lacks_column(table, column)` answers for the file: true when `table` exists without
/// `column`. One sequence for the writer (probes/src/run_file.cpp, in place) and the readers
/// (reports, on an in-memory copy: a report never changes the file it reads).
template <class LacksColumn>
std::vector<std::string> migration_statements(int version, LacksColumn&& lacks_column) {
  std::vector<std::string> out;
  if (version == 1) out.emplace_back(kMigrateToV2);
  // v1-v2 files get their switches table from create_statements(); only an existing one moves.
  if (version == 3) out.emplace_back(kMigrateToV4);
  // v5 adds a column to two tables; a table the file does not have yet comes from
  // create_statements() with it (ranks is new in v4).
  if (version >= 1 && version < 5) {
    if (lacks_column(kRuns, "write_errors")) out.emplace_back(kMigrateToV5Runs);
    if (lacks_column(kRanks, "write_errors")) out.emplace_back(kMigrateToV5Ranks);
  }
  if (version >= 1 && version < 7 && lacks_column(kRanks, "clock_sync_offset_ns"))
    for (const char* statement : kMigrateToV7) out.emplace_back(statement);
  if (version >= 1 && version < 8 && lacks_column(kRanks, "clock_source"))
    for (const char* statement : kMigrateToV8Ranks) out.emplace_back(statement);
  if (version >= 1 && version < 8 && lacks_column(kRanges, "batch_size"))
    for (const char* statement : kMigrateToV8Ranges) out.emplace_back(statement);
  if (version >= 1 && version < 9 && lacks_column(kCommOps, "posted_ns"))
    for (const char* statement : kMigrateToV9CommOps) out.emplace_back(statement);
  if (version >= 1 && version < 11 && lacks_column(kRuns, "source")) out.emplace_back(kMigrateToV11Runs);
  return out;
}

}  // namespace hs::probes::schema
