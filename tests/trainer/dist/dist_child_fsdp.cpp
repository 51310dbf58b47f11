// dist_child_fsdp.cpp — the fsdp (ZeRO-3) mode of hs_dist_child (see dist_child.cpp):
//
//   hs_dist_child fsdp_update DB TP DP [UNITS]
//       one PPO actor update over a (1, TP, DP) Gloo mesh with parameters sharded over dp
//       (zero.h) on this rank's dp share of fsdp_fixtures.h's batch, probed into DB.rank<r>; the
//       same rank also runs the single-process update on the whole batch and writes to
//       DB.result.rank<r>: the largest |shard - the single-process row block| (after the update,
//       and before it), |loss - single|, |grad_norm - single| / single, the single grad_norm, the
//       module's parameter bytes after the update and the shard bytes; then the update's peak
//       full-parameter bytes, the root unit's, the largest layer unit's and the whole model's.
//       UNITS: model (default: one unit), layer (fsdp_config.per_layer, on fsdp_layered_shape),
//       prefetch (per_layer and forward_prefetch) or prefetch_recompute (the same with gradient
//       checkpointing).
#include <fstream>
#include <string>

#include <fmt/format.h>
#include <torch/torch.h>

#include "dist/fsdp_fixtures.h"
#include "hybridscope/probes/recorder.h"
#include "hybridscope/probes/run_probes.h"
#include "hybridscope/trainer/rl/core_algos.h"
#include "hybridscope/trainer/dist/mesh_groups.h"
#include "hybridscope/trainer/model/training_shard.h"
#include "hybridscope/trainer/rl/ppo_workers.h"
#include "hybridscope/trainer/dist/process_group.h"
#include "hybridscope/trainer/dist/zero.h"

namespace hs::trainer::test {

namespace {

// The largest |shard - box of full| over every shard (`named`) of this rank.
double max_shard_diff(const std::vector<std::pair<std::string, torch::Tensor>>& named, TransformerImpl& full,
                      const LayoutSet& sharded, int rank) {
  const auto params = full.named_parameters();
  double worst = 0;
  for (std::size_t p = 0; p < sharded.params.size(); ++p) {
    const auto box = sharded.box(p, rank);
    if (!box) continue;
    torch::Tensor want = params[sharded.params[p].spec.name];
    for (std::size_t d = 0; d < box->ranges.size(); ++d)
      want = want.slice(static_cast<std::int64_t>(d), box->ranges[d].begin, box->ranges[d].end);
    const torch::Tensor* got = nullptr;
    for (const auto& [name, t] : named)
      if (name == sharded.params[p].spec.name) got = &t;
    if (got == nullptr || got->sizes() != want.sizes()) return 1e30;  // a missing or misshaped shard
    worst = std::max(worst, (*got - want).abs().max().item<double>());
  }
  return worst;
}

double metric(const Metrics& metrics, const std::string& name) {
  for (const auto& [k, v] : metrics)
    if (k == name) return v;
  throw std::runtime_error("no metric " + name);
}

}  // namespace

int run_fsdp_update(const std::string& db, int tp, int dp, FsdpUnits units) {
  torch::set_num_threads(1);
  const DistEnv env = dist_env_from_environment();
  const int r = env.rank;
  const MeshShape mesh{1, tp, dp};
  hs::probes::Recorder recorder(db + ".rank" + std::to_string(r), r);
  recorder.begin_run({});
  ProcessGroupOptions options;
  options.timeout = std::chrono::seconds(60);
  const hs::probes::RunProbes probes(&recorder);
  C10dGroupFactory groups(env, options, &probes);
  ParallelContext ctx = make_training_context(groups, mesh, r);
  ctx.dp_sharding = DpSharding::kSharded;

  const ModelShape shape = units == FsdpUnits::kModel ? fsdp_shape() : fsdp_layered_shape();
  ActorConfig cfg = fsdp_actor_config();
  cfg.fsdp_config.per_layer = units != FsdpUnits::kModel;
  cfg.fsdp_config.forward_prefetch = units == FsdpUnits::kLayerPrefetch || units == FsdpUnits::kLayerPrefetchRecompute;
  const auto specs = llama_parameters(shape);
  const LayoutSet replicated = training_layout(specs, mesh, DpSharding::kReplicated);
  const LayoutSet sharded = training_layout(specs, mesh, DpSharding::kSharded);

  torch::manual_seed(5);
  Transformer reference(shape, HeadKind::kLm);  // the single-process model, the same on every rank
  Transformer model(shape, HeadKind::kLm, ctx);
  copy_training_shard(*reference, *model, replicated, r);  // this rank's tp shard
  model->set_gradient_checkpointing(units == FsdpUnits::kLayerPrefetchRecompute);
  PPOActor actor(model, cfg, 1.0, kFsdpRolloutN, 10, ctx);
  const ZeroShards* zero = actor.optimizer().zero_shards();
  if (zero == nullptr) throw std::runtime_error("strategy fsdp with dp > 1 made no ZeroShards");
  const double before_diff = max_shard_diff(zero->named_shards(), *reference, sharded, r);

  const RolloutBatch batch = fsdp_batch(shape.vocab_size);
  const auto dp_rank = megatron_coord(mesh, r).dp;
  const std::int64_t share = batch.size() / dp;
  std::vector<std::int64_t> rows;
  for (std::int64_t i = dp_rank * share; i < (dp_rank + 1) * share; ++i) rows.push_back(i);
  const RolloutBatch local = batch.select(rows);

  // The policy loss of the whole batch at the start weights from this rank's old log-probs
  // (compute_log_prob gathers the shards), normalised by the global batch info and averaged over dp.
  const auto log_prob = actor.compute_log_prob(local, cfg.ppo_micro_batch_size_per_gpu);
  const GlobalBatchInfo info = global_batch_info(local.response_mask, *ctx.dp, cfg.loss_scale_factor);
  auto loss = torch::zeros({1}, torch::kFloat64);
  for (const auto& micro : split_rows(local.size(), cfg.ppo_micro_batch_size_per_gpu)) {
    const RolloutBatch ub = local.select(micro);
    const auto lp = log_prob.index_select(0, torch::tensor(micro, torch::kInt64));
    const auto pg = compute_policy_loss(ub.old_log_probs, lp, ub.advantages, ub.response_mask, 0.2, 0.2, 3.0,
                                        cfg.loss_agg_mode, info);
    loss += pg.pg_loss.to(torch::kFloat64);
  }
  ctx.dp->all_reduce(loss, ReduceOp::kSum);
  loss /= ctx.dp->size();  // gradients (and so losses) are averaged over dp
  const Metrics metrics = actor.update_policy(local, 0, 0);

  double single_loss = 0;
  {
    torch::NoGradGuard no_grad;
    single_loss = compute_policy_loss(batch.old_log_probs, response_log_probs(reference, batch, 1.0, false).first,
                                      batch.advantages, batch.response_mask, 0.2, 0.2, 3.0, cfg.loss_agg_mode)
                      .pg_loss.item<double>();
  }
  PPOActor single(reference, cfg, 1.0, kFsdpRolloutN, 10);
  const double single_norm = metric(single.update_policy(batch, 0, 0), "actor/grad_norm");
  const double norm = metric(metrics, "actor/grad_norm");

  std::ofstream(db + ".result.rank" + std::to_string(r))
      << fmt::format("{:.9g} {:.9g} {:.9g} {:.9g} {:.9g} {} {} {} {} {} {}\n",
                     max_shard_diff(zero->named_shards(), *reference, sharded, r), before_diff,
                     std::abs(loss.item<double>() - single_loss), std::abs(norm - single_norm) / single_norm,
                     single_norm, zero->module_parameter_bytes(), zero->shard_bytes(), zero->peak_full_bytes(),
                     zero->root_unit_bytes(), zero->largest_layer_unit_bytes(), zero->full_bytes());
  groups.world()->barrier();
  recorder.end_run(hs::probes::RunStatus::kCompleted);
  return 0;
}

}  // namespace hs::trainer::test
