// cpu_memory_tracker_test.cpp — the tracking CPU allocator's live bytes, peak and count match
// known allocations.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "hybridscope/trainer/memory/cpu_memory_tracker.h"

using namespace hs::trainer;

TEST(CpuMemoryTracker, LiveBytesPeakAndCountMatchKnownAllocations) {
  install_cpu_memory_tracker();
  ASSERT_TRUE(cpu_memory_tracker_installed());
  const auto before = cpu_memory_stats();
  reset_cpu_memory_peak();
  {
    auto a = torch::empty({1000}, torch::kFloat32);  // 4000 bytes
    auto b = torch::empty({250, 2}, torch::kFloat64);  // 4000 bytes
    const auto during = cpu_memory_stats();
    EXPECT_EQ(during.live_bytes - before.live_bytes, 8000);
    EXPECT_EQ(during.num_allocs - before.num_allocs, 2);
    a = torch::Tensor();
    EXPECT_EQ(cpu_memory_stats().live_bytes - before.live_bytes, 4000);
  }
  const auto after = cpu_memory_stats();
  EXPECT_EQ(after.live_bytes, before.live_bytes);
  EXPECT_EQ(after.peak_bytes - before.live_bytes, 8000);
  reset_cpu_memory_peak();
  EXPECT_EQ(cpu_memory_stats().peak_bytes, after.live_bytes);
  // data written through the tracked allocation survives copies
  auto c = torch::arange(10, torch::kInt64);
  EXPECT_EQ(c.clone().sum().item<std::int64_t>(), 45);
}

// The probe-overhead benchmark's off steps take the tracker out and put it back: storage made
// while it was in is still released through it, storage made while it was out is not counted.
TEST(CpuMemoryTracker, UninstallAndReinstallKeepTheCountsTrue) {
  install_cpu_memory_tracker();
  const auto before = cpu_memory_stats();
  auto tracked = torch::empty({500}, torch::kFloat64);  // 4000 bytes
  uninstall_cpu_memory_tracker();
  EXPECT_FALSE(cpu_memory_tracker_installed());
  auto untracked = torch::empty({1000}, torch::kFloat64);  // 8000 bytes, not counted
  EXPECT_EQ(cpu_memory_stats().live_bytes - before.live_bytes, 4000);
  EXPECT_EQ(cpu_memory_stats().num_allocs - before.num_allocs, 1);
  tracked = torch::Tensor();  // freed through the tracker while it is out
  EXPECT_EQ(cpu_memory_stats().live_bytes, before.live_bytes);
  install_cpu_memory_tracker();
  ASSERT_TRUE(cpu_memory_tracker_installed());
  untracked = torch::Tensor();  // the previous allocator's deleter: no count changes
  EXPECT_EQ(cpu_memory_stats().live_bytes, before.live_bytes);
  auto again = torch::empty({250}, torch::kFloat32);  // 1000 bytes
  EXPECT_EQ(cpu_memory_stats().live_bytes - before.live_bytes, 1000);
  EXPECT_EQ(cpu_memory_stats().num_allocs - before.num_allocs, 2);
}
