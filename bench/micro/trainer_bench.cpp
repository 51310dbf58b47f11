// trainer_bench.cpp — what the demo's step costs on this machine: GEMM rate (the MFU denominator
// on CPU), rollout tokens/s, and an actor update's tokens/s, on the demo model's shape
// (configs/demo_grpo.yaml). Run: make bench (JSON in out/bench.json).
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include "hybridscope/trainer/batch.h"
#include "hybridscope/trainer/config.h"
#include "hybridscope/trainer/core_algos.h"
#include "hybridscope/trainer/dataset.h"
#include "hybridscope/trainer/ppo_workers.h"
#include "hybridscope/trainer/rollout.h"
#include "hybridscope/trainer/tokenizer.h"

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
    tokenizer = make_tokenizer(cfg.hybridscope.tokenizer);
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

// One rollout of the demo step: train_batch_size prompts x n samples.
void BM_Rollout(benchmark::State& state) {
  const auto& d = demo();
  torch::manual_seed(0);
  Transformer model(d.shape, HeadKind::kLm);
  model->eval();
  const auto& r = d.cfg.actor_rollout_ref.rollout;
  RolloutEngine engine(model, d.tokenizer->eos_token_id(), d.tokenizer->pad_token_id(), d.cfg.hybridscope.kv_block_size,
                       d.cfg.hybridscope.kv_num_blocks, r.max_num_seqs,
                       d.cfg.data.max_prompt_length + d.cfg.data.max_response_length);
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

}  // namespace

BENCHMARK_MAIN();
