// statistics.cpp — spread, trimmed mean, Mann–Whitney U and scaling (formulas and sources in
// statistics.h).
#include "hybridscope/reports/statistics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>
#include <utility>

namespace hs::reports {
namespace {

// Largest side for which the exact null distribution of U is computed; above, the normal
// approximation is accurate to well below any alpha a reader cares about.
constexpr std::size_t kMaxExactSize = 50;

void require_samples(const std::vector<double>& samples, const char* function, const char* what) {
  if (samples.empty()) {
    throw std::invalid_argument(std::string(function) + ": no " + what +
                                "samples; a statistic of zero measurements is undefined");
  }
  for (double x : samples) {
    if (std::isnan(x)) {
      throw std::invalid_argument(std::string(function) + ": a " + what +
                                  "sample is NaN; drop failed repetitions before summarising");
    }
  }
}

void require_positive(const char* function, int n0, double a0, int n, double a) {
  const auto bad = [](double v) { return !(v > 0) || !std::isfinite(v); };
  if (n0 <= 0 || n <= 0 || bad(a0) || bad(a)) {
    throw std::invalid_argument(std::string(function) + ": ranks and measurements must be positive and finite (got n0=" +
                                std::to_string(n0) + ", " + std::to_string(a0) + ", n=" + std::to_string(n) +
                                ", " + std::to_string(a) + ")");
  }
}

double mean_of(const std::vector<double>& x, std::size_t begin, std::size_t end) {
  return std::accumulate(x.begin() + static_cast<std::ptrdiff_t>(begin), x.begin() + static_cast<std::ptrdiff_t>(end),
                         0.0) /
         static_cast<double>(end - begin);
}

// Type-7 quantile of sorted samples.
double quantile_sorted(const std::vector<double>& sorted, double p) {
  const double h = static_cast<double>(sorted.size() - 1) * p;
  const auto k = static_cast<std::size_t>(std::floor(h));
  if (k + 1 >= sorted.size()) return sorted.back();
  return sorted[k] + (h - static_cast<double>(k)) * (sorted[k + 1] - sorted[k]);
}

// Null distribution of U for sides of m and n distinct values: dist[u] = P(U = u), u = 0..m·n,
// U = number of (first, second) pairs with first > second. Recurrence on the largest of the
// m + n values: it is a first-side value (probability m/(m+n)) and beats all n second-side
// values, or a second-side value (n/(m+n)) and adds nothing. Probabilities, not counts, so
// C(100, 50) ~ 1e29 never appears.
std::vector<long double> u_distribution(std::size_t m, std::size_t n) {
  // prev[j] = distribution for (i - 1, j); cur[j] = for (i, j).
  std::vector<std::vector<long double>> prev(n + 1, std::vector<long double>{1.0L});
  for (std::size_t i = 1; i <= m; ++i) {
    std::vector<std::vector<long double>> cur(n + 1);
    cur[0] = {1.0L};
    for (std::size_t j = 1; j <= n; ++j) {
      const long double p_first = static_cast<long double>(i) / static_cast<long double>(i + j);
      cur[j].assign(i * j + 1, 0.0L);
      for (std::size_t u = 0; u < prev[j].size(); ++u) cur[j][u + j] += p_first * prev[j][u];
      for (std::size_t u = 0; u < cur[j - 1].size(); ++u) cur[j][u] += (1.0L - p_first) * cur[j - 1][u];
    }
    prev = std::move(cur);
  }
  return prev[n];
}

}  // namespace

Spread spread(std::vector<double> samples) {
  require_samples(samples, "spread", "");
  std::sort(samples.begin(), samples.end());
  Spread s;
  s.n = samples.size();
  s.min = samples.front();
  s.max = samples.back();
  s.median = quantile_sorted(samples, 0.5);
  s.q1 = quantile_sorted(samples, 0.25);
  s.q3 = quantile_sorted(samples, 0.75);
  s.iqr = s.q3 - s.q1;
  s.mean = mean_of(samples, 0, s.n);
  if (s.n > 1) {
    double squares = 0;
    for (double x : samples) squares += (x - s.mean) * (x - s.mean);
    s.stddev = std::sqrt(squares / static_cast<double>(s.n - 1));
  }
  s.cv = s.mean == 0 ? 0.0 : s.stddev / s.mean;
  return s;
}

double trimmed_mean(std::vector<double> samples) {
  require_samples(samples, "trimmed_mean", "");
  if (samples.size() < 3) return mean_of(samples, 0, samples.size());
  std::sort(samples.begin(), samples.end());
  return mean_of(samples, 1, samples.size() - 1);
}

MannWhitney mann_whitney_u(const std::vector<double>& old_samples, const std::vector<double>& new_samples) {
  require_samples(old_samples, "mann_whitney_u", "old ");
  require_samples(new_samples, "mann_whitney_u", "new ");
  MannWhitney r;
  r.n_old = old_samples.size();
  r.n_new = new_samples.size();
  r.reliable = r.n_old >= kMinReliableRepetitions && r.n_new >= kMinReliableRepetitions;
  const double n1 = static_cast<double>(r.n_old);
  const double n2 = static_cast<double>(r.n_new);
  const double n = n1 + n2;

  // (value, is_old), sorted by value; each group of equal values gets the average of its ranks.
  std::vector<std::pair<double, bool>> all;
  all.reserve(r.n_old + r.n_new);
  for (double x : old_samples) all.emplace_back(x, true);
  for (double x : new_samples) all.emplace_back(x, false);
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  double old_rank_sum = 0;
  double tie_term = 0;  // Σ(t³ - t) over groups of tied values
  for (std::size_t first = 0; first < all.size();) {
    std::size_t last = first;
    while (last + 1 < all.size() && all[last + 1].first == all[first].first) ++last;
    const double rank = (static_cast<double>(first) + static_cast<double>(last)) / 2.0 + 1.0;  // 1-based
    const double t = static_cast<double>(last - first + 1);
    tie_term += t * t * t - t;
    for (std::size_t k = first; k <= last; ++k) {
      if (all[k].second) old_rank_sum += rank;
    }
    first = last + 1;
  }
  r.u_old = old_rank_sum - n1 * (n1 + 1) / 2;
  r.u_new = n1 * n2 - r.u_old;

  r.exact = tie_term == 0 && r.n_old <= kMaxExactSize && r.n_new <= kMaxExactSize;
  if (r.exact) {
    const std::vector<long double> dist = u_distribution(r.n_old, r.n_new);
    const auto u = static_cast<std::size_t>(std::llround(r.u_old));  // integral without ties
    long double at_most = 0, at_least = 0;  // P(U <= u), P(U >= u)
    for (std::size_t k = 0; k <= u; ++k) at_most += dist[k];
    for (std::size_t k = u; k < dist.size(); ++k) at_least += dist[k];
    r.p_value = static_cast<double>(std::min(1.0L, 2.0L * std::min(at_most, at_least)));
    return r;
  }
  const double sigma = std::sqrt(n1 * n2 / 12.0 * ((n + 1) - tie_term / (n * (n - 1))));
  if (sigma == 0) {  // every value equal: no evidence of a difference
    r.p_value = 1.0;
    return r;
  }
  const double z = (std::max(r.u_old, r.u_new) - n1 * n2 / 2.0 - 0.5) / sigma;
  r.p_value = std::min(1.0, std::erfc(z / std::sqrt(2.0)));
  return r;
}

double relative_change(double old_value, double new_value) {
  if (old_value == 0) return std::numeric_limits<double>::quiet_NaN();
  return (new_value - old_value) / std::fabs(old_value);
}

Scaling strong_scaling_from_times(int n0, double t0, int n, double t) {
  require_positive("strong_scaling_from_times", n0, t0, n, t);
  return {t0 / t, (t0 * n0) / (n * t)};
}

Scaling weak_scaling_from_times(int n0, double t0, int n, double t) {
  require_positive("weak_scaling_from_times", n0, t0, n, t);
  return {(static_cast<double>(n) / n0) * t0 / t, t0 / t};
}

double throughput_efficiency(int n0, double x0, int n, double x) {
  require_positive("throughput_efficiency", n0, x0, n, x);
  return x / ((static_cast<double>(n) / n0) * x0);
}

double hybridflow_strong_efficiency(int n_min, double x_min, int n_max, double x_max) {
  require_positive("hybridflow_strong_efficiency", n_min, x_min, n_max, x_max);
  return (x_max / x_min) / (static_cast<double>(n_max) / n_min);
}

}  // namespace hs::reports
