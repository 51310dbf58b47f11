// hf_parity.cpp — hybridscope's decoder against HuggingFace transformers (issue 20).
//
// make_references.py (the CTest fixture hf_references) wrote Llama 3 / Qwen2 / Qwen3 checkpoints
// with transformers, in float32 (5.x and 4.x config layouts), bf16 (sharded), f16 and float64, with the
// logits transformers computes. Here each loads into hybridscope — whole, tensor-parallel over two
// in-process ranks, and as two pipeline stages — and must give the same logits. Then hybridscope
// saves each model for check_saved.py (fixture hf_saved), which loads it back into transformers.
#include <torch/torch.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "hybridscope/trainer/dist/thread_world.h"
#include "hybridscope/trainer/model/model.h"

namespace hs::trainer {
namespace {

namespace fs = std::filesystem;

const fs::path kRefs = fs::path(HS_BINARY_DIR) / "tests" / "hf_parity" / "references";  // tests/CMakeLists.txt
const fs::path kSaved = fs::path(HS_BINARY_DIR) / "tests" / "hf_parity" / "saved";
const std::vector<std::string> kCases = {"llama3", "qwen2", "qwen3"};

std::map<std::string, torch::Tensor> refs_of(const std::string& name) {
  std::map<std::string, torch::Tensor> out;
  for (auto& [key, t] : load_safetensors((kRefs / name / "refs.safetensors").string())) out[key] = t;
  return out;
}

// max |a - b| / max |b|: the logits are O(1..10), so this is a relative error at their scale.
double relative_error(const torch::Tensor& a, const torch::Tensor& b) {
  auto bd = b.to(torch::kDouble);
  return (a.to(torch::kDouble) - bd).abs().max().item<double>() / bd.abs().max().item<double>();
}

torch::Tensor forward_all(Transformer& model, const torch::Tensor& ids) {
  torch::NoGradGuard no_grad;
  const auto B = ids.size(0), T = ids.size(1);
  auto mask = torch::ones({B, T}, torch::kLong);
  auto pos = torch::arange(T, torch::kLong).unsqueeze(0).expand({B, T}).contiguous();
  return model->forward(ids, mask, pos);
}

class HfParity : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kRefs / "qwen3" / "refs.safetensors")) {
      GTEST_SKIP() << "no transformers references in " << kRefs
                   << " (the hf_references fixture skips when the test peer is not installed: scripts/install-deps.sh)";
    }
    torch::set_num_threads(1);
  }
};

TEST_F(HfParity, CheckpointsWrittenByTransformersGiveTheSameLogits) {
  struct Variant {
    const char* dir;
    const char* logits;
    double tolerance;
    torch::ScalarType dtype;  // of the loaded parameters
  };
  // float32: a few ulps per layer apart (different kernels, summation orders); float64: the
  // reference's rotary frequencies are recomputed in float64, so only float64 rounding is left.
  const Variant variants[] = {{"f32", "logits_f32", 1e-5, torch::kFloat},
                              {"f32-v4", "logits_f32", 1e-5, torch::kFloat},
                              {"bf16", "logits_bf16", 1e-5, torch::kFloat},
                              {"f16", "logits_f16", 1e-5, torch::kFloat},
                              {"f64", "logits_f64", 1e-12, torch::kDouble}};
  for (const auto& name : kCases) {
    auto refs = refs_of(name);
    for (const auto& v : variants) {
      SCOPED_TRACE(name + "/" + v.dir);
      auto model = load_pretrained((kRefs / name / v.dir).string(), HeadKind::kLm);
      EXPECT_EQ(model->parameters().front().scalar_type(), v.dtype);
      const double err = relative_error(forward_all(model, refs.at("input_ids")), refs.at(v.logits));
      EXPECT_LT(err, v.tolerance);
    }
  }
}

TEST_F(HfParity, TensorParallelRanksReadTheirSlicesAndMatch) {
  for (const auto& name : kCases) {
    SCOPED_TRACE(name);
    auto refs = refs_of(name);
    std::vector<double> err(2, 1.0);
    std::vector<std::int64_t> local_q_rows(2, 0);
    auto tp_group = std::make_shared<ThreadGroup>(2);
    run_thread_ranks(2, [&](int rank, GroupFactory& groups) {
      ParallelContext ctx;
      ctx.tp = std::make_shared<ThreadCommunicator>(rank, tp_group, "tp");
      ctx.world = groups.world();
      auto model = load_pretrained((kRefs / name / "f64").string(), HeadKind::kLm, ctx);
      local_q_rows[static_cast<std::size_t>(rank)] =
          model->named_parameters()["model.layers.0.self_attn.q_proj.weight"].size(0);
      err[static_cast<std::size_t>(rank)] = relative_error(forward_all(model, refs.at("input_ids")), refs.at("logits_f64"));
      save_pretrained(model, (kSaved / (name + "-tp2")).string());
    });
    const std::int64_t head_dim = name == "qwen3" ? 32 : 16;
    for (int r = 0; r < 2; ++r) {
      EXPECT_LT(err[static_cast<std::size_t>(r)], 1e-12) << "rank " << r;
      EXPECT_EQ(local_q_rows[static_cast<std::size_t>(r)], 2 * head_dim) << "rank " << r << " holds 2 of 4 heads";
    }
  }
}

TEST_F(HfParity, PipelineStagesReadOnlyTheirLayers) {
  for (const auto& name : kCases) {
    if (name == "qwen2") continue;  // tied embeddings: refused with pp > 1 (model.h)
    SCOPED_TRACE(name);
    auto refs = refs_of(name);
    auto group = std::make_shared<ThreadGroup>(2);
    std::vector<Transformer> stages;
    for (int s = 0; s < 2; ++s) {
      ParallelContext ctx;
      ctx.pp = std::make_shared<ThreadCommunicator>(s, group, "pp");
      stages.push_back(load_pretrained((kRefs / name / "bf16").string(), HeadKind::kLm, ctx));
    }
    EXPECT_EQ(stages[0]->named_parameters().find("model.layers.1.mlp.up_proj.weight"), nullptr);
    EXPECT_EQ(stages[1]->named_parameters().find("model.layers.0.mlp.up_proj.weight"), nullptr);
    const auto& ids = refs.at("input_ids");
    torch::NoGradGuard no_grad;
    auto mask = torch::ones_like(ids);
    auto pos = torch::arange(ids.size(1), torch::kLong).unsqueeze(0).expand_as(ids).contiguous();
    auto hidden = stages[0]->forward(ids, mask, pos);
    auto logits = stages[1]->forward(hidden, mask, pos);
    EXPECT_LT(relative_error(logits, refs.at("logits_bf16")), 1e-5);
  }
}

TEST_F(HfParity, SavesWhatTransformersLoadsBack) {
  // check_saved.py loads these into transformers: no missing or unexpected keys, no warnings, the
  // same logits as refs.safetensors.
  for (const auto& name : kCases) {
    SCOPED_TRACE(name);
    auto model = load_pretrained((kRefs / name / "f32").string(), HeadKind::kLm);
    const auto dir = kSaved / name;
    save_pretrained(model, dir.string());
    auto again = load_pretrained(dir.string(), HeadKind::kLm);
    auto ids = refs_of(name).at("input_ids");
    EXPECT_TRUE(torch::equal(forward_all(model, ids), forward_all(again, ids)));
  }
}

}  // namespace
}  // namespace hs::trainer
