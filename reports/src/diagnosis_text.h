// diagnosis_text.h — the number formatting and config look-ups the diagnosis rules share, so that
// every finding quotes seconds, shares, bytes, step ranges and config keys the same way.
// Private to hs_reports (diagnosis.cpp defines these; diagnosis_rules.cpp uses them).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "hybridscope/reports/diagnosis.h"
#include "text_format.h"

namespace hs::reports::detail {

/// "key=value" for Finding::config_keys; "key=(not in the run's config)" when the run lacks it,
/// "key=(not in the source)" for an imported run, which has no config at all.
std::string key_with_value(const RunData& data, const std::string& key);
/// "key (now value)" for a suggestion's sentence; "key (not in the run's config)" when absent
/// ("not in the source" for an imported run).
std::string key_now(const RunData& data, const std::string& key);
/// Appends key_with_value() of each key to finding.config_keys.
void name_keys(Finding& finding, const RunData& data, std::initializer_list<const char*> keys);

/// "rank 2" or "ranks 0, 1" (a role's or a pool's ranks, in the order given).
std::string ranks_text(const std::vector<int>& ranks);

/// kCritical when `impact` (share of the step at stake) exceeds thresholds.critical_share, else kWarning.
Severity severity_for(double impact, const DiagnosisThresholds& thresholds);

}  // namespace hs::reports::detail
