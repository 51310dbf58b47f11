// gpu_activity.h — GPU activity as plain records (no CUPTI types): what the CUPTI collector
// (hs_cupti) converts CUPTI's activity records into and the recorder writes into the kernels,
// memcpy, memset, runtime_api, external_correlations, correlation_ranges, cupti_overhead and
// collector_stats tables (docs/schema.md). Times are probes::now_ns() nanoseconds: the collector
// registers now_ns() as CUPTI's timestamp source, so GPU and CPU records share one clock.
//
// Name pointers (kernel, API and overhead names) must stay valid until the recorder has written
// them: the collector hands out process-lifetime copies (cupti's own strings die with the module).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace hs::probes {

/// The `kernel_classes` enum table (HTA's classes: communication `^nccl`, memory `^Memcpy` /
/// `^Memset`, compute the rest).
enum class KernelClass : int { kCompute = 1, kNccl = 2, kMemory = 3 };

/// HTA's classification of a kernel by name: NCCL kernels are `ncclDevKernel_*` (current) or
/// `ncclKernel_*` (older) — a name starting with "nccl" or containing either prefix (CUPTI's names
/// are mangled: `_Z39ncclDevKernel_...`); memory kernels start with "Memcpy" or "Memset";
/// everything else is compute.
KernelClass classify_kernel(const char* name) noexcept;

/// One kernel execution (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL).
struct KernelActivity {
  std::uint32_t device = 0;
  std::uint32_t context = 0;
  std::uint32_t stream = 0;
  std::uint32_t correlation_id = 0;  // joins runtime_api.correlation_id (the launch)
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  const char* name = "";  // mangled, as CUPTI reports it
  const char* short_name = nullptr;  // demangled, without namespaces, templates and parameters; nullptr = name
  KernelClass kernel_class = KernelClass::kCompute;
  std::int32_t grid[3] = {0, 0, 0};
  std::int32_t block[3] = {0, 0, 0};
  std::int32_t registers_per_thread = 0;
  std::int32_t static_shared_memory = 0;   // bytes
  std::int32_t dynamic_shared_memory = 0;  // bytes
};

/// One copy (CUPTI_ACTIVITY_KIND_MEMCPY). Kinds are CUPTI's enum values (memcpy_kinds,
/// memory_kinds tables): copy 1 HtoD, 2 DtoH, 8 DtoD, 10 PtoP, ...
struct MemcpyActivity {
  std::uint32_t device = 0;
  std::uint32_t context = 0;
  std::uint32_t stream = 0;
  std::uint32_t correlation_id = 0;
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  std::int64_t bytes = 0;
  int copy_kind = 0;
  int src_kind = 0;
  int dst_kind = 0;
};

/// One memset (CUPTI_ACTIVITY_KIND_MEMSET).
struct MemsetActivity {
  std::uint32_t device = 0;
  std::uint32_t context = 0;
  std::uint32_t stream = 0;
  std::uint32_t correlation_id = 0;
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  std::int64_t bytes = 0;
  std::uint32_t value = 0;
  int memory_kind = 0;
};

/// One CUDA runtime API call (CUPTI_ACTIVITY_KIND_RUNTIME).
struct RuntimeApiActivity {
  std::int64_t tid = 0;  // CUPTI's threadId of the calling thread
  std::uint32_t correlation_id = 0;
  int cbid = 0;          // CUpti_runtime_api_trace_cbid
  const char* name = "";  // e.g. "cudaLaunchKernel_v7000"
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  std::int64_t return_value = 0;  // cudaError_t
};

/// CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: the API call `correlation_id` was made while the
/// external id `external_id` (a hybridscope range, see CorrelationRange) was on top of the stack.
struct ExternalCorrelation {
  std::uint32_t correlation_id = 0;
  std::uint64_t external_id = 0;
};

/// What an external id stands for: the range that pushed it (ranges joins on rank, tid, depth,
/// start_ns).
struct CorrelationRange {
  std::uint64_t external_id = 0;
  std::int64_t tid = 0;  // OS thread id (gettid), like ranges.tid
  int depth = 0;
  std::int64_t start_ns = 0;
  const char* name = "";  // string literal: the range's name
};

/// CUPTI's own cost (CUPTI_ACTIVITY_KIND_OVERHEAD): buffer flushes, instrumentation, ...
struct OverheadActivity {
  const char* kind = "";  // static string: "cupti_buffer_flush", "cupti_instrumentation", ...
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
};

/// The records of one parsed CUPTI buffer (or one flush), handed to the recorder in one call.
struct GpuActivityBatch {
  std::vector<KernelActivity> kernels;
  std::vector<MemcpyActivity> memcpys;
  std::vector<MemsetActivity> memsets;
  std::vector<RuntimeApiActivity> runtime_api;
  std::vector<ExternalCorrelation> external_correlations;
  std::vector<CorrelationRange> correlation_ranges;
  std::vector<OverheadActivity> overhead;

  std::size_t size() const noexcept {
    return kernels.size() + memcpys.size() + memsets.size() + runtime_api.size() + external_correlations.size() +
           correlation_ranges.size() + overhead.size();
  }
  bool empty() const noexcept { return size() == 0; }
};

/// The collector's state and counters at one moment (the `collector_stats` table); counters are
/// cumulative since start().
struct CollectorStats {
  std::int64_t ts_ns = 0;
  std::string status;  // "active", "inactive: no CUDA device", "disabled: ..."
  std::int64_t buffers_requested = 0;
  std::int64_t buffers_refused = 0;  // requests refused at the outstanding-bytes cap (CUPTI drops those records)
  std::int64_t buffers_completed = 0;
  std::int64_t records = 0;          // activity records parsed
  std::int64_t dropped_records = 0;  // cuptiActivityGetNumDroppedRecords, summed
  std::int64_t peak_buffer_bytes = 0;  // most bytes of buffers outstanding at once
};

}  // namespace hs::probes
