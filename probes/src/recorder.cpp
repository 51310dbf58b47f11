// recorder.cpp — Recorder: the public face that ties the record queue (record_queue.cpp, the hot
// path) to the SQLite writer (sqlite_writer.cpp). It owns both, forwards records to the queue and
// run rows to the writer; it holds no SQLite state of its own.
#include "hybridscope/probes/recorder.h"

#include <mutex>

#include "hybridscope/probes/clock.h"
#include "hybridscope/probes/run_probes.h"
#include "record_queue.h"
#include "sqlite_writer.h"

namespace hs::probes {

namespace detail {

// The GPU aggregator is fed by the collector's thread and emptied by flush(): one lock.
struct GpuFolding {
  explicit GpuFolding(const GpuCaptureOptions& options) : aggregator(options) {}
  std::mutex mutex;
  GpuActivityAggregator aggregator;
};

void set_recorder_step(Recorder& recorder, std::int64_t step) noexcept { recorder.set_step(step); }

}  // namespace detail

const char* to_string(RunStatus status) {
  switch (status) {
    case RunStatus::kRunning: return "running";
    case RunStatus::kCompleted: return "completed";
    case RunStatus::kFailed: return "failed";
    case RunStatus::kKilled: return "killed";
  }
  return "failed";
}

const char* to_string(Category category) noexcept {
  switch (category) {
    case Category::kStep: return "step";
    case Category::kPhase: return "phase";
    case Category::kSwitch: return "switch";
    case Category::kCheckpoint: return "checkpoint";
    case Category::kValidation: return "validation";
    case Category::kSetup: return "setup";
    case Category::kOp: return "op";
  }
  return "unknown";
}

Recorder::Recorder(const std::string& path, int rank, RecorderOptions options)
    : queue_(std::make_shared<detail::RecordQueue>(options)),
      writer_(std::make_unique<detail::SqliteWriter>(path, rank, queue_)),
      gpu_(std::make_unique<detail::GpuFolding>(options.gpu)),
      path_(path),
      rank_(rank) {}

Recorder::~Recorder() {
  if (run_id_ >= 0) flush();
  writer_.reset();  // stops the queue, writes what is left, joins the writer thread
}

std::int64_t Recorder::begin_run(const RunInfo& info) {
  run_id_ = writer_->insert_run(info);
  queue_->start_run(run_id_);
  return run_id_;
}

bool Recorder::end_run(RunStatus status, const std::string& message) {
  flush_gpu_aggregates(/*final=*/true);
  flush();
  return writer_->end_run(run_id_, status, message);
}

// Tail calls: the hot path itself is RecordQueue::push_range.
void Recorder::record_range(const RangeRecord& r) noexcept {
  queue_->push_range(queue_, {r.name, r.step, r.start_ns, r.end_ns, r.depth, r.batch_size, r.context_len,
                              static_cast<std::int8_t>(r.category), false});
}

void Recorder::record_ticks(const TickRange& r) noexcept {
  queue_->push_range(queue_, {r.name, r.step, r.start_ticks, r.end_ticks, r.depth, r.batch_size, r.context_len,
                              static_cast<std::int8_t>(r.category), true});
}

void Recorder::record_thread_ranges(std::int64_t tid, const std::vector<RangeRecord>& ranges) noexcept {
  std::vector<detail::QueuedRange> queued;
  try {
    queued.reserve(ranges.size());
  } catch (...) {
    queue_->add_write_errors(static_cast<std::int64_t>(ranges.size()));
    return;
  }
  for (const RangeRecord& r : ranges)
    queued.push_back({r.name, r.step, r.start_ns, r.end_ns, r.depth, r.batch_size, r.context_len,
                      static_cast<std::int8_t>(r.category), false});
  queue_->push_thread_ranges(tid, queued);
}

void Recorder::record_metrics(std::int64_t step, const std::vector<std::pair<std::string, double>>& metrics) noexcept {
  queue_->push_metrics(step, metrics);
}

void Recorder::record_memory(const MemorySample& sample) noexcept { queue_->push_memory(sample); }

void Recorder::record_kv_pool(const KvPoolSample& sample) noexcept { queue_->push_kv_pool(sample); }

void Recorder::record_comm(const CommRecord& comm) noexcept { queue_->push_comm(comm); }

void Recorder::record_switch(const SwitchRecord& record) noexcept { queue_->push_switch(record); }

void Recorder::record_gpu_activity(GpuActivityBatch&& batch) noexcept {
  try {
    std::lock_guard<std::mutex> lock(gpu_->mutex);
    gpu_->aggregator.fold(batch);
  } catch (...) {  // out of memory: the batch's records may be missing from the aggregates
    queue_->add_write_errors(static_cast<std::int64_t>(batch.kernels.size() + batch.memcpys.size() + batch.memsets.size()));
  }
  queue_->push_gpu_activity(std::move(batch));
}

void Recorder::set_step(std::int64_t step) noexcept {
  try {
    std::lock_guard<std::mutex> lock(gpu_->mutex);
    gpu_->aggregator.set_step(step, now_ns());
  } catch (...) {
  }
}

void Recorder::set_step_at(std::int64_t step, std::int64_t since_ns) noexcept {
  try {
    std::lock_guard<std::mutex> lock(gpu_->mutex);
    gpu_->aggregator.set_step(step, since_ns);
  } catch (...) {
  }
}

void Recorder::flush_gpu_aggregates(bool final) noexcept {
  try {
    GpuAggregates changed;
    {
      std::lock_guard<std::mutex> lock(gpu_->mutex);
      changed = gpu_->aggregator.take_changed(final);
    }
    queue_->push_gpu_aggregates(std::move(changed));
  } catch (...) {
  }
}

void Recorder::record_collector_stats(const CollectorStats& stats) noexcept { queue_->push_collector_stats(stats); }

void Recorder::flush() noexcept {
  if (run_id_ < 0) return;
  flush_gpu_aggregates(/*final=*/false);
  queue_->flush();
}

std::int64_t Recorder::write_errors() const noexcept { return queue_->write_errors() + dropped_records(); }

std::int64_t Recorder::dropped_records() const noexcept { return queue_->dropped(); }

std::int64_t Recorder::failed_writes() const noexcept { return queue_->write_errors(); }

std::string Recorder::write_error() const { return writer_->first_error(); }

}  // namespace hs::probes
