// cupti_collector.cpp — CUPTI's activity callbacks are plain C function pointers without a user
// pointer, so one collector at a time is reachable through g_active.
//
// Threads: bufferRequested/bufferCompleted run on CUPTI's worker thread or on the thread calling
// cuptiActivityFlushAll; the range observer runs on the application's threads; start/flush/stop
// on the trainer's main thread. flush() calls cuptiActivityFlushAll without holding any lock that
// bufferCompleted takes (Kineto's rule).
#include "hybridscope/probes/cupti_collector.h"

#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <mutex>
#include <utility>
#include <vector>

#include "hybridscope/probes/activity_buffer_pool.h"
#include "hybridscope/probes/clock.h"
#include "hybridscope/probes/cupti_records.h"
#include "hybridscope/probes/range_observer.h"

namespace hs::probes {

std::string describe_cupti_failure(const char* call, int cupti_result) {
  const char* text = nullptr;
  if (cuptiGetResultString(static_cast<CUptiResult>(cupti_result), &text) != CUPTI_SUCCESS || !text) text = "unknown";
  std::string line = std::string("disabled: ") + call + " failed with CUPTI error " + std::to_string(cupti_result) +
                     " (" + text + ")";
  if (cupti_result == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
    line += ": another tool owns CUPTI (nsys, ncu or the PyTorch profiler; CUPTI allows one subscriber)";
  else if (cupti_result == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES)
    line += ": profiling needs privileges (NVreg_RestrictProfilingToAdminUsers=0, or run as admin)";
  return line + "; the run goes on without GPU activity records";
}

std::string cuda_device_unavailable_reason() {
  // RTLD_NOLOAD first: in a process that already uses CUDA (LibTorch) the driver is loaded.
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (!driver) driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!driver) return "no CUDA driver: libcuda.so.1 cannot be loaded";
  // Kept loaded: CUPTI needs the driver anyway. Signatures of cuda.h (CUresult is an int enum).
  using InitFn = int (*)(unsigned int);
  using CountFn = int (*)(int*);
  auto init = reinterpret_cast<InitFn>(dlsym(driver, "cuInit"));
  auto count = reinterpret_cast<CountFn>(dlsym(driver, "cuDeviceGetCount"));
  if (!init || !count) return "libcuda.so.1 lacks cuInit/cuDeviceGetCount";
  if (const int rc = init(0); rc != 0) return "cuInit failed with CUDA error " + std::to_string(rc);
  int devices = 0;
  if (const int rc = count(&devices); rc != 0) return "cuDeviceGetCount failed with CUDA error " + std::to_string(rc);
  if (devices == 0) return "the driver reports 0 devices";
  return "";
}

struct CuptiCollector::Impl {
  Impl(Recorder& r, CuptiOptions o)
      : recorder(r), options(o), pool(o.buffer_bytes, o.max_outstanding_bytes) {
    observer = {&on_range_push, &on_range_pop, this};
  }

  Recorder& recorder;
  const CuptiOptions options;
  ActivityBufferPool pool;
  RangeObserver observer{};
  std::atomic<CuptiState> state{CuptiState::kStopped};
  mutable std::mutex status_mutex;
  std::string status = "stopped";
  std::vector<CUpti_ActivityKind> enabled;
  // Counters updated in bufferCompleted.
  std::atomic<std::int64_t> buffers_completed{0};
  std::atomic<std::int64_t> records{0};
  std::atomic<std::int64_t> dropped_records{0};
  // Ranges that pushed an external id, waiting to travel with the next batch.
  std::mutex pending_mutex;
  std::vector<CorrelationRange> pending_ranges;

  void set_status(CuptiState s, std::string text) {
    {
      std::lock_guard<std::mutex> lock(status_mutex);
      status = std::move(text);
    }
    state.store(s);
  }
  CollectorStats snapshot() const {
    CollectorStats s;
    s.ts_ns = now_ns();
    {
      std::lock_guard<std::mutex> lock(status_mutex);
      s.status = status;
    }
    s.buffers_requested = pool.requested();
    s.buffers_refused = pool.refused();
    s.buffers_completed = buffers_completed.load();
    s.records = records.load();
    s.dropped_records = dropped_records.load();
    s.peak_buffer_bytes = static_cast<std::int64_t>(pool.peak_outstanding_bytes());
    return s;
  }
  void take_pending_ranges(GpuActivityBatch& batch) {
    std::lock_guard<std::mutex> lock(pending_mutex);
    batch.correlation_ranges.swap(pending_ranges);
  }

  static void on_range_push(void* context, const char* name, int depth, std::int64_t start_ns) noexcept;
  static void on_range_pop(void* context) noexcept;
  static void CUPTIAPI on_buffer_requested(std::uint8_t** buffer, std::size_t* size, std::size_t* max_records);
  static void CUPTIAPI on_buffer_completed(CUcontext context, std::uint32_t stream, std::uint8_t* buffer,
                                           std::size_t size, std::size_t valid_size);
  static std::uint64_t CUPTIAPI timestamp() { return static_cast<std::uint64_t>(now_ns()); }
};

namespace {
std::atomic<CuptiCollector::Impl*> g_active{nullptr};
std::atomic<std::uint64_t> g_next_external_id{1};
}  // namespace

void CuptiCollector::Impl::on_range_push(void* context, const char* name, int depth, std::int64_t start_ns) noexcept {
  auto* self = static_cast<Impl*>(context);
  const std::uint64_t id = g_next_external_id.fetch_add(1, std::memory_order_relaxed);
  if (cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, id) != CUPTI_SUCCESS) return;
  try {
    std::lock_guard<std::mutex> lock(self->pending_mutex);
    self->pending_ranges.push_back({id, static_cast<std::int64_t>(::gettid()), depth, start_ns, name});
  } catch (...) {
  }
}

void CuptiCollector::Impl::on_range_pop(void*) noexcept {
  std::uint64_t last = 0;
  cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &last);  // empty stack: ignored
}

void CUPTIAPI CuptiCollector::Impl::on_buffer_requested(std::uint8_t** buffer, std::size_t* size,
                                                        std::size_t* max_records) {
  *max_records = 0;  // as many as fit
  Impl* self = g_active.load();
  *buffer = self ? self->pool.acquire() : nullptr;
  *size = *buffer ? self->pool.buffer_bytes() : 0;  // size 0: CUPTI drops and counts
}

void CUPTIAPI CuptiCollector::Impl::on_buffer_completed(CUcontext context, std::uint32_t stream, std::uint8_t* buffer,
                                                        std::size_t, std::size_t valid_size) {
  Impl* self = g_active.load();
  if (!self) {  // arrived after stop(): the pool may be gone
    ActivityBufferPool::free_buffer(buffer);
    return;
  }
  try {
    GpuActivityBatch batch;
    const std::size_t seen = cupti::parse_buffer(buffer, valid_size, batch);
    self->take_pending_ranges(batch);
    self->records.fetch_add(static_cast<std::int64_t>(seen));
    self->buffers_completed.fetch_add(1);
    self->recorder.record_gpu_activity(std::move(batch));
  } catch (...) {
  }
  std::size_t dropped = 0;
  if (cuptiActivityGetNumDroppedRecords(context, stream, &dropped) == CUPTI_SUCCESS && dropped > 0)
    self->dropped_records.fetch_add(static_cast<std::int64_t>(dropped));
  self->pool.release(buffer);
}

CuptiCollector::CuptiCollector(Recorder& recorder, CuptiOptions options)
    : impl_(std::make_unique<Impl>(recorder, options)) {}

CuptiCollector::~CuptiCollector() { stop(); }

CuptiState CuptiCollector::start() noexcept {
  Impl& im = *impl_;
  if (im.state.load() == CuptiState::kActive) return CuptiState::kActive;
  try {
    if (const std::string why = cuda_device_unavailable_reason(); !why.empty()) {
      im.set_status(CuptiState::kInactive, "inactive: no CUDA device (" + why + ")");
      im.recorder.record_collector_stats(im.snapshot());
      return CuptiState::kInactive;
    }
    Impl* expected = nullptr;
    if (!g_active.compare_exchange_strong(expected, &im)) {
      im.set_status(CuptiState::kDisabled, "disabled: another CuptiCollector of this process is active");
      im.recorder.record_collector_stats(im.snapshot());
      return CuptiState::kDisabled;
    }
    auto fail = [&](const char* call, CUptiResult rc) {
      for (CUpti_ActivityKind kind : im.enabled) cuptiActivityDisable(kind);
      im.enabled.clear();
      g_active.store(nullptr);
      const std::string line = describe_cupti_failure(call, rc);
      std::fprintf(stderr, "hybridscope: CUPTI %s\n", line.c_str());
      im.set_status(CuptiState::kDisabled, line);
      im.recorder.record_collector_stats(im.snapshot());
      return CuptiState::kDisabled;
    };
    if (CUptiResult rc = cuptiActivityRegisterTimestampCallback(&Impl::timestamp); rc != CUPTI_SUCCESS)
      return fail("cuptiActivityRegisterTimestampCallback", rc);
    if (CUptiResult rc = cuptiActivityRegisterCallbacks(&Impl::on_buffer_requested, &Impl::on_buffer_completed);
        rc != CUPTI_SUCCESS)
      return fail("cuptiActivityRegisterCallbacks", rc);
    std::vector<CUpti_ActivityKind> kinds = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                             CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_OVERHEAD};
    if (im.options.runtime_api) kinds.push_back(CUPTI_ACTIVITY_KIND_RUNTIME);
    if (im.options.correlate_ranges) kinds.push_back(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION);
    for (CUpti_ActivityKind kind : kinds) {
      if (CUptiResult rc = cuptiActivityEnable(kind); rc != CUPTI_SUCCESS) return fail("cuptiActivityEnable", rc);
      im.enabled.push_back(kind);
    }
#if CUPTI_API_VERSION >= 130000
    // Kineto's advice: the device and error queries frameworks call around every launch are
    // noise that costs records. Best effort: a failure leaves them recorded.
    if (im.options.runtime_api)
      for (CUpti_CallbackId cbid :
           {CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020, CUPTI_RUNTIME_TRACE_CBID_cudaSetDevice_v3020,
            CUPTI_RUNTIME_TRACE_CBID_cudaGetDeviceCount_v3020, CUPTI_RUNTIME_TRACE_CBID_cudaGetLastError_v3020,
            CUPTI_RUNTIME_TRACE_CBID_cudaPeekAtLastError_v3020, CUPTI_RUNTIME_TRACE_CBID_cudaDeviceGetAttribute_v5000,
            CUPTI_RUNTIME_TRACE_CBID_cudaStreamIsCapturing_v10000})
        cuptiActivityEnableRuntimeApi(cbid, 0);
#endif
    if (im.options.correlate_ranges) set_range_observer(&im.observer);
    im.set_status(CuptiState::kActive, "active");
    im.recorder.record_collector_stats(im.snapshot());
    return CuptiState::kActive;
  } catch (...) {
    Impl* self = &im;
    g_active.compare_exchange_strong(self, nullptr);
    im.set_status(CuptiState::kDisabled, "disabled: out of memory while starting");
    return CuptiState::kDisabled;
  }
}

void CuptiCollector::flush() noexcept {
  Impl& im = *impl_;
  if (im.state.load() != CuptiState::kActive) return;
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  // Ranges that launched nothing since the last buffer still get their rows.
  try {
    GpuActivityBatch batch;
    im.take_pending_ranges(batch);
    im.recorder.record_gpu_activity(std::move(batch));
    im.recorder.record_collector_stats(im.snapshot());
  } catch (...) {
  }
}

void CuptiCollector::stop() noexcept {
  Impl& im = *impl_;
  if (im.state.load() != CuptiState::kActive) return;  // inactive and disabled keep saying why
  const RangeObserver* expected = &im.observer;
  if (range_observer() == expected) set_range_observer(nullptr);
  for (CUpti_ActivityKind kind : im.enabled) cuptiActivityDisable(kind);
  im.enabled.clear();
  flush();
  im.set_status(CuptiState::kStopped, "stopped");
  im.recorder.record_collector_stats(im.snapshot());
  g_active.store(nullptr);
}

CuptiState CuptiCollector::state() const noexcept { return impl_->state.load(); }

std::string CuptiCollector::status() const {
  std::lock_guard<std::mutex> lock(impl_->status_mutex);
  return impl_->status;
}

CollectorStats CuptiCollector::stats() const { return impl_->snapshot(); }

}  // namespace hs::probes
