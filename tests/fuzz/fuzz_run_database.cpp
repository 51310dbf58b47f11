// fuzz_run_database.cpp — opening a run database (reports' RunDatabase): a truncated file, a file
// that is not ours, a damaged one must end in a RunDatabaseError; one that opens must list its runs.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>

#include "hybridscope/reports/run_database.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string path = "/tmp/hs_fuzz_run_" + std::to_string(::getpid()) + ".sqlite";
  std::remove(path.c_str());
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  try {
    const hs::reports::RunDatabase db(path);
    for (const auto& run : db.runs()) (void)run;
  } catch (const hs::reports::RunDatabaseError&) {
  }
  return 0;
}
