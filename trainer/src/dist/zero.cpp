// zero.cpp — ZeRO-3 / FSDP parameter shards over dp (see zero.h).
//
// Wire layout: every rank contributes one flat chunk of `chunk_` elements, the concatenation over
// parameters of its row block padded to `block` rows (no padding when dp divides the rows, which
// training_layout requires). all_gather of the chunks gives (dp, chunk): parameter i's full tensor
// is rows [0, rows) of gathered[:, offset_i : offset_i + block_i·row_numel_i] read as
// (dp·block_i, rest...). reduce_scatter takes the same (dp, chunk) arrangement of the full
// gradients and returns this rank's row of the sum.
#include "hybridscope/trainer/dist/zero.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/torch.h>

namespace hs::trainer {

ZeroShards::ZeroShards(torch::nn::Module& module, std::shared_ptr<Communicator> dp) : dp_(std::move(dp)) {
  if (!dp_) throw std::invalid_argument("ZeroShards: the data-parallel group is null");
  torch::NoGradGuard no_grad;
  const std::int64_t n = dp_->size();
  for (const auto& item : module.named_parameters()) {
    Param p;
    p.full = item.value();
    p.shape = p.full.sizes().vec();
    p.rows = p.full.dim() == 0 ? 1 : p.full.size(0);
    p.row_numel = p.rows == 0 ? 0 : p.full.numel() / p.rows;
    p.block = (p.rows + n - 1) / n;
    p.offset = chunk_;
    chunk_ += p.block * p.row_numel;
    params_.push_back(std::move(p));
    names_.push_back(item.key());
  }
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const auto [begin, end] = rows(i);
    const auto& p = params_[i];
    auto rest = p.shape;
    if (rest.empty()) rest.push_back(1);
    rest[0] = end - begin;
    shards_.push_back(
        p.full.reshape({p.rows, p.row_numel}).narrow(0, begin, end - begin).reshape(rest).clone().requires_grad_(true));
  }
  gathered_ = true;  // the module holds the full tensors it was built with
  release();
}

std::pair<std::int64_t, std::int64_t> ZeroShards::rows(std::size_t i) const {
  const auto& p = params_.at(i);
  const std::int64_t begin = std::min(p.rows, p.block * dp_->rank());
  return {begin, std::min(p.rows, begin + p.block)};
}

torch::Tensor ZeroShards::gather_flat() {
  torch::NoGradGuard no_grad;
  const auto options = shards_.empty() ? torch::TensorOptions() : shards_.front().options();
  auto flat = torch::zeros({chunk_}, options);  // padding rows stay 0
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const auto& p = params_[i];
    flat.narrow(0, p.offset, shards_[i].numel()).copy_(shards_[i].reshape({-1}));
  }
  return dp_->all_gather(flat).view({dp_->size(), chunk_});
}

torch::Tensor ZeroShards::unflatten(const torch::Tensor& gathered, std::size_t i) const {
  const auto& p = params_[i];
  auto full = gathered.narrow(1, p.offset, p.block * p.row_numel)
                  .reshape({dp_->size() * p.block, p.row_numel})
                  .narrow(0, 0, p.rows)
                  .reshape(p.shape);
  // reshape copies unless it can view (one row per rank does): a view would keep the whole
  // gathered buffer alive, so the parameter gets storage of its own size either way.
  if (full.storage().nbytes() != full.nbytes()) full = full.clone();
  return full;
}

void ZeroShards::gather() {
  if (gathered_) return;
  torch::NoGradGuard no_grad;
  const auto gathered = gather_flat();
  for (std::size_t i = 0; i < params_.size(); ++i) params_[i].full.set_data(unflatten(gathered, i));
  gathered_ = true;
}

void ZeroShards::release() {
  torch::NoGradGuard no_grad;
  for (auto& p : params_) {
    p.full.mutable_grad() = torch::Tensor();
    p.full.set_data(torch::empty({0}, p.full.options()));
  }
  gathered_ = false;
}

void ZeroShards::reduce_scatter_grads() {
  torch::NoGradGuard no_grad;
  if (!shards_.empty() && !gathered_)
    throw std::logic_error("ZeroShards::reduce_scatter_grads: the module is released — gather() before the "
                           "forward and backward whose gradients are reduced");
  const std::int64_t n = dp_->size();
  // (n, chunk): row j is what rank j keeps, parameter by parameter, each padded to `block` rows.
  std::vector<torch::Tensor> columns;
  for (auto& p : params_) {
    const auto& g = p.full.grad();
    auto rows = g.defined() ? g.reshape({p.rows, p.row_numel}) : torch::zeros({p.rows, p.row_numel}, p.full.options());
    if (n * p.block > p.rows) rows = torch::cat({rows, torch::zeros({n * p.block - p.rows, p.row_numel}, rows.options())});
    columns.push_back(rows.reshape({n, p.block * p.row_numel}));
    p.full.mutable_grad() = torch::Tensor();
  }
  auto input = torch::cat(columns, 1);
  columns.clear();
  const auto mine = dp_->reduce_scatter(input, ReduceOp::kSum).reshape({-1});  // (chunk)
  input = torch::Tensor();
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const auto& p = params_[i];
    shards_[i].mutable_grad() = mine.narrow(0, p.offset, shards_[i].numel()).view_as(shards_[i]).clone();
  }
  // The optimizer steps the shards next: the module's full tensors are stale from now on.
  release();
}

std::vector<std::pair<std::string, torch::Tensor>> ZeroShards::named_shards() const {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (std::size_t i = 0; i < shards_.size(); ++i) out.emplace_back(names_[i], shards_[i]);
  return out;
}

std::int64_t ZeroShards::shard_bytes() const {
  std::int64_t bytes = 0;
  for (const auto& s : shards_) bytes += static_cast<std::int64_t>(s.nbytes());
  return bytes;
}

std::int64_t ZeroShards::module_parameter_bytes() const {
  std::int64_t bytes = 0;
  for (const auto& p : params_) bytes += static_cast<std::int64_t>(p.full.storage().nbytes());
  return bytes;
}

std::vector<std::pair<std::string, torch::Tensor>> ZeroShards::full_state_dict() {
  const auto gathered = gather_flat();
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (std::size_t i = 0; i < params_.size(); ++i) out.emplace_back(names_[i], unflatten(gathered, i));
  return out;
}

void ZeroShards::load_full_state_dict(const std::vector<std::pair<std::string, torch::Tensor>>& state) {
  torch::NoGradGuard no_grad;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const torch::Tensor* found = nullptr;
    for (const auto& [name, tensor] : state)
      if (name == names_[i]) found = &tensor;
    if (found == nullptr)
      throw std::invalid_argument(fmt::format("ZeroShards::load_full_state_dict: no tensor named {} in the state dict",
                                              names_[i]));
    if (found->sizes().vec() != params_[i].shape)
      throw std::invalid_argument(fmt::format("ZeroShards::load_full_state_dict: {} has shape ({}) but the model's "
                                              "is ({}) — a checkpoint of another model or tp size?",
                                              names_[i], fmt::join(found->sizes().vec(), ", "),
                                              fmt::join(params_[i].shape, ", ")));
    const auto [begin, end] = rows(i);
    shards_[i].copy_(found->reshape({params_[i].rows, params_[i].row_numel}).narrow(0, begin, end - begin)
                         .reshape_as(shards_[i]));
  }
  release();
}

ZeroShards::Scope::Scope(ZeroShards* shards) : shards_(shards) {
  if (shards_) shards_->gather();
}

ZeroShards::Scope::~Scope() {
  if (shards_) shards_->release();
}

}  // namespace hs::trainer
