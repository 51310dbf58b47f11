// config_validate.cpp — validate(): relations between keys that a single value cannot show
// (divisibility of batch sizes and head counts, ranges, estimator vs group size, the placement of
// the roles on the world's ranks) and the valid configurations this trainer cannot run yet. Every
// problem is collected, so one run reports them all; each names the keys involved, their values
// and the fix. The trainer refuses nothing about a config beyond this (only what needs the
// running processes: the launched world size, a CUDA device, checkpoints found on disk).

#include "hybridscope/trainer/config/config.h"

#include "config/config_keys.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <optional>
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
  /// A valid configuration this build of the trainer cannot run: refused by name rather than
  /// silently ignored.
  void unsupported(const std::string& what) { add("{} is not supported by this build of the trainer yet", what); }
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

  bool empty() const { return list_.empty(); }

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

std::string rank_list(const std::vector<int>& ranks) {
  std::string out;
  for (int r : ranks) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return "[" + out + "]";
}

/// hybridscope.placement checked and completed over the world; std::nullopt when it is invalid
/// (the first problem is added; later ones would only restate it) or the world itself is.
std::optional<Placement> resolve_placement(const Config& c, Problems& p) {
  const int world = c.world_size();
  if (c.trainer.nnodes < 1 || c.trainer.n_gpus_per_node < 1) return std::nullopt;
  const auto& config = c.hybridscope.placement;
  const auto checked = [&](const char* key, std::vector<int> ranks) -> std::optional<std::vector<int>> {
    for (int r : ranks) {
      if (r < 0 || r >= world) {
        p.add("{} = {}: {} is not a rank of this world (0..{}; trainer.nnodes x trainer.n_gpus_per_node = {})", key,
              rank_list(ranks), r, world - 1, world);
        return std::nullopt;
      }
    }
    std::sort(ranks.begin(), ranks.end());
    if (const auto twice = std::adjacent_find(ranks.begin(), ranks.end()); twice != ranks.end()) {
      p.add("{} = {} lists rank {} twice: list each rank once", key, rank_list(ranks), *twice);
      return std::nullopt;
    }
    return ranks;
  };
  auto actor = checked("hybridscope.placement.actor", config.actor);
  const auto ref = checked("hybridscope.placement.ref", config.ref);
  const auto rollout = checked("hybridscope.placement.rollout", config.rollout);
  if (!actor || !ref || !rollout) return std::nullopt;
  std::vector<int> everyone(static_cast<std::size_t>(world));
  for (int r = 0; r < world; ++r) everyone[static_cast<std::size_t>(r)] = r;
  if (!rollout->empty()) {
    // A split rollout pool (rollout_server.h): the actor's ranks train, the pool's generate.
    if (!ref->empty()) {
      p.add("hybridscope.placement.ref and hybridscope.placement.rollout together are not supported yet: split one "
            "role at a time (clear hybridscope.placement.ref to keep the reference on the actor's ranks)");
      return std::nullopt;
    }
    if (c.use_critic() || c.reward_model.enable) {
      p.add("hybridscope.placement.rollout with a critic or a reward model is not supported yet (use a critic-free "
            "estimator such as algorithm.adv_estimator=grpo and the rule reward, or clear hybridscope.placement.rollout)");
      return std::nullopt;
    }
    if (actor->empty())
      std::set_difference(everyone.begin(), everyone.end(), rollout->begin(), rollout->end(), std::back_inserter(*actor));
    std::vector<int> both;
    std::set_union(actor->begin(), actor->end(), rollout->begin(), rollout->end(), std::back_inserter(both));
    if (both.size() != actor->size() + rollout->size()) {
      p.add("hybridscope.placement.actor ({}) and hybridscope.placement.rollout ({}) share a rank: the rollout pool "
            "only generates, on ranks of its own", rank_list(*actor), rank_list(*rollout));
      return std::nullopt;
    }
    if (both != everyone) {
      p.add("hybridscope.placement leaves ranks without a role: actor ({}) and rollout ({}) together must list every "
            "rank 0..{}", rank_list(*actor), rank_list(*rollout), world - 1);
      return std::nullopt;
    }
    if (actor->empty() || actor->front() != 0) {
      p.add("hybridscope.placement.actor = {} must include rank 0 (it prints, validates, sends the weights to the "
            "rollout ranks and writes the run database): move rank 0 out of hybridscope.placement.rollout",
            rank_list(*actor));
      return std::nullopt;
    }
    return Placement{*actor, {}, *rollout};
  }
  if (ref->empty()) {
    if (!actor->empty() && *actor != everyone) {
      p.add("hybridscope.placement.actor = {} lists only some ranks, but no other role is placed on the rest: "
            "list every rank, or place the reference or a rollout pool on the others with hybridscope.placement.ref or "
            "hybridscope.placement.rollout",
            rank_list(*actor));
      return std::nullopt;
    }
    return Placement{everyone, {}, {}};
  }
  if (c.use_critic() || c.reward_model.enable) {
    p.add("hybridscope.placement.ref with a critic or a reward model is not supported yet (use a critic-free "
          "estimator and the rule reward, or leave the placement colocated)");
    return std::nullopt;
  }
  if (c.actor_rollout_ref.ref.fsdp_config.param_offload) {
    p.add("actor_rollout_ref.ref.fsdp_config.param_offload = true with hybridscope.placement.ref: the split "
          "reference ranks hold nothing else, so there is nothing to offload for — set it false or colocate");
    return std::nullopt;
  }
  if (!c.use_reference()) {
    p.add("hybridscope.placement.ref is set, but this run has no reference policy (set "
          "actor_rollout_ref.actor.use_kl_loss=true or algorithm.use_kl_in_reward=true, or leave the placement "
          "colocated)");
    return std::nullopt;
  }
  if (actor->empty()) std::set_difference(everyone.begin(), everyone.end(), ref->begin(), ref->end(), std::back_inserter(*actor));
  std::vector<int> both;
  std::set_union(actor->begin(), actor->end(), ref->begin(), ref->end(), std::back_inserter(both));
  if (both.size() != actor->size() + ref->size()) {
    p.add("hybridscope.placement.actor ({}) and hybridscope.placement.ref ({}) share a rank: a split placement puts "
          "the roles on disjoint ranks (leave both empty to colocate them)", rank_list(*actor), rank_list(*ref));
    return std::nullopt;
  }
  if (both != everyone) {
    p.add("hybridscope.placement leaves ranks without a role: actor ({}) and ref ({}) together must list every rank "
          "0..{}", rank_list(*actor), rank_list(*ref), world - 1);
    return std::nullopt;
  }
  if (actor->empty() || actor->front() != 0) {
    p.add("hybridscope.placement.actor = {} must include rank 0 (it prints, validates and writes the run database)",
          rank_list(*actor));
    return std::nullopt;
  }
  return Placement{*actor, *ref, {}};
}

/// What this build of the trainer cannot run yet, although the values are valid.
void check_supported(const Config& c, Problems& p) {
  const auto& mega = c.actor_rollout_ref.actor.megatron;
  const bool model_parallel = mega.tensor_model_parallel_size > 1 || mega.pipeline_model_parallel_size > 1;
  if (model_parallel && c.use_critic())
    p.unsupported("a critic with a tensor- or pipeline-parallel actor (use a critic-free estimator: grpo, rloo, remax)");
  if (model_parallel && c.reward_model.enable)
    p.unsupported("reward_model.enable with a tensor- or pipeline-parallel actor (use the rule reward)");
  if (c.world_size() > 1) {
    // These whiten or adapt over the whole batch, which data-parallel ranks do not hold.
    const auto est = c.algorithm.adv_estimator;
    // gpg scales by the batch's share of non-zero scores, a whole-batch statistic as well.
    if (est == AdvEstimator::kGae || est == AdvEstimator::kReinforcePlusPlus ||
        est == AdvEstimator::kReinforcePlusPlusBaseline || est == AdvEstimator::kGpg)
      p.unsupported(fmt::format("algorithm.adv_estimator={} with more than one rank (it normalises advantages over "
                                "the whole batch; use grpo, rloo, opo, grpo_passk or remax, or one rank)",
                                to_string(est)));
    if (c.algorithm.use_kl_in_reward && c.algorithm.kl_ctrl.type == KlCtrlType::kAdaptive)
      p.unsupported("algorithm.kl_ctrl.type=adaptive with more than one rank (set it to fixed)");
  }
}

/// verl keys hybridscope accepts so that verl configs load, but whose other values it cannot
/// honour: a non-default value is refused with what hybridscope does instead, never ignored.
void check_honoured(const Config& c, Problems& p) {
  const auto& arr = c.actor_rollout_ref;
  if (!arr.hybrid_engine && c.hybridscope.placement.rollout.empty())
    p.add("actor_rollout_ref.hybrid_engine = false (verl's separate rollout workers) needs the rollout pool's ranks: "
          "set hybridscope.placement.rollout (e.g. [2,3]); otherwise the actor generates after resharding its own "
          "weights (hybridscope.reshard.mode): remove the key or set it to true");
  if (arr.rollout.name != "hybridscope" && arr.rollout.name != "vllm" && arr.rollout.name != "sglang")
    p.add("actor_rollout_ref.rollout.name = '{}': hybridscope generates with its built-in paged-KV engine (vllm and "
          "sglang are accepted for verl's scripts and stand for it): set actor_rollout_ref.rollout.name=hybridscope or "
          "remove the key", arr.rollout.name);
  const auto& reward = c.reward_model;
  const auto& overlong = reward.overlong_buffer;
  if (overlong.enable) {
    if (reward.reward_manager != RewardManager::kDapo)
      p.add("reward_model.overlong_buffer.enable = true needs reward_model.reward_manager=dapo (verl's DAPO manager "
            "applies the buffer)");
    if (overlong.len < 1 || overlong.len > c.data.max_response_length)
      p.add("reward_model.overlong_buffer.len = {}: must be in 1..data.max_response_length ({})", overlong.len,
            c.data.max_response_length);
    if (!(overlong.penalty_factor >= 0.0))
      p.add("reward_model.overlong_buffer.penalty_factor = {}: must be >= 0", overlong.penalty_factor);
  }
  if (!reward.custom_reward_function.path.empty())
    p.add("reward_model.custom_reward_function.path = '{}': hybridscope does not run Python reward functions; it scores "
          "with the built-in rule reward_model.rule (one of {}) or a reward model (reward_model.enable=true): remove the key",
          reward.custom_reward_function.path, fmt::join(spellings<RewardRule>(), ", "));
  else if (reward.custom_reward_function.name != "compute_score")
    p.add("reward_model.custom_reward_function.name = '{}' names a function in custom_reward_function.path, which "
          "hybridscope does not run (the rule is reward_model.rule): remove the key",
          reward.custom_reward_function.name);
  if (reward.model.enable_gradient_checkpointing)
    p.add("reward_model.model.enable_gradient_checkpointing = true: the reward model only scores (no backward pass), "
          "so there is nothing to recompute: set it to false or remove the key");
  // verl's logger names (trainer.logger); console is built in and every metric also goes to the
  // run database, the others are not.
  static const std::vector<std::string> kVerlLoggers = {"console", "wandb", "swanlab", "mlflow", "tensorboard",
                                                        "vemlp_wandb", "clearml"};
  bool named_bad = false;
  for (const auto& logger : c.trainer.logger) {
    if (logger == "console") continue;
    named_bad = true;
    if (std::find(kVerlLoggers.begin(), kVerlLoggers.end(), logger) != kVerlLoggers.end()) {
      // accepted for verl's scripts: substitutions() says that console and the run database stand for it
    } else {
      const auto near = detail::nearest_name(logger, kVerlLoggers);
      p.add("trainer.logger '{}' is no logger{}: hybridscope logs to console (every metric also goes to the run "
            "database)", logger, near ? " — did you mean " + *near + "?" : std::string{});
    }
  }
  if (!named_bad && c.trainer.logger.empty())
    p.add("trainer.logger = [] leaves out console, but hybridscope always prints the step metrics to the console: "
          "set trainer.logger=[console]");
}

/// hybridscope.async_mode and a split rollout pool (hybridscope.placement.rollout): what the pool
/// and the weight sync need (rollout_server.h).
void check_async(const Config& c, Problems& p) {
  const auto& arr = c.actor_rollout_ref;
  const auto& pool = c.hybridscope.placement.rollout;
  if (c.hybridscope.async_mode != AsyncMode::kSync && pool.empty())
    p.add("hybridscope.async_mode = {} needs a split rollout pool that generates while the actor trains: "
          "set hybridscope.placement.rollout to the generating ranks (e.g. [1] of 2 ranks, or [2,3] of 4), or set "
          "hybridscope.async_mode=sync", to_string(c.hybridscope.async_mode));
  if (c.hybridscope.async_mode == AsyncMode::kFullyAsync) {
    // verl's FullyAsyncRollouter asserts (fully_async_rollouter.py) and its trainer's batch:
    // require_batches x ppo_mini_batch_size prompts per step (here data.train_batch_size as well).
    const auto& at = c.async_training;
    if (at.staleness_threshold < 0)
      p.add("async_training.staleness_threshold = {}: must be >= 0 (0 = on policy within a sync window)",
            at.staleness_threshold);
    if (at.trigger_parameter_sync_step < 1)
      p.add("async_training.trigger_parameter_sync_step = {}: must be >= 1 (training steps between two weight syncs)",
            at.trigger_parameter_sync_step);
    if (at.require_batches < 1) p.add("async_training.require_batches = {}: must be >= 1", at.require_batches);
    const int mini = arr.actor.ppo_mini_batch_size;
    if (at.require_batches >= 1 && mini >= 1 && c.data.train_batch_size >= 1 &&
        static_cast<long long>(at.require_batches) * mini != c.data.train_batch_size)
      p.add("hybridscope.async_mode = fully_async trains on async_training.require_batches x "
            "actor_rollout_ref.actor.ppo_mini_batch_size = {} x {} = {} prompts per step, but data.train_batch_size = {}: "
            "set async_training.require_batches={}",
            at.require_batches, mini, static_cast<long long>(at.require_batches) * mini, c.data.train_batch_size,
            c.data.train_batch_size % mini == 0 ? fmt::format("{}", c.data.train_batch_size / mini)
                                                : fmt::format("data.train_batch_size / ppo_mini_batch_size (make "
                                                              "data.train_batch_size a multiple of {})", mini));
  }
  if (arr.rollout.update_weights_bucket_megabytes < 1)
    p.add("actor_rollout_ref.rollout.update_weights_bucket_megabytes = {}: must be >= 1",
          arr.rollout.update_weights_bucket_megabytes);
  if (pool.empty()) return;
  const auto& mega = arr.actor.megatron;
  const int actors = c.world_size() - static_cast<int>(pool.size());
  const int dp = actors / std::max(1, mega.tensor_model_parallel_size * mega.pipeline_model_parallel_size);
  if (mega.tensor_model_parallel_size > 1 || mega.pipeline_model_parallel_size > 1 ||
      (arr.actor.strategy == ActorStrategy::kFsdp && dp > 1))
    p.add("hybridscope.placement.rollout takes the weights from the actor's rank 0, which must hold the whole model: "
          "set actor_rollout_ref.actor.megatron.tensor_model_parallel_size=1 and pipeline_model_parallel_size=1, and "
          "with more than one actor rank actor_rollout_ref.actor.strategy=megatron (fsdp shards the weights over dp)");
  if (arr.rollout.tensor_model_parallel_size != 1)
    p.add("actor_rollout_ref.rollout.tensor_model_parallel_size = {} with hybridscope.placement.rollout: each rollout "
          "rank generates with the whole model (tensor-parallel generation on the pool is not built): set it to 1",
          arr.rollout.tensor_model_parallel_size);
  if (c.algorithm.filter_groups.enable)
    p.add("algorithm.filter_groups.enable = true with hybridscope.placement.rollout: dynamic sampling's extra "
          "generation rounds are not built for a split rollout pool: disable it or clear hybridscope.placement.rollout");
  if (c.algorithm.adv_estimator == AdvEstimator::kRemax)
    p.add("algorithm.adv_estimator = remax with hybridscope.placement.rollout: the greedy baseline generation is not "
          "built for a split rollout pool: use grpo, rloo, opo or grpo_passk, or clear hybridscope.placement.rollout");
  const int pool_size = static_cast<int>(pool.size());
  if (c.data.train_batch_size >= 1 && c.data.train_batch_size % pool_size != 0)
    p.add("data.train_batch_size = {} prompts cannot be split evenly over the {} rollout ranks "
          "(hybridscope.placement.rollout): choose a multiple of {}",
          c.data.train_batch_size, pool_size, pool_size);
}

/// The actor's ranks as a training mesh and as generation replicas: whole model replicas, whole
/// generation tp groups, equal shares of every batch.
void check_actor_layout(const Config& c, const Placement& placement, Problems& p) {
  const auto& d = c.data;
  const auto& actor = c.actor_rollout_ref.actor;
  const auto& mega = actor.megatron;
  const int actors = static_cast<int>(placement.actor.size());
  if (mega.tensor_model_parallel_size < 1 || mega.pipeline_model_parallel_size < 1) return;  // reported
  const int model_parallel = mega.tensor_model_parallel_size * mega.pipeline_model_parallel_size;
  if (actors % model_parallel != 0) {
    p.add("the actor's rank count {} (trainer.nnodes x trainer.n_gpus_per_node, less hybridscope.placement.ref or .rollout) is "
          "not divisible by actor_rollout_ref.actor.megatron.tensor_model_parallel_size x pipeline_model_parallel_size ({})",
          actors, model_parallel);
    return;
  }
  const int dp = actors / model_parallel;
  if (dp > 1) {
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
  const int rollout_tp = c.actor_rollout_ref.rollout.tensor_model_parallel_size;
  if (rollout_tp >= 1) {
    if (actors % rollout_tp != 0) {
      p.add("actor_rollout_ref.rollout.tensor_model_parallel_size = {} must divide the {} actor ranks", rollout_tp,
            actors);
    } else if (const int replicas = actors / rollout_tp; d.train_batch_size >= 1 && d.train_batch_size % replicas != 0) {
      p.add("data.train_batch_size = {} prompts cannot be split evenly over the {} generation replicas (the actor's {} "
            "ranks / actor_rollout_ref.rollout.tensor_model_parallel_size {}): choose a multiple of {}",
            d.train_batch_size, replicas, actors, rollout_tp, replicas);
    } else if (d.gen_batch_size >= 1 && d.gen_batch_size % replicas != 0) {
      p.add("data.gen_batch_size = {} prompts cannot be split evenly over the {} generation replicas: choose a "
            "multiple of {}", d.gen_batch_size, replicas, replicas);
    }
  }
}

}  // namespace

std::vector<std::string> substitutions(const Config& c) {
  std::vector<std::string> lines;
  const auto& name = c.actor_rollout_ref.rollout.name;
  if (name == "vllm" || name == "sglang") {
    lines.push_back("actor_rollout_ref.rollout.name=" + name + ": generating with hybridscope's built-in paged-KV "
                    "engine, which stands for " + name + " here (docs/config.md)");
  }
  for (const auto& logger : c.trainer.logger) {
    if (logger == "console") continue;
    lines.push_back("trainer.logger '" + logger + "': not linked into hybridscope; every metric goes to the console "
                    "and the run database " + c.hybridscope.db + " (hybridscope report / the viewer read it)");
  }
  return lines;
}

TokenizerKind resolved_tokenizer(const Config& c) {
  if (c.hybridscope.tokenizer != TokenizerKind::kAuto) return c.hybridscope.tokenizer;
  if (!c.data.tokenizer.empty()) return TokenizerKind::kHf;
  const auto& path = c.actor_rollout_ref.model.path;
  if (!path.empty() && std::ifstream(path + "/tokenizer.json").good()) return TokenizerKind::kHf;
  return TokenizerKind::kChar;
}

Placement resolved_placement(const Config& config) {
  Problems p;
  auto placement = resolve_placement(config, p);
  if (!placement && p.empty())
    p.add("trainer.nnodes ({}) x trainer.n_gpus_per_node ({}): both must be >= 1", config.trainer.nnodes,
          config.trainer.n_gpus_per_node);
  p.throw_if_any();
  return *placement;
}

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
    if (shape.explicit_head_dim < 0) {
      p.add("hybridscope.model.head_dim = {}: must be >= 0 (0 = hidden_size / num_attention_heads)",
            shape.explicit_head_dim);
    } else if (shape.explicit_head_dim > 0) {
      if (shape.explicit_head_dim % 2 != 0) {
        p.add("hybridscope.model.head_dim = {} is odd: rotary embeddings rotate pairs of dimensions, so "
              "choose an even head_dim", shape.explicit_head_dim);
      }
    } else if (shape.hidden_size % shape.num_attention_heads != 0) {
      p.add("hybridscope.model.hidden_size ({}) is not divisible by hybridscope.model.num_attention_heads "
            "({}): head_dim = hidden_size / num_attention_heads must be a whole number, or set "
            "hybridscope.model.head_dim", shape.hidden_size, shape.num_attention_heads);
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
  // The model's vocabulary holds every id the tokenizer makes (a larger one is a benchmark shape).
  // (A tokenizer.json's vocabulary is checked against the model when both are loaded.)
  if (c.hybridscope.tokenizer == TokenizerKind::kHf && c.data.tokenizer.empty() &&
      c.actor_rollout_ref.model.path.empty()) {
    p.add("hybridscope.tokenizer = hf needs a directory holding tokenizer.json: set data.tokenizer (or "
          "actor_rollout_ref.model.path, where verl takes it from)");
  }
  if (const int tokens = resolved_tokenizer(c) == TokenizerKind::kChar ? kCharTokenizerVocabSize : 0;
      shape.vocab_size > 0 && shape.vocab_size < tokens) {
    p.add("hybridscope.model.vocab_size = {} is smaller than the {} tokenizer's vocabulary ({}): raise it, or set 0 "
          "to take the tokenizer's", shape.vocab_size, to_string(resolved_tokenizer(c)), tokens);
  }
  if (c.actor_rollout_ref.model.path.empty() &&
      static_cast<long long>(d.max_prompt_length) + d.max_response_length > shape.max_position_embeddings) {
    p.add("data.max_prompt_length ({}) + data.max_response_length ({}) = {} exceeds "
          "hybridscope.model.max_position_embeddings ({}): raise max_position_embeddings or shorten "
          "the lengths", d.max_prompt_length, d.max_response_length,
          static_cast<long long>(d.max_prompt_length) + d.max_response_length, shape.max_position_embeddings);
  }

  if (c.hybridscope.reshard.mode == ReshardMode::kHybrid && actor.megatron.tensor_model_parallel_size >= 1 &&
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
  if (actor.fsdp_config.forward_prefetch && !actor.fsdp_config.per_layer) {
    p.add("actor_rollout_ref.actor.fsdp_config.forward_prefetch = true needs fsdp_config.per_layer = true: with the "
          "whole model as one unit there is no next unit to prefetch");
  }
  if (actor.fsdp_config.per_layer) {
    if (actor.strategy != ActorStrategy::kFsdp) {
      p.add("actor_rollout_ref.actor.fsdp_config.per_layer = true with actor.strategy = megatron: per-layer units "
            "gather fsdp's shards; megatron replicates the parameters over dp — set strategy=fsdp or per_layer=false");
    }
    if (actor.use_dynamic_bsz) {
      p.add("actor_rollout_ref.actor.fsdp_config.per_layer = true with actor.use_dynamic_bsz = true: per-layer units "
            "gather and reduce-scatter in every forward/backward pass, so every dp rank must run as many passes, "
            "and token-balanced micro-batches differ in number per rank — set use_dynamic_bsz=false or per_layer=false");
    }
    if (actor.megatron.pipeline_model_parallel_size > 1) {
      p.add("actor_rollout_ref.actor.fsdp_config.per_layer = true with pipeline_model_parallel_size = {}: per-layer "
            "units are not interleaved with the 1F1B schedule — use pipeline_model_parallel_size=1 or per_layer=false",
            actor.megatron.pipeline_model_parallel_size);
    }
  }
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
  if (actor.loss_scale_factor != -1.0 && !(actor.loss_scale_factor > 0.0)) {
    p.add("actor_rollout_ref.actor.loss_scale_factor = {}: must be -1 (the padded response length) or > 0",
          actor.loss_scale_factor);
  }
  // verl asserts clip_cov_ratio > 0 and kl_cov_ratio > 0; a share above 1 selects every token.
  const auto& pl = actor.policy_loss;
  for (const auto& [key, value] : {std::pair{"actor_rollout_ref.actor.policy_loss.clip_cov_ratio", pl.clip_cov_ratio},
                                   std::pair{"actor_rollout_ref.actor.policy_loss.kl_cov_ratio", pl.kl_cov_ratio}}) {
    if (!(value > 0.0 && value <= 1.0)) p.add("{} = {}: must be in (0, 1] (verl's default is 0.0002)", key, value);
  }
  if (!(pl.clip_cov_lb < pl.clip_cov_ub)) {
    p.add("actor_rollout_ref.actor.policy_loss.clip_cov_lb = {} must be < clip_cov_ub = {} (verl's defaults: 1 and 5)",
          pl.clip_cov_lb, pl.clip_cov_ub);
  }
  if (!(pl.ppo_kl_coef >= 0.0)) {
    p.add("actor_rollout_ref.actor.policy_loss.ppo_kl_coef = {}: must be >= 0 (verl's default is 0.1)", pl.ppo_kl_coef);
  }
  if (!(actor.grad_clip > 0.0)) p.add("actor_rollout_ref.actor.grad_clip = {}: must be > 0", actor.grad_clip);
  p.optim("actor_rollout_ref.actor.optim", actor.optim);
  p.unset_or_at_least_1("actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu",
                        c.actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu);

  p.sampling("actor_rollout_ref.rollout", rollout.temperature, rollout.top_p, rollout.top_k, rollout.n);
  p.sampling("actor_rollout_ref.rollout.val_kwargs", rollout.val_kwargs.temperature, rollout.val_kwargs.top_p,
             rollout.val_kwargs.top_k, rollout.val_kwargs.n);
  p.at_least("actor_rollout_ref.rollout.tensor_model_parallel_size", rollout.tensor_model_parallel_size, 1);
  p.at_least("actor_rollout_ref.rollout.max_num_seqs", rollout.max_num_seqs, 1);
  // The engine decodes a prompt's n samples together (they fork the prompt's KV blocks): found at the
  // first generation, this failed on the rollout ranks alone, after the others had started.
  if (rollout.max_num_seqs >= 1 && rollout.n > rollout.max_num_seqs)
    p.add("actor_rollout_ref.rollout.n = {} exceeds actor_rollout_ref.rollout.max_num_seqs = {}: a prompt's samples are "
          "decoded together (they share its prompt's KV blocks); raise max_num_seqs to at least {} or lower n",
          rollout.n, rollout.max_num_seqs, rollout.n);
  // Validation scores one response per prompt (val/mean@1): a larger n would be ignored.
  if (rollout.val_kwargs.n != 1)
    p.add("actor_rollout_ref.rollout.val_kwargs.n = {}: validation scores one response per prompt (val/mean@1); "
          "mean@n over several is not built: set it to 1",
          rollout.val_kwargs.n);
  if (!(rollout.gpu_memory_utilization > 0.0 && rollout.gpu_memory_utilization <= 1.0)) {
    p.add("actor_rollout_ref.rollout.gpu_memory_utilization = {}: must be in (0, 1]",
          rollout.gpu_memory_utilization);
  }
  p.unset_or_at_least_1("actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu",
                        rollout.log_prob_micro_batch_size_per_gpu);
  const auto estimator = c.algorithm.adv_estimator;
  if (rollout.n == 1 && (estimator == AdvEstimator::kGrpo || estimator == AdvEstimator::kRloo ||
                         estimator == AdvEstimator::kReinforcePlusPlusBaseline || estimator == AdvEstimator::kOpo ||
                         estimator == AdvEstimator::kGrpoPassk || estimator == AdvEstimator::kGpg)) {
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

  const auto& fg = c.algorithm.filter_groups;
  if (fg.enable) {
    if (c.actor_rollout_ref.rollout.n < 2)
      p.add("algorithm.filter_groups.enable = true with actor_rollout_ref.rollout.n = {}: a group of one never varies; "
            "use n >= 2", c.actor_rollout_ref.rollout.n);
    if (c.reward_model.enable)
      p.unsupported("algorithm.filter_groups.enable=true with a reward model (reward_model.enable=true)");
    p.at_least("algorithm.filter_groups.max_num_gen_batches", fg.max_num_gen_batches, 0);
  }
  if (c.data.gen_batch_size != -1) {
    if (!fg.enable)
      p.add("data.gen_batch_size = {} is read by dynamic sampling only: set algorithm.filter_groups.enable=true or "
            "remove the key", c.data.gen_batch_size);
    p.at_least("data.gen_batch_size", c.data.gen_batch_size, 1);
  }

  const auto& rc = c.algorithm.rollout_correction;
  if (rc.rollout_is == RolloutCorrectionLevel::kGeometric)
    p.add("algorithm.rollout_correction.rollout_is = geometric: must be null, token or sequence (geometric is a "
          "rejection level: algorithm.rollout_correction.rollout_rs)");
  if (!(rc.rollout_is_threshold > 0.0))
    p.add("algorithm.rollout_correction.rollout_is_threshold = {}: must be > 0", rc.rollout_is_threshold);
  if (rc.rollout_rs != RolloutCorrectionLevel::kNull && !(rc.rollout_rs_threshold > 0.0))
    p.add("algorithm.rollout_correction.rollout_rs = {} needs algorithm.rollout_correction.rollout_rs_threshold > 0 "
          "(the upper bound of the kept ratios, e.g. 2.0; for geometric about 1.001)", to_string(rc.rollout_rs));
  if (rc.rollout_rs_threshold < 0.0 || rc.rollout_rs_threshold_lower < 0.0 || rc.rollout_token_veto_threshold < 0.0)
    p.add("algorithm.rollout_correction thresholds must be >= 0 (0 = null): rollout_rs_threshold {}, "
          "rollout_rs_threshold_lower {}, rollout_token_veto_threshold {}",
          rc.rollout_rs_threshold, rc.rollout_rs_threshold_lower, rc.rollout_token_veto_threshold);
  if (rc.rollout_rs_threshold_lower > 0.0 && rc.rollout_rs_threshold > 0.0 &&
      rc.rollout_rs_threshold_lower > rc.rollout_rs_threshold)
    p.add("algorithm.rollout_correction.rollout_rs_threshold_lower = {} is above rollout_rs_threshold = {}",
          rc.rollout_rs_threshold_lower, rc.rollout_rs_threshold);

  const auto& t = c.trainer;
  p.at_least("trainer.total_epochs", t.total_epochs, 1);
  p.unset_or_at_least_1("trainer.total_training_steps", t.total_training_steps);
  p.at_least("trainer.nnodes", t.nnodes, 1);
  p.at_least("trainer.n_gpus_per_node", t.n_gpus_per_node, 1);
  p.unset_or_at_least_1("trainer.save_freq", t.save_freq);
  p.unset_or_at_least_1("trainer.test_freq", t.test_freq);
  p.at_least("trainer.critic_warmup", t.critic_warmup, 0);

  const auto& h = c.hybridscope;
  p.at_least("hybridscope.kv_block_size", h.kv_block_size, 1);
  p.unset_or_at_least_1("hybridscope.kv_num_blocks", h.kv_num_blocks);
  if (h.expandable_segments && c.trainer.device != DeviceKind::kCuda)
    p.add("hybridscope.expandable_segments = true configures the CUDA caching allocator, but trainer.device = cpu: "
          "set trainer.device=cuda or leave it false");
  p.at_least("hybridscope.decode.stop_check_interval", h.decode.stop_check_interval, 1);
  if (h.attention == AttentionKernel::kFlash) {
    if (t.device != DeviceKind::kCuda || h.precision != Precision::kBf16)
      p.add("hybridscope.attention = flash is FlashAttention-2's CUDA kernel for 16-bit inputs, but trainer.device = {} "
            "and hybridscope.precision = {}: set trainer.device=cuda and hybridscope.precision=bf16, or choose auto",
            to_string(t.device), to_string(h.precision));
    if (!c.actor_rollout_ref.model.use_remove_padding && !c.critic.model.use_remove_padding)
      p.add("hybridscope.attention = flash attends the packed forwards of use_remove_padding, and neither "
            "actor_rollout_ref.model.use_remove_padding nor critic.model.use_remove_padding is set: set one, or choose "
            "auto (the padded forwards take scaled_dot_product_attention either way)");
  }
  if (h.decode.paged_kernel && t.device != DeviceKind::kCuda)
    p.add("hybridscope.decode.paged_kernel = true is a CUDA kernel, but trainer.device = {}: set trainer.device=cuda or "
          "leave it false", to_string(t.device));
  if (h.decode.cuda_graphs) {
    if (t.device != DeviceKind::kCuda)
      p.add("hybridscope.decode.cuda_graphs = true captures CUDA graphs, but trainer.device = {}: set trainer.device=cuda "
            "or leave it false", to_string(t.device));
    if (!h.decode.device_loop || !h.decode.paged_kernel)
      p.add("hybridscope.decode.cuda_graphs = true replays the decode step of the device loop through the paged kernel: "
            "set hybridscope.decode.device_loop=true and hybridscope.decode.paged_kernel=true too (now {} and {})",
            h.decode.device_loop, h.decode.paged_kernel);
    if (c.actor_rollout_ref.rollout.tensor_model_parallel_size != 1)
      p.add("hybridscope.decode.cuda_graphs = true is built for one rollout rank per model (no collective inside the "
            "graph), but actor_rollout_ref.rollout.tensor_model_parallel_size = {}: set it to 1 or leave "
            "cuda_graphs false", c.actor_rollout_ref.rollout.tensor_model_parallel_size);
  }
  if (h.decode.device_loop && h.async_mode == AsyncMode::kFullyAsync && c.async_training.partial_rollout)
    p.add("hybridscope.decode.device_loop = true keeps the decode state on the device, but "
          "async_training.partial_rollout = true re-prefills the sequences in flight from the host's tokens at a weight "
          "sync: set async_training.partial_rollout=false or leave device_loop false");
  p.at_least("hybridscope.num_threads", h.num_threads, 1);
  p.at_least("hybridscope.probes.memory_interval_ms", h.probes.memory_interval_ms, 0);
  p.at_least("hybridscope.warmup.steps", h.warmup.steps, 0);
  if (h.warmup.steps > 0) p.at_least("hybridscope.warmup.batch_size", h.warmup.batch_size, 1);
  if (!(h.warmup.lr >= 0.0)) p.add("hybridscope.warmup.lr = {}: must be >= 0", h.warmup.lr);
  if (!(h.dist.timeout_s > 0.0)) p.add("hybridscope.dist.timeout_s = {}: must be > 0 (seconds)", h.dist.timeout_s);
  p.at_least("hybridscope.dist.shm_bytes", h.dist.shm_bytes, 0);
  if (h.dist.backend == DistBackendChoice::kNccl && t.device != DeviceKind::kCuda)
    p.add("hybridscope.dist.backend = nccl moves CUDA tensors only, but trainer.device = {}: use gloo (or auto)",
          to_string(t.device));
  if (h.dist.backend == DistBackendChoice::kGloo && t.device == DeviceKind::kCuda && c.world_size() > 1)
    p.add("hybridscope.dist.backend = gloo moves CPU tensors only, but trainer.device = cuda with {} ranks: use nccl "
          "(or auto), or trainer.device=cpu",
          c.world_size());
  const auto& mega = actor.megatron;
  p.at_least("actor_rollout_ref.actor.megatron.tensor_model_parallel_size", mega.tensor_model_parallel_size, 1);
  p.at_least("actor_rollout_ref.actor.megatron.pipeline_model_parallel_size", mega.pipeline_model_parallel_size, 1);
  // The roles on the world's ranks, and the actor's ranks as a mesh (hybridscope.placement).
  if (const auto placement = resolve_placement(c, p)) check_actor_layout(c, *placement, p);
  check_async(c, p);
  check_supported(c, p);
  check_honoured(c, p);
  if (h.peak_flops != -1.0 && !(h.peak_flops > 0.0)) {
    p.add("hybridscope.peak_flops = {}: must be -1 (measure) or > 0", h.peak_flops);
  }
  p.throw_if_any();
}

}  // namespace hs::trainer
