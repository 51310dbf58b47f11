// trends.cpp — least-squares trends with a Student-t confidence interval on the slope (trends.h).
//
// Student's t CDF through the regularized incomplete beta function (Abramowitz & Stegun 26.7.1 and
// 26.5.8): for t >= 0, P(T > t) = ½·I_x(df/2, ½) with x = df / (df + t²). I_x(a, b) is evaluated
// by its continued fraction (A&S 26.5.8) with the modified Lentz algorithm, using the symmetry
// I_x(a, b) = 1 − I_{1−x}(b, a) where the fraction converges slowly (x > (a + 1)/(a + b + 2)).
// The quantile inverts the CDF by bisection, which cannot diverge and costs ~60 CDF evaluations.
#include "hybridscope/reports/trends.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <stdexcept>

namespace hs::reports {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Continued fraction of I_x(a, b) (A&S 26.5.8), modified Lentz; y = 1 − x passed in exactly.
double beta_continued_fraction(double a, double b, double x) {
  constexpr double kTiny = 1e-300;
  constexpr double kEps = 1e-16;
  constexpr int kMaxIterations = 100000;  // convergence takes O(sqrt(max(a, b))) terms
  double c = 1.0;
  double d = 1.0 - (a + b) * x / (a + 1.0);
  if (std::fabs(d) < kTiny) d = kTiny;
  d = 1.0 / d;
  double h = d;
  for (int m = 1; m <= kMaxIterations; ++m) {
    const double m2 = 2.0 * m;
    // Even step: d_{2m} = m(b − m)x / ((a + 2m − 1)(a + 2m)).
    double num = m * (b - m) * x / ((a + m2 - 1.0) * (a + m2));
    d = 1.0 + num * d;
    if (std::fabs(d) < kTiny) d = kTiny;
    c = 1.0 + num / c;
    if (std::fabs(c) < kTiny) c = kTiny;
    d = 1.0 / d;
    h *= d * c;
    // Odd step: d_{2m+1} = −(a + m)(a + b + m)x / ((a + 2m)(a + 2m + 1)).
    num = -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1.0));
    d = 1.0 + num * d;
    if (std::fabs(d) < kTiny) d = kTiny;
    c = 1.0 + num / c;
    if (std::fabs(c) < kTiny) c = kTiny;
    d = 1.0 / d;
    const double delta = d * c;
    h *= delta;
    if (std::fabs(delta - 1.0) < kEps) return h;
  }
  throw std::runtime_error("student_t_quantile: the incomplete beta continued fraction did not converge (a=" +
                           std::to_string(a) + ", b=" + std::to_string(b) + ", x=" + std::to_string(x) + ")");
}

// Regularized incomplete beta I_x(a, b) with y = 1 − x given separately (no cancellation near 1).
double regularized_incomplete_beta(double a, double b, double x, double y) {
  if (x <= 0.0) return 0.0;
  if (y <= 0.0) return 1.0;
  // x^a·y^b / (a·B(a, b)) is the prefactor of the fraction (A&S 26.5.8).
  const double log_front = std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) + a * std::log(x) + b * std::log(y);
  const double front = std::exp(log_front);
  if (x < (a + 1.0) / (a + b + 2.0)) return front * beta_continued_fraction(a, b, x) / a;
  return 1.0 - front * beta_continued_fraction(b, a, y) / b;
}

// P(T > t) for t >= 0.
double student_t_upper_tail(double t, double df) {
  const double t2 = t * t;
  return 0.5 * regularized_incomplete_beta(0.5 * df, 0.5, df / (df + t2), t2 / (df + t2));
}

// A series' points (step, value), keyed by step so that duplicate steps cannot slip in.
using Series = std::map<std::int64_t, double>;

void put_max(Series& series, std::int64_t step, double value) {
  const auto [it, inserted] = series.emplace(step, value);
  if (!inserted) it->second = std::max(it->second, value);
}

std::vector<std::pair<double, double>> points_of(const Series& series) {
  std::vector<std::pair<double, double>> points;
  for (const auto& [step, value] : series) points.emplace_back(static_cast<double>(step), value);
  return points;
}

constexpr double kNsPerSecond = 1e9;

}  // namespace

double student_t_quantile(double p, double df) {
  if (!(p > 0.0 && p < 1.0)) {
    throw std::invalid_argument("student_t_quantile: p must lie in (0, 1), got " + std::to_string(p));
  }
  if (!(df >= 1.0) || !std::isfinite(df)) {
    throw std::invalid_argument("student_t_quantile: degrees of freedom must be finite and >= 1, got " +
                                std::to_string(df) + " (a fit needs at least 3 points)");
  }
  if (p == 0.5) return 0.0;
  if (p < 0.5) return -student_t_quantile(1.0 - p, df);  // symmetric about 0
  const double tail = 1.0 - p;
  // Bracket: the upper tail falls from ½ at 0 towards 0; double hi until it is below `tail`.
  double lo = 0.0, hi = 1.0;
  while (student_t_upper_tail(hi, df) > tail) {
    lo = hi;
    hi *= 2.0;
    if (!std::isfinite(hi)) return kInf;  // p within rounding of 1
  }
  // Bisection to the last representable digits (hi − lo halves every pass).
  for (int i = 0; i < 200 && hi - lo > 1e-15 * hi; ++i) {
    const double mid = 0.5 * (lo + hi);
    (student_t_upper_tail(mid, df) > tail ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

LinearTrend fit_trend(const std::string& series, const std::string& unit,
                      const std::vector<std::pair<double, double>>& points) {
  for (const auto& [x, y] : points) {
    if (!std::isfinite(x) || !std::isfinite(y)) {
      throw std::invalid_argument("fit_trend: series '" + series +
                                  "' holds a NaN or infinite point; drop unrecorded steps before fitting");
    }
  }
  LinearTrend t;
  t.series = series;
  t.unit = unit;
  t.n = points.size();
  t.slope_ci_low = -kInf;
  t.slope_ci_high = kInf;
  if (points.empty()) return t;

  const double n = static_cast<double>(points.size());
  double sum_x = 0, sum_y = 0;
  double x_first = points.front().first, x_last = points.front().first;
  for (const auto& [x, y] : points) {
    sum_x += x;
    sum_y += y;
    x_first = std::min(x_first, x);
    x_last = std::max(x_last, x);
  }
  const double mean_x = sum_x / n;
  t.mean = sum_y / n;
  // Centered sums: Sxx = Σ(x − x̄)², Sxy = Σ(x − x̄)(y − ȳ).
  double sxx = 0, sxy = 0;
  for (const auto& [x, y] : points) {
    sxx += (x - mean_x) * (x - mean_x);
    sxy += (x - mean_x) * (y - t.mean);
  }
  t.slope = sxx > 0 ? sxy / sxx : 0.0;
  t.intercept = t.mean - t.slope * mean_x;
  t.relative_slope = t.mean != 0.0 ? t.slope / t.mean : 0.0;
  t.first_fit = t.intercept + t.slope * x_first;
  t.last_fit = t.intercept + t.slope * x_last;
  if (points.size() < 3 || sxx <= 0) return t;  // no residual degrees of freedom: no interval

  // se(slope) = s / sqrt(Sxx), s² = SSE / (n − 2); 95 % two-sided: slope ± t(0.975, n − 2)·se.
  double sse = 0;
  for (const auto& [x, y] : points) {
    const double residual = y - (t.intercept + t.slope * x);
    sse += residual * residual;
  }
  const double se = std::sqrt(sse / (n - 2.0) / sxx);
  const double half_width = student_t_quantile(0.975, n - 2.0) * se;
  t.slope_ci_low = t.slope - half_width;
  t.slope_ci_high = t.slope + half_width;
  const bool enough = points.size() >= kTrendMinPoints;
  t.increasing = enough && t.slope_ci_low > 0;
  t.decreasing = enough && t.slope_ci_high < 0;
  return t;
}

std::vector<LinearTrend> run_trends(const RunData& data, const PhaseBreakdown& breakdown) {
  const std::set<std::int64_t> steps(breakdown.measured.begin(), breakdown.measured.end());
  std::vector<LinearTrend> trends;

  // The step and each phase as phase_breakdown() aggregates them (the slowest rank per step, or the
  // trainer's timing_s/* metrics with probes off). The switch phases come from the switch records below.
  Series step_s;
  std::map<std::string, Series> phase_s;
  for (const StepPhases& s : breakdown.steps) {
    if (steps.count(s.step) == 0) continue;
    step_s[s.step] = s.step_s;
    for (const auto& [name, seconds] : s.phase_s) phase_s[name][s.step] = seconds;
  }
  if (!step_s.empty()) trends.push_back(fit_trend("timing_s/step", "s", points_of(step_s)));
  for (const std::string& name : breakdown.phases)
    if (name.rfind("switch/", 0) != 0 && phase_s.count(name))
      trends.push_back(fit_trend("timing_s/" + name, "s", points_of(phase_s.at(name))));

  // Each switch direction: the slowest rank's switch per step (NeMo-RL's "slowest receiver").
  // Switches and memory samples belong to the step whose range they start in (StepWindows).
  const StepWindows windows(data);
  std::map<std::string, Series> switches;
  for (const SwitchRow& s : data.switches) {
    const auto step = windows.step_of(s.rank, s.start_ns, s.step);
    if (!step || steps.count(*step) == 0) continue;
    put_max(switches[s.direction], *step, static_cast<double>(s.end_ns - s.start_ns) / kNsPerSecond);
  }
  for (const auto& [direction, series] : switches) {
    trends.push_back(fit_trend("switch/" + direction, "s", points_of(series)));
  }

  // Peak allocated memory per step over every rank's samples. GPU samples when there are any:
  // the CPU tracking allocator's bytes in the same series would mix two different pools.
  const auto step_of = [&](const MemorySampleRow& m) { return windows.step_of(m.rank, m.ts_ns, m.step); };
  const bool any_gpu = std::any_of(data.memory.begin(), data.memory.end(), [&](const MemorySampleRow& m) {
    const auto step = step_of(m);
    return m.device >= 0 && m.allocated_bytes && step && steps.count(*step) != 0;
  });
  Series peak_gb;
  for (const MemorySampleRow& m : data.memory) {
    const auto step = step_of(m);
    if (!m.allocated_bytes || !step || steps.count(*step) == 0 || (m.device >= 0) != any_gpu) continue;
    put_max(peak_gb, *step, static_cast<double>(*m.allocated_bytes) / 1e9);
  }
  if (!peak_gb.empty()) trends.push_back(fit_trend("memory/peak_allocated_gb", "GB", points_of(peak_gb)));
  return trends;
}

}  // namespace hs::reports
