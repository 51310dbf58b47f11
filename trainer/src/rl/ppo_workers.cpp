// ppo_workers.cpp — verl's dp_actor.py / dp_critic.py for this trainer.
#include "hybridscope/trainer/rl/ppo_workers.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <torch/torch.h>

#include "hybridscope/probes/range.h"
#include "hybridscope/trainer/rl/core_algos.h"
#include "hybridscope/trainer/model/device.h"
#include "hybridscope/trainer/rl/pipeline.h"
#include "hybridscope/trainer/dist/zero.h"
#include "model/model_layers.h"

namespace hs::trainer {

double lr_multiplier(const OptimConfig& optim, std::int64_t step, std::int64_t total_steps) {
  std::int64_t warmup = optim.lr_warmup_steps;
  if (warmup < 0) warmup = static_cast<std::int64_t>(optim.lr_warmup_steps_ratio * static_cast<double>(total_steps));
  if (warmup > 0 && step < warmup) return static_cast<double>(step) / static_cast<double>(std::max<std::int64_t>(1, warmup));
  if (optim.warmup_style == WarmupStyle::kCosine) {
    // verl get_cosine_schedule_with_warmup: min_lr_ratio + (1 - min_lr_ratio) * 0.5 * (1 + cos(pi * progress))
    const double progress = static_cast<double>(step - warmup) /
                            static_cast<double>(std::max<std::int64_t>(1, total_steps - warmup));
    const double cosine = 0.5 * (1.0 + std::cos(M_PI * std::min(1.0, progress)));
    return optim.min_lr_ratio + (1.0 - optim.min_lr_ratio) * cosine;
  }
  return 1.0;
}

Optimizer::Optimizer(torch::nn::Module& module, const OptimConfig& optim, double grad_clip, std::int64_t total_steps,
                     ParallelContext parallel)
    : optim_(optim), grad_clip_(grad_clip), total_steps_(total_steps), parallel_(std::move(parallel)) {
  if (parallel_.dp_sharding == DpSharding::kSharded && parallel_.dp->size() > 1) {
    zero_ = std::make_shared<ZeroShards>(module, parallel_.dp);
    params_ = zero_->shards();
  } else {
    params_ = module.parameters();
  }
  const auto dims = detail::tensor_parallel_dims(module);
  for (const auto& item : module.named_parameters()) tp_split_.push_back(dims.count(item.key()) != 0);
  auto options = torch::optim::AdamWOptions(optim.lr)
                     .betas({optim.betas[0], optim.betas[1]})
                     .eps(optim.eps)
                     .weight_decay(optim.weight_decay);
  adamw_ = std::make_unique<torch::optim::AdamW>(params_, options);
  set_schedule_step(0);
}

void Optimizer::zero_grad() { adamw_->zero_grad(true); }

std::vector<torch::Tensor> Optimizer::state_tensors() const {
  std::vector<torch::Tensor> out;
  for (const auto& p : params_) {
    const auto it = adamw_->state().find(p.unsafeGetTensorImpl());
    if (it == adamw_->state().end()) continue;
    const auto& s = static_cast<const torch::optim::AdamWParamState&>(*it->second);
    for (const auto& t : {s.exp_avg(), s.exp_avg_sq(), s.max_exp_avg_sq()})
      if (t.defined()) out.push_back(t);
  }
  return out;
}

double Optimizer::step() {
  HS_PROBE_TRACE_RANGE(probes::thread_timings(), "optimizer_step", kPhase);
  // Data parallel: gradients are averaged over dp, as FSDP and DDP do. Each rank's loss was
  // normalised by agg_loss with the global batch info (global counts, times dp_size), so the
  // average is the gradient of the whole mini-batch's loss. Replicated parameters: one flat
  // all_reduce; sharded (fsdp): one flat reduce_scatter, each rank keeping its rows. The division
  // by dp follows the summing collective.
  const double inv_dp = 1.0 / static_cast<double>(parallel_.dp->size());
  if (zero_) {
    zero_->reduce_scatter_grads();
    if (parallel_.dp->size() > 1)
      for (auto& p : params_)
        if (p.grad().defined()) p.grad().mul_(inv_dp);
  } else if (parallel_.dp->size() > 1) {
    std::vector<torch::Tensor> grads;
    for (auto& p : params_) {
      if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
      grads.push_back(p.grad().reshape({-1}));
    }
    auto flat = torch::cat(grads);
    parallel_.dp->all_reduce(flat, ReduceOp::kSum);
    flat.mul_(inv_dp);
    std::int64_t offset = 0;
    for (auto& p : params_) {
      const auto n = p.numel();
      p.grad().copy_(flat.narrow(0, offset, n).view_as(p));
      offset += n;
    }
  }
  // Global L2 norm over every parameter's gradient (identical on every dp rank after the sum;
  // fsdp: each rank holds disjoint rows, so the squares are summed over dp first). A tp-split parameter's squares are summed over the tp group; a tp-replicated one (norms, the
  // embedding) has the same gradient on every tp rank and counts once; pipeline stages hold
  // disjoint parameters, so the total is summed over pp.
  // (tp-split, tp-replicated), where the gradients are (their device: the dp/tp/pp groups move it).
  const auto grad_device = params_.empty() ? torch::Device(torch::kCPU) : params_.front().device();
  auto sq = torch::zeros({2}, torch::TensorOptions().dtype(torch::kFloat64).device(grad_device));
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const auto& p = params_[i];
    if (p.grad().defined()) sq[tp_split_[i] ? 0 : 1] += p.grad().to(torch::kFloat64).pow(2).sum();
  }
  if (zero_) parallel_.dp->all_reduce(sq, ReduceOp::kSum);
  if (parallel_.tp->size() > 1) {
    auto split = sq.narrow(0, 0, 1).clone();
    parallel_.tp->all_reduce(split, ReduceOp::kSum);
    sq.narrow(0, 0, 1).copy_(split);
  }
  auto total_sq = sq.sum().reshape({1});
  if (parallel_.pp->size() > 1) parallel_.pp->all_reduce(total_sq, ReduceOp::kSum);
  const double norm = std::sqrt(total_sq.item<double>());
  if (!std::isfinite(norm)) {  // verl skips the update when the norm is not finite
    zero_grad();
    return norm;
  }
  if (grad_clip_ > 0 && norm > grad_clip_) {
    const double scale = grad_clip_ / (norm + 1e-6);
    for (auto& p : params_)
      if (p.grad().defined()) p.grad().mul_(scale);
  }
  if (fused_) {
    fused_step();
  } else {
    adamw_->step();
  }
  return norm;
}

void Optimizer::fused_step() {
  // LibTorch's AdamW::step, as one fused call: parameters without a gradient are skipped, a
  // parameter's state is created at its first step (zeros, step 0), and the kernel reads the step
  // count after its increment (PyTorch's _fused_adamw increments state_steps before the call).
  const auto& o = static_cast<const torch::optim::AdamWOptions&>(adamw_->param_groups().front().options());
  TORCH_CHECK(!o.amsgrad(), "hybridscope.fused_adamw: amsgrad is not used by hybridscope's AdamW");
  auto& state = adamw_->state();
  if (fused_steps_.size() != params_.size()) {
    fused_steps_.assign(params_.size(), torch::Tensor());
    fused_counts_.assign(params_.size(), -1);
  }
  std::vector<torch::Tensor> params, grads, exp_avgs, exp_avg_sqs, steps;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const auto& p = params_[i];
    if (!p.grad().defined()) continue;
    auto* key = p.unsafeGetTensorImpl();
    auto it = state.find(key);
    if (it == state.end()) {
      auto fresh = std::make_unique<torch::optim::AdamWParamState>();
      fresh->step(0);
      fresh->exp_avg(torch::zeros_like(p, torch::MemoryFormat::Preserve));
      fresh->exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
      it = state.emplace(key, std::move(fresh)).first;
    }
    auto& s = static_cast<torch::optim::AdamWParamState&>(*it->second);
    if (!fused_steps_[i].defined() || fused_counts_[i] != s.step()) {
      fused_steps_[i] = torch::full({}, static_cast<double>(s.step()),
                                    torch::TensorOptions().dtype(torch::kFloat).device(p.device()));
    }
    s.step(s.step() + 1);
    fused_counts_[i] = s.step();
    params.push_back(p);
    grads.push_back(p.grad());
    exp_avgs.push_back(s.exp_avg());
    exp_avg_sqs.push_back(s.exp_avg_sq());
    steps.push_back(fused_steps_[i]);
  }
  if (params.empty()) return;
  torch::NoGradGuard no_grad;
  at::_foreach_add_(steps, 1);
  at::_fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, /*max_exp_avg_sqs=*/{}, steps, o.lr(),
                    std::get<0>(o.betas()), std::get<1>(o.betas()), o.weight_decay(), o.eps(), /*amsgrad=*/false,
                    /*maximize=*/false);
}

void Optimizer::set_schedule_step(std::int64_t step) {
  const double lr = optim_.lr * lr_multiplier(optim_, step, total_steps_);
  for (auto& group : adamw_->param_groups()) static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
}

double Optimizer::lr() const {
  return static_cast<const torch::optim::AdamWOptions&>(adamw_->param_groups().front().options()).lr();
}

std::vector<std::vector<std::int64_t>> split_rows(std::int64_t batch_size, std::int64_t micro) {
  if (micro <= 0) micro = batch_size;
  std::vector<std::vector<std::int64_t>> out;
  for (std::int64_t start = 0; start < batch_size; start += micro) {
    std::vector<std::int64_t> rows;
    for (std::int64_t i = start; i < std::min(batch_size, start + micro); ++i) rows.push_back(i);
    out.push_back(std::move(rows));
  }
  return out;
}

std::vector<std::vector<std::size_t>> balanced_equal_partitions(const std::vector<std::int64_t>& weights, int parts) {
  if (parts < 1 || weights.size() % static_cast<std::size_t>(parts) != 0)
    throw std::invalid_argument("balanced_equal_partitions: " + std::to_string(weights.size()) +
                                " items cannot be split into " + std::to_string(parts) + " equal partitions");
  const std::size_t room = weights.size() / static_cast<std::size_t>(parts);
  std::vector<std::size_t> order(weights.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return weights[a] > weights[b]; });
  std::vector<std::vector<std::size_t>> out(static_cast<std::size_t>(parts));
  std::vector<std::int64_t> load(static_cast<std::size_t>(parts), 0);
  for (const auto i : order) {
    std::size_t best = out.size();
    for (std::size_t k = 0; k < out.size(); ++k)
      if (out[k].size() < room && (best == out.size() || load[k] < load[best])) best = k;
    load[best] += weights[i];
    out[best].push_back(i);
  }
  for (auto& part : out) std::sort(part.begin(), part.end());
  return out;
}

std::vector<std::vector<std::int64_t>> split_rows_by_tokens(const torch::Tensor& attention_mask,
                                                            std::int64_t max_tokens) {
  const auto lengths_t = attention_mask.sum(-1).to(torch::kInt64).contiguous();
  const std::int64_t* lengths = lengths_t.data_ptr<std::int64_t>();
  const std::int64_t rows = lengths_t.numel();
  std::vector<std::int64_t> order(static_cast<std::size_t>(rows));
  std::int64_t total = 0;
  for (std::int64_t i = 0; i < rows; ++i) {
    order[static_cast<std::size_t>(i)] = i;
    total += lengths[i];
  }
  std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return lengths[a] > lengths[b]; });
  for (std::int64_t parts = std::max<std::int64_t>(1, (total + max_tokens - 1) / max_tokens); parts <= rows; ++parts) {
    std::vector<std::vector<std::int64_t>> bins(static_cast<std::size_t>(parts));
    std::vector<std::int64_t> load(static_cast<std::size_t>(parts), 0);
    bool fits = true;
    for (auto row : order) {
      const auto lightest = static_cast<std::size_t>(std::min_element(load.begin(), load.end()) - load.begin());
      if (load[lightest] > 0 && load[lightest] + lengths[row] > max_tokens) fits = false;
      load[lightest] += lengths[row];
      bins[lightest].push_back(row);
    }
    if (fits || parts == rows) {
      for (auto& bin : bins) std::sort(bin.begin(), bin.end());
      bins.erase(std::remove_if(bins.begin(), bins.end(), [](const auto& b) { return b.empty(); }), bins.end());
      return bins;
    }
  }
  return {};
}

namespace {

struct Averager {
  std::map<std::string, std::pair<double, int>> sums;
  std::vector<std::string> order;
  void add(const std::string& name, double v) {
    auto [it, inserted] = sums.try_emplace(name, 0.0, 0);
    if (inserted) order.push_back(name);
    it->second.first += v;
    it->second.second += 1;
  }
  Metrics result() const {
    Metrics out;
    for (const auto& name : order) {
      const auto& [sum, count] = sums.at(name);
      out.emplace_back(name, sum / count);
    }
    return out;
  }
};

// Rows in mini-batches of `mini`, in order, or shuffled by `shuffle` when given.
std::vector<std::vector<std::int64_t>> mini_batches(std::int64_t batch_size, std::int64_t mini,
                                                    torch::Generator* shuffle) {
  std::vector<std::int64_t> order(static_cast<std::size_t>(batch_size));
  for (std::int64_t i = 0; i < batch_size; ++i) order[static_cast<std::size_t>(i)] = i;
  if (shuffle) {
    const auto perm = torch::randperm(batch_size, *shuffle, torch::kInt64).contiguous();
    std::copy_n(perm.data_ptr<std::int64_t>(), batch_size, order.begin());
  }
  std::vector<std::vector<std::int64_t>> out;
  for (std::int64_t s = 0; s < batch_size; s += mini)
    out.emplace_back(order.begin() + s, order.begin() + std::min(batch_size, s + mini));
  return out;
}
}  // namespace

std::pair<torch::Tensor, torch::Tensor> response_log_probs(Transformer& model, const RolloutBatch& batch,
                                                           double temperature, bool with_entropy) {
  return response_log_probs_of_hidden(
      model, model->forward(batch.input_ids, batch.attention_mask, batch.position_ids, LmOutput::kHidden), batch,
      temperature, with_entropy);
}

std::pair<torch::Tensor, torch::Tensor> response_log_probs_of_hidden(Transformer& model, const torch::Tensor& hidden,
                                                                     const RolloutBatch& batch, double temperature,
                                                                     bool with_entropy) {
  // Hidden states at the positions that predict response tokens: (B, P+R, C) -> (B·R, C).
  const auto p = batch.prompt_length();
  const auto B = batch.size();
  const auto R = batch.response_length();
  const auto h = hidden.slice(1, p - 1, p + R - 1).reshape({B * R, hidden.size(-1)});
  auto [log_probs, entropy] = model->token_log_probs(h, batch.responses.reshape({B * R}), temperature, with_entropy);
  return {log_probs.view({B, R}), entropy.defined() ? entropy.view({B, R}) : entropy};
}

std::pair<torch::Tensor, torch::Tensor> response_log_probs_of_logits(const torch::Tensor& full_logits,
                                                                     const RolloutBatch& batch, double temperature,
                                                                     bool with_entropy) {
  // Logits at the positions that predict response tokens: (B, P+R, V) -> (B, R, V).
  const auto p = batch.prompt_length();
  auto logits = full_logits.slice(1, p - 1, p + batch.response_length() - 1);
  if (temperature > 0 && temperature != 1.0) logits = logits / temperature;
  auto log_probs = logprobs_from_logits(logits, batch.responses);
  torch::Tensor entropy;
  if (with_entropy) entropy = entropy_from_logits(logits);
  return {log_probs, entropy};
}

torch::Tensor response_values(Transformer& model, const RolloutBatch& batch) {
  auto values = model->forward(batch.input_ids, batch.attention_mask, batch.position_ids);  // (B, P+R)
  const auto p = batch.prompt_length();
  return values.slice(1, p - 1, p + batch.response_length() - 1);
}

GlobalBatchInfo global_batch_info(const torch::Tensor& mini_mask, Communicator& dp, double loss_scale_factor) {
  // (valid tokens, sequences with a valid token) of this rank's share, summed over dp in one call.
  auto counts = torch::stack({mini_mask.sum().to(torch::kFloat64), (mini_mask.sum(-1) > 0).sum().to(torch::kFloat64)})
                    .cpu();
  if (dp.size() > 1) dp.all_reduce(counts, ReduceOp::kSum);
  GlobalBatchInfo info;
  info.dp_size = dp.size();
  info.batch_num_tokens = counts[0].item<double>();
  info.global_batch_size = counts[1].item<double>();
  if (loss_scale_factor > 0) info.loss_scale_factor = loss_scale_factor;
  return info;
}

bool has_valid_token(const torch::Tensor& mask) { return mask.sum().item<double>() > 0; }

// ---------------------------------------------------------------------------------------------

PPOActor::PPOActor(Transformer model, const ActorConfig& config, double temperature, int rollout_n,
                   std::int64_t total_steps, ParallelContext parallel)
    : model_(std::move(model)), config_(config), temperature_(temperature), rollout_n_(rollout_n),
      parallel_(parallel), optimizer_(*model_, config.optim, config.grad_clip, total_steps, parallel) {
  ZeroShards* zero = optimizer_.zero_shards();
  if (zero != nullptr && config_.fsdp_config.per_layer) {
    // fsdp's per-layer units: the backbone's layer loop gathers and frees each layer (zero.h). The
    // hooks point at the optimizer's ZeroShards, which lives as long as this actor.
    auto backbone = std::dynamic_pointer_cast<detail::BackboneImpl>(model_->named_children()["model"]);
    if (!backbone) throw std::logic_error("PPOActor: the actor's model has no decoder backbone named 'model'");
    zero->wrap_layers(config_.fsdp_config.forward_prefetch);
    backbone->layer_hooks = zero;
  }
}

torch::Tensor PPOActor::compute_log_prob(const RolloutBatch& batch, std::int64_t micro) {
  const ZeroShards::PassScope full(optimizer_.zero_shards());  // fsdp: all-gather now, free on return
  return micro_batched_log_probs(model_, batch, micro, temperature_);
}

Metrics PPOActor::update_policy(const RolloutBatch& batch, std::int64_t step, std::uint64_t shuffle_seed) {
  model_->train();
  optimizer_.set_schedule_step(step);
  const std::int64_t mini = static_cast<std::int64_t>(config_.ppo_mini_batch_size) * rollout_n_ / parallel_.dp->size();
  const std::int64_t micro = config_.ppo_micro_batch_size_per_gpu;
  Averager metrics;
  const auto device = module_device(*model_);  // micro-batches go there; the batch stays where it is
  auto shuffle_gen = at::detail::createCPUGenerator(shuffle_seed);
  ZeroShards* layered = optimizer_.zero_shards();
  if (layered != nullptr && !layered->per_layer()) layered = nullptr;
  if (layered != nullptr) layered->reset_stats();
  for (int epoch = 0; epoch < config_.ppo_epochs; ++epoch) {
    for (const auto& mini_rows : mini_batches(batch.size(), mini, config_.shuffle ? &shuffle_gen : nullptr)) {
      const RolloutBatch mb = batch.select(mini_rows);
      const ZeroShards::PassScope full(optimizer_.zero_shards());  // fsdp: all-gather the stepped shards
      optimizer_.zero_grad();
      const auto micro_batches = config_.use_dynamic_bsz
                                     ? split_rows_by_tokens(mb.attention_mask, config_.ppo_max_token_len_per_gpu)
                                     : split_rows(mb.size(), micro);
      // verl's global batch info: each micro-batch's loss is normalised by the mini-batch's global
      // counts (and times dp, the gradients being averaged over dp), so the sum over micro-batches
      // needs no further weight.
      const GlobalBatchInfo info = global_batch_info(mb.response_mask, *parallel_.dp, config_.loss_scale_factor);
      // Micro-batches with a valid token (the same list on every pipeline stage: it depends on the
      // data only), run through the stages in the 1F1B order; the loss on the last stage.
      std::vector<RolloutBatch> ubs;
      std::vector<char> no_tokens;  // per micro-batch: no valid token (kept only by per-layer fsdp)
      for (const auto& rows : micro_batches) {
        RolloutBatch ub = mb.select(rows);
        // Its loss and gradient are exactly 0; per-layer fsdp runs it anyway, so that every dp rank
        // runs as many passes (each gathers and reduce-scatters over dp).
        const bool empty = !has_valid_token(ub.response_mask);
        if (empty && layered == nullptr) continue;
        ubs.push_back(ub.to(device));
        no_tokens.push_back(empty ? 1 : 0);
      }
      // Loss-like metrics are summed over the mini-batch's micro-batches (each is a share of the
      // mini-batch's loss), ratios are averaged per micro-batch (verl's SUM and MEAN aggregations).
      Averager mini_sums;
      pipeline_forward_backward(model_, ubs, [&](std::size_t m, const torch::Tensor& hidden) {
        const RolloutBatch& ub = ubs[m];
        // A pass without valid tokens (per-layer fsdp): an exactly-zero gradient of every
        // parameter, the head's included, and no metrics.
        if (no_tokens[m] != 0) return response_log_probs_of_hidden(model_, hidden, ub, temperature_, false).first.sum() * 0.0;
        const bool need_entropy = config_.entropy_coeff != 0.0;
        auto [log_prob, entropy_tokens] = response_log_probs_of_hidden(model_, hidden, ub, temperature_, true);
        // rollout correction's IS weights (undefined when off) multiply the per-token loss after clipping.
        auto pg = compute_policy_loss_for_mode(config_, ub.old_log_probs, log_prob, ub.advantages, ub.response_mask,
                                               info, ub.rollout_is_weights);
        auto entropy = agg_loss(entropy_tokens, ub.response_mask, config_.loss_agg_mode, info);
        auto policy_loss = need_entropy ? pg.pg_loss - config_.entropy_coeff * entropy : pg.pg_loss;
        if (config_.use_kl_loss) {
          auto kld = kl_penalty(log_prob, ub.ref_log_probs, config_.kl_loss_type);
          auto kl_loss = agg_loss(kld, ub.response_mask, config_.loss_agg_mode, info);
          policy_loss = policy_loss + config_.kl_loss_coef * kl_loss;
          mini_sums.add("actor/kl_loss", kl_loss.item<double>());
          metrics.add("actor/kl_coef", config_.kl_loss_coef);
        }
        mini_sums.add("actor/pg_loss", pg.pg_loss.item<double>());
        mini_sums.add("actor/entropy", entropy.item<double>());
        if (pg.pg_clipfrac.defined()) metrics.add("actor/pg_clipfrac", pg.pg_clipfrac.item<double>());
        if (pg.ppo_kl.defined()) metrics.add("actor/ppo_kl", pg.ppo_kl.item<double>());
        if (pg.pg_clipfrac_lower.defined()) metrics.add("actor/pg_clipfrac_lower", pg.pg_clipfrac_lower.item<double>());
        return policy_loss;
      }, nullptr, LmOutput::kHidden);
      for (const auto& name : mini_sums.order) metrics.add(name, mini_sums.sums.at(name).first);
      metrics.add("actor/grad_norm", optimizer_.step());
    }
  }
  if (layered != nullptr) {
    // docs/metrics.md: fsdp's per-layer collectives in this update and its full parameters at peak.
    const ZeroCommStats comm = layered->comm_stats();
    metrics.add("actor/fsdp_comm_s", static_cast<double>(comm.comm_ns) * 1e-9);
    metrics.add("actor/fsdp_exposed_comm_s", static_cast<double>(comm.exposed_ns) * 1e-9);
    metrics.add("actor/fsdp_overlap", comm.overlap_ratio());
    metrics.add("actor/fsdp_peak_param_bytes",
                static_cast<double>(layered->shard_bytes() + layered->peak_full_bytes()));
  }
  metrics.add("actor/lr", optimizer_.lr());
  auto result = metrics.result();
  broadcast_metrics(result, *parallel_.pp, parallel_.pp->size() - 1);
  return result;
}

// ---------------------------------------------------------------------------------------------

PPOCritic::PPOCritic(Transformer model, const CriticConfig& config, int rollout_n, std::int64_t total_steps,
                     ParallelContext parallel)
    : model_(std::move(model)), config_(config), rollout_n_(rollout_n), parallel_(parallel),
      optimizer_(*model_, config.optim, config.grad_clip, total_steps, parallel) {
  const int stages = std::max(parallel_.pp->size(), model_->parallel().pp->size());
  if (stages > 1) {
    throw std::invalid_argument("PPOCritic: pipeline-parallel critics are not supported (pp " + std::to_string(stages) +
                                ") — build the critic's model with a one-stage ParallelContext (its pp group of one rank)");
  }
}

torch::Tensor PPOCritic::compute_values(const RolloutBatch& batch, std::int64_t micro) {
  torch::NoGradGuard no_grad;
  const ZeroShards::PassScope full(optimizer_.zero_shards());  // fsdp: all-gather now, free on return
  const auto device = module_device(*model_);
  std::vector<torch::Tensor> parts;
  for (const auto& rows : split_rows(batch.size(), micro)) {
    const RolloutBatch ub = batch.select(rows).to(device);
    parts.push_back((response_values(model_, ub) * ub.response_mask).to(batch.responses.device()));
  }
  return torch::cat(parts, 0);
}

Metrics PPOCritic::update_critic(const RolloutBatch& batch, std::int64_t step) {
  model_->train();
  optimizer_.set_schedule_step(step);
  const std::int64_t mini = static_cast<std::int64_t>(config_.ppo_mini_batch_size) * rollout_n_ / parallel_.dp->size();
  Averager metrics;
  const auto device = module_device(*model_);
  for (int epoch = 0; epoch < config_.ppo_epochs; ++epoch) {
    for (const auto& mini_rows : mini_batches(batch.size(), mini, nullptr)) {
      const RolloutBatch mb = batch.select(mini_rows);
      const ZeroShards::PassScope full(optimizer_.zero_shards());  // fsdp: all-gather the stepped shards
      optimizer_.zero_grad();
      const auto micro_batches = config_.use_dynamic_bsz
                                     ? split_rows_by_tokens(mb.attention_mask, config_.ppo_max_token_len_per_gpu)
                                     : split_rows(mb.size(), config_.ppo_micro_batch_size_per_gpu);
      const GlobalBatchInfo info = global_batch_info(mb.response_mask, *parallel_.dp, /*loss_scale_factor=*/-1);
      double vf_loss_sum = 0;
      for (const auto& rows : micro_batches) {
        const RolloutBatch ub = mb.select(rows).to(device);
        if (!has_valid_token(ub.response_mask)) continue;  // its loss and gradient are exactly 0
        torch::Tensor vpreds;
        ValueLossOutput vl;
        {
          HS_PROBE_TRACE_RANGE_ARGS(probes::thread_timings(), "micro_batch/forward", kPhase, ub.size(),
                                    ub.input_ids.size(1));
          vpreds = response_values(model_, ub);
          vl = compute_value_loss(vpreds, ub.returns, ub.values, ub.response_mask, config_.cliprange_value,
                                  config_.loss_agg_mode, info);
        }
        {
          HS_PROBE_TRACE_RANGE_ARGS(probes::thread_timings(), "micro_batch/backward", kPhase, ub.size(),
                                    ub.input_ids.size(1));
          vl.vf_loss.backward();
        }
        vf_loss_sum += vl.vf_loss.item<double>();
        metrics.add("critic/vf_clipfrac", vl.vf_clipfrac.item<double>());
        metrics.add("critic/vpred_mean", masked_mean(vpreds.detach(), ub.response_mask).item<double>());
      }
      metrics.add("critic/vf_loss", vf_loss_sum);
      metrics.add("critic/grad_norm", optimizer_.step());
    }
  }
  metrics.add("critic/lr", optimizer_.lr());
  return metrics.result();
}

}  // namespace hs::trainer
