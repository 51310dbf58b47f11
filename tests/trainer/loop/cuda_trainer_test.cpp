// cuda_trainer_test.cpp — trainer.device=cuda end to end, where there is a CUDA device: a 2-step
// GRPO run of the demo config (small sizes) completes and records what only a GPU run records —
// caching-allocator memory samples of the device, switch memory from the allocator, the step's
// allocator peaks, and (when CUPTI is active) kernels; an NCCL group moves CPU tensors by staging
// them through the device. Without a device every test here skips, saying so: that is the only
// reason they skip, and on a GPU machine they fail when the code is wrong.
#include <gtest/gtest.h>
#include <unistd.h>
#include <torch/torch.h>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "../../remove_tree.h"
#include "../../test_db.h"
#include "dist/dist_test_util.h"
#include "hybridscope/trainer/config/config.h"
#include "hybridscope/trainer/dist/rank_device.h"
#include "hybridscope/trainer/model/device.h"
#include "hybridscope/trainer/memory/memory_probe.h"
#include "hybridscope/trainer/dist/process_group.h"
#include "hybridscope/trainer/rollout/rollout.h"
#include "hybridscope/trainer/loop/trainer.h"

namespace fs = std::filesystem;
using namespace hs::trainer;

namespace {

#define HS_REQUIRE_CUDA()                                                                  \
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device on this machine (the " \
                                                    "trainer.device=cuda tests need one)"

// The first row of `sql` as text, "" when there is none (test_db.h).
std::string text(const std::string& db_path, const std::string& sql) { return hs::test::query_row(db_path, sql); }
// ... as a number, -1 when there is no row or it is NULL.
double number(const std::string& db_path, const std::string& sql) {
  const std::string t = text(db_path, sql);
  return t.empty() || t == "NULL" ? -1.0 : std::stod(t);
}

}  // namespace

TEST(CudaTrainer, DemoGrpoRunsTwoStepsOnTheDeviceAndRecordsItsMemory) {
  HS_REQUIRE_CUDA();
  const std::string src = HS_SOURCE_DIR;
  const auto dir = fs::temp_directory_path() / ("hs_cuda_trainer_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string db = (dir / "run.sqlite").string();
  const Config cfg = load_config(src + "/configs/demo_grpo.yaml",
                                 {"trainer.device=cuda",
                                  "data.train_files=" + src + "/datasets/addition/train.jsonl",
                                  "data.val_files=" + src + "/datasets/addition/val.jsonl",
                                  "hybridscope.warmup.files=" + src + "/datasets/addition/warmup.jsonl",
                                  "hybridscope.warmup.steps=2",
                                  "data.train_batch_size=8",
                                  "data.val_batch_size=32",
                                  "actor_rollout_ref.rollout.n=4",
                                  "actor_rollout_ref.actor.ppo_mini_batch_size=4",
                                  "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8",
                                  "trainer.total_training_steps=2",
                                  "trainer.test_freq=-1",
                                  "trainer.save_freq=-1",
                                  "trainer.val_before_train=false",
                                  "trainer.default_local_dir=" + (dir / "ckpt").string(),
                                  "hybridscope.probes.memory_interval_ms=50",
                                  "hybridscope.db=" + db});
  TrainerOptions quiet;
  quiet.show_progress = false;
  FitSummary summary;
  {
    PPOTrainer trainer(cfg, quiet);
    summary = trainer.fit();
  }
  EXPECT_EQ(summary.steps_run, 2);
  EXPECT_EQ(number(db, "SELECT COUNT(*) FROM runs WHERE status = 'completed'"), 1.0);
  EXPECT_EQ(text(db, "SELECT device FROM ranks"), "cuda");

  // Two switches a step, their memory read from the caching allocator (the models live there).
  EXPECT_EQ(number(db, "SELECT COUNT(*) FROM switches"), 4.0);
  EXPECT_GT(number(db, "SELECT MIN(memory_before_bytes) FROM switches"), 0.0);
  EXPECT_GT(number(db, "SELECT MIN(peak_memory_bytes) FROM switches"), 0.0);

  // Every memory sample is of the device, with the allocator's columns filled.
  EXPECT_GT(number(db, "SELECT COUNT(*) FROM memory_samples"), 0.0);
  EXPECT_EQ(number(db, "SELECT COUNT(*) FROM memory_samples WHERE device < 0"), 0.0);
  EXPECT_EQ(number(db, "SELECT COUNT(*) FROM memory_samples WHERE reserved_bytes IS NULL OR active_bytes IS NULL "
                       "OR largest_free_block_bytes IS NULL"),
            0.0);
  EXPECT_GT(number(db, "SELECT MIN(reserved_bytes) FROM memory_samples"), 0.0);
  EXPECT_GT(number(db, "SELECT COUNT(*) FROM memory_samples WHERE reserved_slack IS NOT NULL"), 0.0);

  // The step's allocator peaks (verl's perf/max_memory_*), reserved >= allocated.
  const std::string metric = "SELECT m.value FROM step_metrics m JOIN strings s ON s.id = m.name_id WHERE m.step = 1 "
                             "AND s.value = ";
  const double allocated = number(db, metric + "'perf/max_memory_allocated_gb'");
  const double reserved = number(db, metric + "'perf/max_memory_reserved_gb'");
  EXPECT_GT(allocated, 0.0);
  EXPECT_GE(reserved, allocated);
  EXPECT_GT(number(db, metric + "'perf/mfu/actor'"), 0.0);

  // CUPTI, when this build has it and nothing else owns it: the step's kernels are recorded.
  const std::string cupti = text(db, "SELECT s.value FROM collector_stats c JOIN strings s ON s.id = c.status_id "
                                     "ORDER BY c.ts_ns LIMIT 1");
  if (cupti == "active") {
    EXPECT_GT(number(db, "SELECT COUNT(*) FROM kernels"), 0.0);
  } else {
    std::printf("CUPTI was not active (%s): kernel rows not checked\n", cupti.empty() ? "no collector" : cupti.c_str());
  }
  std::error_code ignored;
  for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(db + suffix, ignored);
}

// A checkpoint resumes on the other kind of device: AdamW's moments follow the model.
TEST(CudaTrainer, ACheckpointResumesOnTheOtherKindOfDevice) {
  HS_REQUIRE_CUDA();
  const std::string src = HS_SOURCE_DIR;
  for (const auto& [saved_on, resumed_on] : {std::pair{"cpu", "cuda"}, std::pair{"cuda", "cpu"}}) {
    const auto dir = fs::temp_directory_path() /
                     ("hs_cuda_resume_" + std::string(saved_on) + "_" + std::to_string(::getpid()));
    hs::test::remove_tree(dir);
    auto config = [&](const std::string& device, int steps) {
      return load_config(src + "/configs/demo_grpo.yaml",
                         {"trainer.device=" + device, "data.train_files=" + src + "/datasets/addition/train.jsonl",
                          "data.val_files=" + src + "/datasets/addition/val.jsonl",
                          "hybridscope.warmup.files=" + src + "/datasets/addition/warmup.jsonl",
                          "hybridscope.warmup.steps=1", "data.train_batch_size=4", "actor_rollout_ref.rollout.n=2",
                          "actor_rollout_ref.actor.ppo_mini_batch_size=2", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
                          "trainer.total_training_steps=" + std::to_string(steps),
                          "trainer.test_freq=-1", "trainer.save_freq=1", "trainer.val_before_train=false",
                          "trainer.default_local_dir=" + (dir / "ckpt").string(),
                          "hybridscope.db=" + (dir / (device + ".sqlite")).string()});
    };
    TrainerOptions quiet;
    quiet.show_progress = false;
    PPOTrainer(config(saved_on, 1), quiet).fit();
    const FitSummary resumed = PPOTrainer(config(resumed_on, 2), quiet).fit();
    EXPECT_EQ(resumed.first_step, 2) << saved_on << " -> " << resumed_on;
    EXPECT_EQ(resumed.steps_run, 1) << saved_on << " -> " << resumed_on;
    hs::test::remove_tree(dir);
  }
}

// The KV pool of kv_num_blocks=-1 on CUDA: the worst case when it fits, nothing when the weights
// alone exceed the share, and the driver's figures behind it.
TEST(CudaTrainer, TheKvPoolIsCappedByGpuMemoryUtilization) {
  HS_REQUIRE_CUDA();
  const c10::Device device = trainer_device(DeviceKind::kCuda, 0);
  const auto memory = cuda_device_memory(device.index());
  ASSERT_TRUE(memory.has_value()) << "the driver reports the current device's memory";
  EXPECT_GT(memory->total_bytes, std::int64_t{1} << 30);
  EXPECT_GT(memory->free_bytes, 0);
  EXPECT_LE(memory->free_bytes, memory->total_bytes);

  ModelShape shape;
  shape.vocab_size = 64;
  shape.hidden_size = 64;
  shape.intermediate_size = 128;
  shape.num_hidden_layers = 2;
  shape.num_attention_heads = 4;
  shape.num_key_value_heads = 2;
  shape.max_position_embeddings = 64;
  Transformer small(shape, HeadKind::kLm);
  small->to(device);
  RolloutEngine roomy(small, -1, 0, /*block_size=*/16, /*num_blocks=*/-1, /*max_num_seqs=*/8, 64, 0.9);
  roomy.allocate_cache();
  EXPECT_EQ(roomy.allocator().num_blocks(), 8 * 4) << "a few KiB fit 90 % of any GPU: the worst case";

  // A model whose weights exceed 1e-6 of the device cannot have a single block.
  shape.vocab_size = 4096;
  shape.hidden_size = 512;
  Transformer big(shape, HeadKind::kLm);
  big->to(device);
  RolloutEngine starved(big, -1, 0, 16, -1, 8, 64, 1e-6);
  try {
    starved.allocate_cache();
    FAIL() << "expected KvPoolExhausted";
  } catch (const KvPoolExhausted& e) {
    EXPECT_NE(std::string(e.what()).find("rollout.gpu_memory_utilization"), std::string::npos) << e.what();
  }
}

TEST(CudaTrainer, ANcclGroupMovesCpuTensorsThroughTheDevice) {
  HS_REQUIRE_CUDA();
  // One rank is enough to exercise the staging path: NCCL refuses CPU tensors outright.
  const c10::Device device = trainer_device(DeviceKind::kCuda, 0);
  DistEnv env;
  env.master_port = hs::trainer::free_loopback_port();
  ProcessGroupOptions options;
  options.backend = DistBackend::kNccl;
  C10dGroupFactory groups(env, options);
  auto world = groups.world();
  auto flag = torch::tensor({3, -4}, torch::kInt64);
  world->all_reduce(flag, ReduceOp::kMax);
  EXPECT_TRUE(flag.is_cpu());
  EXPECT_TRUE(torch::equal(flag, torch::tensor({3, -4}, torch::kInt64)));
  const auto gathered = world->all_gather(torch::arange(6, torch::kInt32).view({2, 3}));
  EXPECT_TRUE(gathered.is_cpu()) << "the result comes back to the caller's device";
  EXPECT_TRUE(torch::equal(gathered, torch::arange(6, torch::kInt32).view({2, 3})));
  auto on_device = torch::full({4}, 2.5, torch::TensorOptions().device(device));
  world->broadcast(on_device, 0);
  EXPECT_TRUE(on_device.is_cuda());
  EXPECT_TRUE(torch::equal(on_device.cpu(), torch::full({4}, 2.5)));
}

TEST(CudaTrainer, TheStepPeakSurvivesTheSwitchesPeakWindows) {
  HS_REQUIRE_CUDA();
  const c10::Device device = trainer_device(DeviceKind::kCuda, 0);
  const int index = memory_device_index(device);
  take_cuda_peak(index);  // start a fresh step
  constexpr std::int64_t kBytes = std::int64_t{64} << 20;
  {
    auto big = torch::empty({kBytes / 4}, torch::TensorOptions().dtype(torch::kFloat).device(device));
    big.fill_(1.0f);
  }
  // A switch's window restarts the allocator's peak after the big tensor is gone ...
  { const MemoryPeakWindow window(index); }
  // ... but the step's peak still counts it, and the next step starts over.
  const DevicePeak peak = take_cuda_peak(index);
  EXPECT_GE(peak.allocated_bytes, kBytes);
  EXPECT_GE(peak.reserved_bytes, peak.allocated_bytes);
  EXPECT_LT(take_cuda_peak(index).allocated_bytes, kBytes) << "take_cuda_peak restarts the peak";
}

TEST(CudaTrainer, PeakFlopsComeFromTheTableOrAMeasuredBf16Gemm) {
  HS_REQUIRE_CUDA();
  const c10::Device device = trainer_device(DeviceKind::kCuda, 0);
  const std::string name = cuda_device_name(device.index());
  EXPECT_FALSE(name.empty()) << "the driver names every device";
  const double peak = device_peak_flops(device);
  if (const auto spec = device_spec_for_name(name)) {
    EXPECT_EQ(peak, spec->peak_bf16_flops) << name;
  } else {
    EXPECT_GT(peak, 1e12) << name << ": a measured bf16 GEMM on a GPU is above 1 TFLOP/s";
  }
}
