// cupti_collector.h — GPU activity tracing with CUPTI's Activity API, the way Kineto does it
// (hs_cupti; built only where CMake finds the CUDA toolkit's CUPTI, see docs/building.md).
//
// start() enables CONCURRENT_KERNEL, MEMCPY, MEMSET, RUNTIME, EXTERNAL_CORRELATION and OVERHEAD
// records, registers probes::now_ns() as CUPTI's clock (GPU and CPU records share one timeline)
// and installs a range observer that pushes one external correlation id per scoped range, so each
// kernel maps to the range that launched it (docs/schema.md, correlation_ranges). CUPTI fills
// buffers handed out by an ActivityBufferPool (4 MiB each, 128 MiB outstanding at most: beyond
// the cap CUPTI drops records and counts them); each completed buffer is parsed into a
// GpuActivityBatch and queued on the Recorder, whose writer thread does the SQLite work. flush()
// at every step end forces CUPTI to hand over what it holds and records the counters
// (collector_stats).
//
// It never throws and never stops the run: with no CUDA device start() reports "inactive: no
// CUDA device"; when CUPTI refuses (another tool such as nsys, ncu or the PyTorch profiler owns
// it: CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED, 39) it says so once on stderr and the run
// goes on without GPU activity. One collector can be active per process (CUPTI's callbacks are
// process-wide).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "hybridscope/probes/gpu_activity.h"
#include "hybridscope/probes/recorder.h"

namespace hs::probes {

struct CuptiOptions {
  /// Bytes per activity buffer (CUPTI recommends 1-10 MB; Kineto uses 4 MB).
  std::size_t buffer_bytes = std::size_t{4} << 20;
  /// Most bytes of buffers handed to CUPTI and not yet parsed (Kineto's cap: 128 MB).
  std::size_t max_outstanding_bytes = std::size_t{128} << 20;
  /// Record CUDA runtime API calls (the launches kernels correlate with), less the device and
  /// error queries frameworks make around every launch (cudaGetDevice, cudaGetLastError, ...).
  bool runtime_api = true;
  /// Push an external correlation id per scoped range (kernels -> ranges).
  bool correlate_ranges = true;
};

enum class CuptiState {
  kStopped,   // not started, or stopped
  kActive,    // recording
  kInactive,  // no CUDA device: nothing to record
  kDisabled,  // CUPTI refused (another subscriber, missing privileges, ...): running without it
};

class CuptiCollector {
 public:
  /// `recorder` must outlive the collector.
  explicit CuptiCollector(Recorder& recorder, CuptiOptions options = {});
  /// stop()s.
  ~CuptiCollector();
  CuptiCollector(const CuptiCollector&) = delete;
  CuptiCollector& operator=(const CuptiCollector&) = delete;

  /// Starts tracing when a CUDA device is present and CUPTI accepts; otherwise records why in
  /// status() (and in collector_stats) and does nothing else. Never throws.
  CuptiState start() noexcept;
  /// Hands every buffer CUPTI holds to the recorder (cuptiActivityFlushAll, forced) and records
  /// the counters. Call at step end, before Recorder::flush(). No-op unless active.
  void flush() noexcept;
  /// Disables the activity kinds, flushes and removes the range observer. Idempotent.
  void stop() noexcept;

  CuptiState state() const noexcept;
  /// "active", "inactive: no CUDA device (...)", "disabled: ..." or "stopped".
  std::string status() const;
  /// The counters now (cumulative since start()).
  CollectorStats stats() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

/// Why no CUDA device can be traced ("" when one can): the driver (libcuda.so.1) is loaded at run
/// time, so hs_cupti links no CUDA runtime of its own and a machine without a driver is simply
/// "no device".
std::string cuda_device_unavailable_reason();

/// The one line said when a CUPTI call fails: names the call, CUPTI's error and what it means for
/// the run. Error 39 (another subscriber) gets its own explanation.
std::string describe_cupti_failure(const char* call, int cupti_result);

}  // namespace hs::probes
