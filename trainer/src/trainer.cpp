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

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <stdexcept>

#include <fmt/format.h>
#include <torch/torch.h>

#include "console.h"
#include "hybridscope/probes/merge.h"
#include "hybridscope/probes/range.h"
#include "hybridscope/probes/recorder.h"
#if HS_HAVE_CUPTI
#include "hybridscope/probes/cupti_collector.h"
#endif
#include "hybridscope/trainer/batch.h"
#include "hybridscope/trainer/checkpoint.h"
#include "hybridscope/trainer/core_algos.h"
#include "hybridscope/trainer/cpu_memory_tracker.h"
#include "hybridscope/trainer/memory_probe.h"
#include "hybridscope/trainer/hybrid_switch.h"
#include "hybridscope/trainer/metrics.h"
#include "hybridscope/trainer/ppo_workers.h"
#include "hybridscope/trainer/probed_communicator.h"
#include "hybridscope/trainer/process_group.h"
#include "hybridscope/trainer/reward.h"
#include "hybridscope/trainer/rollout.h"
#include "hybridscope/trainer/sft.h"

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
constexpr int kCpuDevice = -1;  // the memory probe's device: trainer.device=cuda is refused for now

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
// config). Three small all_reduces per call.
Metrics reduce_metrics(const Metrics& metrics, Communicator& world) {
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
      case Combine::kSum: v = sum[i].item<double>(); break;
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

// Valid configurations that this single-process build cannot run yet: refused by name rather
// than silently ignored.
void check_supported(const Config& cfg) {
  auto refuse = [](const std::string& what) {
    throw ConfigError(what + " is not supported by this build of the trainer yet");
  };
  if (cfg.trainer.device != "cpu")
    refuse("trainer.device=" + cfg.trainer.device + " (runs on cpu; set trainer.device=cpu)");
  const auto& mega = cfg.actor_rollout_ref.actor.megatron;
  if (mega.tensor_model_parallel_size != 1)
    refuse("actor_rollout_ref.actor.megatron.tensor_model_parallel_size > 1 (data parallel only; set it to 1)");
  if (mega.pipeline_model_parallel_size != 1)
    refuse("actor_rollout_ref.actor.megatron.pipeline_model_parallel_size > 1 (data parallel only; set it to 1)");
  if (cfg.trainer.nnodes * cfg.trainer.n_gpus_per_node > 1) {
    // These whiten or adapt over the whole batch, which data-parallel ranks do not hold.
    const auto est = cfg.algorithm.adv_estimator;
    if (est == AdvEstimator::kGae || est == AdvEstimator::kReinforcePlusPlus ||
        est == AdvEstimator::kReinforcePlusPlusBaseline)
      refuse(fmt::format("algorithm.adv_estimator={} with more than one rank (it whitens advantages over the whole "
                         "batch; use grpo, rloo or remax, or one rank)",
                         to_string(est)));
    if (cfg.algorithm.use_kl_in_reward && cfg.algorithm.kl_ctrl.type == KlCtrlType::kAdaptive)
      refuse("algorithm.kl_ctrl.type=adaptive with more than one rank (set it to fixed)");
  }
  if (cfg.actor_rollout_ref.rollout.tensor_model_parallel_size != 1)
    refuse("actor_rollout_ref.rollout.tensor_model_parallel_size > 1 (one rank; set it to 1)");
  if (cfg.actor_rollout_ref.model.enable_gradient_checkpointing || cfg.critic.model.enable_gradient_checkpointing)
    refuse("enable_gradient_checkpointing=true (set it to false)");
  for (const auto& logger : cfg.trainer.logger)
    if (logger != "console") refuse("trainer.logger '" + logger + "' (console is built in; every metric also goes to the run database)");
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
  std::unique_ptr<C10dGroupFactory> groups;     // world > 1 only
  ParallelContext parallel;                     // world and dp groups, probed
  std::unique_ptr<probes::Recorder> recorder;
#if HS_HAVE_CUPTI
  std::unique_ptr<probes::CuptiCollector> cupti;  // GPU activity; says "inactive" without a device
#endif
  std::unique_ptr<MemorySampler> memory_sampler;  // while a run is being recorded
  probes::StepTimings timings;
  std::string checkpoint_root;
  double peak_flops = 0;

  RolloutBatch generate(const std::vector<const Example*>& examples, const SamplingParams& params,
                        std::uint64_t seed);
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
};

PPOTrainer::PPOTrainer(Config config, TrainerOptions options) : state_(std::make_unique<State>()) {
  auto& s = *state_;
  s.cfg = std::move(config);
  s.opts = std::move(options);
  hs::trainer::validate(s.cfg);
  const auto& cfg = s.cfg;
  check_supported(cfg);
  torch::set_num_threads(cfg.hybridscope.num_threads);

  s.env = dist_env_from_environment();
  const int world = cfg.trainer.nnodes * cfg.trainer.n_gpus_per_node;
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
  const std::string& db = cfg.hybridscope.db;
  if (world > 1) {
    ProcessGroupOptions pg;
    pg.backend = cfg.hybridscope.dist.backend == "nccl" ? DistBackend::kNccl : DistBackend::kGloo;
    pg.timeout = std::chrono::milliseconds(static_cast<std::int64_t>(cfg.hybridscope.dist.timeout_s * 1000.0));
    s.groups = std::make_unique<C10dGroupFactory>(s.env, pg);
    // Files a dead earlier run left behind are merged before this run's ranks open theirs.
    if (s.rank() == 0 && std::filesystem::exists(db) && !probes::rank_files(db).empty()) {
      for (const auto& line : probes::merge_rank_files(db).messages) fmt::print("merged earlier rank file: {}\n", line);
    }
    s.groups->world()->barrier();
  }
  const std::string rank_db = s.rank() == 0 ? db : db + ".rank" + std::to_string(s.rank());
  if (s.rank() > 0 && std::filesystem::exists(rank_db)) {
    // Left over and not mergeable (its run is not in the run database): replaced, said aloud.
    fmt::print(stderr, "warning: replacing a stale rank file {} that could not be merged into {}\n", rank_db, db);
    for (const char* suffix : {"", "-wal", "-shm"}) std::remove((rank_db + suffix).c_str());
  }
  s.recorder = std::make_unique<probes::Recorder>(rank_db, s.rank());
  if (world > 1) {
    // Every collective of the run goes through the communication probe.
    const bool probe = cfg.hybridscope.probes.enable;
    std::vector<int> all(static_cast<std::size_t>(world));
    for (int r = 0; r < world; ++r) all[static_cast<std::size_t>(r)] = r;
    std::shared_ptr<Communicator> world_group = s.groups->world();
    std::shared_ptr<Communicator> dp_group = s.groups->new_group(all, "dp");
    if (probe) {
      world_group = std::make_shared<ProbedCommunicator>(world_group, s.recorder.get(), &s.global_step);
      dp_group = std::make_shared<ProbedCommunicator>(dp_group, s.recorder.get(), &s.global_step);
    }
    s.parallel.world = world_group;
    s.parallel.dp = dp_group;
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
  s.actor_model = model_path.empty() ? make_model(shape, HeadKind::kLm, stream_seed(seed, 0, kInitStream))
                                     : load_pretrained(model_path, HeadKind::kLm);
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
    s.critic = std::make_unique<PPOCritic>(critic_model, cfg.critic, cfg.actor_rollout_ref.rollout.n, s.total_steps,
                                           s.parallel);
  }
  if (cfg.reward_model.enable) {
    s.reward_model = cfg.reward_model.model.path.empty()
                         ? make_model(s.actor_model->shape(), HeadKind::kValue, stream_seed(seed, 0, kInitStream) + 2)
                         : load_pretrained(cfg.reward_model.model.path, HeadKind::kValue);
    s.reward_model->eval();
  }
  if (cfg.algorithm.use_kl_in_reward) s.kl_ctrl = make_kl_controller(cfg.algorithm.kl_ctrl);

  const auto& rollout_cfg = cfg.actor_rollout_ref.rollout;
  const int max_seq_len = cfg.data.max_prompt_length + cfg.data.max_response_length;
  s.rollout = std::make_unique<RolloutEngine>(s.actor_model, s.tokenizer->eos_token_id(), s.tokenizer->pad_token_id(),
                                              cfg.hybridscope.kv_block_size, cfg.hybridscope.kv_num_blocks,
                                              rollout_cfg.max_num_seqs, max_seq_len);
  s.checkpoint_root = cfg.trainer.default_local_dir;

  if (cfg.hybridscope.probes.enable) {
    s.timings.set_recorder(s.recorder.get());
    install_cpu_memory_tracker();
  }
  s.hybrid_switch = std::make_unique<HybridSwitch>(s.actor_model, *s.rollout, rollout_cfg.free_cache_engine,
                                                   cfg.hybridscope.probes.enable ? s.recorder.get() : nullptr);
  s.peak_flops = cfg.hybridscope.peak_flops > 0 ? cfg.hybridscope.peak_flops : measure_gemm_flops();
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

RolloutBatch PPOTrainer::State::generate(const std::vector<const Example*>& examples, const SamplingParams& params,
                                         std::uint64_t seed) {
  GenerationRequest request;
  request.params = params;
  request.max_response_length = cfg.data.max_response_length;
  for (const auto* ex : examples) request.prompts.push_back(ex->prompt_ids);
  auto gen = at::detail::createCPUGenerator(seed);
  actor_model->eval();
  const GenerationResult result = rollout->generate(request, gen);
  record_kv("gen_peak", result.peak_pool);
  RolloutBatch batch = make_rollout_batch(request.prompts, result.responses, params.n, tokenizer->pad_token_id(),
                                          tokenizer->eos_token_id());
  for (const auto* ex : examples) {
    for (int j = 0; j < params.n; ++j) {
      batch.ground_truth.push_back(ex->ground_truth);
      batch.data_source.push_back(ex->data_source);
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
    const auto values = response_values(reward_model, batch).to(torch::kFloat32).contiguous();  // (B, R)
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
  recorder->record_memory(read_memory(kCpuDevice, global_step, phase));
  record_kv(phase, rollout->allocator().stats());
}

double PPOTrainer::State::validate(std::map<std::string, double>* per_source) {
  // Each rank scores its contiguous share of the validation prompts; sums and counts per data
  // source (the same sorted list on every rank) are added over the world.
  torch::NoGradGuard no_grad;
  SamplingParams params = cfg.actor_rollout_ref.rollout.val_kwargs;
  params.n = 1;
  const std::size_t total_rows = val_data.size();
  const std::size_t share = (total_rows + static_cast<std::size_t>(world()) - 1) / static_cast<std::size_t>(world());
  const std::size_t first = std::min(total_rows, share * static_cast<std::size_t>(rank()));
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
    const RolloutBatch batch = generate(examples, params, stream_seed(cfg.hybridscope.seed, -1, kRolloutStream));
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
    // Every rank draws the same global batch and keeps its contiguous share of the prompts.
    const auto indices = loader->next_batch();
    const std::size_t share = indices.size() / static_cast<std::size_t>(world());
    std::vector<const Example*> examples;
    for (std::size_t k = share * static_cast<std::size_t>(rank()); k < share * static_cast<std::size_t>(rank() + 1); ++k)
      examples.push_back(&train_data[indices[k]]);
    {
      HS_PROBE_RANGE(timings, "switch/train_to_rollout", kSwitch);
      hybrid_switch->to_rollout(step);
    }
    sample("switch/train_to_rollout");
    {
      HS_PROBE_RANGE(timings, "gen", kPhase);
      batch = generate(examples, arr.rollout.sampling(),
                       rank_stream_seed(cfg.hybridscope.seed, step, kRolloutStream, rank()));
    }
    if (cfg.algorithm.adv_estimator == AdvEstimator::kRemax) {
      HS_PROBE_RANGE(timings, "gen_max", kPhase);
      SamplingParams greedy = arr.rollout.sampling();
      greedy.do_sample = false;
      const RolloutBatch baseline = generate(examples, greedy, 0);
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
      std::vector<torch::Tensor> parts;
      for (const auto& rows : split_rows(batch.size(), arr.ref.log_prob_micro_batch_size_per_gpu))
        parts.push_back(response_log_probs(ref_model, batch.select(rows), arr.rollout.temperature, false).first);
      batch.ref_log_probs = torch::cat(parts, 0);
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
          batch, step - 1, rank_stream_seed(cfg.hybridscope.seed, step, kActorShuffleStream, rank()));
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
      if (rank() == 0) save(step);  // replicas are identical: one copy
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
  const int world = cfg.trainer.nnodes * cfg.trainer.n_gpus_per_node;
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
  if (cpu_memory_tracker_installed()) {
    const CpuMemoryStats cpu = cpu_memory_stats();
    metrics.emplace_back("perf/max_memory_allocated_gb", static_cast<double>(cpu.peak_bytes) / (1024.0 * 1024.0 * 1024.0));
    reset_cpu_memory_peak();
  }
  const auto pool = rollout->allocator().stats();
  metrics.emplace_back("rollout/kv_peak_blocks_used", static_cast<double>(pool.peak_blocks_used));
  metrics.emplace_back("rollout/kv_num_blocks", static_cast<double>(pool.num_blocks));
  metrics.emplace_back("training/global_step", static_cast<double>(step));
  metrics.emplace_back("training/epoch", static_cast<double>(loader->state().epoch));
  return reduce_metrics(metrics, *parallel.world);
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
  if (cfg.trainer.resume_mode == "auto") resume_dir = find_latest_checkpoint(checkpoint_root);
  const std::string base_dir = (std::filesystem::path(checkpoint_root) / "base").string();
  const bool warmup_configured = cfg.actor_rollout_ref.model.path.empty() && cfg.hybridscope.warmup.steps > 0;
  if (resume_dir) {
    HS_PROBE_RANGE(timings, "load_checkpoint", kCheckpoint);
    // The reference is the policy the run started from, not the resumed actor.
    if (cfg.use_reference()) {
      if (warmup_configured) {
        ref_model = load_pretrained(base_dir, HeadKind::kLm);
      } else {
        ref_model = Transformer(actor_model->shape(), HeadKind::kLm);
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
        actor_model, warmup_data, *tokenizer, cfg.hybridscope.warmup, cfg.hybridscope.seed,
        [&](int done, int total, double l) {
          bar.update(done, fmt::format("loss {:.3f}", l));
          if (lead && (done % every == 0 || done == total))
            bar.println(fmt::format("warm-up {}/{} loss {:.4f}", done, total, l));
        });
    bar.finish();
    summary.warmup_seconds = static_cast<double>(probes::now_ns() - start) * 1e-9;
    if (lead) {
      std::filesystem::create_directories(base_dir);
      save_pretrained(actor_model, base_dir);
    }
    parallel.world->barrier();
    if (lead) fmt::print("warm-up: {} steps in {}, final loss {:.4f}; base policy saved to {}\n", cfg.hybridscope.warmup.steps,
               detail::format_duration(summary.warmup_seconds), loss, base_dir);
  }
  // Reference policy and critic start from the (possibly warmed-up) actor.
  if (cfg.use_reference()) {
    if (!ref_model) {
      ref_model = Transformer(actor_model->shape(), HeadKind::kLm);
      copy_backbone(actor_model, ref_model);
    }
    ref_model->eval();
    for (auto& p : ref_model->parameters()) p.set_requires_grad(false);
  }
  if (critic && !resume_dir && cfg.critic.model.path.empty()) copy_backbone(actor_model, critic->model());
  if (world() > 1) {
    broadcast_parameters(*actor_model);
    if (critic) broadcast_parameters(*critic->model());
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
  info.world_size = cfg.trainer.nnodes * cfg.trainer.n_gpus_per_node;
  info.torch_version = TORCH_VERSION;
  info.local_rank = env.local_rank;
  info.device = cfg.trainer.device;
  return info;
}

void PPOTrainer::State::begin_recording() {
  probes::RunInfo info = run_info();
  if (world() > 1) {
    // Rank 0 creates the run row in the run database; the others record under the same id.
    auto id = torch::full({1}, rank() == 0 ? recorder->begin_run(info) : std::int64_t{-1}, torch::kInt64);
    parallel.world->broadcast(id, 0);
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
    memory_sampler = std::make_unique<MemorySampler>(recorder.get(), kCpuDevice,
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

void PPOTrainer::State::broadcast_parameters(torch::nn::Module& module) {
  torch::NoGradGuard no_grad;
  for (auto& p : module.parameters()) {
    auto buffer = p.detach().contiguous();
    parallel.world->broadcast(buffer, 0);
    if (!buffer.is_same(p)) p.copy_(buffer);
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
        s.parallel.world->all_reduce(flag, ReduceOp::kMax);
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
    if (auto latest = find_latest_checkpoint(s.checkpoint_root)) summary.checkpoint_dir = *latest;
    s.end_recording(probes::RunStatus::kCompleted);
    if (s.world() > 1) {
      s.parallel.world->barrier();  // every rank's file is complete
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
