#include "hybridscope/probes/cupti_records.h"

#include <cxxabi.h>

#include <cstdlib>
#include <deque>
#include <mutex>
#include <string>
#include <unordered_map>

#include "hybridscope/probes/kernel_names.h"

namespace hs::probes::cupti {

namespace {

std::mutex g_names_mutex;
// Never freed: names stay valid for the recorder's writer whenever it runs.
auto* g_names = new std::unordered_map<std::string, const char*>();
auto* g_storage = new std::deque<std::string>();

std::int64_t ns(std::uint64_t t) { return static_cast<std::int64_t>(t); }

}  // namespace

const char* stable_name(const char* name) {
  if (!name) name = "";
  std::lock_guard<std::mutex> lock(g_names_mutex);
  auto it = g_names->find(name);
  if (it != g_names->end()) return it->second;
  g_storage->emplace_back(name);
  const char* stable = g_storage->back().c_str();
  g_names->emplace(g_storage->back(), stable);
  return stable;
}

namespace {

std::mutex g_short_mutex;
auto* g_short_names = new std::unordered_map<const char*, const char*>();  // stable name -> stable short name

}  // namespace

const char* short_kernel_name(const char* mangled) {
  const char* stable = stable_name(mangled);
  {
    std::lock_guard<std::mutex> lock(g_short_mutex);
    auto it = g_short_names->find(stable);
    if (it != g_short_names->end()) return it->second;
  }
  int status = 0;
  char* demangled = abi::__cxa_demangle(stable, nullptr, nullptr, &status);
  std::string demangled_name = (status == 0 && demangled) ? demangled : stable;
  std::free(demangled);
  // "(anonymous namespace)::" would be cut as a parameter list: name it without parentheses.
  for (std::size_t at; (at = demangled_name.find("(anonymous namespace)")) != std::string::npos;)
    demangled_name.replace(at, 21, "anonymous_namespace");
  const char* short_name = stable_name(short_kernel_name_of_demangled(demangled_name).c_str());
  std::lock_guard<std::mutex> lock(g_short_mutex);
  g_short_names->emplace(stable, short_name);
  return short_name;
}

const char* runtime_api_name(std::uint32_t cbid) {
  const char* name = nullptr;
  if (cuptiGetCallbackName(CUPTI_CB_DOMAIN_RUNTIME_API, cbid, &name) == CUPTI_SUCCESS && name && *name)
    return stable_name(name);
  return stable_name(("cbid_" + std::to_string(cbid)).c_str());
}

const char* overhead_kind_name(CUpti_ActivityOverheadKind kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_OVERHEAD_DRIVER_COMPILER: return "driver_compiler";
    case CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH: return "cupti_buffer_flush";
    case CUPTI_ACTIVITY_OVERHEAD_CUPTI_INSTRUMENTATION: return "cupti_instrumentation";
    case CUPTI_ACTIVITY_OVERHEAD_CUPTI_RESOURCE: return "cupti_resource";
#if CUPTI_API_VERSION >= 130000
    case CUPTI_ACTIVITY_OVERHEAD_RUNTIME_TRIGGERED_MODULE_LOADING: return "runtime_triggered_module_loading";
    case CUPTI_ACTIVITY_OVERHEAD_LAZY_FUNCTION_LOADING: return "lazy_function_loading";
    case CUPTI_ACTIVITY_OVERHEAD_COMMAND_BUFFER_FULL: return "command_buffer_full";
    case CUPTI_ACTIVITY_OVERHEAD_ACTIVITY_BUFFER_REQUEST: return "activity_buffer_request";
    case CUPTI_ACTIVITY_OVERHEAD_UVM_ACTIVITY_INIT: return "uvm_activity_init";
#endif
    default: return "unknown";
  }
}

// Where and when a kernel, copy or memset ran: the fields CUPTI's records of the three share.
template <typename Activity, typename Record>
void set_placement(Activity& a, const Record& r) {
  a.device = r.deviceId;
  a.context = r.contextId;
  a.stream = r.streamId;
  a.correlation_id = r.correlationId;
  a.start_ns = ns(r.start);
  a.end_ns = ns(r.end);
}

bool convert_record(const CUpti_Activity& record, GpuActivityBatch& batch) {
  switch (record.kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      const auto& r = reinterpret_cast<const KernelRecord&>(record);
      KernelActivity k;
      set_placement(k, r);
      k.name = stable_name(r.name);
      k.short_name = short_kernel_name(k.name);
      k.kernel_class = classify_kernel(k.name);
      k.grid[0] = r.gridX, k.grid[1] = r.gridY, k.grid[2] = r.gridZ;
      k.block[0] = r.blockX, k.block[1] = r.blockY, k.block[2] = r.blockZ;
      k.registers_per_thread = r.registersPerThread;
      k.static_shared_memory = r.staticSharedMemory;
      k.dynamic_shared_memory = r.dynamicSharedMemory;
      batch.kernels.push_back(k);
      return true;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto& r = reinterpret_cast<const MemcpyRecord&>(record);
      MemcpyActivity m;
      set_placement(m, r);
      m.bytes = static_cast<std::int64_t>(r.bytes);
      m.copy_kind = r.copyKind;
      m.src_kind = r.srcKind;
      m.dst_kind = r.dstKind;
      batch.memcpys.push_back(m);
      return true;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const auto& r = reinterpret_cast<const MemsetRecord&>(record);
      MemsetActivity m;
      set_placement(m, r);
      m.bytes = static_cast<std::int64_t>(r.bytes);
      m.value = r.value;
      m.memory_kind = r.memoryKind;
      batch.memsets.push_back(m);
      return true;
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME: {
      const auto& r = reinterpret_cast<const ApiRecord&>(record);
      RuntimeApiActivity a;
      a.tid = r.threadId;
      a.correlation_id = r.correlationId;
      a.cbid = static_cast<int>(r.cbid);
      a.name = runtime_api_name(r.cbid);
      a.start_ns = ns(r.start);
      a.end_ns = ns(r.end);
      a.return_value = r.returnValue;
      batch.runtime_api.push_back(a);
      return true;
    }
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
      const auto& r = reinterpret_cast<const ExternalCorrelationRecord&>(record);
      if (r.externalKind != CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0) return false;  // not ours
      batch.external_correlations.push_back({r.correlationId, r.externalId});
      return true;
    }
    case CUPTI_ACTIVITY_KIND_OVERHEAD: {
      const auto& r = reinterpret_cast<const OverheadRecord&>(record);
      batch.overhead.push_back({overhead_kind_name(r.overheadKind), ns(r.start), ns(r.end)});
      return true;
    }
    default:
      return false;
  }
}

std::size_t parse_buffer(std::uint8_t* buffer, std::size_t valid_bytes, GpuActivityBatch& batch) {
  std::size_t seen = 0;
  CUpti_Activity* record = nullptr;
  if (!buffer || valid_bytes == 0) return 0;
  while (cuptiActivityGetNextRecord(buffer, valid_bytes, &record) == CUPTI_SUCCESS) {
    ++seen;
    convert_record(*record, batch);
  }
  return seen;
}

}  // namespace hs::probes::cupti
