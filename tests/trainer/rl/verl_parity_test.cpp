// verl_parity_test.cpp — core_algos against verl's own code, to the last bits.
//
// verl_golden.h holds golden values from verl_reference.py, which restates verl's functions
// (core_algos.py, torch_functional.py) op for op in torch; the command is in its header. Every
// function runs here in float64 and float32, each with a float, an int64 (what verl's trainer
// passes) and a bool mask, on a ragged (5, 6) batch with a NaN in one padded slot. Each check
// records its worst relative error |got − want| / max(|want|, 1e-6); the suite prints the worst
// per function and dtype at the end (quoted in docs/algorithms.md). Tolerances: 1e-10 in float64
// (the bar), 1e-5 in float32 (same ops, the last float32 bits may differ with the order
// of a reduction).
#include "hybridscope/trainer/rl/core_algos.h"

#include "rl/verl_golden.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace hs::trainer {
namespace {

constexpr int64_t kBs = 5, kT = 6;
const std::vector<int64_t> kIndex = {0, 0, 1, 2, 2};       // uid 1 is a group of one
const std::vector<int64_t> kPasskIndex = {0, 0, 1, 1, 1};  // pass@k needs groups of >= 2
const GlobalBatchInfo kInfo{2, 37.0, 7.0, 11.0};            // verl_reference.py INFO

using Vec = std::vector<double>;

// Worst relative error per (dtype, function), printed at the end.
std::map<std::pair<std::string, std::string>, double>& worst() {
  static std::map<std::pair<std::string, std::string>, double> table;
  return table;
}

class WorstRelativeErrorReporter : public ::testing::Environment {
 public:
  void TearDown() override {
    if (worst().empty()) return;
    std::printf("[ verl rel ] %-34s %12s %12s\n", "function", "float64", "float32");
    std::map<std::string, std::pair<double, double>> rows;
    for (const auto& [key, err] : worst()) {
      auto& row = rows[key.second];
      (key.first == "f64" ? row.first : row.second) = err;
    }
    for (const auto& [fn, errs] : rows) std::printf("[ verl rel ] %-34s %12.3e %12.3e\n", fn.c_str(), errs.first, errs.second);
  }
};
[[maybe_unused]] const auto* const g_reporter = ::testing::AddGlobalTestEnvironment(new WorstRelativeErrorReporter);

const Vec& golden(const std::string& key) {
  const auto& table = verl_golden::values();
  const auto it = table.find(key);
  if (it == table.end()) throw std::out_of_range("verl_golden.h has no key " + key + "; regenerate it");
  return it->second;
}

torch::Tensor input(const std::string& name, torch::ScalarType dtype) {
  return torch::tensor(golden("input/" + name), torch::kDouble).reshape({kBs, kT}).to(dtype);
}

Vec flat(std::initializer_list<torch::Tensor> parts) {
  Vec out;
  for (const auto& t : parts) {
    const auto c = t.detach().to(torch::kDouble).cpu().contiguous().reshape({-1});
    out.insert(out.end(), c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
  }
  return out;
}

struct Case {
  std::string dtype_name, mask_name;
  torch::ScalarType dtype;
  torch::Tensor mask;
  std::string prefix() const { return dtype_name + "/" + mask_name + "/"; }
  double tol() const { return dtype == torch::kDouble ? 1e-10 : 1e-5; }
  torch::Tensor in(const std::string& name) const { return input(name, dtype); }
};

std::vector<Case> cases() {
  std::vector<Case> out;
  for (const auto& [name, dt] : {std::pair{"f64", torch::kDouble}, std::pair{"f32", torch::kFloat}}) {
    const auto m = input("mask", torch::kDouble);
    out.push_back({name, "float", dt, m.to(dt)});
    out.push_back({name, "int64", dt, m.to(torch::kLong)});
    out.push_back({name, "bool", dt, m.to(torch::kBool)});
  }
  return out;
}

void check(const Case& c, const std::string& fn, const Vec& got) {
  const Vec& want = golden(c.prefix() + fn);
  ASSERT_EQ(got.size(), want.size()) << c.prefix() << fn;
  double err = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i]) && std::isnan(got[i])) continue;
    err = std::max(err, std::abs(got[i] - want[i]) / std::max(std::abs(want[i]), 1e-6));
  }
  auto& w = worst()[{c.dtype_name, fn}];
  w = std::max(w, err);
  EXPECT_LE(err, c.tol()) << c.prefix() << fn;
}

/// The values with a NaN in a padded slot (row 2 has one valid token), as verl_reference.py.
torch::Tensor values_with_nan(const Case& c) {
  auto v = c.in("values").clone();
  v.index_put_({2, 4}, NAN);
  return v;
}

TEST(VerlParity, MaskedStatistics) {
  for (const auto& c : cases()) {
    const auto v = values_with_nan(c);
    check(c, "masked_sum", flat({masked_sum(v, c.mask)}));
    check(c, "masked_sum_row", flat({masked_sum(v, c.mask, -1)}));
    check(c, "masked_sum_col", flat({masked_sum(v, c.mask, 0)}));
    check(c, "masked_mean", flat({masked_mean(v, c.mask)}));
    check(c, "masked_mean_row", flat({masked_mean(v, c.mask, -1)}));
    check(c, "masked_mean_col", flat({masked_mean(v, c.mask, 0)}));
    check(c, "masked_var", flat({masked_var(c.in("values"), c.mask)}));
    check(c, "masked_whiten", flat({masked_whiten(c.in("values"), c.mask)}));
  }
}

TEST(VerlParity, AggLossWithAndWithoutGlobalBatchInfo) {
  for (const auto& c : cases()) {
    for (const auto mode : {LossAggMode::kTokenMean, LossAggMode::kSeqMeanTokenSum, LossAggMode::kSeqMeanTokenMean,
                            LossAggMode::kSeqMeanTokenSumNorm}) {
      check(c, std::string("agg_loss/") + to_string(mode), flat({agg_loss(c.in("values"), c.mask, mode)}));
      check(c, std::string("agg_loss_global/") + to_string(mode), flat({agg_loss(c.in("values"), c.mask, mode, kInfo)}));
    }
  }
}

TEST(VerlParity, VanillaPolicyLossMetricsGradientAndRolloutIsWeights) {
  for (const auto& c : cases()) {
    for (const bool with_weights : {false, true}) {
      for (const auto mode : {LossAggMode::kTokenMean, LossAggMode::kSeqMeanTokenMean}) {
        auto lp = c.in("log_prob").requires_grad_(true);
        const auto out = compute_policy_loss(c.in("old_log_prob"), lp, c.in("advantages"), c.mask, 0.2, 0.28, 3.0,
                                             mode, kInfo, with_weights ? c.in("weights") : torch::Tensor());
        out.pg_loss.backward();
        const std::string fn = std::string(with_weights ? "vanilla_is/" : "vanilla/") + to_string(mode);
        check(c, fn, flat({out.pg_loss, out.pg_clipfrac, out.ppo_kl, out.pg_clipfrac_lower}));
        check(c, fn + "/grad", flat({lp.grad()}));
      }
    }
  }
}

TEST(VerlParity, ValueLoss) {
  for (const auto& c : cases()) {
    const auto out = compute_value_loss(c.in("vpreds"), c.in("returns"), c.in("old_values"), c.mask, 0.5,
                                        LossAggMode::kTokenMean, kInfo);
    check(c, "value_loss", flat({out.vf_loss, out.vf_clipfrac}));
  }
}

TEST(VerlParity, PolicyLossFamily) {
  for (const auto& c : cases()) {
    {
      auto lp = c.in("log_prob").requires_grad_(true);
      const auto out = compute_policy_loss_gspo(c.in("old_log_prob"), lp, c.in("advantages"), c.mask, 0.2, 0.28, kInfo);
      out.pg_loss.backward();
      check(c, "gspo", flat({out.pg_loss, out.pg_clipfrac, out.ppo_kl}));
      check(c, "gspo/grad", flat({lp.grad()}));
      EXPECT_EQ(out.pg_clipfrac_lower.item<double>(), 0.0);
    }
    {
      auto lp = c.in("log_prob").requires_grad_(true);
      const auto out = compute_policy_loss_gpg(lp, c.in("advantages"), c.mask, LossAggMode::kTokenMean, kInfo);
      out.pg_loss.backward();
      check(c, "gpg", flat({out.pg_loss}));
      check(c, "gpg/grad", flat({lp.grad()}));
    }
    {
      auto lp = c.in("log_prob").requires_grad_(true);
      const auto out = compute_policy_loss_clip_cov(c.in("old_log_prob"), lp, c.in("advantages"), c.mask, 0.2, 0.28,
                                                    0.35, 0.05, 5.0, LossAggMode::kTokenMean, kInfo);
      out.pg_loss.backward();
      Vec got = flat({out.pg_loss, out.pg_clipfrac, out.ppo_kl});
      // The golden row ends with the number of cut tokens: pg_clipfrac × the valid tokens (19).
      got.push_back(std::round(out.pg_clipfrac.item<double>() * 19.0));
      check(c, "clip_cov", got);
      check(c, "clip_cov/grad", flat({lp.grad()}));
    }
    {
      auto lp = c.in("log_prob").requires_grad_(true);
      const auto out = compute_policy_loss_kl_cov(c.in("old_log_prob"), lp, c.in("advantages"), c.mask, 0.2, 0.1,
                                                  LossAggMode::kTokenMean, kInfo);
      out.pg_loss.backward();
      check(c, "kl_cov", flat({out.pg_loss, out.ppo_kl}));
      check(c, "kl_cov/grad", flat({lp.grad()}));
    }
  }
}

TEST(VerlParity, AdvantageEstimators) {
  for (const auto& c : cases()) {
    const auto r = c.in("rewards");
    if (c.mask_name != "bool") {  // verl's GAE computes 1 − mask, which torch refuses for bool
      const auto gae = compute_gae_advantage_return(r, c.in("old_values"), c.mask, 0.9, 0.8);
      check(c, "gae", flat({gae.advantages, gae.returns}));
    }
    check(c, "grpo", flat({compute_grpo_outcome_advantage(r, c.mask, kIndex).advantages}));
    check(c, "grpo_drgrpo", flat({compute_grpo_outcome_advantage(r, c.mask, kIndex, 1e-6, false).advantages}));
    check(c, "rloo", flat({compute_rloo_outcome_advantage(r, c.mask, kIndex).advantages}));
    check(c, "opo", flat({compute_opo_outcome_advantage(r, c.mask, kIndex).advantages}));
    check(c, "gpg_adv", flat({compute_gpg_outcome_advantage(r, c.mask, kIndex).advantages}));
    check(c, "grpo_passk", flat({compute_grpo_passk_outcome_advantage(r, c.mask, kPasskIndex).advantages}));
    const auto rpp = compute_reinforce_plus_plus_outcome_advantage(r, c.mask, 0.9);
    check(c, "reinforce_pp", flat({rpp.advantages, rpp.returns}));
    check(c, "reinforce_pp_baseline",
          flat({compute_reinforce_plus_plus_baseline_outcome_advantage(r, c.mask, kIndex).advantages}));
  }
}

}  // namespace
}  // namespace hs::trainer
