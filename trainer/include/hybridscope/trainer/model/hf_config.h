// hf_config.h — a HuggingFace model directory's config.json <-> ModelShape. Free of LibTorch.
//
// Reads what transformers writes for the decoders the Transformer implements (model.h):
// model_type llama (Llama 2/3), qwen2 (Qwen2/Qwen2.5) and qwen3, in both layouts transformers
// writes — 4.x (top-level rope_theta, rope_scaling, torch_dtype) and 5.x (rope_parameters
// {rope_type, rope_theta, ...}, dtype, layer_types). Everything the model cannot honour is refused
// with an HfConfigError naming the file and the key — another activation, sliding-window
// attention, a rope type other than default/llama3, mixture-of-experts, biases where the
// architecture has none, attention dropout — never loaded with a default.
#pragma once

#include <stdexcept>
#include <string>

#include "hybridscope/trainer/config/config.h"

namespace hs::trainer {

class HfConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// What config.json says about the checkpoint beyond its shape.
struct HfModelConfig {
  ModelShape shape;
  /// "float32", "bfloat16", "float16", "float64" from dtype (5.x) or torch_dtype (4.x); empty
  /// when absent.
  std::string dtype;
};

/// Parses the text of a config.json; `path` names it in errors. Throws HfConfigError.
HfModelConfig parse_hf_config(const std::string& json_text, const std::string& path);
/// Reads and parses `path`. Throws HfConfigError (also when it cannot be read).
HfModelConfig read_hf_config(const std::string& path);

/// config.json for `shape` as transformers 5 writes it for its architecture (model_type,
/// architectures = {Llama,Qwen2,Qwen3}ForCausalLM, or ...ForTokenClassification with one label for
/// a value head), with the 4.x keys rope_theta / rope_scaling / torch_dtype beside the 5.x
/// rope_parameters / dtype so that both generations read the same rotary embedding. Pretty-printed
/// JSON text.
std::string hf_config_json(const ModelShape& shape, bool value_head, const std::string& dtype);

/// HF's class name for `architecture` ("Llama", "Qwen2", "Qwen3") and model_type ("llama", ...).
std::string hf_class_prefix(ModelArchitecture architecture);

}  // namespace hs::trainer
