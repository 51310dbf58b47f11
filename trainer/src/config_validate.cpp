// config_validate.cpp — validate(): relations between keys that a single value cannot show
// (divisibility of batch sizes and head counts, ranges, estimator vs group size). Every problem is
// collected, so one run reports them all; each names the keys involved, their values and the fix.

#include "hybridscope/trainer/config.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

namespace hs::trainer {
namespace {

/// The problems found so far; each helper appends a message naming the key(s), their values and
/// what to do.
class Problems {
 public:
  template <class... Args>
  void add(fmt::format_string<Args...> format, Args&&... args) {
    list_.push_back(fmt::format(format, std::forward<Args>(args)...));
  }
  template <class N>
  void at_least(const char* key, N value, N min) {
    if (value < min) add("{} = {}: must be >= {}", key, value, min);
  }
  void unset_or_at_least_1(const char* key, int value) {
    if (value != -1 && value < 1) add("{} = {}: must be -1 (unset) or >= 1", key, value);
  }
  void one_of(const char* key, const std::string& value, const std::vector<std::string>& valid) {
    if (std::find(valid.begin(), valid.end(), value) != valid.end()) return;
    std::string names;
    for (const auto& v : valid) names += (names.empty() ? "" : ", ") + v;
    add("{} = '{}': must be one of {}", key, value, names);
  }
  void unit_interval(const char* key, double value) {
    if (!(value >= 0.0 && value <= 1.0)) add("{} = {}: must be in [0, 1]", key, value);
  }
  void sampling(const std::string& prefix, double temperature, double top_p, int top_k, int n) {
    if (!(temperature >= 0.0)) add("{}.temperature = {}: must be >= 0 (0 = greedy)", prefix, temperature);
    if (!(top_p > 0.0 && top_p <= 1.0)) add("{}.top_p = {}: must be in (0, 1] (1 = off)", prefix, top_p);
    if (top_k != -1 && top_k < 1) add("{}.top_k = {}: must be -1 (off) or >= 1", prefix, top_k);
    if (n < 1) add("{}.n = {}: must be >= 1 (responses per prompt)", prefix, n);
  }
  void optim(const std::string& prefix, const OptimConfig& o) {
    if (!(o.lr >= 0.0)) add("{}.lr = {}: must be >= 0", prefix, o.lr);
    if (!(o.weight_decay >= 0.0)) add("{}.weight_decay = {}: must be >= 0", prefix, o.weight_decay);
    for (double beta : o.betas) {
      if (!(beta >= 0.0 && beta < 1.0)) {
        add("{}.betas = {}: each beta must be in [0, 1)", prefix, fmt::format("[{}, {}]", o.betas[0], o.betas[1]));
        break;
      }
    }
    if (!(o.eps > 0.0)) add("{}.eps = {}: must be > 0", prefix, o.eps);
    if (o.lr_warmup_steps < -1) add("{}.lr_warmup_steps = {}: must be -1 (use the ratio) or >= 0", prefix, o.lr_warmup_steps);
    if (!(o.lr_warmup_steps_ratio >= 0.0 && o.lr_warmup_steps_ratio <= 1.0)) {
      add("{}.lr_warmup_steps_ratio = {}: must be in [0, 1]", prefix, o.lr_warmup_steps_ratio);
    }
    if (!(o.min_lr_ratio >= 0.0 && o.min_lr_ratio <= 1.0)) {
      add("{}.min_lr_ratio = {}: must be in [0, 1]", prefix, o.min_lr_ratio);
    }
    if (o.warmup_style != "constant" && o.warmup_style != "cosine") {
      add("{}.warmup_style = '{}': must be one of constant, cosine", prefix, o.warmup_style);
    }
  }
  /// train_batch_size, mini- and micro-batch relations of the actor or the critic (verl's checks:
  /// a step splits into whole mini-batches; a mini-batch of mini x n samples into whole micro-batches).
  void batches(const std::string& prefix, const Config& c, int mini, int micro, bool dynamic, int epochs) {
    const int train = c.data.train_batch_size;
    const int n = c.actor_rollout_ref.rollout.n;
    if (mini < 1) {
      add("{}.ppo_mini_batch_size = {}: must be >= 1", prefix, mini);
    } else if (train >= 1 && train % mini != 0) {
      add("data.train_batch_size ({}) is not divisible by {}.ppo_mini_batch_size ({}): choose a "
          "mini-batch size that divides the batch size", train, prefix, mini);
    }
    if (micro != -1 && micro < 1) {
      add("{}.ppo_micro_batch_size_per_gpu = {}: must be -1 (whole mini-batch) or >= 1", prefix, micro);
    } else if (micro >= 1 && mini >= 1 && n >= 1 && !dynamic &&
               (static_cast<long long>(mini) * n) % micro != 0) {
      add("{}.ppo_mini_batch_size ({}) x actor_rollout_ref.rollout.n ({}) = {} samples is not "
          "divisible by {}.ppo_micro_batch_size_per_gpu ({}): choose a micro-batch size that "
          "divides it", prefix, mini, n, static_cast<long long>(mini) * n, prefix, micro);
    }
    if (epochs < 1) add("{}.ppo_epochs = {}: must be >= 1", prefix, epochs);
  }

  void throw_if_any() const {
    if (list_.empty()) return;
    if (list_.size() == 1) throw ConfigError("invalid configuration: " + list_.front());
    std::string message = fmt::format("invalid configuration ({} problems):", list_.size());
    for (const auto& item : list_) message += "\n  - " + item;
    throw ConfigError(message);
  }

 private:
  std::vector<std::string> list_;
};

}  // namespace

void validate(const Config& c) {
  Problems p;
  const auto& d = c.data;
  const auto& actor = c.actor_rollout_ref.actor;
  const auto& rollout = c.actor_rollout_ref.rollout;
  const auto& shape = c.hybridscope.model;

  p.at_least("data.train_batch_size", d.train_batch_size, 1);
  p.at_least("data.max_prompt_length", d.max_prompt_length, 1);
  p.at_least("data.max_response_length", d.max_response_length, 1);
  p.unset_or_at_least_1("data.val_batch_size", d.val_batch_size);

  // hybridscope.model shapes the randomly initialised model; a model path brings its own config.json.
  p.at_least("hybridscope.model.vocab_size", shape.vocab_size, 0);
  p.at_least("hybridscope.model.intermediate_size", shape.intermediate_size, 1);
  p.at_least("hybridscope.model.num_hidden_layers", shape.num_hidden_layers, 1);
  p.at_least("hybridscope.model.max_position_embeddings", shape.max_position_embeddings, 1);
  if (!(shape.rope_theta > 0.0)) p.add("hybridscope.model.rope_theta = {}: must be > 0", shape.rope_theta);
  if (!(shape.rms_norm_eps > 0.0)) p.add("hybridscope.model.rms_norm_eps = {}: must be > 0", shape.rms_norm_eps);
  if (shape.hidden_size < 1 || shape.num_attention_heads < 1 || shape.num_key_value_heads < 1) {
    p.add("hybridscope.model.hidden_size ({}), num_attention_heads ({}) and num_key_value_heads ({}) "
          "must all be >= 1", shape.hidden_size, shape.num_attention_heads, shape.num_key_value_heads);
  } else {
    if (shape.hidden_size % shape.num_attention_heads != 0) {
      p.add("hybridscope.model.hidden_size ({}) is not divisible by hybridscope.model.num_attention_heads "
            "({}): head_dim = hidden_size / num_attention_heads must be a whole number",
            shape.hidden_size, shape.num_attention_heads);
    } else if (shape.head_dim() % 2 != 0) {
      p.add("head_dim = hybridscope.model.hidden_size ({}) / hybridscope.model.num_attention_heads ({}) "
            "= {} is odd: rotary embeddings rotate pairs of dimensions, so choose an even head_dim",
            shape.hidden_size, shape.num_attention_heads, shape.head_dim());
    }
    if (shape.num_attention_heads % shape.num_key_value_heads != 0) {
      p.add("hybridscope.model.num_attention_heads ({}) is not divisible by "
            "hybridscope.model.num_key_value_heads ({}): each key/value head serves a whole group of "
            "query heads", shape.num_attention_heads, shape.num_key_value_heads);
    }
  }
  if (c.actor_rollout_ref.model.path.empty() &&
      static_cast<long long>(d.max_prompt_length) + d.max_response_length > shape.max_position_embeddings) {
    p.add("data.max_prompt_length ({}) + data.max_response_length ({}) = {} exceeds "
          "hybridscope.model.max_position_embeddings ({}): raise max_position_embeddings or shorten "
          "the lengths", d.max_prompt_length, d.max_response_length,
          static_cast<long long>(d.max_prompt_length) + d.max_response_length, shape.max_position_embeddings);
  }

  p.one_of("actor_rollout_ref.actor.strategy", actor.strategy, {"fsdp", "megatron"});
  p.one_of("hybridscope.reshard.mode", c.hybridscope.reshard.mode, {"hybrid", "vanilla", "naive"});
  p.one_of("hybridscope.precision", c.hybridscope.precision, {"fp32", "bf16"});
  p.one_of("hybridscope.attention", c.hybridscope.attention, {"auto", "sdpa", "eager"});
  if (c.hybridscope.reshard.mode == "hybrid" && actor.megatron.tensor_model_parallel_size >= 1 &&
      rollout.tensor_model_parallel_size >= 1 &&
      actor.megatron.tensor_model_parallel_size % rollout.tensor_model_parallel_size != 0 &&
      rollout.tensor_model_parallel_size % actor.megatron.tensor_model_parallel_size != 0) {
    p.add("hybridscope.reshard.mode = hybrid needs actor_rollout_ref.rollout.tensor_model_parallel_size ({}) and "
          "actor_rollout_ref.actor.megatron.tensor_model_parallel_size ({}) to divide one another so that the "
          "shards nest — change one of them or use hybridscope.reshard.mode=vanilla",
          rollout.tensor_model_parallel_size, actor.megatron.tensor_model_parallel_size);
  }
  // Layout rules on hybridscope.model (a model path's config.json is checked when it loads, layout.h).
  const bool random_init = c.actor_rollout_ref.model.path.empty();
  if (random_init && shape.num_hidden_layers >= 1 && actor.megatron.pipeline_model_parallel_size >= 1 &&
      shape.num_hidden_layers % actor.megatron.pipeline_model_parallel_size != 0) {
    p.add("actor_rollout_ref.actor.megatron.pipeline_model_parallel_size = {} does not divide "
          "hybridscope.model.num_hidden_layers = {}: every pipeline stage holds the same number of decoder layers",
          actor.megatron.pipeline_model_parallel_size, shape.num_hidden_layers);
  }
  for (const auto& [key, tp] : {std::pair{"actor_rollout_ref.actor.megatron.tensor_model_parallel_size",
                                          actor.megatron.tensor_model_parallel_size},
                                std::pair{"actor_rollout_ref.rollout.tensor_model_parallel_size",
                                          rollout.tensor_model_parallel_size}}) {
    if (random_init && tp >= 1 && shape.num_key_value_heads >= 1 &&
        (shape.num_key_value_heads % tp != 0 || shape.intermediate_size % tp != 0)) {
      p.add("{} = {} must divide hybridscope.model.num_key_value_heads ({}) and intermediate_size ({}): tensor "
            "parallelism splits whole heads and equal MLP slices",
            key, tp, shape.num_key_value_heads, shape.intermediate_size);
    }
  }
  p.batches("actor_rollout_ref.actor", c, actor.ppo_mini_batch_size, actor.ppo_micro_batch_size_per_gpu,
            actor.use_dynamic_bsz, actor.ppo_epochs);
  if (actor.use_dynamic_bsz) p.at_least("actor_rollout_ref.actor.ppo_max_token_len_per_gpu", actor.ppo_max_token_len_per_gpu, 1);
  if (!(actor.clip_ratio >= 0.0)) p.add("actor_rollout_ref.actor.clip_ratio = {}: must be >= 0", actor.clip_ratio);
  for (const auto& [key, value] : {std::pair{"actor_rollout_ref.actor.clip_ratio_low", actor.clip_ratio_low},
                                   std::pair{"actor_rollout_ref.actor.clip_ratio_high", actor.clip_ratio_high}}) {
    if (value != -1.0 && !(value >= 0.0)) p.add("{} = {}: must be -1 (use clip_ratio) or >= 0", key, value);
  }
  if (!(actor.clip_ratio_c > 1.0)) {
    p.add("actor_rollout_ref.actor.clip_ratio_c = {}: the dual-clip constant must be > 1 (verl's default is 3.0)",
          actor.clip_ratio_c);
  }
  if (!(actor.kl_loss_coef >= 0.0)) p.add("actor_rollout_ref.actor.kl_loss_coef = {}: must be >= 0", actor.kl_loss_coef);
  if (!(actor.grad_clip > 0.0)) p.add("actor_rollout_ref.actor.grad_clip = {}: must be > 0", actor.grad_clip);
  p.optim("actor_rollout_ref.actor.optim", actor.optim);
  p.unset_or_at_least_1("actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu",
                        c.actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu);

  p.sampling("actor_rollout_ref.rollout", rollout.temperature, rollout.top_p, rollout.top_k, rollout.n);
  p.sampling("actor_rollout_ref.rollout.val_kwargs", rollout.val_kwargs.temperature, rollout.val_kwargs.top_p,
             rollout.val_kwargs.top_k, rollout.val_kwargs.n);
  p.at_least("actor_rollout_ref.rollout.tensor_model_parallel_size", rollout.tensor_model_parallel_size, 1);
  p.at_least("actor_rollout_ref.rollout.max_num_seqs", rollout.max_num_seqs, 1);
  if (!(rollout.gpu_memory_utilization > 0.0 && rollout.gpu_memory_utilization <= 1.0)) {
    p.add("actor_rollout_ref.rollout.gpu_memory_utilization = {}: must be in (0, 1]",
          rollout.gpu_memory_utilization);
  }
  p.unset_or_at_least_1("actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu",
                        rollout.log_prob_micro_batch_size_per_gpu);
  const auto estimator = c.algorithm.adv_estimator;
  if (rollout.n == 1 && (estimator == AdvEstimator::kGrpo || estimator == AdvEstimator::kRloo ||
                         estimator == AdvEstimator::kReinforcePlusPlusBaseline)) {
    p.add("algorithm.adv_estimator = {} compares the responses to one prompt, but "
          "actor_rollout_ref.rollout.n = 1: set actor_rollout_ref.rollout.n >= 2 (e.g. 5) or use "
          "another estimator", to_string(estimator));
  }

  if (c.use_critic()) {
    const auto& critic = c.critic;
    p.batches("critic", c, critic.ppo_mini_batch_size, critic.ppo_micro_batch_size_per_gpu,
              critic.use_dynamic_bsz, critic.ppo_epochs);
    if (critic.use_dynamic_bsz) p.at_least("critic.ppo_max_token_len_per_gpu", critic.ppo_max_token_len_per_gpu, 1);
    if (!(critic.cliprange_value >= 0.0)) p.add("critic.cliprange_value = {}: must be >= 0", critic.cliprange_value);
    if (!(critic.grad_clip > 0.0)) p.add("critic.grad_clip = {}: must be > 0", critic.grad_clip);
    p.optim("critic.optim", critic.optim);
  }

  p.unit_interval("algorithm.gamma", c.algorithm.gamma);
  p.unit_interval("algorithm.lam", c.algorithm.lam);
  const auto& kl = c.algorithm.kl_ctrl;
  if (!(kl.kl_coef >= 0.0)) p.add("algorithm.kl_ctrl.kl_coef = {}: must be >= 0", kl.kl_coef);
  if (kl.type == KlCtrlType::kAdaptive) {
    p.at_least("algorithm.kl_ctrl.horizon", kl.horizon, 1);
    if (!(kl.target_kl > 0.0)) {
      p.add("algorithm.kl_ctrl.target_kl = {}: the adaptive controller (algorithm.kl_ctrl.type = adaptive) "
            "needs a target > 0", kl.target_kl);
    }
  }

  const auto& t = c.trainer;
  p.at_least("trainer.total_epochs", t.total_epochs, 1);
  p.unset_or_at_least_1("trainer.total_training_steps", t.total_training_steps);
  p.at_least("trainer.nnodes", t.nnodes, 1);
  p.at_least("trainer.n_gpus_per_node", t.n_gpus_per_node, 1);
  p.one_of("trainer.device", t.device, {"cpu", "cuda"});
  p.unset_or_at_least_1("trainer.save_freq", t.save_freq);
  p.unset_or_at_least_1("trainer.test_freq", t.test_freq);
  p.one_of("trainer.resume_mode", t.resume_mode, {"auto", "disable"});
  p.at_least("trainer.critic_warmup", t.critic_warmup, 0);

  const auto& h = c.hybridscope;
  p.at_least("hybridscope.kv_block_size", h.kv_block_size, 1);
  p.unset_or_at_least_1("hybridscope.kv_num_blocks", h.kv_num_blocks);
  p.at_least("hybridscope.num_threads", h.num_threads, 1);
  p.at_least("hybridscope.probes.memory_interval_ms", h.probes.memory_interval_ms, 0);
  p.at_least("hybridscope.warmup.steps", h.warmup.steps, 0);
  if (h.warmup.steps > 0) p.at_least("hybridscope.warmup.batch_size", h.warmup.batch_size, 1);
  if (!(h.warmup.lr >= 0.0)) p.add("hybridscope.warmup.lr = {}: must be >= 0", h.warmup.lr);
  p.one_of("hybridscope.dist.backend", h.dist.backend, {"auto", "gloo", "nccl"});
  if (!(h.dist.timeout_s > 0.0)) p.add("hybridscope.dist.timeout_s = {}: must be > 0 (seconds)", h.dist.timeout_s);
  if (h.dist.backend == "nccl" && t.device != "cuda")
    p.add("hybridscope.dist.backend = nccl moves CUDA tensors only, but trainer.device = {}: use gloo (or auto)",
          t.device);
  if (h.dist.backend == "gloo" && t.device == "cuda" && t.nnodes * t.n_gpus_per_node > 1)
    p.add("hybridscope.dist.backend = gloo moves CPU tensors only, but trainer.device = cuda with {} ranks: use nccl "
          "(or auto), or trainer.device=cpu",
          t.nnodes * t.n_gpus_per_node);
  const auto& mega = actor.megatron;
  p.at_least("actor_rollout_ref.actor.megatron.tensor_model_parallel_size", mega.tensor_model_parallel_size, 1);
  p.at_least("actor_rollout_ref.actor.megatron.pipeline_model_parallel_size", mega.pipeline_model_parallel_size, 1);
  // The actor's ranks: the world, less a split reference's (hybridscope.placement; the trainer
  // checks the rank lists themselves).
  const auto& placement = c.hybridscope.placement;
  const int world = t.nnodes * t.n_gpus_per_node;
  const int actors = !placement.actor.empty() ? static_cast<int>(placement.actor.size())
                                              : world - static_cast<int>(placement.ref.size());
  const int model_parallel = std::max(1, mega.tensor_model_parallel_size) * std::max(1, mega.pipeline_model_parallel_size);
  if (actors < 1) {
    p.add("hybridscope.placement leaves the actor no rank");
  } else if (actors % model_parallel != 0) {
    p.add("the actor's rank count {} (trainer.nnodes x trainer.n_gpus_per_node, less hybridscope.placement.ref) is "
          "not divisible by actor_rollout_ref.actor.megatron.tensor_model_parallel_size x pipeline_model_parallel_size ({})",
          actors, model_parallel);
  } else if (const int dp = actors / model_parallel; dp > 1) {
    // Each data-parallel rank takes an equal share of the prompts and of every mini-batch.
    if (d.train_batch_size % dp != 0)
      p.add("data.train_batch_size ({}) is not divisible by the {} data-parallel ranks", d.train_batch_size, dp);
    if (actor.ppo_mini_batch_size % dp != 0)
      p.add("actor_rollout_ref.actor.ppo_mini_batch_size ({}) is not divisible by the {} data-parallel ranks",
            actor.ppo_mini_batch_size, dp);
    if (c.use_critic() && c.critic.ppo_mini_batch_size % dp != 0)
      p.add("critic.ppo_mini_batch_size ({}) is not divisible by the {} data-parallel ranks",
            c.critic.ppo_mini_batch_size, dp);
  }
  if (h.peak_flops != -1.0 && !(h.peak_flops > 0.0)) {
    p.add("hybridscope.peak_flops = {}: must be -1 (measure) or > 0", h.peak_flops);
  }
  p.throw_if_any();
}

}  // namespace hs::trainer
