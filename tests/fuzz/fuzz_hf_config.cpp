// fuzz_hf_config.cpp — a model directory's config.json (hf_config.cpp). Every bad input must end in
// an HfConfigError naming the file; a parsed config must write back and parse to the same shape.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "hybridscope/trainer/model/hf_config.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const auto parsed = hs::trainer::parse_hf_config(text, "config.json");
    const auto again = hs::trainer::parse_hf_config(hs::trainer::hf_config_json(parsed.shape, false, "float32"), "written");
    if (again.shape.head_dim() != parsed.shape.head_dim() || again.shape.architecture != parsed.shape.architecture ||
        again.shape.rope_theta != parsed.shape.rope_theta) {
      std::abort();  // what hybridscope writes must read back as the same model
    }
  } catch (const hs::trainer::HfConfigError&) {
  }
  return 0;
}
