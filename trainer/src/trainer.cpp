// trainer.cpp — the PPO/GRPO loop: verl's RayPPOTrainer.fit, one process per rank.
//
// Randomness: every random stream is derived from (hybridscope.seed, global step, rank), so a run
// resumed from a checkpoint at step k draws exactly what the uninterrupted run drew at step k + 1.
//
// Data parallel (world > 1, tp = pp = 1): every rank holds the whole model (replicated
// parameters), reads the same global batch and keeps its contiguous share of the prompts; it
// generates, scores and computes advantages for its share only (a GRPO group never leaves its
// rank), and the optimizer sums the gradients over dp with global loss weights, so the update
// equals the single-process one on the same samples. Metrics are reduced over the world; rank 0
// prints, validates its share like everyone else, writes checkpoints, and merges the ranks' run
// files into the run database at the end (probes/merge.h).
#include "hybridscope/trainer/trainer.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <iterator>
#include <map>
#include <optional>
#include <stdexcept>
#include <tuple>

#include <fmt/format.h>
#include <torch/torch.h>

#include "console.h"
#include "hybridscope/probes/merge.h"
#include "hybridscope/probes/rank_files.h"
#include "hybridscope/probes/range.h"
#include "hybridscope/probes/recorder.h"
#if HS_HAVE_CUPTI
#include "hybridscope/probes/cupti_collector.h"
#endif
#include "hybridscope/trainer/batch.h"
#include "hybridscope/trainer/checkpoint.h"
#include "hybridscope/trainer/core_algos.h"
#include "hybridscope/trainer/cpu_memory_tracker.h"
#include "hybridscope/trainer/device.h"
#include "hybridscope/trainer/memory_probe.h"
#include "hybridscope/trainer/hybrid_switch.h"
#include "hybridscope/trainer/layout.h"
#include "hybridscope/trainer/mesh_groups.h"
#include "hybridscope/trainer/metrics.h"
#include "hybridscope/trainer/pipeline.h"
#include "hybridscope/trainer/ppo_workers.h"
#include "hybridscope/trainer/probed_communicator.h"
#include "hybridscope/trainer/process_group.h"
#include "hybridscope/trainer/reshard.h"
#include "hybridscope/trainer/reshard_executor.h"
#include "hybridscope/trainer/reward.h"
#include "hybridscope/trainer/rollout.h"
#include "hybridscope/trainer/sft.h"
#include "hybridscope/trainer/zero.h"

namespace hs::trainer {

namespace {

std::atomic<int> g_stop_signal{0};
extern "C" void on_stop_signal(int signal) { g_stop_signal.store(signal); }

// Seeds of the per-step random streams (splitmix64 of seed, step, stream).
std::uint64_t stream_seed(std::uint64_t seed, std::int64_t step, std::uint64_t stream) {
  std::uint64_t z = seed + 0x9e3779b97f4a7c15ULL * (static_cast<std::uint64_t>(step) * 8 + stream + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
enum Stream : std::uint64_t { kRolloutStream = 1, kActorShuffleStream = 2, kInitStream = 3 };

// A rank's own stream: rank 0's is the single-process stream, so a one-rank run is unchanged.
std::uint64_t rank_stream_seed(std::uint64_t seed, std::int64_t step, std::uint64_t stream, int rank) {
  const std::uint64_t s = stream_seed(seed, step, stream);
  return rank == 0 ? s : stream_seed(s, rank, stream);
}

// How each metric combines over ranks (docs/metrics.md): per-rank shares of the step's tokens,
// throughput and MFU add up; phase times and peaks take the slowest rank; otherwise verl's rule —
// names containing "max" by max, "min" by min, the rest by mean (ranks hold equal shares).
enum class Combine { kMean, kSum, kMax, kMin };
Combine combine_of(const std::string& name) {
  if (name == "perf/total_num_tokens" || name == "perf/throughput" || name.rfind("perf/mfu/", 0) == 0)
    return Combine::kSum;
  if (name.rfind("timing_s/", 0) == 0 || name == "perf/time_per_step" || name == "perf/cpu_memory_used_gb")
    return Combine::kMax;
  if (name.find("max") != std::string::npos) return Combine::kMax;
  if (name.find("min") != std::string::npos) return Combine::kMin;
  return Combine::kMean;
}

// Every rank's metrics reduced over `world` (names must match across ranks, as they do for one
// config). Three small all_reduces per call. The `model_parallel` = tp·pp ranks of one training
// replica report the same share of the batch, so sums count each replica once.
Metrics reduce_metrics(const Metrics& metrics, Communicator& world, int model_parallel) {
  if (world.size() == 1) return metrics;
  const auto n = static_cast<std::int64_t>(metrics.size());
  auto count = torch::tensor({n, -n}, torch::kInt64);
  world.all_reduce(count, ReduceOp::kMax);
  if (count[0].item<std::int64_t>() != n || -count[1].item<std::int64_t>() != n)
    throw DistError(fmt::format("ranks report different metric sets ({} here, {} to {} elsewhere)", n,
                                -count[1].item<std::int64_t>(), count[0].item<std::int64_t>()));
  auto values = torch::empty({n}, torch::kFloat64);
  for (std::int64_t i = 0; i < n; ++i) values[i] = metrics[static_cast<std::size_t>(i)].second;
  auto sum = values.clone(), max = values.clone(), min = values.clone();
  world.all_reduce(sum, ReduceOp::kSum);
  world.all_reduce(max, ReduceOp::kMax);
  world.all_reduce(min, ReduceOp::kMin);
  Metrics out;
  for (std::int64_t i = 0; i < n; ++i) {
    const auto& name = metrics[static_cast<std::size_t>(i)].first;
    double v = 0;
    switch (combine_of(name)) {
      case Combine::kSum: v = sum[i].item<double>() / model_parallel; break;
      case Combine::kMax: v = max[i].item<double>(); break;
      case Combine::kMin: v = min[i].item<double>(); break;
      case Combine::kMean: v = sum[i].item<double>() / world.size(); break;
    }
    out.emplace_back(name, v);
  }
  return out;
}

Transformer make_model(const ModelShape& shape, HeadKind head, std::uint64_t seed) {
  torch::manual_seed(seed);
  return Transformer(shape, head);
}

void copy_backbone(Transformer& from, Transformer& to) {
  // Same backbone names; the critic's score head keeps its fresh initialisation.
  torch::NoGradGuard no_grad;
  auto source = from->named_parameters();
  for (auto& item : to->named_parameters()) {
    if (const auto* p = source.find(item.key())) item.value().copy_(*p);
  }
}

}  // namespace

struct PPOTrainer::State {
  Config cfg;
  TrainerOptions opts;
  std::unique_ptr<Tokenizer> tokenizer;
  RLDataset train_data;
  RLDataset val_data;
  std::unique_ptr<DataLoader> loader;
  std::int64_t total_steps = 0;
  std::int64_t global_step = 0;

  Transformer actor_model{nullptr};
  Transformer ref_model{nullptr};
  Transformer reward_model{nullptr};
  std::unique_ptr<PPOActor> actor;
  std::unique_ptr<PPOCritic> critic;
  std::unique_ptr<RolloutEngine> rollout;
  std::unique_ptr<HybridSwitch> hybrid_switch;
  std::unique_ptr<KlController> kl_ctrl;

  DistEnv env;                                 // this rank in the world (the one-rank world by default)
  /// trainer.device: where every model lives (device.h); the batch stays on the CPU.
  torch::Device device{torch::kCPU};
  int memory_device = -1;  // the memory probe's device: -1 the CPU tracking allocator, else the CUDA index
  std::unique_ptr<C10dGroupFactory> groups;     // world > 1 only
  ParallelContext parallel;                     // the training mesh's groups, probed
  // Layouts (layout.h): the actor trains on `mesh` and generates in the generation layout.
  MeshShape mesh;
  LayoutSet training_layout;
  LayoutSet generation_layout;
  /// The unsharded actor while setting up (warm-up, the reference's copy) when the actor holds a
  /// shard; released after prepare().
  Transformer full_actor{nullptr};
  /// Generates when the generation layout differs from the training one (filled by resharding);
  /// otherwise the rollout engine generates with the actor itself.
  Transformer rollout_model{nullptr};
  int replica = 0;           // this rank's generation replica
  int replicas = 1;          // d_g
  bool replica_lead = true;  // generation tp rank 0: speaks for its replica's results
  /// The actor's modules hold a part of the model: tp or pp > 1, or fsdp shards over dp > 1.
  bool sharded() const { return mesh.tp > 1 || mesh.pp > 1 || (dp_sharding == DpSharding::kSharded && mesh.dp > 1); }
  DpSharding dp_sharding = DpSharding::kReplicated;  // actor_rollout_ref.actor.strategy
  /// The tp/pp layout the actor's and reference's modules are built in (replicated over dp; with
  /// fsdp the optimizer's ZeroShards keeps the dp row blocks of it).
  LayoutSet module_layout;
  /// This rank's module-layout slices of `full`'s parameters (for ZeroShards::load_full_state_dict).
  std::vector<std::pair<std::string, torch::Tensor>> module_slices(const TransformerImpl& full) const;
  int dp_rank() const { return parallel.dp->rank(); }
  // Placement (hybridscope.placement): colocated, every role on every rank, or split, the
  // reference policy on its own ranks. The actor's groups come from its pool's own world.
  std::vector<int> actor_ranks;                   // world ranks of the actor (all when colocated)
  std::vector<int> ref_ranks;                     // world ranks of a split reference; empty = colocated
  int actor_rank = 0;                             // this rank in the actor pool (its mesh rank); -1: a ref rank
  std::unique_ptr<C10dGroupFactory> pool_groups;  // split: the actor pool's own world (members only)
  GroupFactory* actor_groups = nullptr;           // where the actor's groups are made
  std::shared_ptr<Communicator> global_world;     // every rank, probed: run id, stop flag, cross-pool data
  std::shared_ptr<Communicator> replica_group;    // split, tp·pp > 1: the ranks of this rank's dp replica
  /// HybridFlow's micro-DP group (hybrid mode, t_g <= tp): the ranks of this rank's training replica
  /// with its generation tp rank; their replicas generate exactly that training replica's prompts.
  std::shared_ptr<Communicator> micro_dp_group;
  bool serves_ref() const { return actor_rank < 0; }
  bool split() const { return !ref_ranks.empty(); }
  /// Split placement, ref phase: this rank's batch to the reference ranks, their log-probs back.
  torch::Tensor remote_ref_log_probs(const RolloutBatch& batch);
  /// Split placement, on a reference rank: the reference policy set up like the actor's base
  /// (warm-up, then rank 0's weights), then one ref phase per training step until the actor stops.
  void serve_reference(FitSummary& summary);
  std::unique_ptr<probes::Recorder> recorder;
#if HS_HAVE_CUPTI
  std::unique_ptr<probes::CuptiCollector> cupti;  // GPU activity; says "inactive" without a device
#endif
  std::unique_ptr<MemorySampler> memory_sampler;  // while a run is being recorded
  probes::StepTimings timings;
  std::string checkpoint_root;
  double peak_flops = 0;

  /// The responses to `examples` (the step's global prompts), prompt-major: each generation
  /// replica generates its contiguous share with `seed_of(replica)`. Hybrid mode with t_g <= tp
  /// (and no balance_batch): gathered inside the micro-DP group, so only this rank's training share
  /// is filled; otherwise all-gathered over the actor's world, every response on every rank.
  std::vector<std::vector<std::int32_t>> generate_all(const std::vector<const Example*>& examples,
                                                      const SamplingParams& params,
                                                      const std::function<std::uint64_t(int)>& seed_of);
  /// The prompts (indices into the step's prompts) this rank trains on: its dp rank's contiguous
  /// share, or with trainer.balance_batch a share of equal size whose token total is balanced across
  /// dp ranks (whole GRPO groups move, so group statistics stay on one rank).
  std::vector<std::size_t> training_prompts(const std::vector<const Example*>& examples,
                                            const std::vector<std::vector<std::int32_t>>& responses, int n) const;
  RolloutBatch make_batch(const std::vector<const Example*>& examples, const std::vector<std::size_t>& prompts,
                          const std::vector<std::vector<std::int32_t>>& responses, int n) const;
  torch::Tensor score(const RolloutBatch& batch);
  Metrics step();
  /// What fit() does before the first step: resume or warm up, set up the reference policy and
  /// the critic, validate before training (trainer.val_before_train).
  void prepare(FitSummary& summary);
  /// One iteration of fit()'s loop: the next step, its metrics recorded and flushed.
  Metrics train_step();
  /// The run row of this trainer (begin_run).
  probes::RunInfo run_info() const;
  /// begin_run, then the collectors that record into the run: the memory sampler and CUPTI.
  void begin_recording();
  /// The collectors stopped, then end_run: the run row says how the run ended.
  void end_recording(probes::RunStatus status, const std::string& message = {});
  /// Step end: GPU activity CUPTI holds, then everything the recorder holds, into the database.
  void flush_records() {
#if HS_HAVE_CUPTI
    if (cupti) cupti->flush();
#endif
    recorder->flush();
  }
  bool stepping = false;  // PPOTrainer::train_step() began the run; ~PPOTrainer ends it
  /// Memory probe at a phase boundary: the CPU tracking allocator and the KV pool.
  void sample(const char* phase);
  void record_kv(const char* phase, const KvPoolStats& stats);
  double validate(std::map<std::string, double>* per_source);
  void save(std::int64_t step);
  int rank() const { return env.rank; }
  int world() const { return env.world_size; }
  /// Rank 0's parameters to every rank (replicas start identical whatever each rank loaded).
  void broadcast_parameters(torch::nn::Module& module);
  /// hybridscope.precision and .attention on every model this rank holds (idempotent; called
  /// again whenever a model is added).
  void apply_compute_options();
};

void PPOTrainer::State::apply_compute_options() {
  const ComputeOptions options = compute_options(cfg.hybridscope.precision, cfg.hybridscope.attention);
  for (Transformer* model : {&actor_model, &ref_model, &reward_model, &full_actor, &rollout_model})
    if (*model) (*model)->set_compute(options);
  if (critic) critic->model()->set_compute(options);
}

PPOTrainer::PPOTrainer(Config config, TrainerOptions options) : state_(std::make_unique<State>()) {
  auto& s = *state_;
  s.cfg = std::move(config);
  s.opts = std::move(options);
  // Every refusal that depends on the config alone (config_validate.cpp), so that whatever
  // validates a config refuses exactly what the trainer refuses; what follows checks only the
  // running processes (the launched world, the device).
  hs::trainer::validate(s.cfg);
  const auto& cfg = s.cfg;
  torch::set_num_threads(cfg.hybridscope.num_threads);

  const int world = cfg.world_size();
  Placement placement = resolved_placement(cfg);
  s.actor_ranks = std::move(placement.actor);
  s.ref_ranks = std::move(placement.ref);
  const int actors = static_cast<int>(s.actor_ranks.size());
  const auto& mega = cfg.actor_rollout_ref.actor.megatron;
  const int model_parallel = mega.tensor_model_parallel_size * mega.pipeline_model_parallel_size;
  s.mesh = {mega.pipeline_model_parallel_size, mega.tensor_model_parallel_size, actors / model_parallel};
  const int rollout_tp = cfg.actor_rollout_ref.rollout.tensor_model_parallel_size;
  s.dp_sharding = dp_sharding_for_strategy(cfg.actor_rollout_ref.actor.strategy);
  s.env = dist_env_from_environment();
  if (s.env.world_size != world) {
    throw ConfigError(s.env.world_size == 1
                          ? fmt::format("trainer.nnodes x trainer.n_gpus_per_node = {} ranks, but this process was "
                                        "started alone (no RANK/WORLD_SIZE): start it with `hybridscope launch -n {} "
                                        "-- train ...` (or torchrun/srun/mpirun)",
                                        world, world)
                          : fmt::format("WORLD_SIZE={} from the launcher, but trainer.nnodes x trainer.n_gpus_per_node "
                                        "= {}: set trainer.n_gpus_per_node={} (with trainer.nnodes=1) to match",
                                        s.env.world_size, world, s.env.world_size));
  }
  // Before any group: NCCL takes the process's current CUDA device, which this sets.
  s.device = trainer_device(cfg.trainer.device, s.env.local_rank);
  s.memory_device = memory_device_index(s.device);
  const std::string& db = cfg.hybridscope.db;
  if (world > 1) {
    ProcessGroupOptions pg;
    const DistBackendChoice backend = cfg.hybridscope.dist.backend;  // auto: nccl on cuda, gloo on cpu
    const bool nccl = backend == DistBackendChoice::kNccl || (backend == DistBackendChoice::kAuto && s.device.is_cuda());
    pg.backend = nccl ? DistBackend::kNccl : DistBackend::kGloo;
    pg.timeout = std::chrono::milliseconds(static_cast<std::int64_t>(cfg.hybridscope.dist.timeout_s * 1000.0));
    s.groups = std::make_unique<C10dGroupFactory>(s.env, pg);
    // Files a dead earlier run left behind are merged before this run's ranks open theirs.
    if (s.rank() == 0 && std::filesystem::exists(db) && !probes::rank_files(db).empty()) {
      for (const auto& line : probes::merge_rank_files(db).messages) fmt::print("merged earlier rank file: {}\n", line);
    }
    s.groups->world()->barrier();
  }
  const std::string rank_db = probes::rank_file_path(db, s.rank());
  if (s.rank() > 0 && std::filesystem::exists(rank_db)) {
    // Left over and not mergeable (its run is not in the run database): replaced, said aloud.
    fmt::print(stderr, "warning: replacing a stale rank file {} that could not be merged into {}\n", rank_db, db);
    for (const char* suffix : {"", "-wal", "-shm"}) std::remove((rank_db + suffix).c_str());
  }
  s.recorder = std::make_unique<probes::Recorder>(rank_db, s.rank());
  const auto in_pool = std::find(s.actor_ranks.begin(), s.actor_ranks.end(), s.rank());
  s.actor_rank = in_pool == s.actor_ranks.end() ? -1 : static_cast<int>(in_pool - s.actor_ranks.begin());
  if (world > 1) {
    // Every collective of the run goes through the communication probe: the world here, every
    // group the factory makes from now on (mesh, rollout, reshard) there.
    const bool probe = cfg.hybridscope.probes.enable;
    s.groups->set_recorder(probe ? s.recorder.get() : nullptr, &s.global_step);
    s.global_world = s.groups->world();
    if (probe) s.global_world = std::make_shared<ProbedCommunicator>(s.global_world, s.recorder.get(), &s.global_step);
    if (s.split()) {
      // The actor pool is a world of its own: its groups never involve the reference's ranks.
      s.pool_groups = s.groups->sub_world(s.actor_ranks, "actor");
      s.actor_groups = s.pool_groups.get();
    } else {
      s.actor_groups = s.groups.get();
    }
    if (!s.serves_ref() && actors > 1) {
      s.parallel = make_training_context(*s.actor_groups, s.mesh, s.actor_rank);
      s.parallel.dp_sharding = s.dp_sharding;  // fsdp: the optimizers keep dp row blocks (zero.h)
      if (!s.split()) s.parallel.world = s.global_world;  // the pool's own world is probed already
      if (s.split() && model_parallel > 1) {
        for (int j = 0; j < s.mesh.dp; ++j) {  // every dp replica's group, in order, on every actor rank
          std::vector<int> members;
          for (int r = 0; r < actors; ++r)
            if (megatron_coord(s.mesh, r).dp == j) members.push_back(r);
          auto group = s.actor_groups->new_group(members, "replica");
          if (group) s.replica_group = std::move(group);
        }
      }
    }
  } else {
    s.global_world = s.parallel.world;
  }

  s.tokenizer = make_tokenizer(cfg.hybridscope.tokenizer);
  s.train_data = RLDataset::load(cfg.data.train_files, *s.tokenizer, cfg.data);
  s.val_data = RLDataset::load(cfg.data.val_files, *s.tokenizer, cfg.data);
  s.loader = std::make_unique<DataLoader>(s.train_data.size(), static_cast<std::size_t>(cfg.data.train_batch_size),
                                          cfg.data.shuffle, static_cast<std::uint64_t>(cfg.data.seed));
  s.total_steps = cfg.trainer.total_training_steps > 0
                      ? cfg.trainer.total_training_steps
                      : static_cast<std::int64_t>(s.loader->batches_per_epoch()) * cfg.trainer.total_epochs;

  ModelShape shape = cfg.hybridscope.model;
  if (shape.vocab_size <= 0) shape.vocab_size = s.tokenizer->vocab_size();
  if (shape.vocab_size < s.tokenizer->vocab_size())
    throw ConfigError(fmt::format("hybridscope.model.vocab_size={} is smaller than the {} tokenizer's vocabulary ({})",
                                  shape.vocab_size, s.tokenizer->name(), s.tokenizer->vocab_size()));
  const auto seed = cfg.hybridscope.seed;
  const auto& model_path = cfg.actor_rollout_ref.model.path;
  // Every rank builds (or loads) the whole model, then keeps its training shard.
  Transformer full = model_path.empty() ? make_model(shape, HeadKind::kLm, stream_seed(seed, 0, kInitStream))
                                        : load_pretrained(model_path, HeadKind::kLm);
  full->to(s.device);  // every model is built (or loaded) on the CPU, then lives on the device
  if (s.serves_ref()) {
    // A rank of a split reference: it holds the whole reference policy (replicated over its pool)
    // and serves the actor's ref phase (serve_reference).
    s.ref_model = full;
    s.apply_compute_options();
    if (cfg.hybridscope.probes.enable) {
      s.timings.set_recorder(s.recorder.get());
      install_cpu_memory_tracker();
    }
    return;
  }
  const auto specs = parameter_specs(*full);
  s.training_layout = training_layout(specs, s.mesh, s.dp_sharding);
  s.module_layout = training_layout(specs, s.mesh, DpSharding::kReplicated);
  const ReshardMode reshard_mode = cfg.hybridscope.reshard.mode;
  s.generation_layout = generation_layout(s.training_layout, rollout_tp, reshard_mode);
  const MeshCoord gen_coord = s.generation_layout.coords[static_cast<std::size_t>(s.actor_rank)];
  s.replica = gen_coord.dp;
  s.replicas = s.generation_layout.mesh.dp;
  s.replica_lead = gen_coord.tp == 0;
  if (actors > 1 && reshard_mode == ReshardMode::kHybrid && rollout_tp <= s.mesh.tp) {
    // Every micro-DP group, in order, on every actor rank. Ascending ranks are ascending replicas
    // (replica = tp mod stride + stride·(pp + PP·dp)), i.e. the training share's prompt order.
    const int stride = s.mesh.tp / rollout_tp;
    for (int j = 0; j < s.mesh.dp; ++j) {
      for (int g = 0; g < rollout_tp; ++g) {
        std::vector<int> members;
        for (int r = 0; r < actors; ++r) {
          const MeshCoord c = megatron_coord(s.mesh, r);
          if (c.dp == j && c.tp / stride == g) members.push_back(r);
        }
        std::shared_ptr<Communicator> group;
        if (members.size() > 1) {
          group = s.actor_groups->new_group(members, "micro_dp");
        } else if (members.front() == s.actor_rank) {
          group = std::make_shared<SingleRankCommunicator>("micro_dp");
        }
        if (group) s.micro_dp_group = std::move(group);
      }
    }
  }
  if (s.sharded()) {
    s.full_actor = full;
    s.actor_model = Transformer(full->shape(), HeadKind::kLm, s.parallel);
    s.actor_model->to(s.device);
    copy_training_shard(*full, *s.actor_model, s.module_layout, s.actor_rank);  // before ZeroShards takes it
  } else {
    s.actor_model = full;
  }
  const double temperature = cfg.actor_rollout_ref.rollout.temperature;
  s.actor = std::make_unique<PPOActor>(s.actor_model, cfg.actor_rollout_ref.actor, temperature,
                                       cfg.actor_rollout_ref.rollout.n, s.total_steps, s.parallel);
  if (cfg.use_critic()) {
    Transformer critic_model{nullptr};
    if (!cfg.critic.model.path.empty()) {
      critic_model = load_pretrained(cfg.critic.model.path, HeadKind::kValue);
    } else {
      critic_model = make_model(s.actor_model->shape(), HeadKind::kValue, stream_seed(seed, 0, kInitStream) + 1);
    }
    critic_model->to(s.device);  // before its optimizer takes the parameters
    s.critic = std::make_unique<PPOCritic>(critic_model, cfg.critic, cfg.actor_rollout_ref.rollout.n, s.total_steps,
                                           s.parallel);
  }
  if (cfg.reward_model.enable) {
    s.reward_model = cfg.reward_model.model.path.empty()
                         ? make_model(s.actor_model->shape(), HeadKind::kValue, stream_seed(seed, 0, kInitStream) + 2)
                         : load_pretrained(cfg.reward_model.model.path, HeadKind::kValue);
    s.reward_model->to(s.device);
    s.reward_model->eval();
  }
  if (cfg.algorithm.use_kl_in_reward) s.kl_ctrl = make_kl_controller(cfg.algorithm.kl_ctrl);

  const auto& rollout_cfg = cfg.actor_rollout_ref.rollout;
  const int max_seq_len = cfg.data.max_prompt_length + cfg.data.max_response_length;
  // Does any rank generate with other weights than it trains with? Then the actor is resharded
  // into a rollout model at every train->rollout switch (3D-HybridEngine).
  bool differs = false;
  for (std::size_t p = 0; p < s.training_layout.params.size(); ++p)
    differs = differs || !(s.training_layout.box(p, s.actor_rank) == s.generation_layout.box(p, s.actor_rank));
  auto reshard_flag = torch::full({1}, differs ? 1 : 0, torch::kInt64);
  s.parallel.world->all_reduce(reshard_flag, ReduceOp::kMax);
  std::shared_ptr<ReshardExecutor> resharder;
  // Offloaded parameters cannot generate: the rollout then holds its own copy even in the training
  // layout (the reshard plan is a local copy), as verl's rollout engine holds its own weights.
  const auto& offload = cfg.actor_rollout_ref.actor.fsdp_config;
  SingleRankGroupFactory one_rank;  // the rollout and reshard groups of a one-process run
  GroupFactory& rollout_groups = s.actor_groups ? *s.actor_groups : static_cast<GroupFactory&>(one_rank);
  if (reshard_flag.item<std::int64_t>() != 0 || offload.param_offload) {
    s.rollout_model = Transformer(full->shape(), HeadKind::kLm,
                                  make_generation_context(rollout_groups, s.generation_layout, s.actor_rank));
    s.rollout_model->to(s.device);
    // bf16 precision: the rollout weights are bf16 copies of the fp32 master weights (each
    // reshard casts), so decoding reads half the bytes; the KV cache follows (compute_dtype).
    const bool bf16 = cfg.hybridscope.precision == Precision::kBf16;
    if (bf16) s.rollout_model->to(torch::kBFloat16);
    // bf16: the weights move as bf16 (cast while packed), so the plan counts 2-byte elements.
    auto wire_specs = specs;
    if (bf16)
      for (auto& spec : wire_specs) spec.element_size = 2;
    const LayoutSet wire_training = bf16 ? training_layout(wire_specs, s.mesh, s.dp_sharding) : s.training_layout;
    auto plan = std::make_shared<const ReshardPlan>(
        plan_reshard(wire_training, generation_layout(wire_training, rollout_tp, reshard_mode), reshard_mode));
    resharder = std::make_shared<ReshardExecutor>(plan, s.actor_rank, rollout_groups, nullptr, &s.global_step);
  }
  s.rollout = std::make_unique<RolloutEngine>(s.rollout_model ? s.rollout_model : s.actor_model,
                                              s.tokenizer->eos_token_id(), s.tokenizer->pad_token_id(),
                                              cfg.hybridscope.kv_block_size, cfg.hybridscope.kv_num_blocks,
                                              rollout_cfg.max_num_seqs, max_seq_len, rollout_cfg.gpu_memory_utilization);
  // A model vocabulary larger than the tokenizer's (hybridscope.model.vocab_size, a benchmark
  // shape) pays for its full LM head but never samples an id the tokenizer cannot decode.
  s.rollout->limit_sampling_to(s.tokenizer->vocab_size());
  s.checkpoint_root = cfg.trainer.default_local_dir;

  if (cfg.hybridscope.probes.enable) {
    s.timings.set_recorder(s.recorder.get());
    install_cpu_memory_tracker();
  }
  s.hybrid_switch = std::make_unique<HybridSwitch>(s.actor_model, *s.rollout, rollout_cfg.free_cache_engine,
                                                   cfg.hybridscope.probes.enable ? s.recorder.get() : nullptr,
                                                   s.memory_device);
  if (resharder) {
    // The generation shards arrive in plan order; the rollout model takes them by name.
    std::vector<at::Tensor> targets;
    auto rollout_params = s.rollout_model->named_parameters();
    for (const auto& p : resharder->plan().generation.params) {
      auto* t = rollout_params.find(p.spec.name);
      if (t == nullptr) throw std::logic_error("the rollout model has no parameter " + p.spec.name);
      targets.push_back(*t);
    }
    s.hybrid_switch->set_resharder(resharder, [targets](const std::vector<at::Tensor>& generation) {
      torch::NoGradGuard no_grad;
      for (std::size_t p = 0; p < targets.size(); ++p) {
        auto target = targets[p];
        if (!generation[p].is_same(target)) target.copy_(generation[p]);
      }
    }, s.actor->optimizer().zero_shards() ? s.actor->optimizer().zero_shards()->named_shards()
                                          : std::vector<std::pair<std::string, torch::Tensor>>{},
       cfg.hybridscope.precision == Precision::kBf16 ? std::optional<at::ScalarType>(torch::kBFloat16) : std::nullopt);
  }
  if (offload.param_offload || offload.optimizer_offload) {
    s.hybrid_switch->set_offload([actor = s.actor.get(), offload] {
      std::vector<at::Tensor> tensors;
      Optimizer& optimizer = actor->optimizer();
      if (offload.param_offload) {
        optimizer.zero_grad();  // the update is done: its gradients are freed, not moved
        tensors = optimizer.parameters();
      }
      if (offload.optimizer_offload) {
        for (auto& t : optimizer.state_tensors()) tensors.push_back(t);
      }
      return tensors;
    });
  }
  s.apply_compute_options();
  s.peak_flops = cfg.hybridscope.peak_flops > 0 ? cfg.hybridscope.peak_flops : device_peak_flops(s.device);
}

PPOTrainer::~PPOTrainer() {
  if (!state_ || !state_->stepping) return;
  try {
    state_->end_recording(probes::RunStatus::kCompleted);
  } catch (const std::exception&) {
    // A destructor cannot report it; the run stays 'running' and is marked killed when the
    // database is next opened.
  }
}

std::vector<std::vector<std::int32_t>> PPOTrainer::State::generate_all(
    const std::vector<const Example*>& examples, const SamplingParams& params,
    const std::function<std::uint64_t(int)>& seed_of) {
  // This replica's contiguous share of the prompts; the ranks of a generation tp group generate
  // the same prompts with the same generator (their logits are all-gathered, so they agree).
  const std::size_t share = examples.size() / static_cast<std::size_t>(replicas);
  GenerationRequest request;
  request.params = params;
  request.max_response_length = cfg.data.max_response_length;
  for (std::size_t i = share * static_cast<std::size_t>(replica); i < share * static_cast<std::size_t>(replica + 1); ++i)
    request.prompts.push_back(examples[i]->prompt_ids);
  auto gen = at::detail::createCPUGenerator(seed_of(replica));
  (rollout_model ? rollout_model : actor_model)->eval();
  GenerationResult result = rollout->generate(request, gen);
  record_kv("gen_peak", result.peak_pool);
  if (mesh.world() == 1) return std::move(result.responses);

  // Responses back for training, packed as (rows, 1 + max_response_length) tokens, row =
  // (length, tokens..., pad).
  const auto rows = static_cast<std::int64_t>(result.responses.size());
  const std::int64_t width = 1 + cfg.data.max_response_length;
  auto packed = torch::zeros({rows, width}, torch::kInt32);
  auto packed_a = packed.accessor<std::int32_t, 2>();
  for (std::int64_t r = 0; r < rows; ++r) {
    const auto& tokens = result.responses[static_cast<std::size_t>(r)];
    packed_a[r][0] = static_cast<std::int32_t>(tokens.size());
    for (std::size_t t = 0; t < tokens.size(); ++t) packed_a[r][static_cast<std::int64_t>(t) + 1] = tokens[t];
  }
  auto unpack = [](const auto& a, std::int64_t row) {
    std::vector<std::int32_t> tokens(static_cast<std::size_t>(a[row][0]));
    for (std::size_t t = 0; t < tokens.size(); ++t) tokens[t] = a[row][static_cast<std::int64_t>(t) + 1];
    return tokens;
  };
  if (micro_dp_group && !cfg.trainer.balance_batch) {
    // HybridFlow: gathered inside the micro-DP group, whose replicas generated this rank's training
    // share, in order; the other prompts' responses stay empty (training_prompts does not take them).
    const auto gathered = micro_dp_group->all_gather(packed).contiguous();  // (group * rows, width)
    const auto gathered_a = gathered.accessor<std::int32_t, 2>();
    const auto share_rows = static_cast<std::int64_t>(examples.size() / static_cast<std::size_t>(mesh.dp)) *
                            static_cast<std::int64_t>(params.n);
    TORCH_CHECK(gathered.size(0) == share_rows, "micro-DP gather: ", gathered.size(0), " rows for a training share of ",
                share_rows);
    std::vector<std::vector<std::int32_t>> all(examples.size() * static_cast<std::size_t>(params.n));
    for (std::int64_t r = 0; r < share_rows; ++r)
      all[static_cast<std::size_t>(dp_rank() * share_rows + r)] = unpack(gathered_a, r);
    return all;
  }
  // Otherwise (vanilla, naive, t_g > t, balance_batch) one all-gather over the actor's world; each
  // replica's rows are taken from its generation tp rank 0.
  const auto gathered = parallel.world->all_gather(packed).contiguous();  // (world * rows, width)
  const auto gathered_a = gathered.accessor<std::int32_t, 2>();
  std::vector<int> speaker(static_cast<std::size_t>(replicas), -1);  // replica -> its generation tp rank 0
  for (int r = 0; r < mesh.world(); ++r) {
    const MeshCoord c = generation_layout.coords[static_cast<std::size_t>(r)];
    if (c.tp == 0) speaker[static_cast<std::size_t>(c.dp)] = r;
  }
  std::vector<std::vector<std::int32_t>> all;
  all.reserve(static_cast<std::size_t>(rows * replicas));
  for (int q = 0; q < replicas; ++q) {
    for (std::int64_t r = 0; r < rows; ++r) {
      all.push_back(unpack(gathered_a, speaker[static_cast<std::size_t>(q)] * rows + r));
    }
  }
  return all;
}

std::vector<std::size_t> PPOTrainer::State::training_prompts(const std::vector<const Example*>& examples,
                                                             const std::vector<std::vector<std::int32_t>>& responses,
                                                             int n) const {
  if (mesh.world() == 1) {
    std::vector<std::size_t> all(examples.size());
    for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
    return all;
  }
  const auto parts = static_cast<std::size_t>(mesh.dp);
  const std::size_t share = examples.size() / parts;
  std::vector<std::size_t> mine;
  if (!cfg.trainer.balance_batch || parts == 1) {
    for (std::size_t i = share * static_cast<std::size_t>(dp_rank()); i < share * static_cast<std::size_t>(dp_rank() + 1); ++i)
      mine.push_back(i);
    return mine;
  }
  // Balanced partition of whole prompt groups (verl's balance_batch keeps equal sequence counts
  // per dp rank and balances their token totals). Every rank computes the same partition from the
  // same responses.
  std::vector<std::int64_t> tokens(examples.size(), 0);  // per prompt group
  for (std::size_t i = 0; i < examples.size(); ++i)
    for (int j = 0; j < n; ++j)
      tokens[i] += static_cast<std::int64_t>(examples[i]->prompt_ids.size() +
                                             responses[i * static_cast<std::size_t>(n) + static_cast<std::size_t>(j)].size());
  return balanced_equal_partitions(tokens, mesh.dp)[static_cast<std::size_t>(dp_rank())];
}

RolloutBatch PPOTrainer::State::make_batch(const std::vector<const Example*>& examples,
                                           const std::vector<std::size_t>& prompts,
                                           const std::vector<std::vector<std::int32_t>>& responses, int n) const {
  std::vector<std::vector<std::int32_t>> prompt_ids, response_ids;
  for (const std::size_t i : prompts) {
    prompt_ids.push_back(examples[i]->prompt_ids);
    for (int j = 0; j < n; ++j) response_ids.push_back(responses[i * static_cast<std::size_t>(n) + static_cast<std::size_t>(j)]);
  }
  RolloutBatch batch = make_rollout_batch(prompt_ids, response_ids, n, tokenizer->pad_token_id(), tokenizer->eos_token_id());
  for (const std::size_t i : prompts) {
    for (int j = 0; j < n; ++j) {
      batch.ground_truth.push_back(examples[i]->ground_truth);
      batch.data_source.push_back(examples[i]->data_source);
    }
  }
  return batch;
}

torch::Tensor PPOTrainer::State::score(const RolloutBatch& batch) {
  // token_level_scores: the sequence's score at its last response token (verl's reward managers).
  auto scores = torch::zeros({batch.size(), batch.response_length()}, torch::kFloat32);
  auto scores_a = scores.accessor<float, 2>();
  const auto lengths = batch.response_mask.sum(-1).to(torch::kInt64).contiguous();
  const auto* length = lengths.data_ptr<std::int64_t>();
  if (cfg.reward_model.enable) {
    torch::NoGradGuard no_grad;
    const auto values = response_values(reward_model, batch.to(device))
                            .to(torch::kCPU, torch::kFloat32)
                            .contiguous();  // (B, R)
    const auto values_a = values.accessor<float, 2>();
    for (std::int64_t b = 0; b < batch.size(); ++b) {
      const auto last = std::max<std::int64_t>(0, length[b] - 1);
      scores_a[b][last] = values_a[b][last];
    }
    return scores;
  }
  const auto responses = batch.responses.contiguous();
  const auto responses_a = responses.accessor<std::int64_t, 2>();
  std::vector<std::int32_t> ids;
  for (std::int64_t b = 0; b < batch.size(); ++b) {
    ids.clear();
    for (std::int64_t t = 0; t < length[b]; ++t) ids.push_back(static_cast<std::int32_t>(responses_a[b][t]));
    const std::string text = tokenizer->decode(ids, true);
    const auto i = static_cast<std::size_t>(b);
    scores_a[b][std::max<std::int64_t>(0, length[b] - 1)] = static_cast<float>(
        compute_score(cfg.reward_model.rule, batch.data_source[i], text, batch.ground_truth[i]));
  }
  return scores;
}

void PPOTrainer::State::record_kv(const char* phase, const KvPoolStats& stats) {
  if (!cfg.hybridscope.probes.enable) return;
  probes::KvPoolSample k;
  k.ts_ns = probes::now_ns();
  k.step = global_step;
  k.phase = phase;
  k.num_blocks = stats.num_blocks;
  k.block_size = stats.block_size;
  k.blocks_used = stats.blocks_used;
  k.shared_blocks = stats.shared_blocks;
  k.num_sequences = stats.num_sequences;
  k.tokens_stored = stats.tokens_stored;
  k.token_capacity_used = stats.token_capacity_used;
  k.cache_bytes = rollout->cache_bytes();
  recorder->record_kv_pool(k);
}

void PPOTrainer::State::sample(const char* phase) {
  if (!cfg.hybridscope.probes.enable) return;
  recorder->record_memory(read_memory(memory_device, global_step, phase));
  record_kv(phase, rollout->allocator().stats());
}

double PPOTrainer::State::validate(std::map<std::string, double>* per_source) {
  // Each generation replica scores its contiguous share of the validation prompts (its ranks
  // generate together; the replica's tp rank 0 counts); sums and counts per data source (the same
  // sorted list on every rank) are added over the world.
  torch::NoGradGuard no_grad;
  if (rollout_model) hybrid_switch->to_rollout(global_step);  // the rollout model gets the current weights
  SamplingParams params = cfg.actor_rollout_ref.rollout.val_kwargs;
  params.n = 1;
  const std::size_t total_rows = val_data.size();
  const std::size_t share = (total_rows + static_cast<std::size_t>(replicas) - 1) / static_cast<std::size_t>(replicas);
  const std::size_t first = std::min(total_rows, share * static_cast<std::size_t>(replica));
  const std::size_t last = std::min(total_rows, first + share);
  const std::size_t chunk = cfg.data.val_batch_size > 0 ? static_cast<std::size_t>(cfg.data.val_batch_size)
                                                        : std::max<std::size_t>(1, last - first);
  std::map<std::string, std::size_t> source_index;
  for (std::size_t i = 0; i < total_rows; ++i) source_index.emplace(val_data[i].data_source, 0);
  std::size_t next = 0;
  for (auto& [source, index] : source_index) index = next++;
  auto sums = torch::zeros({2, static_cast<std::int64_t>(source_index.size()) + 1}, torch::kFloat64);  // (sum, count)
  auto sums_a = sums.accessor<double, 2>();
  const auto all = static_cast<std::int64_t>(source_index.size());
  for (std::size_t start = first; start < last; start += chunk) {
    std::vector<const Example*> examples;
    for (std::size_t i = start; i < std::min(last, start + chunk); ++i) examples.push_back(&val_data[i]);
    GenerationRequest request;
    request.params = params;
    request.max_response_length = cfg.data.max_response_length;
    for (const auto* ex : examples) request.prompts.push_back(ex->prompt_ids);
    auto gen = at::detail::createCPUGenerator(stream_seed(cfg.hybridscope.seed, -1, kRolloutStream));
    const GenerationResult result = rollout->generate(request, gen);
    if (!replica_lead) continue;
    std::vector<std::size_t> rows(examples.size());
    for (std::size_t i = 0; i < rows.size(); ++i) rows[i] = i;
    const RolloutBatch batch = make_batch(examples, rows, result.responses, 1);
    const auto scores = score(batch).sum(-1);
    for (std::int64_t b = 0; b < batch.size(); ++b) {
      const double v = scores[b].item<double>();
      const auto k = static_cast<std::int64_t>(source_index.at(batch.data_source[static_cast<std::size_t>(b)]));
      sums_a[0][k] += v;
      sums_a[1][k] += 1;
      sums_a[0][all] += v;
      sums_a[1][all] += 1;
    }
  }
  if (rollout_model) hybrid_switch->to_train(global_step);
  parallel.world->all_reduce(sums, ReduceOp::kSum);
  if (per_source)
    for (const auto& [source, k] : source_index)
      if (sums_a[1][static_cast<std::int64_t>(k)] > 0)
        (*per_source)[source] = sums_a[0][static_cast<std::int64_t>(k)] / sums_a[1][static_cast<std::int64_t>(k)];
  return sums_a[1][all] > 0 ? sums_a[0][all] / sums_a[1][all] : 0.0;
}

Metrics PPOTrainer::State::step() {
  using probes::Category;
  const auto& arr = cfg.actor_rollout_ref;
  const std::int64_t step = global_step;
  Metrics metrics;
  RolloutBatch batch;
  {
    HS_PROBE_RANGE(timings, "step", kStep);
    // Every rank draws the same global batch; generation replicas generate their shares, every
    // rank gets all responses and keeps its dp rank's prompts for training.
    const auto indices = loader->next_batch();
    std::vector<const Example*> examples;
    for (const auto index : indices) examples.push_back(&train_data[index]);
    const int n = arr.rollout.n;
    std::vector<std::size_t> mine;
    {
      HS_PROBE_RANGE(timings, "switch/train_to_rollout", kSwitch);
      hybrid_switch->to_rollout(step);
    }
    sample("switch/train_to_rollout");
    {
      HS_PROBE_RANGE(timings, "gen", kPhase);
      const auto responses = generate_all(examples, arr.rollout.sampling(), [&](int replica_index) {
        return rank_stream_seed(cfg.hybridscope.seed, step, kRolloutStream, replica_index);
      });
      mine = training_prompts(examples, responses, n);
      batch = make_batch(examples, mine, responses, n);
    }
    if (cfg.algorithm.adv_estimator == AdvEstimator::kRemax) {
      HS_PROBE_RANGE(timings, "gen_max", kPhase);
      SamplingParams greedy = arr.rollout.sampling();
      greedy.do_sample = false;
      const RolloutBatch baseline =
          make_batch(examples, mine, generate_all(examples, greedy, [](int) { return std::uint64_t{0}; }), n);
      batch.reward_baselines = score(baseline).sum(-1);
    }
    {
      HS_PROBE_RANGE(timings, "switch/rollout_to_train", kSwitch);
      hybrid_switch->to_train(step);
    }
    sample("switch/rollout_to_train");
    {
      HS_PROBE_RANGE(timings, "reward", kPhase);
      batch.token_level_scores = score(batch);
    }
    {
      HS_PROBE_RANGE(timings, "old_log_prob", kPhase);
      batch.old_log_probs = actor->compute_log_prob(batch, arr.rollout.log_prob_micro_batch_size_per_gpu);
    }
    sample("old_log_prob");
    if (cfg.use_reference()) {
      HS_PROBE_RANGE(timings, "ref", kPhase);
      torch::NoGradGuard no_grad;
      if (split()) {
        batch.ref_log_probs = remote_ref_log_probs(batch);
      } else {
        batch.ref_log_probs = micro_batched_log_probs(ref_model, batch, arr.ref.log_prob_micro_batch_size_per_gpu,
                                                      arr.rollout.temperature);
      }
    }
    if (critic) {
      HS_PROBE_RANGE(timings, "values", kPhase);
      batch.values = critic->compute_values(batch, cfg.critic.ppo_micro_batch_size_per_gpu);
    }
    {
      HS_PROBE_RANGE(timings, "adv", kPhase);
      if (cfg.algorithm.use_kl_in_reward) {
        const auto kl = apply_kl_penalty(batch.token_level_scores, batch.old_log_probs, batch.ref_log_probs,
                                         batch.response_mask, *kl_ctrl, cfg.algorithm.kl_penalty);
        batch.token_level_rewards = kl.token_level_rewards;
        metrics.emplace_back("actor/reward_kl_penalty", kl.current_kl);
        metrics.emplace_back("actor/reward_kl_penalty_coeff", kl_ctrl->value());
      } else {
        batch.token_level_rewards = batch.token_level_scores;
      }
      const auto& alg = cfg.algorithm;
      AdvantageReturn adv;
      switch (alg.adv_estimator) {
        case AdvEstimator::kGae:
          adv = compute_gae_advantage_return(batch.token_level_rewards, batch.values, batch.response_mask, alg.gamma,
                                             alg.lam);
          break;
        case AdvEstimator::kGrpo:
          adv = compute_grpo_outcome_advantage(batch.token_level_rewards, batch.response_mask, batch.uid, 1e-6,
                                               alg.norm_adv_by_std_in_grpo);
          break;
        case AdvEstimator::kRloo:
          adv = compute_rloo_outcome_advantage(batch.token_level_rewards, batch.response_mask, batch.uid);
          break;
        case AdvEstimator::kReinforcePlusPlus:
          adv = compute_reinforce_plus_plus_outcome_advantage(batch.token_level_rewards, batch.response_mask, alg.gamma);
          break;
        case AdvEstimator::kReinforcePlusPlusBaseline:
          adv = compute_reinforce_plus_plus_baseline_outcome_advantage(batch.token_level_rewards, batch.response_mask,
                                                                       batch.uid);
          break;
        case AdvEstimator::kRemax:
          adv = compute_remax_outcome_advantage(batch.token_level_rewards, batch.reward_baselines, batch.response_mask);
          break;
      }
      batch.advantages = adv.advantages;
      batch.returns = adv.returns;
    }
    if (critic) {
      HS_PROBE_RANGE(timings, "update_critic", kPhase);
      const auto critic_metrics = critic->update_critic(batch, step - 1);
      metrics.insert(metrics.end(), critic_metrics.begin(), critic_metrics.end());
    }
    if (critic) sample("update_critic");
    if (step > cfg.trainer.critic_warmup) {
      HS_PROBE_RANGE(timings, "update_actor", kPhase);
      const auto actor_metrics = actor->update_policy(
          batch, step - 1, rank_stream_seed(cfg.hybridscope.seed, step, kActorShuffleStream, actor_rank));
      metrics.insert(metrics.end(), actor_metrics.begin(), actor_metrics.end());
    }
    sample("update_actor");
    const bool last = step == total_steps;
    if (cfg.trainer.test_freq > 0 && (step % cfg.trainer.test_freq == 0 || last)) {
      HS_PROBE_RANGE(timings, "testing", kValidation);
      std::map<std::string, double> per_source;
      const double score = validate(&per_source);
      for (const auto& [source, v] : per_source) metrics.emplace_back("val-core/" + source + "/reward/mean@1", v);
      metrics.emplace_back("val/mean@1", score);
    }
    if (cfg.trainer.save_freq > 0 && (step % cfg.trainer.save_freq == 0 || last)) {
      HS_PROBE_RANGE(timings, "save_checkpoint", kCheckpoint);
      if (actor_rank == 0) save(step);  // replicas are identical: one copy
      parallel.world->barrier();    // nobody resumes from a half-written checkpoint
    }
  }

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
  if (actor_seconds > 0)
    metrics.emplace_back("perf/mfu/actor", estimate_flops(actor_model->shape(), lengths) * arr.actor.ppo_epochs /
                                               actor_seconds / (peak_flops * world));
  const double critic_seconds = timings.seconds("update_critic");
  if (critic && critic_seconds > 0)
    metrics.emplace_back("perf/mfu/critic", estimate_flops(critic->model()->shape(), lengths) * cfg.critic.ppo_epochs /
                                                critic_seconds / (peak_flops * world));
  metrics.emplace_back("perf/cpu_memory_used_gb", cpu_memory_used_gb());
  if (device.is_cuda()) {
    // The caching allocator's peaks over the step (the switches' peak windows included).
    const DevicePeak peak = take_cuda_peak(memory_device);
    constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
    metrics.emplace_back("perf/max_memory_allocated_gb", static_cast<double>(peak.allocated_bytes) / kGiB);
    metrics.emplace_back("perf/max_memory_reserved_gb", static_cast<double>(peak.reserved_bytes) / kGiB);
  } else if (cpu_memory_tracker_installed()) {
    const CpuMemoryStats cpu = cpu_memory_stats();
    metrics.emplace_back("perf/max_memory_allocated_gb", static_cast<double>(cpu.peak_bytes) / (1024.0 * 1024.0 * 1024.0));
    reset_cpu_memory_peak();
  }
  const auto pool = rollout->allocator().stats();
  metrics.emplace_back("rollout/kv_peak_blocks_used", static_cast<double>(pool.peak_blocks_used));
  metrics.emplace_back("rollout/kv_num_blocks", static_cast<double>(pool.num_blocks));
  metrics.emplace_back("training/global_step", static_cast<double>(step));
  metrics.emplace_back("training/epoch", static_cast<double>(loader->state().epoch));
  return reduce_metrics(metrics, *parallel.world, mesh.tp * mesh.pp);
}

void PPOTrainer::State::save(std::int64_t step) {
  TrainerState state;
  state.global_step = step;
  state.data = loader->state();
  state.kl_coef = kl_ctrl ? kl_ctrl->value() : 0.0;
  state.seed = cfg.hybridscope.seed;
  CheckpointParts parts{&actor_model, &actor->optimizer().adamw(), critic ? &critic->model() : nullptr,
                        critic ? &critic->optimizer().adamw() : nullptr};
  save_checkpoint(checkpoint_root, state, parts);
}

void PPOTrainer::State::prepare(FitSummary& summary) {
  const bool lead = rank() == 0;  // prints and writes the shared files
  timings.begin_step(0);
  // Resume or warm up.
  std::optional<std::string> resume_dir;
  if (cfg.trainer.resume_mode == ResumeMode::kAuto) resume_dir = find_latest_checkpoint(checkpoint_root);
  const std::string base_dir = (std::filesystem::path(checkpoint_root) / "base").string();
  const bool warmup_configured = cfg.actor_rollout_ref.model.path.empty() && cfg.hybridscope.warmup.steps > 0;
  if (resume_dir && split())
    throw ConfigError(fmt::format("found checkpoint {}, but a split placement cannot resume yet: set "
                                  "trainer.resume_mode=disable or move the checkpoint directory",
                                  *resume_dir));
  if (resume_dir && sharded())
    throw ConfigError(fmt::format("found checkpoint {}, but a tensor- or pipeline-parallel actor cannot resume yet: set "
                                  "trainer.resume_mode=disable or move the checkpoint directory",
                                  *resume_dir));
  // The warm-up trains the whole model (on every rank alike); a sharded actor takes its shard after.
  Transformer& whole = full_actor ? full_actor : actor_model;
  if (resume_dir) {
    HS_PROBE_RANGE(timings, "load_checkpoint", kCheckpoint);
    // The reference is the policy the run started from, not the resumed actor.
    if (cfg.use_reference()) {
      if (warmup_configured) {
        ref_model = load_pretrained(base_dir, HeadKind::kLm);
        ref_model->to(device);
      } else {
        ref_model = Transformer(actor_model->shape(), HeadKind::kLm);
        ref_model->to(device);
        copy_backbone(actor_model, ref_model);
      }
    }
    CheckpointParts parts{&actor_model, &actor->optimizer().adamw(), critic ? &critic->model() : nullptr,
                          critic ? &critic->optimizer().adamw() : nullptr};
    const TrainerState state = load_checkpoint(*resume_dir, parts);
    global_step = state.global_step;
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
                                      : RLDataset::load(cfg.hybridscope.warmup.files, *tokenizer, cfg.data);
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
    parallel.world->barrier();
    if (lead) fmt::print("warm-up: {} steps in {}, final loss {:.4f}; base policy saved to {}\n", cfg.hybridscope.warmup.steps,
               detail::format_duration(summary.warmup_seconds), loss, base_dir);
  }
  if (world() > 1) broadcast_parameters(*whole);  // replicas start identical whatever each rank loaded
  if (full_actor) {
    if (ZeroShards* zero = actor->optimizer().zero_shards()) {
      zero->load_full_state_dict(module_slices(*full_actor));
    } else {
      copy_training_shard(*full_actor, *actor_model, module_layout, actor_rank);
    }
  }
  // Reference policy and critic start from the (possibly warmed-up) actor, in its layout (split:
  // the reference ranks took the same weights in the broadcast above).
  if (cfg.use_reference() && !split()) {
    if (!ref_model) {
      ref_model = Transformer(actor_model->shape(), HeadKind::kLm, full_actor ? parallel : ParallelContext{});
      ref_model->to(device);
      if (full_actor) {
        copy_training_shard(*full_actor, *ref_model, module_layout, actor_rank);
      } else {
        copy_backbone(actor_model, ref_model);
      }
    }
    ref_model->eval();
    for (auto& p : ref_model->parameters()) p.set_requires_grad(false);
  }
  if (critic && !resume_dir && cfg.critic.model.path.empty()) copy_backbone(actor_model, critic->model());
  if (world() > 1 && critic) broadcast_parameters(*critic->model());
  apply_compute_options();  // the reference (and a resumed or loaded model) is new
  full_actor = nullptr;  // from here on each rank holds only its shard
  if (split()) {  // the reference ranks start serving at the same step
    auto start = torch::full({1}, global_step, torch::kInt64);
    global_world->broadcast(start, 0);
  }

  if (cfg.trainer.val_before_train) {
    HS_PROBE_RANGE(timings, "testing", kValidation);
    summary.val_before = validate(nullptr);
    if (lead) fmt::print("validation before training (step {}): mean@1 = {:.3f} on {} prompts\n", global_step,
               summary.val_before, val_data.size());
    recorder->record_metrics(global_step, {{"val/mean@1", summary.val_before}});
  }
  flush_records();
}

Metrics PPOTrainer::State::train_step() {
  ++global_step;
  timings.begin_step(global_step);
  if (memory_sampler) memory_sampler->set_step(global_step);
  Metrics metrics = step();
  recorder->record_metrics(global_step, metrics);
  flush_records();
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
  info.local_rank = env.local_rank;
  info.device = to_string(cfg.trainer.device);
  return info;
}

void PPOTrainer::State::begin_recording() {
  probes::RunInfo info = run_info();
  if (world() > 1) {
    // Rank 0 creates the run row in the run database; the others record under the same id.
    auto id = torch::full({1}, rank() == 0 ? recorder->begin_run(info) : std::int64_t{-1}, torch::kInt64);
    global_world->broadcast(id, 0);
    if (rank() > 0) {
      info.run_id = id.item<std::int64_t>();
      recorder->begin_run(info);
    }
  } else {
    recorder->begin_run(info);
  }
  if (!cfg.hybridscope.probes.enable) return;
  // Memory on a timer besides the phase boundaries.
  if (cfg.hybridscope.probes.memory_interval_ms > 0)
    memory_sampler = std::make_unique<MemorySampler>(recorder.get(), memory_device,
                                                     std::chrono::milliseconds(cfg.hybridscope.probes.memory_interval_ms));
#if HS_HAVE_CUPTI
  if (!cupti) cupti = std::make_unique<probes::CuptiCollector>(*recorder);
  cupti->start();  // never throws; collector_stats records why it is not active
#endif
}

void PPOTrainer::State::end_recording(probes::RunStatus status, const std::string& message) {
  memory_sampler.reset();
#if HS_HAVE_CUPTI
  if (cupti) cupti->stop();
#endif
  recorder->end_run(status, message);
}

double PPOTrainer::validate() { return state_->validate(nullptr); }

Metrics PPOTrainer::train_step() {
  auto& s = *state_;
  if (s.serves_ref())
    throw std::logic_error("PPOTrainer::train_step() runs the actor's step; a split reference rank serves in fit()");
  if (!s.stepping) {
    s.begin_recording();
    s.stepping = true;
    FitSummary unused;
    s.prepare(unused);
  }
  try {
    return s.train_step();
  } catch (const std::exception& e) {
    s.end_recording(probes::RunStatus::kFailed, e.what());
    s.stepping = false;
    throw;
  }
}

std::vector<std::pair<std::string, torch::Tensor>> PPOTrainer::State::module_slices(const TransformerImpl& full) const {
  const auto source = full.named_parameters();
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (std::size_t p = 0; p < module_layout.params.size(); ++p) {
    const auto box = module_layout.box(p, actor_rank);
    const auto* tensor = source.find(module_layout.params[p].spec.name);
    if (!box || tensor == nullptr) continue;
    at::Tensor piece = tensor->detach();
    for (std::size_t d = 0; d < box->ranges.size(); ++d)
      piece = piece.slice(static_cast<std::int64_t>(d), box->ranges[d].begin, box->ranges[d].end);
    out.emplace_back(module_layout.params[p].spec.name, piece.contiguous());
  }
  return out;
}

void PPOTrainer::State::broadcast_parameters(torch::nn::Module& module) {
  torch::NoGradGuard no_grad;
  for (auto& p : module.parameters()) {
    auto buffer = p.detach().contiguous();
    global_world->broadcast(buffer, 0);
    if (!buffer.is_same(p)) p.copy_(buffer);
  }
}

// Split placement. The lead of each dp replica (its tp = pp = 0 rank) sends its rows in contiguous
// chunks, one per reference rank: a header (rows, tokens, prompt length), then input_ids,
// attention_mask and position_ids; all sends first, then the (rows, R) float32 log-probs back. The
// reference ranks serve replica 0, 1, ... in order, so the transfers form no cycle. The replica's
// other ranks receive the result by broadcast.
torch::Tensor PPOTrainer::State::remote_ref_log_probs(const RolloutBatch& batch) {
  const MeshCoord coord = megatron_coord(mesh, actor_rank);
  const std::int64_t rows = batch.size(), R = batch.response_length();
  torch::Tensor out;
  if (coord.tp == 0 && coord.pp == 0) {
    const auto refs = static_cast<std::int64_t>(ref_ranks.size());
    auto first_row = [&](std::int64_t k) { return rows * k / refs; };
    for (std::int64_t k = 0; k < refs; ++k) {
      const std::int64_t b = first_row(k), e = first_row(k + 1);
      const int peer = ref_ranks[static_cast<std::size_t>(k)];
      auto header = torch::tensor({e - b, batch.input_ids.size(1), batch.prompt_length()}, torch::kInt64);
      global_world->send(header, peer);
      if (e == b) continue;
      global_world->send(batch.input_ids.slice(0, b, e).to(torch::kInt64).contiguous(), peer);
      global_world->send(batch.attention_mask.slice(0, b, e).to(torch::kInt64).contiguous(), peer);
      global_world->send(batch.position_ids.slice(0, b, e).to(torch::kInt64).contiguous(), peer);
    }
    std::vector<torch::Tensor> parts;
    for (std::int64_t k = 0; k < refs; ++k) {
      const std::int64_t b = first_row(k), e = first_row(k + 1);
      if (e == b) continue;
      auto part = torch::empty({e - b, R}, torch::kFloat32);
      global_world->recv(part, ref_ranks[static_cast<std::size_t>(k)]);
      parts.push_back(part);
    }
    out = torch::cat(parts, 0);
  } else {
    out = torch::empty({rows, R}, torch::kFloat32);
  }
  if (replica_group) replica_group->broadcast(out, 0);
  return out;
}

void PPOTrainer::State::serve_reference(FitSummary& summary) {
  const auto& cfg_ref = cfg.actor_rollout_ref;
  timings.begin_step(0);
  // The base policy: the same warm-up as the actor's (keeping this rank busy while the actor warms
  // up, within the collective timeout), then the actor's rank 0 weights, as the colocated reference.
  if (cfg_ref.model.path.empty() && cfg.hybridscope.warmup.steps > 0) {
    HS_PROBE_RANGE(timings, "warmup", kSetup);
    const RLDataset warmup_data = cfg.hybridscope.warmup.files.empty()
                                      ? train_data
                                      : RLDataset::load(cfg.hybridscope.warmup.files, *tokenizer, cfg.data);
    supervised_warmup(ref_model, warmup_data, *tokenizer, cfg.hybridscope.warmup, cfg.hybridscope.seed,
                      [](int, int, double) {});
  }
  broadcast_parameters(*ref_model);
  ref_model->eval();
  for (auto& p : ref_model->parameters()) p.set_requires_grad(false);
  auto start = torch::zeros({1}, torch::kInt64);  // the step the actor starts from
  global_world->broadcast(start, 0);
  global_step = start.item<std::int64_t>();
  flush_records();
  while (global_step < total_steps) {
    auto flag = torch::full({1}, g_stop_signal.load(), torch::kInt64);
    global_world->all_reduce(flag, ReduceOp::kMax);
    if (const int sig = static_cast<int>(flag.item<std::int64_t>())) {
      end_recording(probes::RunStatus::kKilled, fmt::format("stopped by signal {} after step {}", sig, global_step));
      throw std::runtime_error(fmt::format("stopped by signal {} after step {}", sig, global_step));
    }
    ++global_step;
    timings.begin_step(global_step);
    {
      HS_PROBE_RANGE(timings, "ref", kPhase);
      torch::NoGradGuard no_grad;
      for (int j = 0; j < mesh.dp; ++j) {
        const int lead = actor_ranks[static_cast<std::size_t>(megatron_rank(mesh, {0, 0, j}))];
        auto header = torch::empty({3}, torch::kInt64);
        global_world->recv(header, lead);
        const std::int64_t rows = header[0].item<std::int64_t>(), tokens = header[1].item<std::int64_t>(),
                           prompt = header[2].item<std::int64_t>();
        if (rows == 0) continue;
        RolloutBatch batch;
        batch.input_ids = torch::empty({rows, tokens}, torch::kInt64);
        batch.attention_mask = torch::empty({rows, tokens}, torch::kInt64);
        batch.position_ids = torch::empty({rows, tokens}, torch::kInt64);
        global_world->recv(batch.input_ids, lead);
        global_world->recv(batch.attention_mask, lead);
        global_world->recv(batch.position_ids, lead);
        batch.prompts = batch.input_ids.slice(1, 0, prompt);
        batch.responses = batch.input_ids.slice(1, prompt);
        std::vector<torch::Tensor> parts;
        for (const auto& sel : split_rows(rows, cfg_ref.ref.log_prob_micro_batch_size_per_gpu))
          parts.push_back(
              response_log_probs(ref_model, batch.select(sel).to(device), cfg_ref.rollout.temperature, false)
                  .first.to(torch::kCPU));
        global_world->send(torch::cat(parts, 0).to(torch::kFloat32).contiguous(), lead);
      }
    }
    flush_records();
    ++summary.steps_run;
  }
}

namespace {
double find(const Metrics& metrics, const std::string& name, double fallback = 0.0) {
  for (const auto& [n, v] : metrics)
    if (n == name) return v;
  return fallback;
}
}  // namespace

FitSummary PPOTrainer::fit() {
  auto& s = *state_;
  const auto& cfg = s.cfg;
  if (s.recorder->run_id() >= 0)
    throw std::logic_error("PPOTrainer::fit() runs once, on a trainer that has not run train_step(): make a new trainer");
  FitSummary summary;
  summary.db_path = cfg.hybridscope.db;
  summary.rank = s.rank();
  s.begin_recording();
  const bool lead = s.rank() == 0;  // prints and writes the shared files

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
    if (s.serves_ref()) {
      s.serve_reference(summary);
      s.end_recording(probes::RunStatus::kCompleted);
      s.global_world->barrier();  // every rank's file is complete; rank 0 merges
      return summary;
    }
    s.prepare(summary);
    summary.first_step = static_cast<int>(s.global_step) + 1;

    detail::Progress bar("train", s.total_steps, s.opts.show_progress && lead);
    bar.update(s.global_step);
    double step_seconds_sum = 0;
    while (s.global_step < s.total_steps) {
      // A stop request on any rank stops every rank at the same step boundary.
      int sig = g_stop_signal.load();
      if (s.world() > 1) {
        auto flag = torch::full({1}, sig, torch::kInt64);
        s.global_world->all_reduce(flag, ReduceOp::kMax);
        sig = static_cast<int>(flag.item<std::int64_t>());
      }
      if (sig) {
        s.end_recording(probes::RunStatus::kKilled, fmt::format("stopped by signal {} after step {}", sig, s.global_step));
        throw std::runtime_error(fmt::format("stopped by signal {} after step {}", sig, s.global_step));
      }
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
      summary.val_after = s.validate(nullptr);
      s.recorder->record_metrics(s.global_step, {{"val/mean@1", summary.val_after}});
    }
    if (summary.steps_run > 0) summary.mean_step_seconds = step_seconds_sum / summary.steps_run;
    // This run's last checkpoint, if it wrote one (not an older run's left in the same root).
    if (auto latest = find_latest_checkpoint(s.checkpoint_root)) {
      const std::string name = std::filesystem::path(*latest).filename().string();
      const int step = std::atoi(name.substr(name.rfind('_') + 1).c_str());
      if (step >= summary.first_step && step <= s.global_step) summary.checkpoint_dir = *latest;
    }
    s.end_recording(probes::RunStatus::kCompleted);
    if (s.world() > 1) {
      s.global_world->barrier();  // every rank's file is complete
      if (lead) {
        const auto report = probes::merge_rank_files(cfg.hybridscope.db);
        fmt::print("merged {} rank files ({} rows) into {}\n", report.files_merged, report.rows_copied,
                   cfg.hybridscope.db);
      }
    }
  } catch (const std::exception& e) {
    if (g_stop_signal.load() == 0) s.end_recording(probes::RunStatus::kFailed, e.what());
    throw;
  }
  return summary;
}

}  // namespace hs::trainer
