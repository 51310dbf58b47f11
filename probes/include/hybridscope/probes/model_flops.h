// model_flops.h — verl's FLOPs estimate of a Llama/Qwen2-style decoder, the one formula behind the
// trainer's perf/mfu/* and the simulator's compute times. No LibTorch: hs_sim uses it without the
// trainer, and the trainer converts its ModelShape to a DecoderShape.
//
// Source: verl/utils/flops_counter.py, _estimate_qwen2_flops (used for qwen2, llama, qwen3, …):
//   N_dense = layers·(3·h·ffn + h·(q + k + v + o)) + 2·V·h      (embedding and LM head both counted,
//                                                               tied or not; norms and biases not)
//   FLOPs   = 6·N_dense·Σs + 6·Σs²·head_dim·heads·layers        (forward + backward, s = each
//                                                               sequence's prompt + response length)
// The attention term's factor is 6 since verl PR #4959 (2026-01-17, "Correct Attention FLOPS
// estimation": causal attention computes half the score matrix, 12 → 6); verl before it used 12.
// Forward alone is a third of each term (2·N·Σs + 2·Σs²·head_dim·heads·layers).
#pragma once

#include <cstdint>
#include <vector>

namespace hs::probes {

/// The shape fields verl's formula reads (HuggingFace config.json names).
struct DecoderShape {
  double vocab_size = 0;
  double hidden_size = 0;
  double intermediate_size = 0;  // the SwiGLU MLP's width (gate, up and down: 3 matrices)
  double num_hidden_layers = 0;
  double num_attention_heads = 0;
  double num_key_value_heads = 0;
  double head_dim = 0;           // config.head_dim where the model sets it, else hidden / heads
};

/// N_dense: the parameters every token multiplies (embedding + LM head + attention projections +
/// MLP), verl's count.
double dense_parameter_count(const DecoderShape& shape) noexcept;

/// Forward + backward FLOPs over sequences whose lengths sum to `token_sum` and whose squared
/// lengths sum to `square_sum`: 6·N_dense·token_sum + 6·square_sum·head_dim·heads·layers.
double training_flops(const DecoderShape& shape, double token_sum, double square_sum) noexcept;
/// The same over the given sequence lengths (Σs, Σs²).
double training_flops(const DecoderShape& shape, const std::vector<std::int64_t>& sequence_lengths) noexcept;

/// Forward-only FLOPs (a log-prob or value pass): a third of training_flops.
double forward_flops(const DecoderShape& shape, double token_sum, double square_sum) noexcept;

}  // namespace hs::probes
