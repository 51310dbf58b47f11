// reshard_bench.cpp — the 3D-HybridEngine's cost: how long the pure planner takes for a 7B-shaped
// model on 16 ranks, and how long the train->rollout weight switch (the executor, i.e. the
// switch's reshard_weights component) takes on 4 in-process thread ranks for the demo model and a
// larger shape, hybrid vs vanilla vs naive side by side, for each layout pair of kPlanPairs and
// kExecutePairs (megatron and fsdp training, rollout tp below, equal to and above the training
// tp). Counters give the bytes each rank received (rank 0), so time and volume read together.
// Run: build/release/bench/hs_reshard_bench. The collectives themselves over real Gloo ranks:
// comm_bench.cpp.
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "hybridscope/trainer/model/model_shapes.h"
#include "hybridscope/trainer/hybrid/reshard_executor.h"
#include "hybridscope/trainer/dist/thread_world.h"

namespace {

using namespace hs::trainer;

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kMiB = 1024.0 * 1024.0;

ReshardMode mode_of(std::int64_t arg) { return static_cast<ReshardMode>(arg); }

// A training layout and the rollout tp it switches to (plan_reshard's arguments). Every pair is
// one the trainer accepts in each mode (hybrid needs t_g | tp or tp | t_g, config_validate.cpp).
struct LayoutPair {
  MeshShape mesh;  // training (pp, tp, dp)
  DpSharding dp;
  int rollout_tp;  // t_g
  const char* label;
};

// 16 ranks, Llama-2-7B. Index 0 is the pair this benchmark always had.
const LayoutPair kPlanPairs[] = {
    {{2, 4, 2}, DpSharding::kReplicated, 2, "(2,4,2) megatron->tg2"},
    {{1, 4, 4}, DpSharding::kReplicated, 4, "(1,4,4) megatron->tg4"},  // t_g = tp, one stage
    {{2, 4, 2}, DpSharding::kReplicated, 8, "(2,4,2) megatron->tg8"},  // t_g > tp
    {{1, 4, 4}, DpSharding::kSharded, 2, "(1,4,4) fsdp->tg2"},
    {{1, 1, 16}, DpSharding::kSharded, 8, "(1,1,16) fsdp->tg8"},  // pure FSDP training, tp rollout
};
constexpr std::int64_t kPlanPairCount = sizeof(kPlanPairs) / sizeof(kPlanPairs[0]);

// 4 thread ranks. Indices 0 and 1 are the pairs this benchmark always had.
const LayoutPair kExecutePairs[] = {
    {{1, 2, 2}, DpSharding::kReplicated, 2, "(1,2,2)->tg2"},  // hybrid moves nothing
    {{2, 2, 1}, DpSharding::kReplicated, 2, "(2,2,1)->tg2"},
    {{1, 2, 2}, DpSharding::kReplicated, 1, "(1,2,2)->tg1"},  // generation needs the whole model
    {{1, 2, 2}, DpSharding::kSharded, 1, "(1,2,2) fsdp->tg1"},
    {{1, 1, 4}, DpSharding::kSharded, 2, "(1,1,4) fsdp->tg2"},
};
constexpr std::int64_t kExecutePairCount = sizeof(kExecutePairs) / sizeof(kExecutePairs[0]);

// Plan train -> rollout on 16 ranks for each layout pair and mode.
void BM_ReshardPlan7B(benchmark::State& state) {
  const auto params = llama_parameters(model_shape_by_name("llama2-7b"), /*element_size=*/2);
  const LayoutPair& pair = kPlanPairs[state.range(0)];
  const ReshardMode mode = mode_of(state.range(1));
  ReshardPlan plan;
  for (auto _ : state) {
    plan = plan_reshard(params, pair.mesh, pair.dp, pair.rollout_tp, mode);
    benchmark::DoNotOptimize(plan.ranks.data());
  }
  state.SetLabel(std::string(to_string(mode)) + " " + pair.label);
  state.counters["model_GiB"] = static_cast<double>(plan.training.model_bytes()) / kGiB;
  state.counters["recv_GiB_rank0"] = static_cast<double>(plan.ranks[0].bytes_received) / kGiB;
  state.counters["peak_GiB_rank0"] = static_cast<double>(plan.ranks[0].peak_parameter_bytes) / kGiB;
}
BENCHMARK(BM_ReshardPlan7B)
    ->ArgNames({"layout", "mode"})
    ->ArgsProduct({benchmark::CreateDenseRange(0, kPlanPairCount - 1, 1), {0, 1, 2}})
    ->Unit(benchmark::kMillisecond);

// The demo model and a larger shape (model_shapes.h).
ModelShape exec_shape(std::int64_t which) { return model_shape_by_name(which == 0 ? "demo" : "bench-41m"); }

// Train->rollout on 4 thread ranks for each layout pair of kExecutePairs. Manual time: from the
// release of the ranks to the last rank's return.
void BM_ReshardExecute(benchmark::State& state) {
  const ModelShape shape = exec_shape(state.range(0));
  const LayoutPair& pair = kExecutePairs[state.range(1)];
  const ReshardMode mode = mode_of(state.range(2));
  auto plan = std::make_shared<const ReshardPlan>(
      plan_reshard(llama_parameters(shape), pair.mesh, pair.dp, pair.rollout_tp, mode));
  constexpr int kWorld = 4;
  auto world = std::make_shared<ThreadWorld>(kWorld);
  std::vector<std::unique_ptr<ReshardExecutor>> executors;
  std::vector<std::vector<at::Tensor>> shards(kWorld);
  torch::manual_seed(0);
  std::vector<at::Tensor> full;
  for (const auto& p : plan->training.params) full.push_back(torch::randn(p.spec.shape));
  for (int r = 0; r < kWorld; ++r) {
    ThreadGroupFactory factory(r, world);
    executors.push_back(std::make_unique<ReshardExecutor>(plan, r, factory));
    for (std::size_t p = 0; p < full.size(); ++p) {
      at::Tensor t;
      if (auto box = plan->training.box(p, r)) {
        t = full[p];
        for (std::size_t d = 0; d < box->ranges.size(); ++d) {
          t = t.slice(static_cast<std::int64_t>(d), box->ranges[d].begin, box->ranges[d].end);
        }
        t = t.contiguous();
      }
      shards[static_cast<std::size_t>(r)].push_back(t);
    }
  }
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::thread> threads;
    for (int r = 0; r < kWorld; ++r) {
      threads.emplace_back([&, r] {
        torch::set_num_threads(1);
        auto generation = executors[static_cast<std::size_t>(r)]->to_generation(shards[static_cast<std::size_t>(r)]);
        benchmark::DoNotOptimize(generation.data());
      });
    }
    for (auto& t : threads) t.join();
    state.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  state.SetLabel(std::string(to_string(mode)) + (state.range(0) == 0 ? " demo " : " larger ") + pair.label);
  state.counters["model_MiB"] = static_cast<double>(plan->training.model_bytes()) / kMiB;
  state.counters["recv_MiB_rank0"] = static_cast<double>(plan->ranks[0].bytes_received) / kMiB;
  state.counters["peak_MiB_rank0"] = static_cast<double>(plan->ranks[0].peak_parameter_bytes) / kMiB;
}
BENCHMARK(BM_ReshardExecute)
    ->ArgNames({"shape", "layout", "mode"})
    ->ArgsProduct({{0, 1}, benchmark::CreateDenseRange(0, kExecutePairCount - 1, 1), {0, 1, 2}})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
