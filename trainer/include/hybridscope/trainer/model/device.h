// device.h — where the trainer's models live and what that device can do. Which device a rank
// takes (trainer.device, its local rank): rank_device.h.
//
// verl's split, kept here: the batch (prompts, responses, rewards, advantages, core_algos) stays
// on the CPU; the models (actor, reference, critic, reward model, rollout model) live on the
// device; the PPO workers move each micro-batch to its model's device just before the forward
// and bring log-probs and values back (RolloutBatch::to). A model's device is its first
// parameter's (module_device).
//
// The peak table is what the MFU denominator (hybridscope.peak_flops = -1) and the benchmarks'
// roofline read: NVIDIA's datasheet numbers, dense (no sparsity) bf16 tensor-core FLOP/s and HBM
// bandwidth. Not here: anything that needs the CUDA toolkit's headers (the name comes from the
// driver, opened at run time).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include "hybridscope/trainer/config/config.h"

namespace torch::nn {
class Module;
}

namespace hs::trainer {

/// One row of the peak table.
struct DeviceSpec {
  std::string_view name;                 // the table's name for it ("H100 SXM")
  double peak_bf16_flops = 0;            // FLOP/s, dense bf16 tensor cores
  double peak_hbm_bytes_per_second = 0;  // B/s, device memory
};

/// The table row of a CUDA device name as the driver reports it ("NVIDIA H100 80GB HBM3",
/// "NVIDIA H100 PCIe", "NVIDIA H200", "NVIDIA A100-SXM4-80GB"); nullopt for a device the table
/// does not know (then measure). Case-insensitive; a model number matches only as a word of its
/// own, so "GH200" is not an H200.
std::optional<DeviceSpec> device_spec_for_name(std::string_view device_name);

/// Where `module` computes: its first parameter's device (the CPU for a module without
/// parameters).
c10::Device module_device(const torch::nn::Module& module);

/// CUDA device `index`'s name from the driver (cuDeviceGetName); empty when there is no driver
/// or no such device.
std::string cuda_device_name(int index);

/// A CUDA device's memory as the driver reports it.
struct DeviceMemory {
  std::int64_t free_bytes = 0;   // not held by any context (cuMemGetInfo)
  std::int64_t total_bytes = 0;  // the device's capacity (cuDeviceTotalMem)
};

/// CUDA device `index`'s free and total memory; nullopt when there is no driver, no such device,
/// or the calling thread's current context is not on that device (the free figure is per context).
std::optional<DeviceMemory> cuda_device_memory(int index);

/// Dense GEMM rate (FLOP/s) of `dtype` on `device`: the best of a few n^3 products, n = 1024 on
/// the CPU (with the current thread settings; float32 is the MFU denominator there, by the faster
/// of LibTorch's BLAS and oneDNN, the two libraries of hybridscope.cpu_matmul) and 8192 on CUDA
/// (synchronised around each timed batch; bf16 there, for devices the peak table does not know).
double measure_gemm_flops(c10::Device device = c10::kCPU, c10::ScalarType dtype = c10::kFloat);

/// The model's float32 CPU linear-layer product rate (FLOP/s) at `rows` × `in` → `out` (the input's
/// rows: a decode step's sequences, a pass's tokens): y = x W^T through hybridscope.cpu_matmul's
/// default library (oneDNN, cpu_matmul.cpp), the best of a few timed batches with the current
/// thread settings. Small row counts run well below measure_gemm_flops' rate.
double measure_linear_flops(std::int64_t rows, std::int64_t in, std::int64_t out);

/// Peak FLOP/s for perf/mfu on `device`: on CUDA the table's bf16 peak for its name, else a
/// measured bf16 GEMM; on the CPU a measured float32 GEMM (measure_gemm_flops).
double device_peak_flops(const c10::Device& device);

}  // namespace hs::trainer
