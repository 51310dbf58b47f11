// model.h — Llama/Qwen2/Qwen3 decoder-only transformer in LibTorch.
//
// RMSNorm, rotary position embeddings (default or Llama 3's scaling), SwiGLU MLP, grouped-query
// attention (Qwen2: q/k/v biases; Qwen3: per-head q/k RMSNorm, explicit head_dim), optional tied
// embeddings; an LM head (actor, reference) or a scalar value head (critic, reward model).
// Linear layers are tensor-parallel aware (ColumnParallelLinear / RowParallelLinear over
// ParallelContext::tp); with a one-rank context they are plain linears. Parameter names follow
// HuggingFace's Llama naming (model.layers.0.self_attn.q_proj.weight, ..., lm_head.weight,
// score.weight for the value head) so checkpoints are readable by other tools.
#pragma once

#include <string>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/any.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

#include "hybridscope/trainer/config/config.h"
#include "hybridscope/trainer/dist/parallel.h"

namespace hs::trainer {

enum class HeadKind { kLm, kValue };

/// What an LM model's last stage returns from forward(): the logits (B, T, V), or the final
/// hidden states (B, T, C) after model.norm, for token_log_probs() to apply the head in chunks of
/// tokens so that no (B, T, V) tensor exists. Value heads and earlier pipeline stages ignore it.
enum class LmOutput { kLogits, kHidden };

class PagedKvCache;  // paged_kv_cache.h

/// How a model computes (hybridscope.precision, hybridscope.attention; docs/config.md).
struct ComputeOptions {
  /// kFloat: compute in the parameters' dtype. kBFloat16 over float32 parameters: the forward
  /// runs under autocast (matmuls and attention in bf16, norms and softmax in float32) and
  /// gradients reach the float32 parameters (the master weights). Over bf16 parameters (the
  /// rollout model): plain bf16.
  torch::Dtype dtype = torch::kFloat;
  AttentionKernel attention = AttentionKernel::kAuto;
  /// hybridscope.cpu_matmul: the library of the linear layers' float32 products on CPU (forward
  /// and backward). kOneDnn falls back to torch::linear where LibTorch has no oneDNN (non-x86).
  CpuMatmul cpu_matmul = CpuMatmul::kOneDnn;
  /// verl's use_remove_padding: forward() packs the real tokens of its (B, T) batch into one
  /// (1, N) sequence, attends within each row's tokens only (per chunk of whole sequences, the CPU
  /// kernel, unless `attention` is kFlash: FlashAttention-2's varlen kernel on CUDA) and scatters the outputs back to (B, T, ...) with zeros at the
  /// padding. Equal to the padded forward at every real token; nothing runs over padding.
  /// forward_cached (generation) is unaffected.
  bool remove_padding = false;
  /// hybridscope.decode.paged_kernel: a forward_cached of one new token per row (a decode step) on
  /// CUDA attends through hybridscope's paged-attention kernel, which reads the block tables on
  /// the device, instead of gathering every row's context into a (B, KV, L, D) copy. set_compute
  /// refuses it where the kernel was not built or the head dimension is not one it takes.
  bool paged_decode = false;
};
/// hybridscope.precision / .attention / .cpu_matmul (their enums are declared in config.h) as
/// ComputeOptions.
ComputeOptions compute_options(Precision precision, AttentionKernel attention,
                               CpuMatmul cpu_matmul = CpuMatmul::kOneDnn);

/// Where the K/V of a forward pass go: nullptr = no cache (training forward).
struct KvCacheView {
  PagedKvCache* cache = nullptr;
  /// (B, T) flat slot index (block * block_size + offset) for each new token's K/V. Rows with
  /// fewer than T new tokens are left-padded; a padding token has slot -1 and is not written.
  torch::Tensor slot_mapping;
  /// (B, max_blocks) block tables, padded with 0; (B) sequence lengths *after* this step.
  torch::Tensor block_tables;
  torch::Tensor context_lens;
  /// Host copies the caller often has (the rollout engine builds these tensors from host vectors):
  /// max(context_lens), and whether no slot is -1. Unset (-1): forward_cached reads them from the
  /// tensors, which on CUDA synchronises the host with the device.
  std::int64_t max_context_len = -1;
  int all_slots_written = -1;  // 1 yes, 0 no, -1 unknown
};

class TransformerImpl : public torch::nn::Module {
 public:
  TransformerImpl(const ModelShape& shape, HeadKind head, ParallelContext parallel = {});

  /// input_ids, attention_mask, position_ids: (B, T) int64 / {0,1} / int64.
  /// attention_mask marks real tokens (left padding = 0); attention is causal over real tokens.
  /// Returns logits (B, T, V) for kLm, values (B, T) for kValue, in float32 (or the parameters'
  /// dtype when wider) whatever the compute precision.
  ///
  /// Pipeline stages (parallel.pp->size() = p > 1): stage s = pp->rank() holds decoder layers
  /// [s·L/p, (s+1)·L/p) under their global names, the embedding on stage 0, model.norm and the
  /// head on stage p-1 (layout.h training_layout). Stage 0 takes input_ids; a later stage takes
  /// the previous stage's output (B, T, C) in place of input_ids (mask and positions as above);
  /// every stage but the last returns its hidden states (B, T, C). pipeline.h runs the stages.
  /// L % p must be 0; tied embeddings are refused with p > 1.
  torch::Tensor forward(const torch::Tensor& input_ids, const torch::Tensor& attention_mask,
                        const torch::Tensor& position_ids, LmOutput output = LmOutput::kLogits);
  bool is_first_stage() const;  // holds embed_tokens
  bool is_last_stage() const;   // holds model.norm and lm_head / score; forward returns logits / values

  /// Incremental forward through the paged KV cache: writes the K/V of the T new tokens into the
  /// slots of `kv.slot_mapping`, attends over each sequence's cached context (context_lens).
  /// Returns logits (B, T, V). Equal to the full forward's logits at the same positions.
  /// Whole models only (pp = 1: the generation layout has one stage); throws on a pipeline stage.
  /// last_token_only: the head on each sequence's last new token only, (B, 1, V): a prefill needs
  /// no more, and its (B, T, V) logits at a 152k vocabulary would be the wave's largest tensor.
  torch::Tensor forward_cached(const torch::Tensor& input_ids, const torch::Tensor& position_ids,
                               const KvCacheView& kv, bool last_token_only = false);

  /// log p(labels) and the entropy of softmax(head(hidden) / temperature) per token, the LM head
  /// applied to `kLogitsChunkBytes` of float32 logits at a time, forward and backward (a custom
  /// autograd function recomputes each chunk's logits in the backward, as verl's fused
  /// linear-for-PPO does): memory is bounded by the tokens, never by tokens x vocabulary.
  /// hidden: (N, C) final hidden states (forward with LmOutput::kHidden); labels: (N) token ids.
  /// Returns {log_probs (N), entropy (N) or undefined}, float32 (float64 for a float64 model).
  /// Differentiable in `hidden` and the head's weight. Last stage of an LM model only. With
  /// tp > 1 the vocabulary-split head is gathered per chunk through the usual autograd path.
  /// `chunk_bytes`: float32 logits materialised at once (at least one token's).
  std::pair<torch::Tensor, torch::Tensor> token_log_probs(const torch::Tensor& hidden, const torch::Tensor& labels,
                                                          double temperature, bool with_entropy,
                                                          std::int64_t chunk_bytes = kLogitsChunkBytes);
  /// Bytes of float32 logits token_log_probs materialises at once by default: 441 tokens of a
  /// 151,936-row vocabulary.
  static constexpr std::int64_t kLogitsChunkBytes = std::int64_t{256} << 20;

  const ModelShape& shape() const { return shape_; }
  HeadKind head() const { return head_; }
  /// Precision and attention kernel of every later forward. Throws std::invalid_argument for
  /// kSdpa where this LibTorch has no scaled_dot_product_attention.
  void set_compute(const ComputeOptions& options);
  const ComputeOptions& compute() const { return compute_; }
  /// The dtype matmuls run in and the KV cache holds: compute().dtype when it is a 16-bit type,
  /// otherwise the parameters' dtype.
  torch::Dtype compute_dtype() const;
  /// enable_gradient_checkpointing: training forwards keep only each decoder layer's input and
  /// recompute the layer in the backward (same results; less activation memory, one more forward
  /// of the layers). No effect without autograd (log-probs, generation).
  void set_gradient_checkpointing(bool on);
  bool gradient_checkpointing() const;
  /// The process groups the layers split over (tp sizes the per-rank heads and KV cache).
  const ParallelContext& parallel() const { return parallel_; }
  /// Number of parameters excluding embeddings' duplicate when tied (this stage's, with pp > 1).
  std::int64_t num_parameters() const;

 private:
  ModelShape shape_;
  HeadKind head_;
  ParallelContext parallel_;
  ComputeOptions compute_;
  /// One of the parameters: Module::to, set_data (offload, fsdp) keep its TensorImpl, so its dtype
  /// and device are the model's without walking the parameters on every forward.
  torch::Tensor anchor_;
  // embed_tokens, layers (ModuleList of decoder layers), norm, lm_head | score are registered
  // in the constructor; see model.cpp.
  struct Parts;
  std::shared_ptr<Parts> parts_;
  /// Final hidden states (B, T, C) -> logits (B, T, V) or values (B, T), float32 or wider.
  torch::Tensor apply_head(const torch::Tensor& hidden);
  /// forward / forward_cached without the autocast region compute() asks for.
  torch::Tensor forward_impl(const torch::Tensor& input_ids, const torch::Tensor& attention_mask,
                             const torch::Tensor& position_ids, LmOutput output);
  torch::Tensor forward_cached_impl(const torch::Tensor& input_ids, const torch::Tensor& position_ids,
                                    const KvCacheView& kv, bool last_token_only);
  /// forward_impl with compute().remove_padding.
  torch::Tensor forward_packed_impl(const torch::Tensor& input_ids, const torch::Tensor& attention_mask,
                                    const torch::Tensor& position_ids, LmOutput output);
  /// The head's weight (V/tp, C): lm_head's, or embed_tokens' when tied.
  torch::Tensor head_weight() const;
};
TORCH_MODULE(Transformer);

/// Writes `model` (a whole model or tp shards, not a pipeline stage) as HuggingFace's layout, in
/// its architecture's naming (hf_config.h: model_type, {Llama,Qwen2,Qwen3}ForCausalLM or
/// ...ForTokenClassification for a value head): dir/config.json and dir/model.safetensors in the
/// parameters' dtype. With tp the split weights are gathered and world rank 0 writes.
void save_pretrained(Transformer& model, const std::string& dir);
/// Reads a HuggingFace model directory (config.json per hf_config.h, model.safetensors or the
/// shards of model.safetensors.index.json, F32/BF16/F16/F64 tensors). Each rank reads only what
/// it holds: a pipeline stage its layers, a tp rank its rows or columns of the split weights.
/// Parameters are float32 (16-bit tensors widen exactly), float64 for a float64 checkpoint.
/// Throws std::runtime_error (HfConfigError for config.json) naming the file and the problem.
Transformer load_pretrained(const std::string& dir, HeadKind head, ParallelContext parallel = {});

/// Safetensors I/O (https://huggingface.co/docs/safetensors): 8-byte little-endian header size,
/// JSON header {name: {dtype, shape, data_offsets}, "__metadata__": {...}}, then raw data.
void save_safetensors(const std::string& path,
                      const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
                      const std::vector<std::pair<std::string, std::string>>& metadata = {});
std::vector<std::pair<std::string, torch::Tensor>> load_safetensors(const std::string& path);

}  // namespace hs::trainer
