// trainer_bench.cpp — what the demo's step costs on this machine: GEMM rate (the MFU denominator
// on CPU), rollout tokens/s, and an actor update's tokens/s, on the demo model's shape
// (configs/demo_grpo.yaml), and what the probes cost on the whole step (BM_ProbeOverhead).
// Run: make bench (JSON in out/bench.json).
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "hybridscope/probes/clock.h"
#include "hybridscope/trainer/data/batch.h"
#include "hybridscope/trainer/config/config.h"
#include "hybridscope/trainer/rl/core_algos.h"
#include "hybridscope/trainer/model/device.h"
#include "hybridscope/trainer/rl/metrics.h"
#include "hybridscope/trainer/memory/cpu_memory_tracker.h"
#include "hybridscope/trainer/data/dataset.h"
#include "hybridscope/trainer/rl/ppo_workers.h"
#include "hybridscope/trainer/rollout/rollout.h"
#include "hybridscope/trainer/data/tokenizer.h"
#include "hybridscope/trainer/loop/trainer.h"

namespace {

using namespace hs::trainer;

struct Demo {
  Config cfg;
  std::unique_ptr<Tokenizer> tokenizer;
  RLDataset data;
  ModelShape shape;

  Demo() {
    cfg = load_config(std::string(HS_SOURCE_DIR) + "/configs/demo_grpo.yaml");
    cfg.data.train_files = std::string(HS_SOURCE_DIR) + "/" + cfg.data.train_files;
    tokenizer = make_tokenizer(resolved_tokenizer(cfg));
    data = RLDataset::load(cfg.data.train_files, *tokenizer, cfg.data);
    shape = cfg.hybridscope.model;
    if (shape.vocab_size <= 0) shape.vocab_size = tokenizer->vocab_size();
    torch::set_num_threads(cfg.hybridscope.num_threads);
  }
  std::vector<std::vector<std::int32_t>> prompts(int count) const {
    std::vector<std::vector<std::int32_t>> out;
    for (int i = 0; i < count; ++i) out.push_back(data[static_cast<std::size_t>(i) % data.size()].prompt_ids);
    return out;
  }
};

const Demo& demo() {
  static const Demo d;
  return d;
}

void BM_Gemm(benchmark::State& state) {
  torch::set_num_threads(demo().cfg.hybridscope.num_threads);
  const auto n = state.range(0);
  const auto a = torch::randn({n, n});
  const auto b = torch::randn({n, n});
  for (auto _ : state) benchmark::DoNotOptimize(torch::mm(a, b));
  state.counters["FLOPS"] = benchmark::Counter(2.0 * static_cast<double>(n * n * n),
                                               benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Gemm)->Arg(256)->Arg(512)->Arg(1024)->Unit(benchmark::kMillisecond)->UseRealTime();

// The CPU peak behind perf/mfu (measure_gemm_flops: the faster of BLAS and oneDNN, the libraries of
// hybridscope.cpu_matmul, on a float32 1024^3 product) at 1 and 2 intra-op threads: what
// bench/hardware/cpu-local.yaml's fp32 peak (one thread per rank) is measured with.
void BM_GemmPeak(benchmark::State& state) {
  torch::set_num_threads(static_cast<int>(state.range(0)));
  double peak = 0.0;
  for (auto _ : state) peak = std::max(peak, measure_gemm_flops());
  state.counters["peak_FLOPS"] = peak;
  torch::set_num_threads(demo().cfg.hybridscope.num_threads);
}
BENCHMARK(BM_GemmPeak)->Arg(1)->Arg(2)->Iterations(3)->Unit(benchmark::kMillisecond)->UseRealTime();

// The model's linear-layer product rate by the input's rows (measure_linear_flops, one thread, the
// rank's setting): decode multiplies a few sequences' rows by each weight, where the rate is far
// below BM_GemmPeak's; args (rows, in, out): the h768 matrices' MLP up (768 -> 2304) and down
// (2304 -> 768) products. bench/hardware/cpu-local.yaml's device.rows_efficiency is their mean
// rate at each row count over the largest.
void BM_LinearRows(benchmark::State& state) {
  torch::set_num_threads(1);
  double rate = 0.0;
  for (auto _ : state) rate = std::max(rate, measure_linear_flops(state.range(0), state.range(1), state.range(2)));
  state.counters["FLOPS"] = rate;
  torch::set_num_threads(demo().cfg.hybridscope.num_threads);
}
BENCHMARK(BM_LinearRows)
    ->ArgNames({"rows", "in", "out"})
    ->Apply([](benchmark::internal::Benchmark* b) {
      for (const std::int64_t rows : {8, 16, 32, 64, 128, 256, 512, 1024}) {
        b->Args({rows, 768, 2304});
        b->Args({rows, 2304, 768});
      }
    })
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// One rollout of the demo step: train_batch_size prompts x n samples.
void BM_Rollout(benchmark::State& state) {
  const auto& d = demo();
  torch::manual_seed(0);
  Transformer model(d.shape, HeadKind::kLm);
  model->eval();
  const auto& r = d.cfg.actor_rollout_ref.rollout;
  RolloutEngine engine(model, d.tokenizer->eos_token_id(), d.tokenizer->pad_token_id(), d.cfg.hybridscope.kv_block_size,
                       d.cfg.hybridscope.kv_num_blocks, r.max_num_seqs,
                       d.cfg.data.max_prompt_length + d.cfg.data.max_response_length, r.gpu_memory_utilization);
  engine.allocate_cache();
  GenerationRequest request;
  request.prompts = d.prompts(d.cfg.data.train_batch_size);
  request.params = r.sampling();
  request.max_response_length = d.cfg.data.max_response_length;
  auto gen = at::detail::createCPUGenerator(1);
  std::int64_t tokens = 0;
  for (auto _ : state) tokens += engine.generate(request, gen).generated_tokens;
  state.counters["tokens_per_s"] = benchmark::Counter(static_cast<double>(tokens), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Rollout)->Unit(benchmark::kMillisecond)->UseRealTime();

// One actor update of the demo step on a batch of full-length responses.
void BM_ActorUpdate(benchmark::State& state) {
  const auto& d = demo();
  torch::manual_seed(0);
  Transformer model(d.shape, HeadKind::kLm);
  const auto& cfg = d.cfg;
  const int n = cfg.actor_rollout_ref.rollout.n;
  PPOActor actor(model, cfg.actor_rollout_ref.actor, 1.0, n, 1000);
  const auto prompts = d.prompts(cfg.data.train_batch_size);
  std::vector<std::vector<std::int32_t>> responses;
  for (std::size_t i = 0; i < prompts.size() * static_cast<std::size_t>(n); ++i)
    responses.push_back(d.tokenizer->encode("#### 123"));
  RolloutBatch batch = make_rollout_batch(prompts, responses, n, d.tokenizer->pad_token_id(), d.tokenizer->eos_token_id());
  batch.old_log_probs = actor.compute_log_prob(batch, -1);
  batch.advantages = torch::randn_like(batch.old_log_probs);
  const double tokens = batch.attention_mask.sum().item<double>();
  for (auto _ : state) benchmark::DoNotOptimize(actor.update_policy(batch, 0, 1));
  state.counters["tokens_per_s"] =
      benchmark::Counter(tokens, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_ActorUpdate)->Unit(benchmark::kMillisecond)->UseRealTime();

// Probe overhead on the whole demo GRPO step (issue 3: <= 1 % of step time with all CPU probes
// on). Two trainers on the same config and seed step alternately (on, off, off, on, on, off, ...:
// each pair swaps its order so drift in the machine's speed cancels): one with
// hybridscope.probes.enable=true (ranges recorded into a temporary SQLite file, the CPU tracking
// allocator installed, memory and KV-pool samples at phase boundaries, switch records), one with
// false (the tracker taken out for its steps). Both still time their phases (timing_s/*) and
// record their step metrics: that is the trainer, not a probe. Both do the same work: same
// weights, same samples (`same_work` = share of pairs whose token counts agree).
// Counters: medians of the on and off step times, ratio = median(on) / median(off),
// paired_ratio = median over pairs of on/off, overhead_pct = (ratio - 1) x 100; cpu_ratio is the
// same ratio of the process's CPU time per step (all threads, the recorder's writer included),
// which other load on a shared machine disturbs less than wall time.
Config overhead_config(bool probes, const std::string& db) {
  Config cfg = load_config(std::string(HS_SOURCE_DIR) + "/configs/demo_grpo.yaml");
  cfg.data.train_files = std::string(HS_SOURCE_DIR) + "/" + cfg.data.train_files;
  cfg.data.val_files = std::string(HS_SOURCE_DIR) + "/" + cfg.data.val_files;
  cfg.hybridscope.warmup.steps = 0;  // a random policy: the step's shape is what matters here
  cfg.hybridscope.peak_flops = 1e11;  // skip measuring the GEMM peak (MFU is not used)
  cfg.hybridscope.db = db;
  cfg.hybridscope.probes.enable = probes;
  cfg.trainer.total_training_steps = 1000;
  cfg.trainer.test_freq = -1;
  cfg.trainer.save_freq = -1;
  cfg.trainer.val_before_train = false;
  cfg.trainer.resume_mode = hs::trainer::ResumeMode::kDisable;
  return cfg;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n == 0 ? 0.0 : (n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]));
}

// CPU time of the whole process (every thread), in seconds.
double process_cpu_seconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

double metric(const std::vector<std::pair<std::string, double>>& metrics, const char* name) {
  for (const auto& [n, v] : metrics)
    if (n == name) return v;
  return -1;
}

void BM_ProbeOverhead(benchmark::State& state) {
  const auto dir = std::filesystem::temp_directory_path() / ("hs_probe_overhead_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  TrainerOptions options;
  options.show_progress = false;
  PPOTrainer on(overhead_config(true, (dir / "on.sqlite").string()), options);
  PPOTrainer off(overhead_config(false, (dir / "off.sqlite").string()), options);
  double tokens_on = 0, tokens_off = 0;
  std::vector<double> on_cpu, off_cpu;
  auto timed_step = [&](bool probes) {
    if (probes) {
      install_cpu_memory_tracker();
    } else {
      uninstall_cpu_memory_tracker();
    }
    const double cpu_start = process_cpu_seconds();
    const auto start = hs::probes::now_ns();
    const auto metrics = (probes ? on : off).train_step();
    const double seconds = static_cast<double>(hs::probes::now_ns() - start) * 1e-9;
    (probes ? on_cpu : off_cpu).push_back(process_cpu_seconds() - cpu_start);
    (probes ? tokens_on : tokens_off) = metric(metrics, "perf/total_num_tokens");
    return seconds;
  };
  timed_step(true);  // warm-up: first-step allocations, page faults, the SQLite files
  timed_step(false);
  on_cpu.clear();
  off_cpu.clear();
  std::vector<double> on_s, off_s, ratios;
  int same_work = 0;
  for (auto _ : state) {
    const bool on_first = on_s.size() % 2 == 0;
    const double first = timed_step(on_first);
    const double second = timed_step(!on_first);
    on_s.push_back(on_first ? first : second);
    off_s.push_back(on_first ? second : first);
    ratios.push_back(on_s.back() / off_s.back());
    same_work += tokens_on == tokens_off ? 1 : 0;
  }
  const double ratio = median(on_s) / median(off_s);
  state.counters["on_ms"] = median(on_s) * 1e3;
  state.counters["off_ms"] = median(off_s) * 1e3;
  state.counters["ratio"] = ratio;
  state.counters["paired_ratio"] = median(ratios);
  state.counters["overhead_pct"] = (ratio - 1.0) * 100.0;
  state.counters["cpu_ratio"] = median(on_cpu) / median(off_cpu);
  state.counters["same_work"] = static_cast<double>(same_work) / static_cast<double>(on_s.size());
  install_cpu_memory_tracker();  // as a probes-on trainer leaves the process
}
BENCHMARK(BM_ProbeOverhead)->Iterations(20)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
