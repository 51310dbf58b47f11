// config_values_test.cpp — the reports read a run's recorded enum keys with the trainer's spellings
// (config_values.h, hs::config_values): what the trainer writes is what the rules branch on, and
// text that is no spelling (an imported run's own words) is no value rather than a wrong one.
#include <gtest/gtest.h>

#include "hybridscope/trainer/config_values.h"

namespace hs::trainer {
namespace {

TEST(ConfigValues, ReadWhatTheTrainerWrites) {
  // Every canonical name the trainer writes (to_string, to_yaml, the run's config table) reads back.
  for (const auto& s : detail::EnumSpellings<ReshardMode>::kAll)
    EXPECT_EQ(recorded_config_value<ReshardMode>(s.name), s.value) << s.name;
  for (const auto& s : detail::EnumSpellings<ActorStrategy>::kAll)
    EXPECT_EQ(recorded_config_value<ActorStrategy>(s.name), s.value) << s.name;
  EXPECT_EQ(recorded_config_value<ReshardMode>("hybrid"), ReshardMode::kHybrid);
  EXPECT_EQ(recorded_config_value<DeviceKind>("cuda"), DeviceKind::kCuda);
  EXPECT_EQ(recorded_config_value<Precision>("bf16"), Precision::kBf16);
  EXPECT_EQ(detail::canonical_name(ReshardMode::kNaive), std::string("naive"));
}

TEST(ConfigValues, TextThatIsNoSpellingIsNoValue) {
  EXPECT_EQ(recorded_config_value<ActorStrategy>("fsdp2"), std::nullopt);  // verl's, recorded by an import
  EXPECT_EQ(recorded_config_value<ReshardMode>("Hybrid"), std::nullopt);   // spellings are exact
  EXPECT_EQ(recorded_config_value<Precision>(""), std::nullopt);
}

}  // namespace
}  // namespace hs::trainer
