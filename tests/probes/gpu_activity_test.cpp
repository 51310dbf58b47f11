// gpu_activity_test.cpp — GPU activity handed to the recorder (what the CUPTI collector produces)
// reaches kernels, memcpy, memset, runtime_api, external_correlations, correlation_ranges,
// cupti_overhead and collector_stats with every column; names are interned once; the enum tables
// hold CUPTI's values; a batch beyond the queue cap is dropped whole and counted; kernels are
// classified by name (HTA's classes, mangled NCCL names included).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "../test_db.h"
#include "hybridscope/probes/gpu_activity.h"
#include "hybridscope/probes/recorder.h"

using namespace hs::probes;

namespace {

GpuActivityBatch sample_batch() {
  GpuActivityBatch b;
  KernelActivity gemm;
  gemm.device = 1;
  gemm.context = 2;
  gemm.stream = 7;
  gemm.correlation_id = 41;
  gemm.start_ns = 10'000;
  gemm.end_ns = 12'500;
  gemm.name = "ampere_sgemm_128x64_nn";
  gemm.kernel_class = classify_kernel(gemm.name);
  gemm.grid[0] = 8, gemm.grid[1] = 4, gemm.grid[2] = 1;
  gemm.block[0] = 256, gemm.block[1] = 1, gemm.block[2] = 1;
  gemm.registers_per_thread = 96;
  gemm.static_shared_memory = 16384;
  gemm.dynamic_shared_memory = 512;
  b.kernels.push_back(gemm);
  KernelActivity nccl = gemm;
  nccl.stream = 13;
  nccl.correlation_id = 42;
  nccl.start_ns = 13'000;
  nccl.end_ns = 20'000;
  nccl.name = "_Z39ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE";
  nccl.kernel_class = classify_kernel(nccl.name);
  nccl.short_name = "ncclDevKernel_AllReduce_Sum_f32_RING_LL";
  b.kernels.push_back(nccl);
  KernelActivity again = gemm;  // the same name: one strings row
  again.correlation_id = 43;
  again.start_ns = 21'000;
  again.end_ns = 22'000;
  b.kernels.push_back(again);

  MemcpyActivity h2d;
  h2d.device = 1, h2d.context = 2, h2d.stream = 7, h2d.correlation_id = 44;
  h2d.start_ns = 23'000, h2d.end_ns = 24'000, h2d.bytes = 1 << 20;
  h2d.copy_kind = 1, h2d.src_kind = 2, h2d.dst_kind = 3;  // HtoD, pinned -> device
  b.memcpys.push_back(h2d);
  MemsetActivity zero;
  zero.device = 1, zero.context = 2, zero.stream = 7, zero.correlation_id = 45;
  zero.start_ns = 25'000, zero.end_ns = 25'100, zero.bytes = 4096, zero.value = 0, zero.memory_kind = 3;
  b.memsets.push_back(zero);

  RuntimeApiActivity launch;
  launch.tid = 777, launch.correlation_id = 41, launch.cbid = 211, launch.name = "cudaLaunchKernel_v7000";
  launch.start_ns = 9'000, launch.end_ns = 9'400, launch.return_value = 0;
  b.runtime_api.push_back(launch);
  b.external_correlations.push_back({41, 5});
  b.external_correlations.push_back({42, 6});
  b.correlation_ranges.push_back({5, 777, 1, 8'000, "gen"});
  b.correlation_ranges.push_back({6, 777, 1, 12'800, "update_actor"});
  b.overhead.push_back({"cupti_buffer_flush", 30'000, 30'700});
  return b;
}

}  // namespace

TEST(GpuActivity, ClassifiesKernelsByName) {
  EXPECT_EQ(classify_kernel("ncclDevKernel_AllGather_RING_LL"), KernelClass::kNccl);
  EXPECT_EQ(classify_kernel("ncclKernel_AllReduce_RING_LL_Sum_float"), KernelClass::kNccl);
  EXPECT_EQ(classify_kernel("_Z39ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE"),
            KernelClass::kNccl);
  EXPECT_EQ(classify_kernel("_Z20ncclKernel_AllReducev"), KernelClass::kNccl);
  EXPECT_EQ(classify_kernel("_ZN12_GLOBAL__N_113oneRankReduceI10FuncPreMulIfEEEvPvS3_mmb"), KernelClass::kNccl);
  EXPECT_EQ(classify_kernel("Memset (Device)"), KernelClass::kMemory);
  EXPECT_EQ(classify_kernel("MemcpyDtoD"), KernelClass::kMemory);
  EXPECT_EQ(classify_kernel("ampere_sgemm_128x64_nn"), KernelClass::kCompute);
  EXPECT_EQ(classify_kernel("_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_"), KernelClass::kCompute);
  EXPECT_EQ(classify_kernel(nullptr), KernelClass::kCompute);
}

TEST(GpuActivity, EveryRecordKindIsWrittenExactly) {
  const auto path = hs::test::temp_db("gpu_activity_test", "gpu.sqlite");
  {
    Recorder rec(path, /*rank=*/2);
    rec.begin_run({"gpu", "cmd", "", 4, "t", {}});
    rec.record_gpu_activity(sample_batch());
    CollectorStats stats;
    stats.ts_ns = 40'000;
    stats.status = "active";
    stats.buffers_requested = 5, stats.buffers_refused = 1, stats.buffers_completed = 4;
    stats.records = 11, stats.dropped_records = 3, stats.peak_buffer_bytes = 8 << 20;
    rec.record_collector_stats(stats);
    rec.end_run(RunStatus::kCompleted);
    EXPECT_EQ(rec.write_errors(), 0);
  }
  using hs::test::query_rows;
  EXPECT_EQ(query_rows(path,
                       "SELECT k.rank, k.device, k.context, k.stream, k.correlation_id, k.start_ns, k.end_ns, s.value, "
                       "c.name, k.grid_x, k.grid_y, k.grid_z, k.block_x, k.block_y, k.block_z, "
                       "k.registers_per_thread, k.static_shared_memory, k.dynamic_shared_memory FROM kernels k "
                       "JOIN strings s ON s.id = k.name_id JOIN kernel_classes c ON c.id = k.class_id "
                       "ORDER BY k.start_ns"),
            (std::vector<std::string>{
                "2|1|2|7|41|10000|12500|ampere_sgemm_128x64_nn|compute|8|4|1|256|1|1|96|16384|512",
                "2|1|2|13|42|13000|20000|_Z39ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE|"
                "nccl|8|4|1|256|1|1|96|16384|512",
                "2|1|2|7|43|21000|22000|ampere_sgemm_128x64_nn|compute|8|4|1|256|1|1|96|16384|512"}));
  EXPECT_EQ(query_rows(path, "SELECT COUNT(*) FROM strings WHERE value = 'ampere_sgemm_128x64_nn'"),
            std::vector<std::string>{"1"});
  // The short name: given, or the name itself.
  EXPECT_EQ(query_rows(path, "SELECT k.correlation_id, s.value FROM kernels k JOIN strings s ON s.id = k.short_name_id "
                             "ORDER BY k.start_ns"),
            (std::vector<std::string>{"41|ampere_sgemm_128x64_nn", "42|ncclDevKernel_AllReduce_Sum_f32_RING_LL",
                                      "43|ampere_sgemm_128x64_nn"}));
  EXPECT_EQ(query_rows(path,
                       "SELECT m.device, m.stream, m.correlation_id, m.start_ns, m.end_ns, m.bytes, k.name, k.label, "
                       "s.label, d.label FROM memcpy m JOIN memcpy_kinds k ON k.id = m.copy_kind_id "
                       "JOIN memory_kinds s ON s.id = m.src_kind_id JOIN memory_kinds d ON d.id = m.dst_kind_id"),
            std::vector<std::string>{
                "1|7|44|23000|24000|1048576|CUPTI_ACTIVITY_MEMCPY_KIND_HTOD|Host-to-Device|Pinned|Device"});
  EXPECT_EQ(query_rows(path,
                       "SELECT m.stream, m.correlation_id, m.start_ns, m.end_ns, m.bytes, m.value, k.label FROM memset m "
                       "JOIN memory_kinds k ON k.id = m.memory_kind_id"),
            std::vector<std::string>{"7|45|25000|25100|4096|0|Device"});
  EXPECT_EQ(query_rows(path,
                       "SELECT a.tid, a.correlation_id, a.cbid, s.value, a.start_ns, a.end_ns, a.return_value "
                       "FROM runtime_api a JOIN strings s ON s.id = a.name_id"),
            std::vector<std::string>{"777|41|211|cudaLaunchKernel_v7000|9000|9400|0"});
  // Kernels map to the range that launched them: correlation id -> external id -> range.
  EXPECT_EQ(query_rows(path,
                       "SELECT k.correlation_id, s.value, r.tid, r.depth, r.start_ns FROM kernels k "
                       "JOIN external_correlations e ON e.run_id = k.run_id AND e.rank = k.rank AND "
                       "e.correlation_id = k.correlation_id JOIN correlation_ranges r ON r.run_id = e.run_id AND "
                       "r.rank = e.rank AND r.external_id = e.external_id JOIN strings s ON s.id = r.name_id "
                       "ORDER BY k.correlation_id"),
            (std::vector<std::string>{"41|gen|777|1|8000", "42|update_actor|777|1|12800"}));
  EXPECT_EQ(query_rows(path,
                       "SELECT s.value, o.start_ns, o.end_ns FROM cupti_overhead o JOIN strings s ON s.id = o.kind_id"),
            std::vector<std::string>{"cupti_buffer_flush|30000|30700"});
  EXPECT_EQ(query_rows(path,
                       "SELECT c.rank, c.ts_ns, s.value, c.buffers_requested, c.buffers_refused, c.buffers_completed, "
                       "c.records, c.dropped_records, c.peak_buffer_bytes FROM collector_stats c "
                       "JOIN strings s ON s.id = c.status_id"),
            std::vector<std::string>{"2|40000|active|5|1|4|11|3|8388608"});
  // Enum tables: CUPTI's numbers (PtoP is 10, DtoD 8) and the kernel classes.
  EXPECT_EQ(query_rows(path, "SELECT name FROM memcpy_kinds WHERE id IN (8, 10) ORDER BY id"),
            (std::vector<std::string>{"CUPTI_ACTIVITY_MEMCPY_KIND_DTOD", "CUPTI_ACTIVITY_MEMCPY_KIND_PTOP"}));
  EXPECT_EQ(query_rows(path, "SELECT id, name FROM kernel_classes ORDER BY id"),
            (std::vector<std::string>{"1|compute", "2|nccl", "3|memory"}));
}

TEST(GpuActivity, BatchBeyondTheQueueCapIsDroppedWholeAndCounted) {
  // Deterministic whatever the writer does meanwhile: a batch larger than the whole cap can never
  // fit (the writer may drain the queue at any moment, so a "queue already full" case would race).
  const auto path = hs::test::temp_db("gpu_activity_test", "gpu_cap.sqlite");
  RecorderOptions options;
  options.max_queued_records = 10;  // the sample batch holds 11 records
  Recorder rec(path, 0, options);
  rec.begin_run({"gpu_cap", "cmd", "", 1, "t", {}});
  rec.record_gpu_activity(sample_batch());  // 11 > 10: dropped whole, 11 counted
  EXPECT_EQ(rec.dropped_records(), 11);
  GpuActivityBatch kernels_only = sample_batch();  // its 3 kernels fit
  kernels_only.memcpys.clear();
  kernels_only.memsets.clear();
  kernels_only.runtime_api.clear();
  kernels_only.external_correlations.clear();
  kernels_only.correlation_ranges.clear();
  kernels_only.overhead.clear();
  ASSERT_EQ(kernels_only.size(), 3u);
  rec.record_gpu_activity(std::move(kernels_only));
  rec.end_run(RunStatus::kCompleted);
  EXPECT_EQ(rec.dropped_records(), 11);
  EXPECT_EQ(hs::test::query_rows(path, "SELECT COUNT(*) FROM kernels"), std::vector<std::string>{"3"});
  EXPECT_EQ(hs::test::query_rows(path, "SELECT COUNT(*) FROM memcpy"), std::vector<std::string>{"0"});
  EXPECT_EQ(hs::test::query_rows(path, "SELECT dropped_records FROM runs"), std::vector<std::string>{"11"});
}

TEST(GpuActivity, LargeBatchesGoThroughMultiRowInsertsExactly) {
  // 130 kernels and launches: two 64-row statements and two single rows per table.
  const auto path = hs::test::temp_db("gpu_activity_test", "gpu_many.sqlite");
  GpuActivityBatch b;
  std::int64_t sum_duration = 0, sum_grid = 0;
  for (int i = 0; i < 130; ++i) {
    KernelActivity k;
    k.stream = static_cast<std::uint32_t>(i % 3);
    k.correlation_id = static_cast<std::uint32_t>(1000 + i);
    k.start_ns = 100 * i;
    k.end_ns = 100 * i + 7 + i;
    k.name = i % 2 ? "odd_kernel" : "even_kernel";
    k.grid[0] = i + 1;
    k.dynamic_shared_memory = i;
    sum_duration += 7 + i;
    sum_grid += i + 1;
    b.kernels.push_back(k);
    b.runtime_api.push_back({777, static_cast<std::uint32_t>(1000 + i), 211, "cudaLaunchKernel_v7000", 100 * i - 50,
                             100 * i - 10, 0});
    b.external_correlations.push_back({static_cast<std::uint32_t>(1000 + i), static_cast<std::uint64_t>(i / 10)});
  }
  {
    Recorder rec(path, 0);
    rec.begin_run({"gpu_many", "cmd", "", 1, "t", {}});
    rec.record_gpu_activity(std::move(b));
    rec.end_run(RunStatus::kCompleted);
    EXPECT_EQ(rec.write_errors(), 0);
  }
  using hs::test::query_row;
  EXPECT_EQ(query_row(path, "SELECT COUNT(*), SUM(end_ns - start_ns), SUM(grid_x), SUM(dynamic_shared_memory), "
                            "COUNT(DISTINCT correlation_id), MIN(correlation_id), MAX(correlation_id) FROM kernels"),
            "130|" + std::to_string(sum_duration) + "|" + std::to_string(sum_grid) + "|8385|130|1000|1129");
  EXPECT_EQ(query_row(path, "SELECT s.value, COUNT(*) FROM kernels k JOIN strings s ON s.id = k.name_id "
                            "WHERE k.correlation_id % 2 = 1 GROUP BY s.value"),
            "odd_kernel|65");
  // Every kernel joins its own launch and its external id (no row shifted between statements).
  EXPECT_EQ(query_row(path, "SELECT COUNT(*) FROM kernels k JOIN runtime_api a ON a.correlation_id = k.correlation_id "
                            "AND a.end_ns = k.start_ns - 10 JOIN external_correlations e ON "
                            "e.correlation_id = k.correlation_id AND e.external_id = (k.correlation_id - 1000) / 10"),
            "130");
}
