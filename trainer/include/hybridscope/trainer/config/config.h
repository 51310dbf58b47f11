// config.h — the trainer's typed configuration.
//
// The YAML file uses verl's key names (data.*, actor_rollout_ref.*, critic.*, reward_model.*,
// algorithm.*, trainer.*) plus a hybridscope.* section for our own keys. It is parsed exactly once
// (config_loader.cpp) into these structs; nothing else in the project reads YAML. Every key, its
// default and its meaning is listed in docs/config.md. Deliberately free of LibTorch.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "hybridscope/trainer/config_values.h"  // the enums a run database's readers branch on

namespace hs::trainer {

/// A configuration problem: the message names the key(s) and says what to do.
class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class AdvEstimator {
  kGae, kGrpo, kRloo, kReinforcePlusPlus, kReinforcePlusPlusBaseline, kRemax,
  kOpo, kGrpoPassk, kGpg,  // verl "opo", "grpo_passk", "gpg" (core_algos.h)
};
/// actor.policy_loss.loss_mode: verl's registered policy losses (core_algos.h).
enum class PolicyLossMode { kVanilla, kGspo, kGpg, kClipCov, kKlCov };
enum class LossAggMode { kTokenMean, kSeqMeanTokenSum, kSeqMeanTokenMean, kSeqMeanTokenSumNorm };
/// KL estimators (verl's kl_penalty): k1 "kl", "abs", k2 "mse", k3 "low_var_kl".
enum class KlPenalty { kKl, kAbs, kMse, kLowVarKl };
enum class KlCtrlType { kFixed, kAdaptive };
enum class Truncation { kError, kLeft, kRight };
/// optim.warmup_style: the learning rate after the linear warm-up.
enum class WarmupStyle { kConstant, kCosine };
/// trainer.resume_mode: auto resumes from the latest checkpoint in default_local_dir.
enum class ResumeMode { kAuto, kDisable };
/// hybridscope.dist.backend: auto = nccl on cuda, gloo on cpu (process_group.h's DistBackend is the
/// resolved one).
enum class DistBackendChoice { kAuto, kGloo, kNccl };
/// hybridscope.recorder.on_write_error: what a run does once its recorder failed to write records
/// (a full disk, an I/O error): continue — train on, count the lost records and warn at the end — or
/// stop at the next step boundary with the database, the OS error and a non-zero exit.
enum class OnWriteError { kContinue, kStop };
/// hybridscope.attention: which kernel computes attention (model.h).
enum class AttentionKernel {
  kAuto,   // scaled_dot_product_attention on CUDA tensors, eager on CPU ones
  kSdpa,   // at::scaled_dot_product_attention (fused kernels on CUDA; needs LibTorch 2.1+)
  kEager,  // baddbmm + softmax (in float32, as HF's eager attention) + bmm
  /// CUDA, bf16: the packed forwards (use_remove_padding) by FlashAttention-2's varlen kernel
  /// (ATen's _flash_attention_forward with cu_seqlens, as verl's flash_attn_varlen_func); the
  /// padded forwards as kAuto.
  kFlash,
};
/// hybridscope.cpu_matmul: which of LibTorch's libraries multiplies the linear layers' float32
/// matrices on CPU (model.h). Other dtypes and CUDA tensors always take torch::linear.
enum class CpuMatmul {
  kOneDnn,  // oneDNN (in LibTorch): AVX-512 kernels wherever the CPU has them
  kBlas,    // torch::linear, i.e. LibTorch's BLAS: MKL in the PyPI wheel, AVX2-only on AMD CPUs
};
/// reward_model.rule: the built-in rule reward (reward.h).
enum class RewardRule { kGsm8k };
/// reward_model.reward_manager: how scores become token rewards (verl's reward managers). naive: the
/// score on the last response token; dapo: the same plus the overlong buffer (reward_model.overlong_buffer).
enum class RewardManager { kNaive, kDapo };
/// algorithm.filter_groups.metric: what must vary within a kept group (DAPO's dynamic sampling).
/// acc, score: the rule score; seq_reward: the sequence's reward after the overlong shaping.
enum class FilterGroupsMetric { kAcc, kScore, kSeqReward };
/// algorithm.rollout_correction.rollout_is / rollout_rs: the level of the ratio pi_old / pi_rollout
/// (rollout_correction.h). null: off; token: per token; sequence: exp(sum of the log ratios) per
/// sequence; geometric: exp(mean log ratio) per sequence (rollout_rs only; validate() refuses it for
/// rollout_is, as verl does).
enum class RolloutCorrectionLevel { kNull, kToken, kSequence, kGeometric };
/// hybridscope.tokenizer: char = the built-in character tokenizer; hf = a HuggingFace tokenizer
/// directory's tokenizer.json (byte-level BPE) with its chat template (text_setup.h); auto = hf when
/// data.tokenizer is set or actor_rollout_ref.model.path holds a tokenizer.json (as verl reads the
/// model's tokenizer), else char.
enum class TokenizerKind { kAuto, kChar, kHf };
/// The char tokenizer's vocabulary: <pad>, <bos>, <eos> and printable ASCII 32..126 (CharTokenizer,
/// data/tokenizer.h, promises it; validate() checks hybridscope.model.vocab_size against it).
inline constexpr int kCharTokenizerVocabSize = 98;
/// hybridscope.model.architecture / a checkpoint's config.json model_type: the decoder family.
/// llama: Llama 2/3 (no attention biases); qwen2: Qwen2/Qwen2.5 (q/k/v biases); qwen3: Qwen3
/// (per-head RMSNorm of q and k before the rotary embedding, explicit head_dim, no biases).
enum class ModelArchitecture { kLlama, kQwen2, kQwen3 };
/// hybridscope.async_mode: how generation and training overlap (docs/architecture.md, "One step
/// off policy"). sync: each step generates, then trains on what it generated. one_step_off (verl's
/// one-step-off-policy trainer; needs hybridscope.placement.rollout): the rollout ranks generate
/// batch k+1 while the actor ranks train on batch k, with weights one update old. fully_async
/// (verl's fully-async rollouter/trainer; needs the pool, async_training.*): the rollout ranks
/// stream prompt groups into a bounded queue, the actor trains whenever a batch is in it.
enum class AsyncMode { kSync, kOneStepOff, kFullyAsync };

// verl spellings of the enums above ("gae", "grpo", "rloo", "reinforce_plus_plus",
// "reinforce_plus_plus_baseline", "remax"; "token-mean", ...; "kl"/"k1", "abs", "mse"/"k2",
// "low_var_kl"/"k3"; "fixed", "adaptive"; "error", "left", "right"; "fsdp", "megatron";
// "constant", "cosine"; "auto", "disable"; "cpu", "cuda"; "auto", "gloo", "nccl"; "hybrid",
// "vanilla", "naive"; "fp32", "bf16"; "auto", "sdpa", "eager", "flash"; "onednn", "blas"; "gsm8k"; "naive", "dapo"; "acc",
// "score", "seq_reward"; "null", "token", "sequence", "geometric"; "char"; "continue", "stop"). One table
// (config_keys.h, and config_values.h for the enums the reports read too) serves the loader,
// to_string and from_string.
const char* to_string(AdvEstimator v);
const char* to_string(LossAggMode v);
const char* to_string(PolicyLossMode v);
const char* to_string(KlPenalty v);
const char* to_string(KlCtrlType v);
const char* to_string(Truncation v);
const char* to_string(ActorStrategy v);
const char* to_string(WarmupStyle v);
const char* to_string(ResumeMode v);
const char* to_string(DeviceKind v);
const char* to_string(DistBackendChoice v);
const char* to_string(ReshardMode v);
const char* to_string(Precision v);
const char* to_string(AttentionKernel v);
const char* to_string(CpuMatmul v);
const char* to_string(RewardRule v);
const char* to_string(RewardManager v);
const char* to_string(FilterGroupsMetric v);
const char* to_string(RolloutCorrectionLevel v);
const char* to_string(TokenizerKind v);
const char* to_string(ModelArchitecture v);
const char* to_string(OnWriteError v);
const char* to_string(AsyncMode v);

/// The value a spelling names, for command-line tools that take one value outside a config
/// (E is one of the enums above); std::nullopt when `name` is no spelling of E.
template <class E>
std::optional<E> from_string(std::string_view name);
/// Every spelling of E in table order (aliases included), e.g. for a command-line option's check.
template <class E>
std::vector<std::string> spellings();

struct DataConfig {
  std::string train_files = "datasets/addition/train.jsonl";
  std::string val_files = "datasets/addition/val.jsonl";
  std::string prompt_key = "prompt";
  int max_prompt_length = 512;    // tokens
  int max_response_length = 512;  // tokens
  int train_batch_size = 1024;    // prompts per step
  int gen_batch_size = -1;        // prompts per generation round of dynamic sampling (DAPO); -1 = train_batch_size
  int val_batch_size = -1;        // prompts per validation batch; -1 = the whole set at once
  Truncation truncation = Truncation::kError;
  bool shuffle = true;
  int seed = 1;
  /// verl's data.tokenizer: directory holding tokenizer.json (hybridscope.tokenizer = hf); empty =
  /// actor_rollout_ref.model.path.
  std::string tokenizer;
  /// verl's data.filter_overlong_prompts: drop rows whose templated prompt is longer than
  /// max_prompt_length when loading (counted in the log) instead of applying data.truncation.
  bool filter_overlong_prompts = false;
};

struct OptimConfig {
  double lr = 1e-6;
  double weight_decay = 0.01;
  std::array<double, 2> betas{0.9, 0.999};
  double eps = 1e-8;
  int lr_warmup_steps = -1;            // -1: use lr_warmup_steps_ratio
  double lr_warmup_steps_ratio = 0.0;  // of total training steps
  double min_lr_ratio = 0.0;           // constant schedule after warm-up when 0
  WarmupStyle warmup_style = WarmupStyle::kConstant;
};

struct ModelConfig {
  std::string path;  // HuggingFace-layout directory (config.json + model.safetensors); empty = random init
  bool enable_gradient_checkpointing = false;
  /// verl's use_remove_padding: the training forwards pack each micro-batch's real tokens into one
  /// sequence (ComputeOptions.remove_padding, model.h); results equal the padded forward's within
  /// rounding, and nothing is computed over the padding.
  bool use_remove_padding = false;
};

/// verl's actor.megatron section: the training layout's model-parallel sizes (dp = world/(tp·pp)).
struct MegatronConfig {
  int tensor_model_parallel_size = 1;
  int pipeline_model_parallel_size = 1;
};

/// verl's actor.fsdp_config offload switches (docs/config.md, "Offloading"): between the update
/// and the next update the actor's training state waits in host memory.
struct FsdpConfig {
  bool param_offload = false;      // master weights (and their freed gradients) to the host during rollout
  bool optimizer_offload = false;  // AdamW's moments to the host during rollout
  /// hybridscope's own: per-layer wrapping units (zero.h; verl always wraps each decoder layer).
  /// false: the whole model is one unit, gathered at once.
  bool per_layer = false;
  /// verl's forward_prefetch (per_layer only): the next layer's all_gather runs while this one
  /// computes, the reduce-scatter of a layer's gradients while the previous one back-propagates.
  bool forward_prefetch = false;
};

/// actor.policy_loss (verl PolicyLossConfig; defaults from verl's actor.yaml).
struct PolicyLossConfig {
  PolicyLossMode loss_mode = PolicyLossMode::kVanilla;
  double clip_cov_ratio = 0.0002;  // clip_cov: share of tokens whose gradient is cut, in (0, 1]
  double clip_cov_lb = 1.0;        // clip_cov: covariance window (lb, ub), lb < ub
  double clip_cov_ub = 5.0;
  double kl_cov_ratio = 0.0002;    // kl_cov: share of tokens that get the KL term, in (0, 1]
  double ppo_kl_coef = 0.1;        // kl_cov: weight of |logp − old_logp| on those tokens, >= 0
};

struct ActorConfig {
  ActorStrategy strategy = ActorStrategy::kFsdp;  // fsdp (ZeRO-3 shards over dp) | megatron (replicated over dp)
  int ppo_mini_batch_size = 256;       // prompts; x rollout.n samples
  int ppo_micro_batch_size_per_gpu = -1;  // samples; -1 = the whole mini-batch in one pass
  bool use_dynamic_bsz = false;
  int ppo_max_token_len_per_gpu = 16384;
  double clip_ratio = 0.2;
  double clip_ratio_low = -1;   // -1: clip_ratio
  double clip_ratio_high = -1;  // -1: clip_ratio
  double clip_ratio_c = 3.0;    // dual-clip constant, > 1
  LossAggMode loss_agg_mode = LossAggMode::kTokenMean;
  double loss_scale_factor = -1;  // seq-mean-token-sum-norm divisor; -1 = the padded response length
  PolicyLossConfig policy_loss{};
  double entropy_coeff = 0.0;
  bool use_kl_loss = false;
  double kl_loss_coef = 0.001;
  KlPenalty kl_loss_type = KlPenalty::kLowVarKl;
  int ppo_epochs = 1;
  bool shuffle = false;
  double grad_clip = 1.0;
  OptimConfig optim{};
  MegatronConfig megatron{};  // tp = pp = 1: data parallel over the whole world
  FsdpConfig fsdp_config{};

  double effective_clip_low() const { return clip_ratio_low >= 0 ? clip_ratio_low : clip_ratio; }
  double effective_clip_high() const { return clip_ratio_high >= 0 ? clip_ratio_high : clip_ratio; }
};

/// verl's ref.fsdp_config: the reference policy's weights wait in host memory except while it
/// computes log-probs.
struct RefFsdpConfig {
  bool param_offload = false;
};

struct RefConfig {
  int log_prob_micro_batch_size_per_gpu = -1;  // -1 = the actor's ppo_micro_batch_size_per_gpu
  RefFsdpConfig fsdp_config{};
};

struct SamplingParams {
  double temperature = 1.0;
  int top_k = -1;     // -1 = off
  double top_p = 1.0;
  int n = 1;
  bool do_sample = true;  // false = greedy
};

struct RolloutConfig {
  std::string name = "hybridscope";  // the built-in paged-KV engine, the only one (validate())
  double temperature = 1.0;
  int top_k = -1;
  double top_p = 1.0;
  int n = 1;
  bool do_sample = true;
  int tensor_model_parallel_size = 1;
  double gpu_memory_utilization = 0.5;  // share of device memory the KV pool may take (CUDA)
  int max_num_seqs = 256;
  bool free_cache_engine = true;
  int log_prob_micro_batch_size_per_gpu = -1;  // -1 = the actor's ppo_micro_batch_size_per_gpu
  SamplingParams val_kwargs{0.0, -1, 1.0, 1, false};
  /// verl's update_weights_bucket_megabytes: the largest bucket (MiB) of the weight sync to a split
  /// rollout pool (hybridscope.placement.rollout); a parameter larger than it travels alone.
  int update_weights_bucket_megabytes = 512;

  SamplingParams sampling() const { return SamplingParams{temperature, top_k, top_p, n, do_sample}; }
};

struct ActorRolloutRefConfig {
  bool hybrid_engine = true;  // always: false is refused (validate()); roles split by hybridscope.placement
  ModelConfig model{};
  ActorConfig actor{};
  RefConfig ref{};
  RolloutConfig rollout{};

  /// Rows per log-prob pass (old or reference log-probs) for a configured
  /// log_prob_micro_batch_size_per_gpu: itself when set, else the actor's micro-batch, so that a
  /// pass never holds more than a training micro-batch's activations (verl refuses it unset).
  int log_prob_micro_batch(int configured) const {
    return configured > 0 ? configured : actor.ppo_micro_batch_size_per_gpu;
  }
};

struct CriticConfig {
  ModelConfig model{};  // empty path: initialise from the actor's weights with a fresh value head
  OptimConfig optim{1e-5, 0.01, {0.9, 0.999}, 1e-8, -1, 0.0, 0.0, WarmupStyle::kConstant};
  int ppo_mini_batch_size = 256;
  int ppo_micro_batch_size_per_gpu = -1;
  int ppo_epochs = 1;
  double cliprange_value = 0.5;
  double grad_clip = 1.0;
  LossAggMode loss_agg_mode = LossAggMode::kTokenMean;
  bool use_dynamic_bsz = false;
  int ppo_max_token_len_per_gpu = 32768;
};

/// verl's Python reward hook: refused unless unset (validate(); the rules are built in, reward.h).
struct CustomRewardFunction {
  std::string path;
  std::string name = "compute_score";
};

/// reward_model.overlong_buffer (verl's DAPO reward manager): a response longer than
/// max_response_length − len loses (length − (max_response_length − len)) / len · penalty_factor.
struct OverlongBufferConfig {
  bool enable = false;
  int len = 0;                 // tokens of the buffer before max_response_length
  double penalty_factor = 1.0;
};

struct RewardModelConfig {
  bool enable = false;  // true: a scalar-head model scores responses instead of the rule
  ModelConfig model{};
  RewardManager reward_manager = RewardManager::kNaive;  // naive: the score on the last response token; dapo: plus the overlong buffer
  OverlongBufferConfig overlong_buffer{};
  RewardRule rule = RewardRule::kGsm8k;  // gsm8k: exact match of the answer after ####
  CustomRewardFunction custom_reward_function{};
};

struct KlCtrlConfig {
  KlCtrlType type = KlCtrlType::kFixed;
  double kl_coef = 0.001;
  int horizon = 10000;
  double target_kl = 0.1;
};

/// algorithm.rollout_correction (verl's RolloutCorrectionConfig; rollout_correction.h). verl's
/// nulls are RolloutCorrectionLevel::kNull ("null") for the levels and 0 for the thresholds.
struct RolloutCorrectionConfig {
  RolloutCorrectionLevel rollout_is = RolloutCorrectionLevel::kNull;  // IS weights: null (off), token, sequence
  double rollout_is_threshold = 2.0;        // truncation of the IS weights
  bool rollout_is_batch_normalize = false;  // scale the IS weights to mean 1 over the batch
  RolloutCorrectionLevel rollout_rs = RolloutCorrectionLevel::kNull;  // rejection: null (off), token, sequence, geometric
  double rollout_rs_threshold = 0;          // upper bound of the kept ratios (required with rollout_rs)
  double rollout_rs_threshold_lower = 0;    // lower bound; 0: 1 / upper
  double rollout_token_veto_threshold = 0;  // reject a sequence with a token ratio below it; 0: no veto
  bool enabled() const {
    return rollout_is != RolloutCorrectionLevel::kNull || rollout_rs != RolloutCorrectionLevel::kNull ||
           rollout_token_veto_threshold > 0;
  }
};

/// algorithm.filter_groups (DAPO's dynamic sampling): groups whose responses all score alike
/// teach nothing; they are dropped and more prompts generated until train_batch_size are kept.
struct FilterGroupsConfig {
  bool enable = false;
  FilterGroupsMetric metric = FilterGroupsMetric::kAcc;  // acc, score, seq_reward: the sequence's rule score (the same here)
  int max_num_gen_batches = 0;  // generation rounds per step before giving up; 0 = no limit
};

struct AlgorithmConfig {
  double gamma = 1.0;
  double lam = 1.0;
  AdvEstimator adv_estimator = AdvEstimator::kGae;
  bool norm_adv_by_std_in_grpo = true;
  bool use_kl_in_reward = false;
  KlPenalty kl_penalty = KlPenalty::kKl;
  KlCtrlConfig kl_ctrl{};
  RolloutCorrectionConfig rollout_correction{};
  FilterGroupsConfig filter_groups{};
};

/// async_training (verl's fully-async recipe, fully_async_ppo_trainer.yaml: the same names and
/// defaults), read with hybridscope.async_mode=fully_async (fully_async.h).
struct AsyncTrainingConfig {
  /// Share of stale samples allowed: the rollouter starts at most (1 + staleness_threshold) x
  /// trigger_parameter_sync_step x required samples per weight version (verl's max_required_samples,
  /// also the queue's bound). 0: on policy within each sync window.
  double staleness_threshold = 0.1;
  int trigger_parameter_sync_step = 4;  // training steps between two weight syncs to the rollouter
  int require_batches = 1;              // ppo mini-batches per training step (x ppo_mini_batch_size prompts)
  /// A sync that arrives mid-generation: the in-flight sequences join it between two tokens and go
  /// on with the new weights (true), or the sync waits until they are finished (false).
  bool partial_rollout = true;
};

struct TrainerConfig {
  std::string project_name = "hybridscope";
  std::string experiment_name = "run";
  int total_epochs = 1;
  int total_training_steps = -1;  // -1: total_epochs x batches per epoch
  int nnodes = 1;
  int n_gpus_per_node = 1;        // ranks per node (world = nnodes x n_gpus_per_node, Config::world_size())
  DeviceKind device = DeviceKind::kCpu;
  int save_freq = -1;             // steps; -1 = never
  int test_freq = -1;             // steps; -1 = only before/after training
  ResumeMode resume_mode = ResumeMode::kAuto;
  bool val_before_train = true;
  int log_val_generations = 0;   // validation samples printed (prompt, response, score) per validation
  int critic_warmup = 0;          // steps during which only the critic is updated
  std::string default_local_dir = "checkpoints/${trainer.project_name}/${trainer.experiment_name}";
  bool balance_batch = false;
  std::vector<std::string> logger{"console"};
};

/// Shape of a randomly initialised model (Llama/Qwen2 naming, as in HuggingFace config.json).
/// Rotary frequency scaling (config.json rope_scaling / rope_parameters). kDefault: inv_freq_i =
/// theta^(-2i/D). kLlama3: Llama 3.1's piecewise scaling of inv_freq (HF
/// _compute_llama3_parameters): wavelengths longer than original_max_position_embeddings /
/// low_freq_factor are divided by factor, shorter than .../ high_freq_factor kept, and the band
/// between interpolated smoothly.
struct RopeScaling {
  enum class Type { kDefault, kLlama3 };
  Type type = Type::kDefault;
  double factor = 8.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int original_max_position_embeddings = 8192;
};

struct ModelShape {
  int vocab_size = 0;  // 0: take the tokenizer's vocabulary size
  int hidden_size = 128;
  int intermediate_size = 384;
  int num_hidden_layers = 2;
  int num_attention_heads = 4;
  int num_key_value_heads = 2;
  int max_position_embeddings = 1024;  // >= data.max_prompt_length + data.max_response_length
  double rope_theta = 10000.0;
  double rms_norm_eps = 1e-6;
  bool tie_word_embeddings = false;
  double initializer_range = 0.02;
  ModelArchitecture architecture = ModelArchitecture::kLlama;
  int explicit_head_dim = 0;  // config.json head_dim (Qwen3: 128 whatever the width); 0 = hidden / heads
  RopeScaling rope_scaling{};  // from a checkpoint's config.json only (no hybridscope.model key)

  int head_dim() const { return explicit_head_dim > 0 ? explicit_head_dim : hidden_size / num_attention_heads; }
  /// Qwen2's q/k/v projections carry biases (o_proj and the MLP do not).
  bool qkv_bias() const { return architecture == ModelArchitecture::kQwen2; }
  /// Qwen3 normalises each head of q and k (RMSNorm over head_dim) before the rotary embedding.
  bool qk_norm() const { return architecture == ModelArchitecture::kQwen3; }
};

/// Supervised warm-up that produces the base policy the RL run starts from (prompt -> answer).
struct WarmupConfig {
  std::string files;      // JSONL rows whose ground truth is the target; empty = data.train_files
  int steps = 0;          // 0 = no warm-up
  int batch_size = 64;    // sequences per step
  double lr = 1e-3;
};

struct ProbesConfig {
  bool enable = true;  // record ranges and samples, CPU tracking allocator (false: timing_s/* only)
  int memory_interval_ms = 100;  // memory samples on a timer besides phase boundaries; 0 = none
  std::string cupti_raw_steps = "1";  // steps whose raw CUPTI records are kept: "none", "all", "N", "A-B"
};

/// The recorder behind the probes (probes/include/hybridscope/probes/recorder.h).
struct RecorderConfig {
  OnWriteError on_write_error = OnWriteError::kContinue;  // docs/reliability.md, "Faults injected"
};

/// The distributed runtime (c10d process groups, TCPStore rendezvous).
struct DistConfig {
  DistBackendChoice backend = DistBackendChoice::kAuto;  // auto: gloo on cpu, nccl on cuda
  double timeout_s = 300;        // rendezvous and every collective give up after this long
  int shm_bytes = 1 << 20;  // one host's small CPU collectives through shared memory; 0: Gloo
};

/// The rollout's decode loop (docs/config.md, "Decode"). The fast paths are off until a GPU run has
/// proven them against the eager path they replace (issue 36).
struct DecodeConfig {
  /// Decode state on the device: every sequence's KV blocks reserved for its whole response at
  /// the wave's start, tokens, log-probs and stop flags kept on the device, the host reading the
  /// stop flags every stop_check_interval steps (and dropping the finished rows then).
  bool device_loop = false;
  int stop_check_interval = 8;  // device_loop: decode steps between two host reads of the stop flags
  bool paged_kernel = false;    // CUDA: decode attention by hybridscope's paged-attention kernel
  /// CUDA, with device_loop and paged_kernel: each decode step replays a CUDA graph captured per
  /// batch-size bucket (vLLM's sizes: 1, 2, 4, 8, then every 8), the batch padded to its bucket.
  bool cuda_graphs = false;
};

/// How the actor's weights move between the training and the generation layout (3D-HybridEngine).
struct ReshardConfig {
  ReshardMode mode = ReshardMode::kHybrid;  // docs/resharding.md
};

/// Which ranks each role runs on (docs/resharding.md, "Placement"). Empty lists: colocated — every
/// role time-shares every rank (the hybrid engine). A non-empty `ref` splits the reference policy
/// onto its own ranks (`actor` then lists the others); ranks are world ranks written as a list,
/// e.g. actor: [0, 1], ref: [2, 3]. resolved_placement() gives the checked, completed lists.
struct PlacementConfig {
  std::vector<int> actor;
  std::vector<int> ref;
  /// World ranks that only generate (verl's rollout pool, hybrid_engine=false): the actor's weights
  /// reach them by the sync after each update (rollout_server.h); [] = the actor generates.
  std::vector<int> rollout;
};

struct HybridscopeSection {
  ModelShape model{};
  TokenizerKind tokenizer = TokenizerKind::kAuto;
  int kv_block_size = 16;          // tokens per KV-cache block
  int kv_num_blocks = -1;          // -1: sized from max_num_seqs and the sequence length
  bool expandable_segments = false;  // CUDA caching allocator's expandable_segments:True
  int num_threads = 2;             // intra-op threads; interop is 1 (see docs/building.md)
  std::uint64_t seed = 1;
  std::string db = "out/run.sqlite";  // run database (SQLite)
  WarmupConfig warmup{};
  ProbesConfig probes{};
  RecorderConfig recorder{};
  DistConfig dist{};
  ReshardConfig reshard{};
  DecodeConfig decode{};
  /// AdamW's update through ATen's fused kernel (Optimizer::set_fused); the same math.
  bool fused_adamw = false;
  PlacementConfig placement{};
  AsyncMode async_mode = AsyncMode::kSync;  // sync | one_step_off | fully_async (both: split rollout)
  double peak_flops = -1;  // FLOP/s denominator of perf/mfu; -1: measure this machine's GEMM peak
  /// Compute precision of every model (docs/config.md, "Precision"): fp32, or bf16 — bf16
  /// matmuls/attention (autocast) over fp32 master weights, gradients and optimizer state; the
  /// rollout model and the KV cache in bf16; logits and losses in fp32.
  Precision precision = Precision::kFp32;
  /// Attention kernel: auto (scaled_dot_product_attention on CUDA, eager on CPU), sdpa or eager.
  AttentionKernel attention = AttentionKernel::kAuto;
  /// Float32 linear layers on CPU: onednn or blas (torch::linear).
  CpuMatmul cpu_matmul = CpuMatmul::kOneDnn;
};

/// The whole resolved configuration.
struct Config {
  DataConfig data{};
  ActorRolloutRefConfig actor_rollout_ref{};
  CriticConfig critic{};
  RewardModelConfig reward_model{};
  AlgorithmConfig algorithm{};
  TrainerConfig trainer{};
  AsyncTrainingConfig async_training{};
  HybridscopeSection hybridscope{};

  /// PPO needs a critic exactly when advantages come from GAE.
  bool use_critic() const { return algorithm.adv_estimator == AdvEstimator::kGae; }
  /// The reference policy is needed for KL in the reward or in the loss.
  bool use_reference() const {
    return algorithm.use_kl_in_reward || actor_rollout_ref.actor.use_kl_loss;
  }
  /// Ranks of the run: trainer.nnodes x trainer.n_gpus_per_node.
  int world_size() const { return trainer.nnodes * trainer.n_gpus_per_node; }
};

/// hybridscope.placement resolved over the world: world ranks, each list ascending.
struct Placement {
  std::vector<int> actor;  // the actor's (training and rollout) ranks; every rank when colocated
  std::vector<int> ref;    // a split reference's ranks; empty = colocated with the actor
  std::vector<int> rollout;  // a split rollout pool's ranks; empty = the actor generates
  bool split() const { return !ref.empty(); }
  bool split_rollout() const { return !rollout.empty(); }
};

/// Loads a YAML file (empty path: defaults only), applies Hydra-style `a.b.c=value` overrides in
/// order, resolves ${a.b} interpolations in strings, validates, and returns the typed config.
/// Throws ConfigError naming the key, the expected type, the closest valid key, or the keys that
/// conflict.
Config load_config(const std::string& yaml_path, const std::vector<std::string>& overrides = {});

/// Parses YAML text the same way (for tests and for reading a config stored with a run).
Config parse_config(const std::string& yaml_text, const std::vector<std::string>& overrides = {},
                    const std::string& source_name = "<string>");

/// parse_config without its final validate(): the typed values as written (every key, type and
/// spelling checked; no relation between keys). For a caller that validates later itself — the
/// trainer's constructor validates whatever it is given — and for tests of the loader alone.
Config parse_config_unvalidated(const std::string& yaml_text, const std::vector<std::string>& overrides = {},
                                const std::string& source_name = "<string>");

/// The resolved configuration as YAML with every key (what is stored with the run).
std::string to_yaml(const Config& config);
/// Every key of the key table with its value as text (as docs/config.md's default column writes
/// it), in table order: the run database's `config` table.
std::vector<std::pair<std::string, std::string>> config_entries(const Config& config);

/// Checks the relations between keys (divisibility, ranges, placement) and refuses what this
/// trainer cannot honour; throws one ConfigError listing every problem, each naming the keys,
/// their values and the fix. The one place that decides whether a config runs: the trainer, the
/// matrix runner and the command-line tools all call it (parse_config and load_config do).
void validate(const Config& config);

/// verl values accepted so that verl's example scripts run unchanged, although hybridscope does
/// something else for them (actor_rollout_ref.rollout.name vllm/sglang: the built-in engine;
/// trainer.logger wandb, tensorboard, ...: console and the run database): one line each, which the
/// trainer prints when it starts. Empty when nothing is substituted.
std::vector<std::string> substitutions(const Config& config);
/// hybridscope.tokenizer with auto resolved (char or hf), as the trainer and make_text_setup use it.
TokenizerKind resolved_tokenizer(const Config& config);

/// hybridscope.placement checked and completed over config.world_size() (an empty actor list
/// takes the ranks the reference leaves). Throws the ConfigError validate() throws for an
/// invalid placement.
Placement resolved_placement(const Config& config);

/// Markdown tables of every key (type, default, meaning), one per section, generated from the same
/// key table that drives parsing; docs/config.md carries this text (a test keeps them equal).
std::string config_reference_markdown();

}  // namespace hs::trainer
