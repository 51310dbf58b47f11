// tokenizer_goldens.h — where the tokenizer tests find the peers' goldens, written by the CTest
// fixture `tokenizer_goldens` (make_tokenizer_goldens.py) into HS_TOKENIZER_GOLDENS_DIR.
#pragma once

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace hs::trainer::testing {

inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

/// The goldens file `name`, or a skip reason when the fixture found no peer python. Missing goldens
/// without that reason are a failure: run the tests through ctest (which runs the fixture first).
inline bool load_goldens(const std::string& name, nlohmann::json* out, std::string* skip_reason) {
  const std::filesystem::path dir(HS_TOKENIZER_GOLDENS_DIR);
  if (std::filesystem::exists(dir / "SKIPPED")) {
    *skip_reason = "no peer tokenizers: " + read_text((dir / "SKIPPED").string());
    return false;
  }
  const auto path = dir / name;
  if (!std::filesystem::exists(path)) {
    ADD_FAILURE() << path << " missing: run `ctest -R tokenizer` (its fixture runs "
                  << "tests/trainer/data/make_tokenizer_goldens.py --out " << dir << ")";
    return false;
  }
  *out = nlohmann::json::parse(read_text(path.string()));
  return true;
}

}  // namespace hs::trainer::testing
