// hf_config.cpp — config.json <-> ModelShape for the llama, qwen2 and qwen3 decoders.
//
// Defaults are transformers' own for each model_type (LlamaConfig, Qwen2Config, Qwen3Config):
// num_key_value_heads = num_attention_heads, rope_theta 10000, rms_norm_eps 1e-6, untied
// embeddings, max_position_embeddings 2048 (llama) or 32768 (qwen2, qwen3), hidden_act silu.
#include "hybridscope/trainer/model/hf_config.h"

#include <cstdint>
#include <fstream>
#include <limits>
#include <sstream>
#include <type_traits>

#include <nlohmann/json.hpp>

namespace hs::trainer {
namespace {

using Json = nlohmann::ordered_json;

struct Reader {
  const Json& config;
  const std::string& path;

  [[noreturn]] void fail(const std::string& what) const { throw HfConfigError(path + ": " + what); }

  bool has(const Json& object, const char* key) const {
    return object.contains(key) && !object[key].is_null();
  }
  bool has(const char* key) const { return has(config, key); }

  // The value at `key` as T, checked first: nlohmann's get<int>() of a number outside int's range
  // (1e39) is undefined behaviour, not an exception (found by tests/fuzz/fuzz_hf_config).
  template <typename T>
  T get(const Json& object, const char* key, const std::string& shown) const {
    const Json& v = object[key];
    if constexpr (std::is_same_v<T, bool>) {
      if (!v.is_boolean()) fail("key '" + shown + "' must be true or false, got " + v.dump());
      return v.get<bool>();
    } else if constexpr (std::is_integral_v<T>) {
      if (!v.is_number_integer()) fail("key '" + shown + "' must be an integer, got " + v.dump());
      const bool fits = v.is_number_unsigned()
                            ? v.get<std::uint64_t>() <= static_cast<std::uint64_t>(std::numeric_limits<T>::max())
                            : v.get<std::int64_t>() >= static_cast<std::int64_t>(std::numeric_limits<T>::min()) &&
                                  v.get<std::int64_t>() <= static_cast<std::int64_t>(std::numeric_limits<T>::max());
      if (!fits) fail("key '" + shown + "' = " + v.dump() + " is out of range");
      return v.get<T>();
    } else if constexpr (std::is_floating_point_v<T>) {
      if (!v.is_number()) fail("key '" + shown + "' must be a number, got " + v.dump());
      return v.get<T>();
    } else {
      try {
        return v.get<T>();
      } catch (const Json::exception& e) {
        fail("key '" + shown + "' has the wrong type (" + v.dump() + "): " + e.what());
      }
    }
  }
  template <typename T>
  T required(const char* key) const {
    if (!has(key)) fail(std::string("missing required key '") + key + "'");
    return get<T>(config, key, key);
  }
  template <typename T>
  T optional(const char* key, T fallback) const {
    return has(key) ? get<T>(config, key, key) : fallback;
  }
};

ModelArchitecture architecture_of(const Reader& r) {
  const auto type = r.required<std::string>("model_type");
  if (type == "llama") return ModelArchitecture::kLlama;
  if (type == "qwen2") return ModelArchitecture::kQwen2;
  if (type == "qwen3") return ModelArchitecture::kQwen3;
  const bool moe = type.find("moe") != std::string::npos || type == "mixtral" || type == "deepseek_v3";
  r.fail("model_type '" + type + "' is not supported" +
         (moe ? std::string(" (hybridscope's decoder is dense: it has no mixture-of-experts layers)") : std::string()) +
         "; hybridscope's decoder implements llama (Llama 2/3), qwen2 (Qwen2/Qwen2.5) and qwen3");
}

// Refuses what the decoder cannot compute.
void refuse_unsupported(const Reader& r, ModelArchitecture arch) {
  for (const char* key : {"num_experts", "num_local_experts", "n_routed_experts"}) {
    if (r.has(key) && r.config[key].is_number() && r.config[key].get<double>() > 0) {
      r.fail(std::string("'") + key + "' = " + r.config[key].dump() +
             ": hybridscope's decoder is dense, with no mixture-of-experts layers");
    }
  }
  if (r.has("quantization_config")) r.fail("'quantization_config' is set: quantised checkpoints are not supported");
  if (const auto act = r.optional<std::string>("hidden_act", "silu"); act != "silu") {
    r.fail("hidden_act '" + act + "' is not supported: the MLP is SwiGLU with silu");
  }
  if (r.optional<double>("attention_dropout", 0.0) != 0.0) {
    r.fail("attention_dropout = " + r.config["attention_dropout"].dump() + ": hybridscope's attention has no dropout (use 0.0)");
  }
  if (r.optional<bool>("mlp_bias", false)) r.fail("mlp_bias = true: the MLP has no biases here");
  // Qwen2's q/k/v biases are part of its architecture (transformers hard-codes them); elsewhere
  // attention_bias = true would add biases to q/k/v/o, which this decoder does not have.
  if (arch != ModelArchitecture::kQwen2 && r.optional<bool>("attention_bias", false)) {
    r.fail("attention_bias = true: hybridscope's " + hf_class_prefix(arch) +
           " has no attention biases (only Qwen2's q/k/v biases exist here)");
  }
  if (r.optional<bool>("use_sliding_window", false)) {
    r.fail("use_sliding_window = true: hybridscope's attention has no sliding window (every layer attends to "
           "the whole context); set it to false if the model was trained without it");
  }
  if (r.has("layer_types")) {
    const auto& types = r.config["layer_types"];
    if (!types.is_array()) r.fail("key 'layer_types' must be a list");
    for (std::size_t i = 0; i < types.size(); ++i) {
      if (!types[i].is_string() || types[i].get<std::string>() != "full_attention") {
        r.fail("layer_types[" + std::to_string(i) + "] = " + types[i].dump() +
               ": hybridscope's layers are all full_attention (it has no sliding-window attention)");
      }
    }
  }
  if (r.has("partial_rotary_factor") && r.config["partial_rotary_factor"].get<double>() != 1.0) {
    r.fail("partial_rotary_factor = " + r.config["partial_rotary_factor"].dump() +
           ": the rotary embedding covers the whole head here");
  }
}

// rope_theta and rope scaling from either layout: 5.x rope_parameters {rope_type, rope_theta,
// factor, ...}; 4.x top-level rope_theta and rope_scaling {rope_type | type, factor, ...}.
void read_rope(const Reader& r, ModelShape& s) {
  const bool v5 = r.has("rope_parameters");
  if (v5 && !r.config["rope_parameters"].is_object()) r.fail("key 'rope_parameters' must be an object");
  if (r.has("rope_scaling") && !r.config["rope_scaling"].is_object()) r.fail("key 'rope_scaling' must be an object");
  const Json empty = Json::object();
  const Json& scaling = v5 ? r.config["rope_parameters"] : (r.has("rope_scaling") ? r.config["rope_scaling"] : empty);
  const std::string section = v5 ? "rope_parameters" : "rope_scaling";

  double theta = r.optional<double>("rope_theta", 10000.0);
  if (v5 && r.has(scaling, "rope_theta")) {
    const double v5_theta = r.get<double>(scaling, "rope_theta", "rope_parameters.rope_theta");
    if (r.has("rope_theta") && r.config["rope_theta"].get<double>() != v5_theta) {
      r.fail("rope_theta (" + r.config["rope_theta"].dump() + ") and rope_parameters.rope_theta (" +
             scaling["rope_theta"].dump() + ") disagree");
    }
    theta = v5_theta;
  }
  if (!(theta > 0)) r.fail("rope_theta must be > 0");
  s.rope_theta = theta;

  std::string type = "default";
  if (r.has(scaling, "rope_type")) {
    type = r.get<std::string>(scaling, "rope_type", section + ".rope_type");
  } else if (r.has(scaling, "type")) {
    type = r.get<std::string>(scaling, "type", section + ".type");
  } else if (!scaling.empty() && !v5) {
    r.fail("rope_scaling has no rope_type");
  }
  if (v5 && r.has("rope_scaling")) {  // both layouts in one file: they must agree
    const auto& legacy = r.config["rope_scaling"];
    const char* type_key = legacy.contains("rope_type") ? "rope_type" : "type";
    if (!legacy.contains(type_key) || legacy[type_key] != type) {
      r.fail("rope_scaling (" + legacy.dump() + ") and rope_parameters (" + scaling.dump() + ") disagree");
    }
  }
  if (type == "default") {
    s.rope_scaling = RopeScaling{};
    return;
  }
  if (type != "llama3") {
    r.fail(section + ".rope_type '" + type + "' is not supported (default and llama3 are)");
  }
  RopeScaling& rs = s.rope_scaling;
  rs.type = RopeScaling::Type::kLlama3;
  auto need = [&](const char* key) {
    if (!r.has(scaling, key)) r.fail(section + "." + key + " is required for rope_type llama3");
    return r.get<double>(scaling, key, section + "." + key);
  };
  rs.factor = need("factor");
  rs.low_freq_factor = need("low_freq_factor");
  rs.high_freq_factor = need("high_freq_factor");
  const double original = need("original_max_position_embeddings");
  if (!(original >= 1 && original <= std::numeric_limits<int>::max())) {
    r.fail(section + ".original_max_position_embeddings = " + std::to_string(original) + " is out of range");
  }
  rs.original_max_position_embeddings = static_cast<int>(original);
  if (!(rs.factor > 0) || !(rs.low_freq_factor > 0) || !(rs.high_freq_factor > rs.low_freq_factor) ||
      rs.original_max_position_embeddings <= 0) {
    r.fail(section + ": llama3 scaling needs factor > 0, high_freq_factor > low_freq_factor > 0 and "
           "original_max_position_embeddings > 0");
  }
}

const char* dtype_spelling(const std::string& dtype) {
  for (const char* known : {"float32", "bfloat16", "float16", "float64"}) {
    if (dtype == known) return known;
  }
  return nullptr;
}

}  // namespace

std::string hf_class_prefix(ModelArchitecture architecture) {
  switch (architecture) {
    case ModelArchitecture::kLlama: return "Llama";
    case ModelArchitecture::kQwen2: return "Qwen2";
    case ModelArchitecture::kQwen3: return "Qwen3";
  }
  return "Llama";
}

HfModelConfig parse_hf_config(const std::string& json_text, const std::string& path) {
  Json config;
  try {
    config = Json::parse(json_text);
  } catch (const Json::exception& e) {
    throw HfConfigError(path + ": invalid JSON: " + e.what());
  }
  if (!config.is_object()) throw HfConfigError(path + ": not a JSON object");
  const Reader r{config, path};
  HfModelConfig out;
  ModelShape& s = out.shape;
  s.architecture = architecture_of(r);
  refuse_unsupported(r, s.architecture);
  s.vocab_size = r.required<int>("vocab_size");
  s.hidden_size = r.required<int>("hidden_size");
  s.intermediate_size = r.required<int>("intermediate_size");
  s.num_hidden_layers = r.required<int>("num_hidden_layers");
  s.num_attention_heads = r.required<int>("num_attention_heads");
  s.num_key_value_heads = r.optional<int>("num_key_value_heads", s.num_attention_heads);
  s.max_position_embeddings =
      r.optional<int>("max_position_embeddings", s.architecture == ModelArchitecture::kLlama ? 2048 : 32768);
  s.rms_norm_eps = r.optional<double>("rms_norm_eps", 1e-6);
  s.tie_word_embeddings = r.optional<bool>("tie_word_embeddings", false);
  s.initializer_range = r.optional<double>("initializer_range", 0.02);
  if (s.vocab_size <= 0 || s.hidden_size <= 0 || s.intermediate_size <= 0 || s.num_hidden_layers <= 0 ||
      s.num_attention_heads <= 0 || s.num_key_value_heads <= 0 || s.max_position_embeddings <= 0) {
    r.fail("vocab_size, hidden_size, intermediate_size, num_hidden_layers, num_attention_heads, "
           "num_key_value_heads and max_position_embeddings must be positive");
  }
  if (s.num_attention_heads % s.num_key_value_heads != 0) {
    r.fail("num_attention_heads (" + std::to_string(s.num_attention_heads) + ") is not a multiple of "
           "num_key_value_heads (" + std::to_string(s.num_key_value_heads) + ")");
  }
  if (r.has("head_dim")) {
    const int head_dim = r.required<int>("head_dim");
    if (head_dim <= 0 || head_dim % 2 != 0) r.fail("head_dim must be a positive even number");
    if (s.hidden_size % s.num_attention_heads != 0 || head_dim != s.hidden_size / s.num_attention_heads) {
      s.explicit_head_dim = head_dim;
    }
  } else if (s.hidden_size % s.num_attention_heads != 0 || (s.hidden_size / s.num_attention_heads) % 2 != 0) {
    r.fail("hidden_size / num_attention_heads is not a whole even number and head_dim is not given");
  }
  read_rope(r, s);
  const std::string dtype_key = r.has("dtype") ? "dtype" : "torch_dtype";
  if (r.has(dtype_key.c_str())) {
    out.dtype = r.required<std::string>(dtype_key.c_str());
    if (dtype_spelling(out.dtype) == nullptr) {
      r.fail(dtype_key + " '" + out.dtype + "' is not supported (float32, bfloat16, float16, float64)");
    }
  }
  return out;
}

HfModelConfig read_hf_config(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw HfConfigError(path + ": cannot open (a HuggingFace model directory holds config.json)");
  std::ostringstream text;
  text << in.rdbuf();
  return parse_hf_config(text.str(), path);
}

std::string hf_config_json(const ModelShape& s, bool value_head, const std::string& dtype) {
  const std::string prefix = hf_class_prefix(s.architecture);
  Json config = Json::object();
  config["architectures"] = {prefix + (value_head ? "ForTokenClassification" : "ForCausalLM")};
  config["model_type"] = to_string(s.architecture);
  config["vocab_size"] = s.vocab_size;
  config["hidden_size"] = s.hidden_size;
  config["intermediate_size"] = s.intermediate_size;
  config["num_hidden_layers"] = s.num_hidden_layers;
  config["num_attention_heads"] = s.num_attention_heads;
  config["num_key_value_heads"] = s.num_key_value_heads;
  config["head_dim"] = s.head_dim();
  config["max_position_embeddings"] = s.max_position_embeddings;
  Json rope = Json::object();
  if (s.rope_scaling.type == RopeScaling::Type::kLlama3) {
    rope["rope_type"] = "llama3";
    rope["factor"] = s.rope_scaling.factor;
    rope["low_freq_factor"] = s.rope_scaling.low_freq_factor;
    rope["high_freq_factor"] = s.rope_scaling.high_freq_factor;
    rope["original_max_position_embeddings"] = s.rope_scaling.original_max_position_embeddings;
  } else {
    rope["rope_type"] = "default";
  }
  Json legacy_scaling = rope.value("rope_type", "") == "default" ? Json(nullptr) : rope;
  rope["rope_theta"] = s.rope_theta;
  config["rope_parameters"] = rope;
  config["rope_theta"] = s.rope_theta;        // 4.x
  config["rope_scaling"] = legacy_scaling;    // 4.x
  config["rms_norm_eps"] = s.rms_norm_eps;
  config["hidden_act"] = "silu";
  config["attention_dropout"] = 0.0;
  if (s.architecture != ModelArchitecture::kQwen2) config["attention_bias"] = false;
  if (s.architecture == ModelArchitecture::kLlama) config["mlp_bias"] = false;
  if (s.architecture != ModelArchitecture::kLlama) {
    config["use_sliding_window"] = false;
    config["sliding_window"] = nullptr;
    config["layer_types"] = Json(std::vector<std::string>(static_cast<std::size_t>(s.num_hidden_layers), "full_attention"));
  }
  config["initializer_range"] = s.initializer_range;
  config["tie_word_embeddings"] = s.tie_word_embeddings;
  config["dtype"] = dtype;
  config["torch_dtype"] = dtype;  // 4.x
  if (value_head) {  // num_labels 1, as transformers writes it
    config["id2label"] = {{"0", "LABEL_0"}};
    config["label2id"] = {{"LABEL_0", 0}};
  }
  return config.dump(2) + "\n";
}

}  // namespace hs::trainer
