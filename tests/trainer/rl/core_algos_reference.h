// core_algos_reference.h — a scalar reference for core_algos_test.cpp.
//
// verl's formulas (shared/anchors/verl-facts.md) written out with plain loops over
// std::vector<double>, one row at a time, so the tests compare the tensor code with something
// that shares none of its code paths. Deliberately slow and obvious; never calls core_algos.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <vector>

#include "hybridscope/trainer/config/config.h"

namespace hs::trainer::reference {

using Vec = std::vector<double>;
using Mat = std::vector<Vec>;  // (rows, cols)

inline double ref_masked_mean(const Mat& v, const Mat& m) {
  double s = 0.0, n = 0.0;
  for (size_t i = 0; i < v.size(); ++i)
    for (size_t t = 0; t < v[i].size(); ++t) {
      s += v[i][t] * m[i][t];
      n += m[i][t];
    }
  return s / (n + 1e-8);
}

inline double ref_masked_var(const Mat& v, const Mat& m) {
  const double mean = ref_masked_mean(v, m);
  double ss = 0.0, n = 0.0;
  for (size_t i = 0; i < v.size(); ++i)
    for (size_t t = 0; t < v[i].size(); ++t) {
      ss += (v[i][t] - mean) * (v[i][t] - mean) * m[i][t];
      n += m[i][t];
    }
  return ss / (n + 1e-8) * (n / (n - 1.0));
}

// ---- integer and bool masks (verl's trainer passes int64): torch's default float32 pieces ----

/// Σ m + 1e-8 as torch computes it for an integer mask: int64 + double → float32.
inline double ref_int_mask_count(double n) { return static_cast<double>(static_cast<float>(n + 1e-8)); }
/// masked_mean with an integer mask: the denominator is the float32 count (the epsilon vanishes).
inline double ref_masked_mean_int(const Mat& v, const Mat& m) {
  double s = 0.0, n = 0.0;
  for (size_t i = 0; i < v.size(); ++i)
    for (size_t t = 0; t < v[i].size(); ++t) {
      if (m[i][t] != 0.0) s += v[i][t];
      n += m[i][t];
    }
  return s / ref_int_mask_count(n);
}
/// Unbiased masked_var with an integer mask: the Bessel factor N/(N−1) is a float32 number.
inline double ref_masked_var_int(const Mat& v, const Mat& m) {
  const double mean = ref_masked_mean_int(v, m);
  Mat sq = v;
  double n = 0.0;
  for (size_t i = 0; i < v.size(); ++i)
    for (size_t t = 0; t < v[i].size(); ++t) {
      sq[i][t] = (v[i][t] - mean) * (v[i][t] - mean);
      n += m[i][t];
    }
  const auto bessel = static_cast<double>(static_cast<float>(n) / static_cast<float>(n - 1.0));
  return ref_masked_mean_int(sq, m) * bessel;
}
/// GRPO's group of one: std + ε with std = float32 1, so the divisor is float32(1 + ε).
inline double ref_grpo_single_divisor(double eps) { return static_cast<double>(1.0f + static_cast<float>(eps)); }

inline Mat ref_whiten(const Mat& v, const Mat& m) {
  const double mean = ref_masked_mean(v, m);
  const double scale = 1.0 / std::sqrt(ref_masked_var(v, m) + 1e-8);
  Mat out = v;
  for (auto& row : out)
    for (auto& x : row) x = (x - mean) * scale;
  return out;
}

inline Mat mul(const Mat& a, const Mat& b) {
  Mat out = a;
  for (size_t i = 0; i < a.size(); ++i)
    for (size_t t = 0; t < a[i].size(); ++t) out[i][t] = a[i][t] * b[i][t];
  return out;
}

struct RefAdv {
  Mat advantages, returns;
};

inline RefAdv ref_gae(const Mat& r, const Mat& v, const Mat& m, double gamma, double lam) {
  Mat raw = r;
  for (size_t i = 0; i < r.size(); ++i) {
    double next_value = 0.0, lastgaelam = 0.0;
    for (size_t t = r[i].size(); t-- > 0;) {
      const double delta = r[i][t] + gamma * next_value - v[i][t];
      const double g = delta + gamma * lam * lastgaelam;
      if (m[i][t] != 0.0) {  // masked tokens leave both running values untouched
        next_value = v[i][t];
        lastgaelam = g;
      }
      raw[i][t] = lastgaelam;
    }
  }
  Mat returns = raw;
  for (size_t i = 0; i < r.size(); ++i)
    for (size_t t = 0; t < r[i].size(); ++t) returns[i][t] += v[i][t];
  return {ref_whiten(raw, m), returns};
}

inline Vec row_sums(const Mat& r) {
  Vec s;
  for (const auto& row : r) {
    double acc = 0.0;
    for (double x : row) acc += x;
    s.push_back(acc);
  }
  return s;
}

/// Per-sample group mean (0 for a group of one), unbiased std (1 for a group of one), size.
struct RefGroup {
  Vec mean, std, size;
};
inline RefGroup ref_groups(const Vec& scores, const std::vector<int64_t>& index) {
  std::map<int64_t, Vec> members;
  for (size_t i = 0; i < scores.size(); ++i) members[index[i]].push_back(scores[i]);
  RefGroup g;
  for (size_t i = 0; i < scores.size(); ++i) {
    const Vec& s = members[index[i]];
    const double n = static_cast<double>(s.size());
    double mean = 0.0, sd = 1.0;  // a group of one (see ref_grpo for its float32 divisor)
    if (s.size() > 1) {
      for (double x : s) mean += x;
      mean /= n;
      double ss = 0.0;
      for (double x : s) ss += (x - mean) * (x - mean);
      sd = std::sqrt(ss / (n - 1.0));
    }
    g.mean.push_back(mean);
    g.std.push_back(sd);
    g.size.push_back(n);
  }
  return g;
}

inline Mat broadcast_times_mask(const Vec& per_sample, const Mat& m) {
  Mat out = m;
  for (size_t i = 0; i < m.size(); ++i)
    for (auto& x : out[i]) x *= per_sample[i];
  return out;
}

inline Mat ref_grpo(const Mat& r, const Mat& m, const std::vector<int64_t>& index, double eps, bool norm) {
  const Vec s = row_sums(r);
  const RefGroup g = ref_groups(s, index);
  Vec a(s.size());
  for (size_t i = 0; i < s.size(); ++i)
    a[i] = norm ? (s[i] - g.mean[i]) / (g.size[i] > 1 ? g.std[i] + eps : ref_grpo_single_divisor(eps))
                : s[i] - g.mean[i];
  return broadcast_times_mask(a, m);
}

inline Mat ref_rloo(const Mat& r, const Mat& m, const std::vector<int64_t>& index) {
  const Vec s = row_sums(r);
  const RefGroup g = ref_groups(s, index);
  Vec a(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    const double n = g.size[i];
    a[i] = n > 1 ? s[i] * n / (n - 1) - g.mean[i] * n / (n - 1) : s[i];
  }
  return broadcast_times_mask(a, m);
}

inline RefAdv ref_reinforce_pp(const Mat& r, const Mat& m, double gamma) {
  Mat ret = r;
  for (size_t i = 0; i < r.size(); ++i) {
    double running = 0.0;
    for (size_t t = r[i].size(); t-- > 0;) {
      running = r[i][t] + gamma * running;
      ret[i][t] = running;
      if (m[i][t] == 0.0) running = 0.0;  // reset: nothing flows back across a masked token
    }
  }
  return {mul(ref_whiten(ret, m), m), ret};
}

inline Mat ref_reinforce_pp_baseline(const Mat& r, const Mat& m, const std::vector<int64_t>& index) {
  const Vec s = row_sums(r);
  const RefGroup g = ref_groups(s, index);
  Vec c(s.size());
  for (size_t i = 0; i < s.size(); ++i) c[i] = s[i] - g.mean[i];
  return mul(ref_whiten(broadcast_times_mask(c, m), m), m);
}

inline RefAdv ref_remax(const Mat& r, const Vec& baseline, const Mat& m) {
  Mat ret = r, adv = r;
  for (size_t i = 0; i < r.size(); ++i) {
    double acc = 0.0;
    for (size_t t = r[i].size(); t-- > 0;) {
      acc += r[i][t] * m[i][t];
      ret[i][t] = acc;
      adv[i][t] = acc - baseline[i] * m[i][t];
    }
  }
  return {adv, ret};
}

/// verl agg_loss without global batch info: token-mean divides by the plain count (no epsilon),
/// seq-mean-token-mean each row's sum by (row count + 1e-8); an empty batch gives 0.
inline double ref_agg(const Mat& l, const Mat& m, LossAggMode mode, double norm = -1) {
  if (mode == LossAggMode::kTokenMean) {
    double s = 0.0, n = 0.0;
    for (size_t i = 0; i < l.size(); ++i)
      for (size_t t = 0; t < l[i].size(); ++t) {
        s += l[i][t] * m[i][t];
        n += m[i][t];
      }
    return n > 0 ? s / n : 0.0;
  }
  double total = 0.0, seq_total = 0.0;
  int valid_rows = 0;
  for (size_t i = 0; i < l.size(); ++i) {
    double s = 0.0, n = 0.0;
    for (size_t t = 0; t < l[i].size(); ++t) {
      s += l[i][t] * m[i][t];
      n += m[i][t];
    }
    total += s;
    if (n > 0) {
      ++valid_rows;
      seq_total += mode == LossAggMode::kSeqMeanTokenMean ? s / (n + 1e-8) : s;
    }
  }
  if (mode == LossAggMode::kSeqMeanTokenSumNorm)
    return total / (norm > 0 ? norm : static_cast<double>(l.at(0).size()));
  return valid_rows > 0 ? seq_total / valid_rows : 0.0;
}

struct RefPolicy {
  double loss, clipfrac, ppo_kl, clipfrac_lower;
  Mat token_loss, dloss_dlogp;  // per token; dloss_dlogp of the unaggregated token loss
};
inline RefPolicy ref_policy(const Mat& old_lp, const Mat& lp, const Mat& adv, const Mat& m, double lo,
                     double hi, double c, LossAggMode mode) {
  RefPolicy out{};
  out.token_loss = lp;
  out.dloss_dlogp = lp;
  Mat clipped = lp, lower = lp, neg_kl = lp;
  for (size_t i = 0; i < lp.size(); ++i)
    for (size_t t = 0; t < lp[i].size(); ++t) {
      const double raw = lp[i][t] - old_lp[i][t];
      const double d = std::min(20.0, std::max(-20.0, raw));
      const double ratio = std::exp(d);
      const double a = adv[i][t];
      const double l1 = -a * ratio;
      const double l2 = -a * std::min(1.0 + hi, std::max(1.0 - lo, ratio));
      const double lc = std::max(l1, l2);
      const double l3 = -a * c;
      double loss = lc;
      // d/dlogp: −A·ρ on the unclipped branch while Δ is inside the clamp, else 0.
      double grad = (l1 >= l2 && std::abs(raw) < 20.0) ? -a * ratio : 0.0;
      if (a < 0 && l3 < lc) {
        loss = l3;
        grad = 0.0;
      }
      out.token_loss[i][t] = loss;
      out.dloss_dlogp[i][t] = grad;
      clipped[i][t] = l2 > l1 ? 1.0 : 0.0;
      lower[i][t] = (lc > l3 && a < 0) ? 1.0 : 0.0;
      neg_kl[i][t] = -d;
    }
  out.loss = ref_agg(out.token_loss, m, mode);
  out.clipfrac = ref_masked_mean(clipped, m);
  out.ppo_kl = ref_masked_mean(neg_kl, m);
  out.clipfrac_lower = ref_masked_mean(lower, m);
  return out;
}

inline double ref_kl(double logp, double ref, KlPenalty kind) {
  switch (kind) {
    case KlPenalty::kKl: return logp - ref;
    case KlPenalty::kAbs: return std::abs(logp - ref);
    case KlPenalty::kMse: return 0.5 * (logp - ref) * (logp - ref);
    case KlPenalty::kLowVarKl: {
      const double x = std::min(20.0, std::max(-20.0, ref - logp));
      return std::min(10.0, std::max(-10.0, std::exp(x) - x - 1.0));
    }
  }
  return NAN;
}

/// log Σ exp(z), shifted by the max so large logits stay finite.
inline double ref_logsumexp(const Vec& z) {
  const double mx = *std::max_element(z.begin(), z.end());
  double s = 0.0;
  for (double x : z) s += std::exp(x - mx);
  return mx + std::log(s);
}
/// −Σ p log p, computed from log-probabilities (a different route than the code under test).
inline double ref_entropy(const Vec& z) {
  const double lse = ref_logsumexp(z);
  double h = 0.0;
  for (double x : z) h -= std::exp(x - lse) * (x - lse);
  return h;
}

}  // namespace hs::trainer::reference
