// model_test.cpp — the Llama model against an independent reference, the paged-cache forward
// against the full forward, tensor parallelism against one rank, and safetensors / HF
// directories byte for byte.
//
// The reference (reference_logits) is written the long way — one sequence, one head at a time,
// rotary angles from std::pow/std::cos, explicit repeat of KV heads — from the parameters by
// their HF names, so it shares no code with model.cpp.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "../../remove_tree.h"
#include "hybridscope/trainer/rollout/kv_block_pool.h"
#include "hybridscope/trainer/model/model.h"
#include "hybridscope/trainer/rollout/rollout.h"
#include "hybridscope/trainer/dist/thread_world.h"

namespace hs::trainer {
namespace {

namespace fs = std::filesystem;

ModelShape tiny_shape(bool tied = false) {
  ModelShape s;
  s.vocab_size = 37;
  s.hidden_size = 64;
  s.intermediate_size = 96;
  s.num_hidden_layers = 2;
  s.num_attention_heads = 4;
  s.num_key_value_heads = 2;
  s.max_position_embeddings = 64;
  s.rope_theta = 500.0;  // small theta: positions rotate noticeably within a few tokens
  s.rms_norm_eps = 1e-6;
  s.tie_word_embeddings = tied;
  s.initializer_range = 0.2;  // O(1) logits, so tolerances are meaningful
  return s;
}

Transformer make_model(const ModelShape& shape, HeadKind head = HeadKind::kLm, std::uint64_t seed = 7) {
  torch::manual_seed(seed);
  Transformer model(shape, head);
  // Non-trivial norm weights so that a missing weight multiply would show.
  torch::NoGradGuard no_grad;
  for (auto& item : model->named_parameters()) {
    if (item.key().find("norm") != std::string::npos) item.value().uniform_(0.5, 1.5);
  }
  return model;
}

std::map<std::string, torch::Tensor> params_of(Transformer& model) {
  std::map<std::string, torch::Tensor> out;
  for (const auto& item : model->named_parameters()) out[item.key()] = item.value().detach().to(torch::kDouble);
  return out;
}

// Llama forward of one unpadded sequence in float64: logits (T, V).
torch::Tensor reference_logits(const std::map<std::string, torch::Tensor>& p, const ModelShape& s,
                               const std::vector<std::int64_t>& ids) {
  const auto T = static_cast<std::int64_t>(ids.size());
  const std::int64_t H = s.num_attention_heads, KV = s.num_key_value_heads, D = s.head_dim();
  auto dbl = torch::TensorOptions().dtype(torch::kDouble);
  auto rms = [&](const torch::Tensor& x, const torch::Tensor& w) {
    return x / torch::sqrt(x.pow(2).mean(-1, true) + s.rms_norm_eps) * w;
  };
  auto cos = torch::empty({T, D}, dbl), sin = torch::empty({T, D}, dbl);
  for (std::int64_t t = 0; t < T; ++t) {
    for (std::int64_t i = 0; i < D / 2; ++i) {
      const double angle = static_cast<double>(t) * std::pow(s.rope_theta, -2.0 * static_cast<double>(i) / static_cast<double>(D));
      cos[t][i] = std::cos(angle);
      cos[t][i + D / 2] = std::cos(angle);
      sin[t][i] = std::sin(angle);
      sin[t][i + D / 2] = std::sin(angle);
    }
  }
  auto rope = [&](const torch::Tensor& x) {  // (T, D)
    auto rotated = torch::cat({-x.narrow(1, D / 2, D / 2), x.narrow(1, 0, D / 2)}, 1);
    return x * cos + rotated * sin;
  };
  auto embed = p.at("model.embed_tokens.weight");
  auto x = embed.index_select(0, torch::tensor(ids, torch::kLong));  // (T, C)
  for (int l = 0; l < s.num_hidden_layers; ++l) {
    const std::string pre = "model.layers." + std::to_string(l) + ".";
    auto h = rms(x, p.at(pre + "input_layernorm.weight"));
    auto q = h.matmul(p.at(pre + "self_attn.q_proj.weight").t());  // (T, H * D)
    auto k = h.matmul(p.at(pre + "self_attn.k_proj.weight").t());  // (T, KV * D)
    auto v = h.matmul(p.at(pre + "self_attn.v_proj.weight").t());
    std::vector<torch::Tensor> heads;
    for (std::int64_t hd = 0; hd < H; ++hd) {
      const auto kvh = hd / (H / KV);
      auto qh = rope(q.narrow(1, hd * D, D));
      auto kh = rope(k.narrow(1, kvh * D, D));
      auto vh = v.narrow(1, kvh * D, D);
      auto scores = qh.matmul(kh.t()) / std::sqrt(static_cast<double>(D));  // (T, T)
      for (std::int64_t i = 0; i < T; ++i) {
        for (std::int64_t j = i + 1; j < T; ++j) scores[i][j] = -INFINITY;
      }
      heads.push_back(torch::softmax(scores, 1).matmul(vh));
    }
    x = x + torch::cat(heads, 1).matmul(p.at(pre + "self_attn.o_proj.weight").t());
    h = rms(x, p.at(pre + "post_attention_layernorm.weight"));
    auto gate = h.matmul(p.at(pre + "mlp.gate_proj.weight").t());
    auto up = h.matmul(p.at(pre + "mlp.up_proj.weight").t());
    x = x + (gate * torch::sigmoid(gate) * up).matmul(p.at(pre + "mlp.down_proj.weight").t());
  }
  x = rms(x, p.at("model.norm.weight"));
  const auto& head = s.tie_word_embeddings ? embed : p.at("lm_head.weight");
  return x.matmul(head.t());
}

// A left-padded batch: (B, T) ids, mask and positions (0 on padding).
struct Batch {
  torch::Tensor ids, mask, pos;
};
Batch left_padded(const std::vector<std::vector<std::int64_t>>& rows, std::int64_t pad = 0) {
  std::size_t T = 0;
  for (const auto& r : rows) T = std::max(T, r.size());
  const auto B = static_cast<std::int64_t>(rows.size());
  Batch b{torch::full({B, static_cast<std::int64_t>(T)}, pad, torch::kLong),
          torch::zeros({B, static_cast<std::int64_t>(T)}, torch::kLong),
          torch::zeros({B, static_cast<std::int64_t>(T)}, torch::kLong)};
  for (std::int64_t i = 0; i < B; ++i) {
    const auto& r = rows[static_cast<std::size_t>(i)];
    const auto start = static_cast<std::int64_t>(T - r.size());
    for (std::size_t t = 0; t < r.size(); ++t) {
      b.ids[i][start + static_cast<std::int64_t>(t)] = r[t];
      b.mask[i][start + static_cast<std::int64_t>(t)] = 1;
      b.pos[i][start + static_cast<std::int64_t>(t)] = static_cast<std::int64_t>(t);
    }
  }
  return b;
}

std::vector<std::int64_t> random_tokens(std::int64_t n, std::int64_t vocab, std::uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  auto t = torch::randint(vocab, {n}, gen, torch::kLong);
  return std::vector<std::int64_t>(t.data_ptr<std::int64_t>(), t.data_ptr<std::int64_t>() + n);
}

double max_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kDouble) - b.to(torch::kDouble)).abs().max().item<double>();
}

class ModelTest : public ::testing::Test {
 protected:
  void SetUp() override { torch::set_num_threads(1); }
};

TEST_F(ModelTest, ParameterNamesFollowHuggingFaceLlama) {
  auto model = make_model(tiny_shape());
  std::vector<std::string> names;
  for (const auto& item : model->named_parameters()) names.push_back(item.key());
  std::vector<std::string> expected = {"model.embed_tokens.weight"};
  for (int l = 0; l < 2; ++l) {
    const std::string pre = "model.layers." + std::to_string(l) + ".";
    for (const char* n : {"input_layernorm.weight", "self_attn.q_proj.weight", "self_attn.k_proj.weight",
                          "self_attn.v_proj.weight", "self_attn.o_proj.weight",
                          "post_attention_layernorm.weight", "mlp.gate_proj.weight",
                          "mlp.up_proj.weight", "mlp.down_proj.weight"}) {
      expected.push_back(pre + n);
    }
  }
  expected.push_back("model.norm.weight");
  expected.push_back("lm_head.weight");
  EXPECT_EQ(names, expected);

  // GQA shapes: 4 query heads and 2 KV heads of dimension 16.
  auto p = model->named_parameters();
  EXPECT_EQ(p["model.layers.0.self_attn.q_proj.weight"].sizes(), (std::vector<std::int64_t>{64, 64}));
  EXPECT_EQ(p["model.layers.0.self_attn.k_proj.weight"].sizes(), (std::vector<std::int64_t>{32, 64}));
  EXPECT_EQ(p["model.layers.0.self_attn.v_proj.weight"].sizes(), (std::vector<std::int64_t>{32, 64}));
  EXPECT_EQ(p["model.layers.0.mlp.down_proj.weight"].sizes(), (std::vector<std::int64_t>{64, 96}));
  EXPECT_EQ(p["lm_head.weight"].sizes(), (std::vector<std::int64_t>{37, 64}));

  // C*V embed + L*(2C + C*C*2 + 2*C*C/2... written out: q 64*64, k,v 32*64, o 64*64, mlp 3*64*96)
  const std::int64_t per_layer = 64 + 64 + 64 * 64 + 2 * 32 * 64 + 64 * 64 + 3 * 64 * 96;
  EXPECT_EQ(model->num_parameters(), 37 * 64 + 2 * per_layer + 64 + 37 * 64);
  auto tied = make_model(tiny_shape(true));
  EXPECT_EQ(tied->num_parameters(), 37 * 64 + 2 * per_layer + 64);
}

TEST_F(ModelTest, InitialisationFollowsHuggingFace) {
  auto shape = tiny_shape();
  shape.initializer_range = 0.05;
  torch::manual_seed(3);
  Transformer model(shape, HeadKind::kLm);
  for (const auto& item : model->named_parameters()) {
    if (item.key().find("norm") != std::string::npos) {
      EXPECT_TRUE(torch::equal(item.value(), torch::ones_like(item.value()))) << item.key();
    } else {
      const double std = item.value().std().item<double>();
      EXPECT_NEAR(std, 0.05, 0.006) << item.key();
      EXPECT_NEAR(item.value().mean().item<double>(), 0.0, 0.006) << item.key();
    }
  }
}

TEST_F(ModelTest, ForwardMatchesIndependentReferenceInFloat64) {
  for (bool tied : {false, true}) {
    const auto shape = tiny_shape(tied);
    auto model = make_model(shape);
    model->to(torch::kDouble);
    const auto p = params_of(model);
    const std::vector<std::vector<std::int64_t>> rows = {random_tokens(9, 37, 1), random_tokens(4, 37, 2),
                                                         random_tokens(1, 37, 3)};
    auto batch = left_padded(rows, 5);
    auto logits = model->forward(batch.ids, batch.mask, batch.pos);  // (3, 9, 37)
    ASSERT_EQ(logits.sizes(), (std::vector<std::int64_t>{3, 9, 37}));
    EXPECT_FALSE(logits.isnan().any().item<bool>()) << "padding rows must stay finite";
    double worst = 0;
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const auto n = static_cast<std::int64_t>(rows[i].size());
      auto ref = reference_logits(p, shape, rows[i]);
      auto got = logits[static_cast<std::int64_t>(i)].narrow(0, 9 - n, n);
      worst = std::max(worst, max_diff(got, ref));
    }
    EXPECT_LT(worst, 1e-10) << "tied=" << tied << " worst |model - reference| = " << worst;
    EXPECT_GT(logits.abs().max().item<double>(), 0.5);  // the check is not vacuous
  }
}

TEST_F(ModelTest, ForwardIsCausalAndPaddingInvariantInFloat32) {
  auto model = make_model(tiny_shape());
  auto seq = random_tokens(12, 37, 11);
  auto alone = left_padded({seq});
  auto ref = model->forward(alone.ids, alone.mask, alone.pos)[0];  // (12, V)

  // Left padding changes nothing for the real tokens.
  auto padded = left_padded({seq, random_tokens(3, 37, 12)});
  auto logits = model->forward(padded.ids, padded.mask, padded.pos);
  EXPECT_LT(max_diff(logits[0], ref), 1e-5);
  // A row made only of padding stays finite.
  auto empty_row = left_padded({seq, {}});
  auto out = model->forward(empty_row.ids, empty_row.mask, empty_row.pos);
  EXPECT_TRUE(out.isfinite().all().item<bool>());

  // Changing token 8 leaves positions 0..7 unchanged and changes position 8 onwards.
  auto changed = seq;
  changed[8] = (changed[8] + 1) % 37;
  auto other = left_padded({changed});
  auto logits2 = model->forward(other.ids, other.mask, other.pos)[0];
  EXPECT_LT(max_diff(logits2.narrow(0, 0, 8), ref.narrow(0, 0, 8)), 1e-6);
  EXPECT_GT(max_diff(logits2.narrow(0, 8, 4), ref.narrow(0, 8, 4)), 1e-3);
}

TEST_F(ModelTest, ValueHeadReturnsOneValuePerToken) {
  auto model = make_model(tiny_shape(), HeadKind::kValue);
  auto p = model->named_parameters();
  ASSERT_TRUE(p.contains("score.weight"));
  ASSERT_TRUE(p.contains("score.bias"));
  EXPECT_FALSE(p.contains("lm_head.weight"));
  EXPECT_EQ(p["score.weight"].sizes(), (std::vector<std::int64_t>{1, 64}));
  auto batch = left_padded({random_tokens(6, 37, 4), random_tokens(2, 37, 5)});
  auto values = model->forward(batch.ids, batch.mask, batch.pos);
  EXPECT_EQ(values.sizes(), (std::vector<std::int64_t>{2, 6}));
  EXPECT_TRUE(values.isfinite().all().item<bool>());
}

TEST_F(ModelTest, TiedEmbeddingsShareOneTensor) {
  auto model = make_model(tiny_shape(true));
  auto p = model->named_parameters();
  EXPECT_FALSE(p.contains("lm_head.weight"));
  auto& embed = p["model.embed_tokens.weight"];
  std::vector<std::int64_t> seq = {1, 2, 3, 4, 5};  // token 30 never appears in the input
  auto batch = left_padded({seq});
  auto before = model->forward(batch.ids, batch.mask, batch.pos).detach();
  {
    torch::NoGradGuard no_grad;
    embed[30].add_(1.0);
  }
  auto after = model->forward(batch.ids, batch.mask, batch.pos);
  auto delta = (after.detach() - before).abs().amax({0, 1});  // (V): change per vocabulary column
  EXPECT_GT(delta[30].item<double>(), 1e-3) << "the output head must read the embedding matrix";
  delta[30] = 0;
  EXPECT_LT(delta.max().item<double>(), 1e-6) << "only token 30's logit may move";
  // One tensor collects both uses' gradients: the head's gradient reaches row 30.
  after.select(2, 30).sum().backward();
  EXPECT_GT(embed.grad()[30].abs().sum().item<double>(), 0.0);
}

TEST_F(ModelTest, GradientMatchesFiniteDifferences) {
  auto model = make_model(tiny_shape());
  model->to(torch::kDouble);
  auto batch = left_padded({random_tokens(7, 37, 8), random_tokens(5, 37, 9)});
  auto weights = torch::randn({2, 7, 37}, torch::kDouble);
  auto loss_of = [&] { return (model->forward(batch.ids, batch.mask, batch.pos) * weights).sum(); };
  loss_of().backward();
  auto p = model->named_parameters();
  for (const char* name : {"model.layers.0.self_attn.k_proj.weight", "model.layers.1.mlp.up_proj.weight",
                           "model.embed_tokens.weight", "model.layers.0.input_layernorm.weight"}) {
    auto& w = p[name];
    auto flat_grad = w.grad().reshape({-1});
    const auto index = flat_grad.abs().argmax().item<std::int64_t>();
    const double eps = 1e-6;
    double numeric;
    {
      torch::NoGradGuard no_grad;
      auto flat = w.view({-1});
      flat[index] += eps;
      const double up = loss_of().item<double>();
      flat[index] -= 2 * eps;
      const double down = loss_of().item<double>();
      flat[index] += eps;
      numeric = (up - down) / (2 * eps);
    }
    EXPECT_NEAR(flat_grad[index].item<double>(), numeric, 1e-6 * std::max(1.0, std::abs(numeric))) << name;
  }
}

// ---------------------------------------------------------------------------------------------
// Paged-cache forward

// Drives forward_cached the way a rollout does, with the allocator's copy-on-write honoured.
struct CachedDriver {
  Transformer model;
  KvBlockAllocator allocator;
  PagedKvCache cache;

  CachedDriver(Transformer m, std::int64_t num_blocks, std::int64_t block_size, torch::Dtype dtype)
      : model(std::move(m)), allocator(num_blocks, block_size),
        cache(model->shape(), num_blocks, block_size, dtype, torch::kCPU) {}

  // Appends tokens[b] to sequence seqs[b] (rows left-padded to the longest) and returns the
  // logits (B, T, V).
  torch::Tensor feed(const std::vector<KvBlockAllocator::SeqId>& seqs,
                     const std::vector<std::vector<std::int64_t>>& tokens) {
    const auto B = static_cast<std::int64_t>(seqs.size());
    std::int64_t T = 0;
    for (const auto& t : tokens) T = std::max<std::int64_t>(T, static_cast<std::int64_t>(t.size()));
    auto ids = torch::zeros({B, T}, torch::kLong), pos = torch::zeros({B, T}, torch::kLong);
    auto slots = torch::full({B, T}, -1, torch::kLong), lens = torch::zeros({B}, torch::kLong);
    std::int64_t max_blocks = 1;
    for (std::int64_t b = 0; b < B; ++b) {
      const auto& row = tokens[static_cast<std::size_t>(b)];
      const auto n = static_cast<std::int64_t>(row.size());
      for (std::int64_t t = 0; t < n; ++t) {
        const auto seq = seqs[static_cast<std::size_t>(b)];
        const auto slot = allocator.append_token(seq);
        if (slot.copy_from >= 0) cache.copy_block(slot.copy_from, slot.copy_to);
        ids[b][T - n + t] = row[static_cast<std::size_t>(t)];
        pos[b][T - n + t] = allocator.length(seq) - 1;
        slots[b][T - n + t] = slot.index;
      }
      lens[b] = allocator.length(seqs[static_cast<std::size_t>(b)]);
      max_blocks = std::max<std::int64_t>(max_blocks, static_cast<std::int64_t>(allocator.block_table(seqs[static_cast<std::size_t>(b)]).size()));
    }
    auto tables = torch::zeros({B, max_blocks}, torch::kLong);
    for (std::int64_t b = 0; b < B; ++b) {
      const auto& blocks = allocator.block_table(seqs[static_cast<std::size_t>(b)]);
      for (std::size_t i = 0; i < blocks.size(); ++i) tables[b][static_cast<std::int64_t>(i)] = blocks[i];
    }
    KvCacheView view{&cache, slots, tables, lens};
    return model->forward_cached(ids, pos, view);
  }
};

void check_incremental_matches_full(torch::Dtype dtype, double tolerance, const ModelShape& shape = tiny_shape()) {
  torch::NoGradGuard no_grad;
  auto model = make_model(shape);
  if (shape.qkv_bias()) {  // Qwen2's biases start at zero: make them matter
    torch::NoGradGuard g;
    for (auto& item : model->named_parameters())
      if (item.key().find(".bias") != std::string::npos) item.value().normal_(0.0, 0.5);
  }
  model->to(dtype);
  // Three sequences of 15 tokens; prompts of 7, 2 and 11 tokens; block size 4 so each sequence
  // spans 4 blocks.
  const std::vector<std::int64_t> prompt_len = {7, 2, 11};
  std::vector<std::vector<std::int64_t>> full;
  std::vector<torch::Tensor> ref;
  for (std::uint64_t i = 0; i < 3; ++i) {
    full.push_back(random_tokens(15, 37, 100 + i));
    auto b = left_padded({full.back()});
    ref.push_back(model->forward(b.ids, b.mask, b.pos)[0]);  // (15, V)
  }
  CachedDriver driver(model, 16, 4, dtype);
  std::vector<KvBlockAllocator::SeqId> seqs;
  for (int i = 0; i < 3; ++i) seqs.push_back(driver.allocator.add_sequence());
  std::vector<std::int64_t> done(3, 0);
  double worst = 0;
  // Prefill (left-padded), then chunks of 1 or 2 tokens (2-token steps exercise causality among
  // the new tokens), rows finishing at different times.
  std::vector<std::int64_t> chunk = {0, 1, 2, 1, 1, 2, 1, 1, 1, 2, 1, 1, 1, 1};
  for (std::size_t step = 0; step < chunk.size(); ++step) {
    std::vector<KvBlockAllocator::SeqId> rows_seq;
    std::vector<std::vector<std::int64_t>> rows_tok;
    std::vector<int> which;
    for (int i = 0; i < 3; ++i) {
      const auto n = step == 0 ? prompt_len[static_cast<std::size_t>(i)]
                               : std::min<std::int64_t>(chunk[step], 15 - done[static_cast<std::size_t>(i)]);
      if (n <= 0) continue;
      const auto begin = full[static_cast<std::size_t>(i)].begin() + done[static_cast<std::size_t>(i)];
      rows_seq.push_back(seqs[static_cast<std::size_t>(i)]);
      rows_tok.emplace_back(begin, begin + n);
      which.push_back(i);
    }
    if (rows_seq.empty()) break;
    auto logits = driver.feed(rows_seq, rows_tok);
    ASSERT_TRUE(logits.isfinite().all().item<bool>());
    const auto T = logits.size(1);
    for (std::size_t r = 0; r < which.size(); ++r) {
      const auto i = static_cast<std::size_t>(which[r]);
      const auto n = static_cast<std::int64_t>(rows_tok[r].size());
      auto got = logits[static_cast<std::int64_t>(r)].narrow(0, T - n, n);
      worst = std::max(worst, max_diff(got, ref[i].narrow(0, done[i], n)));
      done[i] += n;
    }
  }
  EXPECT_EQ(done, (std::vector<std::int64_t>{15, 15, 15}));
  EXPECT_EQ(driver.allocator.stats().blocks_used, 12);
  double scale = 0;
  for (const auto& r : ref) scale = std::max(scale, r.abs().max().item<double>());
  // Relative to the logits' scale: float32 rounds differently in the (B, 1) and (1, T) shaped
  // kernels, a few ulps per layer.
  EXPECT_LT(worst / std::max(1.0, scale), tolerance)
      << "worst |cached - full| = " << worst << " for logits up to " << scale;
}

TEST_F(ModelTest, IncrementalDecodingMatchesFullForwardFloat32) {
  check_incremental_matches_full(torch::kFloat, 5e-6);
}

TEST_F(ModelTest, IncrementalDecodingMatchesFullForwardFloat64) {
  check_incremental_matches_full(torch::kDouble, 1e-12);
}

// enable_gradient_checkpointing: the layers recomputed in the backward give the same loss and
// gradients (float64: to rounding; under bf16 autocast, where the recomputation repeats the same
// bf16 kernels: exactly), and no layer activation is kept alive by the graph.
TEST_F(ModelTest, GradientCheckpointingGivesTheSameGradients) {
  for (const auto arch : {ModelArchitecture::kLlama, ModelArchitecture::kQwen3}) {
    ModelShape shape = tiny_shape();
    shape.architecture = arch;
    for (const bool bf16 : {false, true}) {
      SCOPED_TRACE(std::string(to_string(arch)) + (bf16 ? " bf16" : " float64"));
      auto batch = left_padded({random_tokens(9, 37, 51), random_tokens(5, 37, 52)});
      std::vector<std::map<std::string, torch::Tensor>> grads;
      std::vector<double> losses;
      for (const bool checkpoint : {false, true}) {
        auto model = make_model(shape);
        if (!bf16) model->to(torch::kDouble);
        model->set_compute(compute_options(bf16 ? Precision::kBf16 : Precision::kFp32, AttentionKernel::kEager));
        model->set_gradient_checkpointing(checkpoint);
        EXPECT_EQ(model->gradient_checkpointing(), checkpoint);
        auto logits = model->forward(batch.ids, batch.mask, batch.pos);
        auto loss = torch::log_softmax(logits, -1).select(-1, 3).mul(batch.mask).sum();
        loss.backward();
        losses.push_back(loss.item<double>());
        std::map<std::string, torch::Tensor> g;
        for (const auto& item : model->named_parameters()) {
          ASSERT_TRUE(item.value().grad().defined()) << item.key();
          g[item.key()] = item.value().grad().to(torch::kDouble);
        }
        grads.push_back(g);
      }
      EXPECT_EQ(losses[0], losses[1]);
      double worst = 0;
      for (const auto& [name, g] : grads[0]) worst = std::max(worst, max_diff(g, grads[1].at(name)));
      EXPECT_LE(worst, bf16 ? 0.0 : 1e-12);
    }
  }
}

// The paged KV cache holds Qwen2's biased K/V and Qwen3's normalised, head_dim-wide K/V (head_dim
// 32 with hidden 64 and 4 heads, not 16).
TEST_F(ModelTest, IncrementalDecodingMatchesFullForwardForQwen2AndQwen3) {
  for (const auto arch : {ModelArchitecture::kQwen2, ModelArchitecture::kQwen3}) {
    SCOPED_TRACE(to_string(arch));
    ModelShape shape = tiny_shape();
    shape.architecture = arch;
    if (arch == ModelArchitecture::kQwen3) shape.explicit_head_dim = 32;
    check_incremental_matches_full(torch::kDouble, 1e-12, shape);
  }
}

TEST_F(ModelTest, ForkedSequencesShareThePromptAndMatchFullForward) {
  torch::NoGradGuard no_grad;
  auto model = make_model(tiny_shape());
  const auto prompt = random_tokens(6, 37, 21);  // blocks of 4: one full, one with 2 tokens
  CachedDriver driver(model, 20, 4, torch::kFloat);
  const auto parent = driver.allocator.add_sequence();
  driver.feed({parent}, {prompt});
  std::vector<KvBlockAllocator::SeqId> seqs = {parent};
  for (int j = 0; j < 3; ++j) seqs.push_back(driver.allocator.fork(parent));
  EXPECT_EQ(driver.allocator.stats().shared_blocks, 2);
  EXPECT_EQ(driver.allocator.stats().blocks_used, 2);

  std::vector<std::vector<std::int64_t>> full(4, prompt);
  double worst = 0;
  for (int step = 0; step < 7; ++step) {
    std::vector<std::vector<std::int64_t>> tok;
    for (std::uint64_t j = 0; j < 4; ++j) {
      tok.push_back({random_tokens(1, 37, 1000 + static_cast<std::uint64_t>(step) * 4 + j)[0]});
      full[j].push_back(tok.back()[0]);
    }
    auto logits = driver.feed(seqs, tok);  // (4, 1, V)
    if (step == 0) {
      // 3 of the 4 sharers copied the partial block; the last wrote into it in place.
      EXPECT_EQ(driver.allocator.stats().blocks_used, 5);
      EXPECT_EQ(driver.allocator.stats().shared_blocks, 1);
    }
    for (std::size_t j = 0; j < 4; ++j) {
      auto b = left_padded({full[j]});
      auto ref = model->forward(b.ids, b.mask, b.pos)[0];
      worst = std::max(worst, max_diff(logits[static_cast<std::int64_t>(j)][0], ref[ref.size(0) - 1]));
    }
  }
  EXPECT_LT(worst, 1e-5) << "worst |cached - full| = " << worst;
}

// ---------------------------------------------------------------------------------------------
// Tensor parallelism with in-process ranks

fs::path temp_dir(const std::string& tag) {
  auto dir = fs::temp_directory_path() / ("hs_model_test_" + tag + "_" + std::to_string(::getpid()));
  hs::test::remove_tree(dir);
  fs::create_directories(dir);
  return dir;
}

TEST_F(ModelTest, TensorParallelTwoRanksEqualsOneRank) {
  auto shape = tiny_shape();
  shape.vocab_size = 38;  // the LM head is split over the vocabulary
  auto full = make_model(shape);
  const auto dir = temp_dir("tp");
  save_pretrained(full, (dir / "full").string());
  // Compared in float64 (the float32 values widen exactly), so any split error stands out from
  // rounding.
  full->to(torch::kDouble);

  auto batch = left_padded({random_tokens(8, 38, 31), random_tokens(5, 38, 32)});
  auto weights = torch::randn({2, 8, 38}, torch::kDouble);
  auto ref_logits = full->forward(batch.ids, batch.mask, batch.pos);
  (ref_logits * weights).sum().backward();
  std::map<std::string, torch::Tensor> ref_grad;
  for (const auto& item : full->named_parameters()) ref_grad[item.key()] = item.value().grad();

  GenerationRequest request;
  request.prompts = {{1, 5, 9, 3}, {2, 2, 7}, {4, 8, 15, 16, 23, 6}};
  request.params.do_sample = false;
  request.params.n = 2;
  request.max_response_length = 6;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(1);
  std::vector<std::vector<std::int32_t>> ref_responses;
  {
    RolloutEngine engine(full, /*eos=*/-1, /*pad=*/0, 4, -1, 8, 16);
    ref_responses = engine.generate(request, gen).responses;
  }

  auto tp_group = std::make_shared<ThreadGroup>(2);
  auto world_group = std::make_shared<ThreadGroup>(2);
  std::vector<double> logit_diff(2, 1.0), grad_diff(2, 1.0);
  std::vector<std::vector<std::vector<std::int32_t>>> responses(2);
  std::vector<std::int64_t> num_params(2);
  std::vector<std::exception_ptr> errors(2);
  auto rank_main = [&](int rank) {
    try {
      torch::set_num_threads(1);
      ParallelContext ctx;
      ctx.tp = std::make_shared<ThreadCommunicator>(rank, tp_group, "tp");
      ctx.world = std::make_shared<ThreadCommunicator>(rank, world_group, "world");
      auto model = load_pretrained((dir / "full").string(), HeadKind::kLm, ctx);
      model->to(torch::kDouble);
      num_params[static_cast<std::size_t>(rank)] = model->num_parameters();
      auto logits = model->forward(batch.ids, batch.mask, batch.pos);
      logit_diff[static_cast<std::size_t>(rank)] = max_diff(logits, ref_logits);
      (logits * weights).sum().backward();
      const auto dims = std::map<std::string, int>{
          {"q_proj.weight", 0}, {"k_proj.weight", 0}, {"v_proj.weight", 0}, {"gate_proj.weight", 0},
          {"up_proj.weight", 0}, {"lm_head.weight", 0}, {"o_proj.weight", 1}, {"down_proj.weight", 1}};
      double worst = 0;
      for (const auto& item : model->named_parameters()) {
        auto expected = ref_grad.at(item.key());
        for (const auto& [suffix, dim] : dims) {
          const auto& key = item.key();
          if (key.size() >= suffix.size() && key.compare(key.size() - suffix.size(), suffix.size(), suffix) == 0) {
            expected = expected.chunk(2, dim)[static_cast<std::size_t>(rank)];
          }
        }
        worst = std::max(worst, max_diff(item.value().grad(), expected));
      }
      grad_diff[static_cast<std::size_t>(rank)] = worst;
      RolloutEngine engine(model, -1, 0, 4, -1, 8, 16);
      auto g = at::make_generator<at::CPUGeneratorImpl>(1);
      responses[static_cast<std::size_t>(rank)] = engine.generate(request, g).responses;
      save_pretrained(model, (dir / "gathered").string());
    } catch (...) {
      errors[static_cast<std::size_t>(rank)] = std::current_exception();
    }
  };
  std::thread r0(rank_main, 0), r1(rank_main, 1);
  r0.join();
  r1.join();
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  for (int r = 0; r < 2; ++r) {
    EXPECT_LT(logit_diff[static_cast<std::size_t>(r)], 1e-12) << "rank " << r;
    EXPECT_LT(grad_diff[static_cast<std::size_t>(r)], 1e-11) << "rank " << r;
    EXPECT_EQ(responses[static_cast<std::size_t>(r)], ref_responses) << "rank " << r;
    EXPECT_EQ(num_params[static_cast<std::size_t>(r)], full->num_parameters());
  }
  // Saving from the two ranks reassembles the original tensors exactly.
  auto original = load_safetensors((dir / "full" / "model.safetensors").string());
  auto gathered = load_safetensors((dir / "gathered" / "model.safetensors").string());
  ASSERT_EQ(original.size(), gathered.size());
  for (std::size_t i = 0; i < original.size(); ++i) {
    EXPECT_EQ(original[i].first, gathered[i].first);
    EXPECT_TRUE(torch::equal(original[i].second.to(torch::kDouble), gathered[i].second)) << original[i].first;
  }
  hs::test::remove_tree(dir);
}

// ---------------------------------------------------------------------------------------------
// safetensors and HF directories

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

bool same_bytes(const torch::Tensor& a, const torch::Tensor& b) {
  if (a.scalar_type() != b.scalar_type() || a.sizes() != b.sizes()) return false;
  auto ca = a.contiguous(), cb = b.contiguous();
  return std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.nbytes()) == 0;
}

TEST_F(ModelTest, SafetensorsRoundTripIsBitExactForEveryDtype) {
  const auto dir = temp_dir("st");
  auto f32 = torch::randn({3, 5});
  f32[0][0] = NAN;
  f32[0][1] = INFINITY;
  f32[0][2] = -0.0f;
  f32[0][3] = 1e-45f;  // denormal
  std::vector<std::pair<std::string, torch::Tensor>> tensors = {
      {"f32", f32},
      {"f64", torch::randn({4}, torch::kDouble) * 1e300},
      {"bf16", torch::randn({2, 3, 2}).to(torch::kBFloat16)},
      {"f16", torch::randn({7}).to(torch::kHalf)},
      {"i64", torch::tensor({std::numeric_limits<std::int64_t>::min(), std::int64_t{-1}, std::numeric_limits<std::int64_t>::max()})},
      {"i32", torch::tensor({std::numeric_limits<std::int32_t>::min(), 0, 123456789}, torch::kInt)},
      {"u8", torch::tensor({0, 255, 7}, torch::kByte)},
      {"bool", torch::tensor({true, false, true})},
      {"scalar", torch::tensor(2.5f)},
      {"empty", torch::zeros({0, 3})},
      {"strided", torch::arange(12, torch::kFloat).view({3, 4}).t()},  // non-contiguous input
  };
  const auto path = dir / "t.safetensors";
  save_safetensors(path.string(), tensors, {{"format", "pt"}, {"note", "x"}});
  auto loaded = load_safetensors(path.string());
  ASSERT_EQ(loaded.size(), tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    EXPECT_EQ(loaded[i].first, tensors[i].first);
    EXPECT_TRUE(same_bytes(loaded[i].second, tensors[i].second.contiguous())) << tensors[i].first;
  }

  // The raw layout: 8-byte little-endian N, N bytes of JSON (padded to 8), then the data.
  const auto raw = read_bytes(path);
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(raw[static_cast<std::size_t>(i)]);
  EXPECT_EQ(n % 8, 0u);
  const auto header = nlohmann::json::parse(raw.substr(8, n));
  EXPECT_EQ(header["__metadata__"], (nlohmann::json{{"format", "pt"}, {"note", "x"}}));
  const std::map<std::string, std::string> dtype = {{"f32", "F32"}, {"f64", "F64"}, {"bf16", "BF16"},
      {"f16", "F16"}, {"i64", "I64"}, {"i32", "I32"}, {"u8", "U8"}, {"bool", "BOOL"},
      {"scalar", "F32"}, {"empty", "F32"}, {"strided", "F32"}};
  std::uint64_t total = 0;
  for (const auto& [name, t] : tensors) {
    const auto& entry = header.at(name);
    EXPECT_EQ(entry["dtype"], dtype.at(name)) << name;
    EXPECT_EQ(entry["shape"].get<std::vector<std::int64_t>>(), t.sizes().vec()) << name;
    const auto begin = entry["data_offsets"][0].get<std::uint64_t>();
    const auto end = entry["data_offsets"][1].get<std::uint64_t>();
    ASSERT_EQ(end - begin, t.nbytes()) << name;
    auto c = t.contiguous();
    EXPECT_EQ(raw.compare(8 + n + begin, end - begin, static_cast<const char*>(c.data_ptr()), c.nbytes()), 0) << name;
    total += end - begin;
  }
  EXPECT_EQ(raw.size(), 8 + n + total);
  hs::test::remove_tree(dir);
}

TEST_F(ModelTest, SafetensorsRejectsDamagedFiles) {
  const auto dir = temp_dir("bad");
  const auto path = dir / "t.safetensors";
  save_safetensors(path.string(), {{"a", torch::randn({4, 4})}});
  const auto raw = read_bytes(path);
  auto write = [&](const std::string& bytes) {
    std::ofstream(dir / "bad.safetensors", std::ios::binary) << bytes;
    return (dir / "bad.safetensors").string();
  };
  EXPECT_THROW(load_safetensors(write(raw.substr(0, raw.size() - 4))), std::runtime_error);  // truncated
  EXPECT_THROW(load_safetensors(write(raw + "xxxx")), std::runtime_error);                   // trailing bytes
  std::string huge = raw;
  huge[5] = '\x7f';  // header length far beyond the file
  EXPECT_THROW(load_safetensors(write(huge)), std::runtime_error);
  std::string not_json = raw;
  not_json[8] = '[';
  EXPECT_THROW(load_safetensors(write(not_json)), std::runtime_error);
  EXPECT_THROW(load_safetensors((dir / "missing.safetensors").string()), std::runtime_error);
  EXPECT_THROW(save_safetensors(path.string(), {{"a", torch::zeros({1})}, {"a", torch::zeros({1})}}),
               std::runtime_error);
  // A shape whose byte count wraps 64 bits (2^31 x 2^31 x 2^2 F32 = 2^64 + 16 bytes -> 16) used to
  // match 16-byte offsets and describe a tensor far larger than the file.
  // And (found by fuzz_safetensors_header) an offset or dimension that is not an integer: nlohmann
  // converted 5.6e29 to uint64_t unchecked, undefined behaviour.
  for (const auto& [header, want] : std::vector<std::pair<std::string, std::string>>{
           {R"({"a":{"dtype":"F32","shape":[2147483648,2147483648,4],"data_offsets":[0,16]}})",
            "tensor 'a': its shape holds more bytes than 64 bits count"},
           {R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,5.6e29]}})",
            "tensor 'a': data_offsets must be [begin, end], two non-negative integers"},
           {R"({"a":{"dtype":"F32","shape":[4.0],"data_offsets":[0,16]}})",
            "tensor 'a': shape must be an array of integers"}}) {
    std::string bytes(8, '\0');
    bytes[0] = static_cast<char>(header.size());
    bytes += header + std::string(16, '\0');
    try {
      load_safetensors(write(bytes));
      ADD_FAILURE() << header << " was accepted";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  }
  hs::test::remove_tree(dir);
}

TEST_F(ModelTest, SavePretrainedAndLoadPretrainedGiveIdenticalLogits) {
  const auto dir = temp_dir("pretrained");
  auto batch = left_padded({random_tokens(6, 37, 41), random_tokens(3, 37, 42)});
  int variant = 0;
  for (auto [tied, head] : {std::pair{false, HeadKind::kLm}, std::pair{true, HeadKind::kLm},
                            std::pair{false, HeadKind::kValue}}) {
    const auto path = (dir / std::to_string(variant++)).string();
    auto model = make_model(tiny_shape(tied), head);
    save_pretrained(model, path);
    auto loaded = load_pretrained(path, head);
    EXPECT_TRUE(torch::equal(model->forward(batch.ids, batch.mask, batch.pos),
                             loaded->forward(batch.ids, batch.mask, batch.pos)));
    auto a = model->named_parameters();
    auto b = loaded->named_parameters();
    ASSERT_EQ(a.keys(), b.keys());
    for (const auto& key : a.keys()) EXPECT_TRUE(same_bytes(a[key], b[key])) << key;

    const auto config = nlohmann::json::parse(read_bytes(fs::path(path) / "config.json"));
    EXPECT_EQ(config["model_type"], "llama");
    EXPECT_EQ(config["architectures"][0], head == HeadKind::kLm ? "LlamaForCausalLM" : "LlamaForTokenClassification");
    EXPECT_EQ(config["vocab_size"], 37);
    EXPECT_EQ(config["hidden_size"], 64);
    EXPECT_EQ(config["intermediate_size"], 96);
    EXPECT_EQ(config["num_hidden_layers"], 2);
    EXPECT_EQ(config["num_attention_heads"], 4);
    EXPECT_EQ(config["num_key_value_heads"], 2);
    EXPECT_EQ(config["max_position_embeddings"], 64);
    EXPECT_DOUBLE_EQ(config["rope_theta"].get<double>(), 500.0);
    EXPECT_DOUBLE_EQ(config["rms_norm_eps"].get<double>(), 1e-6);
    EXPECT_EQ(config["tie_word_embeddings"], tied);
    EXPECT_EQ(config["torch_dtype"], "float32");
    // HF convention: a tied checkpoint does not store lm_head.weight.
    bool has_head = false;
    for (const auto& [name, t] : load_safetensors((fs::path(path) / "model.safetensors").string())) {
      has_head = has_head || name == "lm_head.weight";
    }
    EXPECT_EQ(has_head, head == HeadKind::kLm && !tied);
  }
  // A critic initialised from an actor checkpoint: same backbone, fresh score head.
  auto actor = load_pretrained((dir / "0").string(), HeadKind::kLm);
  auto critic = load_pretrained((dir / "0").string(), HeadKind::kValue);
  EXPECT_TRUE(torch::equal(actor->named_parameters()["model.layers.1.mlp.down_proj.weight"],
                           critic->named_parameters()["model.layers.1.mlp.down_proj.weight"]));
  // A tensor missing from the checkpoint is named in the error.
  auto tensors = load_safetensors((dir / "0" / "model.safetensors").string());
  const auto missing = tensors.at(3).first;
  EXPECT_EQ(missing, "model.layers.0.self_attn.k_proj.weight");
  tensors.erase(tensors.begin() + 3);
  save_safetensors((dir / "0" / "model.safetensors").string(), tensors);
  try {
    load_pretrained((dir / "0").string(), HeadKind::kLm);
    ADD_FAILURE() << "a checkpoint with a missing tensor loaded";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(missing), std::string::npos) << e.what();
  }
  hs::test::remove_tree(dir);
}

}  // namespace
// hybridscope.attention = flash is FlashAttention-2's CUDA kernel: a packed forward of CPU tensors
// is refused by name (validate() refuses the key on trainer.device = cpu before any forward), and
// a padded forward with it takes auto's kernel (eager on the CPU): the same logits as auto.
TEST(FlashAttention, APackedCpuForwardNamesTheKernelAndAPaddedOneIsAuto) {
  auto model = make_model(tiny_shape());
  const auto ids = torch::randint(0, 37, {2, 6}, torch::kLong);
  const auto mask = torch::ones({2, 6}, torch::kLong);
  const auto pos = torch::arange(6, torch::kLong).repeat({2, 1});
  const auto expected = model->forward(ids, mask, pos);
  ComputeOptions flash;
  flash.attention = AttentionKernel::kFlash;
  model->set_compute(flash);
  EXPECT_TRUE(torch::equal(model->forward(ids, mask, pos), expected));
  flash.remove_padding = true;
  model->set_compute(flash);
  try {
    model->forward(ids, mask, pos);
    FAIL() << "expected the packed forward to refuse CPU tensors";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("FlashAttention-2 is a CUDA kernel"), std::string::npos) << e.what();
  }
}

}  // namespace hs::trainer
