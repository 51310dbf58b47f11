// trainer.cpp — the PPO/GRPO loop: verl's RayPPOTrainer.fit, one process per rank.
//
// The constructor wires the owners (each in its own file): the topology (ranks, placement, process
// groups), this rank's run recording and probes, the data, the hybrid actor (its layouts, rollout
// model, reshard and switch), the other roles (reference, critic, reward, KL controller) and the
// rollout phase. What stays here reads as verl's fit(): prepare (resume or warm up, validate; in
// trainer_start.cpp with the checkpoints), then one step after another — switch to rollout, generate, switch back, reward, old log-probs,
// reference, values, advantage, critic and actor updates, validation and checkpoints — with the
// step's metrics reduced over the ranks and recorded.
//
// Randomness: every random stream is derived from (hybridscope.seed, global step, rank)
// (random_streams.h), so a resumed run draws what the uninterrupted run drew.
//
// Data parallel (world > 1): every rank reads the same global batch and keeps its share of the
// prompts; it scores and computes advantages for its share only (a GRPO group never leaves its
// rank), and the optimizer sums the gradients over dp with global loss weights, so the update
// equals the single-process one on the same samples. Metrics are reduced over the world; rank 0
// prints, writes checkpoints, and merges the ranks' run files into the run database at the end.
#include "hybridscope/trainer/loop/trainer.h"

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <stdexcept>

#include <fmt/format.h>
#include <torch/torch.h>

#include "loop/console.h"
#include "loop/out_of_memory.h"
#include "hybridscope/probes/merge.h"
#include "hybridscope/probes/palm_flops.h"
#include "hybridscope/trainer/data/batch.h"
#include "hybridscope/trainer/loop/checkpoint.h"
#include "hybridscope/trainer/loop/fully_async.h"
#include "hybridscope/trainer/rl/core_algos.h"
#include "hybridscope/trainer/memory/cpu_heap.h"
#include "hybridscope/trainer/memory/cpu_memory_tracker.h"
#include "hybridscope/trainer/data/dataset.h"
#include "hybridscope/trainer/model/device.h"
#include "hybridscope/trainer/dist/topology.h"
#include "hybridscope/trainer/hybrid/hybrid_actor.h"
#include "hybridscope/trainer/dist/zero.h"
#include "hybridscope/trainer/hybrid/offload.h"
#include "hybridscope/trainer/loop/reference_server.h"
#include "hybridscope/trainer/loop/rollout_phase.h"
#include "hybridscope/trainer/loop/rollout_server.h"
#include "hybridscope/trainer/loop/run_recording.h"
#include "hybridscope/trainer/memory/memory_probe.h"
#include "hybridscope/trainer/dist/mesh_groups.h"
#include "hybridscope/trainer/model/training_shard.h"
#include "hybridscope/trainer/rl/metrics.h"
#include "hybridscope/trainer/rl/pipeline.h"
#include "hybridscope/trainer/rl/ppo_workers.h"
#include "hybridscope/trainer/rl/advantage.h"
#include "hybridscope/trainer/rl/rollout_correction.h"
#include "hybridscope/trainer/rl/sft.h"
#include "hybridscope/trainer/data/text_setup.h"
#include "hybridscope/trainer/data/tokenizer.h"
#include "loop/random_streams.h"
#include "loop/trainer_state.h"

namespace hs::trainer {

namespace {

using detail::kActorShuffleStream;
using detail::kInitStream;
using detail::kRolloutStream;
using detail::rank_stream_seed;
using detail::stream_seed;

// PaLM's / torchtitan's training FLOPs (probes/palm_flops.h) over the sequences verl's
// estimate_flops counts: the second MFU convention, recorded as perf/mfu/actor_palm.
double palm_flops(const ModelShape& s, const std::vector<std::int64_t>& lengths) {
  const probes::DecoderShape shape{static_cast<double>(s.vocab_size),          static_cast<double>(s.hidden_size),
                                   static_cast<double>(s.intermediate_size),   static_cast<double>(s.num_hidden_layers),
                                   static_cast<double>(s.num_attention_heads), static_cast<double>(s.num_key_value_heads),
                                   static_cast<double>(s.head_dim())};
  return probes::palm_training_flops(shape, lengths);
}

std::atomic<int> g_stop_signal{0};
extern "C" void on_stop_signal(int signal) { g_stop_signal.store(signal); }

Transformer make_model(const ModelShape& shape, HeadKind head, std::uint64_t seed) {
  torch::manual_seed(seed);
  return Transformer(shape, head);
}

double find(const Metrics& metrics, const std::string& name, double fallback = 0.0) {
  for (const auto& [n, v] : metrics)
    if (n == name) return v;
  return fallback;
}

// hybridscope's precision, attention, CPU products and decode kernel as every model's ComputeOptions
// (forward_cached's decode steps alone read paged_decode).
ComputeOptions configured_compute(const HybridscopeSection& h) {
  ComputeOptions options = compute_options(h.precision, h.attention, h.cpu_matmul);
  options.paged_decode = h.decode.paged_kernel;
  return options;
}

}  // namespace

void PPOTrainer::State::apply_compute_options() {
  // The optimizers' compute option too (hybridscope.fused_adamw).
  if (actor) actor->worker->optimizer().set_fused(cfg.hybridscope.fused_adamw);
  if (critic) critic->optimizer().set_fused(cfg.hybridscope.fused_adamw);
  const ComputeOptions options = configured_compute(cfg.hybridscope);
  std::vector<Transformer*> models{&ref_model};
  if (actor) {
    models.insert(models.end(), {&actor->model, &actor->full, &actor->rollout_model});
  }
  if (rollout) models.push_back(&rollout->reward_model());
  // use_remove_padding packs the training forwards (log-probs, reference, update) of the actor's
  // and the reference's models and, with critic.model's key, the critic's; generation and the
  // reward model are untouched.
  ComputeOptions packed = options;
  packed.remove_padding = cfg.actor_rollout_ref.model.use_remove_padding;
  for (Transformer* model : models) {
    const bool trains = model == &ref_model || (actor && (model == &actor->model || model == &actor->full));
    if (*model) (*model)->set_compute(trains ? packed : options);
  }
  if (critic) {
    ComputeOptions critic_options = options;
    critic_options.remove_padding = cfg.critic.model.use_remove_padding;
    critic->model()->set_compute(critic_options);
  }
  // enable_gradient_checkpointing: the models that train (the actor's modules, and the whole model
  // the warm-up trains; the critic).
  if (actor) {
    for (Transformer* model : {&actor->model, &actor->full})
      if (*model) (*model)->set_gradient_checkpointing(cfg.actor_rollout_ref.model.enable_gradient_checkpointing);
  }
  if (critic) critic->model()->set_gradient_checkpointing(cfg.critic.model.enable_gradient_checkpointing);
}

PPOTrainer::PPOTrainer(Config config, TrainerOptions options) : state_(std::make_unique<State>()) {
  auto& s = *state_;
  s.cfg = std::move(config);
  s.opts = std::move(options);
  hs::trainer::validate(s.cfg);  // exactly what `hybridscope config` and `matrix plan` refuse
  const auto& cfg = s.cfg;
  torch::set_num_threads(cfg.hybridscope.num_threads);

  s.topology = Topology::connect(cfg);
  if (s.topology.rank() == 0) {
    for (const auto& line : substitutions(cfg)) fmt::print("note: {}\n", line);
  }
  s.recording = std::make_unique<RunRecording>(cfg, s.topology);
  s.topology.open_groups(cfg, s.recording->probes());
  const bool probe = s.recording->probes().on();

  TextSetup text = make_text_setup(cfg);
  s.tokenizer = std::move(text.tokenizer);
  s.chat_template = std::move(text.chat_template);
  const ChatTemplate* chat = s.chat_template ? &*s.chat_template : nullptr;
  s.train_data = RLDataset::load(cfg.data.train_files, *s.tokenizer, cfg.data, chat);
  s.val_data = RLDataset::load(cfg.data.val_files, *s.tokenizer, cfg.data, chat);
  if (cfg.data.filter_overlong_prompts && s.topology.rank() == 0) {
    fmt::print("data.filter_overlong_prompts: dropped {} of {} training and {} of {} validation prompts longer than "
               "{} tokens\n", s.train_data.filtered(), s.train_data.filtered() + s.train_data.size(),
               s.val_data.filtered(), s.val_data.filtered() + s.val_data.size(), cfg.data.max_prompt_length);
  }
  // Dynamic sampling draws data.gen_batch_size prompts per generation round (verl's DAPO loader).
  const int draw = cfg.algorithm.filter_groups.enable && cfg.data.gen_batch_size > 0 ? cfg.data.gen_batch_size
                                                                                      : cfg.data.train_batch_size;
  s.loader = std::make_unique<DataLoader>(s.train_data.size(), static_cast<std::size_t>(draw), cfg.data.shuffle,
                                          static_cast<std::uint64_t>(cfg.data.seed));
  s.total_steps = cfg.trainer.total_training_steps > 0
                      ? cfg.trainer.total_training_steps
                      : static_cast<std::int64_t>(s.loader->batches_per_epoch()) * cfg.trainer.total_epochs;

  ModelShape shape = cfg.hybridscope.model;
  if (shape.vocab_size <= 0) shape.vocab_size = s.tokenizer->vocab_size();  // validate() refused a smaller one
  const auto seed = cfg.hybridscope.seed;
  const auto& model_path = cfg.actor_rollout_ref.model.path;
  // Every rank builds the whole model, then keeps its training shard; from a checkpoint, an actor
  // rank of a tp/pp mesh reads only its own slices (load_pretrained over its groups).
  const bool sliced = !model_path.empty() && !s.topology.serves_ref() && (s.topology.mesh.tp > 1 || s.topology.mesh.pp > 1);
  Transformer full = model_path.empty() ? make_model(shape, HeadKind::kLm, stream_seed(seed, 0, kInitStream))
                     : sliced           ? load_pretrained(model_path, HeadKind::kLm, s.topology.parallel)
                                        : load_pretrained(model_path, HeadKind::kLm);
  full->to(s.topology.device);  // every model is built (or loaded) on the CPU, then lives on the device
  if (full->shape().vocab_size < s.tokenizer->vocab_size()) {
    throw ConfigError(fmt::format("the model's vocabulary ({} ids{}) is smaller than the {} tokenizer's ({}): use the "
                                  "model's own tokenizer, or raise hybridscope.model.vocab_size",
                                  full->shape().vocab_size, model_path.empty() ? "" : ", " + model_path,
                                  s.tokenizer->name(), s.tokenizer->vocab_size()));
  }
  if (!model_path.empty() &&
      cfg.data.max_prompt_length + cfg.data.max_response_length > full->shape().max_position_embeddings) {
    throw ConfigError(fmt::format("data.max_prompt_length + data.max_response_length = {} exceeds the max_position_embeddings "
                                  "({}) of {}: shorten them", cfg.data.max_prompt_length + cfg.data.max_response_length,
                                  full->shape().max_position_embeddings, model_path));
  }
  if (s.topology.serves_ref()) {
    // A rank of a split reference: it holds the whole reference policy (replicated over its pool)
    // and serves the actor's ref phase (reference_server.h).
    s.ref_model = full;
    s.apply_compute_options();
    if (probe) install_cpu_memory_tracker();
    return;
  }
  if (s.topology.serves_rollout()) {
    // A rank of a split rollout pool: the whole model, generating the actor's batches with the
    // weights the syncs bring (rollout_server.h).
    s.served_rollout_model = full;
    full->set_compute(configured_compute(cfg.hybridscope));
    if (probe) install_cpu_memory_tracker();
    return;
  }
  // The other roles first: each model draws its initial weights from a stream of its own.
  if (cfg.use_critic()) {
    Transformer critic_model = cfg.critic.model.path.empty()
                                   ? make_model(full->shape(), HeadKind::kValue, stream_seed(seed, 0, kInitStream) + 1)
                                   : load_pretrained(cfg.critic.model.path, HeadKind::kValue);
    critic_model->to(s.topology.device);  // before its optimizer takes the parameters
    s.critic = std::make_unique<PPOCritic>(critic_model, cfg.critic, cfg.actor_rollout_ref.rollout.n, s.total_steps,
                                           s.topology.parallel);
  }
  Transformer reward_model{nullptr};
  if (cfg.reward_model.enable) {
    reward_model = cfg.reward_model.model.path.empty()
                       ? make_model(full->shape(), HeadKind::kValue, stream_seed(seed, 0, kInitStream) + 2)
                       : load_pretrained(cfg.reward_model.model.path, HeadKind::kValue);
    reward_model->to(s.topology.device);
    reward_model->eval();
  }
  if (cfg.algorithm.use_kl_in_reward) s.kl_ctrl = make_kl_controller(cfg.algorithm.kl_ctrl);
  s.actor = std::make_unique<HybridActor>(cfg, s.topology, full, *s.tokenizer, s.total_steps, s.recording->probes());
  s.rollout = std::make_unique<RolloutPhase>(cfg, s.topology, *s.actor, *s.tokenizer, reward_model, *s.recording);
  s.actor_param_bytes = actor_param_metrics(s.actor->training_layout);
  s.checkpoint_root = cfg.trainer.default_local_dir;
  if (probe) install_cpu_memory_tracker();
  s.apply_compute_options();
  s.peak_flops = cfg.hybridscope.peak_flops > 0 ? cfg.hybridscope.peak_flops : device_peak_flops(s.topology.device);
}

PPOTrainer::~PPOTrainer() {
  if (!state_ || !state_->stepping) return;
  try {
    state_->recording->end(probes::RunStatus::kCompleted);
  } catch (const std::exception&) {
    // A destructor cannot report it; the run stays 'running' and is marked killed when the
    // database is next opened.
  }
}

Metrics PPOTrainer::State::step() {
  const auto& arr = cfg.actor_rollout_ref;
  const std::int64_t step = global_step;
  probes::StepTimings& timings = recording->timings();
  HybridSwitch& hybrid_switch = *actor->hybrid_switch;
  Metrics metrics;
  RolloutBatch batch;
  {
    HS_PROBE_RANGE(timings, "step", kStep);
    // Every rank draws the same global batch; generation replicas generate their shares, every
    // rank gets the responses of its dp rank's prompts for training.
    const int n = arr.rollout.n;
    const FilterGroupsConfig& filter = cfg.algorithm.filter_groups;
    std::vector<const Example*> examples;
    std::vector<std::size_t> mine;
    Rollouts generated;
    // Generation round `round` of this step: round 0 draws the step's seed, DAPO's extra rounds others.
    auto generate_round = [&](int round, const std::vector<const Example*>& prompts) {
      return rollout->generate_all(prompts, arr.rollout.sampling(), [&](int replica_index) {
        const auto base = rank_stream_seed(cfg.hybridscope.seed, step, kRolloutStream, replica_index);
        return round == 0 ? base : stream_seed(base, round, kRolloutStream);
      });
    };
    auto draw = [&] {
      std::vector<const Example*> prompts;
      for (const auto index : loader->next_batch()) prompts.push_back(&train_data[index]);
      return prompts;
    };
    if (topology.split_rollout()) {
      generated = receive_split_rollout(examples, draw, metrics);
    } else {
      {
        HS_PROBE_RANGE(timings, "switch/train_to_rollout", kSwitch);
        HS_PHASE_MARK("switch/train_to_rollout");
        hybrid_switch.to_rollout(step);
      }
      sample("switch/train_to_rollout");
      HS_PROBE_RANGE(timings, "gen", kPhase);
      HS_PHASE_MARK("gen");
      examples = draw();
      generated = generate_round(0, examples);
      if (filter.enable) keep_varied_groups(examples, generated);
    }
    if (filter.enable) {
      // DAPO's dynamic sampling: more rounds until train_batch_size prompts with varied scores are
      // kept, timed as their own phase (what dynamic sampling costs), then the first ones taken.
      int rounds = 1;
      const auto wanted = static_cast<std::size_t>(cfg.data.train_batch_size);
      while (examples.size() < wanted) {
        if (filter.max_num_gen_batches > 0 && rounds >= filter.max_num_gen_batches)
          throw std::runtime_error(fmt::format(
              "dynamic sampling: {} generation rounds kept {} of the {} prompts data.train_batch_size asks for "
              "(algorithm.filter_groups.max_num_gen_batches = {}): the prompts are too easy or too hard for the "
              "policy; raise max_num_gen_batches (0 = no limit) or data.gen_batch_size",
              rounds, examples.size(), wanted, filter.max_num_gen_batches));
        HS_PROBE_RANGE(timings, "gen_extra", kPhase);
        HS_PHASE_MARK("gen_extra");
        std::vector<const Example*> more = draw();
        Rollouts extra = generate_round(rounds++, more);
        keep_varied_groups(more, extra);
        examples.insert(examples.end(), more.begin(), more.end());
        for (auto& r : extra.responses) generated.responses.push_back(std::move(r));
        for (auto& l : extra.log_probs) generated.log_probs.push_back(std::move(l));
      }
      examples.resize(wanted);
      generated.responses.resize(wanted * static_cast<std::size_t>(n));
      generated.log_probs.resize(generated.responses.size());
      metrics.emplace_back("train/num_gen_batches", rounds);
    }
    mine = rollout->training_prompts(examples, generated.responses, n);
    batch = rollout->make_batch(examples, mine, generated.responses, n, &generated.log_probs);
    const Metrics balance = rollout->seqlen_balance(examples, generated.responses, n);  // outside 'gen': may all_reduce
    metrics.insert(metrics.end(), balance.begin(), balance.end());
    if (cfg.algorithm.adv_estimator == AdvEstimator::kRemax) {
      HS_PROBE_RANGE(timings, "gen_max", kPhase);
      HS_PHASE_MARK("gen_max");
      SamplingParams greedy = arr.rollout.sampling();
      greedy.do_sample = false;
      const RolloutBatch baseline = rollout->make_batch(
          examples, mine, rollout->generate_all(examples, greedy, [](int) { return std::uint64_t{0}; }).responses, n);
      batch.reward_baselines = rollout->score(baseline).sum(-1);
    }
    if (!topology.split_rollout()) {
      {
        HS_PROBE_RANGE(timings, "switch/rollout_to_train", kSwitch);
        HS_PHASE_MARK("switch/rollout_to_train");
        hybrid_switch.to_train(step);
      }
      sample("switch/rollout_to_train");
    }
    {
      HS_PROBE_RANGE(timings, "reward", kPhase);
      HS_PHASE_MARK("reward");
      batch.token_level_scores = rollout->score(batch);
    }
    {
      HS_PROBE_RANGE(timings, "old_log_prob", kPhase);
      HS_PHASE_MARK("old_log_prob");
      batch.old_log_probs = actor->worker->compute_log_prob(batch, arr.log_prob_micro_batch(arr.rollout.log_prob_micro_batch_size_per_gpu));
    }
    sample("old_log_prob");
    if (batch.rollout_log_probs.defined()) {
      // The rollout/training mismatch of this step, and verl's rollout correction when configured
      // (rollout_correction.h): IS weights for the policy loss, rejected tokens out of the mask.
      const auto old_lp = batch.old_log_probs.to(torch::kCPU, torch::kFloat32);
      const auto mask = batch.response_mask.to(torch::kFloat32);
      const Metrics mismatch = rollout_mismatch_metrics(old_lp, batch.rollout_log_probs, mask);
      metrics.insert(metrics.end(), mismatch.begin(), mismatch.end());
      if (cfg.algorithm.rollout_correction.enabled()) {
        RolloutCorrection corrected =
            compute_rollout_correction(old_lp, batch.rollout_log_probs, mask, cfg.algorithm.rollout_correction);
        metrics.insert(metrics.end(), corrected.metrics.begin(), corrected.metrics.end());
        batch.response_mask = corrected.response_mask.to(batch.response_mask.dtype());
        batch.rollout_is_weights = corrected.is_weights;
      }
    }
    if (cfg.use_reference()) {
      HS_PROBE_RANGE(timings, "ref", kPhase);
      HS_PHASE_MARK("ref");
      torch::NoGradGuard no_grad;
      if (topology.split()) {
        batch.ref_log_probs = remote_ref_log_probs(topology, batch);
      } else {
        const std::int64_t onloaded = ref_offload.onload();
        batch.ref_log_probs = micro_batched_log_probs(ref_model, batch, arr.log_prob_micro_batch(arr.ref.log_prob_micro_batch_size_per_gpu),
                                                      arr.rollout.temperature);
        if (arr.ref.fsdp_config.param_offload) {
          ref_offload.offload(ref_model->parameters());
          metrics.emplace_back("perf/ref_offload_bytes", static_cast<double>(onloaded));
        }
      }
    }
    if (critic) {
      HS_PROBE_RANGE(timings, "values", kPhase);
      HS_PHASE_MARK("values");
      batch.values = critic->compute_values(batch, cfg.critic.ppo_micro_batch_size_per_gpu);
    }
    {
      HS_PROBE_RANGE(timings, "adv", kPhase);
      HS_PHASE_MARK("adv");
      if (cfg.algorithm.use_kl_in_reward) {
        const auto kl = apply_kl_penalty(batch.token_level_scores, batch.old_log_probs, batch.ref_log_probs,
                                         batch.response_mask, *kl_ctrl, cfg.algorithm.kl_penalty);
        batch.token_level_rewards = kl.token_level_rewards;
        metrics.emplace_back("actor/reward_kl_penalty", kl.current_kl);
        metrics.emplace_back("actor/reward_kl_penalty_coeff", kl_ctrl->value());
      } else {
        batch.token_level_rewards = batch.token_level_scores;
      }
      const AdvantageReturn adv = compute_advantage(batch, cfg.algorithm);
      batch.advantages = adv.advantages;
      batch.returns = adv.returns;
    }
    if (critic) {
      HS_PROBE_RANGE(timings, "update_critic", kPhase);
      HS_PHASE_MARK("update_critic");
      const auto critic_metrics = critic->update_critic(batch, step - 1);
      metrics.insert(metrics.end(), critic_metrics.begin(), critic_metrics.end());
    }
    if (critic) sample("update_critic");
    const bool saves = cfg.trainer.save_freq > 0 && (step % cfg.trainer.save_freq == 0 || step == total_steps);
    if (saves && cfg.hybridscope.async_mode == AsyncMode::kOneStepOff && topology.actor_rank == 0) {
      // The rollout pool generates the next batch with these weights (synced this step, or the
      // initial ones): the checkpoint carries them (trainer_state.h, pool_weights).
      torch::NoGradGuard no_grad;
      pool_weights = Transformer(actor->model->shape(), HeadKind::kLm);
      auto live = actor->model->named_parameters();
      for (auto& item : pool_weights->named_parameters()) item.value().copy_(live[item.key()]);
      pool_weights_version = param_version;
    }
    if (step > cfg.trainer.critic_warmup) {
      HS_PROBE_RANGE(timings, "update_actor", kPhase);
      HS_PHASE_MARK("update_actor");
      const auto actor_metrics = actor->worker->update_policy(
          batch, step - 1, rank_stream_seed(cfg.hybridscope.seed, step, kActorShuffleStream, topology.actor_rank));
      metrics.insert(metrics.end(), actor_metrics.begin(), actor_metrics.end());
      ++param_version;
    }
    sample("update_actor");
    const bool last = step == total_steps;
    if (cfg.trainer.test_freq > 0 && (step % cfg.trainer.test_freq == 0 || last)) {
      HS_PROBE_RANGE(timings, "testing", kValidation);
      HS_PHASE_MARK("testing");
      std::map<std::string, double> per_source;
      const double score = validate(&per_source);
      for (const auto& [source, v] : per_source) metrics.emplace_back("val-core/" + source + "/reward/mean@1", v);
      metrics.emplace_back("val/mean@1", score);
    }
    if (saves) {
      HS_PROBE_RANGE(timings, "save_checkpoint", kCheckpoint);
      save(step);
      topology.parallel.world->barrier();  // nobody resumes from a half-written checkpoint
    }
    // The heap's growth over the next steps, faulted in now rather than inside their phases: a CPU
    // rank, at the end of the first step this process runs, as many bytes as that step's peak
    // (cpu_heap.h). Inside the step's range, which every range of a step nests in.
    if (!heap_prefaulted && !topology.device.is_cuda() && cpu_memory_tracker_installed()) {
      heap_prefaulted = true;
      if (const std::int64_t peak = cpu_memory_stats().peak_bytes; peak > 0) {
        HS_PROBE_RANGE(timings, "heap_prefault", kSetup);
        prefault_cpu_heap(peak);
      }
    }
  }
  add_perf_metrics(batch, metrics);
  return reduce_metrics(metrics, *topology.parallel.world, topology.mesh.tp * topology.mesh.pp);
}

void PPOTrainer::State::sync_rollout_pool(Metrics& metrics) {
  // The weights after the last update go to the rollout ranks: the whole actor pool waits for its
  // rank 0's broadcasts (as verl's driver waits for every worker's sync_rollout_weights).
  HS_PROBE_RANGE(recording->timings(), "sync_rollout_weights", kSwitch);
  HS_PHASE_MARK("sync_rollout_weights");
  std::int64_t version = param_version;
  const std::int64_t bucket_bytes =
      static_cast<std::int64_t>(cfg.actor_rollout_ref.rollout.update_weights_bucket_megabytes) << 20;
  const WeightSync moved = sync_rollout_weights(topology, actor->model, version, bucket_bytes, global_step,
                                                recording->probes().recorder());
  topology.parallel.world->barrier();
  metrics.emplace_back("async/sync_bytes", static_cast<double>(moved.bytes));
  metrics.emplace_back("async/sync_buckets", static_cast<double>(moved.buckets));
}

Rollouts PPOTrainer::State::receive_split_rollout(std::vector<const Example*>& examples,
                                                 const std::function<std::vector<const Example*>()>& draw,
                                                 Metrics& metrics) {
  const std::int64_t step = global_step;
  const AsyncMode mode = cfg.hybridscope.async_mode;
  if (mode == AsyncMode::kFullyAsync) return take_queued_rollout(examples, metrics);
  const bool syncs = syncs_weights_at(mode, step, total_steps);
  // sync: before the rollout ranks generate this step's batch; one_step_off: once this step's
  // batch (generated during the last step) is in, before they generate the next one.
  if (mode == AsyncMode::kSync && syncs) sync_rollout_pool(metrics);
  RolloutHandoff handoff;
  {
    // verl's one-step-off trainer times the wait for the previous generation as "gen" too.
    HS_PROBE_RANGE(recording->timings(), "gen", kPhase);
    HS_PHASE_MARK("gen");
    examples = draw();
    handoff = receive_rollouts(topology, examples.size(), cfg.actor_rollout_ref.rollout.n, cfg.data.max_response_length);
  }
  if (mode == AsyncMode::kOneStepOff && syncs) sync_rollout_pool(metrics);
  // Staleness of the trained samples: updates between the weights that generated them and the
  // weights that train on them (each rollout rank's share has one version).
  double sum = 0, most = 0;
  for (const std::int64_t version : handoff.param_versions) {
    const auto lag = static_cast<double>(param_version - version);
    sum += lag;
    most = std::max(most, lag);
  }
  metrics.emplace_back("async/staleness/mean", sum / static_cast<double>(handoff.param_versions.size()));
  metrics.emplace_back("async/staleness/max", most);
  metrics.emplace_back("async/param_version", static_cast<double>(param_version));
  metrics.emplace_back("timing_s/generate_async", handoff.generate_seconds);
  return std::move(handoff.rollouts);
}

Rollouts PPOTrainer::State::take_queued_rollout(std::vector<const Example*>& examples, Metrics& metrics) {
  const FullyAsyncPlan plan = fully_async_plan(cfg, total_steps);
  if (!sample_queue && topology.rank() == 0)
    sample_queue = std::make_unique<SampleQueue>(
        topology.env, std::chrono::milliseconds(static_cast<std::int64_t>(cfg.hybridscope.dist.timeout_s * 1000)));
  // Every trigger_parameter_sync_step updates: ask the rollouter for the sync, then broadcast.
  if (syncs_weights_at(AsyncMode::kFullyAsync, global_step, total_steps, cfg.async_training.trigger_parameter_sync_step)) {
    if (sample_queue) sample_queue->request_sync();
    sync_rollout_pool(metrics);
  }
  FullyAsyncBatch taken;
  {
    // verl's fully-async trainer times the wait for its samples as "gen" (fully_async_trainer.py).
    HS_PROBE_RANGE(recording->timings(), "gen", kPhase);
    HS_PHASE_MARK("gen");
    taken = take_fully_async_batch(topology, sample_queue.get(), plan, global_step, cfg.actor_rollout_ref.rollout.n,
                                   cfg.data.max_response_length);
  }
  examples.clear();
  for (const std::size_t index : taken.prompts) examples.push_back(&train_data[index]);
  // Staleness per prompt group, from the weights it started with (a partial rollout's later tokens
  // are fresher); verl's partial counts: groups whose generation spanned a sync, and the widest span.
  double sum = 0, most = 0, partial = 0, span = 0;
  for (std::size_t g = 0; g < taken.prompts.size(); ++g) {
    const auto lag = static_cast<double>(param_version - taken.version_start[g]);
    sum += lag;
    most = std::max(most, lag);
    const auto spanned = static_cast<double>(taken.version_end[g] - taken.version_start[g]);
    if (spanned > 0) ++partial;
    span = std::max(span, spanned);
  }
  const auto groups = static_cast<double>(taken.prompts.size());
  metrics.emplace_back("async/staleness/mean", sum / groups);
  metrics.emplace_back("async/staleness/max", most);
  metrics.emplace_back("async/param_version", static_cast<double>(param_version));
  metrics.emplace_back("timing_s/generate_async", taken.generate_seconds);
  metrics.emplace_back("fully_async/monitor/queue/mq_queue_size", static_cast<double>(taken.queue_depth));
  metrics.emplace_back("fully_async/partial/total_partial_num", partial);
  metrics.emplace_back("fully_async/partial/partial_ratio", partial / groups);
  metrics.emplace_back("fully_async/partial/max_partial_span", span);
  metrics.emplace_back("fully_async/partial/reprefill_tokens", static_cast<double>(taken.reprefilled_tokens));
  return std::move(taken.rollouts);
}

void PPOTrainer::State::keep_varied_groups(std::vector<const Example*>& prompts, Rollouts& generated) {
  const int n = cfg.actor_rollout_ref.rollout.n;
  std::vector<std::size_t> all(prompts.size());
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
  const bool shaped = cfg.algorithm.filter_groups.metric == FilterGroupsMetric::kSeqReward;
  const auto scores = rollout->score(rollout->make_batch(prompts, all, generated.responses, n), shaped)
                          .sum(-1)
                          .to(torch::kDouble)
                          .contiguous();
  const double* v = scores.data_ptr<double>();
  std::vector<const Example*> kept;
  Rollouts out;
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    const std::size_t first = i * static_cast<std::size_t>(n);
    bool varied = false;
    for (int j = 1; j < n; ++j) varied = varied || v[first + static_cast<std::size_t>(j)] != v[first];
    if (!varied) continue;  // np.std(group) == 0: verl drops it
    kept.push_back(prompts[i]);
    for (int j = 0; j < n; ++j) {
      out.responses.push_back(std::move(generated.responses[first + static_cast<std::size_t>(j)]));
      out.log_probs.push_back(std::move(generated.log_probs[first + static_cast<std::size_t>(j)]));
    }
  }
  prompts = std::move(kept);
  generated = std::move(out);
}

void PPOTrainer::State::add_perf_metrics(const RolloutBatch& batch, Metrics& metrics) {
  const probes::StepTimings& timings = recording->timings();
  const auto data_metrics = compute_data_metrics(batch, critic != nullptr, cfg.data.max_prompt_length,
                                                 cfg.data.max_response_length);
  metrics.insert(metrics.end(), data_metrics.begin(), data_metrics.end());
  const auto timing_metrics = compute_timing_metrics(batch, timings.totals());
  metrics.insert(metrics.end(), timing_metrics.begin(), timing_metrics.end());

  const auto lengths = sequence_lengths(batch);
  double tokens = 0;
  for (auto l : lengths) tokens += static_cast<double>(l);
  const double step_seconds = timings.seconds("step");
  const int world = cfg.world_size();
  metrics.emplace_back("perf/total_num_tokens", tokens);
  if (step_seconds > 0) {  // 0: the ranges are compiled out (HS_ENABLE_PROBES=OFF), nothing was timed
    metrics.emplace_back("perf/time_per_step", step_seconds);
    metrics.emplace_back("perf/throughput", tokens / (step_seconds * world));
  }
  const double actor_seconds = timings.seconds("update_actor");
  if (actor_seconds > 0) {
    metrics.emplace_back("perf/mfu/actor", estimate_flops(actor->model->shape(), lengths) *
                                               cfg.actor_rollout_ref.actor.ppo_epochs / actor_seconds /
                                               (peak_flops * world));
    metrics.emplace_back("perf/mfu/actor_palm", palm_flops(actor->model->shape(), lengths) *
                                                    cfg.actor_rollout_ref.actor.ppo_epochs / actor_seconds /
                                                    (peak_flops * world));
  }
  const double critic_seconds = timings.seconds("update_critic");
  if (critic && critic_seconds > 0)
    metrics.emplace_back("perf/mfu/critic", estimate_flops(critic->model()->shape(), lengths) * cfg.critic.ppo_epochs /
                                                critic_seconds / (peak_flops * world));
  metrics.insert(metrics.end(), actor_param_bytes.begin(), actor_param_bytes.end());
  metrics.emplace_back("perf/cpu_memory_used_gb", cpu_memory_used_gb());
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  if (topology.device.is_cuda()) {
    // The caching allocator's peaks over the step (the switches' peak windows included).
    const DevicePeak peak = take_cuda_peak(topology.memory_device);
    metrics.emplace_back("perf/max_memory_allocated_gb", static_cast<double>(peak.allocated_bytes) / kGiB);
    metrics.emplace_back("perf/max_memory_reserved_gb", static_cast<double>(peak.reserved_bytes) / kGiB);
  } else if (cpu_memory_tracker_installed()) {
    const CpuMemoryStats cpu = cpu_memory_stats();
    metrics.emplace_back("perf/max_memory_allocated_gb", static_cast<double>(cpu.peak_bytes) / kGiB);
    reset_cpu_memory_peak();
  }
  const auto pool = actor->rollout->allocator().stats();
  metrics.emplace_back("rollout/kv_peak_blocks_used", static_cast<double>(pool.peak_blocks_used));
  metrics.emplace_back("rollout/kv_num_blocks", static_cast<double>(pool.num_blocks));
  metrics.emplace_back("training/global_step", static_cast<double>(global_step));
  metrics.emplace_back("training/epoch", static_cast<double>(loader->state().epoch));
}

Metrics PPOTrainer::State::train_step() {
  recording->begin_step(++global_step);
  detail::PhaseMark::clear_failed();
  Metrics metrics;
  try {
    metrics = step();
  } catch (const c10::OutOfMemoryError& e) {
    // The run is marked failed by the caller with this message; its records so far are kept.
    throw TrainingOutOfMemory(detail::out_of_memory_message(cfg, detail::PhaseMark::failed(), global_step,
                                                            topology.memory_device, e.what_without_backtrace()));
  }
  recording->recorder().record_metrics(global_step, metrics);
  recording->flush();
  return metrics;
}

probes::RunInfo PPOTrainer::State::run_info() const {
  probes::RunInfo info;
  info.name = cfg.trainer.project_name + "/" + cfg.trainer.experiment_name;
  info.command_line = opts.command_line;
  info.config_yaml = to_yaml(cfg);
  info.config = config_entries(cfg);
  info.world_size = cfg.world_size();
  info.torch_version = TORCH_VERSION;
  info.local_rank = topology.env.local_rank;
  info.clock_sync_offset_ns = topology.clock_sync.offset_ns;
  info.clock_sync_error_ns = topology.clock_sync.error_ns;
  info.clock_sync_applied = !topology.clock_sync.same_host;
  info.device = to_string(cfg.trainer.device);
  return info;
}

double PPOTrainer::validate() { return state_->validate(nullptr); }

Metrics PPOTrainer::train_step() {
  auto& s = *state_;
  if (s.topology.serves_ref() || s.topology.serves_rollout())
    throw std::logic_error("PPOTrainer::train_step() runs the actor's step; a split reference or rollout rank serves in fit()");
  if (!s.stepping) {
    s.begin_recording();
    s.stepping = true;
    FitSummary unused;
    s.prepare(unused);
  }
  try {
    return s.train_step();
  } catch (const std::exception& e) {
    s.recording->end(probes::RunStatus::kFailed, e.what());
    s.stepping = false;
    throw;
  }
}

FitSummary PPOTrainer::fit() {
  auto& s = *state_;
  const auto& cfg = s.cfg;
  if (s.recording->begun())
    throw std::logic_error("PPOTrainer::fit() runs once, on a trainer that has not run train_step(): make a new trainer");
  FitSummary summary;
  summary.db_path = cfg.hybridscope.db;
  summary.rank = s.topology.rank();
  s.begin_recording();
  const bool lead = s.topology.rank() == 0;  // prints and writes the shared files

  g_stop_signal.store(0);
  auto previous_int = std::signal(SIGINT, on_stop_signal);
  auto previous_term = std::signal(SIGTERM, on_stop_signal);
  struct RestoreSignals {
    void (*i)(int);
    void (*t)(int);
    ~RestoreSignals() {
      std::signal(SIGINT, i);
      std::signal(SIGTERM, t);
    }
  } restore{previous_int, previous_term};

  try {
    if (s.topology.serves_ref()) {
      summary.steps_run = serve_reference(cfg, s.topology, *s.recording, s.ref_model, s.train_data, *s.tokenizer,
                                          s.total_steps, g_stop_signal);
      s.recording->end(probes::RunStatus::kCompleted);
      s.topology.global_world->barrier();  // every rank's file is complete; rank 0 merges
      return summary;
    }
    if (s.topology.serves_rollout()) {
      summary.steps_run = serve_rollout(cfg, s.topology, *s.recording, s.served_rollout_model, s.train_data, *s.loader,
                                        *s.tokenizer, s.total_steps, g_stop_signal);
      s.recording->end(probes::RunStatus::kCompleted);
      s.topology.global_world->barrier();  // every rank's file is complete; rank 0 merges
      return summary;
    }
    s.prepare(summary);
    summary.first_step = static_cast<int>(s.global_step) + 1;

    detail::Progress bar("train", s.total_steps, s.opts.show_progress && lead);
    bar.update(s.global_step);
    double step_seconds_sum = 0;
    while (s.global_step < s.total_steps) {
      // A stop request on any rank stops every rank at the same step boundary: a signal, or a rank
      // whose recorder failed to write with hybridscope.recorder.on_write_error=stop.
      // A failed write throws RecorderError: the catch below marks the run failed with its message.
      // fully_async: the rollout ranks meet the actor at no step boundary; they stop on their own signal.
      Communicator& agreeing = cfg.hybridscope.async_mode == AsyncMode::kFullyAsync ? *s.topology.parallel.world
                                                                                    : *s.topology.global_world;
      s.recording->stop_if_requested(agreeing, g_stop_signal.load(), s.global_step);
      const Metrics metrics = s.train_step();
      ++summary.steps_run;
      step_seconds_sum += find(metrics, "perf/time_per_step");
      const double val = find(metrics, "val/mean@1", -1);
      if (val >= 0) summary.val_after = val;
      std::string line = fmt::format(
          "step {:>4}/{} | score {:.3f} | resp_len {:.1f} | pg_loss {:+.4f} | entropy {:.3f} | grad_norm {:.3f} | "
          "{:.2f}s ({:.0f} tok/s)",
          s.global_step, s.total_steps, find(metrics, "critic/score/mean"), find(metrics, "response_length/mean"),
          find(metrics, "actor/pg_loss"), find(metrics, "actor/entropy"), find(metrics, "actor/grad_norm"),
          find(metrics, "perf/time_per_step"), find(metrics, "perf/throughput"));
      if (s.critic) line += fmt::format(" | vf_loss {:.4f}", find(metrics, "critic/vf_loss"));
      if (val >= 0) line += fmt::format(" | val mean@1 {:.3f}", val);
      if (lead) bar.println(line);
      bar.update(s.global_step);
    }
    bar.finish();
    if (summary.val_after < 0 && summary.steps_run > 0) {
      // A range as the in-step validations have: its generation's fine ranges (gen/prefill,
      // gen/decode_step) nest under it on the timeline instead of standing alone after the step.
      HS_PROBE_RANGE(s.recording->timings(), "testing", kValidation);
      summary.val_after = s.validate(nullptr);
      s.recording->recorder().record_metrics(s.global_step, {{"val/mean@1", summary.val_after}});
    }
    if (summary.steps_run > 0) summary.mean_step_seconds = step_seconds_sum / summary.steps_run;
    // This run's last checkpoint, if it wrote one (not an older run's left in the same root).
    if (auto latest = find_latest_checkpoint(s.checkpoint_root)) {
      const std::string name = std::filesystem::path(*latest).filename().string();
      const int step = std::atoi(name.substr(name.rfind('_') + 1).c_str());
      if (step >= summary.first_step && step <= s.global_step) summary.checkpoint_dir = *latest;
    }
    s.recording->end(probes::RunStatus::kCompleted);
    if (s.topology.world() > 1) {
      s.topology.global_world->barrier();  // every rank's file is complete
      if (lead) {
        const auto report = probes::merge_rank_files(cfg.hybridscope.db);
        fmt::print("merged {} rank files ({} rows) into {}\n", report.files_merged, report.rows_copied,
                   cfg.hybridscope.db);
      }
    }
  } catch (const std::exception& e) {
    if (g_stop_signal.load() == 0) s.recording->end(probes::RunStatus::kFailed, e.what());
    throw;
  }
  return summary;
}

}  // namespace hs::trainer
