// trainer_start.cpp — what PPOTrainer's fit() does before the first step (resume from a checkpoint
// or warm up, set up the reference policy and the critic, validate before training) and the
// checkpoints it writes (trainer_state.h; the loop itself is trainer.cpp).
#include "loop/trainer_state.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/torch.h>

#include "loop/console.h"
#include "loop/out_of_memory.h"
#include "hybridscope/trainer/data/batch.h"
#include "hybridscope/trainer/loop/checkpoint.h"
#include "hybridscope/trainer/data/dataset.h"
#include "hybridscope/trainer/model/device.h"
#include "hybridscope/trainer/dist/topology.h"
#include "hybridscope/trainer/hybrid/hybrid_actor.h"
#include "hybridscope/trainer/dist/mesh_groups.h"
#include "hybridscope/trainer/model/training_shard.h"
#include "hybridscope/trainer/dist/zero.h"
#include "hybridscope/trainer/hybrid/offload.h"
#include "hybridscope/trainer/loop/rollout_phase.h"
#include "hybridscope/trainer/loop/rollout_server.h"
#include "hybridscope/trainer/loop/run_recording.h"
#include "hybridscope/trainer/memory/memory_probe.h"
#include "hybridscope/trainer/rl/metrics.h"
#include "hybridscope/trainer/rl/ppo_workers.h"
#include "hybridscope/trainer/rl/sft.h"
#include "hybridscope/trainer/data/text_setup.h"
#include "hybridscope/trainer/data/tokenizer.h"
#include "loop/random_streams.h"

namespace hs::trainer {

namespace {

void copy_backbone(Transformer& from, Transformer& to) {
  // Same backbone names; the critic's score head keeps its fresh initialisation.
  torch::NoGradGuard no_grad;
  auto source = from->named_parameters();
  for (auto& item : to->named_parameters()) {
    if (const auto* p = source.find(item.key())) item.value().copy_(*p);
  }
}

}  // namespace

std::string rollout_placement(const Config& cfg, const Topology& topology) {
  if (!topology.split_rollout()) return "";
  return fmt::format("rollout ranks [{}], async_mode {}", fmt::join(topology.rollout_ranks, ","),
                     to_string(cfg.hybridscope.async_mode));
}

void PPOTrainer::State::save(std::int64_t step) {
  TrainerState state;
  state.global_step = step;
  state.data = loader->state();
  state.kl_coef = kl_ctrl ? kl_ctrl->value() : 0.0;
  state.seed = cfg.hybridscope.seed;
  state.param_version = param_version;
  state.rollout_placement = rollout_placement(cfg, topology);
  if (pool_weights) state.rollout_version = pool_weights_version;
  CheckpointParts parts{&actor->model, &actor->worker->optimizer().adamw(), critic ? &critic->model() : nullptr,
                        critic ? &critic->optimizer().adamw() : nullptr, pool_weights ? &pool_weights : nullptr};
  const bool lead = topology.actor_rank == 0;
  if (!topology.sharded()) {
    if (lead) save_checkpoint(checkpoint_root, state, parts);  // replicas are identical: one copy
    pool_weights = Transformer{nullptr};
    return;
  }
  // Every actor rank writes its piece into the staging directory; the lead renames it into place.
  if (lead) begin_checkpoint(checkpoint_root, step);
  topology.parallel.world->barrier();
  save_actor_shard(checkpoint_staging_dir(checkpoint_root, step), actor_shard());
  topology.parallel.world->barrier();
  parts.actor = nullptr;
  if (lead) commit_checkpoint(checkpoint_root, state, parts);
  pool_weights = Transformer{nullptr};
}

ActorShard PPOTrainer::State::actor_shard() {
  ActorShard shard;
  shard.rank = topology.actor_rank;
  shard.mesh = topology.mesh;
  shard.sharding = topology.dp_sharding;
  shard.shape = actor->model->shape();
  Optimizer& optimizer = actor->worker->optimizer();
  if (ZeroShards* zero = optimizer.zero_shards()) {
    shard.pieces = zero->named_shards();  // fsdp: this rank's dp row blocks of its tp/pp slices
  } else {
    for (const auto& item : actor->model->named_parameters()) shard.pieces.emplace_back(item.key(), item.value());
  }
  shard.optim = &optimizer.adamw();
  return shard;
}

void PPOTrainer::State::prepare(FitSummary& summary) {
  const bool lead = topology.rank() == 0;  // prints and writes the shared files
  probes::StepTimings& timings = recording->timings();
  recording->begin_step(0);
  // Resume or warm up.
  std::optional<std::string> resume_dir;
  if (cfg.trainer.resume_mode == ResumeMode::kAuto) resume_dir = find_latest_checkpoint(checkpoint_root);
  const std::string base_dir = (std::filesystem::path(checkpoint_root) / "base").string();
  const bool warmup_configured = cfg.actor_rollout_ref.model.path.empty() && cfg.hybridscope.warmup.steps > 0;
  if (resume_dir && topology.split())
    throw ConfigError(fmt::format("found checkpoint {}, but a split reference (hybridscope.placement.ref) cannot resume "
                                  "yet: its ranks would take the resumed actor's weights, not the policy the run started "
                                  "from; set trainer.resume_mode=disable or move the checkpoint directory",
                                  *resume_dir));
  // What the checkpoint says of the run it came from; a split rollout pool hears it before the
  // base weights (share_pool_start: resumed, or refused when the placement changed).
  std::optional<TrainerState> saved;
  std::string refusal;
  if (resume_dir) {
    saved = load_trainer_state(*resume_dir);
    const std::string now = rollout_placement(cfg, topology);
    if (saved->rollout_placement != now)
      refusal = fmt::format(
          "checkpoint {} was saved by a run with {}, this run has {}: a changed split rollout placement or async_mode "
          "cannot resume (the pool's shares, seeds and weight syncs, and one_step_off's batch generated ahead, belong "
          "to the run that saved it). Resume with the hybridscope.placement.rollout and hybridscope.async_mode it was "
          "saved with, or start a new run from its weights: trainer.resume_mode=disable "
          "actor_rollout_ref.model.path={}/actor",
          *resume_dir,
          saved->rollout_placement.empty() ? "the actor generating (colocated, or saved before split runs could resume)"
                                           : saved->rollout_placement,
          now.empty() ? "the actor generating (colocated)" : now, *resume_dir);
    const auto generating = std::filesystem::path(*resume_dir) / "rollout" / "model.safetensors";
    if (refusal.empty() && cfg.hybridscope.async_mode == AsyncMode::kOneStepOff && topology.split_rollout() &&
        (saved->rollout_version < 0 || !std::filesystem::exists(generating)))
      refusal = fmt::format("checkpoint {} has no rollout weights ({}, trainer_state.json's rollout_version): a "
                            "one_step_off run cannot generate the batch that was generated ahead of it again; start a "
                            "new run from its weights: trainer.resume_mode=disable actor_rollout_ref.model.path={}/actor",
                            *resume_dir, generating.string(), *resume_dir);
  }
  if (topology.split_rollout()) {
    PoolStart start;
    if (!refusal.empty()) {
      start.kind = PoolStart::Kind::kRefused;
    } else if (saved) {
      start.kind = PoolStart::Kind::kResumed;
      start.step = saved->global_step;
      start.data = saved->data;
      start.param_version = saved->param_version;
      start.rollout_version = saved->rollout_version;
    }
    share_pool_start(topology, start);
  }
  if (!refusal.empty()) throw ConfigError(refusal);
  // The warm-up trains the whole model (on every rank alike); a sharded actor takes its shard after.
  Transformer& whole = actor->whole();
  Transformer& actor_model = actor->model;
  if (resume_dir) {
    HS_PROBE_RANGE(timings, "load_checkpoint", kCheckpoint);
    // The reference is the policy the run started from, not the resumed actor.
    if (cfg.use_reference()) {
      if (warmup_configured) {  // a sharded actor's reference reads its own slices
        ref_model = load_pretrained(base_dir, HeadKind::kLm, topology.sharded() ? topology.parallel : ParallelContext{});
        ref_model->to(topology.device);
      } else if (!topology.sharded()) {
        ref_model = Transformer(actor_model->shape(), HeadKind::kLm);
        ref_model->to(topology.device);
        copy_backbone(actor_model, ref_model);
      }  // sharded: built below from the initial weights, as in a fresh run
    }
    // A sharded actor loads its own piece after take_shard() below.
    CheckpointParts parts{topology.sharded() ? nullptr : &actor_model, &actor->worker->optimizer().adamw(),
                          critic ? &critic->model() : nullptr, critic ? &critic->optimizer().adamw() : nullptr};
    const TrainerState state = load_checkpoint(*resume_dir, parts);
    global_step = state.global_step;
    param_version = state.param_version;
    recording->set_step(global_step);
    loader->set_state(state.data);
    if (kl_ctrl) kl_ctrl->set_value(state.kl_coef);
    summary.checkpoint_dir = *resume_dir;
    fmt::print("resumed from {} (step {})\n", *resume_dir, global_step);
  } else if (warmup_configured) {
    HS_PROBE_RANGE(timings, "warmup", kSetup);
    const auto start = probes::now_ns();
    detail::Progress bar("warm-up", cfg.hybridscope.warmup.steps, opts.show_progress && lead);
    const int every = std::max(1, cfg.hybridscope.warmup.steps / 5);
    const RLDataset warmup_data = cfg.hybridscope.warmup.files.empty()
                                      ? train_data
                                      : RLDataset::load(cfg.hybridscope.warmup.files, *tokenizer, cfg.data,
                                                        chat_template ? &*chat_template : nullptr);
    const double loss = supervised_warmup(
        whole, warmup_data, *tokenizer, cfg.hybridscope.warmup, cfg.hybridscope.seed,
        [&](int done, int total, double l) {
          bar.update(done, fmt::format("loss {:.3f}", l));
          if (lead && (done % every == 0 || done == total))
            bar.println(fmt::format("warm-up {}/{} loss {:.4f}", done, total, l));
        });
    bar.finish();
    summary.warmup_seconds = static_cast<double>(probes::now_ns() - start) * 1e-9;
    if (lead) {
      std::filesystem::create_directories(base_dir);
      save_pretrained(whole, base_dir);
    }
    topology.parallel.world->barrier();
    if (lead)
      fmt::print("warm-up: {} steps in {}, final loss {:.4f}; base policy saved to {}\n", cfg.hybridscope.warmup.steps,
                 detail::format_duration(summary.warmup_seconds), loss, base_dir);
  }
  // Replicas start identical (a model read in slices is: every rank read the same file).
  if (topology.world() > 1 && !actor->in_layout()) broadcast_parameters(*topology.global_world, *whole);
  actor->take_shard();
  if (resume_dir && topology.sharded()) load_actor_shard(*resume_dir, actor_shard());
  // Reference policy and critic start from the (possibly warmed-up) actor, in its layout (split:
  // the reference ranks took the same weights in the broadcast above).
  if (cfg.use_reference() && !topology.split()) {
    if (!ref_model && actor->in_layout()) {  // the reference reads its slices of the same checkpoint
      ref_model = load_pretrained(cfg.actor_rollout_ref.model.path, HeadKind::kLm, topology.parallel);
      ref_model->to(topology.device);
    } else if (!ref_model) {
      const bool sharded = static_cast<bool>(actor->full);
      ref_model = Transformer(actor_model->shape(), HeadKind::kLm, sharded ? topology.parallel : ParallelContext{});
      ref_model->to(topology.device);
      if (sharded) {
        copy_training_shard(*actor->full, *ref_model, actor->module_layout, topology.actor_rank);
      } else {
        copy_backbone(actor_model, ref_model);
      }
    }
    ref_model->eval();
    for (auto& p : ref_model->parameters()) p.set_requires_grad(false);
    if (cfg.actor_rollout_ref.ref.fsdp_config.param_offload) ref_offload.offload(ref_model->parameters());
  }
  if (critic && !resume_dir && cfg.critic.model.path.empty()) copy_backbone(actor_model, critic->model());
  if (topology.world() > 1 && critic) broadcast_parameters(*topology.global_world, *critic->model());
  apply_compute_options();  // the reference (and a resumed or loaded model) is new
  actor->release_full();    // from here on each rank holds only its shard
  if (topology.split() || topology.split_rollout()) {  // the other pool's ranks start at the same step
    auto start = torch::full({1}, global_step, torch::kInt64);
    topology.global_world->broadcast(start, 0);
  }
  if (saved && saved->rollout_version >= 0) {
    // one_step_off: the pool generates the batch after the checkpoint's step with the weights it
    // was generated with in the run that saved it (one update older than the resumed actor's).
    HS_PROBE_RANGE(timings, "sync_rollout_weights", kSwitch);
    Transformer generating{nullptr};
    if (topology.actor_rank == 0) {
      generating = Transformer(actor_model->shape(), HeadKind::kLm);
      load_weights_into(generating, (std::filesystem::path(*resume_dir) / "rollout" / "model.safetensors").string());
      generating->to(topology.device);
    }
    std::int64_t version = saved->rollout_version;
    const std::int64_t bucket_bytes =
        static_cast<std::int64_t>(cfg.actor_rollout_ref.rollout.update_weights_bucket_megabytes) << 20;
    sync_rollout_weights(topology, generating ? generating : actor_model, version, bucket_bytes, global_step,
                         recording->probes().recorder());
  }

  if (cfg.trainer.val_before_train) {
    HS_PROBE_RANGE(timings, "testing", kValidation);
    HS_PHASE_MARK("testing");
    summary.val_before = validate(nullptr);
    if (lead)
      fmt::print("validation before training (step {}): mean@1 = {:.3f} on {} prompts\n", global_step,
                 summary.val_before, val_data.size());
    recording->recorder().record_metrics(global_step, {{"val/mean@1", summary.val_before}});
  }
  recording->flush();
}

}  // namespace hs::trainer
