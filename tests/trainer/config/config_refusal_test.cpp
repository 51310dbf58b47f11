// config_refusal_test.cpp — the refusal table: every refusal of validate() is the trainer's, word
// for word. Each row's overrides go through parse_config (which validates) and, unvalidated,
// through the PPOTrainer constructor; both must throw a ConfigError with the same message, and
// that message must carry the row's text (so the row hits the refusal it is named after). A check
// added to the trainer alone, or one that validate() makes differently, fails its row.
#include <gtest/gtest.h>

#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

#include "hybridscope/trainer/config/config.h"
#include "hybridscope/trainer/loop/trainer.h"

namespace fs = std::filesystem;
using namespace hs::trainer;

namespace {

/// A small valid GRPO run on one rank (the trainer would start it); rows override it.
std::vector<std::string> base_overrides() {
  const std::string src = HS_SOURCE_DIR;
  const std::string dir = (fs::temp_directory_path() / ("hs_config_refusal_" + std::to_string(::getpid()))).string();
  return {"data.train_files=" + src + "/datasets/addition/train.jsonl",
          "data.val_files=" + src + "/datasets/addition/val.jsonl",
          "data.train_batch_size=4",
          "data.max_prompt_length=12",
          "data.max_response_length=8",
          "actor_rollout_ref.rollout.n=2",
          "actor_rollout_ref.actor.ppo_mini_batch_size=2",
          "critic.ppo_mini_batch_size=2",
          "algorithm.adv_estimator=grpo",
          "hybridscope.model.max_position_embeddings=32",
          "hybridscope.num_threads=1",
          "trainer.default_local_dir=" + dir + "/ckpt",
          "hybridscope.db=" + dir + "/run.sqlite"};
}

std::vector<std::string> with_base(const std::vector<std::string>& overrides) {
  auto all = base_overrides();
  all.insert(all.end(), overrides.begin(), overrides.end());
  return all;
}

/// The ConfigError message `f` throws; "" when it throws none (another exception fails the test).
template <class F>
std::string config_error_of(F&& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return {};
}

struct Refusal {
  const char* name;
  std::vector<std::string> overrides;
  const char* expected;  // a part of the message
};

// How GoogleTest (and so ctest's test list) prints a row: its overrides, not the struct's bytes.
void PrintTo(const Refusal& row, std::ostream* os) {
  for (const auto& o : row.overrides) *os << (&o == &row.overrides.front() ? "" : " ") << o;
}

// Every refusal in config_validate.cpp, one row each (rows of a shared helper such as at_least
// name each key it guards). Multi-rank rows set trainer.n_gpus_per_node: validate() refuses before
// the trainer looks at the launcher's environment.
const std::vector<Refusal> kRefusals = {
    // data
    {"TrainBatchPositive", {"data.train_batch_size=0"}, "data.train_batch_size = 0: must be >= 1"},
    {"PromptLengthPositive", {"data.max_prompt_length=0"}, "data.max_prompt_length = 0: must be >= 1"},
    {"ResponseLengthPositive", {"data.max_response_length=0"}, "data.max_response_length = 0: must be >= 1"},
    {"ValBatchUnsetOrPositive", {"data.val_batch_size=0"}, "data.val_batch_size = 0: must be -1 (unset) or >= 1"},
    // hybridscope.model
    {"VocabNonNegative", {"hybridscope.model.vocab_size=-1"}, "hybridscope.model.vocab_size = -1: must be >= 0"},
    {"VocabHoldsTheTokenizer", {"hybridscope.model.vocab_size=10"},
     "hybridscope.model.vocab_size = 10 is smaller than the char tokenizer's vocabulary (98)"},
    {"IntermediatePositive", {"hybridscope.model.intermediate_size=0"}, "hybridscope.model.intermediate_size = 0: must be >= 1"},
    {"LayersPositive", {"hybridscope.model.num_hidden_layers=0"}, "hybridscope.model.num_hidden_layers = 0: must be >= 1"},
    {"PositionsPositive", {"hybridscope.model.max_position_embeddings=0"},
     "hybridscope.model.max_position_embeddings = 0: must be >= 1"},
    {"RopeThetaPositive", {"hybridscope.model.rope_theta=0"}, "hybridscope.model.rope_theta = 0: must be > 0"},
    {"RmsNormEpsPositive", {"hybridscope.model.rms_norm_eps=0"}, "hybridscope.model.rms_norm_eps = 0: must be > 0"},
    {"HeadsPositive", {"hybridscope.model.num_attention_heads=0"}, "num_attention_heads (0) and num_key_value_heads (2) must all be >= 1"},
    {"HeadsDivideHidden", {"hybridscope.model.hidden_size=130"},
     "hybridscope.model.hidden_size (130) is not divisible by hybridscope.model.num_attention_heads (4)"},
    {"HeadDimEven", {"hybridscope.model.hidden_size=12"}, "= 3 is odd: rotary embeddings rotate pairs"},
    {"KvHeadsDivideHeads", {"hybridscope.model.num_key_value_heads=3"},
     "hybridscope.model.num_attention_heads (4) is not divisible by hybridscope.model.num_key_value_heads (3)"},
    {"LengthsFitPositions", {"data.max_prompt_length=30"},
     "data.max_prompt_length (30) + data.max_response_length (8) = 38 exceeds hybridscope.model.max_position_embeddings (32)"},
    // layouts on hybridscope.model
    {"HybridTpsNest",
     {"trainer.n_gpus_per_node=6", "data.train_batch_size=12", "actor_rollout_ref.actor.ppo_mini_batch_size=6",
      "hybridscope.model.num_key_value_heads=6", "hybridscope.model.num_attention_heads=6", "hybridscope.model.hidden_size=192",
      "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2", "actor_rollout_ref.rollout.tensor_model_parallel_size=3"},
     "hybridscope.reshard.mode = hybrid needs actor_rollout_ref.rollout.tensor_model_parallel_size (3) and "
     "actor_rollout_ref.actor.megatron.tensor_model_parallel_size (2) to divide one another"},
    {"PipelineDividesLayers", {"actor_rollout_ref.actor.megatron.pipeline_model_parallel_size=3"},
     "pipeline_model_parallel_size = 3 does not divide hybridscope.model.num_hidden_layers = 2"},
    {"TrainingTpSplitsHeads", {"actor_rollout_ref.actor.megatron.tensor_model_parallel_size=4"},
     "actor_rollout_ref.actor.megatron.tensor_model_parallel_size = 4 must divide hybridscope.model.num_key_value_heads (2)"},
    {"RolloutTpSplitsHeads", {"actor_rollout_ref.rollout.tensor_model_parallel_size=4"},
     "actor_rollout_ref.rollout.tensor_model_parallel_size = 4 must divide hybridscope.model.num_key_value_heads (2)"},
    // actor batches and loss
    {"MiniPositive", {"actor_rollout_ref.actor.ppo_mini_batch_size=0"}, "actor_rollout_ref.actor.ppo_mini_batch_size = 0: must be >= 1"},
    {"TrainBatchDividesByMini", {"data.train_batch_size=5"},
     "data.train_batch_size (5) is not divisible by actor_rollout_ref.actor.ppo_mini_batch_size (2)"},
    {"MicroUnsetOrPositive", {"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=0"},
     "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu = 0: must be -1 (whole mini-batch) or >= 1"},
    {"MicroDividesMiniTimesN", {"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=3"},
     "= 4 samples is not divisible by actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu (3)"},
    {"PpoEpochsPositive", {"actor_rollout_ref.actor.ppo_epochs=0"}, "actor_rollout_ref.actor.ppo_epochs = 0: must be >= 1"},
    {"TokenBudgetPositive", {"actor_rollout_ref.actor.use_dynamic_bsz=true", "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=0"},
     "actor_rollout_ref.actor.ppo_max_token_len_per_gpu = 0: must be >= 1"},
    {"ClipRatioNonNegative", {"actor_rollout_ref.actor.clip_ratio=-0.1"}, "actor_rollout_ref.actor.clip_ratio = -0.1: must be >= 0"},
    {"ClipLowUnsetOrNonNegative", {"actor_rollout_ref.actor.clip_ratio_low=-0.5"},
     "actor_rollout_ref.actor.clip_ratio_low = -0.5: must be -1 (use clip_ratio) or >= 0"},
    {"ClipHighUnsetOrNonNegative", {"actor_rollout_ref.actor.clip_ratio_high=-2"},
     "actor_rollout_ref.actor.clip_ratio_high = -2: must be -1 (use clip_ratio) or >= 0"},
    {"DualClipAboveOne", {"actor_rollout_ref.actor.clip_ratio_c=1.0"}, "actor_rollout_ref.actor.clip_ratio_c = 1: the dual-clip constant must be > 1"},
    {"KlLossCoefNonNegative", {"actor_rollout_ref.actor.kl_loss_coef=-1"}, "actor_rollout_ref.actor.kl_loss_coef = -1: must be >= 0"},
    {"GradClipPositive", {"actor_rollout_ref.actor.grad_clip=0"}, "actor_rollout_ref.actor.grad_clip = 0: must be > 0"},
    // optimizers
    {"LrNonNegative", {"actor_rollout_ref.actor.optim.lr=-1"}, "actor_rollout_ref.actor.optim.lr = -1: must be >= 0"},
    {"WeightDecayNonNegative", {"actor_rollout_ref.actor.optim.weight_decay=-1"}, "actor_rollout_ref.actor.optim.weight_decay = -1: must be >= 0"},
    {"BetasBelowOne", {"actor_rollout_ref.actor.optim.betas=[0.9, 1.0]"}, "actor_rollout_ref.actor.optim.betas = [0.9, 1]: each beta must be in [0, 1)"},
    {"EpsPositive", {"actor_rollout_ref.actor.optim.eps=0"}, "actor_rollout_ref.actor.optim.eps = 0: must be > 0"},
    {"WarmupStepsUnsetOrNonNegative", {"actor_rollout_ref.actor.optim.lr_warmup_steps=-2"},
     "actor_rollout_ref.actor.optim.lr_warmup_steps = -2: must be -1 (use the ratio) or >= 0"},
    {"WarmupRatioInUnitInterval", {"actor_rollout_ref.actor.optim.lr_warmup_steps_ratio=2"},
     "actor_rollout_ref.actor.optim.lr_warmup_steps_ratio = 2: must be in [0, 1]"},
    {"MinLrRatioInUnitInterval", {"actor_rollout_ref.actor.optim.min_lr_ratio=-0.5"},
     "actor_rollout_ref.actor.optim.min_lr_ratio = -0.5: must be in [0, 1]"},
    // reference and rollout
    {"RefMicroUnsetOrPositive", {"actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=0"},
     "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu = 0: must be -1 (unset) or >= 1"},
    {"TemperatureNonNegative", {"actor_rollout_ref.rollout.temperature=-1"}, "actor_rollout_ref.rollout.temperature = -1: must be >= 0"},
    {"TopPInRange", {"actor_rollout_ref.rollout.top_p=0"}, "actor_rollout_ref.rollout.top_p = 0: must be in (0, 1]"},
    {"TopKOffOrPositive", {"actor_rollout_ref.rollout.top_k=0"}, "actor_rollout_ref.rollout.top_k = 0: must be -1 (off) or >= 1"},
    {"RolloutNPositive", {"actor_rollout_ref.rollout.n=0"}, "actor_rollout_ref.rollout.n = 0: must be >= 1"},
    {"ValKwargs", {"actor_rollout_ref.rollout.val_kwargs.n=0"}, "actor_rollout_ref.rollout.val_kwargs.n = 0: must be >= 1"},
    {"RolloutTpPositive", {"actor_rollout_ref.rollout.tensor_model_parallel_size=0"},
     "actor_rollout_ref.rollout.tensor_model_parallel_size = 0: must be >= 1"},
    {"MaxNumSeqsPositive", {"actor_rollout_ref.rollout.max_num_seqs=0"}, "actor_rollout_ref.rollout.max_num_seqs = 0: must be >= 1"},
    {"GpuMemoryInRange", {"actor_rollout_ref.rollout.gpu_memory_utilization=0"},
     "actor_rollout_ref.rollout.gpu_memory_utilization = 0: must be in (0, 1]"},
    {"RolloutMicroUnsetOrPositive", {"actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=0"},
     "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu = 0: must be -1 (unset) or >= 1"},
    {"GroupEstimatorNeedsGroups", {"actor_rollout_ref.rollout.n=1"},
     "algorithm.adv_estimator = grpo compares the responses to one prompt, but actor_rollout_ref.rollout.n = 1"},
    // critic (GAE)
    {"CriticMiniDividesTrainBatch", {"algorithm.adv_estimator=gae", "critic.ppo_mini_batch_size=3"},
     "data.train_batch_size (4) is not divisible by critic.ppo_mini_batch_size (3)"},
    {"CriticTokenBudgetPositive", {"algorithm.adv_estimator=gae", "critic.use_dynamic_bsz=true", "critic.ppo_max_token_len_per_gpu=0"},
     "critic.ppo_max_token_len_per_gpu = 0: must be >= 1"},
    {"CriticClipNonNegative", {"algorithm.adv_estimator=gae", "critic.cliprange_value=-1"}, "critic.cliprange_value = -1: must be >= 0"},
    {"CriticGradClipPositive", {"algorithm.adv_estimator=gae", "critic.grad_clip=0"}, "critic.grad_clip = 0: must be > 0"},
    {"CriticLrNonNegative", {"algorithm.adv_estimator=gae", "critic.optim.lr=-1"}, "critic.optim.lr = -1: must be >= 0"},
    // algorithm
    {"GammaInUnitInterval", {"algorithm.gamma=1.5"}, "algorithm.gamma = 1.5: must be in [0, 1]"},
    {"LamInUnitInterval", {"algorithm.lam=-0.1"}, "algorithm.lam = -0.1: must be in [0, 1]"},
    {"KlCoefNonNegative", {"algorithm.kl_ctrl.kl_coef=-1"}, "algorithm.kl_ctrl.kl_coef = -1: must be >= 0"},
    {"AdaptiveHorizonPositive", {"algorithm.kl_ctrl.type=adaptive", "algorithm.kl_ctrl.horizon=0"},
     "algorithm.kl_ctrl.horizon = 0: must be >= 1"},
    {"AdaptiveTargetPositive", {"algorithm.kl_ctrl.type=adaptive", "algorithm.kl_ctrl.target_kl=0"},
     "algorithm.kl_ctrl.target_kl = 0: the adaptive controller"},
    // trainer
    {"TotalEpochsPositive", {"trainer.total_epochs=0"}, "trainer.total_epochs = 0: must be >= 1"},
    {"TotalStepsUnsetOrPositive", {"trainer.total_training_steps=0"}, "trainer.total_training_steps = 0: must be -1 (unset) or >= 1"},
    {"NodesPositive", {"trainer.nnodes=0"}, "trainer.nnodes = 0: must be >= 1"},
    {"RanksPerNodePositive", {"trainer.n_gpus_per_node=0"}, "trainer.n_gpus_per_node = 0: must be >= 1"},
    {"SaveFreqUnsetOrPositive", {"trainer.save_freq=0"}, "trainer.save_freq = 0: must be -1 (unset) or >= 1"},
    {"TestFreqUnsetOrPositive", {"trainer.test_freq=0"}, "trainer.test_freq = 0: must be -1 (unset) or >= 1"},
    {"CriticWarmupNonNegative", {"trainer.critic_warmup=-1"}, "trainer.critic_warmup = -1: must be >= 0"},
    // hybridscope
    {"KvBlockSizePositive", {"hybridscope.kv_block_size=0"}, "hybridscope.kv_block_size = 0: must be >= 1"},
    {"KvNumBlocksUnsetOrPositive", {"hybridscope.kv_num_blocks=0"}, "hybridscope.kv_num_blocks = 0: must be -1 (unset) or >= 1"},
    {"NumThreadsPositive", {"hybridscope.num_threads=0"}, "hybridscope.num_threads = 0: must be >= 1"},
    {"MemoryIntervalNonNegative", {"hybridscope.probes.memory_interval_ms=-1"}, "hybridscope.probes.memory_interval_ms = -1: must be >= 0"},
    {"WarmupStepsNonNegative", {"hybridscope.warmup.steps=-1"}, "hybridscope.warmup.steps = -1: must be >= 0"},
    {"WarmupBatchPositive", {"hybridscope.warmup.steps=2", "hybridscope.warmup.batch_size=0"},
     "hybridscope.warmup.batch_size = 0: must be >= 1"},
    {"WarmupLrNonNegative", {"hybridscope.warmup.lr=-1"}, "hybridscope.warmup.lr = -1: must be >= 0"},
    {"DistTimeoutPositive", {"hybridscope.dist.timeout_s=0"}, "hybridscope.dist.timeout_s = 0: must be > 0 (seconds)"},
    {"NcclNeedsCuda", {"hybridscope.dist.backend=nccl"}, "hybridscope.dist.backend = nccl moves CUDA tensors only, but trainer.device = cpu"},
    {"GlooCannotCarryCuda", {"trainer.device=cuda", "trainer.n_gpus_per_node=2", "hybridscope.dist.backend=gloo"},
     "hybridscope.dist.backend = gloo moves CPU tensors only, but trainer.device = cuda with 2 ranks"},
    {"TrainingTpPositive", {"actor_rollout_ref.actor.megatron.tensor_model_parallel_size=0"},
     "actor_rollout_ref.actor.megatron.tensor_model_parallel_size = 0: must be >= 1"},
    {"TrainingPpPositive", {"actor_rollout_ref.actor.megatron.pipeline_model_parallel_size=0"},
     "actor_rollout_ref.actor.megatron.pipeline_model_parallel_size = 0: must be >= 1"},
    {"PeakFlopsMeasureOrPositive", {"hybridscope.peak_flops=0"}, "hybridscope.peak_flops = 0: must be -1 (measure) or > 0"},
    // placement (was placement_of in the trainer)
    {"PlacementRankInWorld", {"trainer.n_gpus_per_node=4", "actor_rollout_ref.actor.use_kl_loss=true", "hybridscope.placement.ref=[4, 5]"},
     "hybridscope.placement.ref = [4, 5]: 4 is not a rank of this world (0..3"},
    {"PlacementRankOnce", {"trainer.n_gpus_per_node=4", "actor_rollout_ref.actor.use_kl_loss=true", "hybridscope.placement.ref=[3, 3]"},
     "hybridscope.placement.ref = [3, 3] lists rank 3 twice"},
    {"PlacementActorAloneListsEveryRank", {"trainer.n_gpus_per_node=4", "hybridscope.placement.actor=[0, 1]"},
     "hybridscope.placement.actor = [0, 1] lists only some ranks"},
    {"PlacementRefWithCritic", {"trainer.n_gpus_per_node=4", "actor_rollout_ref.actor.use_kl_loss=true",
                                "reward_model.enable=true", "hybridscope.placement.ref=[2, 3]"},
     "hybridscope.placement.ref with a critic or a reward model is not supported yet"},
    {"PlacementRefNeedsAReference", {"trainer.n_gpus_per_node=4", "hybridscope.placement.ref=[2, 3]"},
     "hybridscope.placement.ref is set, but this run has no reference policy"},
    {"PlacementDisjoint", {"trainer.n_gpus_per_node=4", "actor_rollout_ref.actor.use_kl_loss=true",
                           "hybridscope.placement.actor=[0, 1]", "hybridscope.placement.ref=[1, 2, 3]"},
     "share a rank: a split placement puts the roles on disjoint ranks"},
    {"PlacementCoversTheWorld", {"trainer.n_gpus_per_node=4", "actor_rollout_ref.actor.use_kl_loss=true",
                                 "hybridscope.placement.actor=[0]", "hybridscope.placement.ref=[2, 3]"},
     "hybridscope.placement leaves ranks without a role: actor ([0]) and ref ([2, 3]) together must list every rank 0..3"},
    {"PlacementActorHasRankZero", {"trainer.n_gpus_per_node=4", "actor_rollout_ref.actor.use_kl_loss=true",
                                   "hybridscope.placement.actor=[1, 2]", "hybridscope.placement.ref=[0, 3]"},
     "hybridscope.placement.actor = [1, 2] must include rank 0"},
    {"SamplesPerPromptAboveMaxNumSeqs", {"actor_rollout_ref.rollout.n=4", "actor_rollout_ref.rollout.max_num_seqs=2"},
     "actor_rollout_ref.rollout.n = 4 exceeds actor_rollout_ref.rollout.max_num_seqs = 2: a prompt's samples are "
     "decoded together (they share its prompt's KV blocks); raise max_num_seqs to at least 4 or lower n"},
    {"ValidationScoresOneResponsePerPrompt", {"actor_rollout_ref.rollout.val_kwargs.n=3"},
     "actor_rollout_ref.rollout.val_kwargs.n = 3: validation scores one response per prompt (val/mean@1); mean@n "
     "over several is not built: set it to 1"},
    // a split rollout pool and hybridscope.async_mode (rollout_server.h)
    {"FullyAsyncNeedsARolloutPool", {"hybridscope.async_mode=fully_async"},
     "hybridscope.async_mode = fully_async needs a split rollout pool that generates while the actor trains: set "
     "hybridscope.placement.rollout to the generating ranks"},
    {"FullyAsyncStepTakesRequireBatchesMiniBatches",
     {"trainer.n_gpus_per_node=2", "hybridscope.placement.rollout=[1]", "hybridscope.async_mode=fully_async"},
     "hybridscope.async_mode = fully_async trains on async_training.require_batches x "
     "actor_rollout_ref.actor.ppo_mini_batch_size = 1 x 2 = 2 prompts per step, but data.train_batch_size = 4: set "
     "async_training.require_batches=2"},
    {"FullyAsyncStalenessNonNegative",
     {"trainer.n_gpus_per_node=2", "hybridscope.placement.rollout=[1]", "hybridscope.async_mode=fully_async",
      "async_training.require_batches=2", "async_training.staleness_threshold=-0.5"},
     "async_training.staleness_threshold = -0.5: must be >= 0"},
    {"FullyAsyncTriggerPositive",
     {"trainer.n_gpus_per_node=2", "hybridscope.placement.rollout=[1]", "hybridscope.async_mode=fully_async",
      "async_training.require_batches=2", "async_training.trigger_parameter_sync_step=0"},
     "async_training.trigger_parameter_sync_step = 0: must be >= 1"},
    {"FullyAsyncRequireBatchesPositive",
     {"trainer.n_gpus_per_node=2", "hybridscope.placement.rollout=[1]", "hybridscope.async_mode=fully_async",
      "async_training.require_batches=0"},
     "async_training.require_batches = 0: must be >= 1"},
    {"OneStepOffNeedsARolloutPool", {"hybridscope.async_mode=one_step_off"},
     "hybridscope.async_mode = one_step_off needs a split rollout pool that generates while the actor trains: set "
     "hybridscope.placement.rollout to the generating ranks"},
    {"SyncBucketPositive", {"actor_rollout_ref.rollout.update_weights_bucket_megabytes=0"},
     "actor_rollout_ref.rollout.update_weights_bucket_megabytes = 0: must be >= 1"},
    {"RolloutPoolWithSplitReference", {"trainer.n_gpus_per_node=4", "actor_rollout_ref.actor.use_kl_loss=true",
                                       "hybridscope.placement.ref=[2]", "hybridscope.placement.rollout=[3]"},
     "hybridscope.placement.ref and hybridscope.placement.rollout together are not supported yet"},
    {"RolloutPoolWithRewardModel", {"trainer.n_gpus_per_node=2", "reward_model.enable=true", "hybridscope.placement.rollout=[1]"},
     "hybridscope.placement.rollout with a critic or a reward model is not supported yet"},
    {"RolloutPoolDisjoint", {"trainer.n_gpus_per_node=4", "hybridscope.placement.actor=[0, 1]",
                             "hybridscope.placement.rollout=[1, 2, 3]"},
     "hybridscope.placement.actor ([0, 1]) and hybridscope.placement.rollout ([1, 2, 3]) share a rank"},
    {"RolloutPoolCoversTheWorld", {"trainer.n_gpus_per_node=4", "hybridscope.placement.actor=[0]",
                                   "hybridscope.placement.rollout=[2, 3]"},
     "hybridscope.placement leaves ranks without a role: actor ([0]) and rollout ([2, 3]) together must list every rank 0..3"},
    {"RolloutPoolLeavesRankZeroToTheActor", {"trainer.n_gpus_per_node=2", "hybridscope.placement.rollout=[0]"},
     "hybridscope.placement.actor = [1] must include rank 0 (it prints, validates, sends the weights to the rollout ranks"},
    {"RolloutPoolNeedsAWholeActor", {"trainer.n_gpus_per_node=3", "hybridscope.placement.rollout=[2]"},
     "hybridscope.placement.rollout takes the weights from the actor's rank 0, which must hold the whole model: set "
     "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=1"},
    {"RolloutPoolGeneratesWithoutTp", {"trainer.n_gpus_per_node=3", "actor_rollout_ref.actor.strategy=megatron",
                                       "hybridscope.placement.rollout=[2]", "actor_rollout_ref.rollout.tensor_model_parallel_size=2"},
     "actor_rollout_ref.rollout.tensor_model_parallel_size = 2 with hybridscope.placement.rollout: each rollout rank "
     "generates with the whole model"},
    {"RolloutPoolWithoutDynamicSampling", {"trainer.n_gpus_per_node=2", "hybridscope.placement.rollout=[1]",
                                           "algorithm.filter_groups.enable=true"},
     "algorithm.filter_groups.enable = true with hybridscope.placement.rollout"},
    {"RolloutPoolWithoutRemax", {"trainer.n_gpus_per_node=2", "hybridscope.placement.rollout=[1]", "algorithm.adv_estimator=remax"},
     "algorithm.adv_estimator = remax with hybridscope.placement.rollout"},
    {"TrainBatchSplitsOverRolloutRanks", {"trainer.n_gpus_per_node=4", "hybridscope.placement.rollout=[1, 2, 3]"},
     "data.train_batch_size = 4 prompts cannot be split evenly over the 3 rollout ranks (hybridscope.placement.rollout)"},
    // the actor's ranks as a mesh (were the constructor's divisibility checks)
    {"ActorRanksHoldWholeReplicas", {"trainer.n_gpus_per_node=3", "data.train_batch_size=6",
                                     "actor_rollout_ref.actor.ppo_mini_batch_size=6",
                                     "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2"},
     "the actor's rank count 3 (trainer.nnodes x trainer.n_gpus_per_node, less hybridscope.placement.ref or .rollout) is "
     "not divisible"},
    {"TrainBatchSplitsOverDp", {"trainer.n_gpus_per_node=4", "data.train_batch_size=6", "actor_rollout_ref.actor.ppo_mini_batch_size=6"},
     "data.train_batch_size (6) is not divisible by the 4 data-parallel ranks"},
    {"MiniBatchSplitsOverDp", {"trainer.n_gpus_per_node=4", "data.train_batch_size=8", "actor_rollout_ref.actor.ppo_mini_batch_size=2"},
     "actor_rollout_ref.actor.ppo_mini_batch_size (2) is not divisible by the 4 data-parallel ranks"},
    {"RolloutTpDividesActorRanks", {"trainer.n_gpus_per_node=3", "data.train_batch_size=6", "actor_rollout_ref.actor.ppo_mini_batch_size=3",
                                    "actor_rollout_ref.rollout.tensor_model_parallel_size=2"},
     "actor_rollout_ref.rollout.tensor_model_parallel_size = 2 must divide the 3 actor ranks"},
    {"TrainBatchSplitsOverGenerationReplicas",
     {"trainer.n_gpus_per_node=4", "data.train_batch_size=2", "actor_rollout_ref.actor.ppo_mini_batch_size=2",
      "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2", "actor_rollout_ref.rollout.tensor_model_parallel_size=1"},
     "data.train_batch_size = 2 prompts cannot be split evenly over the 4 generation replicas"},
    // valid, but not supported by this build (was check_supported in the trainer)
    {"CriticWithModelParallelActor", {"algorithm.adv_estimator=gae", "trainer.n_gpus_per_node=2",
                                      "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2"},
     "a critic with a tensor- or pipeline-parallel actor (use a critic-free estimator: grpo, rloo, remax) is not supported"},
    {"RewardModelWithModelParallelActor", {"reward_model.enable=true", "trainer.n_gpus_per_node=2",
                                           "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2"},
     "reward_model.enable with a tensor- or pipeline-parallel actor (use the rule reward) is not supported"},
    {"WhiteningEstimatorOnSeveralRanks", {"trainer.n_gpus_per_node=2", "algorithm.adv_estimator=reinforce_plus_plus"},
     "algorithm.adv_estimator=reinforce_plus_plus with more than one rank (it normalises advantages over the whole batch"},
    {"AdaptiveKlOnSeveralRanks", {"trainer.n_gpus_per_node=2", "algorithm.use_kl_in_reward=true", "algorithm.kl_ctrl.type=adaptive"},
     "algorithm.kl_ctrl.type=adaptive with more than one rank (set it to fixed) is not supported"},
    // accepted for verl's sake, refused unless they ask for what hybridscope does
    {"LoggerMisspelt", {"trainer.logger=[consle]"}, "trainer.logger 'consle' is no logger — did you mean console?"},
    {"LoggerWithoutConsole", {"trainer.logger=[]"}, "trainer.logger = [] leaves out console"},
    {"HybridEngineOff", {"actor_rollout_ref.hybrid_engine=false"},
     "actor_rollout_ref.hybrid_engine = false (verl's separate rollout workers) needs the rollout pool's ranks: set "
     "hybridscope.placement.rollout"},
    {"RolloutEngineUnknown", {"actor_rollout_ref.rollout.name=hf"},
     "actor_rollout_ref.rollout.name = 'hf': hybridscope generates with its built-in paged-KV engine (vllm and sglang are "
     "accepted"},
    {"CustomRewardFunctionPath", {"reward_model.custom_reward_function.path=my_reward.py"},
     "reward_model.custom_reward_function.path = 'my_reward.py': hybridscope does not run Python reward functions"},
    {"CustomRewardFunctionName", {"reward_model.custom_reward_function.name=my_score"},
     "reward_model.custom_reward_function.name = 'my_score' names a function in custom_reward_function.path"},
    {"RewardModelGradientCheckpointing", {"reward_model.model.enable_gradient_checkpointing=true"},
     "reward_model.model.enable_gradient_checkpointing = true: the reward model only scores"},
    // hybridscope.decode's fast paths
    {"PagedKernelOnCpu", {"hybridscope.decode.paged_kernel=true"},
     "hybridscope.decode.paged_kernel = true is a CUDA kernel, but trainer.device = cpu"},
    {"CudaGraphsOnCpu", {"hybridscope.decode.cuda_graphs=true"},
     "hybridscope.decode.cuda_graphs = true captures CUDA graphs, but trainer.device = cpu"},
    {"CudaGraphsWithoutTheDeviceLoop", {"trainer.device=cuda", "hybridscope.decode.paged_kernel=true", "hybridscope.decode.cuda_graphs=true"},
     "set hybridscope.decode.device_loop=true and hybridscope.decode.paged_kernel=true too (now false and true)"},
    {"CudaGraphsWithRolloutTp",
     {"trainer.device=cuda", "trainer.n_gpus_per_node=2", "actor_rollout_ref.rollout.tensor_model_parallel_size=2",
      "hybridscope.decode.device_loop=true", "hybridscope.decode.paged_kernel=true", "hybridscope.decode.cuda_graphs=true"},
     "but actor_rollout_ref.rollout.tensor_model_parallel_size = 2: set it to 1"},
    {"FlashOnCpu", {"hybridscope.attention=flash", "actor_rollout_ref.model.use_remove_padding=true"},
     "hybridscope.attention = flash is FlashAttention-2's CUDA kernel for 16-bit inputs, but trainer.device = cpu and "
     "hybridscope.precision = fp32"},
    {"FlashWithoutPacking", {"trainer.device=cuda", "hybridscope.precision=bf16", "hybridscope.attention=flash"},
     "hybridscope.attention = flash attends the packed forwards of use_remove_padding, and neither"},
    {"StopCheckIntervalZero", {"hybridscope.decode.stop_check_interval=0"},
     "hybridscope.decode.stop_check_interval = 0: must be >= 1"},
    {"DeviceLoopWithPartialRollout",
     {"trainer.n_gpus_per_node=2", "hybridscope.placement.rollout=[1]", "hybridscope.async_mode=fully_async",
      "async_training.require_batches=2", "hybridscope.decode.device_loop=true"},
     "hybridscope.decode.device_loop = true keeps the decode state on the device, but async_training.partial_rollout = "
     "true"},
    // fsdp's wrapping units
    {"ForwardPrefetchNeedsPerLayer", {"actor_rollout_ref.actor.fsdp_config.forward_prefetch=true"},
     "actor_rollout_ref.actor.fsdp_config.forward_prefetch = true needs fsdp_config.per_layer = true"},
    {"PerLayerWithMegatron", {"actor_rollout_ref.actor.strategy=megatron", "actor_rollout_ref.actor.fsdp_config.per_layer=true"},
     "actor_rollout_ref.actor.fsdp_config.per_layer = true with actor.strategy = megatron"},
    {"PerLayerWithDynamicBsz", {"actor_rollout_ref.actor.use_dynamic_bsz=true", "actor_rollout_ref.actor.fsdp_config.per_layer=true"},
     "actor_rollout_ref.actor.fsdp_config.per_layer = true with actor.use_dynamic_bsz = true"},
    {"PerLayerWithPipeline",
     {"trainer.n_gpus_per_node=2", "actor_rollout_ref.actor.megatron.pipeline_model_parallel_size=2",
      "actor_rollout_ref.actor.fsdp_config.per_layer=true"},
     "actor_rollout_ref.actor.fsdp_config.per_layer = true with pipeline_model_parallel_size = 2"},
};

class ConfigRefusal : public testing::TestWithParam<Refusal> {};

TEST_P(ConfigRefusal, ValidateAndTheTrainerRefuseWithTheSameMessage) {
  const auto overrides = with_base(GetParam().overrides);
  const std::string by_validate = config_error_of([&] { parse_config("", overrides); });
  EXPECT_NE(by_validate.find(GetParam().expected), std::string::npos)
      << "validate() did not make this refusal:\n  " << by_validate;
  const Config unvalidated = parse_config_unvalidated("", overrides);
  EXPECT_EQ(config_error_of([&] { validate(unvalidated); }), by_validate);
  TrainerOptions quiet;
  quiet.show_progress = false;
  const std::string by_trainer = config_error_of([&] { PPOTrainer trainer(unvalidated, quiet); });
  EXPECT_EQ(by_trainer, by_validate);
}

INSTANTIATE_TEST_SUITE_P(Table, ConfigRefusal, testing::ValuesIn(kRefusals),
                         [](const testing::TestParamInfo<Refusal>& info) { return info.param.name; });

TEST(ConfigRefusalScope, WhatValidateAcceptsTheTrainerRefusesOnlyForTheRunningProcesses) {
  // A split placement on four ranks passes validate(); this process was not launched as four
  // ranks, which only the trainer can know — and that is the one thing it refuses.
  const auto overrides = with_base({"trainer.n_gpus_per_node=4", "data.train_batch_size=8",
                                    "actor_rollout_ref.actor.ppo_mini_batch_size=4",
                                    "actor_rollout_ref.actor.use_kl_loss=true", "hybridscope.placement.ref=[2, 3]"});
  const Config config = parse_config("", overrides);
  const Placement placement = resolved_placement(config);
  EXPECT_EQ(placement.actor, (std::vector<int>{0, 1}));
  EXPECT_EQ(placement.ref, (std::vector<int>{2, 3}));
  TrainerOptions quiet;
  quiet.show_progress = false;
  const std::string message = config_error_of([&] { PPOTrainer trainer(config, quiet); });
  EXPECT_NE(message.find("this process was started alone"), std::string::npos) << message;
}

TEST(ConfigRefusalScope, OneStepOffOnASplitRolloutPoolIsAccepted) {
  // verl's spelling of a separate rollout pool (hybrid_engine=false) is accepted with the pool's ranks.
  const auto overrides = with_base({"trainer.n_gpus_per_node=3", "actor_rollout_ref.actor.strategy=megatron",
                                    "actor_rollout_ref.hybrid_engine=false", "hybridscope.placement.rollout=[1, 2]",
                                    "hybridscope.async_mode=one_step_off"});
  const Config config = parse_config("", overrides);
  EXPECT_EQ(config.hybridscope.async_mode, AsyncMode::kOneStepOff);
  const Placement placement = resolved_placement(config);
  EXPECT_EQ(placement.actor, (std::vector<int>{0}));
  EXPECT_EQ(placement.rollout, (std::vector<int>{1, 2}));
  EXPECT_TRUE(placement.ref.empty());
}

TEST(ConfigRefusalScope, ResolvedPlacementRefusesAsValidateDoes) {
  const Config bad = parse_config_unvalidated("", with_base({"trainer.n_gpus_per_node=4", "hybridscope.placement.actor=[0, 1]"}));
  const std::string by_validate = config_error_of([&] { validate(bad); });
  EXPECT_NE(by_validate.find("hybridscope.placement.actor = [0, 1] lists only some ranks"), std::string::npos) << by_validate;
  EXPECT_EQ(config_error_of([&] { resolved_placement(bad); }), by_validate);
}

}  // namespace
