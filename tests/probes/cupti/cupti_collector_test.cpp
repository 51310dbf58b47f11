// cupti_collector_test.cpp — what of the CUPTI collector runs without a GPU: CUPTI activity
// records built in memory with known fields go through the buffer parser into SQLite (names
// interned, kinds mapped, NCCL classified, kernels mapped to their range through external
// correlation, timestamps passed through); the buffer pool's cap and refusal counts; start()
// with no CUDA device degrading to "inactive"; the message for CUPTI error 39.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "../../test_db.h"
#include "hybridscope/probes/activity_buffer_pool.h"
#include "hybridscope/probes/cupti_collector.h"
#include "hybridscope/probes/cupti_records.h"
#include "hybridscope/probes/range_observer.h"
#include "hybridscope/probes/recorder.h"

using namespace hs::probes;
namespace cu = hs::probes::cupti;

namespace {

// Appends `record` to `buffer` the way CUPTI packs them: back to back, 8-byte aligned.
template <typename Record>
void append(std::vector<std::uint8_t>& buffer, const Record& record) {
  static_assert(sizeof(Record) % ActivityBufferPool::kAlignment == 0);
  const std::size_t at = buffer.size();
  buffer.resize(at + sizeof(Record));
  std::memcpy(buffer.data() + at, &record, sizeof(Record));
}

cu::KernelRecord kernel(const char* name, std::uint32_t stream, std::uint32_t correlation, std::uint64_t start,
                        std::uint64_t end) {
  cu::KernelRecord k;
  std::memset(&k, 0, sizeof(k));
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.deviceId = 0;
  k.contextId = 1;
  k.streamId = stream;
  k.correlationId = correlation;
  k.start = start;
  k.end = end;
  k.name = name;
  k.gridX = 120, k.gridY = 2, k.gridZ = 1;
  k.blockX = 128, k.blockY = 1, k.blockZ = 1;
  k.registersPerThread = 64;
  k.staticSharedMemory = 4096;
  k.dynamicSharedMemory = 256;
  return k;
}

// One step's worth of activity: a range "gen" (external id 9) launched a GEMM through
// cudaLaunchKernel; an NCCL all-reduce kernel ran outside any range; a host-to-device copy and a
// memset; one CUPTI overhead record and one external correlation of a kind that is not ours.
std::vector<std::uint8_t> step_buffer(std::string& gemm_name, std::string& nccl_name) {
  std::vector<std::uint8_t> b;
  cu::ExternalCorrelationRecord ext;
  std::memset(&ext, 0, sizeof(ext));
  ext.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
  ext.externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;
  ext.externalId = 9;
  ext.correlationId = 100;
  append(b, ext);
  ext.externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1;  // someone else's: left out
  ext.externalId = 12345;
  append(b, ext);
  cu::ApiRecord api;
  std::memset(&api, 0, sizeof(api));
  api.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
  api.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
  api.start = 5'000'000'100;
  api.end = 5'000'000'900;
  api.processId = 4242;
  api.threadId = 4243;
  api.correlationId = 100;
  api.returnValue = 0;
  append(b, api);
  append(b, kernel(gemm_name.c_str(), 7, 100, 5'000'001'000, 5'000'003'500));
  append(b, kernel(nccl_name.c_str(), 13, 101, 5'000'004'000, 5'000'009'000));
  cu::MemcpyRecord copy;
  std::memset(&copy, 0, sizeof(copy));
  copy.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  copy.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
  copy.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
  copy.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  copy.bytes = 3 << 20;
  copy.start = 5'000'010'000;
  copy.end = 5'000'012'000;
  copy.contextId = 1;
  copy.streamId = 7;
  copy.correlationId = 102;
  append(b, copy);
  cu::MemsetRecord set;
  std::memset(&set, 0, sizeof(set));
  set.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  set.value = 0;
  set.bytes = 8192;
  set.start = 5'000'013'000;
  set.end = 5'000'013'200;
  set.contextId = 1;
  set.streamId = 7;
  set.correlationId = 103;
  set.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  append(b, set);
  cu::OverheadRecord over;
  std::memset(&over, 0, sizeof(over));
  over.kind = CUPTI_ACTIVITY_KIND_OVERHEAD;
  over.overheadKind = CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH;
  over.start = 5'000'020'000;
  over.end = 5'000'021'000;
  append(b, over);
  return b;
}

}  // namespace

TEST(CuptiRecords, BufferOfRecordsBecomesRowsWithNamesKindsClassesAndRanges) {
  // The names live in strings that die before the recorder writes: stable_name() must copy them.
  auto gemm_name = std::make_unique<std::string>("_Z12sgemm_128x64PfS_S_");
  auto nccl_name =
      std::make_unique<std::string>("_Z39ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE");
  std::vector<std::uint8_t> buffer = step_buffer(*gemm_name, *nccl_name);

  GpuActivityBatch batch;
  const std::size_t seen = cu::parse_buffer(buffer.data(), buffer.size(), batch);
  EXPECT_EQ(seen, 8u);
  ASSERT_EQ(batch.kernels.size(), 2u);
  ASSERT_EQ(batch.external_correlations.size(), 1u);  // CUSTOM1 left out
  ASSERT_EQ(batch.runtime_api.size(), 1u);
  EXPECT_EQ(batch.memcpys.size(), 1u);
  EXPECT_EQ(batch.memsets.size(), 1u);
  EXPECT_EQ(batch.overhead.size(), 1u);
  EXPECT_NE(batch.kernels[0].name, gemm_name->c_str());  // a copy, not CUPTI's pointer
  gemm_name->assign(gemm_name->size(), 'x');
  nccl_name.reset();
  // What the range observer adds for external id 9 (the range "gen" at depth 1 on thread 4243).
  batch.correlation_ranges.push_back({9, 4243, 1, 5'000'000'000, "gen"});

  const auto path = hs::test::temp_db("cupti_collector_test", "records.sqlite");
  {
    Recorder rec(path, /*rank=*/1);
    rec.begin_run({"cupti", "cmd", "", 2, "t", {}});
    rec.record_gpu_activity(std::move(batch));
    rec.end_run(RunStatus::kCompleted);
    EXPECT_EQ(rec.write_errors(), 0);
  }
  using hs::test::query_rows;
  EXPECT_EQ(query_rows(path,
                       "SELECT k.rank, k.device, k.context, k.stream, k.correlation_id, k.start_ns, k.end_ns, s.value, "
                       "h.value, c.name, k.grid_x, k.grid_y, k.block_x, k.registers_per_thread, "
                       "k.static_shared_memory, k.dynamic_shared_memory FROM kernels k JOIN strings s ON "
                       "s.id = k.name_id JOIN strings h ON h.id = k.short_name_id "
                       "JOIN kernel_classes c ON c.id = k.class_id ORDER BY k.start_ns"),
            (std::vector<std::string>{
                "1|0|1|7|100|5000001000|5000003500|_Z12sgemm_128x64PfS_S_|sgemm_128x64|compute|120|2|128|64|4096|256",
                "1|0|1|13|101|5000004000|5000009000|"
                "_Z39ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE|"
                "ncclDevKernel_AllReduce_Sum_f32_RING_LL|nccl|120|2|128|64|4096|256"}));
  EXPECT_EQ(query_rows(path,
                       "SELECT m.stream, m.correlation_id, m.start_ns, m.end_ns, m.bytes, k.label, s.label, d.label "
                       "FROM memcpy m JOIN memcpy_kinds k ON k.id = m.copy_kind_id JOIN memory_kinds s ON "
                       "s.id = m.src_kind_id JOIN memory_kinds d ON d.id = m.dst_kind_id"),
            std::vector<std::string>{"7|102|5000010000|5000012000|3145728|Host-to-Device|Pinned|Device"});
  EXPECT_EQ(query_rows(path, "SELECT stream, correlation_id, start_ns, end_ns, bytes, value, memory_kind_id FROM memset"),
            std::vector<std::string>{"7|103|5000013000|5000013200|8192|0|3"});
  // The runtime API name comes from CUPTI's callback table (a lookup that needs no device).
  EXPECT_EQ(query_rows(path,
                       "SELECT a.tid, a.correlation_id, a.cbid, s.value, a.start_ns, a.end_ns, a.return_value "
                       "FROM runtime_api a JOIN strings s ON s.id = a.name_id"),
            std::vector<std::string>{"4243|100|211|cudaLaunchKernel_v7000|5000000100|5000000900|0"});
  // The GEMM maps to the range that launched it; the NCCL kernel to none.
  EXPECT_EQ(query_rows(path,
                       "SELECT k.correlation_id, COALESCE(s.value, '-') FROM kernels k LEFT JOIN external_correlations e "
                       "ON e.run_id = k.run_id AND e.rank = k.rank AND e.correlation_id = k.correlation_id "
                       "LEFT JOIN correlation_ranges r ON r.run_id = e.run_id AND r.rank = e.rank AND "
                       "r.external_id = e.external_id LEFT JOIN strings s ON s.id = r.name_id ORDER BY k.start_ns"),
            (std::vector<std::string>{"100|gen", "101|-"}));
  EXPECT_EQ(query_rows(path, "SELECT s.value, o.start_ns, o.end_ns FROM cupti_overhead o JOIN strings s ON s.id = o.kind_id"),
            std::vector<std::string>{"cupti_buffer_flush|5000020000|5000021000"});
}

TEST(CuptiRecords, StableNameCopiesOncePerDistinctName) {
  std::string a = "kernel_a";
  const char* first = cu::stable_name(a.c_str());
  const char* again = cu::stable_name(std::string("kernel_a").c_str());
  EXPECT_EQ(first, again);
  EXPECT_NE(first, a.c_str());
  EXPECT_STREQ(first, "kernel_a");
  EXPECT_STREQ(cu::stable_name(nullptr), "");
  EXPECT_STREQ(cu::overhead_kind_name(CUPTI_ACTIVITY_OVERHEAD_DRIVER_COMPILER), "driver_compiler");
}

TEST(CuptiRecords, ShortKernelNamesDropReturnTypeScopesTemplatesAndParameters) {
  EXPECT_STREQ(cu::short_kernel_name("_Z12sgemm_128x64PfS_S_"), "sgemm_128x64");
  // void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, ...>(int, ...)
  EXPECT_STREQ(cu::short_kernel_name("_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEESt5arrayI"
                                     "PcLm1EEEEviT0_T1_"),
               "vectorized_elementwise_kernel");
  EXPECT_STREQ(cu::short_kernel_name("_ZN12_GLOBAL__N_18fused_opEPf"), "fused_op");  // (anonymous namespace)::
  EXPECT_STREQ(cu::short_kernel_name("ampere_sgemm_128x64_nn"), "ampere_sgemm_128x64_nn");  // not mangled
  EXPECT_STREQ(cu::short_kernel_name("Memset (Device)"), "Memset (Device)");
  const char* once = cu::short_kernel_name("_Z12sgemm_128x64PfS_S_");
  EXPECT_EQ(once, cu::short_kernel_name(std::string("_Z12sgemm_128x64PfS_S_").c_str()));  // cached
}

TEST(ActivityBufferPool, CapRefusesAndCountsAndReleasedBuffersAreReused) {
  ActivityBufferPool pool(/*buffer_bytes=*/1000, /*max_outstanding_bytes=*/3000);
  EXPECT_EQ(pool.buffer_bytes(), 1000u);  // already a multiple of 8
  std::uint8_t* a = pool.acquire();
  std::uint8_t* b = pool.acquire();
  std::uint8_t* c = pool.acquire();
  ASSERT_TRUE(a && b && c);
  for (auto* p : {a, b, c}) EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % ActivityBufferPool::kAlignment, 0u);
  EXPECT_EQ(pool.acquire(), nullptr);  // 4000 > 3000
  EXPECT_EQ(pool.acquire(), nullptr);
  EXPECT_EQ(pool.requested(), 5);
  EXPECT_EQ(pool.refused(), 2);
  EXPECT_EQ(pool.outstanding_bytes(), 3000u);
  pool.release(b);
  EXPECT_EQ(pool.outstanding_bytes(), 2000u);
  EXPECT_EQ(pool.acquire(), b);  // reused, not allocated again
  EXPECT_EQ(pool.peak_outstanding_bytes(), 3000u);
  pool.release(a);
  pool.release(b);
  pool.release(c);
  EXPECT_EQ(pool.outstanding_bytes(), 0u);
  EXPECT_EQ(ActivityBufferPool(1001, 1 << 20).buffer_bytes(), 1000u);  // rounded down to the alignment
}

TEST(CuptiCollector, StartWithoutADeviceIsInactiveAndSaysWhy) {
  const std::string why = cuda_device_unavailable_reason();
  if (why.empty()) GTEST_SKIP() << "a CUDA device is present: this test is for machines without one";
  const auto path = hs::test::temp_db("cupti_collector_test", "inactive.sqlite");
  {
    Recorder rec(path, 0);
    rec.begin_run({"cupti_inactive", "cmd", "", 1, "t", {}});
    CuptiCollector collector(rec);
    EXPECT_EQ(collector.state(), CuptiState::kStopped);
    EXPECT_EQ(collector.start(), CuptiState::kInactive);
    EXPECT_EQ(collector.state(), CuptiState::kInactive);
    EXPECT_EQ(collector.status(), "inactive: no CUDA device (" + why + ")");
    EXPECT_EQ(range_observer(), nullptr);  // nothing installed
    collector.flush();                     // no-ops
    collector.stop();
    EXPECT_EQ(collector.state(), CuptiState::kInactive);
    const CollectorStats stats = collector.stats();
    EXPECT_EQ(stats.buffers_requested, 0);
    EXPECT_EQ(stats.records, 0);
    rec.end_run(RunStatus::kCompleted);
  }
  const auto rows = hs::test::query_rows(
      path, "SELECT s.value, c.buffers_requested, c.records FROM collector_stats c JOIN strings s ON s.id = c.status_id");
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0], "inactive: no CUDA device (" + why + ")|0|0");
  EXPECT_EQ(hs::test::query_rows(path, "SELECT COUNT(*) FROM kernels"), std::vector<std::string>{"0"});
}

TEST(CuptiCollector, AnotherSubscriberIsExplainedInOneLine) {
  const std::string line =
      describe_cupti_failure("cuptiActivityEnable", CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
  EXPECT_EQ(line.rfind("disabled: cuptiActivityEnable failed with CUPTI error 39 (", 0), 0u) << line;
  EXPECT_NE(line.find("another tool owns CUPTI (nsys, ncu or the PyTorch profiler"), std::string::npos) << line;
  EXPECT_NE(line.find("the run goes on without GPU activity records"), std::string::npos) << line;
  EXPECT_EQ(line.find('\n'), std::string::npos);
  EXPECT_EQ(describe_cupti_failure("cuptiActivityRegisterCallbacks", CUPTI_ERROR_NOT_INITIALIZED).find("another tool"),
            std::string::npos);
}
