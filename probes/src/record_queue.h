// record_queue.h — the recorder's in-memory side: per-thread chunks of range records on the hot
// path, the hand-off of full chunks, the cold-path records (metrics, samples, collectives,
// switches, GPU activity), and the flush handshake with the writer thread. Private to hs_probes.
//
// Threads and ownership:
//   * a recording thread owns the chunk it fills (records [published, capacity) are its own);
//   * the writer reads [consumed, published) of every chunk, live or handed off; only the writer
//     touches `consumed` and recycles chunks, so a record is written exactly once;
//   * the queue (shared_ptr) owns every chunk; a thread's slot keeps a weak_ptr so a thread that
//     exits after its Recorder is gone touches nothing.
// What this is not: the SQLite writer (sqlite_writer.h) — nothing here knows the database.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "hybridscope/probes/gpu_aggregator.h"
#include "hybridscope/probes/recorder.h"

namespace hs::probes::detail {

/// A range as it waits for the writer (48 bytes): RangeRecord and TickRange in one layout, times
/// in clock ticks or already in ns as `in_ticks` says; the writer converts ticks (clock.h).
struct QueuedRange {
  const char* name;
  std::int64_t step;
  std::int64_t start;
  std::int64_t end;
  std::int32_t depth;
  std::int32_t batch_size;
  std::int32_t context_len;
  std::int8_t category;
  bool in_ticks;
};

struct Chunk {
  Chunk(int cap, std::int64_t thread_id) : records(new QueuedRange[cap]), capacity(cap), tid(thread_id) {}
  std::unique_ptr<QueuedRange[]> records;
  const int capacity;
  std::int64_t tid;
  std::atomic<int> published{0};  // producer: release store after writing records[published]
  int consumed = 0;               // writer only
  int queued = 0;                 // records counted in `queued` while in `full` (under the mutex)
};

struct Metric {
  std::int64_t step;
  std::string name;
  double value;
};

// What the writer takes besides range chunks: the cold-path records.
struct ColdRecords {
  std::vector<Metric> metrics;
  std::vector<MemorySample> memory;
  std::vector<KvPoolSample> kv_pool;
  std::vector<CommRecord> comm;
  std::vector<SwitchRecord> switches;
  std::vector<GpuActivityBatch> gpu;
  std::vector<CollectorStats> collector_stats;
  std::vector<GpuAggregates> gpu_aggregates;  // kernel_stats and stream_busy rows (gpu_aggregator.h)
  void swap(ColdRecords& other) noexcept;
  /// Rows these records become (a switch: its row and one per component).
  std::int64_t rows() const noexcept;
};

/// One drain: what the writer takes from the queue in one go and writes in one transaction.
struct Drain {
  std::int64_t run_id = -1;       // -1: no run yet, nothing was taken
  std::deque<Chunk*> full;        // handed-off chunks, oldest first (recycled by finish())
  std::vector<Chunk*> live;       // chunks still being filled: their published records
  ColdRecords cold;
  std::int64_t gpu_taken = 0;     // GPU records in cold.gpu
  std::uint64_t flush_target = 0; // flush() tickets this drain answers
  bool stopping = false;          // the last drain: the writer exits after it
};

class RecordQueue {
 public:
  explicit RecordQueue(const RecorderOptions& options);
  RecordQueue(const RecordQueue&) = delete;
  RecordQueue& operator=(const RecordQueue&) = delete;

  /// Hot path, any thread: appends to the calling thread's chunk (no lock); a full chunk is
  /// handed off under a short lock. Dropped and counted when the queue is at its cap or memory
  /// ran out. `self` is the shared_ptr that owns this queue (the thread's slot keeps a weak_ptr).
  void push_range(const std::shared_ptr<RecordQueue>& self, const QueuedRange& range) noexcept;
  /// Cold path (importers): `ranges` (at most chunk_records) as one handed-off chunk of thread
  /// `tid`. Dropped whole and counted when they do not fit under max_queued_records.
  void push_thread_ranges(std::int64_t tid, const std::vector<QueuedRange>& ranges) noexcept;
  // Cold paths, any thread: queued under the lock; a failed allocation counts write errors.
  void push_metrics(std::int64_t step, const std::vector<std::pair<std::string, double>>& metrics) noexcept;
  void push_memory(const MemorySample& sample) noexcept;
  void push_kv_pool(const KvPoolSample& sample) noexcept;
  void push_comm(const CommRecord& comm) noexcept;
  void push_switch(const SwitchRecord& record) noexcept;
  /// Bounded like the ranges: a batch that does not fit under max_queued_records is dropped whole.
  void push_gpu_activity(GpuActivityBatch&& batch) noexcept;
  void push_collector_stats(const CollectorStats& stats) noexcept;
  /// The aggregates of every GPU record (few rows: never dropped for the cap).
  void push_gpu_aggregates(GpuAggregates&& aggregates) noexcept;

  /// From now on the writer drains into run `run_id`.
  void start_run(std::int64_t run_id) noexcept { run_id_.store(run_id); }
  /// Returns once a drain that began after the call has been written (finish()ed).
  void flush() noexcept;
  /// Asks the writer to take one last drain and exit.
  void stop() noexcept;

  /// Writer side: waits until there is work (a flush, a full enough queue, stop) or the flush
  /// interval passed, then takes everything waiting into `out`.
  void take(Drain& out) noexcept;
  /// Writer side: recycles the drain's chunks and answers the flushes it covered.
  void finish(Drain& drained) noexcept;

  /// Records dropped because the queue was at its cap.
  std::int64_t dropped() const noexcept { return dropped_.load(std::memory_order_relaxed); }
  /// Records lost otherwise (failed SQLite writes, failed allocations on the cold paths).
  std::int64_t write_errors() const noexcept { return write_errors_.load(std::memory_order_relaxed); }
  void add_write_errors(std::int64_t n) noexcept { write_errors_.fetch_add(n, std::memory_order_relaxed); }

 private:
  Chunk* take_chunk_locked(std::int64_t tid);
  std::int64_t wake_threshold() const;
  void enqueue_locked(Chunk* c);
  void retire(Chunk* c) noexcept;
  Chunk* attach(const std::shared_ptr<RecordQueue>& self) noexcept;
  Chunk* hand_off(Chunk* c) noexcept;
  template <typename Push>
  void push_cold(std::int64_t records, Push push) noexcept;

  friend struct ThreadSlot;

  const std::uint64_t id_;
  const RecorderOptions options_;
  std::mutex mutex_;
  std::condition_variable wake_;     // the writer waits here
  std::condition_variable flushed_;  // flush() waits here
  std::vector<std::unique_ptr<Chunk>> chunks_;  // owns every chunk (under mutex)
  std::vector<Chunk*> live_;                    // one per recording thread, being filled
  std::deque<Chunk*> full_;                     // handed off, oldest first
  std::vector<Chunk*> spare_;                   // recycled by the writer
  ColdRecords cold_;
  std::atomic<std::int64_t> queued_{0};      // records in `full_` (written under mutex)
  std::atomic<std::int64_t> gpu_queued_{0};  // records in cold_.gpu (written under mutex)
  std::atomic<std::int64_t> dropped_{0};
  std::atomic<std::int64_t> write_errors_{0};
  std::atomic<std::int64_t> run_id_{-1};
  std::uint64_t flush_requested_ = 0, flush_done_ = 0;
  bool stop_ = false;
};

}  // namespace hs::probes::detail
