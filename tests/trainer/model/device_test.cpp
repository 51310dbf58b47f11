// device_test.cpp — trainer.device on any machine: the peak table's name matching, the refusal of
// cuda where there is no device, the config rule that keeps Gloo off CUDA worlds, and the CPU
// path's promise that moving a batch to the CPU moves nothing.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <optional>
#include <string>

#include "hybridscope/trainer/data/batch.h"
#include "hybridscope/trainer/config/config.h"
#include "hybridscope/trainer/dist/rank_device.h"
#include "hybridscope/trainer/model/device.h"
#include "hybridscope/trainer/model/model.h"

using namespace hs::trainer;

namespace {

// (bf16 FLOP/s, HBM B/s) of `name`, or nullopt.
std::optional<std::pair<double, double>> peaks(const std::string& name) {
  const auto spec = device_spec_for_name(name);
  if (!spec) return std::nullopt;
  return std::pair{spec->peak_bf16_flops, spec->peak_hbm_bytes_per_second};
}

}  // namespace

TEST(DeviceSpec, DriverNamesMatchTheirDatasheetRow) {
  // The names cuDeviceGetName / nvidia-smi report for each part.
  EXPECT_EQ(peaks("NVIDIA H100 80GB HBM3"), (std::pair{989e12, 3.35e12}));  // SXM5
  EXPECT_EQ(peaks("NVIDIA H100 PCIe"), (std::pair{756e12, 2.0e12}));
  EXPECT_EQ(peaks("NVIDIA H100 NVL"), (std::pair{835e12, 3.9e12}));
  EXPECT_EQ(peaks("NVIDIA H200"), (std::pair{989e12, 4.8e12}));
  EXPECT_EQ(peaks("NVIDIA A100-SXM4-80GB"), (std::pair{312e12, 2.039e12}));
  EXPECT_EQ(peaks("NVIDIA A100 80GB PCIe"), (std::pair{312e12, 1.935e12}));
  EXPECT_EQ(peaks("NVIDIA A100-PCIE-40GB"), (std::pair{312e12, 1.555e12}));
  EXPECT_EQ(peaks("nvidia h100 pcie"), (std::pair{756e12, 2.0e12})) << "case does not matter";
  EXPECT_EQ(device_spec_for_name("NVIDIA H200")->name, "H200");
}

TEST(DeviceSpec, UnknownOrLookalikeNamesAreNotGuessed) {
  EXPECT_EQ(peaks("NVIDIA GH200 480GB"), std::nullopt) << "GH200 is not an H200: a model number is a whole word";
  EXPECT_EQ(peaks("Tesla T4"), std::nullopt);
  EXPECT_EQ(peaks("NVIDIA H1000"), std::nullopt);
  EXPECT_EQ(peaks(""), std::nullopt) << "no driver: cuda_device_name is empty";
}

TEST(TrainerDevice, CpuIsTheCpuAndModulesSayWhereTheyAre) {
  EXPECT_EQ(trainer_device(DeviceKind::kCpu, 3), torch::Device(torch::kCPU));
  EXPECT_EQ(memory_device_index(torch::Device(torch::kCPU)), -1);
  EXPECT_EQ(memory_device_index(torch::Device(torch::kCUDA, 2)), 2);
  torch::nn::Module empty;
  EXPECT_EQ(module_device(empty), torch::Device(torch::kCPU));
  torch::nn::Linear linear(2, 3);
  EXPECT_EQ(module_device(*linear), torch::Device(torch::kCPU));
}

TEST(TrainerDevice, CudaWithoutADeviceNamesTheKeyAndTheFix) {
  if (torch::cuda::is_available()) GTEST_SKIP() << "this machine has a CUDA device (cuda_trainer_test.cpp runs there)";
  try {
    trainer_device(DeviceKind::kCuda, 0);
    FAIL() << "trainer.device=cuda was accepted without a CUDA device";
  } catch (const ConfigError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("trainer.device = cuda"), std::string::npos) << message;
    EXPECT_NE(message.find("set trainer.device=cpu"), std::string::npos) << message;
  }
}

TEST(TrainerDevice, GlooCannotCarryACudaWorld) {
  auto error_of = [](const std::vector<std::string>& overrides) -> std::string {
    try {
      parse_config("", overrides);
    } catch (const ConfigError& e) {
      return e.what();
    }
    return {};
  };
  const std::string gloo =
      error_of({"trainer.device=cuda", "trainer.n_gpus_per_node=2", "hybridscope.dist.backend=gloo"});
  EXPECT_NE(gloo.find("hybridscope.dist.backend = gloo moves CPU tensors only"), std::string::npos) << gloo;
  EXPECT_NE(gloo.find("use nccl"), std::string::npos) << gloo;
  // One rank has no group to form; auto and nccl are fine on cuda.
  EXPECT_EQ(error_of({"trainer.device=cuda", "hybridscope.dist.backend=gloo"}), "");
  // (grpo: GAE with a critic is refused on more than one rank.)
  for (const char* backend : {"hybridscope.dist.backend=auto", "hybridscope.dist.backend=nccl"})
    EXPECT_EQ(error_of({"trainer.device=cuda", "trainer.n_gpus_per_node=2", "algorithm.adv_estimator=grpo",
                        "actor_rollout_ref.rollout.n=2", backend}),
              "");
}

TEST(RolloutBatchTo, TheCpuKeepsTheSameTensorsAndEveryFieldMoves) {
  RolloutBatch batch = make_rollout_batch({{1, 2}, {3}}, {{4}, {5, 6}}, 1, 0, 9);
  batch.advantages = torch::rand({2, batch.response_length()});
  const RolloutBatch moved = batch.to(torch::kCPU);
  EXPECT_TRUE(moved.input_ids.is_same(batch.input_ids)) << "the CPU path must not copy";
  EXPECT_TRUE(moved.advantages.is_same(batch.advantages));
  EXPECT_FALSE(moved.values.defined()) << "undefined fields stay undefined";
  EXPECT_EQ(moved.uid, batch.uid);
  if (!torch::cuda::is_available()) return;  // the move itself needs a device
  const RolloutBatch on_gpu = batch.to(torch::Device(torch::kCUDA, 0));
  for (const torch::Tensor* t : {&on_gpu.prompts, &on_gpu.responses, &on_gpu.input_ids, &on_gpu.attention_mask,
                                 &on_gpu.position_ids, &on_gpu.response_mask, &on_gpu.advantages})
    EXPECT_TRUE(t->is_cuda());
  EXPECT_TRUE(torch::equal(on_gpu.input_ids.cpu(), batch.input_ids));
}
