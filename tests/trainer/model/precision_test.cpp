// precision_test.cpp — bf16 compute over fp32 master weights against the fp32 path, the two
// attention kernels (scaled_dot_product_attention, eager) against each other, and the two libraries
// of float32 products on CPU (oneDNN, BLAS) against the float64 model (hybridscope.precision,
// hybridscope.attention, hybridscope.cpu_matmul; docs/config.md "Precision").
//
// Tolerances: bf16 keeps 8 significant bits (relative rounding 2^-9 ≈ 2e-3 per operand). Through
// two decoder layers the logits of the tiny model (O(1) logits, initializer_range 0.2) move by a few
// 1e-3 of their scale; the bound is 3e-2 of the largest logit, and a bound from below (1e-5) proves
// the bf16 path really ran. Gradients and PPO updates are compared by direction (cosine ≥ 0.99) and
// size (norm within 5 %).
#include <gtest/gtest.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "hybridscope/trainer/data/batch.h"
#include "hybridscope/trainer/config/config.h"
#include "hybridscope/trainer/rollout/kv_block_pool.h"
#include "hybridscope/trainer/model/model.h"
#include "hybridscope/trainer/rl/ppo_workers.h"
#include "hybridscope/trainer/rollout/rollout.h"

namespace hs::trainer {
namespace {

ModelShape tiny_shape() {
  ModelShape s;
  s.vocab_size = 37;
  s.hidden_size = 64;
  s.intermediate_size = 96;
  s.num_hidden_layers = 2;
  s.num_attention_heads = 4;
  s.num_key_value_heads = 2;  // grouped-query attention: both kernels must handle G = 2
  s.max_position_embeddings = 64;
  s.rope_theta = 500.0;
  s.initializer_range = 0.2;
  return s;
}

Transformer make_model(std::uint64_t seed = 5) {
  torch::manual_seed(static_cast<std::int64_t>(seed));
  return Transformer(tiny_shape(), HeadKind::kLm);
}

ComputeOptions options(torch::Dtype dtype, AttentionKernel attention = AttentionKernel::kAuto,
                       CpuMatmul matmul = CpuMatmul::kOneDnn) {
  ComputeOptions o;
  o.dtype = dtype;
  o.attention = attention;
  o.cpu_matmul = matmul;
  return o;
}

struct Inputs {
  torch::Tensor ids, mask, pos;
};

// Three left-padded rows of different lengths.
Inputs padded_inputs() {
  torch::manual_seed(17);
  Inputs in;
  in.ids = torch::randint(1, 37, {3, 12}, torch::kLong);
  in.mask = torch::ones({3, 12}, torch::kLong);
  in.mask.index_put_({1, torch::indexing::Slice(0, 4)}, 0);
  in.mask.index_put_({2, torch::indexing::Slice(0, 9)}, 0);
  in.ids.masked_fill_(in.mask == 0, 0);
  in.pos = (in.mask.cumsum(1) - 1).clamp_min(0);
  return in;
}

double max_abs(const torch::Tensor& t) { return t.abs().max().item<double>(); }

// Logits of real tokens only (padding queries are discarded by every caller).
torch::Tensor real_rows(const torch::Tensor& logits, const Inputs& in) {
  return logits.index({in.mask.to(torch::kBool)});
}

torch::Tensor flat_grads(Transformer& model) {
  std::vector<torch::Tensor> parts;
  for (const auto& p : model->parameters()) parts.push_back(p.grad().defined() ? p.grad().reshape(-1) : torch::zeros({p.numel()}));
  return torch::cat(parts).to(torch::kDouble);
}

// Whether the autograd graph behind `t` has a node whose name contains `name`.
bool graph_has(const torch::Tensor& t, const std::string& name) {
  std::vector<torch::autograd::Node*> todo{t.grad_fn().get()};
  std::set<torch::autograd::Node*> seen;
  while (!todo.empty()) {
    auto* node = todo.back();
    todo.pop_back();
    if (node == nullptr || !seen.insert(node).second) continue;
    if (node->name().find(name) != std::string::npos) return true;
    for (const auto& edge : node->next_edges()) todo.push_back(edge.function.get());
  }
  return false;
}

double cosine(const torch::Tensor& a, const torch::Tensor& b) {
  return (a * b).sum().item<double>() / (a.norm().item<double>() * b.norm().item<double>());
}

class PrecisionTest : public ::testing::Test {
 protected:
  void SetUp() override { torch::set_num_threads(1); }
};

TEST_F(PrecisionTest, Bf16ForwardTracksFp32AndReturnsFloat32Logits) {
  auto model = make_model();
  const auto in = padded_inputs();
  torch::NoGradGuard no_grad;
  const auto fp32 = model->forward(in.ids, in.mask, in.pos);
  model->set_compute(options(torch::kBFloat16));
  EXPECT_EQ(model->compute_dtype(), torch::kBFloat16);
  const auto bf16 = model->forward(in.ids, in.mask, in.pos);
  EXPECT_EQ(bf16.scalar_type(), torch::kFloat) << "logits leave the model in float32";
  for (const auto& p : model->parameters()) EXPECT_EQ(p.scalar_type(), torch::kFloat) << "master weights stay fp32";
  const double scale = max_abs(real_rows(fp32, in));
  const double diff = max_abs(real_rows(bf16, in) - real_rows(fp32, in));
  EXPECT_LT(diff / scale, 3e-2) << "bf16 logits drift " << diff << " for logits up to " << scale;
  EXPECT_GT(diff / scale, 1e-5) << "bf16 logits equal fp32 ones: autocast did not run";
  // Back to fp32: the same logits as before, bit for bit (no state is left behind).
  model->set_compute(options(torch::kFloat));
  EXPECT_TRUE(torch::equal(model->forward(in.ids, in.mask, in.pos), fp32));
}

TEST_F(PrecisionTest, Bf16GradientsReachTheFp32MasterWeights) {
  const auto in = padded_inputs();
  const auto targets = torch::randint(0, 37, {3, 12}, torch::kLong);
  std::vector<torch::Tensor> grads;
  for (const auto dtype : {torch::kFloat, torch::kBFloat16}) {
    auto model = make_model();
    model->set_compute(options(dtype));
    auto logp = torch::log_softmax(model->forward(in.ids, in.mask, in.pos), -1);
    auto loss = -(logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1) * in.mask).sum() / in.mask.sum();
    loss.backward();
    for (const auto& p : model->parameters()) {
      ASSERT_TRUE(p.grad().defined());
      EXPECT_EQ(p.grad().scalar_type(), torch::kFloat) << "gradients accumulate in fp32";
    }
    grads.push_back(flat_grads(model));
  }
  EXPECT_GT(cosine(grads[0], grads[1]), 0.99);
  EXPECT_NEAR(grads[1].norm().item<double>() / grads[0].norm().item<double>(), 1.0, 0.05);
  EXPECT_GT(max_abs(grads[1] - grads[0]), 0.0) << "bf16 gradients equal fp32 ones: autocast did not run";
}

// One clipped PPO update (AdamW) in each precision from the same weights and batch: the weight
// updates point the same way, and AdamW's state is fp32.
TEST_F(PrecisionTest, Bf16PpoUpdateFollowsTheFp32Update) {
  const std::vector<std::vector<std::int32_t>> prompts = {{1, 5, 6}, {1, 7}, {1, 8, 9, 10}};
  const std::vector<std::vector<std::int32_t>> responses = {
      {3, 4, 2}, {5, 2}, {6, 7, 8, 9}, {2}, {4, 4, 4, 2}, {11, 2}};
  RolloutBatch batch = make_rollout_batch(prompts, responses, 2, 0, 2);
  torch::manual_seed(3);
  batch.advantages = torch::randn({batch.size(), batch.response_length()}, torch::kFloat64) * batch.response_mask;
  std::vector<torch::Tensor> updates;
  for (const auto dtype : {torch::kFloat, torch::kBFloat16}) {
    auto model = make_model();
    model->set_compute(options(dtype));
    std::vector<torch::Tensor> before;
    for (const auto& p : model->parameters()) before.push_back(p.detach().clone());
    ActorConfig cfg;
    cfg.ppo_mini_batch_size = 3;
    cfg.ppo_micro_batch_size_per_gpu = 2;
    cfg.optim.lr = 1e-3;
    cfg.optim.eps = 1e3;  // the first AdamW step is then linear in the gradient (see sharded_training_test)
    cfg.optim.weight_decay = 0.0;  // decay moves both alike and would flatter the comparison
    cfg.grad_clip = 1e12;          // so would clipping both to the same norm
    PPOActor actor(model, cfg, 1.0, 2, 10);
    batch.old_log_probs = actor.compute_log_prob(batch, -1) + 0.05;
    const auto metrics = actor.update_policy(batch, 0, 1);
    for (const auto& [name, value] : metrics) EXPECT_TRUE(std::isfinite(value)) << name;
    std::vector<torch::Tensor> delta;
    const auto params = model->parameters();
    for (std::size_t i = 0; i < params.size(); ++i) {
      EXPECT_EQ(params[i].scalar_type(), torch::kFloat);
      delta.push_back((params[i].detach() - before[i]).reshape(-1));
    }
    ASSERT_FALSE(actor.optimizer().adamw().state().empty());
    for (const auto& [key, state] : actor.optimizer().adamw().state()) {
      const auto& adam = static_cast<const torch::optim::AdamWParamState&>(*state);
      EXPECT_EQ(adam.exp_avg().scalar_type(), torch::kFloat) << "AdamW moments stay fp32";
      EXPECT_EQ(adam.exp_avg_sq().scalar_type(), torch::kFloat);
    }
    updates.push_back(torch::cat(delta).to(torch::kDouble));
  }
  EXPECT_GT(updates[0].norm().item<double>(), 0.0);
  EXPECT_GT(cosine(updates[0], updates[1]), 0.99);
  EXPECT_NEAR(updates[1].norm().item<double>() / updates[0].norm().item<double>(), 1.0, 0.05);
}

TEST_F(PrecisionTest, SdpaAndEagerAttentionAgree) {
  auto model = make_model();
  const auto in = padded_inputs();
  torch::NoGradGuard no_grad;
  model->set_compute(options(torch::kFloat, AttentionKernel::kEager));
  const auto eager = model->forward(in.ids, in.mask, in.pos);
  model->set_compute(options(torch::kFloat, AttentionKernel::kSdpa));
  const auto sdpa = model->forward(in.ids, in.mask, in.pos);
  const double scale = max_abs(real_rows(eager, in));
  EXPECT_LT(max_abs(real_rows(sdpa, in) - real_rows(eager, in)) / scale, 1e-5);
  // And in bf16, within bf16's tolerance of each other.
  model->set_compute(options(torch::kBFloat16, AttentionKernel::kEager));
  const auto eager16 = model->forward(in.ids, in.mask, in.pos);
  model->set_compute(options(torch::kBFloat16, AttentionKernel::kSdpa));
  const auto sdpa16 = model->forward(in.ids, in.mask, in.pos);
  EXPECT_LT(max_abs(real_rows(sdpa16, in) - real_rows(eager16, in)) / scale, 3e-2);
}

// The float32 products of every linear layer and of the eager attention, forward and backward, by
// oneDNN and by BLAS: both equal the float64 model within float32 rounding, padded and packed, with
// and without gradient checkpointing; the oneDNN path really runs (its autograd nodes are in the
// graph: the shape is large enough for every product but k/v to pass cpu_matmul.cpp's size floor)
// and leaves bf16 alone (autocast takes torch::linear either way: bit-identical logits).
TEST_F(PrecisionTest, OneDnnAndBlasProductsEqualTheFloat64Model) {
  ModelShape shape = tiny_shape();
  shape.hidden_size = 128;
  shape.intermediate_size = 256;
  shape.num_attention_heads = 2;  // head_dim 64, one KV head: a packed chunk of 128 tokens is 2.1 M multiply-adds
  shape.num_key_value_heads = 1;
  shape.max_position_embeddings = 80;
  // 16 rows of 64 real tokens, left-padded to 72 by 0-8 (a packed chunk holds two rows: 128 tokens).
  const std::int64_t B = 16, T = 72;
  Inputs in;
  in.ids = torch::randint(1, shape.vocab_size, {B, T}, torch::kLong);
  in.mask = torch::zeros({B, T}, torch::kLong);
  for (std::int64_t r = 0; r < B; ++r) in.mask[r].slice(0, r % 9, r % 9 + 64).fill_(1);
  in.ids.mul_(in.mask);
  in.pos = (in.mask.cumsum(1) - 1).clamp_min(0);
  const auto targets = torch::randint(0, shape.vocab_size, {B, T}, torch::kLong);
  auto make = [&] {
    torch::manual_seed(5);
    return Transformer(shape, HeadKind::kLm);
  };
  // Logits and the flat gradient of a log-likelihood loss over the real tokens.
  auto pass = [&](Transformer& model) {
    auto logits = model->forward(in.ids, in.mask, in.pos);
    auto logp = torch::log_softmax(logits, -1);
    (-(logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1) * in.mask).sum() / in.mask.sum()).backward();
    return std::make_pair(logits, flat_grads(model));
  };
  for (const bool packed : {false, true}) {
    auto reference = make();
    reference->to(torch::kDouble);
    ComputeOptions o = options(torch::kFloat, AttentionKernel::kEager);
    o.remove_padding = packed;
    reference->set_compute(o);
    const auto [want_logits, want_grads] = pass(reference);
    const double scale = max_abs(real_rows(want_logits, in));
    for (const auto matmul : {CpuMatmul::kOneDnn, CpuMatmul::kBlas}) {
      for (const bool checkpoint : {false, true}) {
        SCOPED_TRACE(std::string(to_string(matmul)) + (packed ? " packed" : " padded") + (checkpoint ? " checkpointed" : ""));
        auto model = make();
        o.cpu_matmul = matmul;
        model->set_compute(o);
        model->set_gradient_checkpointing(checkpoint);
        const auto [logits, grads] = pass(model);
        EXPECT_EQ(graph_has(logits, "OneDnnLinear"), matmul == CpuMatmul::kOneDnn);
        EXPECT_EQ(graph_has(logits, "OneDnnBmm"), matmul == CpuMatmul::kOneDnn && !checkpoint)
            << "the attention's products (inside the checkpointed layers' own graph when checkpointed)";
        // 3e-5 of the largest logit: float32 rounding over four layers. The BLAS and oneDNN float32
        // sums depend on their buffers' alignment, which varies from one process to the next: 24
        // runs of this test gave up to 1.35e-5 on both paths (the 1e-5 it had failed one run in three);
        // a bf16 product would be ~1e-2 off.
        EXPECT_LT(max_abs(real_rows(logits, in).to(torch::kDouble) - real_rows(want_logits, in)) / scale, 3e-5);
        EXPECT_LT(max_abs(grads - want_grads) / max_abs(want_grads), 1e-4);
      }
    }
  }
  auto model = make();
  torch::NoGradGuard no_grad;
  model->set_compute(options(torch::kBFloat16, AttentionKernel::kEager, CpuMatmul::kOneDnn));
  const auto onednn16 = model->forward(in.ids, in.mask, in.pos);
  model->set_compute(options(torch::kBFloat16, AttentionKernel::kEager, CpuMatmul::kBlas));
  EXPECT_TRUE(torch::equal(model->forward(in.ids, in.mask, in.pos), onednn16));
}

// The rollout of a bf16-compute model over fp32 weights: a bf16 KV cache, and decoding through it
// gives the full forward's logits within bf16 tolerance, with either attention kernel.
TEST_F(PrecisionTest, Bf16RolloutDecodesThroughABf16CacheLikeTheFullForward) {
  for (const auto kernel : {AttentionKernel::kEager, AttentionKernel::kSdpa}) {
    auto model = make_model();
    model->set_compute(options(torch::kBFloat16, kernel));
    RolloutEngine engine(model, /*eos=*/-1, 0, /*block_size=*/4, /*num_blocks=*/-1, /*max_num_seqs=*/4, 24);
    engine.allocate_cache();
    ModelShape s = tiny_shape();
    EXPECT_EQ(engine.cache_bytes(), 2 * s.num_hidden_layers * engine.allocator().num_blocks() * 4 * s.num_key_value_heads *
                                        s.head_dim() * 2)
        << "a bf16 cache holds 2-byte elements";
    SamplingParams greedy;
    greedy.do_sample = false;
    torch::Generator gen = at::make_generator<at::CPUGeneratorImpl>(1);
    const std::vector<std::vector<std::int32_t>> prompts = {{1, 5, 9, 3, 30}, {2, 7}};
    const auto result = engine.generate(GenerationRequest{prompts, greedy, 6}, gen);
    ASSERT_EQ(result.responses.size(), 2u);
    // Greedy: every generated token is the argmax of the full bf16 forward over prompt + response
    // so far, unless two logits tie within bf16's rounding.
    torch::NoGradGuard no_grad;
    for (std::size_t r = 0; r < prompts.size(); ++r) {
      std::vector<std::int64_t> seq(prompts[r].begin(), prompts[r].end());
      seq.insert(seq.end(), result.responses[r].begin(), result.responses[r].end());
      const auto T = static_cast<std::int64_t>(seq.size());
      auto ids = torch::tensor(seq, torch::kLong).unsqueeze(0);
      auto logits = model->forward(ids, torch::ones_like(ids), torch::arange(T, torch::kLong).unsqueeze(0))[0];
      for (std::size_t t = 0; t < result.responses[r].size(); ++t) {
        const auto row = logits[static_cast<std::int64_t>(prompts[r].size() + t) - 1];
        const double chosen = row[result.responses[r][t]].item<double>();
        EXPECT_GE(chosen, row.max().item<double>() - 3e-2 * max_abs(row))
            << "row " << r << " token " << t << " is not the full forward's argmax";
      }
    }
  }
}

TEST(PrecisionConfig, KeysParseAndBadValuesNameTheKey) {
  const Config c = parse_config("", {"hybridscope.precision=bf16", "hybridscope.attention=sdpa", "hybridscope.cpu_matmul=blas"});
  EXPECT_EQ(c.hybridscope.precision, Precision::kBf16);
  const auto o = compute_options(c.hybridscope.precision, c.hybridscope.attention, c.hybridscope.cpu_matmul);
  EXPECT_EQ(o.dtype, torch::kBFloat16);
  EXPECT_EQ(o.attention, AttentionKernel::kSdpa);
  EXPECT_EQ(o.cpu_matmul, CpuMatmul::kBlas);
  EXPECT_EQ(Config{}.hybridscope.cpu_matmul, CpuMatmul::kOneDnn);
  EXPECT_EQ(compute_options(Precision::kFp32, AttentionKernel::kAuto).dtype, torch::kFloat);
  try {
    parse_config("", {"hybridscope.precision=fp16"});
    FAIL() << "fp16 accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("hybridscope.precision: expected one of fp32, bf16, got 'fp16'"),
              std::string::npos)
        << e.what();
  }
  try {
    parse_config("", {"hybridscope.attention=spda"});
    FAIL() << "spda accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("did you mean sdpa?"), std::string::npos) << e.what();
  }
  try {
    parse_config("", {"hybridscope.cpu_matmul=mkl"});
    FAIL() << "mkl accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("hybridscope.cpu_matmul: expected one of onednn, blas, got 'mkl'"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace hs::trainer
