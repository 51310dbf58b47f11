// cpu_matmul.cpp — the model's matrix products on CPU (model_layers.h: detail::linear, detail::bmm).
//
// torch::linear on float32 CPU tensors runs LibTorch's BLAS, which in the PyPI wheel is MKL; on AMD
// CPUs MKL takes its AVX2 kernels even where the CPU has AVX-512 (measured on this project's AMD
// EPYC build machine, one thread: ~105 GFLOP/s for every layout of the model's products against
// 200-250 GFLOP/s for oneDNN's, which LibTorch also carries). hybridscope.cpu_matmul = onednn (the
// default) sends the three products of a float32 CPU linear layer — Y = X W^T forward, dX = dY W
// and dW = dY^T X backward — to oneDNN through one autograd function, and the eager attention's
// batched products likewise (detail::bmm; MKL's batched kernels are slower still on these small
// matrices: 17-60 against 46-240 GFLOP/s); bf16 (autocast or bf16 weights: torch::linear already
// takes oneDNN there), float64 and CUDA keep torch::linear and torch::bmm.
#include <ATen/ops/empty.h>
#include <torch/autograd.h>
#include <torch/torch.h>

#include "model_layers.h"
#include "torch_compat.h"

namespace hs::trainer::detail {
namespace {

#if HS_TORCH_HAS_ONEDNN_MATMUL
/// result = a @ b in float32 by oneDNN, 2-D or batched 3-D (any strides: oneDNN reads row-major
/// and transposed operands in place and copies others; result is contiguous).
torch::Tensor onednn_mm(const torch::Tensor& a, const torch::Tensor& b) {
  auto result = a.dim() == 3 ? at::empty({a.size(0), a.size(1), b.size(2)}, a.options())
                             : at::empty({a.size(0), b.size(1)}, a.options());
  at::native::mkldnn_matmul(a, b, result, /*beta=*/0.0f, /*alpha=*/1.0f);
  return result;
}

/// y = x W^T + b: (..., in) -> (..., out).
torch::Tensor onednn_linear_product(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias) {
  auto y = onednn_mm(x.reshape({-1, x.size(-1)}), weight.t());  // (M, out); the reshape is a view when x is contiguous
  if (bias.defined()) y.add_(bias);
  auto sizes = x.sizes().vec();
  sizes.back() = weight.size(0);
  return y.view(sizes);
}

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

/// y = x W^T + b over float32 CPU tensors with oneDNN's products in both directions.
struct OneDnnLinear : public torch::autograd::Function<OneDnnLinear> {
  /// `bias` is optional: autograd takes an undefined tensor argument for a variable without device.
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& weight,
                               const std::optional<torch::Tensor>& bias) {
    ctx->save_for_backward({x, weight});
    ctx->saved_data["has_bias"] = bias.has_value();
    return onednn_linear_product(x, weight, bias.value_or(torch::Tensor()));
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto& x = saved[0];
    const auto& weight = saved[1];
    const auto dy = grads[0].reshape({-1, weight.size(0)});  // (M, out)
    torch::Tensor dx, dw, db;
    if (ctx->needs_input_grad(0)) dx = onednn_mm(dy, weight).view(x.sizes());           // (M, in) as x
    if (ctx->needs_input_grad(1)) dw = onednn_mm(dy.t(), x.reshape({-1, x.size(-1)}));  // (out, in)
    if (ctx->saved_data["has_bias"].toBool() && ctx->needs_input_grad(2)) db = dy.sum(0);
    return {dx, dw, db};
  }
};

/// a @ b over (batch, n, k) x (batch, k, m) float32 CPU tensors with oneDNN's products in both
/// directions.
struct OneDnnBmm : public torch::autograd::Function<OneDnnBmm> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& a, const torch::Tensor& b) {
    ctx->save_for_backward({a, b});
    return onednn_mm(a, b);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto& a = saved[0];
    const auto& b = saved[1];
    torch::Tensor da, db;
    if (ctx->needs_input_grad(0)) da = onednn_mm(grads[0], b.transpose(1, 2));
    if (ctx->needs_input_grad(1)) db = onednn_mm(a.transpose(1, 2), grads[0]);
    return {da, db};
  }
};

/// Below this many multiply-adds a product stays with BLAS: oneDNN spends ~10 us per call setting
/// up its primitive against MKL's ~2 us, which small products (a tiny model's decode step: 32 rows
/// of hidden 128, 0.5-1.6 M) cannot win back. Measured on the build machine, one thread: BLAS
/// 10-32 us, oneDNN 15-26 us from 0.4 to 1.6 M; oneDNN ahead by 1.6x at 6 M and 2.2x at 50 M.
constexpr double kOneDnnMinMacs = 2.0e6;

/// a (..., n, k) times b (..., k, m): whether `matmul` sends the product to oneDNN.
bool takes_onednn(const torch::Tensor& a, const torch::Tensor& b, CpuMatmul matmul) {
  if (matmul != CpuMatmul::kOneDnn || !a.device().is_cpu() || a.scalar_type() != torch::kFloat ||
      b.scalar_type() != torch::kFloat || compat::autocast_enabled(c10::DeviceType::CPU))
    return false;
  const double macs = static_cast<double>(a.numel()) * static_cast<double>(b.size(-1));
  return macs >= kOneDnnMinMacs;
}
#endif

}  // namespace

torch::Tensor bmm(const torch::Tensor& a, const torch::Tensor& b, CpuMatmul matmul) {
#if HS_TORCH_HAS_ONEDNN_MATMUL
  if (takes_onednn(a, b, matmul)) {
    if (!torch::GradMode::is_enabled()) return onednn_mm(a, b);
    return OneDnnBmm::apply(a, b);
  }
#endif
  return torch::bmm(a, b);
}

torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                     CpuMatmul matmul) {
#if HS_TORCH_HAS_ONEDNN_MATMUL
  if (takes_onednn(x, weight.t(), matmul)) {
    if (!torch::GradMode::is_enabled()) return onednn_linear_product(x, weight, bias);  // no graph to record
    return OneDnnLinear::apply(x, weight, bias.defined() ? std::optional<torch::Tensor>(bias) : std::nullopt);
  }
#endif
  return torch::linear(x, weight, bias);
}

}  // namespace hs::trainer::detail
