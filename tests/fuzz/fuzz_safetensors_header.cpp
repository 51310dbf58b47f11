// fuzz_safetensors_header.cpp — a safetensors file's header (safetensors_header.cpp), the bytes
// being the whole file. Every bad file must end in a std::runtime_error; an accepted header must
// describe tensors inside the file, back to back, each exactly as large as its shape says.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <string>

#include "hybridscope/trainer/model/safetensors_header.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  try {
    const auto entries = hs::trainer::read_safetensors_header(in, size, "fuzz.safetensors");
    std::uint64_t total = 0;
    for (const auto& e : entries) {
      std::uint64_t elements = 1;
      for (const auto d : e.shape) elements *= static_cast<std::uint64_t>(d);
      if (e.bytes != elements * hs::trainer::safetensors_element_size(e.dtype)) std::abort();
      if (e.offset + e.bytes > size || e.bytes > size) std::abort();  // a tensor past the file's end
      total += e.bytes;
    }
    if (total > size) std::abort();
  } catch (const std::runtime_error&) {
  }
  return 0;
}
