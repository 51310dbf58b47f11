// trainer_state.h — the PPO/GRPO trainer's state (PPOTrainer::State), private to the trainer's two
// files: trainer.cpp (the constructor and the step loop, verl's fit()) and trainer_start.cpp (what
// fit() does before the first step, and checkpoints).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hybridscope/trainer/loop/trainer.h"
#include "hybridscope/trainer/data/dataset.h"
#include "hybridscope/trainer/data/text_setup.h"
#include "hybridscope/trainer/data/tokenizer.h"
#include "hybridscope/trainer/dist/topology.h"
#include "hybridscope/trainer/hybrid/hybrid_actor.h"
#include "hybridscope/trainer/hybrid/offload.h"
#include "hybridscope/trainer/loop/checkpoint.h"
#include "hybridscope/trainer/loop/rollout_phase.h"
#include "hybridscope/trainer/loop/run_recording.h"
#include "loop/sample_queue.h"
#include "hybridscope/trainer/rl/metrics.h"
#include "hybridscope/trainer/rl/ppo_workers.h"

namespace hs::trainer {

/// A split rollout pool's placement and async mode as a checkpoint records it ("" when the actor
/// generates); a resume refuses a checkpoint whose placement differs.
std::string rollout_placement(const Config& cfg, const Topology& topology);

struct PPOTrainer::State {
  Config cfg;
  TrainerOptions opts;
  // Declared before the topology, so that it outlives the probed groups that record through it.
  std::unique_ptr<RunRecording> recording;
  Topology topology;
  std::unique_ptr<Tokenizer> tokenizer;
  std::optional<ChatTemplate> chat_template;  // hybridscope.tokenizer = hf: what every prompt goes through
  RLDataset train_data;
  RLDataset val_data;
  std::unique_ptr<DataLoader> loader;
  std::int64_t total_steps = 0;
  std::int64_t global_step = 0;
  /// Whether this process has prefaulted its CPU heap, at the end of its first step (memory/cpu_heap.h).
  bool heap_prefaulted = false;

  std::unique_ptr<HybridActor> actor;  // null on a rank of a split reference or rollout pool
  Transformer ref_model{nullptr};      // colocated: on the actor's ranks; split: the reference ranks'
  Transformer served_rollout_model{nullptr};  // a split rollout rank's whole model (rollout_server.h)
  /// The actor updates applied so far: the version of the weights the next step trains with (and
  /// sends to a split rollout pool, whose batches come back with the version they were generated with).
  std::int64_t param_version = 0;
  /// one_step_off, the actor's rank 0 at a step that saves: the weights the rollout pool generates
  /// the next batch with (the actor's before this step's update, version pool_weights_version),
  /// saved as the checkpoint's rollout/ so that a resumed run generates that batch again.
  Transformer pool_weights{nullptr};
  std::int64_t pool_weights_version = -1;
  /// fully_async, the actor's rank 0: its client of the queue the rollout ranks fill (sample_queue.h).
  std::unique_ptr<SampleQueue> sample_queue;
  /// ref.fsdp_config.param_offload: the reference's weights wait in host memory between its phases.
  HostOffload ref_offload;
  std::unique_ptr<PPOCritic> critic;
  std::unique_ptr<KlController> kl_ctrl;
  std::unique_ptr<RolloutPhase> rollout;
  std::string checkpoint_root;
  double peak_flops = 0;
  Metrics actor_param_bytes;  // perf/actor_param_bytes{,_per_rank}: fixed by the training layout
  bool stepping = false;  // PPOTrainer::train_step() began the run; ~PPOTrainer ends it

  /// What fit() does before the first step: resume or warm up, set up the reference policy and
  /// the critic, validate before training (trainer.val_before_train).
  void prepare(FitSummary& summary);
  /// One iteration of fit()'s loop: the next step, its metrics recorded and flushed.
  Metrics train_step();
  Metrics step();
  /// A split rollout pool's batch of this step (hybridscope.placement.rollout; rollout_server.h):
  /// received, with the weight sync where the mode puts it, and the staleness and sync metrics.
  Rollouts receive_split_rollout(std::vector<const Example*>& examples, const std::function<std::vector<const Example*>()>& draw,
                                 Metrics& metrics);
  /// fully_async (fully_async.h): the sync every trigger_parameter_sync_step updates, then this
  /// step's prompt groups from the queue (`examples` their prompts), with the staleness, queue and
  /// partial-rollout metrics.
  Rollouts take_queued_rollout(std::vector<const Example*>& examples, Metrics& metrics);
  /// The actor's weights to the split rollout pool (sync_rollout_weights), async/sync_* metrics.
  void sync_rollout_pool(Metrics& metrics);
  /// perf/*, memory peaks, the KV pool and the step counters of a step that trained on `batch`.
  void add_perf_metrics(const RolloutBatch& batch, Metrics& metrics);
  /// This actor rank's piece of a sharded checkpoint (aliasing its live tensors).
  ActorShard actor_shard();
  /// DAPO's group filter: keeps the prompts (and their n responses and log-probs) whose responses
  /// do not all score alike under algorithm.filter_groups.metric (acc, score: the rule score;
  /// seq_reward: with the overlong shaping). Every rank holds every response, so all agree.
  void keep_varied_groups(std::vector<const Example*>& prompts, Rollouts& generated);
  double validate(std::map<std::string, double>* per_source) {
    return rollout->validate(val_data, global_step, per_source);
  }
  void save(std::int64_t step);
  /// Memory probe at a phase boundary: the allocator and the KV pool.
  void sample(const char* phase) {
    recording->sample(phase, actor->rollout->allocator().stats(), actor->rollout->cache_bytes());
  }
  /// The run row of this trainer (begin_run).
  probes::RunInfo run_info() const;
  void begin_recording() { recording->begin(run_info(), *topology.global_world, topology.rank()); }
  /// hybridscope.precision and .attention on every model this rank holds (idempotent; called
  /// again whenever a model is added).
  void apply_compute_options();
};

}  // namespace hs::trainer
