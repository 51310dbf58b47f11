// record_queue.cpp — the recorder's hot path and its hand-off to the writer (see record_queue.h).
// Probes never throw or block on the writer here: every failure is counted instead.
#include "record_queue.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>

namespace hs::probes::detail {

namespace {
std::atomic<std::uint64_t> g_next_queue_id{1};
}  // namespace

void ColdRecords::swap(ColdRecords& other) noexcept {
  metrics.swap(other.metrics);
  memory.swap(other.memory);
  kv_pool.swap(other.kv_pool);
  comm.swap(other.comm);
  switches.swap(other.switches);
  gpu.swap(other.gpu);
  collector_stats.swap(other.collector_stats);
  gpu_aggregates.swap(other.gpu_aggregates);
}

std::int64_t ColdRecords::rows() const noexcept {
  std::size_t n = metrics.size() + memory.size() + kv_pool.size() + comm.size() + collector_stats.size();
  for (const SwitchRecord& s : switches) n += 1 + s.components.size();
  for (const GpuActivityBatch& b : gpu) n += b.size();
  for (const GpuAggregates& a : gpu_aggregates) n += a.size();
  return static_cast<std::int64_t>(n);
}

// The calling thread's chunk. One slot per thread: a thread that alternates between Recorders
// retires its chunk to the old one at each switch.
struct ThreadSlot {
  std::uint64_t queue_id = 0;
  Chunk* chunk = nullptr;
  std::weak_ptr<RecordQueue> queue;
  void release() noexcept {
    if (auto q = queue.lock()) q->retire(chunk);
    queue.reset();
    queue_id = 0;
    chunk = nullptr;
  }
  ~ThreadSlot() { release(); }
};

namespace {
thread_local ThreadSlot t_slot;
}  // namespace

RecordQueue::RecordQueue(const RecorderOptions& options) : id_(g_next_queue_id.fetch_add(1)), options_(options) {}

// Under mutex. May throw std::bad_alloc.
Chunk* RecordQueue::take_chunk_locked(std::int64_t tid) {
  Chunk* c;
  if (!spare_.empty()) {
    c = spare_.back();
    spare_.pop_back();
    c->tid = tid;
  } else {
    chunks_.push_back(std::make_unique<Chunk>(std::max(1, options_.chunk_records), tid));
    c = chunks_.back().get();
  }
  return c;
}

std::int64_t RecordQueue::wake_threshold() const {
  return std::min<std::int64_t>(8LL * options_.chunk_records, std::max<std::int64_t>(1, options_.max_queued_records / 2));
}

// Under mutex: moves `c` from live to full.
void RecordQueue::enqueue_locked(Chunk* c) {
  live_.erase(std::remove(live_.begin(), live_.end(), c), live_.end());
  c->queued = c->published.load(std::memory_order_relaxed);
  full_.push_back(c);
  queued_.store(queued_.load(std::memory_order_relaxed) + c->queued, std::memory_order_relaxed);
  if (queued_.load(std::memory_order_relaxed) >= wake_threshold()) wake_.notify_one();
}

void RecordQueue::push_thread_ranges(std::int64_t tid, const std::vector<QueuedRange>& ranges) noexcept {
  const auto n = static_cast<std::int64_t>(ranges.size());
  if (n == 0) return;
  try {
    std::lock_guard<std::mutex> lock(mutex_);
    if (n > options_.chunk_records || queued_.load(std::memory_order_relaxed) + n > options_.max_queued_records) {
      dropped_.fetch_add(n, std::memory_order_relaxed);
      return;
    }
    Chunk* c = take_chunk_locked(tid);
    std::copy(ranges.begin(), ranges.end(), c->records.get());
    c->published.store(static_cast<int>(n), std::memory_order_release);
    live_.push_back(c);
    enqueue_locked(c);
  } catch (...) {
    dropped_.fetch_add(n, std::memory_order_relaxed);
  }
}

// A thread stops using `c` (it exits or records into another Recorder).
void RecordQueue::retire(Chunk* c) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  if (std::find(live_.begin(), live_.end(), c) != live_.end()) enqueue_locked(c);
}

// Slow path: give the calling thread a chunk of this queue. nullptr when memory ran out.
Chunk* RecordQueue::attach(const std::shared_ptr<RecordQueue>& self) noexcept {
  t_slot.release();
  try {
    std::lock_guard<std::mutex> lock(mutex_);
    Chunk* c = take_chunk_locked(static_cast<std::int64_t>(gettid()));
    live_.push_back(c);
    t_slot.queue = self;
    t_slot.queue_id = id_;
    t_slot.chunk = c;
    return c;
  } catch (...) {
    return nullptr;
  }
}

// Slow path: the calling thread's chunk is full; swap it for an empty one unless the queue is at
// its cap. nullptr: drop the record.
Chunk* RecordQueue::hand_off(Chunk* c) noexcept {
  if (queued_.load(std::memory_order_relaxed) + c->capacity > options_.max_queued_records) return nullptr;
  try {
    std::lock_guard<std::mutex> lock(mutex_);
    if (queued_.load(std::memory_order_relaxed) + c->capacity > options_.max_queued_records) return nullptr;
    Chunk* next = take_chunk_locked(c->tid);
    live_.push_back(next);
    enqueue_locked(c);
    t_slot.chunk = next;
    return next;
  } catch (...) {
    return nullptr;
  }
}

void RecordQueue::push_range(const std::shared_ptr<RecordQueue>& self, const QueuedRange& range) noexcept {
  Chunk* c = t_slot.chunk;
  if (t_slot.queue_id != id_) {
    c = attach(self);
    if (!c) {
      dropped_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
  }
  int n = c->published.load(std::memory_order_relaxed);
  if (n == c->capacity) {
    c = hand_off(c);
    if (!c) {
      dropped_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    n = 0;
  }
  c->records[n] = range;
  c->published.store(n + 1, std::memory_order_release);
}

template <typename Push>
void RecordQueue::push_cold(std::int64_t records, Push push) noexcept {
  try {
    std::lock_guard<std::mutex> lock(mutex_);
    push(cold_);
  } catch (...) {
    write_errors_.fetch_add(records, std::memory_order_relaxed);
  }
}

void RecordQueue::push_metrics(std::int64_t step,
                               const std::vector<std::pair<std::string, double>>& metrics) noexcept {
  push_cold(static_cast<std::int64_t>(metrics.size()), [&](ColdRecords& cold) {
    for (const auto& [name, value] : metrics) cold.metrics.push_back({step, name, value});
  });
}

void RecordQueue::push_memory(const MemorySample& sample) noexcept {
  push_cold(1, [&](ColdRecords& cold) { cold.memory.push_back(sample); });
}

void RecordQueue::push_kv_pool(const KvPoolSample& sample) noexcept {
  push_cold(1, [&](ColdRecords& cold) { cold.kv_pool.push_back(sample); });
}

void RecordQueue::push_comm(const CommRecord& comm) noexcept {
  push_cold(1, [&](ColdRecords& cold) { cold.comm.push_back(comm); });
}

void RecordQueue::push_switch(const SwitchRecord& record) noexcept {
  push_cold(1, [&](ColdRecords& cold) { cold.switches.push_back(record); });
}

void RecordQueue::push_collector_stats(const CollectorStats& stats) noexcept {
  push_cold(1, [&](ColdRecords& cold) { cold.collector_stats.push_back(stats); });
}

void RecordQueue::push_gpu_aggregates(GpuAggregates&& aggregates) noexcept {
  if (aggregates.empty()) return;
  const auto n = static_cast<std::int64_t>(aggregates.size());
  push_cold(n, [&](ColdRecords& cold) { cold.gpu_aggregates.push_back(std::move(aggregates)); });
}

void RecordQueue::push_gpu_activity(GpuActivityBatch&& batch) noexcept {
  const auto n = static_cast<std::int64_t>(batch.size());
  if (n == 0) return;
  try {
    std::lock_guard<std::mutex> lock(mutex_);
    // The same cap as the ranges': what waits for the writer, ranges and GPU records together.
    if (queued_.load(std::memory_order_relaxed) + gpu_queued_.load(std::memory_order_relaxed) + n >
        options_.max_queued_records) {
      dropped_.fetch_add(n, std::memory_order_relaxed);
      return;
    }
    cold_.gpu.push_back(std::move(batch));
    gpu_queued_.store(gpu_queued_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
    if (gpu_queued_.load(std::memory_order_relaxed) >= wake_threshold()) wake_.notify_one();
  } catch (...) {
    dropped_.fetch_add(n, std::memory_order_relaxed);
  }
}

void RecordQueue::flush() noexcept {
  std::unique_lock<std::mutex> lock(mutex_);
  const std::uint64_t ticket = ++flush_requested_;
  wake_.notify_one();
  flushed_.wait(lock, [&] { return flush_done_ >= ticket; });
}

void RecordQueue::stop() noexcept {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_one();
}

void RecordQueue::take(Drain& out) noexcept {
  std::unique_lock<std::mutex> lock(mutex_);
  wake_.wait_for(lock, std::chrono::milliseconds(std::max(1, options_.flush_interval_ms)), [&] {
    // Before start_run nothing can be written: a full queue must not wake the writer then, or it
    // would spin.
    return stop_ || flush_requested_ > flush_done_ ||
           (run_id_.load() >= 0 &&
            queued_.load(std::memory_order_relaxed) + gpu_queued_.load(std::memory_order_relaxed) >= wake_threshold());
  });
  out.stopping = stop_;
  out.flush_target = flush_requested_;
  out.run_id = run_id_.load();
  if (out.run_id < 0) return;
  out.full.swap(full_);
  out.gpu_taken = gpu_queued_.load(std::memory_order_relaxed);
  try {
    out.live = live_;
  } catch (...) {
    write_errors_.fetch_add(1, std::memory_order_relaxed);
  }
  out.cold.swap(cold_);
}

void RecordQueue::finish(Drain& drained) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  gpu_queued_.store(gpu_queued_.load(std::memory_order_relaxed) - drained.gpu_taken, std::memory_order_relaxed);
  for (Chunk* c : drained.full) {
    queued_.store(queued_.load(std::memory_order_relaxed) - c->queued, std::memory_order_relaxed);
    c->queued = 0;
    c->consumed = 0;
    c->published.store(0, std::memory_order_relaxed);
    try {
      spare_.push_back(c);
    } catch (...) {
    }
  }
  drained.full.clear();
  flush_done_ = drained.flush_target;
  flushed_.notify_all();
}

}  // namespace hs::probes::detail
