#include "hybridscope/trainer/loop/checkpoint.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "hybridscope/trainer/model/device.h"

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

std::string save_checkpoint(const std::string& root, const TrainerState& state, const CheckpointParts& parts) {
  const fs::path final_dir = fs::path(root) / ("global_step_" + std::to_string(state.global_step));
  const fs::path tmp_dir = final_dir.string() + ".tmp";
  remove_tree(tmp_dir);
  fs::create_directories(tmp_dir);
  save_role(tmp_dir / "actor", *parts.actor, *parts.actor_optim);
  if (parts.critic) save_role(tmp_dir / "critic", *parts.critic, *parts.critic_optim);
  const nlohmann::json meta = {
      {"global_step", state.global_step},
      {"data", {{"epoch", state.data.epoch}, {"batch_in_epoch", state.data.batch_in_epoch}}},
      {"kl_coef", state.kl_coef},
      {"seed", state.seed},
  };
  write_text_atomically(tmp_dir / "trainer_state.json", meta.dump(2));
  remove_tree(final_dir);
  fs::rename(tmp_dir, final_dir);
  write_text_atomically(fs::path(root) / kLatestFile, std::to_string(state.global_step));
  return final_dir.string();
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
  const fs::path base(dir);
  std::ifstream in(base / "trainer_state.json");
  if (!in) throw std::runtime_error("checkpoint is missing " + (base / "trainer_state.json").string());
  const auto meta = nlohmann::json::parse(in);
  load_role(base / "actor", *parts.actor, *parts.actor_optim);
  if (parts.critic) {
    if (!fs::exists(base / "critic"))
      throw std::runtime_error(dir + " has no critic/ but this run uses one (algorithm.adv_estimator=gae): "
                               "start a new run with a different trainer.default_local_dir or resume_mode=disable");
    load_role(base / "critic", *parts.critic, *parts.critic_optim);
  }
  TrainerState state;
  state.global_step = meta.at("global_step").get<std::int64_t>();
  state.data.epoch = meta.at("data").at("epoch").get<std::int64_t>();
  state.data.batch_in_epoch = meta.at("data").at("batch_in_epoch").get<std::int64_t>();
  state.kl_coef = meta.at("kl_coef").get<double>();
  state.seed = meta.at("seed").get<std::uint64_t>();
  return state;
}

}  // namespace hs::trainer
