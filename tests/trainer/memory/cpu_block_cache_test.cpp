// The CPU block cache (trainer/memory/cpu_heap.h, install_cpu_block_cache): a freed tensor above
// glibc's mmap threshold is kept and its pages serve the next tensor of its size, resident — the
// process's resident set (/proc/self/statm) does not grow for it — while a small tensor, a much
// smaller large one and anything past the cap go to malloc as before; the memory probe's tracker,
// installed over it, still counts every tensor's bytes.
#include <torch/torch.h>
#include <unistd.h>

#include <fstream>

#include <gtest/gtest.h>

#include "hybridscope/trainer/memory/cpu_heap.h"
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
