// reshard_fixtures.h — the models the reshard planner and executor tests share.
#pragma once

#include <string>
#include <vector>

#include "hybridscope/trainer/dist/layout.h"

namespace hs::trainer::test {

// Four decoder layers of one column- and one row-parallel float32 matrix each: every parameter
// is tp-split and the stages are balanced, which is what HybridFlow's Table 2 assumes.
inline std::vector<ParamSpec> sharded_model() {
  std::vector<ParamSpec> out;
  for (int l = 0; l < 4; ++l) {
    out.push_back({"layers." + std::to_string(l) + ".column.weight", {64, 32}, 4, 0, l});
    out.push_back({"layers." + std::to_string(l) + ".row.weight", {32, 64}, 4, 1, l});
  }
  return out;
}

// A two-layer Llama small enough for thread ranks, with heads that split over tp 4.
inline ModelShape tiny_llama() {
  ModelShape s;
  s.vocab_size = 16;
  s.hidden_size = 16;
  s.intermediate_size = 32;
  s.num_hidden_layers = 2;
  s.num_attention_heads = 4;
  s.num_key_value_heads = 4;
  s.max_position_embeddings = 32;
  return s;
}

}  // namespace hs::trainer::test
