// diagnosis_rules_rl.h — the rules over the RL-role analyses (role_idle.h, weight_sync.h): the
// rollout-/train-bound verdict and the repeated weight sync. Defined in diagnosis_rules_rl.cpp,
// listed in diagnosis_rules() (diagnosis_rules.cpp). Private to hs_reports.
#pragma once

#include <optional>

#include "hybridscope/reports/diagnosis.h"

namespace hs::reports::detail {

/// `role-bound`: the waiting role's idle ratio above thresholds.role_idle.
std::optional<Finding> role_bound(const RunAnalysis& analysis, const DiagnosisThresholds& thresholds);
/// `weight-sync-repeated`: more than thresholds.syncs_per_step weight syncs in a measured step.
std::optional<Finding> weight_sync_repeated(const RunAnalysis& analysis, const DiagnosisThresholds& thresholds);

}  // namespace hs::reports::detail
