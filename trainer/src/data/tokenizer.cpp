// tokenizer.cpp — the built-in character tokenizer and the factory that picks a tokenizer by name.
//
// The char vocabulary is fixed: 0 <pad>, 1 <bos>, 2 <eos>, then printable ASCII 32..126 as ids
// 3..97. It is deliberately not byte-level: a character outside that range (a newline, a tab,
// any non-ASCII byte) is a data error the user should see, not a silent <unk>.
#include "hybridscope/trainer/data/tokenizer.h"

#include <cstdio>
#include <string>

namespace hs::trainer {
namespace {

constexpr int kFirstPrintable = 32;   // ' '
constexpr int kLastPrintable = 126;   // '~'
constexpr int kFirstCharId = 3;       // id of ' '
constexpr int kVocabSize = kFirstCharId + (kLastPrintable - kFirstPrintable + 1);  // 98
static_assert(kVocabSize == kCharTokenizerVocabSize, "CharTokenizer::vocab_size() promises kCharTokenizerVocabSize ids");

/// A character as a reader can recognise it in an error message: 'a', '\n', or 0xC3.
std::string describe_char(unsigned char c) {
  switch (c) {
    case '\n': return "'\\n' (0x0A)";
    case '\r': return "'\\r' (0x0D)";
    case '\t': return "'\\t' (0x09)";
    default: break;
  }
  char buf[8];
  std::snprintf(buf, sizeof(buf), "0x%02X", static_cast<unsigned>(c));
  if (c >= kFirstPrintable && c <= kLastPrintable) {
    return std::string("'") + static_cast<char>(c) + "' (" + buf + ")";
  }
  return buf;
}

}  // namespace

std::vector<std::int32_t> CharTokenizer::encode(std::string_view text) const {
  std::vector<std::int32_t> ids;
  ids.reserve(text.size());
  for (std::size_t pos = 0; pos < text.size(); ++pos) {
    const auto c = static_cast<unsigned char>(text[pos]);
    if (c < kFirstPrintable || c > kLastPrintable) {
      throw TokenizerError("char tokenizer cannot encode character " + describe_char(c) +
                           " at position " + std::to_string(pos) +
                           " (0-based byte offset); it encodes printable ASCII 32..126 only");
    }
    ids.push_back(static_cast<std::int32_t>(c - kFirstPrintable + kFirstCharId));
  }
  return ids;
}

std::string CharTokenizer::decode(const std::vector<std::int32_t>& ids, bool skip_special_tokens) const {
  static const char* const kSpecialText[kFirstCharId] = {"<pad>", "<bos>", "<eos>"};
  std::string text;
  text.reserve(ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const std::int32_t id = ids[i];
    if (id < 0 || id >= kVocabSize) {
      throw TokenizerError("char tokenizer cannot decode id " + std::to_string(id) + " at position " +
                           std::to_string(i) + "; valid ids are 0.." + std::to_string(kVocabSize - 1));
    }
    if (id < kFirstCharId) {
      if (!skip_special_tokens) text += kSpecialText[id];
      continue;
    }
    text += static_cast<char>(id - kFirstCharId + kFirstPrintable);
  }
  return text;
}

std::unique_ptr<Tokenizer> make_tokenizer(TokenizerKind kind) {
  switch (kind) {
    case TokenizerKind::kChar: return std::make_unique<CharTokenizer>();
    case TokenizerKind::kAuto:
    case TokenizerKind::kHf:
      throw TokenizerError(std::string("hybridscope.tokenizer = ") + to_string(kind) +
                           " depends on the config's directories: use make_text_setup (text_setup.h)");
  }
  throw std::logic_error("make_tokenizer: a TokenizerKind outside the enum");
}

}  // namespace hs::trainer
