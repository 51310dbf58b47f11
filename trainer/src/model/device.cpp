// device.cpp — trainer.device, a module's device and the peak table (see device.h).
#include "hybridscope/trainer/model/device.h"

#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <chrono>
#include <cstddef>
#include <functional>
#include <initializer_list>
#include <vector>

#include <fmt/format.h>
#include <torch/cuda.h>
#include <torch/nn/module.h>

#include "hybridscope/trainer/config/config.h"
#include "model/model_layers.h"

namespace hs::trainer {

namespace {

// A row matches when every one of its words is a word of the name. Most specific rows first.
struct SpecRow {
  std::initializer_list<std::string_view> words;
  DeviceSpec spec;
};
// NVIDIA datasheets: H100 SXM5 / PCIe / NVL, H200 SXM, A100 (dense bf16 = half the "with
// sparsity" figure).
const std::array<SpecRow, 7> kSpecTable{{
    {{"h100", "pcie"}, {"H100 PCIe", 756e12, 2.0e12}},
    {{"h100", "nvl"}, {"H100 NVL", 835e12, 3.9e12}},
    {{"h100"}, {"H100 SXM", 989e12, 3.35e12}},  // "NVIDIA H100 80GB HBM3"
    {{"h200"}, {"H200", 989e12, 4.8e12}},
    {{"a100", "80gb", "pcie"}, {"A100 80GB PCIe", 312e12, 1.935e12}},
    {{"a100", "80gb"}, {"A100 80GB", 312e12, 2.039e12}},  // "NVIDIA A100-SXM4-80GB"
    {{"a100"}, {"A100 40GB", 312e12, 1.555e12}},
}};

// Lower-case words of letters and digits: "NVIDIA A100-SXM4-80GB" -> nvidia, a100, sxm4, 80gb.
std::vector<std::string> words_of(std::string_view name) {
  std::vector<std::string> words;
  std::string word;
  for (const char c : name) {
    if (std::isalnum(static_cast<unsigned char>(c))) {
      word.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
    } else if (!word.empty()) {
      words.push_back(std::move(word));
      word.clear();
    }
  }
  if (!word.empty()) words.push_back(std::move(word));
  return words;
}

}  // namespace

std::optional<DeviceSpec> device_spec_for_name(std::string_view device_name) {
  const auto words = words_of(device_name);
  for (const auto& row : kSpecTable) {
    const bool all = std::all_of(row.words.begin(), row.words.end(), [&](std::string_view w) {
      return std::find(words.begin(), words.end(), w) != words.end();
    });
    if (all) return row.spec;
  }
  return std::nullopt;
}

c10::Device module_device(const torch::nn::Module& module) {
  const auto params = module.parameters();
  return params.empty() ? c10::Device(c10::kCPU) : params.front().device();
}

namespace {
// The driver API, opened at run time as the CUPTI collector does: no CUDA headers or runtime at
// build time, and the same ordinals as the runtime (both honour CUDA_VISIBLE_DEVICES). Null when
// there is no driver or cuInit fails.
void* cuda_driver() {
  static void* const driver = [] {
    void* handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!handle) handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!handle) return static_cast<void*>(nullptr);
    using InitFn = int (*)(unsigned int);
    auto init = reinterpret_cast<InitFn>(dlsym(handle, "cuInit"));
    return (init && init(0) == 0) ? handle : static_cast<void*>(nullptr);
  }();
  return driver;
}

template <typename Fn>
Fn driver_function(const char* name) {
  void* driver = cuda_driver();
  return driver ? reinterpret_cast<Fn>(dlsym(driver, name)) : nullptr;
}

// The driver's handle of device `index`, or nullopt.
std::optional<int> cuda_device_handle(int index) {
  using GetFn = int (*)(int*, int);
  auto get = driver_function<GetFn>("cuDeviceGet");
  int handle = 0;
  if (!get || get(&handle, index) != 0) return std::nullopt;
  return handle;
}
}  // namespace

std::string cuda_device_name(int index) {
  using NameFn = int (*)(char*, int, int);
  auto name = driver_function<NameFn>("cuDeviceGetName");
  const auto handle = cuda_device_handle(index);
  if (!name || !handle) return {};
  std::array<char, 256> buffer{};
  if (name(buffer.data(), static_cast<int>(buffer.size()), *handle) != 0) return {};
  return std::string(buffer.data());
}

std::optional<DeviceMemory> cuda_device_memory(int index) {
  using TotalFn = int (*)(std::size_t*, int);
  using FreeFn = int (*)(std::size_t*, std::size_t*);
  auto total_of = driver_function<TotalFn>("cuDeviceTotalMem_v2");
  auto free_of = driver_function<FreeFn>("cuMemGetInfo_v2");
  const auto handle = cuda_device_handle(index);
  if (!total_of || !free_of || !handle) return std::nullopt;
  std::size_t total = 0, free = 0, total_in_context = 0;
  if (total_of(&total, *handle) != 0) return std::nullopt;
  // cuMemGetInfo answers for the thread's current context: it must be this device's.
  using CtxDeviceFn = int (*)(int*);
  auto context_device = driver_function<CtxDeviceFn>("cuCtxGetDevice");
  int current = -1;
  if (!context_device || context_device(&current) != 0 || current != *handle) return std::nullopt;
  if (free_of(&free, &total_in_context) != 0) return std::nullopt;
  return DeviceMemory{static_cast<std::int64_t>(free), static_cast<std::int64_t>(total)};
}

namespace {

// The best FLOP/s of 5 timed batches of `iters` calls of `product` (`flops` each) after one
// untimed call (oneDNN builds its kernel, CUDA its context); `sync` ends each batch (a CUDA
// product's kernels are asynchronous).
double best_rate(const std::function<torch::Tensor()>& product, double flops, int iters,
                 const std::function<void()>& sync) {
  auto c = product();
  sync();
  double best = 0.0;
  for (int rep = 0; rep < 5; ++rep) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) c = product();
    sync();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, iters * flops / seconds);
  }
  return best;
}

}  // namespace

double measure_gemm_flops(c10::Device device, c10::ScalarType dtype) {
  torch::NoGradGuard no_grad;
  const bool cuda = device.is_cuda();
  const std::int64_t n = cuda ? 8192 : 1024;
  const auto options = torch::TensorOptions().dtype(dtype).device(device);
  const auto a = torch::randn({n, n}, options);
  const auto b = torch::randn({n, n}, options);
  // On the CPU in float32 the model multiplies through oneDNN or BLAS (hybridscope.cpu_matmul,
  // cpu_matmul.cpp), at rates up to 2x apart on one machine: the peak is the faster library's.
  std::vector<std::function<torch::Tensor()>> products{[&] { return torch::mm(a, b); }};
  if (!cuda && dtype == c10::kFloat) {
    const auto bt = b.t().contiguous();
    products.emplace_back([&, bt] { return detail::linear(a, bt, {}, CpuMatmul::kOneDnn); });
  }
  const double size = static_cast<double>(n);
  double best = 0.0;
  for (const auto& product : products)
    best = std::max(best, best_rate(product, 2.0 * size * size * size, 4,
                                    [&] { if (cuda) torch::cuda::synchronize(device.index()); }));
  return best;
}

double measure_linear_flops(std::int64_t rows, std::int64_t in, std::int64_t out) {
  if (rows < 1 || in < 1 || out < 1)
    throw std::invalid_argument("measure_linear_flops: rows, in and out must be positive");
  torch::NoGradGuard no_grad;
  const auto x = torch::randn({rows, in});
  const auto weight = torch::randn({out, in});
  const double flops = 2.0 * static_cast<double>(rows) * static_cast<double>(in) * static_cast<double>(out);
  // About 20 ms of products per timed batch, at least 4.
  const int iters = static_cast<int>(std::clamp(2e9 / flops, 4.0, 10000.0));
  return best_rate([&] { return detail::linear(x, weight, {}, CpuMatmul::kOneDnn); }, flops, iters, [] {});
}

double device_peak_flops(const c10::Device& device) {
  if (!device.is_cuda()) return measure_gemm_flops();
  if (const auto spec = device_spec_for_name(cuda_device_name(device.index()))) return spec->peak_bf16_flops;
  return measure_gemm_flops(device, c10::kBFloat16);
}

}  // namespace hs::trainer
