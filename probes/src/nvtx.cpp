#include "hybridscope/probes/nvtx.h"

#include <atomic>
#include <cstddef>
#include <cstring>
#include <mutex>

#if HS_WITH_NVTX
#include <nvtx3/nvToolsExt.h>
#endif

namespace hs::probes {

std::uint32_t nvtx_color(Category category) noexcept {
  switch (category) {  // ARGB, one hue per category, as Nsight Systems draws them
    case Category::kStep: return 0xFF4E79A7;        // blue
    case Category::kPhase: return 0xFF59A14F;       // green
    case Category::kSwitch: return 0xFFE15759;      // red
    case Category::kCheckpoint: return 0xFFF28E2B;  // orange
    case Category::kValidation: return 0xFFB07AA1;  // purple
    case Category::kSetup: return 0xFF9C755F;       // brown
    case Category::kOp: return 0xFFBAB0AC;          // grey (imported traces only)
  }
  return 0xFFBAB0AC;  // grey
}

#if HS_WITH_NVTX

namespace {

nvtxDomainHandle_t domain() noexcept {
  // A tool that is not attached leaves nvtxDomainCreateA a no-op returning null: that null is
  // how nvtx_attached() knows, and why a range then never calls in here.
  static const nvtxDomainHandle_t handle = [] {
    nvtxDomainHandle_t d = nvtxDomainCreateA("hybridscope");
    if (d)
      for (const Category category : kCategories)
        nvtxDomainNameCategoryA(d, static_cast<std::uint32_t>(category), to_string(category));
    return d;
  }();
  return handle;
}

// Registered strings, keyed by the name literal's address: open addressing, lock-free reads.
// A slot's handle is stored before its key (release), so a reader that sees the key sees the
// handle. Writers hold g_register_lock; they reuse the handle of an equal string at another
// address (the same literal in two translation units) so each distinct name is registered once.
constexpr std::size_t kSlots = 1024;  // distinct range call sites; beyond that, names go as ASCII
struct Slot {
  std::atomic<const char*> key{nullptr};
  std::atomic<nvtxStringHandle_t> handle{nullptr};
};
Slot g_slots[kSlots];
std::mutex g_register_lock;

std::size_t slot_of(const char* name) noexcept {
  auto h = reinterpret_cast<std::uintptr_t>(name);
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  return static_cast<std::size_t>(h) & (kSlots - 1);
}

nvtxStringHandle_t register_slow(nvtxDomainHandle_t d, const char* name) noexcept {
  std::lock_guard<std::mutex> lock(g_register_lock);
  nvtxStringHandle_t handle = nullptr;
  std::size_t free_slot = kSlots;
  for (std::size_t probe = 0, i = slot_of(name); probe < kSlots; ++probe, i = (i + 1) & (kSlots - 1)) {
    const char* key = g_slots[i].key.load(std::memory_order_relaxed);
    if (key == name) return g_slots[i].handle.load(std::memory_order_relaxed);  // another thread won
    if (!key) {
      free_slot = i;
      break;
    }
  }
  for (const Slot& slot : g_slots) {
    const char* key = slot.key.load(std::memory_order_relaxed);
    if (key && std::strcmp(key, name) == 0) {
      handle = slot.handle.load(std::memory_order_relaxed);
      break;
    }
  }
  if (!handle) handle = nvtxDomainRegisterStringA(d, name);
  if (free_slot == kSlots || !handle) return handle;
  g_slots[free_slot].handle.store(handle, std::memory_order_relaxed);
  g_slots[free_slot].key.store(name, std::memory_order_release);
  return handle;
}

nvtxStringHandle_t registered(nvtxDomainHandle_t d, const char* name) noexcept {
  for (std::size_t probe = 0, i = slot_of(name); probe < kSlots; ++probe, i = (i + 1) & (kSlots - 1)) {
    const char* key = g_slots[i].key.load(std::memory_order_acquire);
    if (key == name) return g_slots[i].handle.load(std::memory_order_relaxed);
    if (!key) break;
  }
  return register_slow(d, name);
}

}  // namespace

bool nvtx_attached() noexcept { return domain() != nullptr; }
bool nvtx_compiled_in() noexcept { return true; }

namespace detail {

void nvtx_push(const char* name, Category category) noexcept {
  const nvtxDomainHandle_t d = domain();
  if (!d) return;
  nvtxEventAttributes_t attributes{};
  attributes.version = NVTX_VERSION;
  attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  attributes.category = static_cast<std::uint32_t>(category);
  attributes.colorType = NVTX_COLOR_ARGB;
  attributes.color = nvtx_color(category);
  if (const nvtxStringHandle_t handle = registered(d, name)) {
    attributes.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
    attributes.message.registered = handle;
  } else {  // the tool registers no strings, or more than kSlots distinct call sites
    attributes.messageType = NVTX_MESSAGE_TYPE_ASCII;
    attributes.message.ascii = name;
  }
  nvtxDomainRangePushEx(d, &attributes);
}

void nvtx_pop() noexcept {
  if (const nvtxDomainHandle_t d = domain()) nvtxDomainRangePop(d);
}

}  // namespace detail

#else  // built without NVTX

bool nvtx_attached() noexcept { return false; }
bool nvtx_compiled_in() noexcept { return false; }

namespace detail {
void nvtx_push(const char*, Category) noexcept {}
void nvtx_pop() noexcept {}
}  // namespace detail

#endif

}  // namespace hs::probes
