// cuda_decode_test.cpp — hybridscope.decode's fast paths against the paths they replace, on a CUDA
// device (they skip elsewhere; hs_cuda_tests, run by scripts/gpu-proof.sh):
//   - the paged-attention kernel against the gathered-context attention, in float32 and bf16, for
//     GQA groups of 7 and 6 query heads, head_dim 64 and 128, contexts from 1 to 300 tokens over
//     scattered blocks;
//   - the device loop against the host loop (greedy: the same tokens);
//   - CUDA graphs against the device loop without them (greedy: the same tokens), captured once
//     per bucket and reused by the next generate;
//   - and for training, hybridscope.attention = flash (FlashAttention-2's varlen kernel on the
//     packed forward) against the padded SDPA forward: logits and gradients.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "hybridscope/trainer/model/model.h"
#include "hybridscope/trainer/model/paged_kv_cache.h"
#include "hybridscope/trainer/rollout/rollout.h"

namespace hs::trainer {
namespace {

class CudaDecode : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device here: these tests run on a GPU machine";
  }
};

ModelShape shape_with(std::int64_t hidden, int heads, int kv_heads) {
  ModelShape s;
  s.vocab_size = 97;
  s.hidden_size = static_cast<int>(hidden);
  s.intermediate_size = 256;
  s.num_hidden_layers = 2;
  s.num_attention_heads = heads;
  s.num_key_value_heads = kv_heads;
  s.max_position_embeddings = 512;
  s.rope_theta = 10000.0;
  s.initializer_range = 0.1;
  return s;
}

Transformer model_on_cuda(const ModelShape& shape, torch::Dtype dtype, bool paged) {
  torch::manual_seed(3);
  Transformer model(shape, HeadKind::kLm);
  model->to(torch::Device(torch::kCUDA, 0), dtype);
  model->eval();
  ComputeOptions options;
  options.dtype = dtype;
  options.paged_decode = paged;
  model->set_compute(options);
  return model;
}

// One decode step over a random cache: rows with contexts of 1, 15, 16, 17, 100 and 300 tokens
// whose blocks are scattered over the pool; the paged kernel's logits against the gathered path's.
TEST_F(CudaDecode, PagedKernelMatchesTheGatheredContext) {
  torch::NoGradGuard no_grad;
  const torch::Device cuda(torch::kCUDA, 0);
  const std::vector<std::int64_t> contexts = {1, 15, 16, 17, 100, 300};
  const auto B = static_cast<std::int64_t>(contexts.size());
  const std::int64_t bs = 16, M = 300 / bs + 1;
  for (const auto& [shape, name] : {std::pair{shape_with(448, 7, 1), "head_dim 64, G 7"},
                                    std::pair{shape_with(1536, 12, 2), "head_dim 128, G 6"}}) {
    for (const auto dtype : {torch::kFloat, torch::kBFloat16}) {
      auto gathered = model_on_cuda(shape, dtype, false);
      auto paged = model_on_cuda(shape, dtype, true);
      PagedKvCache cache(shape, B * M, bs, dtype, cuda);
      for (int l = 0; l < shape.num_hidden_layers; ++l) {
        cache.keys(l).normal_();
        cache.values(l).normal_();
      }
      auto longs = torch::TensorOptions().dtype(torch::kLong).device(cuda);
      KvCacheView view;
      view.cache = &cache;
      view.block_tables = torch::randperm(B * M, longs).view({B, M});  // scattered blocks
      view.context_lens = torch::tensor(contexts, longs);
      auto last = view.context_lens - 1;
      view.slot_mapping =
          (view.block_tables.gather(1, last.div(bs, "floor").view({B, 1})) * bs + last.remainder(bs).view({B, 1}));
      view.max_context_len = 300;
      view.all_slots_written = 1;
      const auto ids = torch::randint(0, shape.vocab_size, {B, 1}, longs);
      const auto pos = last.view({B, 1});
      const auto expected = gathered->forward_cached(ids, pos, view);
      const auto got = paged->forward_cached(ids, pos, view);
      const double scale = expected.abs().max().item<double>();
      const double tolerance = dtype == torch::kFloat ? 1e-4 : 3e-2;
      EXPECT_LE((got - expected).abs().max().item<double>(), tolerance * scale)
          << name << ", " << c10::toString(dtype) << ": logits scale " << scale;
      EXPECT_TRUE(torch::equal(got.argmax(-1), expected.argmax(-1)) || dtype == torch::kBFloat16) << name;
    }
  }
}

// Nine prompts of 3..59 tokens, three samples each over max_num_seqs 24 (two waves), 96 tokens.
struct Run {
  std::unique_ptr<RolloutEngine> engine;
  GenerationResult result;
};
Run run(Transformer model, const DecodeOptions& decode, const SamplingParams& params, std::uint64_t seed) {
  Run r;
  r.engine = std::make_unique<RolloutEngine>(model, /*eos=*/5, /*pad=*/0, /*block_size=*/16, /*num_blocks=*/-1,
                                             /*max_num_seqs=*/24, 160);
  r.engine->set_decode(decode);
  std::vector<std::vector<std::int32_t>> prompts;
  for (int i = 0; i < 9; ++i) {
    std::vector<std::int32_t> p;
    for (int t = 0; t < 3 + 7 * i; ++t) p.push_back((i * 31 + t * 7) % 90 + 6);
    prompts.push_back(p);
  }
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  r.result = r.engine->generate(GenerationRequest{prompts, params, 96}, gen);
  return r;
}

void expect_same_greedy(const GenerationResult& got, const GenerationResult& expected, const std::string& what) {
  ASSERT_EQ(got.responses.size(), expected.responses.size());
  EXPECT_EQ(got.responses, expected.responses) << what;
  for (std::size_t i = 0; i < got.log_probs.size(); ++i) {
    if (got.log_probs[i].size() != expected.log_probs[i].size()) continue;  // reported above
    for (std::size_t t = 0; t < got.log_probs[i].size(); ++t)
      ASSERT_NEAR(got.log_probs[i][t], expected.log_probs[i][t], 1e-3) << what << ": row " << i << " token " << t;
  }
}

TEST_F(CudaDecode, DeviceLoopGreedyEqualsTheHostLoop) {
  const SamplingParams greedy{1.0, -1, 1.0, 3, false};
  const auto shape = shape_with(448, 7, 1);
  const auto expected = run(model_on_cuda(shape, torch::kFloat, false), DecodeOptions{}, greedy, 1).result;
  DecodeOptions loop;
  loop.device_loop = true;
  loop.stop_check_interval = 8;
  expect_same_greedy(run(model_on_cuda(shape, torch::kFloat, false), loop, greedy, 1).result, expected, "device loop");
  expect_same_greedy(run(model_on_cuda(shape, torch::kFloat, true), loop, greedy, 1).result, expected,
                     "device loop, paged kernel");
  bool stopped = false;
  for (const auto& r : expected.responses) stopped = stopped || (r.back() == 5 && r.size() < 96u);
  EXPECT_TRUE(stopped) << "no response ended at EOS: the stop flags went untested";
}

TEST_F(CudaDecode, CudaGraphsReplayTheDeviceLoop) {
  const auto shape = shape_with(448, 7, 1);
  DecodeOptions loop;
  loop.device_loop = true;
  loop.stop_check_interval = 4;
  DecodeOptions graphs = loop;
  graphs.cuda_graphs = true;
  for (const auto dtype : {torch::kFloat, torch::kBFloat16}) {
    const SamplingParams greedy{1.0, -1, 1.0, 2, false};
    const auto expected = run(model_on_cuda(shape, dtype, true), loop, greedy, 2).result;
    auto with_graphs = run(model_on_cuda(shape, dtype, true), graphs, greedy, 2);
    const auto& got = with_graphs.result;
    RolloutEngine* engine = with_graphs.engine.get();
    if (dtype == torch::kFloat) {
      expect_same_greedy(got, expected, "graphs");
    } else {  // bf16: pad rows change the GEMMs' shapes, so near-ties may flip; most tokens agree
      std::int64_t same = 0, total = 0;
      for (std::size_t i = 0; i < got.responses.size(); ++i)
        for (std::size_t t = 0; t < std::min(got.responses[i].size(), expected.responses[i].size()); ++t, ++total)
          same += got.responses[i][t] == expected.responses[i][t];
      EXPECT_GE(same, total * 9 / 10) << "bf16 graphs against the device loop";
    }
    const auto captured = engine->decode_graphs_captured();
    EXPECT_GE(captured, 2) << "the batch shrank through several buckets";
    // A second generate replays the graphs it has (same parameters, same cache).
    auto gen = at::make_generator<at::CPUGeneratorImpl>(2);
    engine->generate(GenerationRequest{{{7, 8, 9}}, greedy, 8}, gen);
    EXPECT_LE(engine->decode_graphs_captured(), captured + 1) << "at most the one-row bucket is new";
    // Sampled tokens: the same uniforms drawn ahead, the same distribution; generation completes.
    const auto sampled = run(model_on_cuda(shape, dtype, true), graphs, SamplingParams{1.0, 20, 0.9, 2, true}, 4);
    EXPECT_GT(sampled.result.generated_tokens, 0);
  }
}

// use_remove_padding with hybridscope.attention = flash: the packed forward through
// FlashAttention-2's varlen kernel gives the padded SDPA forward's logits at every real token and
// the same gradients, in bf16 over float32 weights (autocast), with and without checkpointing.
TEST_F(CudaDecode, FlashVarlenPackedForwardMatchesThePaddedOne) {
  const torch::Device cuda(torch::kCUDA, 0);
  const auto shape = shape_with(1536, 12, 2);  // head_dim 128, 6 query heads per KV head
  // Left-padded rows of 5, 40, 1 and 64 real tokens.
  const std::vector<std::int64_t> lengths = {5, 40, 1, 64};
  const std::int64_t B = 4, T = 64;
  auto mask = torch::zeros({B, T}, torch::kLong);
  for (std::int64_t b = 0; b < B; ++b) mask[b].narrow(0, T - lengths[static_cast<std::size_t>(b)], lengths[static_cast<std::size_t>(b)]).fill_(1);
  const auto positions = (mask.cumsum(1) - 1).clamp_min(0);
  const auto ids = torch::randint(0, shape.vocab_size, {B, T}, torch::kLong) * mask;
  for (const bool checkpoint : {false, true}) {
    std::vector<torch::Tensor> logits, grads;
    for (const bool flash : {false, true}) {
      torch::manual_seed(8);
      Transformer model(shape, HeadKind::kLm);
      model->to(cuda);
      ComputeOptions options;
      options.dtype = torch::kBFloat16;
      options.attention = flash ? AttentionKernel::kFlash : AttentionKernel::kSdpa;
      options.remove_padding = flash;
      model->set_compute(options);
      model->set_gradient_checkpointing(checkpoint);
      auto out = model->forward(ids.to(cuda), mask.to(cuda), positions.to(cuda));  // (B, T, V) float32
      auto real = mask.to(cuda).to(torch::kBool).unsqueeze(-1);
      (out * real).pow(2).mean().backward();
      logits.push_back(out.masked_select(real).detach());
      std::vector<torch::Tensor> g;
      for (const auto& p : model->parameters()) g.push_back(p.grad().reshape({-1}));
      grads.push_back(torch::cat(g));
    }
    const double scale = logits[0].abs().max().item<double>();
    EXPECT_LE((logits[1] - logits[0]).abs().max().item<double>(), 3e-2 * scale) << "checkpointing " << checkpoint;
    const double cosine = torch::cosine_similarity(grads[0], grads[1], 0).item<double>();
    EXPECT_GE(cosine, 0.99) << "checkpointing " << checkpoint;
    EXPECT_NEAR(grads[1].norm().item<double>() / grads[0].norm().item<double>(), 1.0, 0.05);
  }
}

}  // namespace
}  // namespace hs::trainer
