// offload_test.cpp — HostOffload moves tensors to host memory and back in place: every holder
// (the module, AdamW's state map) keeps its tensor, the values survive bit for bit, and training
// goes on exactly as if nothing had moved.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <stdexcept>
#include <vector>

#include "hybridscope/trainer/hybrid/offload.h"

namespace hs::trainer {
namespace {

struct Trained {
  torch::nn::Linear layer{nullptr};
  std::unique_ptr<torch::optim::AdamW> adamw;

  explicit Trained(std::int64_t seed) {
    torch::manual_seed(seed);
    layer = torch::nn::Linear(8, 4);
    adamw = std::make_unique<torch::optim::AdamW>(layer->parameters(), torch::optim::AdamWOptions(1e-2));
  }
  void step(const torch::Tensor& x) {
    adamw->zero_grad();
    layer(x).pow(2).sum().backward();
    adamw->step();
  }
  std::vector<torch::Tensor> state() const {
    std::vector<torch::Tensor> out;
    for (const auto& p : layer->parameters()) {
      const auto& s = static_cast<const torch::optim::AdamWParamState&>(*adamw->state().at(p.unsafeGetTensorImpl()));
      out.push_back(s.exp_avg());
      out.push_back(s.exp_avg_sq());
    }
    return out;
  }
};

TEST(HostOffload, MovesInPlaceAndTrainingContinuesExactly) {
  const auto x = torch::randn({5, 8});
  Trained moved(3), kept(3);
  moved.step(x);
  kept.step(x);

  std::vector<torch::Tensor> tensors = moved.layer->parameters();
  for (const auto& t : moved.state()) tensors.push_back(t);
  std::vector<const void*> before;
  std::vector<torch::Tensor> values;
  std::int64_t expected_bytes = 0;
  for (const auto& t : tensors) {
    before.push_back(t.data_ptr());
    values.push_back(t.detach().clone());
    expected_bytes += static_cast<std::int64_t>(t.nbytes());
  }

  HostOffload offload;
  EXPECT_FALSE(offload.offloaded());
  EXPECT_EQ(offload.offload(tensors), expected_bytes);
  EXPECT_TRUE(offload.offloaded());
  EXPECT_THROW(offload.offload(tensors), std::logic_error);
  const auto params = moved.layer->parameters();
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    EXPECT_NE(tensors[i].data_ptr(), before[i]) << "tensor " << i << " was not copied out";
    EXPECT_TRUE(torch::equal(tensors[i], values[i])) << i;
  }
  // The module and AdamW still hold the moved tensors themselves.
  EXPECT_EQ(params[0].data_ptr(), tensors[0].data_ptr());
  EXPECT_EQ(moved.state()[0].data_ptr(), tensors[params.size()].data_ptr());

  EXPECT_EQ(offload.onload(), expected_bytes);
  EXPECT_FALSE(offload.offloaded());
  EXPECT_EQ(offload.onload(), 0);
  for (std::size_t i = 0; i < tensors.size(); ++i) EXPECT_TRUE(torch::equal(tensors[i], values[i])) << i;

  // AdamW's state stayed attached: the next steps equal those of the twin that never moved.
  for (int i = 0; i < 3; ++i) {
    moved.step(x);
    kept.step(x);
  }
  const auto a = moved.layer->parameters(), b = kept.layer->parameters();
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::equal(a[i], b[i])) << "parameter " << i;
}

TEST(HostOffload, SkipsUndefinedTensors) {
  HostOffload offload;
  std::vector<torch::Tensor> tensors = {torch::Tensor(), torch::ones({3})};
  EXPECT_EQ(offload.offload(tensors), 3 * 4);
  EXPECT_EQ(offload.onload(), 3 * 4);
}

}  // namespace
}  // namespace hs::trainer
