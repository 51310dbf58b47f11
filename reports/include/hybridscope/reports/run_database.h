// run_database.h — read access to a run database (the SQLite file `hybridscope train` writes,
// schema in docs/schema.md). Opens the file read-only, refuses other schema versions, and hands
// out plain value structs: nothing here keeps SQLite types alive past a call.
//
// Not a writer (probes::Recorder is the one writer) and not an analysis: breakdowns, overlap and
// diagnosis are built on top of these rows.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace hs::reports {

/// Why a run database could not be read. what() names the file and says what to do.
class RunDatabaseError : public std::runtime_error {
 public:
  enum class Kind {
    kMissingFile,    // no file at the path
    kNotADatabase,   // not SQLite, or SQLite without hybridscope's tables
    kSchemaVersion,  // PRAGMA user_version differs from probes::schema::kSchemaVersion
    kUnknownRun,     // no run with the requested id (or no run at all)
    kQuery,          // SQLite failed while reading
  };
  RunDatabaseError(Kind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  Kind kind() const { return kind_; }

 private:
  Kind kind_;
};

/// One row of `runs` (the columns a report needs; config_yaml is read on demand).
struct RunSummary {
  std::int64_t id = 0;
  std::string name;
  std::string status;          // running | completed | failed | killed
  std::string status_message;  // empty when NULL
  std::string host;
  std::string command_line;
  std::string hybridscope_version;
  int world_size = 1;
  std::int64_t start_unix_ns = 0;
  std::optional<std::int64_t> end_unix_ns;  // absent while running or after a crash
  std::int64_t clock_offset_ns = 0;         // UNIX-epoch ns = monotonic ns + clock_offset_ns
  /// runs.source (v11): "hybridscope" (recorded by the trainer) or the importer's source ("kineto",
  /// "verl-log"; docs/importing.md).
  std::string source = "hybridscope";

  /// Whether an importer wrote the run: its config, switches' components, allocator counters and
  /// collectives' host waits are whatever the source carried (docs/importing.md), not the probes'.
  bool imported() const { return source != "hybridscope"; }
  /// How a number the run lacks is named: "not in the source (an imported kineto run)" for an
  /// imported run, "not recorded" for a recorded one.
  std::string missing() const;

  bool operator==(const RunSummary& o) const;
};

/// One row of `ranges` with its interned names resolved. Times are monotonic ns.
struct RangeRow {
  int rank = 0;
  std::int64_t tid = 0;
  std::int64_t step = 0;
  std::string name;      // e.g. "step", "gen", "update_actor"
  std::string category;  // range_categories.name: step, phase, switch, checkpoint, validation, setup
  int depth = 0;         // 0 = outermost
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  std::optional<std::int64_t> batch_size;   // the range's payload (ranges.batch_size); NULL: none
  std::optional<std::int64_t> context_len;  // ranges.context_len

  bool operator==(const RangeRow& o) const;
};

/// One row of `ranges` as stored, for readers of millions of rows (the viewer's timeline):
/// names are indexes into the caller's string table (RunDatabase::scan_ranges), not strings.
struct RangeScanRow {
  int rank = 0;
  int depth = 0;
  std::int64_t tid = 0;
  std::int64_t step = 0;
  std::int64_t start_ns = 0;  // monotonic ns
  std::int64_t end_ns = 0;
  std::uint32_t name = 0;      // index into the `names` passed to scan_ranges
  std::uint32_t category = 0;  // index into the same `names` (step, phase, switch, ...)
  std::int32_t batch_size = -1;   // the range's payload; -1: none (NULL)
  std::int32_t context_len = -1;
};

/// One row of `step_metrics` with its name resolved (verl's metric names, docs/metrics.md).
struct StepMetric {
  std::int64_t step = 0;
  std::string name;
  double value = 0.0;

  bool operator==(const StepMetric& o) const;
};

/// One row of `comm_ops` with its names resolved (one collective on one rank).
struct CommOpRow {
  int rank = 0;
  std::int64_t step = 0;
  std::string op;     // all_reduce, all_gather, reduce_scatter, broadcast, barrier
  std::string group;  // the process group's name
  int group_size = 0;
  std::int64_t bytes = 0;
  std::string dtype;
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  std::optional<double> algbw_gbps;  // NULL for a zero-length call
  std::optional<double> busbw_gbps;
  /// An asynchronous collective (comm_ops.posted_ns, wait_start_ns, wait_end_ns; v9): the issuing
  /// thread was blocked on it from start_ns to posted_ns (posting it) and from wait_start_ns to
  /// wait_end_ns (waiting for it). NULL: synchronous, the thread blocked from start_ns to end_ns
  /// (every row of a file before v9).
  std::optional<std::int64_t> posted_ns = std::nullopt;
  std::optional<std::int64_t> wait_start_ns = std::nullopt;
  std::optional<std::int64_t> wait_end_ns = std::nullopt;

  /// Whether the issuing thread went on after issuing it (the row carries its post and its wait).
  bool asynchronous() const { return posted_ns.has_value() && wait_start_ns.has_value() && wait_end_ns.has_value(); }
  bool operator==(const CommOpRow& o) const;
};

/// One row of `switches` with its components (name, duration ns) in execution order.
struct SwitchRow {
  int rank = 0;
  std::int64_t step = 0;
  std::string direction;  // train_to_rollout | rollout_to_train
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  std::int64_t bytes_sent = 0;
  std::int64_t bytes_received = 0;
  std::int64_t bytes_local = 0;
  std::vector<std::pair<std::string, std::int64_t>> components;

  bool operator==(const SwitchRow& o) const;
};

/// One row of `memory_samples` (the columns a timeline shows); absent = NULL (not provided).
struct MemorySampleRow {
  int rank = 0;
  std::int64_t step = 0;
  std::int64_t ts_ns = 0;
  std::string phase;
  int device = -1;  // -1 = CPU (tracking allocator), else the CUDA ordinal
  std::optional<std::int64_t> allocated_bytes;
  std::optional<std::int64_t> reserved_bytes;
  std::optional<std::int64_t> active_bytes;
  std::optional<std::int64_t> inactive_split_bytes;      // CUDA only
  std::optional<std::int64_t> largest_free_block_bytes;  // CUDA only
  std::optional<std::int64_t> peak_allocated_bytes;
  std::optional<std::int64_t> num_alloc_retries;  // cumulative since the process started (CUDA)
  std::optional<std::int64_t> num_ooms;           // cumulative (CUDA)
  std::optional<double> reserved_slack;           // 1 − allocated/reserved
  std::optional<double> split_fragmentation;      // inactive_split/reserved
  std::optional<double> external_fragmentation;   // 1 − largest_free/(reserved − active)

  bool operator==(const MemorySampleRow& o) const;
};

/// One row of `kv_pool_samples` (the columns a timeline shows).
struct KvPoolSampleRow {
  int rank = 0;
  std::int64_t step = 0;
  std::int64_t ts_ns = 0;
  std::string phase;
  std::int64_t num_blocks = 0;
  std::int64_t blocks_used = 0;
  std::int64_t shared_blocks = 0;
  std::int64_t block_size = 0;  // tokens per block
  std::int64_t num_sequences = 0;
  std::int64_t tokens_stored = 0;
  std::int64_t cache_bytes = 0;

  bool operator==(const KvPoolSampleRow& o) const;
};

/// One GPU activity record of `kernels`, `memcpy` or `memset`, names resolved.
struct GpuActivityRow {
  enum class Kind { kKernel, kMemcpy, kMemset };
  Kind kind = Kind::kKernel;
  int rank = 0;
  int device = 0;
  std::int64_t stream = 0;
  std::int64_t correlation_id = 0;
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  std::string name;    // kernel: its (mangled) name; memcpy: "Memcpy <copy kind label>"; memset: "Memset <memory kind label>"
  std::string short_name;  // kernel: kernels.short_name_id (demangled, bare); copies and memsets: name
  std::string detail;  // kernel: kernel_classes.name; memcpy: memcpy_kinds.label; memset: memory_kinds.label
  std::int64_t bytes = 0;  // memcpy/memset; 0 for kernels
  std::int64_t grid[3] = {0, 0, 0};   // kernels only
  std::int64_t block[3] = {0, 0, 0};  // kernels only
};

/// `kernel_stats` (v10) summed over the range instances of one range name: what the kernels (or
/// copies, memsets) of one name launched by one phase of one step did, names resolved.
struct KernelStatRow {
  int rank = 0;
  std::int64_t step = 0;
  std::string range;             // its name ("gen", "comm/all_reduce", ...); "" for none
  std::string name;              // kernel: mangled; copies "Memcpy <kind>", memsets "Memset <kind>"
  std::string short_name;
  std::string kernel_class;      // kernel_classes.name: compute | nccl | memory
  std::int64_t count = 0;
  std::int64_t total_ns = 0;
  std::int64_t min_ns = 0;
  std::int64_t max_ns = 0;
  std::int64_t bytes = 0;
};

/// One row of `stream_busy` (v10).
struct StreamBusyRow {
  int rank = 0;
  std::int64_t step = 0;
  int device = 0;
  std::int64_t stream = 0;
  std::int64_t activities = 0;
  std::int64_t busy_ns = 0;  // union of the step's kernels, copies and memsets on the stream
  std::int64_t first_start_ns = 0;
  std::int64_t last_end_ns = 0;
};

/// The kernel -> range correlation check (`hybridscope check`, scripts/gpu-checks.py): every
/// kernel tagged with a range (through its launching call's external correlation) must have been
/// launched inside that range. Counts kernels (copies and memsets aside), all ranks of the run.
struct KernelCorrelationCheck {
  bool from_aggregates = false;  // kernel_stats (v10: every kernel) or the raw kernels table
  std::int64_t kernels = 0;
  std::int64_t correlated = 0;    // tagged with a range
  std::int64_t inside = 0;        // of those, launched inside the range's [start_ns, end_ns]
  std::int64_t outside = 0;       // launched outside it (from aggregates: a (range, name) whose launch span is not inside)
  std::int64_t unverified = 0;    // tagged, but no launch time (runtime API record) or no range end (ranges/comm_ops row) to compare
  std::int64_t uncorrelated = 0;  // launched outside every range
  bool ok() const { return outside == 0; }
};

/// One row of `runtime_api`, name resolved.
struct RuntimeApiRow {
  int rank = 0;
  std::int64_t tid = 0;
  std::int64_t correlation_id = 0;
  std::string name;
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
};

/// One row of `matrices` (a benchmark matrix, `hybridscope bench`).
struct MatrixRow {
  std::int64_t id = 0;
  std::string name;
  std::string spec_path;
  std::string base_config;
  int repetitions = 1;
  int warmup_steps = 0;
  int measured_steps = 1;
  std::string command_line;
  std::int64_t start_unix_ns = 0;
  std::optional<std::int64_t> end_unix_ns;
  std::string status;  // running | completed | interrupted | killed
};

/// One row of `matrix_axes`.
struct MatrixAxisRow {
  int axis_index = 0;
  std::string name;
  bool rank_axis = false;
  std::string scaling;         // strong | weak on a rank axis; empty otherwise
  std::string baseline_level;  // empty: none named
};

/// One row of `matrix_cells`.
struct MatrixCellRow {
  std::int64_t id = 0;
  int cell_index = 0;
  std::string name;
  std::vector<std::string> levels;     // one per axis
  std::vector<std::string> overrides;  // key=value in the order they apply
  int ranks = 1;
  bool baseline = false;
  std::string invalid_reason;  // empty: valid
};

/// One row of `matrix_runs`: a repetition of a cell and the environment it ran in.
struct MatrixRunRow {
  std::int64_t id = 0;
  std::int64_t cell_id = 0;
  int repetition = 0;
  std::optional<std::int64_t> run_id;
  std::string status;  // running | completed | failed | interrupted
  std::string error;
  std::string log_path;
  std::string host;
  std::string cpu_model;
  int num_cpus = 0;
  double load_avg_before = 0.0;
  std::optional<double> load_avg_after;
  std::string torch_version;
  std::string hybridscope_version;
  std::string hybridscope_commit;
  std::string thread_settings;
};

/// The worst fragmentation ratios of a run's memory samples (docs/schema.md); absent where no
/// sample carried the ratio (the CPU's tracking allocator has no reserved pool).
struct FragmentationPeak {
  std::optional<double> reserved_slack;
  std::optional<double> split_fragmentation;
  std::optional<double> external_fragmentation;
};

class RunDatabase {
 public:
  /// Opens `path` read-only and checks the schema version. An older version (down to
  /// probes::schema::kOldestMigratableVersion) is read through an upgraded in-memory copy; a newer
  /// one, or an SQLite file without hybridscope's tables, is refused. Throws RunDatabaseError
  /// (kMissingFile, kNotADatabase, kSchemaVersion).
  explicit RunDatabase(const std::string& path);
  ~RunDatabase();
  RunDatabase(RunDatabase&&) noexcept;
  RunDatabase& operator=(RunDatabase&&) noexcept;
  RunDatabase(const RunDatabase&) = delete;
  RunDatabase& operator=(const RunDatabase&) = delete;

  const std::string& path() const { return path_; }
  /// The file's own version (an older file is read upgraded, but this says what it is).
  int schema_version() const { return schema_version_; }

  /// Every run, by id.
  std::vector<RunSummary> runs() const;
  /// The run with this id; throws kUnknownRun naming the ids the file holds.
  RunSummary run(std::int64_t run_id) const;
  /// The run with the highest id (the latest appended); throws kUnknownRun when there is none.
  RunSummary last_run() const;
  /// The resolved configuration the run was started with (YAML text).
  std::string config_yaml(std::int64_t run_id) const;

  /// Ranges of a run ordered by rank, tid, start_ns, depth (parents before their children).
  std::vector<RangeRow> ranges(std::int64_t run_id) const;
  /// Every range of a run in storage order (no sort: the caller groups and sorts what it keeps),
  /// each passed to `visit` with its name and category interned into `names` (appended on first
  /// sight, one string per distinct name): ranges() without a string per row, for millions of
  /// rows. Throws kUnknownRun for a run the file lacks.
  void scan_ranges(std::int64_t run_id, std::vector<std::string>& names,
                   const std::function<void(const RangeScanRow&)>& visit) const;
  /// Step metrics of a run ordered by step, then name.
  std::vector<StepMetric> step_metrics(std::int64_t run_id) const;
  /// Collectives of a run ordered by rank, start_ns.
  std::vector<CommOpRow> comm_ops(std::int64_t run_id) const;
  /// Train<->rollout switches of a run ordered by rank, start_ns, each with its components.
  std::vector<SwitchRow> switches(std::int64_t run_id) const;
  /// Memory and KV-pool samples of a run ordered by rank, ts_ns.
  std::vector<MemorySampleRow> memory_samples(std::int64_t run_id) const;
  std::vector<KvPoolSampleRow> kv_pool_samples(std::int64_t run_id) const;
  /// Kernels, then copies, then memsets of a run, each ordered by rank, start_ns (empty without
  /// the CUPTI collector).
  std::vector<GpuActivityRow> gpu_activity(std::int64_t run_id) const;
  /// CUDA runtime API calls of a run ordered by rank, start_ns.
  std::vector<RuntimeApiRow> runtime_api(std::int64_t run_id) const;
  /// The GPU aggregates of a run (v10; empty for older files and runs without the collector):
  /// kernel_stats per (rank, step, range name, kernel name), ordered so; stream_busy by rank, step,
  /// device, stream.
  std::vector<KernelStatRow> kernel_stats(std::int64_t run_id) const;
  std::vector<StreamBusyRow> stream_busy(std::int64_t run_id) const;
  /// The kernel -> range correlation check, on kernel_stats when the run has it (every kernel),
  /// else on the raw tables; indexed joins only (seconds on millions of kernels).
  KernelCorrelationCheck check_kernel_correlation(std::int64_t run_id) const;

  /// Every resolved config key of a run (`config` table), by key. Throws kUnknownRun.
  std::vector<std::pair<std::string, std::string>> config(std::int64_t run_id) const;
  /// A resolved config key of a run (`config` table), e.g. "data.train_batch_size"; nullopt when absent.
  std::optional<std::string> config_value(std::int64_t run_id, const std::string& key) const;
  /// The worst fragmentation ratios of the run's memory samples on steps >= min_step.
  FragmentationPeak worst_fragmentation(std::int64_t run_id, std::int64_t min_step) const;

  /// Benchmark matrices (`hybridscope bench`), by id; empty for a file of plain runs.
  std::vector<MatrixRow> matrices() const;
  /// The matrix with this id; throws kUnknownRun naming the ids the file holds.
  MatrixRow matrix(std::int64_t matrix_id) const;
  std::vector<MatrixAxisRow> matrix_axes(std::int64_t matrix_id) const;
  /// Cells by cell_index.
  std::vector<MatrixCellRow> matrix_cells(std::int64_t matrix_id) const;
  /// Every repetition recorded (every attempt), by id.
  std::vector<MatrixRunRow> matrix_runs(std::int64_t matrix_id) const;

 private:
  void upgrade_in_memory();

  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string path_;
  int schema_version_ = 0;
};

}  // namespace hs::reports
