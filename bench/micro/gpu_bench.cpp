// gpu_bench.cpp — the GPU path's figures (issue 5), on the CUDA device when there is one and on the
// CPU otherwise (where only the small shapes run and the roofline shares are not computed):
//
//   BM_DecodeStep/<shape>/<batch>/<context>/<mode>  one decode step of a bf16 model through the paged
//       KV cache: every sequence has <context> cached tokens and adds one. <mode> 0: the default
//       path (each row's context gathered, then SDPA); 1: hybridscope.decode.paged_kernel (the
//       attention reads the block tables on the device); 2: paged_kernel with cuda_graphs (the
//       step replayed as a CUDA graph, its inputs copied in first, as the device loop does).
//       Modes 1 and 2 run on a CUDA device only. The floor is the bytes the
//       step must read, weights + KV = (parameters + batch·context·layers·2·kv_heads·head_dim)·2 B,
//       over the device's peak HBM bandwidth; counters: bytes, GBps (bytes / time), roofline
//       (= GBps / peak; goal >= 0.6 at batch >= 32).
//   BM_TrainStepMfu/<shape>/<batch>/<seq>/<mode>  one PPO actor update (forward, backward, AdamW step;
//       bf16 compute over fp32 master weights) on <batch> sequences of <seq> tokens, half prompt
//       and half response. FLOPs = verl's estimate (6·N_dense·tokens + 6·Σs²·head_dim·heads·layers,
//       metrics.cpp) ; counters: TFLOPS and mfu (= FLOP/s / the device's dense bf16 peak; goal
//       >= 0.4 for a 0.5B–1.5B shape). <mode> 0: the defaults; 1: hybridscope.fused_adamw; 2: fused
//       AdamW and the packed forward through hybridscope.attention=flash (CUDA only).
//
// The peaks come from device_specs (by the device's name); HS_PEAK_BANDWIDTH (B/s) and
// HS_PEAK_FLOPS (FLOP/s) override them. Shapes are model_shapes.h's, with random weights.
// Run: build/release/bench/hs_gpu_bench --benchmark_out=gpu.json --benchmark_out_format=json
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "hybridscope/trainer/data/batch.h"
#include "hybridscope/trainer/model/device.h"
#include "hybridscope/trainer/hybrid/hybrid_switch.h"
#include "hybridscope/trainer/rl/metrics.h"
#include "hybridscope/trainer/model/model.h"
#include "hybridscope/trainer/model/model_shapes.h"
#include "hybridscope/trainer/rl/ppo_workers.h"
#include "hybridscope/trainer/rollout/rollout.h"
#include "../../trainer/src/rollout/decode_graphs.h"

namespace {

using namespace hs::trainer;

torch::Device bench_device() { return torch::cuda::is_available() ? torch::Device(torch::kCUDA, 0) : torch::Device(torch::kCPU); }

void synchronize(const torch::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

// The device's peak (spec table or the environment's override); 0 when unknown (no share computed).
double peak_from(const char* env, double spec) {
  if (const char* v = std::getenv(env)) return std::atof(v);
  return spec;
}

// The table's row for this device (device.h); zeros for the CPU or a device it does not know.
DeviceSpec device_spec(const torch::Device& device) {
  if (!device.is_cuda()) return {};
  return device_spec_for_name(cuda_device_name(device.index())).value_or(DeviceSpec{});
}

std::string device_label(const torch::Device& device) {
  return device.is_cuda() ? cuda_device_name(device.index()) : std::string("cpu");
}

// Shapes too large for a CPU run are skipped there with a message.
bool fits(benchmark::State& state, const torch::Device& device, const ModelShape& shape) {
  const double params = static_cast<double>(shape.num_hidden_layers) *
                            (3.0 * shape.hidden_size * shape.intermediate_size + 4.0 * shape.hidden_size * shape.hidden_size) +
                        2.0 * shape.vocab_size * shape.hidden_size;
  if (!device.is_cuda() && params > 1e8) {
    state.SkipWithError("this shape needs a CUDA device (no GPU here)");
    return false;
  }
  return true;
}

const std::vector<std::string>& shape_names() {
  static const std::vector<std::string> names = {"demo", "bench-41m", "qwen2.5-0.5b", "qwen2.5-1.5b", "qwen2.5-7b"};
  return names;
}

void BM_DecodeStep(benchmark::State& state) {
  const auto device = bench_device();
  ModelShape shape = model_shape_by_name(shape_names().at(static_cast<std::size_t>(state.range(0))));
  const std::int64_t B = state.range(1), L = state.range(2), mode = state.range(3);
  shape.max_position_embeddings = static_cast<int>(L + 1);
  if (mode > 0 && !device.is_cuda()) {
    state.SkipWithError("the paged kernel and CUDA graphs need a CUDA device");
    return;
  }
  if (!fits(state, device, shape)) return;
  torch::NoGradGuard no_grad;
  torch::manual_seed(0);
  Transformer model(shape, HeadKind::kLm);
  model->to(device, torch::kBFloat16);  // the rollout model's weights
  model->eval();
  ComputeOptions compute = model->compute();
  compute.paged_decode = mode > 0;
  model->set_compute(compute);

  // Sequence b owns blocks [b·M, (b+1)·M), block B·M is the graphs' scratch; the cache holds
  // random K/V (never time on zeros).
  const std::int64_t bs = 16, M = (L + 1 + bs - 1) / bs;
  PagedKvCache cache(shape, B * M + 1, bs, torch::kBFloat16, device);
  for (int l = 0; l < shape.num_hidden_layers; ++l) {
    cache.keys(l).normal_();
    cache.values(l).normal_();
  }
  auto longs = torch::TensorOptions().dtype(torch::kLong).device(device);
  KvCacheView view;
  view.cache = &cache;
  view.block_tables = torch::arange(B * M, longs).view({B, M});
  view.context_lens = torch::full({B}, L + 1, longs);
  view.slot_mapping = (view.block_tables.select(1, L / bs) * bs + L % bs).view({B, 1});
  view.max_context_len = L + 1;  // known on the host, as the rollout engine knows it
  view.all_slots_written = 1;
  const auto ids = torch::randint(0, shape.vocab_size, {B, 1}, longs);
  const auto pos = torch::full({B, 1}, L, longs);

  std::unique_ptr<hs::trainer::detail::DecodeGraphs> graphs;
  if (mode == 2) graphs = std::make_unique<hs::trainer::detail::DecodeGraphs>(model, &cache, B, M);
  auto step = [&] {
    if (graphs) {
      return graphs->step(ids.view({B}), pos.view({B}), view.slot_mapping.view({B}), view.block_tables,
                          view.context_lens, /*scratch_block=*/B * M);
    }
    return model->forward_cached(ids, pos, view);
  };
  for (int i = 0; i < 3; ++i) benchmark::DoNotOptimize(step());  // warm-up (and the graph's capture)
  synchronize(device);
  for (auto _ : state) {
    benchmark::DoNotOptimize(step());
    synchronize(device);
  }
  const auto param_bytes = parameter_bytes(model);  // bf16: 2 B per weight
  const double kv_bytes = static_cast<double>(B) * static_cast<double>(L) *  // one bf16 token per "block"
                          static_cast<double>(PagedKvCache::bytes_per_block(shape, 1, torch::kBFloat16));
  const double bytes = static_cast<double>(param_bytes) + kv_bytes;
  state.counters["bytes"] = bytes;
  state.counters["GBps"] = benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  const double peak = peak_from("HS_PEAK_BANDWIDTH", device_spec(device).peak_hbm_bytes_per_second);
  if (peak > 0) state.counters["roofline"] = benchmark::Counter(bytes / peak, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(device_label(device));
}
// (shape index, batch, context, mode): the demo on the CPU too; 0.5B–7B at batch 32 and 64 on a GPU, each
// through the default path, the paged kernel and the graphs.
BENCHMARK(BM_DecodeStep)
    ->Args({0, 32, 64, 0})
    ->Args({1, 32, 256, 0})
    ->ArgsProduct({{2, 3, 4}, {32, 64}, {1024}, {0, 1, 2}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_TrainStepMfu(benchmark::State& state) {
  const auto device = bench_device();
  ModelShape shape = model_shape_by_name(shape_names().at(static_cast<std::size_t>(state.range(0))));
  const std::int64_t B = state.range(1), S = state.range(2), mode = state.range(3);
  shape.max_position_embeddings = static_cast<int>(S);
  if (mode == 2 && !device.is_cuda()) {
    state.SkipWithError("hybridscope.attention=flash needs a CUDA device");
    return;
  }
  if (!fits(state, device, shape)) return;
  torch::manual_seed(0);
  Transformer model(shape, HeadKind::kLm);
  model->to(device);
  ComputeOptions compute;
  compute.dtype = torch::kBFloat16;
  compute.remove_padding = mode == 2;  // the packed forwards, through FlashAttention-2's varlen kernel
  compute.attention = mode == 2 ? AttentionKernel::kFlash : AttentionKernel::kAuto;
  model->set_compute(compute);
  ActorConfig cfg;
  cfg.ppo_mini_batch_size = static_cast<int>(B);  // one mini-batch: one optimizer step per update
  cfg.ppo_micro_batch_size_per_gpu = static_cast<int>(std::min<std::int64_t>(B, 4));
  cfg.optim.lr = 1e-6;
  PPOActor actor(model, cfg, 1.0, 1, 1000);
  actor.optimizer().set_fused(mode >= 1);  // hybridscope.fused_adamw
  // B prompts of S/2 random tokens, each with one response of S/2 tokens (no EOS inside).
  std::vector<std::vector<std::int32_t>> prompts, responses;
  auto tokens = torch::randint(3, shape.vocab_size, {B, S}, torch::kInt32);
  auto t = tokens.accessor<std::int32_t, 2>();
  for (std::int64_t b = 0; b < B; ++b) {
    prompts.emplace_back(&t[b][0], &t[b][0] + S / 2);
    responses.emplace_back(&t[b][0] + S / 2, &t[b][0] + S);
  }
  RolloutBatch batch = make_rollout_batch(prompts, responses, 1, 0, -1);
  batch.old_log_probs = actor.compute_log_prob(batch, cfg.ppo_micro_batch_size_per_gpu);
  batch.advantages = torch::randn_like(batch.old_log_probs) * batch.response_mask;
  const std::vector<std::int64_t> lengths(static_cast<std::size_t>(B), S);
  const double flops = estimate_flops(shape, lengths);

  benchmark::DoNotOptimize(actor.update_policy(batch, 0, 1));  // warm-up: AdamW state, allocator
  synchronize(device);
  for (auto _ : state) {
    benchmark::DoNotOptimize(actor.update_policy(batch, 0, 1));
    synchronize(device);
  }
  state.counters["TFLOPS"] = benchmark::Counter(flops * 1e-12, benchmark::Counter::kIsIterationInvariantRate);
  const double peak = peak_from("HS_PEAK_FLOPS", device_spec(device).peak_bf16_flops);
  if (peak > 0) state.counters["mfu"] = benchmark::Counter(flops / peak, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(device_label(device));
}
// (shape index, sequences, tokens per sequence, mode): mode 0 the defaults (LibTorch's AdamW, the
// padded forward through SDPA on CUDA), 1 hybridscope.fused_adamw, 2 fused AdamW with the packed
// forward through hybridscope.attention=flash (CUDA only).
BENCHMARK(BM_TrainStepMfu)
    ->Args({0, 8, 64, 0})
    ->Args({0, 8, 64, 1})
    ->ArgsProduct({{2, 3}, {16}, {1024}, {0, 1, 2}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(5);

}  // namespace

BENCHMARK_MAIN();
