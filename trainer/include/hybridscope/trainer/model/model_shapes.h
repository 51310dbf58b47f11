// model_shapes.h — named model shapes the benchmarks share (random weights; no checkpoint needed).
//
//   demo      configs/demo_grpo.yaml's policy with the char tokenizer (98 ids): hidden 128, MLP 384,
//             2 layers, 4 heads, 2 KV heads — 1.6 MiB in float32
//   bench-41m hidden 768, MLP 2048, 4 layers, 12 heads, vocab 8192 — 156 MiB in float32
//   llama2-7b Llama-2-7B: hidden 4096, MLP 11008, 32 layers, 32 heads, vocab 32000
//   qwen2.5-0.5b, qwen2.5-1.5b, qwen2.5-7b  Qwen2.5 (architecture qwen2, q/k/v biases) at the
//             sizes of each config.json; 0.5B and 1.5B tie their embeddings:
//             hidden 896 / 1536 / 3584, MLP 4864 / 8960 / 18944, 24 / 28 / 28 layers, 14 / 12 / 28
//             heads, 2 / 2 / 4 KV heads, vocab 151936 / 151936 / 152064, rope theta 1e6
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "hybridscope/trainer/config/config.h"

namespace hs::trainer {

inline std::vector<std::string> model_shape_names() {
  return {"demo", "bench-41m", "llama2-7b", "qwen2.5-0.5b", "qwen2.5-1.5b", "qwen2.5-7b"};
}

/// The shape called `name`; std::invalid_argument listing the names otherwise.
inline ModelShape model_shape_by_name(const std::string& name) {
  ModelShape s;
  auto set = [&](int vocab, int hidden, int mlp, int layers, int heads, int kv) {
    s.vocab_size = vocab;
    s.hidden_size = hidden;
    s.intermediate_size = mlp;
    s.num_hidden_layers = layers;
    s.num_attention_heads = heads;
    s.num_key_value_heads = kv;
  };
  if (name == "demo") {
    set(98, 128, 384, 2, 4, 2);
  } else if (name == "bench-41m") {
    set(8192, 768, 2048, 4, 12, 12);
  } else if (name == "llama2-7b") {
    set(32000, 4096, 11008, 32, 32, 32);
  } else if (name == "qwen2.5-0.5b" || name == "qwen2.5-1.5b" || name == "qwen2.5-7b") {
    if (name == "qwen2.5-0.5b") set(151936, 896, 4864, 24, 14, 2);
    if (name == "qwen2.5-1.5b") set(151936, 1536, 8960, 28, 12, 2);
    if (name == "qwen2.5-7b") set(152064, 3584, 18944, 28, 28, 4);
    s.tie_word_embeddings = name != "qwen2.5-7b";
    s.rope_theta = 1e6;
    s.architecture = ModelArchitecture::kQwen2;
  } else {
    std::string names;
    for (const auto& n : model_shape_names()) names += (names.empty() ? "" : ", ") + n;
    throw std::invalid_argument("unknown model shape '" + name + "' (use one of " + names + ")");
  }
  return s;
}

}  // namespace hs::trainer
