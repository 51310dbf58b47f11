// config_keys.cpp — every configuration key, its member in Config and its meaning.
//
// Adding a key is one line here (plus the field in config.h); parsing, to_yaml, the "did you
// mean" hints and the reference in docs/config.md pick it up. Keep a section's keys together.

#include "config/config_keys.h"

namespace hs::trainer {
namespace detail {
namespace {

template <class T>
AnyField make_field(T* (*get)(Config&), const T* (*view)(const Config&)) {
  return Field<T>{get, view};
}

}  // namespace

// A key and the Config member it fills; the member is named otherwise only where a method takes
// the key's own name (ModelShape::head_dim()).
#define HS_CONFIG_KEY_AS(path, member, doc)                                                \
  Key {                                                                                    \
    #path, make_field(+[](Config& c) { return &c.member; },                                \
                      +[](const Config& c) { return &c.member; }),                         \
        doc                                                                                \
  }
// The path is written once: stringised for the YAML key, spliced in for the member access.
#define HS_CONFIG_KEY(member, doc) HS_CONFIG_KEY_AS(member, member, doc)

const std::vector<Key>& keys() {
  static const std::vector<Key> table = {
      HS_CONFIG_KEY(data.train_files, "Training prompts (JSONL with verl's row fields)."),
      HS_CONFIG_KEY(data.val_files, "Validation prompts (JSONL)."),
      HS_CONFIG_KEY(data.prompt_key, "Row field that holds the prompt."),
      HS_CONFIG_KEY(data.max_prompt_length, "Prompt tokens kept per row."),
      HS_CONFIG_KEY(data.max_response_length, "Most tokens generated per response."),
      HS_CONFIG_KEY(data.train_batch_size, "Prompts per training step (each yields rollout.n responses)."),
      HS_CONFIG_KEY(data.gen_batch_size, "Prompts per generation round of dynamic sampling (algorithm.filter_groups); -1 = train_batch_size."),
      HS_CONFIG_KEY(data.val_batch_size, "Prompts per validation batch; -1 = the whole set at once."),
      HS_CONFIG_KEY(data.truncation, "What to do with a prompt longer than max_prompt_length."),
      HS_CONFIG_KEY(data.shuffle, "Shuffle the training prompts every epoch."),
      HS_CONFIG_KEY(data.seed, "Seed of the shuffling permutation."),
      HS_CONFIG_KEY(data.tokenizer, "Directory holding tokenizer.json (hybridscope.tokenizer=hf); empty = actor_rollout_ref.model.path."),
      HS_CONFIG_KEY(data.filter_overlong_prompts, "Drop rows whose templated prompt exceeds max_prompt_length when loading (counted in the log) instead of applying data.truncation."),

      HS_CONFIG_KEY(actor_rollout_ref.hybrid_engine, "Actor and rollout share weights and switch layouts (3D-HybridEngine). false (verl's separate rollout workers) only with hybridscope.placement.rollout, which gives generation its own ranks."),
      HS_CONFIG_KEY(actor_rollout_ref.model.path, "HuggingFace-layout model directory; empty = random init with hybridscope.model."),
      HS_CONFIG_KEY(actor_rollout_ref.model.enable_gradient_checkpointing, "Keep only each decoder layer's input in the forward and recompute the layer in the backward (less activation memory, one more forward)."),
      HS_CONFIG_KEY(actor_rollout_ref.model.use_remove_padding, "Pack each micro-batch's real tokens into one sequence (positions restart per sample, attention within each sample) for the actor's and the reference's log-prob and update forwards, as verl's use_remove_padding; nothing is computed over padding and the results equal the padded forward's within rounding. Generation is unaffected."),

      HS_CONFIG_KEY(actor_rollout_ref.actor.strategy, "Training layout along dp: fsdp (ZeRO-3 parameter shards) or megatron (replicated parameters)."),
      HS_CONFIG_KEY(actor_rollout_ref.actor.ppo_mini_batch_size, "Prompts per PPO mini-batch (x rollout.n samples), split over data-parallel ranks."),
      HS_CONFIG_KEY(actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu, "Samples per forward/backward pass on one rank; -1 = the whole mini-batch."),
      HS_CONFIG_KEY(actor_rollout_ref.actor.use_dynamic_bsz, "Pack micro-batches by a token budget instead of a sample count."),
      HS_CONFIG_KEY(actor_rollout_ref.actor.ppo_max_token_len_per_gpu, "Token budget of one micro-batch when use_dynamic_bsz."),
      HS_CONFIG_KEY(actor_rollout_ref.actor.clip_ratio, "PPO clip range epsilon."),
      HS_CONFIG_KEY(actor_rollout_ref.actor.clip_ratio_low, "Lower clip range; -1 = clip_ratio."),
      HS_CONFIG_KEY(actor_rollout_ref.actor.clip_ratio_high, "Upper clip range; -1 = clip_ratio (DAPO uses 0.28)."),
      HS_CONFIG_KEY(actor_rollout_ref.actor.clip_ratio_c, "Dual-clip constant for negative advantages; must be > 1."),
      HS_CONFIG_KEY(actor_rollout_ref.actor.loss_agg_mode, "How per-token losses are aggregated (gspo always uses seq-mean-token-mean, as verl)."),
      HS_CONFIG_KEY(actor_rollout_ref.actor.loss_scale_factor, "Divisor of seq-mean-token-sum-norm; -1 = the padded response length (verl's null)."),
      HS_CONFIG_KEY(actor_rollout_ref.actor.policy_loss.loss_mode, "Policy loss: vanilla (PPO, dual clip), gspo (sequence-level ratio), gpg (-logp*A), clip_cov or kl_cov (covariance-selected tokens)."),
      HS_CONFIG_KEY(actor_rollout_ref.actor.policy_loss.clip_cov_ratio, "clip_cov: share of valid tokens whose gradient is cut, in (0, 1]."),
      HS_CONFIG_KEY(actor_rollout_ref.actor.policy_loss.clip_cov_lb, "clip_cov: lower bound of the covariance window; < clip_cov_ub."),
      HS_CONFIG_KEY(actor_rollout_ref.actor.policy_loss.clip_cov_ub, "clip_cov: upper bound of the covariance window."),
      HS_CONFIG_KEY(actor_rollout_ref.actor.policy_loss.kl_cov_ratio, "kl_cov: share of valid tokens (largest covariance) that get the KL term, in (0, 1]."),
      HS_CONFIG_KEY(actor_rollout_ref.actor.policy_loss.ppo_kl_coef, "kl_cov: weight of abs(logp - old_logp) on the selected tokens; >= 0."),
      HS_CONFIG_KEY(actor_rollout_ref.actor.entropy_coeff, "Weight of the entropy bonus."),
      HS_CONFIG_KEY(actor_rollout_ref.actor.use_kl_loss, "Add a KL(actor, reference) term to the actor loss (GRPO style)."),
      HS_CONFIG_KEY(actor_rollout_ref.actor.kl_loss_coef, "Weight of the KL loss."),
      HS_CONFIG_KEY(actor_rollout_ref.actor.kl_loss_type, "KL estimator of the KL loss."),
      HS_CONFIG_KEY(actor_rollout_ref.actor.ppo_epochs, "Passes over each batch of experience."),
      HS_CONFIG_KEY(actor_rollout_ref.actor.shuffle, "Shuffle samples between PPO epochs."),
      HS_CONFIG_KEY(actor_rollout_ref.actor.grad_clip, "Gradient norm clipping threshold."),
      HS_CONFIG_KEY(actor_rollout_ref.actor.optim.lr, "AdamW learning rate."),
      HS_CONFIG_KEY(actor_rollout_ref.actor.optim.weight_decay, "AdamW weight decay."),
      HS_CONFIG_KEY(actor_rollout_ref.actor.optim.betas, "AdamW (beta1, beta2)."),
      HS_CONFIG_KEY(actor_rollout_ref.actor.optim.eps, "AdamW epsilon."),
      HS_CONFIG_KEY(actor_rollout_ref.actor.optim.lr_warmup_steps, "Linear warm-up steps; -1 = use lr_warmup_steps_ratio."),
      HS_CONFIG_KEY(actor_rollout_ref.actor.optim.lr_warmup_steps_ratio, "Warm-up steps as a share of the total training steps."),
      HS_CONFIG_KEY(actor_rollout_ref.actor.optim.min_lr_ratio, "Floor of the cosine schedule as a share of lr."),
      HS_CONFIG_KEY(actor_rollout_ref.actor.optim.warmup_style, "Schedule after warm-up: constant or cosine."),
      HS_CONFIG_KEY(actor_rollout_ref.actor.megatron.tensor_model_parallel_size, "Tensor-parallel size of the training layout; data parallel = world / (tp x pp)."),
      HS_CONFIG_KEY(actor_rollout_ref.actor.megatron.pipeline_model_parallel_size, "Pipeline stages of the training layout."),
      HS_CONFIG_KEY(actor_rollout_ref.actor.fsdp_config.param_offload, "Master weights to host memory while generating (the rollout then uses its own copy)."),
      HS_CONFIG_KEY(actor_rollout_ref.actor.fsdp_config.optimizer_offload, "AdamW's moments to host memory while generating."),
      HS_CONFIG_KEY(actor_rollout_ref.actor.fsdp_config.per_layer, "hybridscope's own: fsdp gathers each decoder layer's parameters just before the layer runs and frees them after (embeddings, final norm and head are the root unit, full for the whole update), as verl's FSDP wraps each decoder layer; false = the whole actor is gathered at once (docs/parallelism.md)."),
      HS_CONFIG_KEY(actor_rollout_ref.actor.fsdp_config.forward_prefetch, "With per_layer: issue the next layer's all-gather before the current layer computes (forward and backward) and overlap each layer's gradient reduce-scatter with the previous layer's backward (over Gloo's threads or NCCL; CPU ranks on one host with hybridscope.dist.shm_bytes > 0 run each prefetched collective through shared memory when it is posted, hiding none); false = every collective is waited for at once."),

      HS_CONFIG_KEY(actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu, "Samples per reference log-prob pass on one rank; -1 = the actor's ppo_micro_batch_size_per_gpu (a pass never holds more than a training micro-batch)."),
      HS_CONFIG_KEY(actor_rollout_ref.ref.fsdp_config.param_offload, "Reference weights in host memory except while computing log-probs."),

      HS_CONFIG_KEY(actor_rollout_ref.rollout.name, "Generation engine: hybridscope, the built-in paged-KV engine (verl's vllm/sglang/hf are refused)."),
      HS_CONFIG_KEY(actor_rollout_ref.rollout.temperature, "Sampling temperature."),
      HS_CONFIG_KEY(actor_rollout_ref.rollout.top_k, "Top-k sampling; -1 = off."),
      HS_CONFIG_KEY(actor_rollout_ref.rollout.top_p, "Nucleus sampling mass, in (0, 1]."),
      HS_CONFIG_KEY(actor_rollout_ref.rollout.n, "Responses sampled per prompt (the GRPO group size)."),
      HS_CONFIG_KEY(actor_rollout_ref.rollout.do_sample, "Sample; false = greedy decoding."),
      HS_CONFIG_KEY(actor_rollout_ref.rollout.tensor_model_parallel_size, "Tensor-parallel size of the generation layout."),
      HS_CONFIG_KEY(actor_rollout_ref.rollout.gpu_memory_utilization, "Share of the CUDA device's total memory the rollout may hold, its weights included (vLLM's meaning); caps a KV pool sized by kv_num_blocks=-1."),
      HS_CONFIG_KEY(actor_rollout_ref.rollout.max_num_seqs, "Most sequences decoded at once."),
      HS_CONFIG_KEY(actor_rollout_ref.rollout.free_cache_engine, "Free the KV blocks when switching back to training."),
      HS_CONFIG_KEY(actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu, "Samples per old-log-prob pass on one rank; -1 = the actor's ppo_micro_batch_size_per_gpu (a pass never holds more than a training micro-batch)."),
      HS_CONFIG_KEY(actor_rollout_ref.rollout.update_weights_bucket_megabytes, "Largest bucket (MiB) of the weight sync to a split rollout pool (hybridscope.placement.rollout), one broadcast per bucket; a larger parameter travels alone."),
      HS_CONFIG_KEY(actor_rollout_ref.rollout.val_kwargs.temperature, "Validation sampling temperature."),
      HS_CONFIG_KEY(actor_rollout_ref.rollout.val_kwargs.top_k, "Validation top-k; -1 = off."),
      HS_CONFIG_KEY(actor_rollout_ref.rollout.val_kwargs.top_p, "Validation nucleus mass."),
      HS_CONFIG_KEY(actor_rollout_ref.rollout.val_kwargs.n, "Validation responses per prompt: 1 (val/mean@1; more is refused, mean@n is not built)."),
      HS_CONFIG_KEY(actor_rollout_ref.rollout.val_kwargs.do_sample, "Validation samples; false = greedy."),

      HS_CONFIG_KEY(critic.model.path, "Critic weights; empty = the actor's weights with a fresh value head."),
      HS_CONFIG_KEY(critic.model.enable_gradient_checkpointing, "Keep only each decoder layer's input in the forward and recompute the layer in the backward."),
      HS_CONFIG_KEY(critic.model.use_remove_padding, "Pack each micro-batch's real tokens into one sequence for the critic's value and update forwards (as actor_rollout_ref.model.use_remove_padding); results equal the padded forward's within rounding."),
      HS_CONFIG_KEY(critic.ppo_mini_batch_size, "Prompts per critic mini-batch (x rollout.n samples)."),
      HS_CONFIG_KEY(critic.ppo_micro_batch_size_per_gpu, "Samples per forward/backward pass on one rank; -1 = the whole mini-batch."),
      HS_CONFIG_KEY(critic.ppo_epochs, "Passes over each batch of experience."),
      HS_CONFIG_KEY(critic.cliprange_value, "Value-loss clip range around the old values."),
      HS_CONFIG_KEY(critic.grad_clip, "Gradient norm clipping threshold."),
      HS_CONFIG_KEY(critic.loss_agg_mode, "How per-token value losses are aggregated."),
      HS_CONFIG_KEY(critic.use_dynamic_bsz, "Pack micro-batches by a token budget."),
      HS_CONFIG_KEY(critic.ppo_max_token_len_per_gpu, "Token budget of one micro-batch when use_dynamic_bsz."),
      HS_CONFIG_KEY(critic.optim.lr, "AdamW learning rate."),
      HS_CONFIG_KEY(critic.optim.weight_decay, "AdamW weight decay."),
      HS_CONFIG_KEY(critic.optim.betas, "AdamW (beta1, beta2)."),
      HS_CONFIG_KEY(critic.optim.eps, "AdamW epsilon."),
      HS_CONFIG_KEY(critic.optim.lr_warmup_steps, "Linear warm-up steps; -1 = use lr_warmup_steps_ratio."),
      HS_CONFIG_KEY(critic.optim.lr_warmup_steps_ratio, "Warm-up steps as a share of the total training steps."),
      HS_CONFIG_KEY(critic.optim.min_lr_ratio, "Floor of the cosine schedule as a share of lr."),
      HS_CONFIG_KEY(critic.optim.warmup_style, "Schedule after warm-up: constant or cosine."),

      HS_CONFIG_KEY(reward_model.enable, "Score responses with a scalar-head model instead of the rule."),
      HS_CONFIG_KEY(reward_model.model.path, "Reward model weights (HuggingFace layout)."),
      HS_CONFIG_KEY(reward_model.model.enable_gradient_checkpointing, "Accepted as false only: the reward model scores without a backward pass."),
      HS_CONFIG_KEY(reward_model.reward_manager, "How scores become token rewards: naive (on the last response token) or dapo (the same, plus the overlong buffer)."),
      HS_CONFIG_KEY(reward_model.overlong_buffer.enable, "DAPO's overlong reward shaping (needs reward_manager=dapo)."),
      HS_CONFIG_KEY(reward_model.overlong_buffer.len, "Tokens before max_response_length where the length penalty grows."),
      HS_CONFIG_KEY(reward_model.overlong_buffer.penalty_factor, "The penalty at max_response_length (linear over the buffer)."),
      HS_CONFIG_KEY(reward_model.rule, "Built-in rule reward; gsm8k = exact match of the answer after ####."),
      HS_CONFIG_KEY(reward_model.custom_reward_function.path, "Accepted empty only: no Python reward functions; the rule is reward_model.rule."),
      HS_CONFIG_KEY(reward_model.custom_reward_function.name, "Accepted as compute_score only (it names a function in path)."),

      HS_CONFIG_KEY(algorithm.gamma, "Discount factor."),
      HS_CONFIG_KEY(algorithm.lam, "GAE lambda."),
      HS_CONFIG_KEY(algorithm.adv_estimator, "Advantage estimator (docs/algorithms.md); gae needs a critic, the group estimators (grpo, rloo, reinforce_plus_plus_baseline, opo, grpo_passk, gpg) need rollout.n >= 2."),
      HS_CONFIG_KEY(algorithm.norm_adv_by_std_in_grpo, "Divide GRPO advantages by the group std (false = Dr. GRPO)."),
      HS_CONFIG_KEY(algorithm.use_kl_in_reward, "Subtract beta * KL(actor, reference) from the token rewards."),
      HS_CONFIG_KEY(algorithm.kl_penalty, "KL estimator of the in-reward penalty."),
      HS_CONFIG_KEY(algorithm.kl_ctrl.type, "KL coefficient controller."),
      HS_CONFIG_KEY(algorithm.kl_ctrl.kl_coef, "Initial (or fixed) KL coefficient beta."),
      HS_CONFIG_KEY(algorithm.kl_ctrl.horizon, "Adaptive controller horizon in samples."),
      HS_CONFIG_KEY(algorithm.kl_ctrl.target_kl, "Adaptive controller target KL."),
      HS_CONFIG_KEY(algorithm.filter_groups.enable, "DAPO's dynamic sampling: drop groups whose responses all score alike and generate more until train_batch_size prompts are kept."),
      HS_CONFIG_KEY(algorithm.filter_groups.metric, "What must vary within a kept group: acc, score or seq_reward (the rule score; verl's seq_final_reward, after the in-reward KL, is not supported)."),
      HS_CONFIG_KEY(algorithm.filter_groups.max_num_gen_batches, "Generation rounds per step before the step fails; 0 = no limit."),
      HS_CONFIG_KEY(algorithm.rollout_correction.rollout_is, "Rollout correction IS weights pi_old/pi_rollout: null (off), token or sequence; multiplied into the policy loss after clipping."),
      HS_CONFIG_KEY(algorithm.rollout_correction.rollout_is_threshold, "Truncation of the rollout IS weights (TIS)."),
      HS_CONFIG_KEY(algorithm.rollout_correction.rollout_is_batch_normalize, "Scale the rollout IS weights to mean 1 over the batch."),
      HS_CONFIG_KEY(algorithm.rollout_correction.rollout_rs, "Rollout rejection: null (off), token, sequence or geometric; tokens or sequences whose ratio leaves [lower, upper] leave the response mask."),
      HS_CONFIG_KEY(algorithm.rollout_correction.rollout_rs_threshold, "Upper bound of the kept ratios; required with rollout_rs (0 = null)."),
      HS_CONFIG_KEY(algorithm.rollout_correction.rollout_rs_threshold_lower, "Lower bound of the kept ratios; 0 = 1 / upper."),
      HS_CONFIG_KEY(algorithm.rollout_correction.rollout_token_veto_threshold, "Reject a whole sequence when any token's ratio is below this; 0 = no veto."),

      HS_CONFIG_KEY(trainer.project_name, "Project name (logs, checkpoint directory)."),
      HS_CONFIG_KEY(trainer.experiment_name, "Experiment name (logs, checkpoint directory)."),
      HS_CONFIG_KEY(trainer.total_epochs, "Epochs over the training prompts."),
      HS_CONFIG_KEY(trainer.total_training_steps, "Stop after this many steps; -1 = total_epochs x batches per epoch."),
      HS_CONFIG_KEY(trainer.nnodes, "Nodes."),
      HS_CONFIG_KEY(trainer.n_gpus_per_node, "Ranks per node."),
      HS_CONFIG_KEY(trainer.device,
                    "cpu or cuda: where the models live (the batch stays on the CPU; see Running on CUDA)."),
      HS_CONFIG_KEY(trainer.save_freq, "Checkpoint every this many steps; -1 = never."),
      HS_CONFIG_KEY(trainer.test_freq, "Validate every this many steps; -1 = only before/after training."),
      HS_CONFIG_KEY(trainer.resume_mode, "auto: resume from the latest checkpoint in default_local_dir (a split rollout pool too, with the placement and async_mode it was saved with; not a split reference: docs/architecture.md); disable: start fresh."),
      HS_CONFIG_KEY(trainer.val_before_train, "Validate once before the first step."),
      HS_CONFIG_KEY(trainer.log_val_generations, "Validation samples printed per validation: the decoded prompt and response, the ground truth and the score; 0 = none."),
      HS_CONFIG_KEY(trainer.critic_warmup, "Steps during which only the critic is updated."),
      HS_CONFIG_KEY(trainer.default_local_dir, "Checkpoint directory; ${a.b} refers to another key."),
      HS_CONFIG_KEY(trainer.balance_batch, "Reorder each batch so data-parallel ranks get equal token counts."),
      HS_CONFIG_KEY(trainer.logger, "Metric sinks: [console] (every metric also goes to the run database; verl's other loggers are refused)."),

      HS_CONFIG_KEY(async_training.staleness_threshold, "hybridscope.async_mode=fully_async: the share of stale samples allowed (verl's meaning). Per weight version the rollouter starts at most floor((1 + staleness_threshold) x trigger_parameter_sync_step x train_batch_size) prompt groups, counting those still queued or in flight; that is also the queue's bound. 0 = on policy within a sync window."),
      HS_CONFIG_KEY(async_training.trigger_parameter_sync_step, "hybridscope.async_mode=fully_async: training steps between two weight syncs to the rollout ranks (sync_rollout_weights)."),
      HS_CONFIG_KEY(async_training.require_batches, "hybridscope.async_mode=fully_async: PPO mini-batches per training step; require_batches x actor.ppo_mini_batch_size must equal data.train_batch_size."),
      HS_CONFIG_KEY(async_training.partial_rollout, "hybridscope.async_mode=fully_async: a weight sync that arrives mid-generation is joined between two tokens and the in-flight sequences go on with the new weights (true); false: the sync waits until they are finished."),

      HS_CONFIG_KEY(hybridscope.model.vocab_size, "Vocabulary size; 0 = the tokenizer's."),
      HS_CONFIG_KEY(hybridscope.model.hidden_size, "Model width."),
      HS_CONFIG_KEY(hybridscope.model.intermediate_size, "SwiGLU MLP width."),
      HS_CONFIG_KEY(hybridscope.model.num_hidden_layers, "Decoder layers."),
      HS_CONFIG_KEY(hybridscope.model.num_attention_heads, "Query heads; must divide hidden_size with an even head_dim."),
      HS_CONFIG_KEY(hybridscope.model.num_key_value_heads, "Key/value heads (grouped-query attention); must divide num_attention_heads."),
      HS_CONFIG_KEY(hybridscope.model.max_position_embeddings, "Longest sequence; >= data.max_prompt_length + data.max_response_length."),
      HS_CONFIG_KEY(hybridscope.model.rope_theta, "Rotary embedding base."),
      HS_CONFIG_KEY(hybridscope.model.rms_norm_eps, "RMSNorm epsilon."),
      HS_CONFIG_KEY(hybridscope.model.tie_word_embeddings, "Share the input embedding and the output head."),
      HS_CONFIG_KEY(hybridscope.model.initializer_range, "Std of the normal weight initialisation."),
      HS_CONFIG_KEY(hybridscope.model.architecture, "Decoder family: llama, qwen2 (q/k/v biases) or qwen3 (per-head q/k RMSNorm)."),
      HS_CONFIG_KEY_AS(hybridscope.model.head_dim, hybridscope.model.explicit_head_dim, "Attention head width; 0 = hidden_size / num_attention_heads (Qwen3 sets 128)."),
      HS_CONFIG_KEY(hybridscope.tokenizer, "Tokenizer: auto (hf when data.tokenizer is set or the model path holds tokenizer.json, else char), char (the built-in character tokenizer, 98 ids) or hf (tokenizer.json and its chat template)."),
      HS_CONFIG_KEY(hybridscope.kv_block_size, "Tokens per KV-cache block."),
      HS_CONFIG_KEY(hybridscope.expandable_segments, "trainer.device=cuda only: the caching allocator grows segments in place (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True) instead of a segment per large allocation, which keeps the KV pool and the training phases from fragmenting each other's memory."),
      HS_CONFIG_KEY(hybridscope.kv_num_blocks, "KV blocks in the pool; -1 = sized from max_num_seqs and the sequence length (on CUDA no more than rollout.gpu_memory_utilization leaves)."),
      HS_CONFIG_KEY(hybridscope.num_threads, "Intra-op threads (inter-op is 1)."),
      HS_CONFIG_KEY(hybridscope.seed, "Seed of weights initialisation and sampling."),
      HS_CONFIG_KEY(hybridscope.db, "Run database (SQLite) this run writes."),
      HS_CONFIG_KEY(hybridscope.warmup.files, "Warm-up data (verl JSONL; target \"#### <ground_truth>\"); empty = data.train_files."),
      HS_CONFIG_KEY(hybridscope.warmup.steps, "Supervised warm-up steps before RL; 0 = none."),
      HS_CONFIG_KEY(hybridscope.warmup.batch_size, "Sequences per warm-up step."),
      HS_CONFIG_KEY(hybridscope.warmup.lr, "Warm-up learning rate."),
      HS_CONFIG_KEY(hybridscope.probes.enable, "Record ranges, memory/KV-pool samples and switches; install the CPU tracking allocator. false: trace-only ranges cost a branch; timing_s/* and step metrics stay."),
      HS_CONFIG_KEY(hybridscope.probes.cupti_raw_steps, "Steps whose raw CUPTI records (every kernel, copy, memset and runtime call) are kept, like Nsight's capture range: none, all, N or A-B. Every step's GPU activity is aggregated either way (kernel_stats, stream_busy: per step, range and kernel name)."),
      HS_CONFIG_KEY(hybridscope.probes.memory_interval_ms, "Memory samples (phase \"timer\") every this many ms besides the phase boundaries; 0 = only at phase boundaries."),
      HS_CONFIG_KEY(hybridscope.recorder.on_write_error, "What the run does once its recorder failed to write records to the run database (a full disk, an I/O error): continue (train on; the lost records are counted in runs.write_errors, named in the run's status_message and warned about at the end) or stop (end the run at the next step boundary, status failed, with the database and the OS error; non-zero exit)."),
      HS_CONFIG_KEY(hybridscope.dist.backend, "Process groups: auto (gloo on cpu, nccl on cuda), gloo or nccl."),
      HS_CONFIG_KEY(hybridscope.dist.timeout_s, "Seconds the rendezvous and each collective wait for the other ranks before failing."),
      HS_CONFIG_KEY(hybridscope.dist.shm_bytes, "Gloo groups whose ranks all run on one host move their CPU all-reduces and all-gathers of up to this many bytes and their barriers, and their batched exchanges (the weight switch's), larger all-gathers and reduce-scatters (fsdp's) of any size, through a shared-memory segment made with the group (/dev/shm: about 3 x ranks x this per group) where each rank yields its core until its peers have written, instead of through Gloo's threads and sockets; larger all-reduces, broadcasts, single sends and receives, and groups that span hosts use Gloo. 0 = Gloo for all. Where a rank cannot map the segment the group keeps Gloo and says why on stderr."),
      HS_CONFIG_KEY(hybridscope.placement.actor, "World ranks of the actor (training and rollout) when roles are split, e.g. [0, 1]; [] = every rank."),
      HS_CONFIG_KEY(hybridscope.placement.ref, "World ranks of the reference policy when split from the actor, e.g. [2, 3]; [] = colocated with the actor."),
      HS_CONFIG_KEY(hybridscope.placement.rollout, "World ranks that only generate (verl's rollout pool with hybrid_engine=false), e.g. [2, 3]; the actor's weights reach them after each update (timing_s/sync_rollout_weights); [] = the actor generates."),
      HS_CONFIG_KEY(hybridscope.reshard.mode, "Train->rollout resharding: hybrid (HybridFlow), vanilla (gather the TP x PP group) or naive (gather everything, DS-Chat)."),
      HS_CONFIG_KEY(hybridscope.decode.device_loop, "Rollout decode with its state on the device: each sequence's KV blocks reserved for its whole response when its wave starts (the pool's peak is then the wave's worst case), tokens, log-probs and stop flags kept on the device, and the host reading the stop flags only every stop_check_interval steps, when it drops the finished rows. false: the host loop (a host read of the sampled tokens every step). Not with async_training.partial_rollout."),
      HS_CONFIG_KEY(hybridscope.decode.stop_check_interval, "device_loop: decode steps between two host reads of the stop flags (>= 1); a finished row is decoded (and discarded) until the next read. 1 keeps the host loop's batches, and on CPU its exact tokens."),
      HS_CONFIG_KEY(hybridscope.decode.paged_kernel, "trainer.device=cuda: each decode step's attention by hybridscope's paged-attention CUDA kernel, which reads the KV block tables on the device, instead of gathering every sequence's context into one tensor (head_dim 32, 64, 96, 128 or 256)."),
      HS_CONFIG_KEY(hybridscope.decode.cuda_graphs, "trainer.device=cuda with device_loop and paged_kernel, rollout tensor_model_parallel_size 1: each decode step replays a CUDA graph captured once per batch-size bucket (1, 2, 4, 8, then every 8 up to rollout.max_num_seqs), the batch padded to its bucket with rows that write one scratch KV block."),
      HS_CONFIG_KEY(hybridscope.fused_adamw, "Every AdamW step (actor, critic) as one call of ATen's fused AdamW (_fused_adamw_: multi-tensor kernels on CUDA, a vectorised loop on CPU) instead of LibTorch's AdamW, about ten ops per parameter; the same update to float32 rounding, the same optimizer state and checkpoints."),
      HS_CONFIG_KEY(hybridscope.async_mode, "sync: each step trains on what it generated; one_step_off (needs hybridscope.placement.rollout): the rollout ranks generate batch k+1 while the actor trains on batch k, with weights one update old (verl's one-step-off-policy trainer); fully_async (needs hybridscope.placement.rollout, async_training.*): the rollout ranks stream prompt groups into a bounded queue and the actor trains whenever a batch is in it, syncing the weights every async_training.trigger_parameter_sync_step steps (verl's fully-async rollouter/trainer)."),
      HS_CONFIG_KEY(hybridscope.peak_flops, "FLOP/s denominator of perf/mfu; -1 = a measured float32 GEMM on cpu (the faster of BLAS and oneDNN), "
                                            "the device's bf16 peak by name (else a measured bf16 GEMM) on cuda."),
      HS_CONFIG_KEY(hybridscope.precision, "fp32, or bf16: bf16 compute over fp32 master weights and optimizer state; bf16 rollout weights and KV cache."),
      HS_CONFIG_KEY(hybridscope.attention, "Attention kernel: auto (scaled_dot_product_attention on CUDA, eager on CPU), sdpa, eager, or flash (trainer.device=cuda, precision bf16, use_remove_padding: the packed forwards by FlashAttention-2's varlen kernel, the padded ones as auto)."),
      HS_CONFIG_KEY(hybridscope.cpu_matmul, "Which LibTorch library multiplies the linear layers' float32 matrices on CPU, forward and backward: "
                                            "onednn (AVX-512 kernels wherever the CPU has them) or blas (torch::linear: MKL in the PyPI wheel, "
                                            "whose kernels stay on AVX2 on AMD CPUs; 2.0-2.4x slower than onednn on this project's AMD EPYC build machine). "
                                            "Results differ only by float32 rounding; bf16 and CUDA always take torch::linear."),
  };
  return table;
}

#undef HS_CONFIG_KEY
#undef HS_CONFIG_KEY_AS

const Config& defaults() {
  static const Config* const config = new Config();  // never destroyed: safe at exit
  return *config;
}

}  // namespace detail

const char* to_string(AdvEstimator v) { return detail::canonical_name(v); }
const char* to_string(LossAggMode v) { return detail::canonical_name(v); }
const char* to_string(PolicyLossMode v) { return detail::canonical_name(v); }
const char* to_string(KlPenalty v) { return detail::canonical_name(v); }
const char* to_string(KlCtrlType v) { return detail::canonical_name(v); }
const char* to_string(Truncation v) { return detail::canonical_name(v); }
const char* to_string(ActorStrategy v) { return detail::canonical_name(v); }
const char* to_string(WarmupStyle v) { return detail::canonical_name(v); }
const char* to_string(ResumeMode v) { return detail::canonical_name(v); }
const char* to_string(DeviceKind v) { return detail::canonical_name(v); }
const char* to_string(DistBackendChoice v) { return detail::canonical_name(v); }
const char* to_string(ReshardMode v) { return detail::canonical_name(v); }
const char* to_string(Precision v) { return detail::canonical_name(v); }
const char* to_string(AttentionKernel v) { return detail::canonical_name(v); }
const char* to_string(CpuMatmul v) { return detail::canonical_name(v); }
const char* to_string(RewardRule v) { return detail::canonical_name(v); }
const char* to_string(TokenizerKind v) { return detail::canonical_name(v); }
const char* to_string(ModelArchitecture v) { return detail::canonical_name(v); }
const char* to_string(OnWriteError v) { return detail::canonical_name(v); }
const char* to_string(AsyncMode v) { return detail::canonical_name(v); }
const char* to_string(RewardManager v) { return detail::canonical_name(v); }
const char* to_string(FilterGroupsMetric v) { return detail::canonical_name(v); }
const char* to_string(RolloutCorrectionLevel v) { return detail::canonical_name(v); }

template <class E>
std::optional<E> from_string(std::string_view name) {
  return detail::enum_from_name<E>(name);
}

template <class E>
std::vector<std::string> spellings() {
  std::vector<std::string> names;
  for (const auto& s : detail::EnumSpellings<E>::kAll) names.emplace_back(s.name);
  return names;
}

#define HS_CONFIG_ENUM(E)                                      \
  template std::optional<E> from_string<E>(std::string_view); \
  template std::vector<std::string> spellings<E>();
HS_CONFIG_ENUM(AdvEstimator)
HS_CONFIG_ENUM(LossAggMode)
HS_CONFIG_ENUM(PolicyLossMode)
HS_CONFIG_ENUM(KlPenalty)
HS_CONFIG_ENUM(KlCtrlType)
HS_CONFIG_ENUM(Truncation)
HS_CONFIG_ENUM(ActorStrategy)
HS_CONFIG_ENUM(WarmupStyle)
HS_CONFIG_ENUM(ResumeMode)
HS_CONFIG_ENUM(DeviceKind)
HS_CONFIG_ENUM(DistBackendChoice)
HS_CONFIG_ENUM(ReshardMode)
HS_CONFIG_ENUM(Precision)
HS_CONFIG_ENUM(AttentionKernel)
HS_CONFIG_ENUM(CpuMatmul)
HS_CONFIG_ENUM(RewardRule)
HS_CONFIG_ENUM(TokenizerKind)
HS_CONFIG_ENUM(ModelArchitecture)
HS_CONFIG_ENUM(OnWriteError)
HS_CONFIG_ENUM(AsyncMode)
HS_CONFIG_ENUM(RewardManager)
HS_CONFIG_ENUM(FilterGroupsMetric)
HS_CONFIG_ENUM(RolloutCorrectionLevel)
#undef HS_CONFIG_ENUM

}  // namespace hs::trainer
