// samples_test.cpp — memory and KV-pool samples reach their tables with the fragmentation ratios of
// profiling-facts.md, NULL where the device does not provide the inputs.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>

#include "../test_db.h"
#include "hybridscope/probes/recorder.h"

namespace fs = std::filesystem;
using namespace hs::probes;

TEST(Fragmentation, RatiosFollowTheDefinitions) {
  MemorySample m;
  m.allocated_bytes = 60;
  m.reserved_bytes = 100;
  m.active_bytes = 80;
  m.inactive_split_bytes = 10;
  m.largest_free_block_bytes = 15;
  const auto f = fragmentation(m);
  EXPECT_DOUBLE_EQ(f.reserved_slack, 0.4);           // 1 - 60/100
  EXPECT_DOUBLE_EQ(f.split_fragmentation, 0.1);      // 10/100
  EXPECT_DOUBLE_EQ(f.external_fragmentation, 0.25);  // 1 - 15/(100 - 80)
  MemorySample cpu;
  cpu.allocated_bytes = 1234;
  const auto g = fragmentation(cpu);
  EXPECT_TRUE(std::isnan(g.reserved_slack));
  EXPECT_TRUE(std::isnan(g.split_fragmentation));
  EXPECT_TRUE(std::isnan(g.external_fragmentation));
}

TEST(Samples, MemoryAndKvPoolRowsAreWritten) {
  const auto path = hs::test::temp_db("samples_test", "samples.sqlite");
  {
    Recorder rec(path, 2);
    rec.begin_run({});
    MemorySample gpu;
    gpu.ts_ns = 1000;
    gpu.step = 4;
    gpu.phase = "gen";
    gpu.device = 0;
    gpu.allocated_bytes = 60;
    gpu.reserved_bytes = 100;
    gpu.active_bytes = 80;
    gpu.inactive_split_bytes = 10;
    gpu.largest_free_block_bytes = 15;
    gpu.num_alloc_retries = 3;
    gpu.num_ooms = 0;
    rec.record_memory(gpu);
    MemorySample cpu;
    cpu.ts_ns = 2000;
    cpu.step = 4;
    cpu.phase = "update_actor";
    cpu.allocated_bytes = 4096;
    cpu.peak_allocated_bytes = 8192;
    cpu.num_allocs = 7;
    rec.record_memory(cpu);
    KvPoolSample kv;
    kv.ts_ns = 1500;
    kv.step = 4;
    kv.phase = "gen_peak";
    kv.num_blocks = 64;
    kv.block_size = 8;
    kv.blocks_used = 40;
    kv.shared_blocks = 8;
    kv.num_sequences = 32;
    kv.tokens_stored = 300;
    kv.token_capacity_used = 320;
    kv.cache_bytes = 1 << 20;
    rec.record_kv_pool(kv);
    rec.end_run(RunStatus::kCompleted);
    EXPECT_EQ(rec.write_errors(), 0);
  }
  EXPECT_EQ(hs::test::query_row(path, "SELECT m.rank, m.step, s.value, m.device, m.allocated_bytes, m.reserved_slack, "
                      "m.split_fragmentation, m.external_fragmentation, m.num_alloc_retries FROM memory_samples m "
                      "JOIN strings s ON s.id = m.phase_id WHERE m.device = 0"),
            "2|4|gen|0|60|0.4|0.1|0.25|3");
  EXPECT_EQ(hs::test::query_row(path, "SELECT s.value, allocated_bytes, reserved_bytes, peak_allocated_bytes, num_allocs, "
                      "reserved_slack, external_fragmentation FROM memory_samples m JOIN strings s ON s.id = m.phase_id "
                      "WHERE device = -1"),
            "update_actor|4096|NULL|8192|7|NULL|NULL");
  EXPECT_EQ(hs::test::query_row(path, "SELECT s.value, num_blocks, block_size, blocks_used, shared_blocks, num_sequences, tokens_stored, "
                      "token_capacity_used, cache_bytes FROM kv_pool_samples k JOIN strings s ON s.id = k.phase_id"),
            "gen_peak|64|8|40|8|32|300|320|1048576");
}
