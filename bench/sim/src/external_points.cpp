// external_points.cpp — bench/sim/external/points.yaml into step-model inputs (external_points.h).
#include "hybridscope/bench/sim/external_points.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <filesystem>

#include "yaml_fields.h"

namespace hs::bench::sim {

namespace {

int whole(const YAML::Node& node, const Where& where) {
  const double v = positive_number(node, where, "16");
  if (v != std::floor(v)) throw SimError(fmt::format("{} = {}: must be a whole number", where(), v));
  return static_cast<int>(v);
}

ExternalPoint read_point(const YAML::Node& map, const Where& where, const std::filesystem::path& dir) {
  if (!map.IsMap()) throw SimError(where() + ": must be a map (name, source, quote, hardware, model, ...)");
  check_keys(map, {"name", "source", "quote", "hardware", "model", "batch", "layout", "reference_policy",
                   "gradient_checkpointing", "measured", "assumptions"},
             where);
  ExternalPoint p;
  p.name = text(required(map, "name", where), where / "name");
  const Where at = {where.origin, where.key + " (" + p.name + ")"};
  p.source = text(required(map, "source", at), at / "source");
  p.quote = text(required(map, "quote", at), at / "quote");
  p.hardware_path = (dir / text(required(map, "hardware", at), at / "hardware")).lexically_normal().string();
  StepInputs& in = p.inputs;

  const Where mw = at / "model";
  const YAML::Node model = required(map, "model", at);
  check_keys(model, {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                     "num_key_value_heads", "head_dim", "tie_word_embeddings"},
             mw);
  auto number = [&](const YAML::Node& m, const Where& w, const char* key) {
    return positive_number(required(m, key, w), w / key, "4096");
  };
  in.model.vocab_size = number(model, mw, "vocab_size");
  in.model.hidden_size = number(model, mw, "hidden_size");
  in.model.intermediate_size = number(model, mw, "intermediate_size");
  in.model.num_hidden_layers = number(model, mw, "num_hidden_layers");
  in.model.num_attention_heads = number(model, mw, "num_attention_heads");
  in.model.num_key_value_heads = number(model, mw, "num_key_value_heads");
  in.model.head_dim = number(model, mw, "head_dim");
  in.tie_word_embeddings = boolean(required(model, "tie_word_embeddings", mw), mw / "tie_word_embeddings");

  const Where bw = at / "batch";
  const YAML::Node batch = required(map, "batch", at);
  check_keys(batch, {"prompts", "samples_per_prompt", "prompt_length", "response_length", "response_length_max",
                     "ppo_mini_batch_size",
                     "ppo_micro_batch_size_per_gpu", "max_num_seqs"},
             bw);
  in.prompts = whole(required(batch, "prompts", bw), bw / "prompts");
  in.samples_per_prompt = whole(required(batch, "samples_per_prompt", bw), bw / "samples_per_prompt");
  in.prompt_length = number(batch, bw, "prompt_length");
  in.response_length = number(batch, bw, "response_length");
  if (batch["response_length_max"]) in.response_length_max = number(batch, bw, "response_length_max");
  in.ppo_mini_batch_size = whole(required(batch, "ppo_mini_batch_size", bw), bw / "ppo_mini_batch_size");
  in.ppo_micro_batch_size_per_gpu =
      whole(required(batch, "ppo_micro_batch_size_per_gpu", bw), bw / "ppo_micro_batch_size_per_gpu");
  in.max_num_seqs = whole(required(batch, "max_num_seqs", bw), bw / "max_num_seqs");

  const Where lw = at / "layout";
  const YAML::Node layout = required(map, "layout", at);
  check_keys(layout, {"strategy", "gpus", "tp", "pp", "rollout_tp"}, lw);
  const std::string strategy = text(required(layout, "strategy", lw), lw / "strategy");
  if (strategy != "megatron" && strategy != "fsdp")
    throw SimError(fmt::format("{} = {}: must be megatron or fsdp", (lw / "strategy")(), strategy));
  in.grad_sync = strategy == "fsdp" ? GradSync::kFsdp : GradSync::kDataParallel;
  in.train.tp = whole(required(layout, "tp", lw), lw / "tp");
  in.train.pp = whole(required(layout, "pp", lw), lw / "pp");
  in.rollout_tp = whole(required(layout, "rollout_tp", lw), lw / "rollout_tp");
  const int gpus = whole(required(layout, "gpus", lw), lw / "gpus");
  if (gpus % (in.train.tp * in.train.pp) != 0)
    throw SimError(fmt::format("{}: {} GPUs do not divide into tp {} x pp {}", lw(), gpus, in.train.tp, in.train.pp));
  in.train.dp = gpus / (in.train.tp * in.train.pp);
  in.reference_policy = boolean(required(map, "reference_policy", at), at / "reference_policy");
  in.gradient_checkpointing = boolean(required(map, "gradient_checkpointing", at), at / "gradient_checkpointing");
  // bf16 weights, gradients, KV cache and switch; fp32 master weights and Adam (the defaults).
  in.dtype = "bf16";
  resolve_batches(in);

  const Where xw = at / "measured";
  const YAML::Node measured = required(map, "measured", at);
  check_keys(measured, {"step_s", "tokens_per_s_per_device"}, xw);
  p.measured_step_s = number(measured, xw, "step_s");
  if (measured["tokens_per_s_per_device"])
    p.measured_tokens_per_s_per_device = number(measured, xw, "tokens_per_s_per_device");
  if (const YAML::Node a = map["assumptions"]) {
    if (!a.IsSequence()) throw SimError((at / "assumptions")() + ": must be a list of strings");
    for (const auto& item : a) p.assumptions.push_back(text(item, at / "assumptions"));
  }
  return p;
}

}  // namespace

std::vector<ExternalPoint> read_external_points(const std::string& path) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::Exception& e) {
    throw SimError(fmt::format("{}: cannot read the points file: {}", path, e.what()));
  }
  const Where where{path, ""};
  if (!root.IsMap()) throw SimError(path + ": must be a map with a `points` list");
  check_keys(root, {"points"}, where);
  const YAML::Node points = required(root, "points", where);
  if (!points.IsSequence() || points.size() == 0) throw SimError(path + ": points: must be a non-empty list");
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  std::vector<ExternalPoint> out;
  for (std::size_t i = 0; i < points.size(); ++i)
    out.push_back(read_point(points[i], where / fmt::format("points[{}]", i), dir));
  return out;
}

}  // namespace hs::bench::sim
