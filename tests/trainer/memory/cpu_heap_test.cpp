// The CPU heap's prefault (trainer/memory/cpu_heap.h): after it, the heap's next growth is served
// from pages already resident, measured on the process's resident set (/proc/self/statm), which
// counts a page once it has been touched, whatever the page size.
#include "hybridscope/trainer/memory/cpu_heap.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <vector>

#include <gtest/gtest.h>

namespace hs::trainer {
namespace {

constexpr std::int64_t kMiB = 1024 * 1024;

std::int64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::int64_t total = 0, resident = 0;
  statm >> total >> resident;
  return resident * sysconf(_SC_PAGESIZE);
}

// `bytes` in 4 MiB heap blocks (below the mmap threshold), every page written.
std::vector<void*> touch_blocks(std::int64_t bytes) {
  std::vector<void*> blocks;
  for (std::int64_t done = 0; done < bytes; done += 4 * kMiB) {
    auto* block = static_cast<volatile char*>(std::malloc(4 * kMiB));
    for (std::int64_t offset = 0; offset < 4 * kMiB; offset += 4096) block[offset] = 1;
    blocks.push_back(const_cast<char*>(block));
  }
  return blocks;
}

TEST(CpuHeap, PrefaultedPagesServeTheNextGrowthWithoutNewResidentPages) {
  configure_cpu_heap();
  // Control: 64 MiB of fresh heap grows the resident set by about as much (what the trainer's
  // kv_allocate paid in its first steps). Kept allocated, so the next blocks cannot reuse them.
  const std::int64_t r0 = resident_bytes();
  std::vector<void*> held = touch_blocks(64 * kMiB);
  const std::int64_t r1 = resident_bytes();
  EXPECT_GT(r1 - r0, 56 * kMiB);

  EXPECT_GE(prefault_cpu_heap(64 * kMiB), 64 * kMiB);
  const std::int64_t r2 = resident_bytes();
  EXPECT_GT(r2 - r1, 56 * kMiB) << "the prefault touched the pages: the resident set grew by them";

  // The same growth again lands on the prefaulted, freed, untrimmed pages.
  std::vector<void*> again = touch_blocks(64 * kMiB);
  const std::int64_t r3 = resident_bytes();
  EXPECT_LT(r3 - r2, 8 * kMiB) << "the heap grew into new pages instead of the prefaulted ones";
  for (void* b : held) std::free(b);
  for (void* b : again) std::free(b);
}

TEST(CpuHeap, NothingToPrefaultTouchesNothing) {
  EXPECT_EQ(prefault_cpu_heap(0), 0);
  EXPECT_EQ(prefault_cpu_heap(-5), 0);
  EXPECT_EQ(prefault_cpu_heap(1), 4 * kMiB);  // whole blocks
}

}  // namespace
}  // namespace hs::trainer
