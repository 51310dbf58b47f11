// safetensors.cpp — safetensors files and HuggingFace model directories.
//
// Format: safetensors_header.h, which reads and checks the header.
// A model directory is config.json (hf_config.h) + model.safetensors, or shards listed in
// model.safetensors.index.json; loading reads the headers first and then only the slices this
// rank holds (its pipeline stage's tensors, its tp rows or columns). With tensor parallelism, saving gathers every split weight along
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

#include "hybridscope/trainer/model/hf_config.h"
#include "hybridscope/trainer/model/model.h"
#include "hybridscope/trainer/model/safetensors_header.h"
#include "model/model_layers.h"

namespace hs::trainer {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

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

/// One tensor of a safetensors file, located but not read.
struct TensorEntry {
  fs::path file;
  torch::ScalarType dtype;
  std::vector<std::int64_t> shape;
  std::uint64_t offset = 0;  // of its first byte from the start of the file
  std::uint64_t bytes = 0;
};

/// The tensors of one safetensors file, from its header alone (safetensors_header.h checks it),
/// in header order.
std::vector<std::pair<std::string, TensorEntry>> tensor_entries(const fs::path& path) {
  const std::string where = "load_safetensors(" + path.string() + ")";
  std::error_code ec;
  const auto file_size = fs::file_size(path, ec);
  if (ec) throw std::runtime_error(where + ": cannot open: " + ec.message());
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(where + ": cannot open");
  std::vector<std::pair<std::string, TensorEntry>> entries;
  for (auto& e : hs::trainer::read_safetensors_header(in, file_size, where))
    entries.emplace_back(e.name, TensorEntry{path, dtype_of(e.dtype, where + ": tensor '" + e.name + "'"),
                                             std::move(e.shape), e.offset, e.bytes});
  return entries;
}

/// Rows [start, start + length) of `entry` along `dim` (dim < 0: the whole tensor), read from
/// its file without reading the rest: one read for dim 0, one read per leading index otherwise.
torch::Tensor read_tensor(const TensorEntry& entry, int dim = -1, std::int64_t start = 0, std::int64_t length = 0) {
  auto shape = entry.shape;
  const std::string what = "load_safetensors(" + entry.file.string() + ")";
  std::ifstream in(entry.file, std::ios::binary);
  if (!in) throw std::runtime_error(what + ": cannot open");
  std::int64_t outer = 1, inner = static_cast<std::int64_t>(c10::elementSize(entry.dtype));
  if (dim >= 0) {
    for (int d = 0; d < dim; ++d) outer *= shape[static_cast<std::size_t>(d)];
    for (std::size_t d = static_cast<std::size_t>(dim) + 1; d < shape.size(); ++d) inner *= shape[d];
    shape[static_cast<std::size_t>(dim)] = length;
  }
  auto t = torch::empty(shape, torch::TensorOptions().dtype(entry.dtype));
  if (t.nbytes() == 0) return t;
  char* out = static_cast<char*>(t.data_ptr());
  if (dim < 0) {
    in.seekg(static_cast<std::streamoff>(entry.offset));
    if (!in.read(out, static_cast<std::streamsize>(entry.bytes))) throw std::runtime_error(what + ": truncated data");
    return t;
  }
  const std::int64_t full = entry.shape[static_cast<std::size_t>(dim)];
  const std::int64_t chunk = length * inner;  // bytes per leading index
  for (std::int64_t o = 0; o < outer; ++o) {
    in.seekg(static_cast<std::streamoff>(entry.offset + static_cast<std::uint64_t>((o * full + start) * inner)));
    if (!in.read(out + o * chunk, static_cast<std::streamsize>(chunk))) throw std::runtime_error(what + ": truncated data");
  }
  return t;
}

// Every tensor of the checkpoint in `dir`, located: model.safetensors, or the shards of
// model.safetensors.index.json (each name where its weight_map says).
std::map<std::string, TensorEntry> checkpoint_entries(const fs::path& dir) {
  std::map<std::string, TensorEntry> entries;
  if (fs::exists(dir / "model.safetensors")) {
    for (auto& [name, e] : tensor_entries(dir / "model.safetensors")) entries[name] = std::move(e);
    return entries;
  }
  const fs::path index_path = dir / "model.safetensors.index.json";
  if (!fs::exists(index_path)) {
    throw std::runtime_error(dir.string() + ": neither model.safetensors nor model.safetensors.index.json found");
  }
  const Json index = read_json(index_path);
  if (!index.contains("weight_map") || !index["weight_map"].is_object()) {
    throw std::runtime_error(index_path.string() + ": no weight_map object");
  }
  std::map<std::string, std::string> where;  // tensor -> shard file
  for (const auto& item : index["weight_map"].items()) {
    if (!item.value().is_string()) throw std::runtime_error(index_path.string() + ": weight_map." + item.key() + " is not a file name");
    where[item.key()] = item.value().get<std::string>();
  }
  std::set<std::string> shards;
  for (const auto& [name, shard] : where) shards.insert(shard);
  for (const auto& shard : shards) {
    for (auto& [name, e] : tensor_entries(dir / shard)) {
      const auto listed = where.find(name);
      if (listed == where.end() || listed->second != shard) {
        throw std::runtime_error((dir / shard).string() + ": tensor '" + name + "' is not listed for this shard in " +
                                 index_path.string());
      }
      entries[name] = std::move(e);
    }
  }
  for (const auto& [name, shard] : where) {
    if (entries.count(name) == 0) {
      throw std::runtime_error(index_path.string() + ": tensor '" + name + "' is listed in " + shard + " but not there");
    }
  }
  return entries;
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
  std::vector<std::pair<std::string, torch::Tensor>> tensors;
  for (const auto& [name, entry] : tensor_entries(path)) tensors.emplace_back(name, read_tensor(entry));
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
    const auto dtype = torch_dtype_name(tensors.empty() ? torch::kFloat : tensors.front().second.scalar_type());
    const auto config = hf_config_json(model->shape(), model->head() == HeadKind::kValue, dtype);
    fs::create_directories(dir);
    {
      std::ofstream out(fs::path(dir) / "config.json", std::ios::trunc);
      if (!out) throw std::runtime_error("save_pretrained: cannot write " + (fs::path(dir) / "config.json").string());
      out << config;
    }
    save_safetensors((fs::path(dir) / "model.safetensors").string(), tensors, {{"format", "pt"}});
  }
  parallel.world->barrier();  // nobody reads the directory before rank 0 has written it
}

Transformer load_pretrained(const std::string& dir, HeadKind head, ParallelContext parallel) {
  const fs::path root(dir);
  const auto config = read_hf_config((root / "config.json").string());
  const auto entries = checkpoint_entries(root);
  Transformer model(config.shape, head, std::move(parallel));
  // A float64 checkpoint stays float64 (the parity tests' reference precision); 16-bit and float32
  // ones load into float32 parameters — exact for bf16/f16 — which are the master weights that
  // hybridscope.precision computes from.
  const bool all_f64 = !entries.empty() && std::all_of(entries.begin(), entries.end(), [](const auto& e) {
    return e.second.dtype == torch::kDouble;
  });
  if (config.dtype == "float64" || all_f64) model->to(torch::kDouble);
  const auto dims = detail::tensor_parallel_dims(*model);
  const auto& tp = *model->parallel().tp;

  torch::NoGradGuard no_grad;
  std::set<std::string> used;
  for (auto& item : model->named_parameters()) {
    const auto& name = item.key();
    auto found = entries.find(name);
    if (found == entries.end()) {
      // A critic initialised from an actor checkpoint keeps its freshly initialised score head
      // (HF and verl do the same).
      if (head == HeadKind::kValue && name.rfind("score.", 0) == 0) continue;
      throw std::runtime_error(dir + ": tensor '" + name + "' is missing from the checkpoint");
    }
    const auto& entry = found->second;
    // The full shape this parameter has in the checkpoint; a tp rank reads only its slice.
    auto full = item.value().sizes().vec();
    const auto split = dims.find(name);
    const bool sliced = split != dims.end() && tp.size() > 1;
    if (sliced) full[static_cast<std::size_t>(split->second)] *= tp.size();
    if (entry.shape != full) {
      throw std::runtime_error(dir + ": tensor '" + name + "' has shape " + c10::str(entry.shape) +
                               " in the checkpoint; the model built from config.json expects " + c10::str(full));
    }
    torch::Tensor t;
    if (sliced) {
      const auto local = item.value().size(split->second);
      t = read_tensor(entry, split->second, local * tp.rank(), local);
    } else {
      t = read_tensor(entry);
    }
    item.value().copy_(t);
    used.insert(name);
  }
  // A pipeline stage loads its own part of a whole checkpoint (model.h: layers [s·L/p, (s+1)·L/p),
  // the embedding on the first stage, model.norm and the head on the last) and reads nothing else.
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
  for (const auto& item : entries) {
    const auto& name = item.first;
    if (used.count(name) != 0 || other_stage(name)) continue;
    const bool other_head = name == "lm_head.weight" || name.rfind("score.", 0) == 0;
    const bool derived = name.size() >= 19 && name.compare(name.size() - 19, 19, "rotary_emb.inv_freq") == 0;
    if (!other_head && !derived) {
      throw std::runtime_error(dir + ": unexpected tensor '" + name + "' in the checkpoint (this " +
                               hf_class_prefix(model->shape().architecture) + " model has no such parameter)");
    }
  }
  return model;
}

}  // namespace hs::trainer
