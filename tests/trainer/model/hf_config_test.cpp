// hf_config_test.cpp — config.json parsing: both transformers layouts, and a refusal naming the key
// for everything the decoder cannot honour. (Parity of the resulting models with transformers:
// hf_parity/.)
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "hybridscope/trainer/model/hf_config.h"

namespace hs::trainer {
namespace {

using Json = nlohmann::json;

// A Qwen2.5-0.5B-Instruct config.json as transformers 4.x wrote it (its Hub file's fields).
Json qwen25_v4() {
  return Json::parse(R"({
    "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
    "eos_token_id": 151645, "hidden_act": "silu", "hidden_size": 896, "initializer_range": 0.02,
    "intermediate_size": 4864, "max_position_embeddings": 32768, "max_window_layers": 21,
    "model_type": "qwen2", "num_attention_heads": 14, "num_hidden_layers": 24, "num_key_value_heads": 2,
    "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "sliding_window": 32768, "tie_word_embeddings": true,
    "torch_dtype": "bfloat16", "transformers_version": "4.43.1", "use_cache": true,
    "use_sliding_window": false, "vocab_size": 151936})");
}

// The same model as transformers 5 writes it: rope_parameters, dtype, layer_types.
Json qwen25_v5() {
  Json c = qwen25_v4();
  c.erase("rope_theta");
  c.erase("torch_dtype");
  c["rope_parameters"] = {{"rope_theta", 1000000.0}, {"rope_type", "default"}};
  c["dtype"] = "bfloat16";
  c["layer_types"] = Json(std::vector<std::string>(24, "full_attention"));
  c["sliding_window"] = nullptr;
  return c;
}

HfModelConfig parse(const Json& c) { return parse_hf_config(c.dump(), "model/config.json"); }

// The message of the refusal of `c`, which must name `key`.
void expect_refused(const Json& c, const std::string& key) {
  try {
    parse(c);
    ADD_FAILURE() << "accepted: " << c.dump();
  } catch (const HfConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("model/config.json"), std::string::npos) << what;
    EXPECT_NE(what.find(key), std::string::npos) << "'" << key << "' not named in: " << what;
  }
}

TEST(HfConfig, BothTransformersLayoutsGiveTheSameShape) {
  for (const Json& c : {qwen25_v4(), qwen25_v5()}) {
    const auto got = parse(c);
    const auto& s = got.shape;
    EXPECT_EQ(s.architecture, ModelArchitecture::kQwen2);
    EXPECT_TRUE(s.qkv_bias());
    EXPECT_EQ(s.hidden_size, 896);
    EXPECT_EQ(s.head_dim(), 64);
    EXPECT_EQ(s.num_key_value_heads, 2);
    EXPECT_EQ(s.vocab_size, 151936);
    EXPECT_DOUBLE_EQ(s.rope_theta, 1e6);  // the 5.x layout's theta is not dropped for the default 1e4
    EXPECT_TRUE(s.tie_word_embeddings);
    EXPECT_EQ(s.rope_scaling.type, RopeScaling::Type::kDefault);
    EXPECT_EQ(got.dtype, "bfloat16");
  }
}

TEST(HfConfig, Llama3ScalingAndQwen3HeadDimAreRead) {
  // Llama-3.1-8B's rope in the 4.x layout and in the 5.x one.
  Json llama = {{"model_type", "llama"}, {"vocab_size", 128256}, {"hidden_size", 4096},
                {"intermediate_size", 14336}, {"num_hidden_layers", 32}, {"num_attention_heads", 32},
                {"num_key_value_heads", 8}, {"max_position_embeddings", 131072}, {"rope_theta", 500000.0},
                {"rope_scaling", {{"factor", 8.0}, {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0},
                                  {"original_max_position_embeddings", 8192}, {"rope_type", "llama3"}}}};
  Json llama5 = llama;
  llama5.erase("rope_theta");
  llama5.erase("rope_scaling");
  llama5["rope_parameters"] = llama["rope_scaling"];
  llama5["rope_parameters"]["rope_theta"] = 500000.0;
  for (const Json& c : {llama, llama5}) {
    const auto s = parse(c).shape;
    EXPECT_EQ(s.architecture, ModelArchitecture::kLlama);
    EXPECT_FALSE(s.qkv_bias());
    EXPECT_DOUBLE_EQ(s.rope_theta, 500000.0);
    EXPECT_EQ(s.rope_scaling.type, RopeScaling::Type::kLlama3);
    EXPECT_DOUBLE_EQ(s.rope_scaling.factor, 8.0);
    EXPECT_EQ(s.rope_scaling.original_max_position_embeddings, 8192);
  }
  // Qwen3-0.6B: head_dim 128 with hidden 1024 and 16 heads.
  Json qwen3 = {{"model_type", "qwen3"}, {"vocab_size", 151936}, {"hidden_size", 1024},
                {"intermediate_size", 3072}, {"num_hidden_layers", 28}, {"num_attention_heads", 16},
                {"num_key_value_heads", 8}, {"head_dim", 128}, {"attention_bias", false},
                {"rope_theta", 1000000}, {"use_sliding_window", false}, {"tie_word_embeddings", true}};
  const auto s = parse(qwen3).shape;
  EXPECT_EQ(s.head_dim(), 128);
  EXPECT_TRUE(s.qk_norm());
  EXPECT_FALSE(s.qkv_bias());
  EXPECT_EQ(s.max_position_embeddings, 32768);  // Qwen3Config's default
}

TEST(HfConfig, RefusesWhatTheDecoderCannotHonour) {
  auto with = [](const char* key, const Json& value) {
    Json c = qwen25_v4();
    c[key] = value;
    return c;
  };
  expect_refused(with("hidden_act", "gelu"), "hidden_act");
  expect_refused(with("use_sliding_window", true), "use_sliding_window");
  Json layers = qwen25_v5();
  layers["layer_types"][3] = "sliding_attention";
  expect_refused(layers, "layer_types[3]");
  expect_refused(with("rope_scaling", {{"rope_type", "yarn"}, {"factor", 4.0}}), "rope_type 'yarn'");
  Json v5 = qwen25_v5();
  v5["rope_parameters"]["rope_type"] = "dynamic";
  expect_refused(v5, "rope_parameters.rope_type 'dynamic'");
  expect_refused(with("model_type", "qwen2_moe"), "mixture-of-experts");
  expect_refused(with("model_type", "mistral"), "model_type 'mistral'");
  expect_refused(with("num_experts", 60), "num_experts");
  expect_refused(with("attention_dropout", 0.1), "attention_dropout");
  expect_refused(with("quantization_config", {{"quant_method", "gptq"}}), "quantization_config");
  expect_refused(with("partial_rotary_factor", 0.5), "partial_rotary_factor");
  expect_refused(with("torch_dtype", "float8_e4m3fn"), "torch_dtype");
  Json llama = with("model_type", "llama");
  llama["attention_bias"] = true;
  expect_refused(llama, "attention_bias");
  llama["attention_bias"] = false;
  llama["mlp_bias"] = true;
  expect_refused(llama, "mlp_bias");
  Json conflict = qwen25_v5();
  conflict["rope_theta"] = 10000.0;
  expect_refused(conflict, "disagree");
  Json missing = qwen25_v4();
  missing.erase("hidden_size");
  expect_refused(missing, "hidden_size");
  expect_refused(with("rope_scaling", {{"rope_type", "llama3"}, {"factor", 8.0}}), "low_freq_factor");
  // Found by tests/fuzz/fuzz_hf_config: a number beyond int was cast with undefined behaviour.
  expect_refused(with("vocab_size", 1.519e39), "vocab_size");
  expect_refused(with("num_hidden_layers", 4294967296LL), "num_hidden_layers");
  expect_refused(with("hidden_size", 896.5), "hidden_size");
  expect_refused(with("tie_word_embeddings", 1), "tie_word_embeddings");
}

TEST(HfConfig, WrittenConfigReadsBackInItsArchitecturesNaming) {
  for (auto arch : {ModelArchitecture::kLlama, ModelArchitecture::kQwen2, ModelArchitecture::kQwen3}) {
    ModelShape s;
    s.vocab_size = 100;
    s.architecture = arch;
    s.explicit_head_dim = arch == ModelArchitecture::kQwen3 ? 64 : 0;
    s.rope_theta = 12345.0;
    if (arch == ModelArchitecture::kLlama) s.rope_scaling.type = RopeScaling::Type::kLlama3;
    const auto text = hf_config_json(s, false, "bfloat16");
    const auto json = Json::parse(text);
    EXPECT_EQ(json["architectures"][0], hf_class_prefix(arch) + "ForCausalLM");
    EXPECT_EQ(json["model_type"], to_string(arch));
    const auto back = parse_hf_config(text, "config.json");
    EXPECT_EQ(back.shape.architecture, arch);
    EXPECT_EQ(back.shape.head_dim(), s.head_dim());
    EXPECT_DOUBLE_EQ(back.shape.rope_theta, 12345.0);
    EXPECT_EQ(back.shape.rope_scaling.type, s.rope_scaling.type);
    EXPECT_EQ(back.dtype, "bfloat16");
    EXPECT_EQ(Json::parse(hf_config_json(s, true, "float32"))["architectures"][0],
              hf_class_prefix(arch) + "ForTokenClassification");
  }
}

}  // namespace
}  // namespace hs::trainer
