// diagnosis_text.h — the number formatting and config look-ups the diagnosis rules share, so that
// every finding quotes seconds, shares, bytes, step ranges and config keys the same way.
// Private to hs_reports (diagnosis.cpp defines these; diagnosis_rules.cpp uses them).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "hybridscope/reports/diagnosis.h"

namespace hs::reports::detail {

/// "1.23 s" from 1 s up, "372 ms" from 10 ms, "4.56 ms" below.
std::string format_seconds(double seconds);
/// A share 0..1 as "64.0 %".
std::string format_percent(double share);
/// "1.50 GiB", "51.0 MiB", "12.0 KiB", "512 B" (binary units).
std::string format_bytes(std::int64_t bytes);
/// "steps 2–10" (first to last), "step 3", or "no measured steps".
std::string format_steps(const std::vector<std::int64_t>& steps);

/// "key=value" for Finding::config_keys; "key=(not in the run's config)" when the run lacks it.
std::string key_with_value(const RunData& data, const std::string& key);
/// "key (now value)" for a suggestion's sentence; "key (not in the run's config)" when absent.
std::string key_now(const RunData& data, const std::string& key);
/// Appends key_with_value() of each key to finding.config_keys.
void name_keys(Finding& finding, const RunData& data, std::initializer_list<const char*> keys);

/// kCritical when `impact` (share of the step at stake) exceeds thresholds.critical_share, else kWarning.
Severity severity_for(double impact, const DiagnosisThresholds& thresholds);

}  // namespace hs::reports::detail
