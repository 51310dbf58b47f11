// fuzz_tiktoken.cpp — a tiktoken rank file (base64 token, space, rank per line; Qwen's
// qwen.tiktoken), read by BpeTokenizer::from_tiktoken with Qwen's split pattern and one special
// token. Every bad file must end in a TokenizerError; a file that loads must encode and decode a
// fixed text without crashing.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>

#include "hybridscope/trainer/data/bpe_tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string path = "/tmp/hs_fuzz_tiktoken_" + std::to_string(::getpid()) + ".tiktoken";
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  static const std::string kPattern =
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  try {
    const auto tok = hs::trainer::BpeTokenizer::from_tiktoken(path, kPattern, {{"<|endoftext|>", 1 << 20}});
    const auto ids = tok.encode("Hello  world\n\n<|endoftext|>caf\xC3\xA9 12345 \xF0\x9F\x98\x80");
    (void)tok.decode(ids, true);
    (void)tok.decode(ids, false);
  } catch (const hs::trainer::TokenizerError&) {
  }
  return 0;
}
