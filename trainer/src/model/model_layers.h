// model_layers.h — the layers model.cpp assembles into a Llama decoder (private to hs_trainer).
//
// Tensor-parallel linears (Megatron-LM's column/row split), RMSNorm, rotary embeddings, grouped
// query attention over either the current tokens (training forward) or a paged KV cache
// (rollout), the SwiGLU MLP and the decoder layer. Module and parameter names are HuggingFace's
// (self_attn.q_proj.weight, mlp.gate_proj.weight, ...), so named_parameters() is a Llama state
// dict. Not a general layer library: only what the Llama/Qwen2/Qwen3 family needs.
//
// Shapes: B batch, T new tokens, L keys attended (T for the training forward, the gathered
// context for the cached one), C hidden, H query heads, KV key/value heads, G = H / KV, D head
// dimension. With tensor parallelism H, KV, the MLP width and the vocabulary are per rank.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <torch/nn/module.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

#include "hybridscope/trainer/config/config.h"
#include "hybridscope/trainer/dist/layer_hooks.h"
#include "hybridscope/trainer/model/model.h"
#include "hybridscope/trainer/dist/parallel.h"

namespace hs::trainer::detail {

/// torch::linear(x, weight, bias) (bias may be undefined), with float32 CPU products outside
/// autocast multiplied by `matmul`'s library, forward and backward (cpu_matmul.cpp); anything else
/// takes torch::linear.
torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias, CpuMatmul matmul);
/// torch::bmm(a, b) — (batch, n, k) x (batch, k, m) — with the same choice of library (cpu_matmul.cpp).
torch::Tensor bmm(const torch::Tensor& a, const torch::Tensor& b, CpuMatmul matmul);

/// Y = X W^T with W split by rows (output features) over the tp group: rank r holds rows
/// [r * out/tp, (r+1) * out/tp). The input is replicated; backward all-reduces its gradient.
/// With gather_output the rank slices are all-gathered into the full output (the LM head),
/// otherwise each rank keeps its slice (q/k/v/gate/up feed a row-parallel layer next).
class ColumnParallelLinearImpl : public torch::nn::Module {
 public:
  ColumnParallelLinearImpl(std::int64_t in_features, std::int64_t out_features,
                           std::shared_ptr<Communicator> tp, bool gather_output, bool bias,
                           double init_std);
  /// (..., in) -> (..., out / tp), or (..., out) with gather_output.
  torch::Tensor forward(const torch::Tensor& x);

  torch::Tensor weight;  // (out / tp, in)
  torch::Tensor bias;    // (out / tp) or undefined
  static constexpr int kShardDim = 0;
  CpuMatmul matmul = CpuMatmul::kOneDnn;  // ComputeOptions::cpu_matmul (TransformerImpl::set_compute)

 private:
  std::shared_ptr<Communicator> tp_;
  bool gather_output_;
};
TORCH_MODULE(ColumnParallelLinear);

/// Y = X W^T with W split by columns (input features): rank r holds columns
/// [r * in/tp, (r+1) * in/tp) and receives the matching slice of X (the output of a
/// column-parallel layer); the partial products are all-reduced (sum) through the tp group.
class RowParallelLinearImpl : public torch::nn::Module {
 public:
  RowParallelLinearImpl(std::int64_t in_features, std::int64_t out_features,
                        std::shared_ptr<Communicator> tp, bool bias, double init_std);
  /// (..., in / tp) -> (..., out), identical on every rank of the group.
  torch::Tensor forward(const torch::Tensor& x);

  torch::Tensor weight;  // (out, in / tp)
  torch::Tensor bias;    // (out) replicated, added once after the reduction; or undefined
  static constexpr int kShardDim = 1;
  CpuMatmul matmul = CpuMatmul::kOneDnn;  // ComputeOptions::cpu_matmul (TransformerImpl::set_compute)

 private:
  std::shared_ptr<Communicator> tp_;
};
TORCH_MODULE(RowParallelLinear);

/// y = x / sqrt(mean(x^2) + eps) * weight, computed in float32 for 16-bit inputs (HF LlamaRMSNorm).
class RMSNormImpl : public torch::nn::Module {
 public:
  RMSNormImpl(std::int64_t hidden, double eps);
  torch::Tensor forward(const torch::Tensor& x);  // (..., C) -> (..., C)

  torch::Tensor weight;  // (C), initialised to 1

 private:
  std::int64_t hidden_;
  double eps_;
};
TORCH_MODULE(RMSNorm);

/// Everything about one forward pass that every layer shares, computed once per pass: rotary
/// tables at the tokens' positions, the attention mask, and for the cached pass where the new
/// K/V go and which cache slots hold each sequence's context.
struct AttentionBatch {
  std::int64_t batch = 0;   // B
  std::int64_t tokens = 0;  // T
  std::int64_t keys = 0;    // L
  torch::Tensor cos;        // (B, T, 1, D) cos(pos * inv_freq), halves repeated (HF layout)
  torch::Tensor sin;        // (B, T, 1, D) sin(...) with the first half negated (rotate_half sign)
  /// CPU path: (B * KV, G * T, L) additive mask, 0 where visible and -inf elsewhere.
  torch::Tensor additive_mask;
  /// The library of the CPU path's float32 products (ComputeOptions::cpu_matmul).
  CpuMatmul matmul = CpuMatmul::kOneDnn;
  /// CUDA path (scaled_dot_product_attention): (B, 1, T, L) bool, true where visible.
  torch::Tensor visible;

  PagedKvCache* cache = nullptr;
  torch::Tensor write_slots;    // (N) cache slots of the new tokens that are written
  torch::Tensor write_rows;     // (N) their rows in the flattened (B * T); undefined = every row
  /// (B * KV * L) rows of the cache viewed as (slots * KV, D) that hold each sequence's context,
  /// ordered (sequence, KV head, position).
  torch::Tensor context_rows;
  /// Decode through the paged kernel instead (paged_decode_attention; T = 1 on CUDA): the block
  /// tables (B, max_blocks) and context lengths (B) the kernel reads; context_rows and the masks
  /// are then unset, and nothing in the pass depends on the longest context (a CUDA graph of
  /// the step serves every context length).
  bool paged_decode = false;
  torch::Tensor block_tables;
  torch::Tensor context_lens;

  /// Packed pass (use_remove_padding, B = 1): the lengths of the attention chunks laid end to end
  /// along T (sum T; each chunk one or more whole sequences, attention_chunks) and, per chunk, its
  /// block-diagonal causal additive mask (G * c, c): 0 where a token sees an earlier-or-same token
  /// of its own sequence, -inf elsewhere. Set, attention runs per chunk (packed_attention) and the
  /// masks above are unset; empty, a padded pass.
  std::vector<std::int64_t> segments;
  std::vector<torch::Tensor> segment_masks;
  /// Packed pass with hybridscope.attention = flash (CUDA): each packed sequence's start in N, then
  /// N, as int32 (S + 1) on the device (flash-attn's cu_seqlens), and the longest sequence; the
  /// chunks and masks above are then unset.
  torch::Tensor cu_seqlens;
  std::int64_t max_seqlen = 0;
};

/// The real tokens of a padded (B, T) batch laid end to end as one (1, N) sequence (verl's
/// unpad_input with use_remove_padding): row-major, so each row's tokens stay in order.
struct PackedRows {
  torch::Tensor index;                // (N) int64: positions in the flattened (B * T) that hold real tokens
  std::vector<std::int64_t> lengths;  // real tokens of each row that has any, in row order (sum N)
  std::int64_t batch = 0;             // B
  std::int64_t tokens = 0;            // T
};
/// attention_mask (B, T) {0,1} -> its PackedRows (one host sync for the lengths).
PackedRows pack_rows(const torch::Tensor& attention_mask);
/// x (B, T, ...) -> (1, N, ...): the real tokens' entries.
torch::Tensor pack(const torch::Tensor& x, const PackedRows& rows);
/// y (1, N, ...) -> (B, T, ...), zeros at the padding (verl's pad_input); differentiable in y.
torch::Tensor unpack(const torch::Tensor& y, const PackedRows& rows);
/// Consecutive packed sequences grouped into attention chunks of at most `budget` tokens (a longer
/// sequence is a chunk of its own), with each chunk's mask for AttentionBatch.segment_masks (G query
/// heads per KV head, in `options`' dtype and device).
struct AttentionChunks {
  std::vector<std::int64_t> lengths;  // tokens per chunk (sum N)
  std::vector<torch::Tensor> masks;   // (G * c, c) each
};
AttentionChunks attention_chunks(const std::vector<std::int64_t>& lengths, std::int64_t G, std::int64_t budget,
                                 const torch::TensorOptions& options);
/// Tokens an attention chunk may hold: 128 keeps the extra scores of a chunk (at most 128 per
/// token, masked) small beside the projections' work while cutting the op count on short
/// sequences (docs/benchmarks.md, "use_remove_padding").
inline constexpr std::int64_t kAttentionChunkTokens = 128;
/// Causal attention within each sequence, never across them (flash-attn's varlen attention
/// written out per chunk of batch.segments with AttentionImpl's CPU kernel): q (1, N, H, D),
/// k and v (1, N, KV, D) -> (1, N, H * D).
torch::Tensor packed_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                               const AttentionBatch& batch, double scale);
/// The same attention by FlashAttention-2's varlen kernel (ATen's _flash_attention_forward over
/// batch.cu_seqlens, causal; differentiable): q (1, N, H, D), k and v (1, N, KV, D) in bf16 or fp16
/// on CUDA -> (1, N, H * D).
torch::Tensor flash_varlen_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                     const AttentionBatch& batch, double scale);

/// Decode attention through the paged cache on the device (ComputeOptions.paged_decode): q (B, H, D)
/// of one new token per sequence against the K/V of its first context_lens[b] positions, read from
/// k_cache / v_cache (slots, KV, D) through block_tables (B, max_blocks) by hybridscope's CUDA
/// kernel (paged_attention_kernel.cu) -> (B, H, D) in the cache's dtype. Throws where the kernel
/// was not built (paged_decode_kernel_built() false) or for tensors off a CUDA device.
torch::Tensor paged_decode_attention(const torch::Tensor& q, const torch::Tensor& k_cache, const torch::Tensor& v_cache,
                                     const torch::Tensor& block_tables, const torch::Tensor& context_lens,
                                     std::int64_t block_size, double scale);
/// Whether this build has the kernel (nvcc and a CUDA LibTorch at configure time).
bool paged_decode_kernel_built();
/// Whether the kernel takes this head dimension (false where it was not built).
bool paged_decode_supports(std::int64_t head_dim);

/// Grouped-query self-attention with HF-style rotary embeddings; q/k/v column-parallel split per
/// head, o row-parallel. Qwen2: q/k/v biases (split with their rows). Qwen3: q_norm / k_norm, an
/// RMSNorm over each head's D features of q and k before the rotary embedding (HF Qwen3Attention),
/// replicated over the tp group.
class AttentionImpl : public torch::nn::Module {
 public:
  AttentionImpl(const ModelShape& shape, const ParallelContext& parallel);
  /// x (B, T, C) -> (B, T, C). With batch.cache set, writes this layer's new K/V into the cache
  /// and attends over the gathered context instead of over x's own keys.
  torch::Tensor forward(const torch::Tensor& x, const AttentionBatch& batch, int layer);

  ColumnParallelLinear q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr};
  RowParallelLinear o_proj{nullptr};
  RMSNorm q_norm{nullptr}, k_norm{nullptr};  // Qwen3 only

 private:
  std::int64_t heads_;     // H on this rank
  std::int64_t kv_heads_;  // KV on this rank
  std::int64_t head_dim_;  // D
  double scale_;           // 1 / sqrt(D)
};
TORCH_MODULE(Attention);

/// down(silu(gate(x)) * up(x)); gate/up column-parallel, down row-parallel.
class MlpImpl : public torch::nn::Module {
 public:
  MlpImpl(const ModelShape& shape, const ParallelContext& parallel);
  torch::Tensor forward(const torch::Tensor& x);  // (B, T, C) -> (B, T, C)

  ColumnParallelLinear gate_proj{nullptr}, up_proj{nullptr};
  RowParallelLinear down_proj{nullptr};
};
TORCH_MODULE(Mlp);

/// Pre-norm decoder layer: h = x + attn(norm(x)); out = h + mlp(norm(h)).
class DecoderLayerImpl : public torch::nn::Module {
 public:
  DecoderLayerImpl(const ModelShape& shape, const ParallelContext& parallel);
  torch::Tensor forward(const torch::Tensor& x, const AttentionBatch& batch, int layer);

  RMSNorm input_layernorm{nullptr};
  Attention self_attn{nullptr};
  RMSNorm post_attention_layernorm{nullptr};
  Mlp mlp{nullptr};
};
TORCH_MODULE(DecoderLayer);

/// Which part of the decoder one pipeline stage holds (layout.h training_layout's placement):
/// decoder layers [first_layer, end_layer), the embedding on the first stage, the final norm and
/// the head on the last. One stage holds everything.
struct StageRange {
  int first_layer = 0, end_layer = 0;
  bool first = true, last = true;
};

/// HF's LlamaModel: embeddings, the decoder layers, the final norm, and the rotary tables. A
/// pipeline stage holds only its part (StageRange); its layers keep their global names
/// (model.layers.{i}) so named_parameters() matches llama_parameters() on every stage.
class BackboneImpl : public torch::nn::Module {
 public:
  BackboneImpl(const ModelShape& shape, const ParallelContext& parallel, const StageRange& stage);
  /// input_ids (B, T) on the first stage, the previous stage's hidden states (B, T, C) otherwise
  /// -> this stage's output (B, T, C): final-normed hidden states on the last stage.
  torch::Tensor forward(const torch::Tensor& input, const AttentionBatch& batch);
  /// Rotary tables gathered at position_ids (B, T) into batch.cos / batch.sin, in `dtype` (the
  /// compute dtype).
  void rotary_at(const torch::Tensor& position_ids, AttentionBatch& batch, torch::Dtype dtype) const;

  /// Module::to, then the rotary tables are recomputed from their float64 originals, so that a
  /// model cast to float64 gets float64-accurate angles rather than widened float32 ones.
  void to(torch::Device device, torch::Dtype dtype, bool non_blocking = false) override;
  void to(torch::Dtype dtype, bool non_blocking = false) override;
  void to(torch::Device device, bool non_blocking = false) override;

  /// enable_gradient_checkpointing: under autograd each decoder layer keeps only its input and is
  /// computed again in the backward (Megatron's full recomputation, HF's gradient checkpointing).
  bool checkpoint_layers = false;
  /// Told around each decoder layer (layer_hooks.h): fsdp's per-layer units (zero.h). Not owned;
  /// null: none.
  LayerHooks* layer_hooks = nullptr;

  torch::nn::Embedding embed_tokens{nullptr};  // first stage only
  /// Container of this stage's decoder layers, each registered under its global index.
  std::shared_ptr<torch::nn::Module> layers;
  std::vector<DecoderLayer> typed_layers;  // the same modules as `layers`, typed, in order
  RMSNorm norm{nullptr};                   // last stage only
  torch::Tensor rope_cos;  // (max_position_embeddings, D) buffer
  torch::Tensor rope_sin;  // (max_position_embeddings, D) buffer, first half negated

 private:
  void refresh_rotary();
  // Before layer `next` (-1: after the last layer): layer_hooks' backward hook on h, then
  // before_forward(next).
  void hook_layer_boundary(const torch::Tensor& h, int next, int previous);
  int first_layer_ = 0;  // global index of typed_layers[0]
  torch::Tensor rope_cos64_, rope_sin64_;  // (max_position_embeddings, D) float64, CPU
};
TORCH_MODULE(Backbone);

/// For every tensor-parallel parameter of `model` (by its named_parameters() name), the dimension
/// it is split along over the tp group (0 column-parallel, 1 row-parallel). Parameters not listed
/// are replicated. save_pretrained gathers along it, load_pretrained slices along it.
std::unordered_map<std::string, int> tensor_parallel_dims(const torch::nn::Module& model);

}  // namespace hs::trainer::detail

namespace hs::trainer {

struct TransformerImpl::Parts {
  detail::Backbone model{nullptr};
  detail::ColumnParallelLinear lm_head{nullptr};  // kLm with untied embeddings
  torch::nn::Linear score{nullptr};               // kValue: Linear(C, 1) with bias
};

}  // namespace hs::trainer
