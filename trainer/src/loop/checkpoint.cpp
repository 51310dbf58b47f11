#include "hybridscope/trainer/loop/checkpoint.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "hybridscope/trainer/dist/mesh_groups.h"
#include "hybridscope/trainer/model/training_shard.h"
#include "hybridscope/trainer/model/device.h"
#include "hybridscope/trainer/model/hf_config.h"

namespace hs::trainer {

namespace fs = std::filesystem;

namespace {
constexpr const char* kLatestFile = "latest_checkpointed_iteration.txt";

// std::filesystem::remove_all crashes when LibTorch's bundled copy of the std::filesystem symbols
// (built by a newer GCC) wins the symbol lookup; removing entry by entry, deepest first, is safe.
void remove_tree(const fs::path& root) {
  std::error_code ec;
  if (!fs::exists(root, ec)) return;
  std::vector<fs::path> entries;
  for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec))
    entries.push_back(it->path());
  for (auto e = entries.rbegin(); e != entries.rend(); ++e) fs::remove(*e, ec);
  fs::remove(root, ec);
}

void write_text_atomically(const fs::path& path, const std::string& text) {
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    if (!out) throw std::runtime_error("cannot write " + tmp.string());
  }
  fs::rename(tmp, path);
}

void save_role(const fs::path& dir, Transformer& model, torch::optim::AdamW& optim) {
  fs::create_directories(dir);
  save_pretrained(model, dir.string());
  torch::save(optim, (dir / "optim.pt").string());
}

void load_role(const fs::path& dir, Transformer& model, torch::optim::AdamW& optim) {
  load_weights_into(model, (dir / "model.safetensors").string());
  const auto optim_path = dir / "optim.pt";
  if (!fs::exists(optim_path)) throw std::runtime_error("checkpoint is missing " + optim_path.string());
  // AdamW's moments go where the model now is: a checkpoint saved on one kind of device resumes
  // on the other (the safetensors weights are host files and copy_ into the parameters).
  torch::load(optim, optim_path.string(), module_device(*model));
}
}  // namespace

void load_weights_into(Transformer& model, const std::string& safetensors_path) {
  if (!fs::exists(safetensors_path)) throw std::runtime_error("checkpoint is missing " + safetensors_path);
  std::map<std::string, torch::Tensor> tensors;
  for (auto& [name, tensor] : load_safetensors(safetensors_path)) tensors.emplace(name, tensor);
  torch::NoGradGuard no_grad;
  for (auto& item : model->named_parameters()) {
    auto it = tensors.find(item.key());
    if (it == tensors.end())
      throw std::runtime_error(safetensors_path + " has no tensor " + item.key() + " that the model needs");
    if (it->second.sizes() != item.value().sizes())
      throw std::runtime_error(safetensors_path + ": " + item.key() + " has shape " +
                               c10::str(it->second.sizes()) + ", the model expects " + c10::str(item.value().sizes()) +
                               " (check hybridscope.model.* against the checkpoint's config.json)");
    item.value().copy_(it->second);
  }
}

std::string checkpoint_staging_dir(const std::string& root, std::int64_t step) {
  return (fs::path(root) / ("global_step_" + std::to_string(step) + ".tmp")).string();
}

void begin_checkpoint(const std::string& root, std::int64_t step) {
  const fs::path tmp_dir = checkpoint_staging_dir(root, step);
  remove_tree(tmp_dir);
  fs::create_directories(tmp_dir);
}

std::string commit_checkpoint(const std::string& root, const TrainerState& state, const CheckpointParts& parts) {
  const fs::path final_dir = fs::path(root) / ("global_step_" + std::to_string(state.global_step));
  const fs::path tmp_dir = checkpoint_staging_dir(root, state.global_step);
  if (parts.actor) save_role(tmp_dir / "actor", *parts.actor, *parts.actor_optim);
  if (parts.critic) save_role(tmp_dir / "critic", *parts.critic, *parts.critic_optim);
  if (parts.rollout) {
    fs::create_directories(tmp_dir / "rollout");
    save_pretrained(*parts.rollout, (tmp_dir / "rollout").string());
  }
  const nlohmann::json meta = {
      {"global_step", state.global_step},
      {"data", {{"epoch", state.data.epoch}, {"batch_in_epoch", state.data.batch_in_epoch}}},
      {"kl_coef", state.kl_coef},
      {"seed", state.seed},
      {"param_version", state.param_version},
      {"rollout_placement", state.rollout_placement},
      {"rollout_version", state.rollout_version},
  };
  write_text_atomically(tmp_dir / "trainer_state.json", meta.dump(2));
  remove_tree(final_dir);
  fs::rename(tmp_dir, final_dir);
  write_text_atomically(fs::path(root) / kLatestFile, std::to_string(state.global_step));
  return final_dir.string();
}

std::string save_checkpoint(const std::string& root, const TrainerState& state, const CheckpointParts& parts) {
  begin_checkpoint(root, state.global_step);
  return commit_checkpoint(root, state, parts);
}

void save_actor_shard(const std::string& staging_dir, const ActorShard& shard) {
  const fs::path actor = fs::path(staging_dir) / "actor";
  const fs::path shards = actor / "shards";
  fs::create_directories(shards);
  const std::string r = std::to_string(shard.rank);
  save_safetensors((shards / ("rank_" + r + ".safetensors")).string(), shard.pieces, {{"format", "pt"}});
  torch::save(*shard.optim, (shards / ("optim_" + r + ".pt")).string());
  if (shard.rank == 0) {
    const nlohmann::json layout = {
        {"mesh", {{"pp", shard.mesh.pp}, {"tp", shard.mesh.tp}, {"dp", shard.mesh.dp}}},
        {"dp_sharding", shard.sharding == DpSharding::kSharded ? "sharded" : "replicated"},
        {"ranks", shard.mesh.world()},
    };
    write_text_atomically(actor / "layout.json", layout.dump(2));
    write_text_atomically(actor / "config.json", hf_config_json(shard.shape, false, "float32"));
  }
}

namespace {

struct SavedLayout {
  MeshShape mesh;
  DpSharding sharding = DpSharding::kReplicated;
};

SavedLayout read_layout(const fs::path& actor_dir) {
  const fs::path path = actor_dir / "layout.json";
  std::ifstream in(path);
  if (!in) {
    throw std::runtime_error(path.string() + " not found: " + actor_dir.string() +
                             " is not a sharded actor checkpoint (a whole actor is a HuggingFace directory already)");
  }
  try {
    const auto j = nlohmann::json::parse(in);
    SavedLayout l;
    l.mesh = {j.at("mesh").at("pp").get<int>(), j.at("mesh").at("tp").get<int>(), j.at("mesh").at("dp").get<int>()};
    l.sharding = j.at("dp_sharding").get<std::string>() == "sharded" ? DpSharding::kSharded : DpSharding::kReplicated;
    return l;
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(path.string() + ": " + e.what());
  }
}

std::string describe(const MeshShape& m, DpSharding s) {
  return "pp=" + std::to_string(m.pp) + " tp=" + std::to_string(m.tp) + " dp=" + std::to_string(m.dp) +
         (s == DpSharding::kSharded ? " (fsdp)" : " (megatron)");
}

}  // namespace

TrainerState load_trainer_state(const std::string& dir) {
  const fs::path path = fs::path(dir) / "trainer_state.json";
  std::ifstream in(path);
  if (!in) throw std::runtime_error("checkpoint is missing " + path.string());
  const auto meta = nlohmann::json::parse(in);
  TrainerState state;
  state.global_step = meta.at("global_step").get<std::int64_t>();
  state.data.epoch = meta.at("data").at("epoch").get<std::int64_t>();
  state.data.batch_in_epoch = meta.at("data").at("batch_in_epoch").get<std::int64_t>();
  state.kl_coef = meta.at("kl_coef").get<double>();
  state.seed = meta.at("seed").get<std::uint64_t>();
  state.param_version = meta.value("param_version", std::int64_t{0});
  state.rollout_placement = meta.value("rollout_placement", std::string{});
  state.rollout_version = meta.value("rollout_version", std::int64_t{-1});
  return state;
}

void load_actor_shard(const std::string& dir, const ActorShard& shard) {
  const fs::path actor = fs::path(dir) / "actor";
  const SavedLayout saved = read_layout(actor);
  if (saved.mesh.pp != shard.mesh.pp || saved.mesh.tp != shard.mesh.tp || saved.mesh.dp != shard.mesh.dp ||
      saved.sharding != shard.sharding) {
    throw std::runtime_error(dir + " was saved with " + describe(saved.mesh, saved.sharding) + ", this run trains with " +
                             describe(shard.mesh, shard.sharding) + ": resume in the layout it was saved in, or merge it "
                             "(hybridscope checkpoint merge " + actor.string() + " OUT) and start from "
                             "actor_rollout_ref.model.path=OUT");
  }
  const std::string r = std::to_string(shard.rank);
  const fs::path file = actor / "shards" / ("rank_" + r + ".safetensors");
  if (!fs::exists(file)) throw std::runtime_error("checkpoint is missing " + file.string());
  std::map<std::string, torch::Tensor> saved_pieces;
  for (auto& [name, t] : load_safetensors(file.string())) saved_pieces.emplace(name, t);
  torch::NoGradGuard no_grad;
  for (const auto& [name, piece] : shard.pieces) {
    const auto it = saved_pieces.find(name);
    if (it == saved_pieces.end()) throw std::runtime_error(file.string() + " has no tensor " + name);
    if (it->second.sizes() != piece.sizes()) {
      throw std::runtime_error(file.string() + ": " + name + " has shape " + c10::str(it->second.sizes()) +
                               ", this rank holds " + c10::str(piece.sizes()));
    }
    piece.copy_(it->second);
  }
  const fs::path optim = actor / "shards" / ("optim_" + r + ".pt");
  if (!fs::exists(optim)) throw std::runtime_error("checkpoint is missing " + optim.string());
  torch::load(*shard.optim, optim.string(), shard.pieces.empty() ? torch::Device(torch::kCPU) : shard.pieces.front().second.device());
}

std::int64_t merge_actor_shards(const std::string& actor_dir, const std::string& out_dir) {
  const fs::path actor(actor_dir);
  const SavedLayout saved = read_layout(actor);
  const auto config = read_hf_config((actor / "config.json").string());
  const auto specs = llama_parameters(config.shape);
  const LayoutSet layout = training_layout(specs, saved.mesh, saved.sharding);
  std::vector<std::map<std::string, torch::Tensor>> pieces(static_cast<std::size_t>(saved.mesh.world()));
  for (int r = 0; r < saved.mesh.world(); ++r) {
    const fs::path file = actor / "shards" / ("rank_" + std::to_string(r) + ".safetensors");
    if (!fs::exists(file)) throw std::runtime_error("cannot merge: " + file.string() + " is missing");
    for (auto& [name, t] : load_safetensors(file.string())) pieces[static_cast<std::size_t>(r)].emplace(name, t);
  }
  std::vector<std::pair<std::string, torch::Tensor>> merged;
  std::int64_t total = 0;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const auto& spec = specs[i];
    auto full = torch::zeros(spec.shape, torch::kFloat);
    auto covered = torch::zeros(spec.shape, torch::kBool);
    for (int r = 0; r < saved.mesh.world(); ++r) {
      const auto box = layout.box(i, r);
      if (!box || box->numel() == 0) continue;
      const auto& rank_pieces = pieces[static_cast<std::size_t>(r)];
      const auto it = rank_pieces.find(spec.name);
      if (it == rank_pieces.end()) {
        throw std::runtime_error("cannot merge: rank_" + std::to_string(r) + ".safetensors has no " + spec.name);
      }
      if (it->second.sizes().vec() != box->shape()) {
        throw std::runtime_error("cannot merge: rank_" + std::to_string(r) + ".safetensors holds " + spec.name + " as " +
                                 c10::str(it->second.sizes()) + ", its layout box is " + c10::str(box->shape()));
      }
      box_view(full, *box).copy_(it->second);
      box_view(covered, *box).fill_(true);
    }
    if (!covered.all().item<bool>()) throw std::runtime_error("cannot merge: no rank holds part of " + spec.name);
    total += full.numel();
    merged.emplace_back(spec.name, full);
  }
  fs::create_directories(out_dir);
  write_text_atomically(fs::path(out_dir) / "config.json", hf_config_json(config.shape, false, "float32"));
  save_safetensors((fs::path(out_dir) / "model.safetensors").string(), merged, {{"format", "pt"}});
  return total;
}

std::optional<std::string> find_latest_checkpoint(const std::string& root) {
  std::ifstream in(fs::path(root) / kLatestFile);
  std::int64_t step = -1;
  if (!(in >> step) || step < 0) return std::nullopt;
  const fs::path dir = fs::path(root) / ("global_step_" + std::to_string(step));
  if (!fs::exists(dir / "trainer_state.json")) return std::nullopt;
  return dir.string();
}

TrainerState load_checkpoint(const std::string& dir, const CheckpointParts& parts) {
  const TrainerState state = load_trainer_state(dir);
  const fs::path base(dir);
  if (parts.actor) load_role(base / "actor", *parts.actor, *parts.actor_optim);
  if (parts.critic) {
    if (!fs::exists(base / "critic"))
      throw std::runtime_error(dir + " has no critic/ but this run uses one (algorithm.adv_estimator=gae): "
                               "start a new run with a different trainer.default_local_dir or resume_mode=disable");
    load_role(base / "critic", *parts.critic, *parts.critic_optim);
  }
  return state;
}

}  // namespace hs::trainer
