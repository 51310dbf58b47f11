// safetensors.cpp — safetensors files and HuggingFace model directories.
//
// Format (https://huggingface.co/docs/safetensors): an 8-byte little-endian header length N, N
// bytes of JSON {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__":
// {str: str}} padded with spaces to a multiple of 8, then the tensors' raw little-endian bytes,
// offsets relative to the end of the header, covering the data without holes or overlaps.
// A model directory is config.json (LlamaConfig fields) + model.safetensors, or shards listed in
// model.safetensors.index.json. With tensor parallelism, saving gathers every split weight along
// its split dimension (world rank 0 writes) and loading takes this rank's slice.
#include <torch/torch.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "hybridscope/trainer/model/model.h"
#include "model/model_layers.h"

namespace hs::trainer {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

constexpr std::uint64_t kMaxHeaderBytes = 100u << 20;  // as the reference implementation

struct DtypeName {
  const char* name;
  torch::ScalarType type;
};
constexpr DtypeName kDtypes[] = {
    {"F64", torch::kDouble}, {"F32", torch::kFloat},  {"F16", torch::kHalf},
    {"BF16", torch::kBFloat16}, {"I64", torch::kLong}, {"I32", torch::kInt},
    {"I16", torch::kShort},  {"I8", torch::kChar},    {"U8", torch::kByte},
    {"BOOL", torch::kBool},
};

std::string dtype_name(torch::ScalarType type, const std::string& tensor) {
  for (const auto& d : kDtypes) {
    if (d.type == type) return d.name;
  }
  throw std::runtime_error("save_safetensors: tensor '" + tensor + "' has dtype " +
                           std::string(c10::toString(type)) + ", which safetensors I/O here does not support");
}

torch::ScalarType dtype_of(const std::string& name, const std::string& where) {
  for (const auto& d : kDtypes) {
    if (name == d.name) return d.type;
  }
  throw std::runtime_error(where + ": unsupported dtype '" + name + "'");
}

void require_little_endian() {
  const std::uint16_t probe = 1;
  unsigned char first = 0;
  std::memcpy(&first, &probe, 1);
  if (first != 1) throw std::runtime_error("safetensors I/O needs a little-endian host");
}

// t split along `dim` over the tp group -> the full tensor.
torch::Tensor gather_along(const torch::Tensor& t, int dim, Communicator& tp) {
  if (dim == 0) return tp.all_gather(t.contiguous());
  return tp.all_gather(t.transpose(0, dim).contiguous()).transpose(0, dim).contiguous();
}

const char* torch_dtype_name(torch::ScalarType type) {
  switch (type) {
    case torch::kFloat: return "float32";
    case torch::kDouble: return "float64";
    case torch::kBFloat16: return "bfloat16";
    case torch::kHalf: return "float16";
    default: return "float32";
  }
}

Json read_json(const fs::path& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path.string() + ": cannot open");
  try {
    return Json::parse(in);
  } catch (const Json::exception& e) {
    throw std::runtime_error(path.string() + ": invalid JSON: " + e.what());
  }
}

template <typename T>
T config_value(const Json& config, const char* key, const fs::path& path) {
  if (!config.contains(key) || config[key].is_null()) {
    throw std::runtime_error(path.string() + ": missing required key '" + key + "'");
  }
  try {
    return config[key].get<T>();
  } catch (const Json::exception& e) {
    throw std::runtime_error(path.string() + ": key '" + key + "' has the wrong type: " + e.what());
  }
}

template <typename T>
T config_value_or(const Json& config, const char* key, T fallback, const fs::path& path) {
  if (!config.contains(key) || config[key].is_null()) return fallback;
  return config_value<T>(config, key, path);
}

ModelShape shape_from_config(const fs::path& path) {
  const Json config = read_json(path);
  if (config.contains("rope_scaling") && !config["rope_scaling"].is_null()) {
    throw std::runtime_error(path.string() + ": rope_scaling is set; only the default rotary "
                             "embedding is implemented — use a checkpoint without rope_scaling");
  }
  ModelShape s;
  s.vocab_size = config_value<int>(config, "vocab_size", path);
  s.hidden_size = config_value<int>(config, "hidden_size", path);
  s.intermediate_size = config_value<int>(config, "intermediate_size", path);
  s.num_hidden_layers = config_value<int>(config, "num_hidden_layers", path);
  s.num_attention_heads = config_value<int>(config, "num_attention_heads", path);
  // HF LlamaConfig defaults for the optional keys.
  s.num_key_value_heads = config_value_or<int>(config, "num_key_value_heads", s.num_attention_heads, path);
  s.max_position_embeddings = config_value_or<int>(config, "max_position_embeddings", 2048, path);
  s.rope_theta = config_value_or<double>(config, "rope_theta", 10000.0, path);
  s.rms_norm_eps = config_value_or<double>(config, "rms_norm_eps", 1e-6, path);
  s.tie_word_embeddings = config_value_or<bool>(config, "tie_word_embeddings", false, path);
  s.initializer_range = config_value_or<double>(config, "initializer_range", 0.02, path);
  if (s.num_attention_heads > 0 && config.contains("head_dim") && !config["head_dim"].is_null() &&
      config_value<int>(config, "head_dim", path) != s.hidden_size / s.num_attention_heads) {
    throw std::runtime_error(path.string() + ": head_dim differs from hidden_size / "
                             "num_attention_heads, which this model does not support");
  }
  return s;
}

// Every tensor of the checkpoint in `dir`: model.safetensors, or the shards of
// model.safetensors.index.json.
std::map<std::string, torch::Tensor> load_checkpoint_tensors(const fs::path& dir) {
  std::map<std::string, torch::Tensor> tensors;
  std::vector<fs::path> files;
  if (fs::exists(dir / "model.safetensors")) {
    files.push_back(dir / "model.safetensors");
  } else if (fs::exists(dir / "model.safetensors.index.json")) {
    const Json index = read_json(dir / "model.safetensors.index.json");
    std::set<std::string> shards;
    if (index.contains("weight_map") && index["weight_map"].is_object()) {
      for (const auto& item : index["weight_map"].items()) shards.insert(item.value().get<std::string>());
    }
    for (const auto& shard : shards) files.push_back(dir / shard);
  } else {
    throw std::runtime_error(dir.string() + ": neither model.safetensors nor "
                             "model.safetensors.index.json found");
  }
  for (const auto& file : files) {
    for (auto& [name, t] : load_safetensors(file.string())) tensors[name] = std::move(t);
  }
  return tensors;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// safetensors files

void save_safetensors(const std::string& path,
                      const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
                      const std::vector<std::pair<std::string, std::string>>& metadata) {
  require_little_endian();
  Json header = Json::object();
  if (!metadata.empty()) {
    Json meta = Json::object();
    for (const auto& [key, value] : metadata) meta[key] = value;
    header["__metadata__"] = meta;
  }
  std::vector<torch::Tensor> data;  // CPU, contiguous, in header order
  data.reserve(tensors.size());
  std::uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    if (name.empty() || name == "__metadata__" || header.contains(name)) {
      throw std::runtime_error("save_safetensors(" + path + "): invalid or duplicate tensor name '" + name + "'");
    }
    auto t = tensor.detach().to(torch::kCPU).contiguous();
    const auto bytes = static_cast<std::uint64_t>(t.nbytes());
    header[name] = {{"dtype", dtype_name(t.scalar_type(), name)},
                    {"shape", t.sizes().vec()},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    data.push_back(std::move(t));
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the data starts 8-byte aligned

  // Written next to the target and renamed, so a reader never sees half a file.
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw std::runtime_error("save_safetensors: cannot write " + tmp);
    unsigned char length[8];
    for (int i = 0; i < 8; ++i) length[i] = static_cast<unsigned char>((text.size() >> (8 * i)) & 0xff);
    out.write(reinterpret_cast<const char*>(length), 8);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    for (const auto& t : data) {
      out.write(static_cast<const char*>(t.data_ptr()), static_cast<std::streamsize>(t.nbytes()));
    }
    if (!out) throw std::runtime_error("save_safetensors: write to " + tmp + " failed");
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) throw std::runtime_error("save_safetensors: cannot rename " + tmp + " to " + path + ": " + ec.message());
}

std::vector<std::pair<std::string, torch::Tensor>> load_safetensors(const std::string& path) {
  require_little_endian();
  const std::string where = "load_safetensors(" + path + ")";
  std::error_code ec;
  const auto file_size = fs::file_size(path, ec);
  if (ec) throw std::runtime_error(where + ": cannot open: " + ec.message());
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(where + ": cannot open");
  unsigned char length[8];
  if (file_size < 8 || !in.read(reinterpret_cast<char*>(length), 8)) {
    throw std::runtime_error(where + ": shorter than the 8-byte header length");
  }
  std::uint64_t header_size = 0;
  for (int i = 7; i >= 0; --i) header_size = (header_size << 8) | length[i];
  if (header_size > kMaxHeaderBytes || header_size > file_size - 8) {
    throw std::runtime_error(where + ": header length " + std::to_string(header_size) +
                             " does not fit the file (" + std::to_string(file_size) + " bytes)");
  }
  std::string text(header_size, '\0');
  in.read(text.data(), static_cast<std::streamsize>(header_size));
  Json header;
  try {
    header = Json::parse(text);
  } catch (const Json::exception& e) {
    throw std::runtime_error(where + ": header is not valid JSON: " + e.what());
  }
  if (!header.is_object()) throw std::runtime_error(where + ": header is not a JSON object");

  const std::uint64_t data_start = 8 + header_size;
  const std::uint64_t data_size = file_size - data_start;
  std::vector<std::pair<std::string, torch::Tensor>> tensors;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;
  for (const auto& item : header.items()) {
    if (item.key() == "__metadata__") continue;
    const auto& entry = item.value();
    const std::string what = where + ": tensor '" + item.key() + "'";
    std::vector<std::int64_t> shape;
    std::uint64_t begin = 0, end = 0;
    torch::ScalarType type;
    try {
      type = dtype_of(entry.at("dtype").get<std::string>(), what);
      shape = entry.at("shape").get<std::vector<std::int64_t>>();
      const auto offsets = entry.at("data_offsets").get<std::vector<std::uint64_t>>();
      if (offsets.size() != 2) throw std::runtime_error(what + ": data_offsets must be [begin, end]");
      begin = offsets[0];
      end = offsets[1];
    } catch (const Json::exception& e) {
      throw std::runtime_error(what + ": malformed entry: " + e.what());
    }
    std::uint64_t numel = 1;
    for (const auto d : shape) {
      if (d < 0) throw std::runtime_error(what + ": negative dimension");
      numel *= static_cast<std::uint64_t>(d);
    }
    const auto bytes = numel * c10::elementSize(type);
    if (begin > end || end > data_size || end - begin != bytes) {
      throw std::runtime_error(what + ": data_offsets [" + std::to_string(begin) + ", " +
                               std::to_string(end) + "] do not hold " + std::to_string(bytes) +
                               " bytes inside the " + std::to_string(data_size) + "-byte data section");
    }
    auto t = torch::empty(shape, torch::TensorOptions().dtype(type));
    if (bytes > 0) {
      in.seekg(static_cast<std::streamoff>(data_start + begin));
      if (!in.read(static_cast<char*>(t.data_ptr()), static_cast<std::streamsize>(bytes))) {
        throw std::runtime_error(what + ": truncated data");
      }
    }
    ranges.emplace_back(begin, end);
    tensors.emplace_back(item.key(), std::move(t));
  }
  // The data section is exactly the tensors, back to back in some order.
  std::sort(ranges.begin(), ranges.end());
  std::uint64_t covered = 0;
  for (const auto& [begin, end] : ranges) {
    if (begin != covered) throw std::runtime_error(where + ": tensors overlap or leave a hole in the data");
    covered = end;
  }
  if (covered != data_size) {
    throw std::runtime_error(where + ": " + std::to_string(data_size - covered) +
                             " trailing bytes not covered by any tensor");
  }
  return tensors;
}

// ---------------------------------------------------------------------------------------------
// HuggingFace model directories

void save_pretrained(Transformer& model, const std::string& dir) {
  const auto& parallel = model->parallel();
  if (parallel.pp->size() > 1) {
    throw std::runtime_error("save_pretrained " + dir + ": the model is pipeline stage " +
                             std::to_string(parallel.pp->rank()) + " of " + std::to_string(parallel.pp->size()) +
                             " and holds only its layers — save a whole (pp = 1) model");
  }
  const auto dims = detail::tensor_parallel_dims(*model);
  std::vector<std::pair<std::string, torch::Tensor>> tensors;
  {
    torch::NoGradGuard no_grad;
    for (const auto& item : model->named_parameters()) {
      auto t = item.value().detach();
      const auto split = dims.find(item.key());
      if (split != dims.end() && parallel.tp->size() > 1) t = gather_along(t, split->second, *parallel.tp);
      tensors.emplace_back(item.key(), t);
    }
  }
  if (parallel.world->rank() == 0) {
    const auto& s = model->shape();
    const bool value_head = model->head() == HeadKind::kValue;
    Json config = Json::object();
    config["architectures"] = {value_head ? "LlamaForTokenClassification" : "LlamaForCausalLM"};
    config["model_type"] = "llama";
    config["vocab_size"] = s.vocab_size;
    config["hidden_size"] = s.hidden_size;
    config["intermediate_size"] = s.intermediate_size;
    config["num_hidden_layers"] = s.num_hidden_layers;
    config["num_attention_heads"] = s.num_attention_heads;
    config["num_key_value_heads"] = s.num_key_value_heads;
    config["head_dim"] = s.head_dim();
    config["max_position_embeddings"] = s.max_position_embeddings;
    config["rope_theta"] = s.rope_theta;
    config["rope_scaling"] = nullptr;
    config["rms_norm_eps"] = s.rms_norm_eps;
    config["hidden_act"] = "silu";
    config["attention_bias"] = false;
    config["mlp_bias"] = false;
    config["initializer_range"] = s.initializer_range;
    config["tie_word_embeddings"] = s.tie_word_embeddings;
    config["torch_dtype"] = torch_dtype_name(tensors.empty() ? torch::kFloat : tensors.front().second.scalar_type());
    if (value_head) {  // num_labels 1, as HF writes it
      config["id2label"] = {{"0", "LABEL_0"}};
      config["label2id"] = {{"LABEL_0", 0}};
    }
    fs::create_directories(dir);
    {
      std::ofstream out(fs::path(dir) / "config.json", std::ios::trunc);
      if (!out) throw std::runtime_error("save_pretrained: cannot write " + (fs::path(dir) / "config.json").string());
      out << config.dump(2) << '\n';
    }
    save_safetensors((fs::path(dir) / "model.safetensors").string(), tensors, {{"format", "pt"}});
  }
  parallel.world->barrier();  // nobody reads the directory before rank 0 has written it
}

Transformer load_pretrained(const std::string& dir, HeadKind head, ParallelContext parallel) {
  const fs::path root(dir);
  Transformer model(shape_from_config(root / "config.json"), head, std::move(parallel));
  auto loaded = load_checkpoint_tensors(root);
  const auto dims = detail::tensor_parallel_dims(*model);
  const auto& tp = *model->parallel().tp;

  torch::NoGradGuard no_grad;
  std::set<std::string> used;
  for (auto& item : model->named_parameters()) {
    const auto& name = item.key();
    auto found = loaded.find(name);
    if (found == loaded.end()) {
      // A critic initialised from an actor checkpoint keeps its freshly initialised score head
      // (HF and verl do the same).
      if (head == HeadKind::kValue && name.rfind("score.", 0) == 0) continue;
      throw std::runtime_error(dir + ": tensor '" + name + "' is missing from the checkpoint");
    }
    auto t = found->second;
    const auto split = dims.find(name);
    if (split != dims.end() && tp.size() > 1) {
      const auto local = item.value().size(split->second);
      if (t.dim() > split->second && t.size(split->second) == local * tp.size()) {
        t = t.narrow(split->second, local * tp.rank(), local);
      }
    }
    if (t.sizes() != item.value().sizes()) {
      throw std::runtime_error(dir + ": tensor '" + name + "' has shape " + c10::str(t.sizes()) +
                               " in the checkpoint; the model built from config.json expects " +
                               c10::str(item.value().sizes()) +
                               (split != dims.end() ? " on each of the tp ranks" : ""));
    }
    item.value().copy_(t);
    used.insert(name);
  }
  // A pipeline stage loads its own part of a whole checkpoint (model.h: layers [s·L/p, (s+1)·L/p),
  // the embedding on the first stage, model.norm and the head on the last).
  const auto& pp = *model->parallel().pp;
  auto other_stage = [&](const std::string& name) {
    if (pp.size() == 1) return false;
    const std::string layers = "model.layers.";
    if (name.rfind(layers, 0) == 0) {
      const int per_stage = model->shape().num_hidden_layers / pp.size();
      return std::stoi(name.substr(layers.size())) / per_stage != pp.rank();
    }
    if (name.rfind("model.embed_tokens.", 0) == 0) return !model->is_first_stage();
    return !model->is_last_stage();  // model.norm, lm_head, score
  };
  for (const auto& [name, t] : loaded) {
    if (used.count(name) != 0 || other_stage(name)) continue;
    const bool other_head = name == "lm_head.weight" || name.rfind("score.", 0) == 0;
    const bool derived = name.size() >= 19 && name.compare(name.size() - 19, 19, "rotary_emb.inv_freq") == 0;
    if (!other_head && !derived) {
      throw std::runtime_error(dir + ": unexpected tensor '" + name + "' in the checkpoint (this "
                               "model has no such parameter)");
    }
  }
  return model;
}

}  // namespace hs::trainer
