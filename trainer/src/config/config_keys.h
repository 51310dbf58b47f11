// config_keys.h — the table of configuration keys that config_loader.cpp walks (private).
//
// One row per key: its verl path, the Config member it fills (as a pair of accessors, so the
// loader can read and write without knowing the member) and a one-line meaning. The enum
// spellings live here too, beside the keys that use them. Nothing outside trainer/src sees this.
#pragma once

#include "hybridscope/trainer/config/config.h"

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace hs::trainer::detail {

// ---------------------------------------------------------------------------------------------
// Enum spellings (verl's). The first spelling of a value is the canonical one that to_string and
// to_yaml write; later ones are accepted aliases. Spelling, EnumSpellings, canonical_name,
// enum_from_name and the spellings of the enums a run database's readers branch on are in
// config_values.h (shared with hs_reports); the rest are here.

template <>
struct EnumSpellings<AdvEstimator> {
  static constexpr Spelling<AdvEstimator> kAll[] = {
      {AdvEstimator::kGae, "gae"},
      {AdvEstimator::kGrpo, "grpo"},
      {AdvEstimator::kRloo, "rloo"},
      {AdvEstimator::kReinforcePlusPlus, "reinforce_plus_plus"},
      {AdvEstimator::kReinforcePlusPlusBaseline, "reinforce_plus_plus_baseline"},
      {AdvEstimator::kRemax, "remax"},
      {AdvEstimator::kOpo, "opo"},
      {AdvEstimator::kGrpoPassk, "grpo_passk"},
      {AdvEstimator::kGpg, "gpg"}};
};
template <>
struct EnumSpellings<LossAggMode> {
  static constexpr Spelling<LossAggMode> kAll[] = {
      {LossAggMode::kTokenMean, "token-mean"},
      {LossAggMode::kSeqMeanTokenSum, "seq-mean-token-sum"},
      {LossAggMode::kSeqMeanTokenMean, "seq-mean-token-mean"},
      {LossAggMode::kSeqMeanTokenSumNorm, "seq-mean-token-sum-norm"}};
};
template <>
struct EnumSpellings<PolicyLossMode> {
  static constexpr Spelling<PolicyLossMode> kAll[] = {
      {PolicyLossMode::kVanilla, "vanilla"},
      {PolicyLossMode::kGspo, "gspo"},
      {PolicyLossMode::kGpg, "gpg"},
      {PolicyLossMode::kClipCov, "clip_cov"},
      {PolicyLossMode::kKlCov, "kl_cov"}};
};
template <>
struct EnumSpellings<KlPenalty> {
  static constexpr Spelling<KlPenalty> kAll[] = {
      {KlPenalty::kKl, "kl"},          {KlPenalty::kKl, "k1"},
      {KlPenalty::kAbs, "abs"},        {KlPenalty::kMse, "mse"},
      {KlPenalty::kMse, "k2"},         {KlPenalty::kLowVarKl, "low_var_kl"},
      {KlPenalty::kLowVarKl, "k3"}};
};
template <>
struct EnumSpellings<KlCtrlType> {
  static constexpr Spelling<KlCtrlType> kAll[] = {{KlCtrlType::kFixed, "fixed"},
                                                  {KlCtrlType::kAdaptive, "adaptive"}};
};
template <>
struct EnumSpellings<Truncation> {
  static constexpr Spelling<Truncation> kAll[] = {
      {Truncation::kError, "error"}, {Truncation::kLeft, "left"}, {Truncation::kRight, "right"}};
};
template <>
struct EnumSpellings<WarmupStyle> {
  static constexpr Spelling<WarmupStyle> kAll[] = {{WarmupStyle::kConstant, "constant"},
                                                   {WarmupStyle::kCosine, "cosine"}};
};
template <>
struct EnumSpellings<ResumeMode> {
  static constexpr Spelling<ResumeMode> kAll[] = {{ResumeMode::kAuto, "auto"}, {ResumeMode::kDisable, "disable"}};
};
template <>
struct EnumSpellings<DistBackendChoice> {
  static constexpr Spelling<DistBackendChoice> kAll[] = {{DistBackendChoice::kAuto, "auto"},
                                                         {DistBackendChoice::kGloo, "gloo"},
                                                         {DistBackendChoice::kNccl, "nccl"}};
};
template <>
struct EnumSpellings<AttentionKernel> {
  static constexpr Spelling<AttentionKernel> kAll[] = {
      {AttentionKernel::kAuto, "auto"}, {AttentionKernel::kSdpa, "sdpa"}, {AttentionKernel::kEager, "eager"},
      {AttentionKernel::kFlash, "flash"}};
};
template <>
struct EnumSpellings<CpuMatmul> {
  static constexpr Spelling<CpuMatmul> kAll[] = {{CpuMatmul::kOneDnn, "onednn"}, {CpuMatmul::kBlas, "blas"}};
};
template <>
struct EnumSpellings<RewardRule> {
  static constexpr Spelling<RewardRule> kAll[] = {{RewardRule::kGsm8k, "gsm8k"}};
};

template <>
struct EnumSpellings<RewardManager> {
  static constexpr Spelling<RewardManager> kAll[] = {{RewardManager::kNaive, "naive"}, {RewardManager::kDapo, "dapo"}};
};
template <>
struct EnumSpellings<FilterGroupsMetric> {
  static constexpr Spelling<FilterGroupsMetric> kAll[] = {{FilterGroupsMetric::kAcc, "acc"},
                                                          {FilterGroupsMetric::kScore, "score"},
                                                          {FilterGroupsMetric::kSeqReward, "seq_reward"}};
};
template <>
struct EnumSpellings<RolloutCorrectionLevel> {
  static constexpr Spelling<RolloutCorrectionLevel> kAll[] = {{RolloutCorrectionLevel::kNull, "null"},
                                                              {RolloutCorrectionLevel::kToken, "token"},
                                                              {RolloutCorrectionLevel::kSequence, "sequence"},
                                                              {RolloutCorrectionLevel::kGeometric, "geometric"}};
};

template <>
struct EnumSpellings<TokenizerKind> {
  static constexpr Spelling<TokenizerKind> kAll[] = {{TokenizerKind::kAuto, "auto"}, {TokenizerKind::kChar, "char"},
                                                     {TokenizerKind::kHf, "hf"}};
};
template <>
struct EnumSpellings<ModelArchitecture> {
  static constexpr Spelling<ModelArchitecture> kAll[] = {{ModelArchitecture::kLlama, "llama"},
                                                         {ModelArchitecture::kQwen2, "qwen2"},
                                                         {ModelArchitecture::kQwen3, "qwen3"}};
};

template <>
struct EnumSpellings<AsyncMode> {
  static constexpr Spelling<AsyncMode> kAll[] = {{AsyncMode::kSync, "sync"},
                                                 {AsyncMode::kOneStepOff, "one_step_off"},
                                                 {AsyncMode::kFullyAsync, "fully_async"}};
};

template <>
struct EnumSpellings<OnWriteError> {
  static constexpr Spelling<OnWriteError> kAll[] = {{OnWriteError::kContinue, "continue"},
                                                    {OnWriteError::kStop, "stop"}};
};



// ---------------------------------------------------------------------------------------------
// The key table.

using StringList = std::vector<std::string>;
using IntList = std::vector<int>;
using NumberPair = std::array<double, 2>;

template <class T>
struct Field {
  T* (*get)(Config&);
  const T* (*view)(const Config&);
};

using AnyField = std::variant<Field<bool>, Field<int>, Field<std::uint64_t>, Field<double>,
                              Field<std::string>, Field<StringList>, Field<IntList>, Field<NumberPair>,
                              Field<AdvEstimator>, Field<LossAggMode>, Field<PolicyLossMode>, Field<KlPenalty>,
                              Field<KlCtrlType>, Field<Truncation>, Field<ActorStrategy>,
                              Field<WarmupStyle>, Field<ResumeMode>, Field<DeviceKind>,
                              Field<DistBackendChoice>, Field<ReshardMode>, Field<Precision>,
                              Field<AttentionKernel>, Field<CpuMatmul>, Field<RewardRule>, Field<TokenizerKind>,
                              Field<ModelArchitecture>, Field<OnWriteError>, Field<AsyncMode>,
                              Field<RewardManager>, Field<FilterGroupsMetric>, Field<RolloutCorrectionLevel>>;

struct Key {
  std::string path;  // verl's dotted path, identical to the member path in Config
  AnyField field;
  const char* doc;
};

/// Every key in table order; each section's keys are contiguous (to_yaml nests by walking it).
const std::vector<Key>& keys();

/// A default-constructed Config (what `key: null` restores).
const Config& defaults();

/// The name of `names` closest to `wanted` by edit distance, when one is close enough to be a
/// useful "did you mean" (config_loader.cpp; validate() uses it for list items).
std::optional<std::string> nearest_name(std::string_view wanted, const std::vector<std::string>& names);

}  // namespace hs::trainer::detail
