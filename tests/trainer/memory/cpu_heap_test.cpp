// The CPU heap's prefault and its cache of large freed blocks (trainer/memory/cpu_heap.h). After
// the prefault, the heap's next growth is served from pages already resident, measured on the
// process's resident set (/proc/self/statm), which counts a page once it has been touched,
// whatever the page size.
#include "hybridscope/trainer/memory/cpu_heap.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "hybridscope/trainer/memory/cpu_memory_tracker.h"

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

// The CPU block cache (install_cpu_block_cache): a freed tensor above glibc's mmap threshold is
// kept and its pages serve the next tensor of its size, resident — the resident set does not grow
// for it — while a small tensor, a much smaller large one and anything past the cap go to malloc as
// before; the memory probe's tracker, installed over it, still counts every tensor's bytes.
// A float32 tensor of `mib` MiB with every page written.
torch::Tensor touched(std::int64_t mib) { return torch::ones({mib * kMiB / 4}, torch::kFloat); }

TEST(CpuBlockCache, AFreedLargeBlockServesTheNextOfItsSizeResident) {
  install_cpu_block_cache(/*cap_bytes=*/256 * kMiB);
  const auto before = cpu_block_cache_stats();
  void* first = nullptr;
  {
    auto a = touched(50);  // above the 32 MiB threshold: glibc would mmap it
    first = a.data_ptr();
  }
  EXPECT_GE(cpu_block_cache_stats().cached_bytes, 50 * kMiB) << "the freed block is kept";
  const std::int64_t r0 = resident_bytes();
  {
    auto b = touched(50);
    EXPECT_EQ(b.data_ptr(), first) << "the same block again";
    EXPECT_LT(resident_bytes() - r0, 4 * kMiB) << "its pages were resident: no new faults";
    auto c = touched(46);  // within 1/8 of 50 MiB, but the one cached block is in use: a new one
    EXPECT_NE(c.data_ptr(), first);
  }
  {
    auto d = touched(46);  // now both are cached: the tightest that holds 46 MiB with <= 1/8 spare
    auto e = touched(36);  // 50 and 46 MiB both spare more than 1/8 of 36: a fresh block
    EXPECT_NE(e.data_ptr(), first);
  }
  const auto after = cpu_block_cache_stats();
  EXPECT_GE(after.hits - before.hits, 2);
  EXPECT_GE(after.misses - before.misses, 3);
  EXPECT_LE(after.cached_bytes, 256 * kMiB) << "never above the cap";
  {
    auto small = touched(1);  // below the threshold: malloc's, never cached
    (void)small;
  }
  EXPECT_EQ(cpu_block_cache_stats().cached_bytes, after.cached_bytes);

  // The tracker wraps the cache and counts a reused block's bytes like any other.
  install_cpu_memory_tracker();
  const auto live = cpu_memory_stats().live_bytes;
  {
    auto f = touched(50);
    EXPECT_EQ(cpu_memory_stats().live_bytes - live, 50 * kMiB);
  }
  EXPECT_EQ(cpu_memory_stats().live_bytes, live);
  uninstall_cpu_memory_tracker();

  install_cpu_block_cache(0);  // a cap of 0 hands every cached block back
  EXPECT_EQ(cpu_block_cache_stats().cached_bytes, 0);
  uninstall_cpu_block_cache();
}

}  // namespace
}  // namespace hs::trainer
