// nvtx.h — the NVTX3 side of scoped ranges: domain `hybridscope`, one named NVTX category per
// probes::Category (with a colour), range names as registered strings. ScopedRange calls this;
// nothing else needs to.
//
// What it costs: nvtx_attached() is asked once per StepTimings; when no tool (Nsight Systems, ...)
// is attached a range never calls in here. With a tool, a push looks the name's registered string
// up in a lock-free table keyed by the literal's address (registration happens once per distinct
// name, on first use, under a lock) and calls nvtxDomainRangePushEx; no string is formatted.
//
// What it is not: a general NVTX wrapper (no marks, payloads or start/end ranges). Built without
// NVTX (CMake HS_WITH_NVTX=OFF, no nvtx3 headers) nvtx_attached() is false and nothing is emitted.
#pragma once

#include <cstdint>

#include "hybridscope/probes/recorder.h"

namespace hs::probes {

/// True when an NVTX tool is attached to this process. The first call initialises NVTX (which
/// loads the tool named by NVTX_INJECTION64_PATH, as nsys does), creates the `hybridscope` domain
/// and names its categories.
bool nvtx_attached() noexcept;

/// Whether this build emits NVTX at all (CMake HS_WITH_NVTX).
bool nvtx_compiled_in() noexcept;

/// The ARGB colour of a category's NVTX ranges.
std::uint32_t nvtx_color(Category category) noexcept;

namespace detail {
/// Pushes a range `name` (a string literal) of `category` in domain `hybridscope`; no-op without a tool.
void nvtx_push(const char* name, Category category) noexcept;
/// Pops the innermost `hybridscope` range of the calling thread.
void nvtx_pop() noexcept;
}  // namespace detail

}  // namespace hs::probes
