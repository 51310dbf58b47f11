// palm_flops.h — the second MFU convention users meet, beside verl's (model_flops.h): PaLM's
// (Chowdhery et al. 2022, Appendix B, "model FLOPs utilization") as torchtitan computes it
// (torchtitan/models/utils.py: get_nparams_and_active_nparams, quadratic_attention_flops_per_token):
//
//   per token 6·N + 12·L·H·Q·T      L layers, H heads, Q head_dim, T the token's sequence length
//   over sequences 6·N·Σs + 12·L·H·Q·Σs²
//
// N = the parameters every token multiplies, without the input embedding table (a lookup, no
// FLOPs) unless it is shared with the LM head; the head is counted. Attention is counted in full:
// PaLM and torchtitan "do not account for sparsity in causal attention", so its factor is 12 where
// verl's is 6 (verl PR #4959 halved it for the causal mask). Against verl's formula N is smaller
// by the embedding's V·h and the attention term twice verl's: PaLM's MFU reads below verl's for
// short sequences and above it for long ones (the crossover is at s = V·h / (L·H·Q)).
//
// N here counts the matmul weights (DecoderShape has no norms and no q/k/v biases): for
// Qwen2.5-0.5B 493,961,216 against torchtitan's 494,032,768 (every parameter, its embedding being
// the tied LM head), 0.014 % fewer.
#pragma once

#include <cstdint>
#include <vector>

#include "hybridscope/probes/model_flops.h"

namespace hs::probes {

/// PaLM's N: verl's dense_parameter_count less the input embedding (V·h).
double palm_parameter_count(const DecoderShape& shape) noexcept;
/// 6·N·token_sum + 12·layers·heads·head_dim·square_sum.
double palm_training_flops(const DecoderShape& shape, double token_sum, double square_sum) noexcept;
/// The same over the given sequence lengths (Σs, Σs²).
double palm_training_flops(const DecoderShape& shape, const std::vector<std::int64_t>& sequence_lengths) noexcept;

}  // namespace hs::probes
