// model_flops.cpp — verl's decoder FLOPs estimate (see model_flops.h for the formula's source).
#include "hybridscope/probes/model_flops.h"

namespace hs::probes {

double dense_parameter_count(const DecoderShape& s) noexcept {
  const double q = s.num_attention_heads * s.head_dim;
  const double kv = s.num_key_value_heads * s.head_dim;
  const double o = s.num_attention_heads * s.head_dim;
  const double per_layer = 3.0 * s.hidden_size * s.intermediate_size + s.hidden_size * (q + kv + kv + o);
  return s.num_hidden_layers * per_layer + 2.0 * s.vocab_size * s.hidden_size;
}

double training_flops(const DecoderShape& s, double token_sum, double square_sum) noexcept {
  return 6.0 * dense_parameter_count(s) * token_sum +
         6.0 * square_sum * s.head_dim * s.num_attention_heads * s.num_hidden_layers;
}

double training_flops(const DecoderShape& s, const std::vector<std::int64_t>& sequence_lengths) noexcept {
  double tokens = 0.0, squares = 0.0;
  for (std::int64_t len : sequence_lengths) {
    const double l = static_cast<double>(len);
    tokens += l;
    squares += l * l;
  }
  return training_flops(s, tokens, squares);
}

double forward_flops(const DecoderShape& s, double token_sum, double square_sum) noexcept {
  return training_flops(s, token_sum, square_sum) / 3.0;
}

}  // namespace hs::probes
