// fuzz_tokenizer_json.cpp — tokenizer.json (bpe_tokenizer_load.cpp): every bad file must end in a
// TokenizerError; a file that loads must encode and decode a fixed text containing invalid UTF-8,
// added-token text and whitespace runs without crashing.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>

#include "hybridscope/trainer/data/bpe_tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string path = "/tmp/hs_fuzz_tokenizer_" + std::to_string(::getpid()) + ".json";
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  try {
    const auto tok = hs::trainer::BpeTokenizer::from_tokenizer_json(path);
    const auto ids = tok.encode("Hello  world\n\n<|im_start|>caf\xC3\xA9 \xFF\xFE 12345 \xF0\x9F\x98\x80");
    (void)tok.decode(ids, true);
    (void)tok.decode(ids, false);
  } catch (const hs::trainer::TokenizerError&) {
  }
  return 0;
}
