// model.cpp — the Llama decoder: tensor-parallel linears, RMSNorm, rotary embeddings, grouped
// query attention (full or through the paged KV cache), SwiGLU MLP, LM / value heads.
//
// Attention on CPU is written out as bmm + scaled mask add + softmax + bmm (the products by
// hybridscope.cpu_matmul's library, cpu_matmul.cpp) with an additive mask laid out per
// KV head group; the G query heads of a KV head are stacked as rows of one matrix, so GQA needs
// no repeat of K/V. Measured on the demo shape (hidden 128, 2 layers, B 256, 1 thread, whole
// model): a decode step 4.6 ms against 5.0 ms with at::scaled_dot_product_attention and a
// boolean mask; the 22-token forward and forward+backward were equal within noise. On CUDA the
// fused SDPA kernels win and the (B*KV, G*T, L) mask would not fit for long sequences, so CUDA
// tensors take scaled_dot_product_attention. A packed forward (ComputeOptions.remove_padding)
// attends per chunk of whole sequences with the CPU kernel on any device (packed_attention.cpp).
//
// The decode step gathers each sequence's cached K/V with one index_select per tensor straight
// into (B * KV, L, D) order (rows slot * KV + kv of the cache viewed as (slots * KV, D)), so no
// permute copy follows; L is the longest context in the batch, not the block-table width.
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>

#include "hybridscope/trainer/model/model.h"
#include "hybridscope/trainer/model/paged_kv_cache.h"
#include "model/model_layers.h"
#include "torch_compat.h"

namespace hs::trainer {
namespace detail {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Communicators travel through autograd's saved_data as integers; the layer that owns the
// shared_ptr outlives the graph's backward.
std::int64_t comm_handle(Communicator* comm) {
  return static_cast<std::int64_t>(reinterpret_cast<std::intptr_t>(comm));
}
Communicator& comm_of(AutogradContext* ctx) {
  return *reinterpret_cast<Communicator*>(
      static_cast<std::intptr_t>(ctx->saved_data["comm"].toInt()));
}

// (..., n) on each rank -> (..., tp * n), rank slices in rank order.
torch::Tensor all_gather_last_dim(const torch::Tensor& x, Communicator& comm) {
  auto gathered = comm.all_gather(x.movedim(-1, 0).contiguous());  // (tp * n, ...)
  return gathered.movedim(0, -1);
}

// Megatron-LM's copy_to_tensor_model_parallel_region: identity forward; the gradient of a
// replicated input is the sum of every rank's partial gradient.
struct CopyToTpRegion : torch::autograd::Function<CopyToTpRegion> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, std::int64_t comm) {
    ctx->saved_data["comm"] = comm;
    return x;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto grad = grads[0].clone();
    comm_of(ctx).all_reduce(grad, ReduceOp::kSum);
    return {grad, torch::Tensor()};
  }
};

// reduce_from_tensor_model_parallel_region: all-reduce (sum) forward, identity backward.
struct ReduceFromTpRegion : torch::autograd::Function<ReduceFromTpRegion> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, std::int64_t comm) {
    auto y = x.clone();
    reinterpret_cast<Communicator*>(static_cast<std::intptr_t>(comm))->all_reduce(y, ReduceOp::kSum);
    return y;
  }
  static variable_list backward(AutogradContext*, variable_list grads) {
    return {grads[0], torch::Tensor()};
  }
};

// gather_from_tensor_model_parallel_region along the last dim: all-gather forward, this rank's
// slice of the gradient backward.
struct GatherFromTpRegion : torch::autograd::Function<GatherFromTpRegion> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, std::int64_t comm) {
    ctx->saved_data["comm"] = comm;
    return all_gather_last_dim(x, comm_of(ctx));
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto& comm = comm_of(ctx);
    auto slice = grads[0].chunk(comm.size(), -1)[comm.rank()].contiguous();
    return {slice, torch::Tensor()};
  }
};

std::int64_t split(std::int64_t n, int parts, const char* what) {
  if (n % parts != 0) {
    throw std::invalid_argument(std::string("tensor parallel: ") + what + " " + std::to_string(n) +
                                " is not divisible by the tp size " + std::to_string(parts) +
                                " — choose a tp size that divides it");
  }
  return n / parts;
}

// (D/2) float64 rotary frequencies: HF's _compute_default_rope_parameters, and for rope_type
// llama3 _compute_llama3_parameters (transformers modeling_rope_utils): with old = original
// max_position_embeddings and wavelength w = 2*pi / inv_freq, w > old / low_freq_factor is
// divided by factor, w < old / high_freq_factor kept, and between them
// (1 - s) * inv_freq / factor + s * inv_freq with s = (old / w - low) / (high - low).
torch::Tensor rotary_inv_freq(const ModelShape& shape) {
  const std::int64_t D = shape.head_dim();
  auto f64 = torch::TensorOptions().dtype(torch::kDouble);
  auto inv_freq = torch::pow(shape.rope_theta, -torch::arange(0, D, 2, f64) / static_cast<double>(D));
  const auto& r = shape.rope_scaling;
  if (r.type == RopeScaling::Type::kDefault) return inv_freq;
  const double old_context = r.original_max_position_embeddings;
  const double low_wavelen = old_context / r.low_freq_factor;
  const double high_wavelen = old_context / r.high_freq_factor;
  constexpr double kPi = 3.14159265358979323846;  // math.pi
  auto wavelen = 2.0 * kPi / inv_freq;
  auto scaled = torch::where(wavelen > low_wavelen, inv_freq / r.factor, inv_freq);
  auto smooth = (old_context / wavelen - r.low_freq_factor) / (r.high_freq_factor - r.low_freq_factor);
  auto smoothed = (1.0 - smooth) * scaled / r.factor + smooth * scaled;
  auto medium = wavelen.ge(high_wavelen).logical_and(wavelen.le(low_wavelen));
  return torch::where(medium, smoothed, scaled);
}

torch::Tensor apply_rotary(const torch::Tensor& x, const AttentionBatch& batch) {
  // HF: x * cos + rotate_half(x) * sin, rotate_half(x) = cat(-x2, x1) = roll(x, D/2) * sign;
  // the sign is folded into batch.sin.  x (B, T, heads, D)
  return torch::addcmul(x * batch.cos, x.roll({x.size(-1) / 2}, {-1}), batch.sin);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Tensor-parallel linears

ColumnParallelLinearImpl::ColumnParallelLinearImpl(std::int64_t in_features,
                                                   std::int64_t out_features,
                                                   std::shared_ptr<Communicator> tp,
                                                   bool gather_output, bool bias, double init_std)
    : tp_(std::move(tp)), gather_output_(gather_output) {
  const auto local_out = split(out_features, tp_->size(), "output features");
  weight = register_parameter("weight", torch::empty({local_out, in_features}));
  torch::NoGradGuard no_grad;
  weight.normal_(0.0, init_std);
  if (bias) this->bias = register_parameter("bias", torch::zeros({local_out}));
}

torch::Tensor ColumnParallelLinearImpl::forward(const torch::Tensor& x) {
  if (tp_->size() == 1) return linear(x, weight, bias, matmul);
  const bool track = torch::GradMode::is_enabled();
  const auto handle = comm_handle(tp_.get());
  auto input = track ? CopyToTpRegion::apply(x, handle) : x;
  auto y = linear(input, weight, bias, matmul);  // (..., out / tp)
  if (!gather_output_) return y;
  return track ? GatherFromTpRegion::apply(y, handle) : all_gather_last_dim(y, *tp_);
}

RowParallelLinearImpl::RowParallelLinearImpl(std::int64_t in_features, std::int64_t out_features,
                                             std::shared_ptr<Communicator> tp, bool bias,
                                             double init_std)
    : tp_(std::move(tp)) {
  const auto local_in = split(in_features, tp_->size(), "input features");
  weight = register_parameter("weight", torch::empty({out_features, local_in}));
  torch::NoGradGuard no_grad;
  weight.normal_(0.0, init_std);
  if (bias) this->bias = register_parameter("bias", torch::zeros({out_features}));
}

torch::Tensor RowParallelLinearImpl::forward(const torch::Tensor& x) {
  if (tp_->size() == 1) return linear(x, weight, bias, matmul);
  auto y = linear(x, weight, {}, matmul);  // (..., out), this rank's partial sum
  if (torch::GradMode::is_enabled()) {
    y = ReduceFromTpRegion::apply(y, comm_handle(tp_.get()));
  } else {
    tp_->all_reduce(y, ReduceOp::kSum);
  }
  return bias.defined() ? y + bias : y;
}

// ---------------------------------------------------------------------------------------------
// RMSNorm, attention, MLP, decoder layer, backbone

RMSNormImpl::RMSNormImpl(std::int64_t hidden, double eps) : hidden_(hidden), eps_(eps) {
  weight = register_parameter("weight", torch::ones({hidden}));
}

torch::Tensor RMSNormImpl::forward(const torch::Tensor& x) {
  // at::rms_norm upcasts 16-bit inputs to float32 and multiplies by the weight after casting
  // back, as HF's LlamaRMSNorm does.
  return at::rms_norm(x, {hidden_}, weight, eps_);
}

AttentionImpl::AttentionImpl(const ModelShape& shape, const ParallelContext& parallel)
    : heads_(split(shape.num_attention_heads, parallel.tp->size(), "num_attention_heads")),
      kv_heads_(split(shape.num_key_value_heads, parallel.tp->size(), "num_key_value_heads")),
      head_dim_(shape.head_dim()),
      scale_(1.0 / std::sqrt(static_cast<double>(shape.head_dim()))) {
  const std::int64_t C = shape.hidden_size;
  const std::int64_t D = head_dim_;
  const double init = shape.initializer_range;
  // Column-parallel split by whole heads: rank r holds query heads [r*H/tp, (r+1)*H/tp) and KV
  // heads [r*KV/tp, ...), so every local query head's KV head h/G is local too.
  const bool bias = shape.qkv_bias();
  q_proj = register_module("q_proj", ColumnParallelLinear(C, shape.num_attention_heads * D,
                                                          parallel.tp, false, bias, init));
  k_proj = register_module("k_proj", ColumnParallelLinear(C, shape.num_key_value_heads * D,
                                                          parallel.tp, false, bias, init));
  v_proj = register_module("v_proj", ColumnParallelLinear(C, shape.num_key_value_heads * D,
                                                          parallel.tp, false, bias, init));
  o_proj = register_module("o_proj", RowParallelLinear(shape.num_attention_heads * D, C,
                                                       parallel.tp, false, init));
  if (shape.qk_norm()) {
    q_norm = register_module("q_norm", RMSNorm(D, shape.rms_norm_eps));
    k_norm = register_module("k_norm", RMSNorm(D, shape.rms_norm_eps));
  }
}

torch::Tensor AttentionImpl::forward(const torch::Tensor& x, const AttentionBatch& batch,
                                     int layer) {
  const auto B = batch.batch, T = batch.tokens, L = batch.keys;
  const auto KV = kv_heads_, D = head_dim_, G = heads_ / kv_heads_;
  auto q = q_proj(x).view({B, T, heads_, D});  // (B, T, H, D)
  auto k = k_proj(x).view({B, T, KV, D});      // (B, T, KV, D)
  auto v = v_proj(x).view({B, T, KV, D});      // (B, T, KV, D)
  if (!q_norm.is_empty()) {
    q = q_norm(q);
    k = k_norm(k);
  }
  q = apply_rotary(q, batch);
  k = apply_rotary(k, batch);
  if (batch.cu_seqlens.defined()) return o_proj(flash_varlen_attention(q, k, v, batch, scale_));  // (1, N, C)
  if (!batch.segments.empty()) return o_proj(packed_attention(q, k, v, batch, scale_));  // (1, N, C)

  torch::Tensor kb, vb;  // (B * KV, L, D): each (sequence, KV head) pair's keys and values
  if (batch.cache != nullptr) {
    auto& k_cache = batch.cache->keys(layer);  // (slots, KV, D)
    auto& v_cache = batch.cache->values(layer);
    // The cache holds the compute dtype; under autocast k/v may come out of rotary wider.
    auto k_new = k.reshape({B * T, KV, D}).to(k_cache.scalar_type());
    auto v_new = v.reshape({B * T, KV, D}).to(v_cache.scalar_type());
    if (batch.write_rows.defined()) {
      k_new = k_new.index_select(0, batch.write_rows);
      v_new = v_new.index_select(0, batch.write_rows);
    }
    k_cache.index_copy_(0, batch.write_slots, k_new);
    v_cache.index_copy_(0, batch.write_slots, v_new);
    if (batch.paged_decode) {
      return o_proj(paged_decode_attention(q.reshape({B, heads_, D}), k_cache, v_cache, batch.block_tables,
                                           batch.context_lens, batch.cache->block_size(), scale_)
                        .to(q.scalar_type())
                        .view({B, T, heads_ * D}));
    }
    // One row gather straight into (B, KV, L, D) order: no permute copy afterwards.
    kb = k_cache.view({-1, D}).index_select(0, batch.context_rows).view({B * KV, L, D});
    vb = v_cache.view({-1, D}).index_select(0, batch.context_rows).view({B * KV, L, D});
  } else {
    kb = k.permute({0, 2, 1, 3}).reshape({B * KV, L, D});
    vb = v.permute({0, 2, 1, 3}).reshape({B * KV, L, D});
  }

  torch::Tensor out;  // (B, T, H * D)
  if (batch.visible.defined()) {
#if HS_TORCH_HAS_SDPA
    out = compat::scaled_dot_product_attention(q.transpose(1, 2), kb.view({B, KV, L, D}),
                                               vb.view({B, KV, L, D}), batch.visible, scale_)  // (B, H, T, D)
              .transpose(1, 2)
              .reshape({B, T, heads_ * D});
#else
    TORCH_CHECK(false, "attention: this LibTorch has no scaled_dot_product_attention");  // set_compute refuses kSdpa
#endif
  } else {
    // Query heads of one KV group side by side: (B * KV, G * T, D) against (B * KV, D, L); a view
    // when T = 1 (decode). K^T is a strided view that BLAS and oneDNN take as a transposed operand.
    auto qb = q.view({B, T, KV, G, D}).permute({0, 2, 3, 1, 4}).reshape({B * KV, G * T, D});
    auto scores = torch::add(batch.additive_mask, bmm(qb, kb.transpose(1, 2), batch.matmul), scale_);  // (B*KV, G*T, L)
    // At least float32 whatever the compute dtype, as HF's eager attention (no cast for fp32/fp64).
    auto probs = torch::softmax(scores, -1, at::promote_types(scores.scalar_type(), torch::kFloat))
                     .to(scores.scalar_type());
    out = bmm(probs, vb, batch.matmul)  // (B * KV, G * T, D)
              .view({B, KV, G, T, D})
              .permute({0, 3, 1, 2, 4})
              .reshape({B, T, heads_ * D});
  }
  return o_proj(out);
}

MlpImpl::MlpImpl(const ModelShape& shape, const ParallelContext& parallel) {
  const std::int64_t C = shape.hidden_size, F = shape.intermediate_size;
  const double init = shape.initializer_range;
  gate_proj = register_module("gate_proj", ColumnParallelLinear(C, F, parallel.tp, false, false, init));
  up_proj = register_module("up_proj", ColumnParallelLinear(C, F, parallel.tp, false, false, init));
  down_proj = register_module("down_proj", RowParallelLinear(F, C, parallel.tp, false, init));
}

torch::Tensor MlpImpl::forward(const torch::Tensor& x) {
  return down_proj(torch::silu(gate_proj(x)) * up_proj(x));  // (B, T, F / tp) inside
}

DecoderLayerImpl::DecoderLayerImpl(const ModelShape& shape, const ParallelContext& parallel) {
  input_layernorm = register_module("input_layernorm", RMSNorm(shape.hidden_size, shape.rms_norm_eps));
  self_attn = register_module("self_attn", Attention(shape, parallel));
  post_attention_layernorm = register_module(
      "post_attention_layernorm", RMSNorm(shape.hidden_size, shape.rms_norm_eps));
  mlp = register_module("mlp", Mlp(shape, parallel));
}

torch::Tensor DecoderLayerImpl::forward(const torch::Tensor& x, const AttentionBatch& batch,
                                        int layer) {
  auto h = x + self_attn->forward(input_layernorm(x), batch, layer);
  return h + mlp(post_attention_layernorm(h));
}

BackboneImpl::BackboneImpl(const ModelShape& shape, const ParallelContext& parallel, const StageRange& stage)
    : first_layer_(stage.first_layer) {
  if (stage.first) {
    embed_tokens = register_module(
        "embed_tokens", torch::nn::Embedding(torch::nn::EmbeddingOptions(shape.vocab_size, shape.hidden_size)));
    torch::NoGradGuard no_grad;
    embed_tokens->weight.normal_(0.0, shape.initializer_range);
  }
  layers = register_module("layers", std::make_shared<torch::nn::Module>("layers"));
  for (int i = stage.first_layer; i < stage.end_layer; ++i) {
    DecoderLayer layer(shape, parallel);
    layers->register_module(std::to_string(i), layer);
    typed_layers.push_back(layer);
  }
  if (stage.last) norm = register_module("norm", RMSNorm(shape.hidden_size, shape.rms_norm_eps));

  // HF LlamaRotaryEmbedding: inv_freq_i = theta^(-2i/D) (rope_scaling.h for llama3's scaling),
  // angle = pos * inv_freq, halves repeated. Computed in float64, stored in the module's dtype.
  const std::int64_t D = shape.head_dim();
  auto f64 = torch::TensorOptions().dtype(torch::kDouble);
  auto inv_freq = rotary_inv_freq(shape);
  auto angles = torch::outer(torch::arange(shape.max_position_embeddings, f64), inv_freq);  // (P, D/2)
  auto sign = torch::cat({-torch::ones({D / 2}, f64), torch::ones({D / 2}, f64)});
  auto emb = torch::cat({angles, angles}, -1);  // (P, D)
  rope_cos64_ = emb.cos();
  rope_sin64_ = emb.sin() * sign;
  rope_cos = register_buffer("rope_cos", rope_cos64_.to(torch::kFloat));
  rope_sin = register_buffer("rope_sin", rope_sin64_.to(torch::kFloat));
}

void BackboneImpl::refresh_rotary() {
  torch::NoGradGuard no_grad;
  rope_cos.set_data(rope_cos64_.to(rope_cos.device(), rope_cos.scalar_type()));
  rope_sin.set_data(rope_sin64_.to(rope_sin.device(), rope_sin.scalar_type()));
}

void BackboneImpl::to(torch::Device device, torch::Dtype dtype, bool non_blocking) {
  torch::nn::Module::to(device, dtype, non_blocking);
  refresh_rotary();
}

void BackboneImpl::to(torch::Dtype dtype, bool non_blocking) {
  torch::nn::Module::to(dtype, non_blocking);
  refresh_rotary();
}

void BackboneImpl::to(torch::Device device, bool non_blocking) {
  torch::nn::Module::to(device, non_blocking);
  refresh_rotary();
}

void BackboneImpl::rotary_at(const torch::Tensor& position_ids, AttentionBatch& batch, torch::Dtype dtype) const {
  auto pos = position_ids.reshape({-1}).to(torch::kLong);
  const auto D = rope_cos.size(1);
  // In the compute dtype, as HF's rotary embedding returns cos/sin in the activations' dtype.
  batch.cos = rope_cos.index_select(0, pos).view({batch.batch, batch.tokens, 1, D}).to(dtype);
  batch.sin = rope_sin.index_select(0, pos).view({batch.batch, batch.tokens, 1, D}).to(dtype);
}

namespace {

// Gradient checkpointing of one decoder layer (PyTorch's reentrant torch.utils.checkpoint): the
// forward runs without autograd and keeps only the layer's input and the batch's tensors; the
// backward runs the layer again with autograd, under the autocast state of the forward, and
// back-propagates through it — the parameters' gradients accumulate there, the input's is returned.
// Tensor-parallel layers all-reduce again in the recomputation, as Megatron's do.
struct CheckpointedLayer : torch::autograd::Function<CheckpointedLayer> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, std::int64_t layer_handle,
                               std::int64_t index, const AttentionBatch& batch) {
    ctx->save_for_backward({x});
    ctx->saved_data["layer"] = layer_handle;
    ctx->saved_data["index"] = index;
    ctx->saved_data["shape"] = std::vector<std::int64_t>{batch.batch, batch.tokens, batch.keys};
    ctx->saved_data["cos"] = batch.cos;
    ctx->saved_data["sin"] = batch.sin;
    ctx->saved_data["additive_mask"] = batch.additive_mask;
    ctx->saved_data["visible"] = batch.visible;
    ctx->saved_data["segments"] = batch.segments;
    ctx->saved_data["segment_masks"] = c10::List<torch::Tensor>(batch.segment_masks);
    ctx->saved_data["cu_seqlens"] = batch.cu_seqlens;
    ctx->saved_data["max_seqlen"] = batch.max_seqlen;
    ctx->saved_data["matmul"] = static_cast<std::int64_t>(batch.matmul);
    const auto device = x.device().type();
    const bool autocast = at::autocast::is_autocast_enabled(device);
    ctx->saved_data["autocast"] = autocast;
    ctx->saved_data["autocast_dtype"] = static_cast<std::int64_t>(at::autocast::get_autocast_dtype(device));
    torch::NoGradGuard no_grad;
    return layer_of(ctx)->forward(x, batch, static_cast<int>(index));
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto input = ctx->get_saved_variables()[0].detach().requires_grad_(true);
    AttentionBatch batch;
    const auto shape = ctx->saved_data["shape"].toIntVector();
    batch.batch = shape[0];
    batch.tokens = shape[1];
    batch.keys = shape[2];
    auto tensor = [&](const char* key) {
      const auto& v = ctx->saved_data[key];
      return v.isTensor() ? v.toTensor() : torch::Tensor();
    };
    batch.cos = tensor("cos");
    batch.sin = tensor("sin");
    batch.additive_mask = tensor("additive_mask");
    batch.visible = tensor("visible");
    batch.segments = ctx->saved_data["segments"].toIntVector();
    batch.segment_masks = ctx->saved_data["segment_masks"].toTensorVector();
    batch.cu_seqlens = tensor("cu_seqlens");
    batch.max_seqlen = ctx->saved_data["max_seqlen"].toInt();
    batch.matmul = static_cast<CpuMatmul>(ctx->saved_data["matmul"].toInt());
    torch::Tensor output;
    {
      torch::AutoGradMode grad(true);
      std::optional<compat::AutocastGuard> autocast;
      if (ctx->saved_data["autocast"].toBool()) {
        autocast.emplace(input.device().type(),
                         static_cast<c10::ScalarType>(ctx->saved_data["autocast_dtype"].toInt()));
      }
      output = layer_of(ctx)->forward(input, batch, static_cast<int>(ctx->saved_data["index"].toInt()));
    }
    torch::autograd::backward({output}, {grads[0]});
    return {input.grad(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
  static DecoderLayerImpl* layer_of(AutogradContext* ctx) {
    return reinterpret_cast<DecoderLayerImpl*>(static_cast<std::intptr_t>(ctx->saved_data["layer"].toInt()));
  }
};

}  // namespace

torch::Tensor BackboneImpl::forward(const torch::Tensor& input, const AttentionBatch& batch) {
  auto h = embed_tokens.is_empty() ? input : embed_tokens(input);  // (B, T, C)
  const bool recompute = checkpoint_layers && torch::GradMode::is_enabled() && batch.cache == nullptr;
  for (std::size_t i = 0; i < typed_layers.size(); ++i) {
    const int index = first_layer_ + static_cast<int>(i);
    if (layer_hooks != nullptr) hook_layer_boundary(h, index, i == 0 ? -1 : index - 1);
    if (recompute && h.requires_grad()) {
      const auto handle = static_cast<std::int64_t>(reinterpret_cast<std::intptr_t>(typed_layers[i].get()));
      h = CheckpointedLayer::apply(h, handle, static_cast<std::int64_t>(index), batch);
    } else {
      h = typed_layers[i]->forward(h, batch, index);
    }
    if (layer_hooks != nullptr) layer_hooks->after_forward(index);
  }
  if (layer_hooks != nullptr && !typed_layers.empty()) {
    hook_layer_boundary(h, -1, first_layer_ + static_cast<int>(typed_layers.size()) - 1);
  }
  return norm.is_empty() ? h : norm(h);
}

void BackboneImpl::hook_layer_boundary(const torch::Tensor& h, int next, int previous) {
  // h: the input of layer `next` and the output of layer `previous` (-1: none). One tensor hook
  // per boundary, so that in the backward layer `next` is finished (after_backward) before layer
  // `previous` is gathered (before_backward) — at most one layer and one prefetch full at once.
  if (h.requires_grad()) {
    LayerHooks* hooks = layer_hooks;
    h.register_hook([hooks, next, previous](const torch::Tensor&) {
      if (next >= 0) hooks->after_backward(next);
      if (previous >= 0) hooks->before_backward(previous);
    });
  }
  if (next >= 0) layer_hooks->before_forward(next);
}

std::unordered_map<std::string, int> tensor_parallel_dims(const torch::nn::Module& model) {
  std::unordered_map<std::string, int> dims;
  for (const auto& item : model.named_modules("", /*include_self=*/false)) {
    const auto& module = item.value();
    if (auto column = std::dynamic_pointer_cast<ColumnParallelLinearImpl>(module)) {
      dims[item.key() + ".weight"] = ColumnParallelLinearImpl::kShardDim;
      if (column->bias.defined()) dims[item.key() + ".bias"] = 0;
    } else if (std::dynamic_pointer_cast<RowParallelLinearImpl>(module)) {
      dims[item.key() + ".weight"] = RowParallelLinearImpl::kShardDim;
    }
  }
  return dims;
}

}  // namespace detail

// ---------------------------------------------------------------------------------------------
// Transformer

namespace {

void validate(const ModelShape& s, const ParallelContext& parallel) {
  auto fail = [](const std::string& what) {
    throw std::invalid_argument("ModelShape: " + what);
  };
  if (!parallel.world || !parallel.tp || !parallel.dp || !parallel.pp) {
    fail("every ParallelContext communicator must be set (use the default context for one rank)");
  }
  if (s.vocab_size <= 0) fail("vocab_size must be positive (set it from the tokenizer)");
  if (s.hidden_size <= 0 || s.num_attention_heads <= 0 || s.num_key_value_heads <= 0 ||
      s.intermediate_size <= 0 || s.num_hidden_layers < 0 || s.max_position_embeddings <= 0) {
    fail("sizes must be positive");
  }
  if (s.explicit_head_dim == 0 && s.hidden_size % s.num_attention_heads != 0) {
    fail("hidden_size " + std::to_string(s.hidden_size) + " is not divisible by num_attention_heads " +
         std::to_string(s.num_attention_heads) + " (or give head_dim)");
  }
  if (s.num_attention_heads % s.num_key_value_heads != 0) {
    fail("num_attention_heads " + std::to_string(s.num_attention_heads) +
         " is not a multiple of num_key_value_heads " + std::to_string(s.num_key_value_heads));
  }
  if (s.head_dim() % 2 != 0) fail("head_dim must be even for rotary embeddings");
}

// Stage pp->rank() of pp->size(): layers [s·L/p, (s+1)·L/p), as layout.h's training_layout.
detail::StageRange stage_range(const ModelShape& s, const Communicator& pp) {
  const int stages = pp.size(), stage = pp.rank();
  if (s.num_hidden_layers % stages != 0) {
    throw std::invalid_argument("pipeline parallel: num_hidden_layers " + std::to_string(s.num_hidden_layers) +
                                " is not divisible by the pp size " + std::to_string(stages) +
                                " — every stage holds the same number of decoder layers; choose a "
                                "pipeline_model_parallel_size that divides it");
  }
  if (stages > 1 && s.tie_word_embeddings) {
    throw std::invalid_argument(
        "pipeline parallel: tie_word_embeddings with pp " + std::to_string(stages) +
        " > 1 is not supported (the embedding lives on the first stage, the LM head on the last) — untie the "
        "embeddings or use pipeline_model_parallel_size 1");
  }
  const int per_stage = s.num_hidden_layers / stages;
  return {stage * per_stage, (stage + 1) * per_stage, stage == 0, stage == stages - 1};
}

}  // namespace

TransformerImpl::TransformerImpl(const ModelShape& shape, HeadKind head, ParallelContext parallel)
    : shape_(shape), head_(head), parallel_(std::move(parallel)), parts_(std::make_shared<Parts>()) {
  validate(shape_, parallel_);
  const auto stage = stage_range(shape_, *parallel_.pp);
  parts_->model = register_module("model", detail::Backbone(shape_, parallel_, stage));
  if (!stage.last) {
    // An earlier pipeline stage: no head (the last stage holds model.norm and lm_head / score).
  } else if (head_ == HeadKind::kValue) {
    // HF LlamaForTokenClassification with num_labels 1 (verl's critic): Linear with bias.
    parts_->score = register_module(
        "score", torch::nn::Linear(torch::nn::LinearOptions(shape_.hidden_size, 1).bias(true)));
    torch::NoGradGuard no_grad;
    parts_->score->weight.normal_(0.0, shape_.initializer_range);
    parts_->score->bias.zero_();
  } else if (!shape_.tie_word_embeddings) {
    parts_->lm_head = register_module(
        "lm_head", detail::ColumnParallelLinear(shape_.hidden_size, shape_.vocab_size, parallel_.tp,
                                                /*gather_output=*/true, /*bias=*/false,
                                                shape_.initializer_range));
  }
  // Tied: no lm_head module; the head multiplies by embed_tokens.weight itself, so there is one
  // tensor (one optimizer entry, one gradient accumulating both uses).
  anchor_ = parameters().front();  // every stage and head has parameters
}

namespace {

// The attention mask in the layout the attention path wants. visible (B, T, L) bool.
void set_mask(detail::AttentionBatch& batch, const torch::Tensor& visible, const ModelShape& shape,
              int tp, torch::ScalarType dtype, AttentionKernel kernel) {
  // flash attends the packed forwards; a padded forward with it takes auto's choice.
  const bool automatic = kernel == AttentionKernel::kAuto || kernel == AttentionKernel::kFlash;
  const bool sdpa = kernel == AttentionKernel::kSdpa || (automatic && visible.is_cuda() && HS_TORCH_HAS_SDPA != 0);
  if (sdpa) {
    batch.visible = visible.unsqueeze(1);  // (B, 1, T, L)
    return;
  }
  const std::int64_t KV = shape.num_key_value_heads / tp;
  const std::int64_t G = shape.num_attention_heads / shape.num_key_value_heads;
  const auto B = batch.batch, T = batch.tokens, L = batch.keys;
  auto additive = torch::zeros({B, T, L}, visible.options().dtype(dtype))
                      .masked_fill_(visible.logical_not(), -std::numeric_limits<double>::infinity());
  batch.additive_mask = additive.view({B, 1, 1, T, L}).expand({B, KV, G, T, L}).reshape({B * KV, G * T, L});
}

}  // namespace

bool TransformerImpl::is_first_stage() const { return parallel_.pp->rank() == 0; }

bool TransformerImpl::is_last_stage() const { return parallel_.pp->rank() == parallel_.pp->size() - 1; }

ComputeOptions compute_options(Precision precision, AttentionKernel attention, CpuMatmul cpu_matmul) {
  ComputeOptions options;
  options.dtype = precision == Precision::kBf16 ? torch::kBFloat16 : torch::kFloat;
  options.attention = attention;
  options.cpu_matmul = cpu_matmul;
  return options;
}

void TransformerImpl::set_gradient_checkpointing(bool on) { parts_->model->checkpoint_layers = on; }

bool TransformerImpl::gradient_checkpointing() const { return parts_->model->checkpoint_layers; }

void TransformerImpl::set_compute(const ComputeOptions& options) {
  if (options.attention == AttentionKernel::kSdpa && HS_TORCH_HAS_SDPA == 0) {
    throw std::invalid_argument("hybridscope.attention = sdpa: this LibTorch (" TORCH_VERSION
                                ") has no scaled_dot_product_attention — use auto or eager");
  }
  if (options.paged_decode && !detail::paged_decode_kernel_built()) {
    throw std::invalid_argument("hybridscope.decode.paged_kernel = true: this build has no paged-attention kernel (CMake "
                                "found no CUDA compiler, or LibTorch is a CPU build) — set it to false, or rebuild "
                                "with the CUDA toolkit's nvcc (docs/building.md)");
  }
  if (options.paged_decode && !detail::paged_decode_supports(shape_.head_dim())) {
    throw std::invalid_argument("hybridscope.decode.paged_kernel = true: the kernel takes head_dim 32, 64, 96, 128 or "
                                "256, the model's is " + std::to_string(shape_.head_dim()) + " — set it to false");
  }
  if (options.dtype != torch::kFloat && options.dtype != torch::kBFloat16) {
    throw std::invalid_argument("ComputeOptions.dtype must be float32 or bfloat16");
  }
  compute_ = options;
  for (const auto& module : modules(/*include_self=*/false)) {
    if (auto* column = module->as<detail::ColumnParallelLinearImpl>()) column->matmul = options.cpu_matmul;
    if (auto* row = module->as<detail::RowParallelLinearImpl>()) row->matmul = options.cpu_matmul;
  }
}

torch::Dtype TransformerImpl::compute_dtype() const {
  if (compute_.dtype == torch::kBFloat16) return torch::kBFloat16;
  return anchor_.scalar_type();
}

torch::Tensor TransformerImpl::forward(const torch::Tensor& input_ids,
                                       const torch::Tensor& attention_mask,
                                       const torch::Tensor& position_ids, LmOutput output) {
  const auto dtype = compute_dtype();
  if (dtype == anchor_.scalar_type()) return forward_impl(input_ids, attention_mask, position_ids, output);
  const compat::AutocastGuard autocast(anchor_.device().type(), dtype);
  return forward_impl(input_ids, attention_mask, position_ids, output);
}

torch::Tensor TransformerImpl::forward_cached(const torch::Tensor& input_ids, const torch::Tensor& position_ids,
                                              const KvCacheView& kv, bool last_token_only) {
  const auto dtype = compute_dtype();
  if (dtype == anchor_.scalar_type()) return forward_cached_impl(input_ids, position_ids, kv, last_token_only);
  const compat::AutocastGuard autocast(anchor_.device().type(), dtype);
  return forward_cached_impl(input_ids, position_ids, kv, last_token_only);
}

torch::Tensor TransformerImpl::forward_impl(const torch::Tensor& input_ids,
                                            const torch::Tensor& attention_mask,
                                            const torch::Tensor& position_ids, LmOutput output) {
  if (is_first_stage()) {
    TORCH_CHECK(input_ids.dim() == 2, "forward: input_ids must be (B, T), got ", input_ids.sizes());
  } else {
    TORCH_CHECK(input_ids.dim() == 3 && input_ids.size(2) == shape_.hidden_size,
                "forward: pipeline stage ", parallel_.pp->rank(),
                " takes the previous stage's hidden states (B, T, C = ", shape_.hidden_size, "), got ",
                input_ids.sizes());
  }
  const auto bt = input_ids.sizes().slice(0, 2);
  TORCH_CHECK(attention_mask.sizes() == bt && position_ids.sizes() == bt, "forward: attention_mask ",
              attention_mask.sizes(), " and position_ids ", position_ids.sizes(), " must be (B, T) = ", bt);
  if (compute_.remove_padding) return forward_packed_impl(input_ids, attention_mask, position_ids, output);
  detail::AttentionBatch batch;
  batch.batch = input_ids.size(0);
  batch.tokens = input_ids.size(1);
  batch.keys = batch.tokens;
  batch.matmul = compute_.cpu_matmul;
  const auto dtype = compute_dtype();
  parts_->model->rotary_at(position_ids, batch, dtype);

  // Query t sees key j <= t when j is a real token. A padding query sees at least itself, so no
  // row of the softmax is empty (its output is discarded by the caller but stays finite).
  const auto T = batch.tokens;
  auto bool_opts = attention_mask.options().dtype(torch::kBool);
  auto causal = torch::ones({T, T}, bool_opts).tril();  // (T, T)
  auto visible = (causal.unsqueeze(0) & attention_mask.to(torch::kBool).unsqueeze(1)) |
                 torch::eye(T, bool_opts).unsqueeze(0);  // (B, T, T)
  set_mask(batch, visible, shape_, parallel_.tp->size(), dtype, compute_.attention);

  auto hidden = parts_->model->forward(input_ids, batch);
  const bool logits = head_ == HeadKind::kValue || output == LmOutput::kLogits;
  return is_last_stage() && logits ? apply_head(hidden) : hidden;
}

torch::Tensor TransformerImpl::forward_packed_impl(const torch::Tensor& input_ids,
                                                   const torch::Tensor& attention_mask,
                                                   const torch::Tensor& position_ids, LmOutput output) {
  // The N real tokens as one (1, N) sequence, positions restarting at each row's first token
  // (position_ids as given), attention within each row's tokens only (in chunks of whole rows,
  // packed_attention.cpp); the output scattered back to (B, T, ...) with zeros at the padding.
  // A pipeline stage packs its input and unpacks its output, so the stages still exchange
  // (B, T, C) activations.
  const auto rows = detail::pack_rows(attention_mask);
  TORCH_CHECK(rows.index.numel() > 0, "forward: use_remove_padding packs the real tokens of attention_mask and it "
              "has none (", attention_mask.sizes(), ")");
  detail::AttentionBatch batch;
  batch.batch = 1;
  batch.tokens = rows.index.numel();
  batch.keys = batch.tokens;
  batch.matmul = compute_.cpu_matmul;
  const auto dtype = compute_dtype();
  parts_->model->rotary_at(detail::pack(position_ids, rows), batch, dtype);
  if (compute_.attention == AttentionKernel::kFlash) {
    // flash-attn's cu_seqlens: each packed sequence's first token, then N (int32 on the device).
    std::vector<std::int32_t> starts{0};
    for (const auto n : rows.lengths) starts.push_back(starts.back() + static_cast<std::int32_t>(n));
    batch.cu_seqlens = torch::tensor(starts, torch::kInt).to(attention_mask.device());
    batch.max_seqlen = *std::max_element(rows.lengths.begin(), rows.lengths.end());
  } else {
    const std::int64_t G = shape_.num_attention_heads / shape_.num_key_value_heads;
    auto chunks = detail::attention_chunks(rows.lengths, G, detail::kAttentionChunkTokens,
                                           attention_mask.options().dtype(dtype));
    batch.segments = std::move(chunks.lengths);
    batch.segment_masks = std::move(chunks.masks);
  }
  auto hidden = parts_->model->forward(detail::pack(input_ids, rows), batch);  // (1, N, C)
  const bool logits = head_ == HeadKind::kValue || output == LmOutput::kLogits;
  return detail::unpack(is_last_stage() && logits ? apply_head(hidden) : hidden, rows);
}

torch::Tensor TransformerImpl::forward_cached_impl(const torch::Tensor& input_ids,
                                                   const torch::Tensor& position_ids,
                                                   const KvCacheView& kv, bool last_token_only) {
  TORCH_CHECK(parallel_.pp->size() == 1, "forward_cached: this model is pipeline stage ", parallel_.pp->rank(),
              " of ", parallel_.pp->size(), "; generation runs on whole (pp = 1) models — reshard to the "
              "generation layout (pp_g = 1) first");
  TORCH_CHECK(kv.cache != nullptr, "forward_cached: KvCacheView.cache is null");
  TORCH_CHECK(input_ids.dim() == 2 && input_ids.numel() > 0,
              "forward_cached: input_ids must be a non-empty (B, T), got ", input_ids.sizes());
  TORCH_CHECK(position_ids.sizes() == input_ids.sizes() && kv.slot_mapping.sizes() == input_ids.sizes(),
              "forward_cached: position_ids ", position_ids.sizes(), " and slot_mapping ",
              kv.slot_mapping.sizes(), " must match input_ids ", input_ids.sizes());
  TORCH_CHECK(kv.block_tables.dim() == 2 && kv.block_tables.size(0) == input_ids.size(0) &&
                  kv.context_lens.numel() == input_ids.size(0),
              "forward_cached: block_tables (B, max_blocks) and context_lens (B) must match B");
  detail::AttentionBatch batch;
  batch.batch = input_ids.size(0);
  batch.tokens = input_ids.size(1);
  batch.cache = kv.cache;
  batch.matmul = compute_.cpu_matmul;
  const auto dtype = compute_dtype();
  parts_->model->rotary_at(position_ids, batch, dtype);

  const auto B = batch.batch, T = batch.tokens;
  const std::int64_t bs = kv.cache->block_size();
  auto long_opts = input_ids.options().dtype(torch::kLong);
  auto tables = kv.block_tables.to(torch::kLong);  // (B, M)
  auto context_lens = kv.context_lens.to(torch::kLong).view({B});
  auto slots = kv.slot_mapping.reshape({-1}).to(torch::kLong);  // (B * T)
  if (compute_.paged_decode && T == 1) {
    // The kernel reads the block tables and lengths on the device: no gathered context, no mask,
    // no host copy of the longest context. Every decode row writes its slot (all_slots_written).
    TORCH_CHECK(kv.all_slots_written != 0, "forward_cached: hybridscope.decode.paged_kernel decodes one new token "
                "per row and every row writes it (slot_mapping without -1)");
    batch.paged_decode = true;
    batch.block_tables = tables;
    batch.context_lens = context_lens;
    batch.write_slots = slots;
    auto hidden = parts_->model->forward(input_ids, batch);  // (B, 1, C)
    return apply_head(hidden);
  }
  // L: the longest context in the batch (one host sync unless the caller knows it). Shorter rows
  // are masked.
  batch.keys = kv.max_context_len >= 0 ? kv.max_context_len : context_lens.max().item<std::int64_t>();
  const auto L = batch.keys;
  TORCH_CHECK(L >= T && L <= tables.size(1) * bs, "forward_cached: context_lens (max ", L,
              ") must cover the ", T, " new tokens and fit the ", tables.size(1), " listed blocks");
  // Row (slot * KV + kv head) of the cache viewed as (slots * KV, D), for every sequence, KV head
  // and context position j < L: slot = block_tables[b, j / block_size] * block_size + j % block_size.
  const std::int64_t KV = shape_.num_key_value_heads / parallel_.tp->size();
  auto j = torch::arange(L, long_opts);
  auto context_slots = tables.index_select(1, j.div(bs, "floor")) * bs + j.remainder(bs);  // (B, L)
  batch.context_rows = (context_slots.view({B, 1, L}) * KV + torch::arange(KV, long_opts).view({1, KV, 1}))
                           .reshape({B * KV * L});

  const bool all_written = kv.all_slots_written >= 0 ? kv.all_slots_written == 1 : slots.ge(0).all().item<bool>();
  if (all_written) {
    batch.write_slots = slots;
  } else {
    batch.write_rows = slots.ge(0).nonzero().squeeze(1);
    batch.write_slots = slots.index_select(0, batch.write_rows);
  }

  // New tokens are the last T of each sequence (left-padded rows): query t sits at position
  // context_len - T + t and sees keys j <= that position. A padding query (position < 0) sees
  // key 0 only, which keeps its softmax finite.
  auto query_pos = context_lens.view({B, 1}) - T + torch::arange(T, long_opts);
  auto visible = torch::arange(L, long_opts).view({1, 1, L}) <=
                 query_pos.clamp_min(0).unsqueeze(-1);  // (B, T, L)
  set_mask(batch, visible, shape_, parallel_.tp->size(), dtype, compute_.attention);

  auto hidden = parts_->model->forward(input_ids, batch);  // (B, T, C)
  return apply_head(last_token_only ? hidden.narrow(1, T - 1, 1) : hidden);
}

torch::Tensor TransformerImpl::apply_head(const torch::Tensor& hidden) {
  torch::Tensor out;
  if (head_ == HeadKind::kValue) {
    out = parts_->score(hidden).squeeze(-1);  // (B, T)
  } else if (shape_.tie_word_embeddings) {
    out = detail::linear(hidden, parts_->model->embed_tokens->weight, {}, compute_.cpu_matmul);
  } else {
    out = parts_->lm_head(hidden);  // (B, T, V)
  }
  // Log-probs, entropies and losses want float32 logits (a 16-bit log_softmax over a large
  // vocabulary loses the small probabilities).
  return c10::isReducedFloatingType(out.scalar_type()) ? out.to(torch::kFloat) : out;
}

std::int64_t TransformerImpl::num_parameters() const {
  const auto dims = detail::tensor_parallel_dims(*this);
  const std::int64_t tp = parallel_.tp->size();
  std::int64_t total = 0;
  for (const auto& item : named_parameters()) {
    total += item.value().numel() * (dims.count(item.key()) != 0 ? tp : 1);
  }
  return total;
}

}  // namespace hs::trainer
