// remove_padding_test.cpp — use_remove_padding (ComputeOptions.remove_padding): the packed forward
// (the real tokens as one sequence, attention within each row) equals the padded forward at every
// real token, for the LM and the value head and every architecture, and so does every gradient —
// with and without gradient checkpointing, in float64 (to rounding) and under bf16 autocast (within
// precision_test's bf16 tolerances), on one rank and split over tp 2 (ranks as threads, as
// pipeline_test's stages). The padding positions of a packed output are exactly zero.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "hybridscope/trainer/dist/mesh_groups.h"
#include "hybridscope/trainer/model/training_shard.h"
#include "hybridscope/trainer/dist/thread_world.h"
#include "hybridscope/trainer/dist/layout.h"
#include "hybridscope/trainer/model/model.h"

namespace hs::trainer {
namespace {

ModelShape tiny_shape(ModelArchitecture arch) {
  ModelShape s;
  s.architecture = arch;
  s.vocab_size = 38;  // even: the LM head splits over tp 2
  s.hidden_size = 64;
  s.intermediate_size = 96;
  s.num_hidden_layers = 2;
  s.num_attention_heads = 4;
  s.num_key_value_heads = 2;  // GQA, one KV head per rank at tp 2
  s.max_position_embeddings = 64;
  s.rope_theta = 500.0;
  s.initializer_range = 0.2;  // O(1) logits, so tolerances are meaningful
  return s;
}

Transformer make_model(const ModelShape& shape, HeadKind head) {
  torch::manual_seed(11);
  Transformer model(shape, head);
  torch::NoGradGuard no_grad;
  for (auto& item : model->named_parameters()) {
    if (item.key().find("norm") != std::string::npos) item.value().uniform_(0.5, 1.5);
    if (item.key().find("bias") != std::string::npos) item.value().normal_(0.0, 0.2);
  }
  return model;
}

// Rows as the rollout lays them out: a left-padded prompt then a right-padded response. Real
// lengths 16, 1 (a single token), 4 and 10 of T = 17, five times over: very different, one of
// length 1, and 155 tokens in all, so the packed attention runs in two chunks
// (kAttentionChunkTokens 128) with a sequence in each.
struct Padded {
  torch::Tensor ids, mask, pos;  // (B, T) each
};
Padded ragged_rows(std::int64_t vocab) {
  std::vector<std::pair<int, int>> rows;  // (prompt, response)
  for (int i = 0; i < 5; ++i) rows.insert(rows.end(), {{5, 11}, {1, 0}, {3, 1}, {6, 4}});
  const std::int64_t P = 6, T = 17, B = static_cast<std::int64_t>(rows.size());
  auto gen = at::detail::createCPUGenerator(5);
  Padded b{torch::randint(1, vocab, {B, T}, gen, torch::kLong), torch::zeros({B, T}, torch::kLong), {}};
  for (std::int64_t i = 0; i < B; ++i) {
    const auto [prompt, response] = rows[static_cast<std::size_t>(i)];
    b.mask[i].slice(0, P - prompt, P + response).fill_(1);
  }
  b.ids.mul_(b.mask);  // padding holds the pad id 0
  b.pos = (b.mask.cumsum(1) - 1).clamp_min(0);
  return b;
}

double max_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kDouble) - b.to(torch::kDouble)).abs().max().item<double>();
}

double cosine(const torch::Tensor& a, const torch::Tensor& b) {
  const auto x = a.to(torch::kDouble).flatten(), y = b.to(torch::kDouble).flatten();
  return (x.dot(y) / (x.norm() * y.norm() + 1e-300)).item<double>();
}

// Output and parameter gradients of one forward + weighted backward.
struct Pass {
  torch::Tensor out;                            // (B, T, V) or (B, T)
  std::map<std::string, torch::Tensor> grads;  // by parameter name
};
Pass run(Transformer& model, const Padded& in, const torch::Tensor& weights) {
  Pass r;
  r.out = model->forward(in.ids, in.mask, in.pos);
  auto real = in.mask.to(r.out.scalar_type());
  if (r.out.dim() == 3) real = real.unsqueeze(-1);
  (r.out * weights * real).sum().backward();
  for (const auto& item : model->named_parameters()) {
    EXPECT_TRUE(item.value().grad().defined()) << item.key();
    r.grads[item.key()] = item.value().grad().to(torch::kDouble);
  }
  r.out = r.out.detach();
  return r;
}

ComputeOptions compute(bool bf16, bool packed) {
  auto options = compute_options(bf16 ? Precision::kBf16 : Precision::kFp32, AttentionKernel::kEager);
  options.remove_padding = packed;
  return options;
}

TEST(RemovePadding, PackedForwardAndEveryGradientEqualThePaddedOnes) {
  torch::set_num_threads(1);
  for (const auto arch : {ModelArchitecture::kLlama, ModelArchitecture::kQwen2, ModelArchitecture::kQwen3}) {
    for (const auto head : {HeadKind::kLm, HeadKind::kValue}) {
      for (const bool bf16 : {false, true}) {
        for (const bool checkpoint : {false, true}) {
          SCOPED_TRACE(std::string(to_string(arch)) + (head == HeadKind::kLm ? " lm" : " value") +
                       (bf16 ? " bf16" : " float64") + (checkpoint ? " checkpointed" : ""));
          const auto shape = tiny_shape(arch);
          const auto in = ragged_rows(shape.vocab_size);
          std::vector<std::int64_t> out_shape{in.ids.size(0), in.ids.size(1)};
          if (head == HeadKind::kLm) out_shape.push_back(shape.vocab_size);
          const auto weights = torch::randn(out_shape, torch::kDouble);
          std::vector<Pass> runs;
          for (const bool packed : {false, true}) {
            auto model = make_model(shape, head);
            if (!bf16) model->to(torch::kDouble);
            model->set_compute(compute(bf16, packed));
            model->set_gradient_checkpointing(checkpoint);
            runs.push_back(run(model, in, weights));
          }
          const auto& padded = runs[0];
          const auto& packed = runs[1];
          auto real = in.mask.to(torch::kBool);
          if (padded.out.dim() == 3) real = real.unsqueeze(-1).expand_as(padded.out);
          const auto want = padded.out.masked_select(real), got = packed.out.masked_select(real);
          EXPECT_EQ(packed.out.masked_select(real.logical_not()).abs().max().item<double>(), 0.0)
              << "padding positions of a packed output are zero";
          const double scale = want.abs().max().item<double>();
          double worst_grad = 0, worst_cosine = 1;
          for (const auto& [name, g] : padded.grads) {
            worst_grad = std::max(worst_grad, max_diff(g, packed.grads.at(name)) / (g.abs().max().item<double>() + 1e-30));
            worst_cosine = std::min(worst_cosine, cosine(g, packed.grads.at(name)));
          }
          if (bf16) {
            // precision_test's bf16 tolerances: logits within 3e-2 of their scale, gradients by direction.
            EXPECT_LT(max_diff(got, want) / scale, 3e-2);
            EXPECT_GT(worst_cosine, 0.99);
          } else {
            EXPECT_LT(max_diff(got, want), 1e-12 * scale) << "worst |packed - padded| output";
            EXPECT_LT(worst_grad, 1e-10) << "worst relative |packed - padded| gradient";
          }
        }
      }
    }
  }
}

// Packed on tp 2 (heads, MLP and vocabulary split; the packed sequence is not) against the whole
// padded model: outputs and each rank's slice of every gradient, float64.
TEST(RemovePadding, PackedTensorParallelTwoRanksEqualsThePaddedWholeModel) {
  torch::set_num_threads(1);
  for (const auto head : {HeadKind::kLm, HeadKind::kValue}) {
    SCOPED_TRACE(head == HeadKind::kLm ? "lm" : "value");
    const auto shape = tiny_shape(ModelArchitecture::kQwen2);  // q/k/v biases split with their rows
    auto full = make_model(shape, head);
    full->to(torch::kDouble);
    const auto in = ragged_rows(shape.vocab_size);
    std::vector<std::int64_t> out_shape{in.ids.size(0), in.ids.size(1)};
    if (head == HeadKind::kLm) out_shape.push_back(shape.vocab_size);
    const auto weights = torch::randn(out_shape, torch::kDouble);
    full->set_compute(compute(false, false));
    const Pass want = run(full, in, weights);

    const MeshShape mesh{1, 2, 1};
    const auto full_params = full->named_parameters();
    // This rank's slice of a whole tensor: halved along the dimension where the shapes differ.
    auto slice_of = [](torch::Tensor whole, at::IntArrayRef local, int rank) {
      for (std::int64_t d = 0; d < whole.dim(); ++d)
        if (whole.size(d) != local[d]) whole = whole.chunk(2, d)[rank];
      return whole;
    };
    std::mutex mu;
    std::map<int, double> out_diff, grad_diff;
    run_thread_ranks(2, [&](int rank, GroupFactory& groups) {
      Transformer shard(shape, head, make_training_context(groups, mesh, rank));
      shard->to(torch::kDouble);
      {
        torch::NoGradGuard no_grad;
        for (auto& item : shard->named_parameters())
          item.value().copy_(slice_of(full_params[item.key()], item.value().sizes(), rank));
      }
      shard->set_compute(compute(false, true));
      const Pass got = run(shard, in, weights);
      double worst = 0;
      for (const auto& item : shard->named_parameters()) {
        const auto expected = slice_of(want.grads.at(item.key()), item.value().sizes(), rank);
        worst = std::max(worst, max_diff(got.grads.at(item.key()), expected));
      }
      auto real = in.mask.to(torch::kBool);
      if (got.out.dim() == 3) real = real.unsqueeze(-1).expand_as(got.out);
      std::lock_guard lock(mu);
      out_diff[rank] = max_diff(got.out.masked_select(real), want.out.masked_select(real));
      grad_diff[rank] = worst;
    });
    for (int r = 0; r < 2; ++r) {
      EXPECT_LT(out_diff[r], 1e-12) << "rank " << r;
      EXPECT_LT(grad_diff[r], 1e-11) << "rank " << r;
    }
  }
}

TEST(RemovePadding, ARowWithoutRealTokensIsSkippedAndAnEmptyBatchRefused) {
  const auto shape = tiny_shape(ModelArchitecture::kLlama);
  auto model = make_model(shape, HeadKind::kLm);
  model->to(torch::kDouble);
  auto in = ragged_rows(shape.vocab_size);
  in.mask[1].zero_();  // no real token in row 1
  torch::NoGradGuard no_grad;
  model->set_compute(compute(false, false));
  const auto padded = model->forward(in.ids, in.mask, in.pos);
  model->set_compute(compute(false, true));
  const auto packed = model->forward(in.ids, in.mask, in.pos);
  const auto real = in.mask.to(torch::kBool).unsqueeze(-1).expand_as(padded);
  EXPECT_LT(max_diff(packed.masked_select(real), padded.masked_select(real)), 1e-12);
  EXPECT_EQ(packed[1].abs().max().item<double>(), 0.0);
  try {
    model->forward(in.ids, torch::zeros_like(in.mask), in.pos);
    FAIL() << "a batch without real tokens was packed";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("use_remove_padding"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace hs::trainer
