// cuda_live_test.cpp — the probes on a real CUDA device: CUPTI records of kernels, copies and runtime
// calls correlated to the ranges that launched them, an NCCL kernel of a one-rank NCCL communicator
// classified as communication, and the caching allocator's statistics in the memory probe.
//
// These run only where a CUDA device is (the lent GPU machine, scripts/gpu-proof.sh); elsewhere
// they skip and say why. On a GPU machine each fails when the code is wrong.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "../../test_db.h"
#include "dist/dist_test_util.h"
#include "hybridscope/probes/range.h"
#include "hybridscope/probes/recorder.h"
#include "hybridscope/trainer/memory/memory_probe.h"
#include "hybridscope/trainer/dist/process_group.h"
#include "hybridscope/trainer/model/model.h"
#include "hybridscope/trainer/rollout/rollout.h"
#if HS_HAVE_CUPTI
#include "hybridscope/probes/cupti_collector.h"
#endif

namespace hs::trainer {
namespace {

class CudaLive : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device here: these tests run on a GPU machine";
  }
};

#if HS_HAVE_CUPTI
// A run database with the CUPTI collector started, and step 1's timings recording into it.
struct CollectorSession {
  explicit CollectorSession(const char* file) : path(test::temp_db("cuda_live", file)), rec(path) {
    rec.begin_run({});
    timings.set_recorder(&rec);
  }
  /// Waits for the device, flushes the collector and the recorder, ends the run.
  void finish() {
    torch::cuda::synchronize();
    cupti.flush();
    rec.flush();
    cupti.stop();
    rec.end_run(probes::RunStatus::kCompleted);
  }
  std::string path;
  probes::Recorder rec;
  probes::StepTimings timings;
  probes::CuptiCollector cupti{rec};
};

// The joins from a kernel to the range that launched it: its runtime API call (`a`), the external
// correlation, the correlated range (`r`) and that range's name (`s`).
const char* const kKernelToRange =
    " FROM kernels k JOIN runtime_api a ON a.rank = k.rank AND a.correlation_id = k.correlation_id"
    " JOIN external_correlations e ON e.rank = k.rank AND e.correlation_id = k.correlation_id"
    " JOIN correlation_ranges cr ON cr.rank = e.rank AND cr.external_id = e.external_id"
    " JOIN ranges r ON r.rank = cr.rank AND r.tid = cr.tid AND r.depth = cr.depth AND r.start_ns = cr.start_ns"
    " JOIN strings s ON s.id = cr.name_id";

// Ranges "matmul" (kernels) and "copy_back" (a device-to-host copy) under the collector: every
// kernel and copy is tagged with its range and its launch lies inside that range.
TEST_F(CudaLive, CuptiRecordsCorrelateToTheRangesThatLaunchedThem) {
  CollectorSession session("cupti.sqlite");
  auto& timings = session.timings;
  ASSERT_EQ(session.cupti.start(), probes::CuptiState::kActive) << session.cupti.status();
  timings.begin_step(1);
  torch::Tensor host;
  {
    HS_PROBE_RANGE(timings, "matmul", kPhase);
    auto a = torch::randn({1024, 1024}, torch::kCUDA);
    auto b = torch::mm(a, a).relu_();
    {
      HS_PROBE_RANGE(timings, "copy_back", kPhase);
      host = b.to(torch::kCPU);
    }
  }
  session.finish();
  EXPECT_GT(host.abs().sum().item<double>(), 0.0);

  auto one = [&](const std::string& sql) { return test::query_row(session.path, sql); };
  EXPECT_NE(one("SELECT COUNT(*) FROM kernels"), "0");
  EXPECT_NE(one("SELECT COUNT(*) FROM runtime_api"), "0");
  // memcpy_kinds carries Nsight Systems' names (CUPTI_ACTIVITY_MEMCPY_KIND_DTOH, docs/schema.md): the
  // short 'DTOH' matched no row, which read as "no device-to-host copy recorded".
  EXPECT_NE(one("SELECT COUNT(*) FROM memcpy m JOIN memcpy_kinds k ON k.id = m.copy_kind_id"
                " WHERE k.name = 'CUPTI_ACTIVITY_MEMCPY_KIND_DTOH'"),
            "0");
  // Every kernel launched inside a range, and the launch (runtime API call) lies within that range.
  const std::string tagged = kKernelToRange;
  EXPECT_EQ(one("SELECT COUNT(*)" + tagged), one("SELECT COUNT(*) FROM kernels")) << "kernels outside every range";
  EXPECT_EQ(one("SELECT COUNT(*)" + tagged + " WHERE a.start_ns < r.start_ns OR a.end_ns > r.end_ns"), "0");
  // The GEMM ran in "matmul"; the copy in "copy_back", the innermost range.
  EXPECT_NE(one("SELECT COUNT(*)" + tagged + " WHERE s.value = 'matmul'"), "0");
  EXPECT_EQ(one("SELECT s.value FROM memcpy m JOIN external_correlations e ON e.correlation_id = m.correlation_id"
                " JOIN correlation_ranges cr ON cr.external_id = e.external_id JOIN strings s ON s.id = cr.name_id"
                " JOIN memcpy_kinds k ON k.id = m.copy_kind_id WHERE k.name = 'CUPTI_ACTIVITY_MEMCPY_KIND_DTOH' LIMIT 1"),
            "copy_back");
  EXPECT_EQ(one("SELECT COUNT(*) FROM kernels WHERE end_ns < start_ns"), "0");
}

// What one NCCL rank really launches: an in-place sum on one rank is the identity and NCCL
// launches nothing for it (ncclLaunchOneRank returns at once; the first H100 run saw only the
// tensor fill's kernel), while an average — which the communicator hands to NCCL as ncclAvg, a
// pre-multiplied sum — runs as NCCL's own one-rank kernel (oneRankReduce). That kernel is classified `nccl` (kernel_classes), not compute,
// and no kernel that NCCL launched is left as compute.
TEST_F(CudaLive, OneRankNcclAverageKernelIsClassifiedAsCommunication) {
  const auto path = test::temp_db("cuda_live", "nccl.sqlite");
  probes::Recorder rec(path);
  rec.begin_run({});
  DistEnv env;
  env.master_port = hs::trainer::free_loopback_port();
  ProcessGroupOptions options;
  options.backend = DistBackend::kNccl;
  options.timeout = std::chrono::seconds(60);
  C10dGroupFactory groups(env, options);
  auto world = groups.world();
  auto t = torch::ones({1 << 20}, torch::kCUDA);
  torch::cuda::synchronize();
  probes::CuptiCollector cupti(rec);
  ASSERT_EQ(cupti.start(), probes::CuptiState::kActive) << cupti.status();
  world->all_reduce(t, ReduceOp::kSum);
  world->all_reduce(t, ReduceOp::kAvg);
  torch::cuda::synchronize();
  cupti.flush();
  rec.flush();
  cupti.stop();
  rec.end_run(probes::RunStatus::kCompleted);
  EXPECT_EQ(t.sum().item<double>(), static_cast<double>(1 << 20)) << "a one-rank sum and average are the identity";
  const std::string seen =
      test::query_row(path, "SELECT group_concat(DISTINCT s.value) FROM kernels k JOIN strings s ON s.id = k.name_id");
  EXPECT_NE(test::query_row(path, "SELECT COUNT(*) FROM kernels k JOIN kernel_classes c ON c.id = k.class_id "
                                  "WHERE c.name = 'nccl'"),
            "0")
      << "kernels seen: " << seen;
  EXPECT_EQ(test::query_row(path, "SELECT COUNT(*) FROM kernels k JOIN kernel_classes c ON c.id = k.class_id "
                                  "JOIN strings s ON s.id = k.name_id WHERE c.name <> 'nccl' AND "
                                  "(s.value LIKE '%nccl%' OR s.value LIKE '%oneRank%')"),
            "0")
      << "kernels seen: " << seen;
}
#endif  // HS_HAVE_CUPTI

// The caching allocator's view in the memory probe: a 256 MiB tensor is allocated and reserved; once
// freed its block stays reserved and is the largest free block; the fragmentation ratios follow
// their definitions (docs/schema.md).
TEST_F(CudaLive, CachingAllocatorStatisticsFeedTheMemoryProbe) {
  ASSERT_TRUE(cuda_allocator_stats_available());
  constexpr std::int64_t kBytes = std::int64_t{256} << 20;
  auto big = torch::empty({kBytes / 4}, torch::TensorOptions().dtype(torch::kFloat).device(torch::kCUDA));
  const auto m = read_memory(0, 1, "test");
  EXPECT_EQ(m.device, 0);
  EXPECT_GE(m.allocated_bytes, kBytes);
  EXPECT_GE(m.reserved_bytes, m.allocated_bytes);
  EXPECT_GE(m.active_bytes, kBytes);
  ASSERT_GE(m.inactive_split_bytes, 0);
  ASSERT_GE(m.largest_free_block_bytes, 0);
  const auto r = probes::fragmentation(m);
  EXPECT_NEAR(r.reserved_slack, 1.0 - static_cast<double>(m.allocated_bytes) / static_cast<double>(m.reserved_bytes), 1e-12);
  EXPECT_NEAR(r.split_fragmentation, static_cast<double>(m.inactive_split_bytes) / static_cast<double>(m.reserved_bytes), 1e-12);
  for (const double ratio : {r.reserved_slack, r.split_fragmentation}) {
    EXPECT_GE(ratio, 0.0);
    EXPECT_LE(ratio, 1.0);
  }
  big.reset();
  const auto after = read_memory(0, 1, "test");
  EXPECT_LE(after.allocated_bytes, m.allocated_bytes - kBytes);
  EXPECT_EQ(after.reserved_bytes, m.reserved_bytes) << "the cache keeps the freed block";
  EXPECT_GE(after.largest_free_block_bytes, kBytes) << "the freed block is free and whole";
  const auto ra = probes::fragmentation(after);
  EXPECT_GE(ra.external_fragmentation, 0.0);
  EXPECT_LE(ra.external_fragmentation, 1.0);
}

#if HS_HAVE_CUPTI
// hybridscope.decode.cuda_graphs under the collector: a replay is one cudaGraphLaunch inside the
// decode step's range, and CUPTI reports the graph's kernels with that launch's correlation id, so
// every paged-attention kernel, replayed or run eagerly (the warm-up before a capture), is tagged
// with gen/decode_step and launched inside it.
TEST_F(CudaLive, GraphReplayedDecodeKernelsCorrelateToTheDecodeStepRange) {
  CollectorSession session("graphs.sqlite");
  auto& timings = session.timings;
  const probes::ThreadTimings on_this_thread(timings);
  ASSERT_EQ(session.cupti.start(), probes::CuptiState::kActive) << session.cupti.status();
  timings.begin_step(1);
  {
    torch::manual_seed(5);
    ModelShape shape;
    shape.vocab_size = 97;
    shape.hidden_size = 256;
    shape.intermediate_size = 256;
    shape.num_hidden_layers = 2;
    shape.num_attention_heads = 4;
    shape.num_key_value_heads = 2;
    shape.max_position_embeddings = 128;
    Transformer model(shape, HeadKind::kLm);
    model->to(torch::Device(torch::kCUDA, 0), torch::kBFloat16);
    ComputeOptions options;
    options.dtype = torch::kBFloat16;
    options.paged_decode = true;
    model->set_compute(options);
    RolloutEngine engine(model, /*eos=*/-1, 0, 16, -1, 16, 64);
    DecodeOptions decode;
    decode.device_loop = true;
    decode.cuda_graphs = true;
    engine.set_decode(decode);
    auto gen = at::make_generator<at::CPUGeneratorImpl>(1);
    HS_PROBE_RANGE(timings, "gen", kPhase);
    engine.generate(GenerationRequest{{{1, 2, 3}, {4, 5, 6, 7, 8}}, SamplingParams{1.0, -1, 1.0, 4, false}, 24}, gen);
    EXPECT_GE(engine.decode_graphs_captured(), 1);
  }
  session.finish();

  auto one = [&](const std::string& sql) { return test::query_row(session.path, sql); };
  const std::string paged = " FROM kernels k JOIN strings n ON n.id = k.name_id WHERE n.value LIKE '%paged_decode_kernel%'";
  const auto launched = one("SELECT COUNT(*)" + paged);
  EXPECT_GE(std::stoll(launched), 23 * 2) << "one kernel per layer and step, 23 steps";
  const std::string tagged =
      std::string(kKernelToRange) + " JOIN strings n ON n.id = k.name_id WHERE n.value LIKE '%paged_decode_kernel%'";
  EXPECT_EQ(one("SELECT COUNT(*)" + tagged + " AND s.value = 'gen/decode_step'"), launched)
      << "paged kernels outside the decode step's range";
  EXPECT_EQ(one("SELECT COUNT(*)" + tagged + " AND (a.start_ns < r.start_ns OR a.end_ns > r.end_ns)"), "0");
}
#endif

}  // namespace
}  // namespace hs::trainer
