// recorder.h — writes a run into its SQLite database: the run row (with the resolved config and
// how the run ended), phase ranges and per-step metrics.
//
// Hot path: record_ticks() (scoped ranges, times in raw clock ticks) and record_range() (times in
// ns) append to a chunk owned by the calling thread (no lock, no allocation; one atomic store
// publishes the record); the writer converts ticks to ns (clock.h). A full chunk is swapped into the writer's queue under a short lock.
// A background writer thread drains the queue and the chunks being filled into SQLite (prepared
// statements, one transaction per drain, WAL, synchronous=NORMAL) at least every
// RecorderOptions::flush_interval_ms and whenever flush() asks. Memory is bounded: beyond
// max_queued_records waiting records, new ones are dropped and counted (runs.dropped_records,
// dropped_records(), write_errors()); the hot path never blocks on the writer and never throws.
//
// Write errors (a full disk, an I/O error) never reach the probes either: every record a failed
// transaction held is counted (runs.write_errors, failed_writes()), the first failure is kept as
// text (write_error()), and each later drain tries again. A full disk must not cost the run its
// ending: the recorder keeps PATH-reserve (256 KiB of written blocks) beside the database and gives
// it back at end_run after a failed write, so the row that says how the run ended still fits.
//
// Each rank writes its own file (see merge.h and rank_files.h for how they become one run
// database); begin_run also writes this rank's row of the `ranks` table. What this is not: a
// CUPTI collector. Inside: probes/src/record_queue.cpp (the hot path), sqlite_writer.cpp (the
// writer thread), run_file.cpp (opening and upgrading the file), probe_math.cpp (the bandwidth and
// fragmentation arithmetic declared below).
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "hybridscope/probes/gpu_activity.h"
#include "hybridscope/probes/gpu_aggregator.h"

namespace hs::probes {

namespace detail {
class RecordQueue;
class SqliteWriter;
struct GpuFolding;
}  // namespace detail

class RecorderError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Range categories (the `range_categories` enum table): which part of the system a range times.
/// kOp (v11) is a range an imported trace holds that is no phase: a framework operator (`aten::mm`)
/// or an annotation no phase map knows (hs::importer); the reports' phase breakdown leaves it out.
enum class Category : int {
  kStep = 1, kPhase = 2, kSwitch = 3, kCheckpoint = 4, kValidation = 5, kSetup = 6, kOp = 7
};
inline constexpr Category kCategories[] = {Category::kStep,       Category::kPhase,      Category::kSwitch,
                                           Category::kCheckpoint, Category::kValidation, Category::kSetup,
                                           Category::kOp};
/// The category's name in `range_categories` and NVTX ("step", "phase", ...).
const char* to_string(Category category) noexcept;

struct RunInfo {
  std::string name;
  std::string command_line;
  std::string config_yaml;
  int world_size = 1;
  std::string torch_version;
  std::vector<std::pair<std::string, std::string>> config;  // (dotted key, value): the `config` table
  /// The run's id; -1: the next free one. A rank > 0 recording into its own file passes rank 0's
  /// id in the run database, so that merge_rank_files() knows where its rows belong.
  std::int64_t run_id = -1;
  int local_rank = 0;          // this rank's index on its host (the ranks table)
  std::string device = "cpu";  // this rank's device ("cpu", "cuda:0", ...)
  /// The rendezvous' estimate of rank 0's monotonic clock minus this rank's, its error bound (half
  /// the round trip used) and whether now_ns() was shifted by it (a rank on another host).
  std::int64_t clock_sync_offset_ns = 0;
  std::int64_t clock_sync_error_ns = 0;
  bool clock_sync_applied = false;
  /// Where the run's records come from (runs.source, v11): "hybridscope" for a run this recorder
  /// timed itself; an importer names its source ("kineto", "verl-log", ...).
  std::string source = "hybridscope";
  /// An imported run carries its own timeline, not this process's (set all of them or none):
  /// the epoch offset of its ns (runs/ranks.clock_offset_ns: start_ns + offset = UNIX-epoch ns),
  /// its wall-clock span and the host it ran on. -1 / empty: this process's, as recorded.
  std::int64_t imported_clock_offset_ns = -1;
  std::int64_t imported_start_unix_ns = -1;
  std::int64_t imported_end_unix_ns = -1;
  std::string imported_host;
  std::int64_t imported_pid = -1;
};

enum class RunStatus { kRunning, kCompleted, kFailed, kKilled };
const char* to_string(RunStatus status);

/// A range in ns on the run's timeline (probes::now_ns()), as a caller that already holds ns
/// records it (fixtures, tools). Scoped ranges record TickRange instead.
struct RangeRecord {
  const char* name;  // static storage (a string literal): interned by pointer, never copied
  Category category;
  int depth;
  std::int64_t step;
  std::int64_t start_ns;  // probes::now_ns()
  std::int64_t end_ns;
  /// Optional payload (the ranges table's batch_size and context_len; -1: none, NULL): the rows
  /// (sequences) the range worked on and the tokens of context per row — a decode step's batch
  /// and context length, a micro-batch's rows and padded length.
  std::int32_t batch_size = -1;
  std::int32_t context_len = -1;
};

/// A range as the hot path records it: start and end in raw clock ticks (probes::now_ticks()),
/// converted to ns by the writer, off the hot path (clock.h). Otherwise as RangeRecord.
struct TickRange {
  const char* name;  // a string literal
  Category category;
  int depth;
  std::int64_t step;
  std::int64_t start_ticks;
  std::int64_t end_ticks;
  std::int32_t batch_size = -1;
  std::int32_t context_len = -1;
};

/// One reading of a device's memory (the `memory_samples` table). -1 = not provided by the device
/// (the CPU tracking allocator has no reserve, no splits, no retries).
struct MemorySample {
  std::int64_t ts_ns = 0;       // probes::now_ns()
  std::int64_t step = 0;
  const char* phase = "";       // string literal: the phase boundary or "timer"
  int device = -1;              // -1 = CPU, else the CUDA ordinal
  std::int64_t allocated_bytes = -1;
  std::int64_t reserved_bytes = -1;
  std::int64_t active_bytes = -1;
  std::int64_t inactive_split_bytes = -1;
  std::int64_t largest_free_block_bytes = -1;
  std::int64_t peak_allocated_bytes = -1;
  std::int64_t num_allocs = -1;
  std::int64_t num_alloc_retries = -1;
  std::int64_t num_ooms = -1;
};

/// The fragmentation ratios of a sample (profiling-facts.md); NaN where an input is missing.
struct FragmentationRatios {
  double reserved_slack;          // 1 - allocated / reserved
  double split_fragmentation;     // inactive_split / reserved
  double external_fragmentation;  // 1 - largest_free_block / (reserved - active)
};
FragmentationRatios fragmentation(const MemorySample& sample) noexcept;

/// The paged KV pool at one moment (the `kv_pool_samples` table).
struct KvPoolSample {
  std::int64_t ts_ns = 0;
  std::int64_t step = 0;
  const char* phase = "";  // string literal
  std::int64_t num_blocks = 0;
  std::int64_t block_size = 0;
  std::int64_t blocks_used = 0;
  std::int64_t shared_blocks = 0;
  std::int64_t num_sequences = 0;
  std::int64_t tokens_stored = 0;
  std::int64_t token_capacity_used = 0;
  std::int64_t cache_bytes = 0;  // bytes of the K/V tensors (0 while released)
};

/// One collective (the `comm_ops` table), recorded by the collective wrapper
/// (trainer::ProbedCommunicator). `bytes` follows nccl-tests: the larger of the input and output
/// buffer per rank — all_reduce, broadcast: the tensor; all_gather: the output (size × input);
/// reduce_scatter: the input; send, recv: the tensor; barrier: 0.
struct CommRecord {
  const char* op;     // string literal: all_reduce, all_gather, reduce_scatter, broadcast, send, recv, barrier
  const char* group;  // string literal: the process group's name ("world", "tp", "dp", "pp")
  int group_size;
  std::int64_t bytes;
  const char* dtype;  // string literal: "float32", "bfloat16", ... ("" for barrier)
  std::int64_t start_ns;  // probes::now_ns()
  std::int64_t end_ns;
  std::int64_t step;
  /// An asynchronous collective (issued, then waited for: pending_collective.h): when the call
  /// that issued it returned (from start_ns until then the thread was posting it), and the issuing
  /// thread's wait for it, from entering the wait to its return. All -1 (NULL): synchronous, the
  /// thread blocked from start_ns to end_ns.
  std::int64_t posted_ns = -1;
  std::int64_t wait_start_ns = -1;
  std::int64_t wait_end_ns = -1;
};

/// nccl-tests' bus-bandwidth factor for `op` over `n` ranks (profiling-facts.md; nccl-tests
/// doc/PERFORMANCE.md): all_reduce 2(n−1)/n; all_gather, reduce_scatter, all_to_all (n−1)/n;
/// broadcast, reduce 1; barrier and unknown ops 0. busbw = algbw × factor.
double bus_bandwidth_factor(const char* op, int n) noexcept;
/// algbw in GB/s (1e9 bytes/s): bytes / (end_ns − start_ns); NaN for a non-positive duration.
double algorithm_bandwidth_gbps(std::int64_t bytes, std::int64_t start_ns, std::int64_t end_ns) noexcept;

/// One train<->rollout switch of the hybrid engine (the `switches` and `switch_components` tables).
/// Names are string literals. Components run one after another inside [start_ns, end_ns].
struct SwitchRecord {
  std::int64_t step = 0;
  const char* direction = "";  // "train_to_rollout" | "rollout_to_train"
  std::int64_t start_ns = 0;   // probes::now_ns()
  std::int64_t end_ns = 0;
  std::int64_t bytes_sent = 0;      // weight bytes this rank sent while resharding
  std::int64_t bytes_received = 0;  // weight bytes this rank received
  std::int64_t bytes_local = 0;     // weight bytes already in place (no transfer)
  std::int64_t memory_before_bytes = -1;  // bytes in use on the device just before the switch; -1 unknown
  std::int64_t memory_after_bytes = -1;   // bytes in use just after; -1 unknown
  std::int64_t peak_memory_bytes = -1;    // the most bytes in use at any moment of the switch; -1 unknown
  /// (name, duration ns), in execution order: rng_save, reshard_weights, kv_allocate, kv_release,
  /// rng_restore, cache_release, ...
  std::vector<std::pair<const char*, std::int64_t>> components;
};

struct RecorderOptions {
  /// Records waiting in full chunks for the writer before new records are dropped (48 B each:
  /// the default caps the queue near 200 MiB). Each recording thread also holds one chunk.
  std::int64_t max_queued_records = 4 << 20;
  /// Records per per-thread chunk (the unit handed to the writer under a lock).
  int chunk_records = 4096;
  /// The writer commits at least this often (ms) even when nobody calls flush().
  int flush_interval_ms = 500;
  /// GPU activity (record_gpu_activity): every kernel, copy and memset is aggregated into
  /// kernel_stats and stream_busy; raw records are kept only for the steps of this window (by
  /// default every step). The trainer sets it from hybridscope.probes.cupti_raw_steps.
  GpuCaptureOptions gpu;
};

class Recorder {
 public:
  /// Opens (creating if needed) the database at `path`; creates parent directories; marks runs
  /// of this host left `running` by a process that no longer exists as `killed`. Throws
  /// RecorderError when the file cannot be opened or carries a different schema version.
  Recorder(const std::string& path, int rank = 0, RecorderOptions options = {});
  /// Flushes (the run stays `running` without end_run) and stops the writer thread.
  ~Recorder();
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  /// Inserts the run row (status running; with info.run_id when >= 0) and this rank's row of the
  /// ranks table, and returns the run id. Records made before it are kept and written with this run.
  std::int64_t begin_run(const RunInfo& info);
  /// Flushes and records how the run (and this rank) ended. When records were lost to write errors
  /// the status message says how many and why (write_error()). False when the run row itself could
  /// not be updated (the run then reads `running` until the file is next opened, then `killed`):
  /// the caller must say so itself.
  bool end_run(RunStatus status, const std::string& message = "");

  /// Hot path, any thread: appends to the thread's chunk; drops (counted) when the queue is full.
  void record_range(const RangeRecord& range) noexcept;
  /// The same for a range timed in clock ticks (ScopedRange): converted to ns when written.
  void record_ticks(const TickRange& range) noexcept;
  /// Cold path for importers (hs::importer): ranges of another process's thread `tid` (a trace's
  /// thread id, written to ranges.tid), at most RecorderOptions::chunk_records of them per call.
  /// Bounded and counted like record_range: beyond max_queued_records they are dropped (an
  /// importer calls flush() often enough that none is).
  void record_thread_ranges(std::int64_t tid, const std::vector<RangeRecord>& ranges) noexcept;
  /// Queues the metrics of one step (name -> value); any thread.
  void record_metrics(std::int64_t step, const std::vector<std::pair<std::string, double>>& metrics) noexcept;
  /// Queues a memory or KV-pool sample (cold path: phase boundaries); any thread.
  void record_memory(const MemorySample& sample) noexcept;
  void record_kv_pool(const KvPoolSample& sample) noexcept;
  /// Queues one collective (cold path: a few per layer and step); any thread.
  void record_comm(const CommRecord& comm) noexcept;
  /// Queues one train<->rollout switch with its components (cold path); any thread.
  void record_switch(const SwitchRecord& record) noexcept;
  /// Folds the GPU activity of one parsed CUPTI buffer into the aggregates (kernel_stats,
  /// stream_busy; written at the next flush()) and queues the raw records of the capture window
  /// (RecorderOptions::gpu) with the batch's correlation ranges and overhead records (the
  /// collector's thread, not the hot path). Bounded like the ranges: when the waiting records plus
  /// the raw batch would exceed max_queued_records the raw batch is dropped whole and counted
  /// (dropped_records()); its records are still in the aggregates.
  void record_gpu_activity(GpuActivityBatch&& batch) noexcept;
  /// From now on GPU records belong to `step` (RunProbes::set_step calls it at every step's
  /// start): the step of kernel_stats, stream_busy and the raw capture window.
  void set_step(std::int64_t step) noexcept;
  /// The same with the moment given (an importer replaying a trace's step boundaries, in time
  /// order, before handing over the records): GPU records starting at or after `since_ns` belong
  /// to `step`.
  void set_step_at(std::int64_t step, std::int64_t since_ns) noexcept;
  /// Queues one snapshot of the CUPTI collector's state and counters (collector_stats).
  void record_collector_stats(const CollectorStats& stats) noexcept;
  /// Returns once everything recorded before the call (by this thread, or published by others)
  /// is committed to the database, with the GPU aggregates as they stand. No-op before begin_run.
  void flush() noexcept;

  std::int64_t run_id() const { return run_id_; }
  const std::string& path() const { return path_; }
  /// Records that never reached the database: failed SQLite writes (a failed transaction counts
  /// every record it held; also in runs.write_errors) plus dropped records.
  std::int64_t write_errors() const noexcept;
  /// Records dropped because the queue was at max_queued_records (also in runs.dropped_records).
  std::int64_t dropped_records() const noexcept;
  /// Records whose SQLite write failed (write_errors() without the dropped ones).
  std::int64_t failed_writes() const noexcept;
  /// The first failed write as a user should read it: SQLite's error, the OS error behind it and
  /// the database ("database or disk is full (ENOSPC: No space left on device; 0 KiB free there)
  /// writing /data/run.sqlite"); empty while every write succeeded.
  std::string write_error() const;

 private:
  void flush_gpu_aggregates(bool final) noexcept;

  std::shared_ptr<detail::RecordQueue> queue_;   // the hot path's side (record_queue.h)
  std::unique_ptr<detail::SqliteWriter> writer_;  // the writer thread (sqlite_writer.h)
  std::unique_ptr<detail::GpuFolding> gpu_;       // the GPU aggregator and its lock (recorder.cpp)
  std::string path_;
  int rank_;
  std::int64_t run_id_ = -1;
};

}  // namespace hs::probes
