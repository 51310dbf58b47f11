// cupti_records.h — CUPTI activity records to hybridscope's plain GPU records. The record structs
// change between CUDA releases (CUpti_ActivityKernel9 -> 10, Memcpy5 -> 6, ...): the aliases below
// pick the newest the installed CUPTI headers define, in one place. CUPTI writes records of the
// version matching the library, which is the version of these headers at build time.
#pragma once

#include <cupti.h>

#include <cstddef>
#include <cstdint>

#include "hybridscope/probes/gpu_activity.h"

namespace hs::probes::cupti {

#if CUPTI_API_VERSION >= 130000  // CUDA 13.x
using KernelRecord = CUpti_ActivityKernel10;
using MemcpyRecord = CUpti_ActivityMemcpy6;
using MemsetRecord = CUpti_ActivityMemset4;
using OverheadRecord = CUpti_ActivityOverhead3;
#elif CUPTI_API_VERSION >= 18  // CUDA 12.x
using KernelRecord = CUpti_ActivityKernel9;
using MemcpyRecord = CUpti_ActivityMemcpy5;
using MemsetRecord = CUpti_ActivityMemset4;
using OverheadRecord = CUpti_ActivityOverhead;
#else
#error "hs_cupti needs CUPTI from CUDA 12 or newer (CUpti_ActivityKernel9); configure with -DHS_WITH_CUPTI=OFF"
#endif
using ApiRecord = CUpti_ActivityAPI;
using ExternalCorrelationRecord = CUpti_ActivityExternalCorrelation;

/// A copy of `name` that lives as long as the process, one per distinct name (kernel names are a
/// bounded set). CUPTI's own strings go away with their module; the recorder writes later.
const char* stable_name(const char* name);

/// Nsight Systems' "short name" of a kernel: demangled, cut at its parameter list, without return
/// type, namespaces and template arguments (`_ZN2at6native18elementwise_kernelILi128ELi4EZ...` ->
/// `elementwise_kernel`). A name that does not demangle is its own short name. Process-lifetime
/// storage, one per distinct name.
const char* short_kernel_name(const char* mangled);

/// CUPTI's name of a runtime API callback id ("cudaLaunchKernel_v7000"), or "cbid_<n>" when
/// CUPTI does not know it. Process-lifetime storage.
const char* runtime_api_name(std::uint32_t cbid);

/// Short name of an overhead kind ("cupti_buffer_flush", ...): a string literal.
const char* overhead_kind_name(CUpti_ActivityOverheadKind kind);

/// Appends `record` to `batch`. Returns false for a kind it does not convert (left out).
bool convert_record(const CUpti_Activity& record, GpuActivityBatch& batch);

/// Walks a completed buffer (cuptiActivityGetNextRecord) and converts every record. Returns the
/// number of records seen (converted or not).
std::size_t parse_buffer(std::uint8_t* buffer, std::size_t valid_bytes, GpuActivityBatch& batch);

}  // namespace hs::probes::cupti
