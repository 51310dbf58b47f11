// safetensors_header.cpp — the header of a safetensors file (see safetensors_header.h).
#include "hybridscope/trainer/model/safetensors_header.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace hs::trainer {

namespace {

using Json = nlohmann::ordered_json;

constexpr std::uint64_t kMaxHeaderBytes = 100u << 20;  // as the reference implementation

struct Dtype {
  const char* name;
  std::size_t size;
};
constexpr Dtype kDtypes[] = {{"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8},
                             {"I32", 4}, {"I16", 2}, {"I8", 1},  {"U8", 1},   {"BOOL", 1}};

void require_little_endian() {
  const std::uint16_t probe = 1;
  unsigned char first = 0;
  std::memcpy(&first, &probe, 1);
  if (first != 1) throw std::runtime_error("safetensors I/O needs a little-endian host");
}

}  // namespace

std::size_t safetensors_element_size(const std::string& dtype) {
  for (const auto& d : kDtypes)
    if (dtype == d.name) return d.size;
  return 0;
}

std::vector<SafetensorsEntry> read_safetensors_header(std::istream& in, std::uint64_t file_size,
                                                      const std::string& where) {
  require_little_endian();
  unsigned char length[8];
  if (file_size < 8 || !in.read(reinterpret_cast<char*>(length), 8))
    throw std::runtime_error(where + ": shorter than the 8-byte header length");
  std::uint64_t header_size = 0;
  for (int i = 7; i >= 0; --i) header_size = (header_size << 8) | length[i];
  if (header_size > kMaxHeaderBytes || header_size > file_size - 8) {
    throw std::runtime_error(where + ": header length " + std::to_string(header_size) + " does not fit the file (" +
                             std::to_string(file_size) + " bytes)");
  }
  std::string text(header_size, '\0');
  if (!in.read(text.data(), static_cast<std::streamsize>(header_size)))
    throw std::runtime_error(where + ": cannot read its " + std::to_string(header_size) + "-byte header");
  Json header;
  try {
    header = Json::parse(text);
  } catch (const Json::exception& e) {
    throw std::runtime_error(where + ": header is not valid JSON: " + e.what());
  }
  if (!header.is_object()) throw std::runtime_error(where + ": header is not a JSON object");

  const std::uint64_t data_start = 8 + header_size;
  const std::uint64_t data_size = file_size - data_start;
  std::vector<SafetensorsEntry> entries;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;
  for (const auto& item : header.items()) {
    if (item.key() == "__metadata__") continue;
    const auto& entry = item.value();
    const std::string what = where + ": tensor '" + item.key() + "'";
    SafetensorsEntry e;
    e.name = item.key();
    std::uint64_t begin = 0, end = 0;
    try {
      e.dtype = entry.at("dtype").get<std::string>();
      // Integers only: nlohmann converts a float such as 5e29 to an integer type unchecked (UB).
      const auto& shape = entry.at("shape");
      const auto& offsets = entry.at("data_offsets");
      if (!shape.is_array()) throw std::runtime_error(what + ": shape must be an array of integers");
      for (const auto& d : shape) {
        if (!d.is_number_integer()) throw std::runtime_error(what + ": shape must be an array of integers");
        e.shape.push_back(d.get<std::int64_t>());
      }
      if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
          !offsets[1].is_number_unsigned())
        throw std::runtime_error(what + ": data_offsets must be [begin, end], two non-negative integers");
      begin = offsets[0].get<std::uint64_t>();
      end = offsets[1].get<std::uint64_t>();
    } catch (const Json::exception& ex) {
      throw std::runtime_error(what + ": malformed entry: " + ex.what());
    }
    const std::size_t element = safetensors_element_size(e.dtype);
    if (element == 0) throw std::runtime_error(what + ": unsupported dtype '" + e.dtype + "'");
    // Elements x element size, refusing what does not fit 64 bits (a wrapped product could
    // otherwise match the offsets and describe a tensor far larger than the file).
    std::uint64_t bytes = element;
    for (const auto d : e.shape) {
      if (d < 0) throw std::runtime_error(what + ": negative dimension");
      const auto ud = static_cast<std::uint64_t>(d);
      if (ud != 0 && bytes > std::numeric_limits<std::uint64_t>::max() / ud)
        throw std::runtime_error(what + ": its shape holds more bytes than 64 bits count");
      bytes *= ud;
    }
    e.bytes = bytes;
    if (begin > end || end > data_size || end - begin != e.bytes) {
      throw std::runtime_error(what + ": data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                               "] do not hold " + std::to_string(e.bytes) + " bytes inside the " +
                               std::to_string(data_size) + "-byte data section");
    }
    e.offset = data_start + begin;
    ranges.emplace_back(begin, end);
    entries.push_back(std::move(e));
  }
  // The data section is exactly the tensors, back to back in some order.
  std::sort(ranges.begin(), ranges.end());
  std::uint64_t covered = 0;
  for (const auto& [begin, end] : ranges) {
    if (begin != covered) throw std::runtime_error(where + ": tensors overlap or leave a hole in the data");
    covered = end;
  }
  if (covered != data_size)
    throw std::runtime_error(where + ": " + std::to_string(data_size - covered) + " trailing bytes not covered by any tensor");
  return entries;
}

}  // namespace hs::trainer
