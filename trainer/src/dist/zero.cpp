// zero.cpp — ZeRO-3 / FSDP parameter shards over dp, in wrapping units (see zero.h).
//
// Wire layout, per unit: every rank contributes one flat chunk of the unit's `chunk` elements, the
// concatenation over the unit's parameters of its row block padded to `block` rows (no padding
// when dp divides the rows, which training_layout requires). all_gather of the chunks gives
// (dp, chunk): parameter i's full tensor is rows [0, rows) of gathered[:, offset_i : offset_i +
// block_i·row_numel_i] read as (dp·block_i, rest...). reduce_scatter takes the same (dp, chunk)
// arrangement of the full gradients and returns this rank's row of the sum.
#include "hybridscope/trainer/dist/zero.h"

#include <algorithm>
#include <cstdlib>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/torch.h>

#include "hybridscope/probes/clock.h"
#include "hybridscope/probes/range.h"
#include "hybridscope/trainer/dist/pending_collective.h"

namespace hs::trainer {

namespace {

using Intervals = std::vector<std::pair<std::int64_t, std::int64_t>>;

// Sorted, disjoint union of `v`.
Intervals merged(Intervals v) {
  std::sort(v.begin(), v.end());
  Intervals out;
  for (const auto& [b, e] : v) {
    if (e <= b) continue;
    if (!out.empty() && b <= out.back().second) {
      out.back().second = std::max(out.back().second, e);
    } else {
      out.emplace_back(b, e);
    }
  }
  return out;
}

std::int64_t length(const Intervals& u) {
  std::int64_t n = 0;
  for (const auto& [b, e] : u) n += e - b;
  return n;
}

// |a ∩ b| of two merged unions.
std::int64_t intersection(const Intervals& a, const Intervals& b) {
  std::int64_t n = 0;
  std::size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const auto lo = std::max(a[i].first, b[j].first), hi = std::min(a[i].second, b[j].second);
    if (hi > lo) n += hi - lo;
    (a[i].second < b[j].second) ? ++i : ++j;
  }
  return n;
}

// The decoder layer of a parameter named `prefix`{i}.*, or -1.
int layer_of(const std::string& name, const std::string& prefix) {
  if (name.compare(0, prefix.size(), prefix) != 0) return -1;
  const auto dot = name.find('.', prefix.size());
  if (dot == std::string::npos || dot == prefix.size()) return -1;
  const auto digits = name.substr(prefix.size(), dot - prefix.size());
  if (digits.find_first_not_of("0123456789") != std::string::npos) return -1;
  return std::atoi(digits.c_str());
}

}  // namespace

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
  build_units(std::vector<std::size_t>(params_.size(), 0), 1);
  units_[0].gathered = true;  // the module holds the full tensors it was built with
  release();
}

ZeroShards::~ZeroShards() = default;

void ZeroShards::build_units(const std::vector<std::size_t>& unit_of, std::size_t units) {
  units_.clear();
  units_.resize(units);
  unit_of_param_ = unit_of;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    auto& u = units_[unit_of[i]];
    auto& p = params_[i];
    p.offset = u.chunk;
    u.chunk += p.block * p.row_numel;
    u.params.push_back(i);
  }
}

void ZeroShards::wrap_layers(bool forward_prefetch, const std::string& prefix) {
  release();
  std::vector<int> layers;
  for (const auto& name : names_) {
    const int l = layer_of(name, prefix);
    if (l >= 0 && std::find(layers.begin(), layers.end(), l) == layers.end()) layers.push_back(l);
  }
  if (layers.empty())
    throw std::invalid_argument(fmt::format("ZeroShards::wrap_layers: no parameter is named {}<i>.* — per-layer "
                                            "units need a decoder's layers",
                                            prefix));
  std::sort(layers.begin(), layers.end());
  std::vector<std::size_t> unit_of(params_.size(), 0);
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const int l = layer_of(names_[i], prefix);
    if (l >= 0) unit_of[i] = 1 + static_cast<std::size_t>(std::lower_bound(layers.begin(), layers.end(), l) - layers.begin());
  }
  build_units(unit_of, layers.size() + 1);
  unit_layer_.assign(1, -1);
  unit_layer_.insert(unit_layer_.end(), layers.begin(), layers.end());
  layer_units_ = layers.size();
  prefetch_ = forward_prefetch;
}

std::pair<std::int64_t, std::int64_t> ZeroShards::rows(std::size_t i) const {
  const auto& p = params_.at(i);
  const std::int64_t begin = std::min(p.rows, p.block * dp_->rank());
  return {begin, std::min(p.rows, begin + p.block)};
}

torch::Tensor ZeroShards::flat_shards(const Unit& u) const {
  const auto options = shards_.empty() ? torch::TensorOptions() : shards_.front().options();
  auto flat = torch::zeros({u.chunk}, options);  // padding rows stay 0
  for (const auto i : u.params) flat.narrow(0, params_[i].offset, shards_[i].numel()).copy_(shards_[i].reshape({-1}));
  return flat;
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

void ZeroShards::issue_gather(std::size_t u) {
  auto& unit = units_[u];
  if (unit.gathered || unit.gather) return;
  torch::NoGradGuard no_grad;
  const auto flat = flat_shards(unit);  // packing is the training thread's work, not the transfer's
  unit.gather_issued_ns = probes::now_ns();
  unit.gather = all_gather_async(*dp_, flat);
  unit.gather_posted_ns = probes::now_ns();
  sample_peak();
}

void ZeroShards::ensure_full(std::size_t u) {
  auto& unit = units_[u];
  if (unit.gathered) return;
  torch::NoGradGuard no_grad;
  torch::Tensor gathered;
  if (!unit.gather) {
    // Nothing in flight (no prefetch, or the first unit): the blocking all_gather, all of it the
    // training thread's wait.
    const auto flat = flat_shards(unit);
    HS_PROBE_TRACE_RANGE(probes::thread_timings(), "fsdp/gather_wait", kPhase);
    const std::int64_t begin = probes::now_ns();
    gathered = dp_->all_gather(flat).view({dp_->size(), unit.chunk});
    const std::int64_t end = probes::now_ns();
    account(begin, end, end, begin, end);
  } else {
    // The training thread's wait for this unit's gather (the gather itself, issue to completion,
    // is its comm_ops row): on the timeline, the exposed part of each layer's all-gather.
    HS_PROBE_TRACE_RANGE(probes::thread_timings(), "fsdp/gather_wait", kPhase);
    const std::int64_t wait_begin = probes::now_ns();
    gathered = unit.gather->wait().view({dp_->size(), unit.chunk});
    const std::int64_t wait_end = probes::now_ns();
    account(unit.gather_issued_ns, unit.gather_posted_ns, unit.gather->completed_ns(), wait_begin, wait_end);
    unit.gather.reset();
  }
  for (const auto i : unit.params) params_[i].full.set_data(unflatten(gathered, i));
  unit.gathered = true;
  sample_peak();
}

void ZeroShards::drop_gather(std::size_t u) {
  units_[u].gather.reset();  // its destructor waits for it to complete (never throws)
}

void ZeroShards::release_unit(std::size_t u, bool grads) {
  torch::NoGradGuard no_grad;
  for (const auto i : units_[u].params) {
    auto& p = params_[i];
    if (grads) p.full.mutable_grad() = torch::Tensor();
    p.full.set_data(torch::empty({0}, p.full.options()));
  }
  units_[u].gathered = false;
}

void ZeroShards::gather() {
  for (std::size_t u = 0; u < units_.size(); ++u) ensure_full(u);
}

void ZeroShards::release() {
  reduce_scatter_.reset();  // only left in flight when an exception ends the use: its rows are moot
  for (std::size_t u = 0; u < units_.size(); ++u) {
    drop_gather(u);
    release_unit(u, /*grads=*/true);
  }
}

bool ZeroShards::gathered() const {
  return std::any_of(units_.begin(), units_.end(), [](const Unit& u) { return u.gathered; });
}

void ZeroShards::reduce_scatter_unit(std::size_t u, bool async) {
  torch::NoGradGuard no_grad;
  finish_reduce_scatter();  // at most one in flight: its rows land before the next one's input is built
  const std::int64_t n = dp_->size();
  const auto& unit = units_[u];
  // (n, chunk): row j is what rank j keeps, parameter by parameter, each padded to `block` rows.
  std::vector<torch::Tensor> columns;
  for (const auto i : unit.params) {
    auto& p = params_[i];
    const auto& g = p.full.grad();
    auto rows = g.defined() ? g.reshape({p.rows, p.row_numel})
                            : torch::zeros({p.rows, p.row_numel}, shards_[i].options());
    if (n * p.block > p.rows) rows = torch::cat({rows, torch::zeros({n * p.block - p.rows, p.row_numel}, rows.options())});
    columns.push_back(rows.reshape({n, p.block * p.row_numel}));
    p.full.mutable_grad() = torch::Tensor();
  }
  auto input = torch::cat(columns, 1);
  columns.clear();
  if (!async) {
    // Waited at once: the blocking reduce_scatter (through shared memory on one host, as
    // ensure_full's blocking gather).
    HS_PROBE_TRACE_RANGE(probes::thread_timings(), "fsdp/reduce_scatter_wait", kPhase);
    const std::int64_t begin = probes::now_ns();
    const auto mine = dp_->reduce_scatter(input, ReduceOp::kSum).reshape({-1});  // (chunk)
    const std::int64_t end = probes::now_ns();
    account(begin, end, end, begin, end);
    add_to_shard_grads(u, mine);
    return;
  }
  reduce_scatter_issued_ns_ = probes::now_ns();
  reduce_scatter_ = reduce_scatter_async(*dp_, input, ReduceOp::kSum);
  reduce_scatter_posted_ns_ = probes::now_ns();
  reduce_scatter_unit_ = u;
}

void ZeroShards::finish_reduce_scatter() {
  if (!reduce_scatter_) return;
  torch::NoGradGuard no_grad;
  HS_PROBE_TRACE_RANGE(probes::thread_timings(), "fsdp/reduce_scatter_wait", kPhase);
  const std::int64_t wait_begin = probes::now_ns();
  const auto mine = reduce_scatter_->wait().reshape({-1});  // (chunk)
  const std::int64_t wait_end = probes::now_ns();
  account(reduce_scatter_issued_ns_, reduce_scatter_posted_ns_, reduce_scatter_->completed_ns(), wait_begin, wait_end);
  reduce_scatter_.reset();
  add_to_shard_grads(reduce_scatter_unit_, mine);
}

void ZeroShards::add_to_shard_grads(std::size_t u, const torch::Tensor& mine) {
  for (const auto i : units_[u].params) {
    const auto rows = mine.narrow(0, params_[i].offset, shards_[i].numel()).view_as(shards_[i]);
    auto& grad = shards_[i].mutable_grad();
    if (grad.defined()) {
      grad.add_(rows);
    } else {
      grad = rows.clone();
    }
  }
}

void ZeroShards::reduce_scatter_grads() {
  if (!shards_.empty() && !gathered())
    throw std::logic_error("ZeroShards::reduce_scatter_grads: the module is released — gather() before the "
                           "forward and backward whose gradients are reduced");
  // Every unit still full: the root of per-layer units (and a layer whose backward hook did not
  // run), or the whole module. The same units on every rank: which are full depends on the graph.
  for (std::size_t u = 0; u < units_.size(); ++u) {
    drop_gather(u);  // a prefetch the backward did not use: stale once the optimizer steps
    if (units_[u].gathered) reduce_scatter_unit(u, /*async=*/false);
  }
  finish_reduce_scatter();
  // The optimizer steps the shards next: the module's full tensors are stale from now on.
  release();
}

std::ptrdiff_t ZeroShards::unit_of_layer(int layer) const {
  if (layer_units_ == 0) return -1;
  const auto it = std::lower_bound(unit_layer_.begin() + 1, unit_layer_.end(), layer);
  if (it == unit_layer_.end() || *it != layer) return -1;
  return it - unit_layer_.begin();
}

void ZeroShards::before_forward(int layer) {
  const auto u = unit_of_layer(layer);
  if (u < 0) return;
  ensure_full(static_cast<std::size_t>(u));
  if (prefetch_ && static_cast<std::size_t>(u) + 1 < units_.size()) issue_gather(static_cast<std::size_t>(u) + 1);
}

void ZeroShards::after_forward(int layer) {
  const auto u = unit_of_layer(layer);
  if (u >= 0) release_unit(static_cast<std::size_t>(u), /*grads=*/false);
}

void ZeroShards::before_backward(int layer) {
  const auto u = unit_of_layer(layer);
  if (u < 0) return;
  ensure_full(static_cast<std::size_t>(u));
  if (prefetch_ && u > 1) issue_gather(static_cast<std::size_t>(u) - 1);
}

void ZeroShards::after_backward(int layer) {
  const auto u = unit_of_layer(layer);
  if (u < 0 || !units_[static_cast<std::size_t>(u)].gathered) return;
  reduce_scatter_unit(static_cast<std::size_t>(u), /*async=*/prefetch_);
  release_unit(static_cast<std::size_t>(u), /*grads=*/true);
}

void ZeroShards::account(std::int64_t issued, std::int64_t posted, std::int64_t completed, std::int64_t wait_begin,
                         std::int64_t wait_end) {
  comm_intervals_.emplace_back(issued, std::max(issued, completed));
  // The post is the training thread's too (Gloo copies the input there; on one host with shared
  // memory the whole transfer runs in it): exposed, as the reports' temporal breakdown counts it.
  wait_intervals_.emplace_back(issued, posted);
  wait_intervals_.emplace_back(wait_begin, wait_end);
  ++collectives_;
}

ZeroCommStats ZeroShards::comm_stats() const {
  const auto comm = merged(comm_intervals_);
  ZeroCommStats s;
  s.comm_ns = length(comm);
  s.exposed_ns = intersection(comm, merged(wait_intervals_));
  s.collectives = collectives_;
  return s;
}

void ZeroShards::reset_stats() {
  comm_intervals_.clear();
  wait_intervals_.clear();
  collectives_ = 0;
  peak_full_bytes_ = module_parameter_bytes();
}

void ZeroShards::sample_peak() {
  std::int64_t bytes = module_parameter_bytes();
  const std::int64_t element = shards_.empty() ? 0 : static_cast<std::int64_t>(shards_.front().element_size());
  for (const auto& u : units_)
    if (u.gather) bytes += dp_->size() * u.chunk * element;  // the gathered buffer being filled
  peak_full_bytes_ = std::max(peak_full_bytes_, bytes);
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

namespace {

std::int64_t full_bytes_of(const std::vector<std::int64_t>& shape, const torch::Tensor& like) {
  std::int64_t n = 1;
  for (const auto d : shape) n *= d;
  return n * static_cast<std::int64_t>(like.element_size());
}

}  // namespace

std::int64_t ZeroShards::full_bytes() const {
  std::int64_t bytes = 0;
  for (std::size_t i = 0; i < params_.size(); ++i) bytes += full_bytes_of(params_[i].shape, shards_[i]);
  return bytes;
}

std::int64_t ZeroShards::root_unit_bytes() const {
  std::int64_t bytes = 0;
  for (const auto i : units_[0].params) bytes += full_bytes_of(params_[i].shape, shards_[i]);
  return bytes;
}

std::int64_t ZeroShards::largest_layer_unit_bytes() const {
  std::int64_t largest = 0;
  for (std::size_t u = 1; u < units_.size(); ++u) {
    std::int64_t bytes = 0;
    for (const auto i : units_[u].params) bytes += full_bytes_of(params_[i].shape, shards_[i]);
    largest = std::max(largest, bytes);
  }
  return largest;
}

std::vector<torch::Tensor> ZeroShards::gather_all_flat() {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> out;
  for (const auto& u : units_) out.push_back(dp_->all_gather(flat_shards(u)).view({dp_->size(), u.chunk}));
  return out;
}

std::vector<std::pair<std::string, torch::Tensor>> ZeroShards::full_state_dict() {
  const auto gathered = gather_all_flat();
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (std::size_t i = 0; i < params_.size(); ++i) out.emplace_back(names_[i], unflatten(gathered[unit_of_param_[i]], i));
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

ZeroShards::PassScope::PassScope(ZeroShards* shards) : shards_(shards) {
  if (!shards_) return;
  if (shards_->per_layer()) {
    shards_->ensure_full(0);  // the root unit; the layers gather in the backbone's hooks
  } else {
    shards_->gather();
  }
}

ZeroShards::PassScope::~PassScope() {
  if (shards_) shards_->release();
}

}  // namespace hs::trainer
