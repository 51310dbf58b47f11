// text_format.cpp — the number formats of text_format.h.
#include "text_format.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>

namespace hs::reports::detail {

namespace {
constexpr double kRoundingNoise = 1e-12;
}  // namespace

std::string format_number(double value) {
  if (std::isnan(value)) return "n/a";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  const double magnitude = std::fabs(value);
  // Below 1e-12 is the rounding left by sums of doubles (a flat series' slope interval read
  // "[-4.319e-16, …]"), never a measured value in the reports' units (s, GB, fractions).
  if (magnitude < kRoundingNoise) return "0";
  if (magnitude >= 1e6) return fmt::format("{:.3e}", value);
  if (magnitude >= 1000.0) return fmt::format("{:.0f}", value);
  return fmt::format("{:.4g}", value);
}

std::string format_percent(double fraction) {
  if (std::isnan(fraction)) return "n/a";
  return fmt::format("{:.1f} %", 100.0 * fraction);
}

std::string format_seconds(double seconds) {
  if (std::isnan(seconds)) return "n/a";
  const double magnitude = std::fabs(seconds);
  if (magnitude == 0.0) return "0 s";
  if (magnitude >= 1.0) return format_number(seconds) + " s";
  if (magnitude >= 1e-3) return format_number(seconds * 1e3) + " ms";
  return format_number(seconds * 1e6) + " µs";
}

std::string format_bytes(double bytes) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  std::size_t unit = 0;
  double value = bytes;
  while (std::fabs(value) >= 1024.0 && unit + 1 < std::size(kUnits)) {
    value /= 1024.0;
    ++unit;
  }
  return unit == 0 ? fmt::format("{:.0f} B", value) : fmt::format("{:.1f} {}", value, kUnits[unit]);
}

std::string format_steps(const std::vector<std::int64_t>& steps) {
  if (steps.empty()) return "no measured steps";
  const auto [lo, hi] = std::minmax_element(steps.begin(), steps.end());
  if (*lo == *hi) return fmt::format("step {}", *lo);
  return fmt::format("steps {}–{}", *lo, *hi);
}

}  // namespace hs::reports::detail
