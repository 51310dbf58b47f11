// statistics.h — the numbers a benchmark summary and `hybridscope compare` print: the spread of
// repeated measurements, MLPerf's trimmed mean, the two-sided Mann–Whitney U test that Google
// Benchmark's compare.py runs, relative change, and strong/weak scaling efficiency.
//
// Pure functions on plain vectors of samples (any unit: the results carry the samples' unit);
// no SQLite, no I/O. Not a benchmark runner and not a formatter: callers choose what to print.
// Inputs that leave a value undefined (no samples, NaN, non-positive ranks or times) throw
// std::invalid_argument naming the function and the bad input.
#pragma once

#include <cstddef>
#include <vector>

namespace hs::reports {

/// Significance level of compare's U test (Google Benchmark compare.py: alpha = 0.05).
constexpr double kAlpha = 0.05;
/// Fewer repetitions than this on either side and the U test is flagged unreliable
/// (Google Benchmark compare.py, UTEST_OPTIMAL_REPETITIONS = 9).
constexpr std::size_t kMinReliableRepetitions = 9;

/// Summary of repeated measurements.
struct Spread {
  std::size_t n = 0;
  double median = 0, min = 0, max = 0;
  double q1 = 0, q3 = 0, iqr = 0;  // 25th / 75th percentile, iqr = q3 - q1
  double mean = 0;
  double stddev = 0;  // sample form, divisor n - 1; 0 when n == 1
  double cv = 0;      // stddev / mean; 0 when mean == 0
};

/// Quantiles by linear interpolation between order statistics x(0) <= ... <= x(n-1):
/// q(p) = x(k) + (h - k)·(x(k+1) - x(k)), h = (n - 1)·p, k = floor(h) (numpy's default, R type 7).
/// stddev = sqrt(Σ(x - mean)² / (n - 1)) and cv = stddev / mean, as Google Benchmark's aggregates.
/// Throws std::invalid_argument on no samples or a NaN sample.
Spread spread(std::vector<double> samples);

/// MLPerf Training's score: drop the single fastest and the single slowest run, average the rest.
/// With fewer than 3 samples nothing can be dropped and the plain mean is returned.
/// Throws std::invalid_argument on no samples or a NaN sample.
double trimmed_mean(std::vector<double> samples);

/// Result of a two-sided Mann–Whitney U test of old against new samples.
struct MannWhitney {
  double u_old = 0;  // U of the old samples: rank sum - n_old(n_old + 1)/2 (average ranks for ties)
  double u_new = 0;  // U of the new samples; u_old + u_new = n_old·n_new
  double p_value = 1;
  bool exact = false;     // p from the exact distribution of U (else the normal approximation)
  bool reliable = false;  // both sides have at least kMinReliableRepetitions samples
  std::size_t n_old = 0, n_new = 0;
};

/// Two-sided Mann–Whitney U test (the test Google Benchmark compare.py runs through
/// scipy.stats.mannwhitneyu). Without ties and with both sizes <= 50, p is exact:
/// p = min(1, 2·min(P(U <= u_old), P(U >= u_old))) under the null distribution of U.
/// Otherwise scipy's method='asymptotic', use_continuity=True:
/// z = (max(u_old, u_new) - n_old·n_new/2 - 0.5) / σ, p = erfc(z/√2) clipped to 1, with the
/// tie-corrected σ² = n_old·n_new/12 · ((N + 1) - Σ(t³ - t) / (N(N - 1))), N = n_old + n_new,
/// t = size of each group of tied values; σ = 0 (all values equal) gives p = 1.
/// (scipy's method='auto' is exact only when one side has about 8 or fewer values; exact up to 50
/// is more accurate and takes milliseconds at 50 v 50.)
/// Throws std::invalid_argument when either side is empty or holds a NaN.
MannWhitney mann_whitney_u(const std::vector<double>& old_samples, const std::vector<double>& new_samples);

/// (new - old) / |old|, as Google Benchmark compare.py (0.05 = 5 % larger).
/// old == 0 gives NaN (the change is undefined; callers print "n/a"). compare.py instead falls
/// back to (new - old) / ((old + new)/2), a different quantity we do not mix into the column.
double relative_change(double old_value, double new_value);

/// Speedup and parallel efficiency of going from a baseline of n0 ranks to n ranks.
struct Scaling {
  double speedup = 0;
  double efficiency = 0;  // 1 = perfect scaling
};

/// Strong scaling (same total work), from step times: speedup S = t0 / t,
/// efficiency E = (t0·n0) / (n·t), i.e. E = t(1) / (N·t(N)) with the baseline generalised to n0 ranks.
/// Throws std::invalid_argument unless ranks and times are positive and finite.
Scaling strong_scaling_from_times(int n0, double t0, int n, double t);

/// Weak scaling (fixed work per rank), from step times: E = t0 / t; speedup is the ratio of
/// throughputs, S = (n / n0)·t0 / t. Throws std::invalid_argument unless ranks and times are
/// positive and finite.
Scaling weak_scaling_from_times(int n0, double t0, int n, double t);

/// Efficiency in throughput form against the smallest measured size n0:
/// E(N) = X_N / ((N / N0)·X_N0). Throws std::invalid_argument unless ranks and throughputs are
/// positive and finite.
double throughput_efficiency(int n0, double x0, int n, double x);

/// HybridFlow's strong-scaling efficiency (Sheng et al., EuroSys '25, scalability evaluation;
/// 66.8 % averaged there):
/// (X_max / X_min) / (N_max / N_min). Throws std::invalid_argument unless ranks and throughputs
/// are positive and finite.
double hybridflow_strong_efficiency(int n_min, double x_min, int n_max, double x_max);

}  // namespace hs::reports
