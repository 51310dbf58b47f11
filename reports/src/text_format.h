// text_format.h — how hs_reports writes numbers for people: one set of formats for the diagnosis
// findings, the console and every report format, so a figure reads the same wherever it appears.
// Private to hs_reports.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hs::reports::detail {

/// Up to 4 significant digits, without exponent below 1e6 ("12.35", "0.001234", "1234", "61234");
/// "n/a" for NaN, "inf" for infinities.
std::string format_number(double value);
/// 0.642 -> "64.2 %"; "n/a" for NaN.
std::string format_percent(double fraction);
/// Seconds with a unit that suits them: "372 ms", "12.35 s", "850 µs"; "n/a" for NaN.
std::string format_seconds(double seconds);
/// Binary units: "51.0 MiB", "1.2 GiB", "512 B".
std::string format_bytes(double bytes);
/// "steps 2–10" (first to last), "step 3", or "no measured steps".
std::string format_steps(const std::vector<std::int64_t>& steps);

}  // namespace hs::reports::detail
