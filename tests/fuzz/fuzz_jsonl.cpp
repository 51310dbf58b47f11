// fuzz_jsonl.cpp — verl's JSONL rows (dataset.cpp) through the char tokenizer: every bad row must
// end in a DataError (or ConfigError) naming the file and line.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>

#include "hybridscope/trainer/data/dataset.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string path = "/tmp/hs_fuzz_rows_" + std::to_string(::getpid()) + ".jsonl";
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  static const hs::trainer::CharTokenizer tok;
  hs::trainer::DataConfig config;
  config.max_prompt_length = 64;
  config.truncation = hs::trainer::Truncation::kLeft;
  try {
    const auto ds = hs::trainer::RLDataset::load(path, tok, config);
    for (const auto& ex : ds.examples()) (void)tok.decode(ex.prompt_ids, true);
  } catch (const hs::trainer::DataError&) {
  } catch (const hs::trainer::ConfigError&) {
  }
  return 0;
}
