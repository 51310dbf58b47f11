// safetensors_header.h — a safetensors file's header, read and checked without LibTorch
// (hs_trainer_core): the loader (safetensors.cpp) reads a file's tensors through it, and the fuzz
// target tests/fuzz/fuzz_safetensors_header.cpp feeds it arbitrary bytes.
//
// Format (https://huggingface.co/docs/safetensors): an 8-byte little-endian header length N, N
// bytes of JSON {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__":
// {str: str}}, then the tensors' raw little-endian bytes, offsets relative to the end of the
// header, covering the data without holes or overlaps.
#pragma once

#include <cstdint>
#include <istream>
#include <string>
#include <vector>

namespace hs::trainer {

/// One tensor of a safetensors file, located but not read.
struct SafetensorsEntry {
  std::string name;
  std::string dtype;               // "F32", "BF16", ... (one of safetensors_dtypes())
  std::vector<std::int64_t> shape;
  std::uint64_t offset = 0;        // of its first byte from the start of the file
  std::uint64_t bytes = 0;         // element size x elements
};

/// The dtypes read and written here with their element sizes: F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL.
std::size_t safetensors_element_size(const std::string& dtype);  // 0: not one of them

/// Reads the header from `in` (positioned at the file's start; `file_size` bytes long) and checks
/// it: the length fits the file (and 100 MiB), the JSON is an object, every entry has a known
/// dtype, a non-negative shape whose byte size does not overflow, data_offsets [begin, end] that
/// hold exactly that many bytes inside the data section, and the tensors cover the data section
/// without holes or overlaps. Entries in header order. Throws std::runtime_error starting with
/// `where` and naming the tensor and the problem.
std::vector<SafetensorsEntry> read_safetensors_header(std::istream& in, std::uint64_t file_size,
                                                      const std::string& where);

}  // namespace hs::trainer
