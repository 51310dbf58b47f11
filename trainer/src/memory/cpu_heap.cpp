// cpu_heap.cpp — glibc malloc's thresholds for CPU ranks and the heap's prefault (cpu_heap.h).
#include "hybridscope/trainer/memory/cpu_heap.h"

#include <malloc.h>

#include <cstdlib>
#include <new>
#include <vector>

namespace hs::trainer {

namespace {
// Below the mmap threshold, so every block comes from the heap; small enough to fill the holes an
// earlier step left (a hole smaller than a block is not reused by the prefault).
constexpr std::int64_t kBlock = 4LL * 1024 * 1024;
constexpr std::int64_t kPage = 4096;  // the smallest page; a larger one is written more than once
}  // namespace

void configure_cpu_heap() {
  mallopt(M_MMAP_THRESHOLD, static_cast<int>(kCpuHeapMmapThreshold));
  mallopt(M_TRIM_THRESHOLD, -1);  // never hand the heap's top back to the kernel
}

std::int64_t prefault_cpu_heap(std::int64_t bytes) {
  if (bytes <= 0) return 0;
  // Setting either threshold by hand also stops glibc's dynamic adjustment of both.
  configure_cpu_heap();
  std::vector<void*> blocks;
  blocks.reserve(static_cast<std::size_t>((bytes + kBlock - 1) / kBlock));
  std::int64_t touched = 0;
  struct Release {
    std::vector<void*>& blocks;
    ~Release() {
      for (void* b : blocks) std::free(b);
    }
  } release{blocks};
  while (touched < bytes) {
    void* block = std::malloc(static_cast<std::size_t>(kBlock));
    if (block == nullptr) throw std::bad_alloc();
    blocks.push_back(block);
    // One write per page faults it in (the kernel zeroes it); volatile, so that the compiler
    // keeps the writes of a block it sees freed unread.
    volatile char* page = static_cast<char*>(block);
    for (std::int64_t offset = 0; offset < kBlock; offset += kPage) page[offset] = 0;
    touched += kBlock;
  }
  return touched;
}

}  // namespace hs::trainer
