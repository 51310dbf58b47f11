// cpu_heap.h — the process heap's policy for CPU ranks (glibc malloc), and its prefault.
//
// LibTorch's CPU tensors come from malloc. A rank's heap grows over its first steps: the step's
// allocations land in different places each step (the optimizer's state appears in the first
// update, sequence lengths differ), and every page the heap grows by is first touched in the middle
// of a phase. On the demo's 1-rank cell that put 18–26 ms of page faults into the switch's
// kv_allocate for three steps, then 2.5 ms from the fourth on (docs/simulator.md, issue 37):
// measured steps that depended on the heap's history, not on the work. After the first step a rank
// therefore faults in, at once, as many bytes as that step's peak, and gives them back to malloc,
// which keeps them (trimming off): the growth the next steps would have faulted in reuses resident
// pages. The cost is one memset of the step's peak, recorded as the setup range `heap_prefault`
// at the end of step 1, and a resident set that stays at its high-water mark (as the CUDA caching
// allocator's reserved memory does).
#pragma once

#include <cstdint>

namespace hs::trainer {

/// The CPU heap's policy for the whole process: allocations below 32 MiB come from the heap rather
/// than from a fresh mmap each (LibTorch's temporaries would otherwise be mapped and unmapped on
/// every op; a 1-thread decode step on the demo model ~20 % faster), and the heap is never trimmed
/// (freed pages stay resident for the next step). Call once, before the first allocation that
/// matters (the CLI's main does).
void configure_cpu_heap();

/// The largest block configure_cpu_heap() keeps in the heap (larger ones are mmap'ed).
inline constexpr std::int64_t kCpuHeapMmapThreshold = 32LL * 1024 * 1024;
/// install_cpu_block_cache's default cap: 1 GiB of freed large blocks per process.
inline constexpr std::int64_t kCpuBlockCacheCap = 1LL << 30;

/// Freed CPU tensors of kCpuHeapMmapThreshold bytes or more kept for reuse: glibc maps each such
/// block afresh and unmaps it when freed (its mmap threshold cannot be raised past 32 MiB), so a
/// buffer a step allocates every time — fsdp's all-gather output on the demo's 4-rank cells,
/// 50.8 MB — was faulted in page by page every step. On this project's VM a fresh page costs about
/// 1.5 µs, and 4 µs or more while the guest reports freed memory to the host (Firecracker's free
/// page reporting, busy after a build has freed gigabytes): the first all-gather of each step took
/// 360–740 ms instead of 75–120 ms on a fresh machine's `make demo` (docs/simulator.md). Installed
/// as LibTorch's CPU allocator (the memory probe's tracker then wraps it); a freed block of at least
/// the threshold is kept, up to `cap_bytes` in all (the oldest handed back first), and handed out
/// again for a request it holds with at most 1/8 to spare. Blocks below the threshold go to malloc
/// as before. A second call changes the cap (0 hands every cached block back).
void install_cpu_block_cache(std::int64_t cap_bytes = kCpuBlockCacheCap);
/// Puts the allocator that was there before back and hands the cached blocks back; storage it
/// allocated is still released through it (and then freed, not kept).
void uninstall_cpu_block_cache();
struct CpuBlockCacheStats {
  std::int64_t cached_bytes = 0;  // freed blocks held now
  std::int64_t hits = 0;          // large requests served from the cache
  std::int64_t misses = 0;        // large requests that went to malloc (a fresh mapping)
};
CpuBlockCacheStats cpu_block_cache_stats();

/// Allocates `bytes` in heap blocks below the mmap threshold, writes every page, frees them: the
/// heap's free space then covers `bytes` in resident pages. Turns trimming off (configure_cpu_heap's
/// policy) so that they stay. Returns the bytes touched (0 for bytes <= 0); throws std::bad_alloc
/// when the heap cannot grow that far.
std::int64_t prefault_cpu_heap(std::int64_t bytes);

}  // namespace hs::trainer
