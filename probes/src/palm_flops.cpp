// palm_flops.cpp — PaLM's / torchtitan's training FLOPs (palm_flops.h for the formula's source).
#include "hybridscope/probes/palm_flops.h"

namespace hs::probes {

double palm_parameter_count(const DecoderShape& s) noexcept {
  return dense_parameter_count(s) - s.vocab_size * s.hidden_size;
}

double palm_training_flops(const DecoderShape& s, double token_sum, double square_sum) noexcept {
  return 6.0 * palm_parameter_count(s) * token_sum +
         12.0 * s.num_hidden_layers * s.num_attention_heads * s.head_dim * square_sum;
}

double palm_training_flops(const DecoderShape& s, const std::vector<std::int64_t>& sequence_lengths) noexcept {
  double tokens = 0.0, squares = 0.0;
  for (const std::int64_t len : sequence_lengths) {
    const double l = static_cast<double>(len);
    tokens += l;
    squares += l * l;
  }
  return palm_training_flops(s, tokens, squares);
}

}  // namespace hs::probes
