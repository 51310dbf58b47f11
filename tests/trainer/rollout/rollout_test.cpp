// rollout_test.cpp — sample_tokens against known distributions, and RolloutEngine::generate
// against a naive loop that reruns the full forward on the growing sequence.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <set>
#include <string>

#include "../../../trainer/src/rollout/decode_graphs.h"
#include "hybridscope/trainer/rollout/rollout.h"

namespace hs::trainer {
namespace {

torch::Generator seeded(std::uint64_t seed) { return at::make_generator<at::CPUGeneratorImpl>(seed); }

SamplingParams sampling(double temperature, int top_k = -1, double top_p = 1.0, int n = 1) {
  return SamplingParams{temperature, top_k, top_p, n, true};
}

class SampleTokensTest : public ::testing::Test {
 protected:
  void SetUp() override { torch::set_num_threads(1); }
};

TEST_F(SampleTokensTest, GreedyIsArgmax) {
  auto logits = torch::randn({64, 50});
  auto argmax = logits.argmax(-1);
  auto gen = seeded(1);
  SamplingParams greedy{1.0, -1, 1.0, 1, false};
  EXPECT_TRUE(torch::equal(sample_tokens(logits, greedy, gen), argmax));
  EXPECT_TRUE(torch::equal(sample_tokens(logits, sampling(0.0), gen), argmax));      // temperature 0
  EXPECT_TRUE(torch::equal(sample_tokens(logits, sampling(1.3, 1), gen), argmax));   // top_k 1
  EXPECT_TRUE(torch::equal(sample_tokens(logits, sampling(1.3, -1, 1e-9), gen), argmax));  // tiny top_p
  // Plain sampling does not always pick the argmax (so the three checks above are not vacuous).
  EXPECT_FALSE(torch::equal(sample_tokens(logits, sampling(1.0), gen), argmax));
}

TEST_F(SampleTokensTest, FixedSeedIsReproducible) {
  auto logits = torch::randn({256, 98});
  for (const auto& p : {sampling(1.0), sampling(0.7, 20, 0.9)}) {
    auto g1 = seeded(42), g2 = seeded(42), g3 = seeded(43);
    auto a = sample_tokens(logits, p, g1);
    auto b = sample_tokens(logits, p, g2);
    auto c = sample_tokens(logits, p, g3);
    EXPECT_TRUE(torch::equal(a, b));
    EXPECT_FALSE(torch::equal(a, c));
    EXPECT_EQ(a.scalar_type(), torch::kLong);
    EXPECT_EQ(a.sizes(), (std::vector<std::int64_t>{256}));
  }
}

// Draws `rows` tokens from `probs` (V) through sample_tokens and checks every frequency against
// `expected` within 5 standard errors (and exactly 0 where expected is 0).
void check_frequencies(const torch::Tensor& probs, const SamplingParams& params, std::vector<double> expected) {
  const std::int64_t rows = 60000;
  auto logits = probs.log().unsqueeze(0).expand({rows, probs.size(0)}).contiguous();
  auto gen = seeded(7);
  auto tokens = sample_tokens(logits, params, gen);
  auto counts = torch::bincount(tokens, {}, probs.size(0)).to(torch::kDouble) / static_cast<double>(rows);
  for (std::int64_t v = 0; v < probs.size(0); ++v) {
    const double p = expected[static_cast<std::size_t>(v)];
    const double f = counts[v].item<double>();
    if (p == 0.0) {
      EXPECT_EQ(f, 0.0) << "token " << v << " must never be drawn";
    } else {
      EXPECT_NEAR(f, p, 5.0 * std::sqrt(p * (1 - p) / rows)) << "token " << v;
    }
  }
}

// p = 0.5, 0.25, 0.15, 0.07, 0.03 placed at vocabulary ids 3, 0, 4, 1, 2 (unsorted on purpose).
torch::Tensor known_distribution() {
  return torch::tensor({0.25, 0.07, 0.03, 0.5, 0.15}, torch::kFloat);
}

TEST_F(SampleTokensTest, FrequenciesMatchProbabilitiesAtTemperatureOne) {
  check_frequencies(known_distribution(), sampling(1.0), {0.25, 0.07, 0.03, 0.5, 0.15});
}

// The device path's draw (a host generator with device logits): inverting the CDF at host uniforms
// gives the same distribution as multinomial, never a zero-probability token, and the edges of the
// unit interval land on the first and last possible tokens.
TEST_F(SampleTokensTest, InverseCdfDrawsTheSameDistribution) {
  const std::int64_t rows = 60000;
  const auto probs = torch::tensor({0.25, 0.0, 0.07, 0.03, 0.5, 0.0, 0.15}, torch::kFloat);
  auto gen = seeded(11);
  const auto u = torch::rand({rows}, gen, torch::TensorOptions().dtype(torch::kDouble));
  const auto tokens = sample_by_inverse_cdf(probs.unsqueeze(0).expand({rows, 7}).contiguous(), u);
  EXPECT_EQ(tokens.scalar_type(), torch::kLong);
  const auto counts = torch::bincount(tokens, {}, 7).to(torch::kDouble) / static_cast<double>(rows);
  for (std::int64_t v = 0; v < 7; ++v) {
    const double p = probs[v].item<double>();
    if (p == 0.0) {
      EXPECT_EQ(counts[v].item<double>(), 0.0) << "token " << v << " has probability 0";
    } else {
      EXPECT_NEAR(counts[v].item<double>(), p, 5.0 * std::sqrt(p * (1 - p) / rows)) << "token " << v;
    }
  }
  // u = 0 takes the first token with mass; u just below 1 the last one; unnormalised rows work.
  const auto edges = torch::tensor({{0.0, 0.0, 2.0, 0.0, 1.0, 0.0}, {0.0, 0.0, 2.0, 0.0, 1.0, 0.0}}, torch::kFloat);
  const auto picked = sample_by_inverse_cdf(edges, torch::tensor({0.0, 1.0 - 1e-12}, torch::kDouble));
  EXPECT_EQ(picked[0].item<std::int64_t>(), 2);
  EXPECT_EQ(picked[1].item<std::int64_t>(), 4);
}

TEST_F(SampleTokensTest, TemperatureSharpensAndFlattens) {
  auto p = known_distribution().to(torch::kDouble);
  for (double t : {0.5, 2.0}) {
    auto q = p.pow(1.0 / t);
    q = q / q.sum();
    std::vector<double> expected(q.data_ptr<double>(), q.data_ptr<double>() + 5);
    check_frequencies(known_distribution(), sampling(t), expected);
  }
}

TEST_F(SampleTokensTest, TopKAndTopPTruncateAndRenormalise) {
  // top_k 2: ids 3 and 0 with 0.5 / 0.75 and 0.25 / 0.75.
  check_frequencies(known_distribution(), sampling(1.0, 2), {1.0 / 3, 0, 0, 2.0 / 3, 0});
  // top_p 0.8: masses before each token in order 0, 0.5, 0.75, 0.9, ... -> keep 0.5, 0.25, 0.15.
  check_frequencies(known_distribution(), sampling(1.0, -1, 0.8), {0.25 / 0.9, 0, 0, 0.5 / 0.9, 0.15 / 0.9});
  // top_p 0.6: keep 0.5 and 0.25.
  check_frequencies(known_distribution(), sampling(1.0, -1, 0.6), {1.0 / 3, 0, 0, 2.0 / 3, 0});
  // top_k 3 then top_p 0.6 of the renormalised (0.5, 0.25, 0.15) / 0.9: keep 0.556 and 0.278.
  check_frequencies(known_distribution(), sampling(1.0, 3, 0.6), {1.0 / 3, 0, 0, 2.0 / 3, 0});
}

// ---------------------------------------------------------------------------------------------
// generate

ModelShape gqa_shape() {
  ModelShape s;
  s.vocab_size = 37;
  s.hidden_size = 64;
  s.intermediate_size = 96;
  s.num_hidden_layers = 2;
  s.num_attention_heads = 4;
  s.num_key_value_heads = 2;
  s.max_position_embeddings = 32;
  s.rope_theta = 500.0;
  s.initializer_range = 0.2;
  return s;
}

Transformer make_model() {
  torch::manual_seed(11);
  return Transformer(gqa_shape(), HeadKind::kLm);
}

// The naive loop: the full forward on prompt + response so far, one token at a time.
std::vector<std::int32_t> reference_generate(Transformer& model, const std::vector<std::int32_t>& prompt,
                                             const SamplingParams& params, int max_len, int eos,
                                             torch::Generator& gen) {
  torch::NoGradGuard no_grad;
  std::vector<std::int64_t> seq(prompt.begin(), prompt.end());
  std::vector<std::int32_t> response;
  while (static_cast<int>(response.size()) < max_len) {
    const auto T = static_cast<std::int64_t>(seq.size());
    auto ids = torch::tensor(seq, torch::kLong).unsqueeze(0);
    auto logits = model->forward(ids, torch::ones_like(ids), torch::arange(T, torch::kLong).unsqueeze(0));
    const auto token = sample_tokens(logits[0][T - 1].unsqueeze(0), params, gen)[0].item<std::int64_t>();
    response.push_back(static_cast<std::int32_t>(token));
    seq.push_back(token);
    if (token == eos) break;
  }
  return response;
}

class GenerateTest : public ::testing::Test {
 protected:
  void SetUp() override { torch::set_num_threads(1); }
  const std::vector<std::vector<std::int32_t>> prompts_ = {
      {1, 5, 9, 3, 30, 2, 8}, {2, 7}, {4, 8, 15, 16, 23}, {6}, {10, 11, 12, 13, 14, 15, 16, 17, 18}};
};

TEST_F(GenerateTest, GreedyEqualsNaiveLoopAcrossWavesAndForks) {
  auto model = make_model();
  const SamplingParams greedy{1.0, -1, 1.0, 3, false};
  const int max_len = 10;
  // EOS: a token the model really produces, so that some responses stop early.
  auto g = seeded(0);
  const int eos = reference_generate(model, prompts_[1], greedy, max_len, -1, g)[4];
  std::vector<std::vector<std::int32_t>> expected;
  for (const auto& p : prompts_) expected.push_back(reference_generate(model, p, greedy, max_len, eos, g));

  // max_num_seqs 6 with n 3: waves of two prompts; block size 4 < every long sequence.
  RolloutEngine engine(model, eos, /*pad=*/0, /*block_size=*/4, /*num_blocks=*/-1, 6, 20);
  GenerationRequest request{prompts_, greedy, max_len};
  auto gen = seeded(0);
  const auto result = engine.generate(request, gen);
  ASSERT_EQ(result.responses.size(), prompts_.size() * 3);
  std::int64_t tokens = 0;
  bool some_stopped_early = false;
  for (std::size_t i = 0; i < prompts_.size(); ++i) {
    for (std::size_t j = 0; j < 3; ++j) {
      const auto& r = result.responses[i * 3 + j];
      EXPECT_EQ(r, expected[i]) << "prompt " << i << " sample " << j;
      tokens += static_cast<std::int64_t>(r.size());
      some_stopped_early = some_stopped_early || static_cast<int>(r.size()) < max_len;
    }
  }
  EXPECT_TRUE(some_stopped_early);
  EXPECT_EQ(result.generated_tokens, tokens);
  // The pool is empty afterwards; at its peak the groups shared their prompts' blocks.
  const auto after = engine.allocator().stats();
  EXPECT_EQ(after.blocks_used, 0);
  EXPECT_EQ(after.num_sequences, 0);
  EXPECT_EQ(after.tokens_stored, 0);
  EXPECT_GT(result.peak_pool.blocks_used, 0);
  EXPECT_GT(result.peak_pool.shared_blocks, 0);
  EXPECT_LE(result.peak_pool.num_sequences, 6);
  EXPECT_EQ(result.peak_pool.num_blocks, 6 * 5);  // ceil(20 / 4) blocks for each of 6 sequences
}

TEST_F(GenerateTest, ResponsesEndAtEosOrMaxLength) {
  auto model = make_model();
  RolloutEngine engine(model, /*eos=*/3, /*pad=*/0, 4, -1, 16, 24);
  GenerationRequest request{prompts_, sampling(1.5, -1, 1.0, 4), 12};
  auto gen = seeded(5);
  const auto result = engine.generate(request, gen);
  ASSERT_EQ(result.responses.size(), prompts_.size() * 4);
  int ended_by_eos = 0;
  for (const auto& r : result.responses) {
    ASSERT_FALSE(r.empty());
    ASSERT_LE(r.size(), 12u);
    for (std::size_t t = 0; t + 1 < r.size(); ++t) EXPECT_NE(r[t], 3) << "EOS inside a response";
    if (r.back() == 3) ++ended_by_eos;
    else EXPECT_EQ(r.size(), 12u) << "a response without EOS has max_response_length tokens";
    for (const auto tok : r) EXPECT_TRUE(tok >= 0 && tok < 37);
  }
  EXPECT_GT(ended_by_eos, 0);
  // The 4 samples of a group are drawn independently.
  std::set<std::vector<std::int32_t>> group(result.responses.begin(), result.responses.begin() + 4);
  EXPECT_GT(group.size(), 1u);
  // Same seed, same responses.
  auto again = seeded(5);
  EXPECT_EQ(engine.generate(request, again).responses, result.responses);
}

TEST_F(GenerateTest, SampledGenerationEqualsNaiveLoopWithTheSameGenerator) {
  auto model = make_model();
  RolloutEngine engine(model, /*eos=*/-1, 0, 2, -1, 4, 24);
  const auto params = sampling(0.8, 12, 0.9);
  for (std::size_t i = 0; i < prompts_.size(); ++i) {
    GenerationRequest request{{prompts_[i]}, params, 12};
    auto g1 = seeded(100 + i), g2 = seeded(100 + i);
    const auto got = engine.generate(request, g1).responses.at(0);
    EXPECT_EQ(got, reference_generate(model, prompts_[i], params, 12, -1, g2)) << "prompt " << i;
  }
}

// The engine's log-probability of every sampled token is the full forward's log_softmax(logits /
// temperature) at that token (before top-k/top-p): what the trainer's old_log_prob pass computes
// on the same weights, so a single-process fp32 rollout has no mismatch beyond float noise.
TEST_F(GenerateTest, RolloutLogProbsEqualTheFullForwardsAtTheSampledTokens) {
  auto model = make_model();
  RolloutEngine engine(model, /*eos=*/3, 0, 4, -1, 8, 24);
  const auto params = sampling(0.7, 12, 0.9, 2);
  GenerationRequest request{{prompts_[0], prompts_[2]}, params, 10};
  auto gen = seeded(7);
  const auto result = engine.generate(request, gen);
  ASSERT_EQ(result.log_probs.size(), result.responses.size());
  torch::NoGradGuard no_grad;
  for (std::size_t r = 0; r < result.responses.size(); ++r) {
    const auto& prompt = request.prompts[r / 2];
    const auto& response = result.responses[r];
    ASSERT_EQ(result.log_probs[r].size(), response.size()) << "row " << r;
    std::vector<std::int64_t> seq(prompt.begin(), prompt.end());
    seq.insert(seq.end(), response.begin(), response.end());
    const auto T = static_cast<std::int64_t>(seq.size());
    auto ids = torch::tensor(seq, torch::kLong).unsqueeze(0);
    const auto logits = model->forward(ids, torch::ones_like(ids), torch::arange(T, torch::kLong).unsqueeze(0))[0];
    const auto lp = (logits / 0.7).log_softmax(-1);
    for (std::size_t t = 0; t < response.size(); ++t) {
      const auto at = static_cast<std::int64_t>(prompt.size() + t) - 1;  // the position that predicted token t
      EXPECT_NEAR(result.log_probs[r][t], lp[at][response[t]].item<double>(), 2e-5) << "row " << r << " token " << t;
    }
  }
  // sampling_log_probs at temperature 1 and when greedy: plain log_softmax.
  const auto logits = torch::tensor({{0.5, 1.5, -1.0}}, torch::kFloat);
  const auto token = torch::tensor({1}, torch::kLong);
  const double expected = (logits.log_softmax(-1))[0][1].item<double>();
  EXPECT_NEAR(sampling_log_probs(logits, token, sampling(1.0)).item<double>(), expected, 1e-7);
  EXPECT_NEAR(sampling_log_probs(logits, token, SamplingParams{0.5, -1, 1.0, 1, false}).item<double>(), expected, 1e-7);
}

// Two models of the same shape: between_steps copies the second's weights into the engine's
// model before the 3rd decode step, as a partial-rollout weight sync does. With the re-prefill
// (between_steps returns true) every token from then on has the log-prob that a from-scratch
// forward of prompt + tokens so far under the new weights gives — the cache the old weights
// wrote is gone; the tokens before keep the old weights' log-probs. Returning false (the weights
// changed but the cache is kept: decoding on the old K/V) misses that, so the check is not vacuous.
std::vector<std::vector<float>> generate_across_a_weight_change(Transformer& model, Transformer& next,
                                                                const std::vector<std::vector<std::int32_t>>& prompts,
                                                                bool reprefill, std::int64_t& reprefilled) {
  RolloutEngine engine(model, /*eos=*/-1, /*pad=*/0, /*block_size=*/4, /*num_blocks=*/-1, /*max_num_seqs=*/16, 24);
  GenerationRequest request{prompts, SamplingParams{1.0, -1, 1.0, 2, false}, 8};
  int calls = 0;
  request.between_steps = [&] {
    if (++calls != 3) return false;
    torch::NoGradGuard no_grad;
    const auto from = next->named_parameters();
    for (auto& p : model->named_parameters()) p.value().copy_(from[p.key()]);
    return reprefill;
  };
  auto gen = seeded(0);
  const auto result = engine.generate(request, gen);
  reprefilled = result.reprefilled_tokens;
  // Every token's log-prob under the weights that a from-scratch forward says: the first model's
  // before the change, the second's from token 3 on.
  std::vector<std::vector<float>> gap(result.responses.size());
  torch::NoGradGuard no_grad;
  for (std::size_t r = 0; r < result.responses.size(); ++r) {
    const auto& prompt = prompts[r / 2];
    const auto& response = result.responses[r];
    EXPECT_EQ(response.size(), 8u);
    std::vector<std::int64_t> seq(prompt.begin(), prompt.end());
    seq.insert(seq.end(), response.begin(), response.end());
    const auto T = static_cast<std::int64_t>(seq.size());
    auto ids = torch::tensor(seq, torch::kLong).unsqueeze(0);
    const auto lp = model->forward(ids, torch::ones_like(ids), torch::arange(T, torch::kLong).unsqueeze(0))[0]
                        .log_softmax(-1);  // model holds the new weights now
    for (std::size_t t = 3; t < response.size(); ++t) {
      const auto at = static_cast<std::int64_t>(prompt.size() + t) - 1;
      gap[r].push_back(std::abs(result.log_probs[r][t] - lp[at][response[t]].item<float>()));
    }
  }
  return gap;
}

TEST_F(GenerateTest, AWeightChangeMidWaveReprefillsTheSequencesInFlight) {
  auto model = make_model();
  torch::manual_seed(12);
  Transformer next(gqa_shape(), HeadKind::kLm);
  const std::vector<std::vector<std::int32_t>> prompts = {prompts_[0], prompts_[1], prompts_[4]};
  std::int64_t reprefilled = 0;
  const auto gap = generate_across_a_weight_change(model, next, prompts, /*reprefill=*/true, reprefilled);
  for (std::size_t r = 0; r < gap.size(); ++r)
    for (std::size_t t = 0; t < gap[r].size(); ++t) EXPECT_LT(gap[r][t], 2e-5) << "row " << r << " token " << t + 3;
  // Every sequence was in flight with 3 tokens sampled, 2 of them in the cache: prompt + 2 each.
  std::int64_t expected = 0;
  for (const auto& p : prompts) expected += 2 * (static_cast<std::int64_t>(p.size()) + 2);
  EXPECT_EQ(reprefilled, expected);

  // Decoding on over the old weights' K/V is not the new policy.
  auto old_model = make_model();
  std::int64_t none = -1;
  const auto stale = generate_across_a_weight_change(old_model, next, prompts, /*reprefill=*/false, none);
  EXPECT_EQ(none, 0);
  float worst = 0;
  for (const auto& row : stale)
    for (const auto g : row) worst = std::max(worst, g);
  EXPECT_GT(worst, 1e-3) << "the old K/V changes the logits after the weight change";
}

TEST_F(GenerateTest, CacheAllocationAndRelease) {
  auto model = make_model();
  RolloutEngine engine(model, 3, 0, 4, /*num_blocks=*/10, 4, 16);
  EXPECT_FALSE(engine.cache_allocated());
  EXPECT_EQ(engine.cache_bytes(), 0);
  engine.allocate_cache();
  EXPECT_TRUE(engine.cache_allocated());
  // layers * {K, V} * slots * kv_heads * head_dim * 4 bytes
  EXPECT_EQ(engine.cache_bytes(), 2 * 2 * (10 * 4) * 2 * 16 * 4);
  engine.release_cache();
  EXPECT_FALSE(engine.cache_allocated());
  EXPECT_EQ(engine.cache_bytes(), 0);
  // generate allocates on demand.
  GenerationRequest request{{{1, 2, 3}}, SamplingParams{1.0, -1, 1.0, 2, false}, 4};
  auto gen = seeded(1);
  EXPECT_EQ(engine.generate(request, gen).responses.size(), 2u);
  EXPECT_TRUE(engine.cache_allocated());
}

TEST_F(GenerateTest, EdgeCasesAndErrors) {
  auto model = make_model();
  RolloutEngine engine(model, 3, 0, 4, -1, 4, 16);
  auto gen = seeded(1);
  auto empty = engine.generate(GenerationRequest{prompts_, sampling(1.0, -1, 1.0, 2), 0}, gen);
  EXPECT_EQ(empty.responses.size(), prompts_.size() * 2);
  for (const auto& r : empty.responses) EXPECT_TRUE(r.empty());
  EXPECT_EQ(empty.generated_tokens, 0);
  EXPECT_EQ(engine.allocator().stats().blocks_used, 0);

  EXPECT_THROW(engine.generate(GenerationRequest{{std::vector<std::int32_t>(10, 1)}, sampling(1.0), 7}, gen),
               std::invalid_argument);  // 10 + 7 > max_seq_len 16
  EXPECT_THROW(engine.generate(GenerationRequest{{{1}}, sampling(1.0, -1, 1.0, 5), 4}, gen),
               std::invalid_argument);  // n 5 > max_num_seqs 4
  EXPECT_THROW(engine.generate(GenerationRequest{{{}}, sampling(1.0), 4}, gen), std::invalid_argument);
  EXPECT_THROW(RolloutEngine(Transformer(gqa_shape(), HeadKind::kValue), 3, 0, 4, -1, 4, 16),
               std::invalid_argument);
  EXPECT_THROW(RolloutEngine(model, 3, 0, 4, -1, 4, 64), std::invalid_argument);  // > max positions

  // Too few blocks: 2 blocks of 4 tokens cannot hold a 5-token prompt plus 4 more tokens.
  RolloutEngine small(model, -1, 0, 4, /*num_blocks=*/2, 4, 16);
  EXPECT_THROW(small.generate(GenerationRequest{{{1, 2, 3, 4, 5}}, SamplingParams{1.0, -1, 1.0, 1, false}, 8}, gen),
               KvPoolExhausted);
  // The next generate starts from an empty pool again.
  EXPECT_EQ(small.generate(GenerationRequest{{{1, 2}}, SamplingParams{1.0, -1, 1.0, 1, false}, 3}, gen)
                .responses.at(0).size(), 3u);
}

TEST_F(GenerateTest, WavesShrinkToFitASmallPoolAndGiveTheSameResponses) {
  auto model = make_model();
  const SamplingParams greedy{1.0, -1, 1.0, 2, false};
  const int max_len = 6;
  RolloutEngine roomy(model, /*eos=*/-1, /*pad=*/0, /*block_size=*/4, /*num_blocks=*/-1, /*max_num_seqs=*/8, 20);
  auto g1 = seeded(0);
  const auto expected = roomy.generate(GenerationRequest{prompts_, greedy, max_len}, g1);

  // 9 blocks: the 9-token prompt's 2 samples need 2 x ceil(15 / 4) = 8 on their own, so no wave
  // holds 4 prompts as max_num_seqs 8 / n 2 would allow; every wave's worst case fits.
  RolloutEngine tight(model, -1, 0, 4, /*num_blocks=*/9, 8, 20);
  auto g2 = seeded(0);
  const auto got = tight.generate(GenerationRequest{prompts_, greedy, max_len}, g2);
  EXPECT_EQ(got.responses, expected.responses);
  EXPECT_EQ(got.generated_tokens, expected.generated_tokens);
  EXPECT_LE(got.peak_pool.blocks_used, 9);
  EXPECT_EQ(got.peak_pool.num_blocks, 9);
  EXPECT_LT(got.peak_pool.num_sequences, expected.peak_pool.num_sequences) << "smaller waves";

  // 7 blocks cannot hold the first prompt's worst case (8): refused before decoding, with the fix.
  RolloutEngine too_small(model, -1, 0, 4, /*num_blocks=*/7, 8, 20);
  auto g3 = seeded(0);
  try {
    too_small.generate(GenerationRequest{prompts_, greedy, max_len}, g3);
    FAIL() << "expected KvPoolExhausted";
  } catch (const KvPoolExhausted& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("holds 7 blocks"), std::string::npos) << what;
    EXPECT_NE(what.find("prompt 0 with 2 samples of up to 7 + 6 tokens may need 8"), std::string::npos) << what;
    EXPECT_NE(what.find("hybridscope.kv_num_blocks"), std::string::npos) << what;
  }
  EXPECT_EQ(too_small.allocator().stats().blocks_used, 0) << "nothing was taken from the pool";
}

TEST_F(GenerateTest, ALimitedVocabularyIsNeverExceededWhenSampling) {
  auto model = make_model();
  RolloutEngine engine(model, /*eos=*/-1, 0, 4, -1, 16, 24);
  auto gen = seeded(9);
  const GenerationRequest request{prompts_, sampling(1.5, -1, 1.0, 4), 12};
  std::set<std::int32_t> unlimited;
  for (const auto& r : engine.generate(request, gen).responses) unlimited.insert(r.begin(), r.end());
  ASSERT_GE(*unlimited.rbegin(), 10) << "without a limit, a hot sampler reaches ids past 10";

  engine.limit_sampling_to(10);
  std::set<std::int32_t> limited;
  for (const auto& r : engine.generate(request, gen).responses) limited.insert(r.begin(), r.end());
  EXPECT_LT(*limited.rbegin(), 10);
  EXPECT_GT(limited.size(), 3u) << "still sampling among the ids below the limit";
  EXPECT_THROW(engine.limit_sampling_to(0), std::invalid_argument);
  EXPECT_THROW(engine.limit_sampling_to(38), std::invalid_argument);  // past the model's 37
}

TEST(KvBlocksWithin, TheSmallerOfTheShareLessWeightsAndWhatIsAvailable) {
  KvMemoryBudget b;
  b.utilization = 0.5;
  b.total_bytes = 1000;
  b.weight_bytes = 100;
  b.available_bytes = 900;
  b.bytes_per_block = 40;
  EXPECT_EQ(kv_blocks_within(b), 10);  // (500 - 100) / 40
  b.available_bytes = 250;
  EXPECT_EQ(kv_blocks_within(b), 6);   // 250 / 40: other tenants hold the rest
  b.available_bytes = 900;
  b.utilization = 0.05;
  EXPECT_EQ(kv_blocks_within(b), 0);   // the weights alone exceed the share
  b.utilization = 1.0;
  b.weight_bytes = 0;
  EXPECT_EQ(kv_blocks_within(b), 22);  // 900 / 40, floored
  b.bytes_per_block = 0;
  EXPECT_THROW(kv_blocks_within(b), std::invalid_argument);
  EXPECT_THROW(RolloutEngine(make_model(), -1, 0, 4, -1, 8, 20, /*gpu_memory_utilization=*/0.0), std::invalid_argument);
  // One block of the demo's GQA shape: 2 layers x {K, V} x 4 tokens x 2 heads x 16 dims.
  EXPECT_EQ(PagedKvCache::bytes_per_block(gqa_shape(), 4, torch::kFloat), 2 * 2 * 4 * 2 * 16 * 4);
  EXPECT_EQ(PagedKvCache::bytes_per_block(gqa_shape(), 4, torch::kBFloat16), 2 * 2 * 4 * 2 * 16 * 2);
}

TEST_F(GenerateTest, Bfloat16ModelGeneratesWithABfloat16Cache) {
  auto model = make_model();
  model->to(torch::kBFloat16);
  RolloutEngine engine(model, /*eos=*/-1, 0, 4, -1, 8, 20);
  auto gen = seeded(3);
  const auto result = engine.generate(GenerationRequest{prompts_, sampling(1.0, -1, 1.0, 2), 6}, gen);
  EXPECT_EQ(engine.cache_bytes(), 2 * 2 * (8 * 5 * 4) * 2 * 16 * 2);  // 2-byte elements
  ASSERT_EQ(result.responses.size(), prompts_.size() * 2);
  for (const auto& r : result.responses) {
    EXPECT_EQ(r.size(), 6u);
    for (const auto tok : r) EXPECT_TRUE(tok >= 0 && tok < 37);
  }
}

// ---------------------------------------------------------------------------------------------
// The device loop (hybridscope.decode.device_loop)

DecodeOptions device_loop(int stop_check_interval) {
  DecodeOptions options;
  options.device_loop = true;
  options.stop_check_interval = stop_check_interval;
  return options;
}

// With a stop check every step the device loop decodes the same rows in the same order as the
// host loop and draws from the generator in the same order: on CPU the same tokens and log-probs,
// sampled or greedy, across waves, forks and stops.
TEST_F(GenerateTest, DeviceLoopCheckingEveryStepEqualsTheHostLoop) {
  auto model = make_model();
  const int max_len = 11;
  for (const auto& params : {SamplingParams{1.0, -1, 1.0, 3, false}, sampling(1.3, 20, 0.95, 3)}) {
    RolloutEngine host(model, /*eos=*/3, /*pad=*/0, /*block_size=*/4, /*num_blocks=*/-1, /*max_num_seqs=*/6, 24);
    RolloutEngine device(model, 3, 0, 4, -1, 6, 24);
    device.set_decode(device_loop(1));
    auto g1 = seeded(21), g2 = seeded(21);
    const GenerationRequest request{prompts_, params, max_len};
    const auto expected = host.generate(request, g1);
    const auto got = device.generate(request, g2);
    EXPECT_EQ(got.responses, expected.responses) << "do_sample " << params.do_sample;
    EXPECT_EQ(got.log_probs, expected.log_probs) << "do_sample " << params.do_sample;
    EXPECT_EQ(got.generated_tokens, expected.generated_tokens);
    int stopped = 0, full = 0;
    for (const auto& r : got.responses) (r.back() == 3 ? stopped : full) += 1;
    EXPECT_GT(stopped, 0) << "some responses end at EOS";
    EXPECT_GT(full, 0) << "some responses reach max_response_length";
    // The generator is left where the host loop left it.
    EXPECT_EQ(torch::rand({1}, g1).item<double>(), torch::rand({1}, g2).item<double>());
    // Every reserved block is back in the pool.
    EXPECT_EQ(device.allocator().stats().blocks_used, 0);
    EXPECT_EQ(device.allocator().stats().num_sequences, 0);
    // The device loop reserved each wave's responses whole: its peak is at least the host loop's.
    EXPECT_GE(got.peak_pool.blocks_used, expected.peak_pool.blocks_used);
  }
}

// Checking every k steps, the finished rows are decoded until the next check: greedy tokens are
// the host loop's and the log-probs agree to float rounding (the batches differ in size), and a
// finished row's extra tokens never reach its response.
TEST_F(GenerateTest, DeviceLoopCheckingEveryKStepsKeepsTheGreedyResponses) {
  auto model = make_model();
  const SamplingParams greedy{1.0, -1, 1.0, 2, false};
  auto g = seeded(0);
  const int eos = reference_generate(model, prompts_[1], greedy, 10, -1, g)[3];  // a token the model produces
  RolloutEngine host(model, eos, 0, 4, -1, 8, 24);
  auto g1 = seeded(0);
  const GenerationRequest request{prompts_, greedy, 13};
  const auto expected = host.generate(request, g1);
  for (const int k : {3, 8, 50}) {
    RolloutEngine device(model, eos, 0, 4, -1, 8, 24);
    device.set_decode(device_loop(k));
    auto g2 = seeded(0);
    const auto got = device.generate(request, g2);
    ASSERT_EQ(got.responses, expected.responses) << "stop_check_interval " << k;
    EXPECT_EQ(got.generated_tokens, expected.generated_tokens);
    for (std::size_t i = 0; i < got.log_probs.size(); ++i) {
      ASSERT_EQ(got.log_probs[i].size(), expected.log_probs[i].size());
      for (std::size_t t = 0; t < got.log_probs[i].size(); ++t)
        EXPECT_NEAR(got.log_probs[i][t], expected.log_probs[i][t], 1e-5) << "row " << i << " token " << t;
    }
  }
  bool stopped_early = false;
  for (const auto& r : expected.responses) stopped_early = stopped_early || (r.back() == eos && r.size() < 13u);
  EXPECT_TRUE(stopped_early) << "the test needs a response that ends before max_response_length";
}

TEST_F(GenerateTest, DeviceLoopOptionsAreCheckedAndAResponseOfOneTokenWorks) {
  auto model = make_model();
  RolloutEngine engine(model, 3, 0, 4, -1, 8, 24);
  DecodeOptions bad = device_loop(0);
  EXPECT_THROW(engine.set_decode(bad), std::invalid_argument);
  DecodeOptions graphs_alone;
  graphs_alone.cuda_graphs = true;
  EXPECT_THROW(engine.set_decode(graphs_alone), std::invalid_argument);
  engine.set_decode(device_loop(4));
  auto g1 = seeded(3);
  const auto one = engine.generate(GenerationRequest{prompts_, sampling(1.0, -1, 1.0, 2), 1}, g1);
  for (const auto& r : one.responses) EXPECT_EQ(r.size(), 1u);
  EXPECT_EQ(one.generated_tokens, static_cast<std::int64_t>(prompts_.size() * 2));
  auto g2 = seeded(3);
  const auto none = engine.generate(GenerationRequest{prompts_, sampling(1.0), 0}, g2);
  for (const auto& r : none.responses) EXPECT_TRUE(r.empty());
  // A weight sync between two tokens (partial rollout) needs the host loop.
  GenerationRequest partial{prompts_, sampling(1.0), 4};
  partial.between_steps = [] { return false; };
  auto g3 = seeded(3);
  EXPECT_THROW(engine.generate(partial, g3), std::invalid_argument);
}

// sample_tokens_at: the given uniforms decide the draw exactly as sample_by_inverse_cdf over the
// same filtered distribution; greedy ignores them.
TEST_F(SampleTokensTest, SampleTokensAtInvertsTheFilteredDistribution) {
  auto logits = torch::tensor({{0.0, 1.0, 2.0, 3.0}, {3.0, 2.0, 1.0, 0.0}}, torch::kFloat);
  const auto params = sampling(1.0, /*top_k=*/2);
  // Top-2 keeps ids 2, 3 (row 0) and 0, 1 (row 1) with probabilities 1/(1+e) and e/(1+e).
  // The CDF runs in id order: row 0 crosses from id 2 to 3 at 1/(1+e), row 1 from id 0 to 1 at e/(1+e).
  const double low = 1.0 / (1.0 + std::exp(1.0)), high = 1.0 - low;
  auto below = torch::tensor({low - 1e-3, high - 1e-3}, torch::kDouble);
  auto above = torch::tensor({low + 1e-3, high + 1e-3}, torch::kDouble);
  auto a = sample_tokens_at(logits, params, below);
  auto b = sample_tokens_at(logits, params, above);
  EXPECT_EQ(a[0].item<std::int64_t>(), 2);
  EXPECT_EQ(b[0].item<std::int64_t>(), 3);
  EXPECT_EQ(a[1].item<std::int64_t>(), 0);
  EXPECT_EQ(b[1].item<std::int64_t>(), 1);
  const SamplingParams greedy{1.0, -1, 1.0, 1, false};
  EXPECT_TRUE(sample_tokens_at(logits, greedy, below).equal(torch::tensor({3, 0}, torch::kLong)));
}

// vLLM's capture sizes: 1, 2, 4, then every 8, up to the first at or past the largest batch.
TEST(DecodeGraphBuckets, OneTwoFourThenEveryEight) {
  using detail::bucket_for;
  using detail::graph_batch_buckets;
  EXPECT_EQ(graph_batch_buckets(1), (std::vector<std::int64_t>{1}));
  EXPECT_EQ(graph_batch_buckets(3), (std::vector<std::int64_t>{1, 2, 4}));
  EXPECT_EQ(graph_batch_buckets(20), (std::vector<std::int64_t>{1, 2, 4, 8, 16, 24}));
  const auto buckets = graph_batch_buckets(256);
  EXPECT_EQ(buckets.size(), 3u + 32u);
  EXPECT_EQ(buckets.back(), 256);
  EXPECT_EQ(bucket_for(buckets, 1), 1);
  EXPECT_EQ(bucket_for(buckets, 3), 4);
  EXPECT_EQ(bucket_for(buckets, 5), 8);
  EXPECT_EQ(bucket_for(buckets, 9), 16);
  EXPECT_EQ(bucket_for(buckets, 256), 256);
  EXPECT_THROW(bucket_for(buckets, 257), std::out_of_range);
  EXPECT_THROW(bucket_for(buckets, 0), std::out_of_range);
  EXPECT_THROW(graph_batch_buckets(0), std::invalid_argument);
}

// Graphs are a CUDA capture: a CPU cache, or a model without the paged kernel, is refused by name.
TEST(DecodeGraphBuckets, ACpuCacheIsRefused) {
  auto model = make_model();
  PagedKvCache cache(gqa_shape(), 4, 4, torch::kFloat, torch::kCPU);
  try {
    detail::DecodeGraphs graphs(model, &cache, 8, 4);
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("cuda_graphs"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace hs::trainer
