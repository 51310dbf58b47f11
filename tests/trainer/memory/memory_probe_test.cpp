// memory_probe_test.cpp — the memory probe's readings: the switch's peak window over known
// allocations, the CUDA caching allocator's statistics mapped to the sample columns and the four
// fragmentation ratios (from c10's own DeviceStats struct, so a field moved by a PyTorch version
// breaks here, not on a GPU), and the timer sampler's rows.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <thread>

#include "../../test_db.h"
#include "../../../trainer/src/torch_compat.h"
#include "hybridscope/probes/recorder.h"
#include "hybridscope/probes/run_probes.h"
#include "hybridscope/trainer/memory/cpu_memory_tracker.h"
#include "hybridscope/trainer/memory/memory_probe.h"

using namespace hs::trainer;

TEST(MemoryProbe, PeakWindowSeesOnlyTheWindowAndLeavesTheStepPeak) {
  install_cpu_memory_tracker();
  ASSERT_TRUE(cpu_memory_tracker_installed());
  reset_cpu_memory_peak();
  const std::int64_t base = cpu_memory_stats().live_bytes;
  { auto before_window = torch::empty({2000}, torch::kFloat32); }  // 8000 B, freed before the window
  const MemoryPeakWindow window(-1);
  {
    auto transient = torch::empty({750}, torch::kFloat32);  // 3000 B, freed inside the window
  }
  auto kept = torch::empty({125}, torch::kFloat64);  // 1000 B
  EXPECT_EQ(window.peak_bytes() - base, 3000);
  EXPECT_EQ(cpu_memory_stats().peak_bytes - base, 8000) << "the step peak is not restarted by a window";
  const auto sample = read_memory(-1, 5, "update_actor");
  EXPECT_EQ(sample.allocated_bytes - base, 1000);
  EXPECT_EQ(sample.step, 5);
  EXPECT_STREQ(sample.phase, "update_actor");
  EXPECT_EQ(sample.reserved_bytes, -1) << "a CPU allocator has no reserve: unknown, not 0";
}

#if HS_TORCH_HAS_CUDA_ALLOCATOR
TEST(MemoryProbe, CudaAllocatorStatsMapToSampleColumnsAndFragmentation) {
  EXPECT_TRUE(cuda_allocator_stats_available());
  compat::CudaDeviceStats stats;  // c10's struct, filled as the caching allocator would
  constexpr auto kAll = compat::kAggregatePool;
  stats.allocated_bytes[kAll].current = 600;
  stats.allocated_bytes[kAll].peak = 900;
  stats.reserved_bytes[kAll].current = 1000;
  stats.active_bytes[kAll].current = 700;
  stats.inactive_split_bytes[kAll].current = 150;
  stats.allocation[kAll].allocated = 42;
  stats.num_alloc_retries = 3;
  stats.num_ooms = 1;
  stats.allocated_bytes[kAll + 1].current = 12345;  // another pool: not the aggregate
  const auto cuda = compat::aggregate_stats<CudaAllocatorStats>(stats, /*largest_free_block=*/200);
  const auto m = to_memory_sample(cuda, 0);
  EXPECT_EQ(m.device, 0);
  EXPECT_EQ(m.allocated_bytes, 600);
  EXPECT_EQ(m.peak_allocated_bytes, 900);
  EXPECT_EQ(m.reserved_bytes, 1000);
  EXPECT_EQ(m.active_bytes, 700);
  EXPECT_EQ(m.inactive_split_bytes, 150);
  EXPECT_EQ(m.largest_free_block_bytes, 200);
  EXPECT_EQ(m.num_allocs, 42);
  EXPECT_EQ(m.num_alloc_retries, 3);
  EXPECT_EQ(m.num_ooms, 1);
  const auto f = hs::probes::fragmentation(m);
  EXPECT_DOUBLE_EQ(f.reserved_slack, 1.0 - 600.0 / 1000.0);
  EXPECT_DOUBLE_EQ(f.split_fragmentation, 150.0 / 1000.0);
  EXPECT_DOUBLE_EQ(f.external_fragmentation, 1.0 - 200.0 / (1000.0 - 700.0));
}
#endif

TEST(MemoryProbe, TimerSamplerRecordsSpacedSamplesUntilDestroyed) {
  const auto path = hs::test::temp_db("memory_probe_test", "timer.sqlite");
  install_cpu_memory_tracker();
  const auto held = torch::empty({256}, torch::kFloat32);  // something live to sample
  std::int64_t taken = 0;
  {
    hs::probes::Recorder rec(path);
    rec.begin_run({});
    {
      hs::probes::RunProbes probes(&rec);
      probes.set_step(9);
      MemorySampler sampler(probes, -1, std::chrono::milliseconds(20));
      // Wait for three samples (generous deadline: a loaded machine only delays them).
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
      while (sampler.samples() < 3 && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      taken = sampler.samples();
    }
    rec.end_run(hs::probes::RunStatus::kCompleted);
  }
  ASSERT_GE(taken, 3);
  const auto rows = hs::test::query_rows(
      path, "SELECT COUNT(*), MIN(m.step), MAX(m.step), MIN(m.allocated_bytes) > 0 FROM memory_samples m "
            "JOIN strings p ON p.id = m.phase_id WHERE p.value = 'timer' AND m.device = -1");
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_GE(std::stoll(rows[0].substr(0, rows[0].find('|'))), 3);
  EXPECT_EQ(rows[0].substr(rows[0].find('|')), "|9|9|1");
  // Ticks are at least one interval apart (a late tick is skipped, never bunched).
  EXPECT_EQ(hs::test::query_rows(path, "SELECT COUNT(*) FROM (SELECT ts_ns - LAG(ts_ns) OVER (ORDER BY ts_ns) AS gap "
                                       "FROM memory_samples) WHERE gap < 19000000"),
            std::vector<std::string>{"0"});
}
