// config_values.h — the values of the config keys that readers of a run database branch on
// (hybridscope.reshard.mode, actor_rollout_ref.actor.strategy, trainer.device, hybridscope.precision),
// as enums with their spellings, and the spelling table's machinery. Part of the one key table: the
// trainer's loader, to_string and to_yaml take these spellings (config_keys.h holds the others), and
// the reports parse the text a run recorded with them (recorded_config_value) instead of comparing
// strings in place.
//
// Header only and std only, its own target (hs::config_values): hs_reports links it without the
// trainer, LibTorch or yaml-cpp (HS_BUILD_TRAINER=OFF builds it too).
#pragma once

#include <optional>
#include <string_view>

namespace hs::trainer {

/// actor.strategy: the training layout along dp — fsdp shards parameters, gradients and optimizer
/// state over dp (ZeRO-3, zero.h), megatron replicates them (layout.h, DpSharding).
enum class ActorStrategy { kFsdp, kMegatron };
/// trainer.device: where the models live.
enum class DeviceKind { kCpu, kCuda };
/// hybridscope.reshard.mode: how the generation layout's ranks are grouped (and how the planner
/// gathers; layout.h, reshard.h).
enum class ReshardMode {
  kHybrid,   // HybridFlow: generation TP groups at stride t/t_g, micro-DP groups consecutive
  kVanilla,  // HybridFlow-V: gather the whole TP×PP group, then slice
  kNaive,    // DS-Chat: gather the full model on every rank, then slice
};
/// hybridscope.precision: fp32, or bf16 compute over fp32 master weights (docs/config.md).
enum class Precision { kFp32, kBf16 };

namespace detail {

template <class E>
struct Spelling {
  E value;
  const char* name;
};

template <class E>
struct EnumSpellings;

template <>
struct EnumSpellings<ActorStrategy> {
  static constexpr Spelling<ActorStrategy> kAll[] = {{ActorStrategy::kFsdp, "fsdp"},
                                                     {ActorStrategy::kMegatron, "megatron"}};
};
template <>
struct EnumSpellings<DeviceKind> {
  static constexpr Spelling<DeviceKind> kAll[] = {{DeviceKind::kCpu, "cpu"}, {DeviceKind::kCuda, "cuda"}};
};
template <>
struct EnumSpellings<ReshardMode> {
  static constexpr Spelling<ReshardMode> kAll[] = {
      {ReshardMode::kHybrid, "hybrid"}, {ReshardMode::kVanilla, "vanilla"}, {ReshardMode::kNaive, "naive"}};
};
template <>
struct EnumSpellings<Precision> {
  static constexpr Spelling<Precision> kAll[] = {{Precision::kFp32, "fp32"}, {Precision::kBf16, "bf16"}};
};

template <class E>
const char* canonical_name(E value) {
  for (const auto& s : EnumSpellings<E>::kAll) {
    if (s.value == value) return s.name;
  }
  return "<invalid>";  // only reachable through a cast of an out-of-range integer
}

template <class E>
std::optional<E> enum_from_name(std::string_view name) {
  for (const auto& s : EnumSpellings<E>::kAll) {
    if (name == s.name) return s.value;
  }
  return std::nullopt;
}

}  // namespace detail

/// The value of E that a run database's recorded text of its key names (reports::RunData::config_value);
/// nullopt when the text is no spelling of E (an imported run's own words, a newer trainer's value).
/// E is one of the enums above.
template <class E>
std::optional<E> recorded_config_value(std::string_view text) {
  return detail::enum_from_name<E>(text);
}

}  // namespace hs::trainer
