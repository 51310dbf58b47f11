// fuzz_config.cpp — the YAML config and its key=value overrides (config_loader.cpp, validate()).
// Input: YAML text, then after a NUL byte one override per line. Every bad input must end in a
// ConfigError; anything else (a crash, a sanitizer report, another exception) is a finding.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "hybridscope/trainer/config/config.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  const auto nul = input.find('\0');
  const std::string yaml = input.substr(0, nul);
  std::vector<std::string> overrides;
  if (nul != std::string::npos) {
    std::string rest = input.substr(nul + 1);
    std::size_t start = 0;
    while (start <= rest.size()) {
      const auto end = rest.find('\n', start);
      overrides.push_back(rest.substr(start, end == std::string::npos ? std::string::npos : end - start));
      if (end == std::string::npos) break;
      start = end + 1;
    }
  }
  try {
    const hs::trainer::Config config = hs::trainer::parse_config(yaml, overrides, "fuzz.yaml");
    (void)hs::trainer::to_yaml(config);
  } catch (const hs::trainer::ConfigError&) {
  }
  return 0;
}
