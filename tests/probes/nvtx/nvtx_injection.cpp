// nvtx_injection.cpp — a minimal NVTX tool (the part of Nsight Systems that NVTX loads through
// NVTX_INJECTION64_PATH) for the truth tests: it implements the domain calls hybridscope makes and
// logs each one as a line of text, which the test reads back with hs_nvtx_injection_log().
//
//   domain_create <name>
//   category <domain> <id> <name>
//   register <domain> <string>
//   push <domain> <category> <argb hex> <registered|ascii|other> <message>
//   pop <domain>
#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>

struct nvtxDomainRegistration_st {
  std::string name;
};
struct nvtxStringRegistration_st {
  std::string value;
};

namespace {

std::mutex g_lock;
std::string g_log;
std::deque<nvtxDomainRegistration_st> g_domains;  // deque: handles stay valid
std::deque<nvtxStringRegistration_st> g_strings;

const char* domain_name(nvtxDomainHandle_t d) { return d ? d->name.c_str() : "(default)"; }

void append(const std::string& line) {
  std::lock_guard<std::mutex> lock(g_lock);
  g_log += line;
  g_log += '\n';
}

nvtxDomainHandle_t NVTX_API domain_create(const char* name) {
  std::lock_guard<std::mutex> lock(g_lock);
  g_domains.push_back({name});
  g_log += std::string("domain_create ") + name + "\n";
  return &g_domains.back();
}

void NVTX_API name_category(nvtxDomainHandle_t d, uint32_t id, const char* name) {
  append(std::string("category ") + domain_name(d) + " " + std::to_string(id) + " " + name);
}

nvtxStringHandle_t NVTX_API register_string(nvtxDomainHandle_t d, const char* value) {
  std::lock_guard<std::mutex> lock(g_lock);
  g_strings.push_back({value});
  g_log += std::string("register ") + domain_name(d) + " " + value + "\n";
  return &g_strings.back();
}

int NVTX_API range_push(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  std::string type = "other", message;
  if (a->messageType == NVTX_MESSAGE_TYPE_REGISTERED) {
    type = "registered";
    message = a->message.registered->value;
  } else if (a->messageType == NVTX_MESSAGE_TYPE_ASCII) {
    type = "ascii";
    message = a->message.ascii;
  }
  char color[16];
  std::snprintf(color, sizeof color, "%08X", a->colorType == NVTX_COLOR_ARGB ? a->color : 0u);
  append(std::string("push ") + domain_name(d) + " " + std::to_string(a->category) + " " + color + " " + type + " " +
         message);
  return 0;
}

int NVTX_API range_pop(nvtxDomainHandle_t d) {
  append(std::string("pop ") + domain_name(d));
  return 0;
}

template <typename F>
void assign(NvtxFunctionTable table, unsigned size, unsigned id, F f) {
  if (id < size && table[id]) *table[id] = reinterpret_cast<NvtxFunctionPointer>(f);
}

}  // namespace

extern "C" {

// Called by NVTX on the first NVTX call of the process; 1 = attached.
__attribute__((visibility("default"))) int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_export_table) {
  const auto* callbacks = static_cast<const NvtxExportTableCallbacks*>(get_export_table(NVTX_ETID_CALLBACKS));
  if (!callbacks || callbacks->struct_size < sizeof(NvtxExportTableCallbacks)) return 0;
  NvtxFunctionTable table = nullptr;
  unsigned size = 0;
  if (!callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &table, &size) || !table) return 0;
  assign(table, size, NVTX_CBID_CORE2_DomainCreateA, &domain_create);
  assign(table, size, NVTX_CBID_CORE2_DomainNameCategoryA, &name_category);
  assign(table, size, NVTX_CBID_CORE2_DomainRegisterStringA, &register_string);
  assign(table, size, NVTX_CBID_CORE2_DomainRangePushEx, &range_push);
  assign(table, size, NVTX_CBID_CORE2_DomainRangePop, &range_pop);
  return 1;
}

// Copies the log into `buffer` (up to `capacity` bytes, NUL-terminated) and returns its length.
__attribute__((visibility("default"))) std::size_t hs_nvtx_injection_log(char* buffer, std::size_t capacity) {
  std::lock_guard<std::mutex> lock(g_lock);
  if (buffer && capacity) {
    const std::size_t n = std::min(capacity - 1, g_log.size());
    std::memcpy(buffer, g_log.data(), n);
    buffer[n] = '\0';
  }
  return g_log.size();
}

}  // extern "C"
