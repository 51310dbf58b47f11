// bpe_tokenizer_impl.h — BpeTokenizer's private state, shared by the encoder/decoder
// (bpe_tokenizer.cpp) and the loaders (bpe_tokenizer_load.cpp). Not installed.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "hybridscope/trainer/data/bpe_tokenizer.h"

namespace hs::trainer::detail {

/// (left id, right id) -> (merge rank, merged id), open addressing with linear probing: the BPE
/// loop's only lookup, so it avoids std::unordered_map's node chasing. Capacity is a power of two
/// at least twice the entry count (load <= 0.5).
class MergeTable {
 public:
  struct Entry {
    std::uint64_t key = kEmpty;
    std::int32_t rank = 0;
    std::int32_t merged = 0;
  };
  void reserve(std::size_t entries);
  /// Adds a merge; an existing pair keeps its lower rank (HF keeps the first listed).
  void insert(int left, int right, int rank, int merged);
  const Entry* find(int left, int right) const {
    const std::uint64_t key = pack(left, right);
    std::size_t slot = hash(key) & mask_;
    while (true) {
      const Entry& e = slots_[slot];
      if (e.key == key) return &e;
      if (e.key == kEmpty) return nullptr;
      slot = (slot + 1) & mask_;
    }
  }
  std::size_t size() const { return size_; }

 private:
  static constexpr std::uint64_t kEmpty = ~std::uint64_t{0};
  static std::uint64_t pack(int left, int right) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(left)) << 32) |
           static_cast<std::uint32_t>(right);
  }
  static std::size_t hash(std::uint64_t key) {  // splitmix64's finaliser
    key ^= key >> 30; key *= 0xbf58476d1ce4e5b9ULL;
    key ^= key >> 27; key *= 0x94d049bb133111ebULL;
    return static_cast<std::size_t>(key ^ (key >> 31));
  }
  void grow();
  std::vector<Entry> slots_ = std::vector<Entry>(16);
  std::size_t mask_ = 15;
  std::size_t size_ = 0;
};

/// A compiled PCRE2 pattern (UTF + UCP, JIT where available). Thread-safe to match from many
/// threads: each call brings its own match data (MatchScratch).
class SplitRegex {
 public:
  /// Throws TokenizerError "<where>: <pcre2 message> at offset N" when the pattern does not compile.
  SplitRegex(const std::string& pattern, bool literal, const std::string& where);
  ~SplitRegex();
  SplitRegex(const SplitRegex&) = delete;
  SplitRegex& operator=(const SplitRegex&) = delete;
  void* code() const { return code_; }  // pcre2_code_8*
  const std::string& pattern() const { return pattern_; }

 private:
  void* code_ = nullptr;
  std::string pattern_;
};

/// Leftmost-longest literal matching of added tokens (HF: aho-corasick MatchKind::LeftmostLongest),
/// bucketed by first byte. Tokens are few (Qwen2.5: 22, Llama 3: 256), so a bucket scan is cheap.
class AddedTokenMatcher {
 public:
  /// `pattern` is what is matched (the content, or its normalised form for normalized tokens).
  void add(std::string pattern, const AddedToken* token);
  void finish();  // sorts each bucket longest first
  bool empty() const { return patterns_.empty(); }
  /// Calls emit(piece, token) for each piece of `text` in order: token == nullptr for text between
  /// matches. lstrip/rstrip/single_word as HF's AddedVocabulary::find_matches.
  template <typename Emit>
  void split(std::string_view text, Emit&& emit) const;

 private:
  std::vector<std::pair<std::string, const AddedToken*>> patterns_;
  std::array<std::vector<std::uint32_t>, 256> by_first_byte_{};
  // Which pattern matches longest at `pos` (-1: none).
  int longest_at(std::string_view text, std::size_t pos) const;
};

// Unicode helpers (ICU), exposed for the matcher template below and the loaders.
/// Bytes of the whitespace characters (Rust char::is_whitespace, i.e. White_Space) ending text.
std::size_t trailing_whitespace_bytes(std::string_view text);
/// Bytes of the whitespace characters starting text.
std::size_t leading_whitespace_bytes(std::string_view text);
/// Whether text ends / starts with a word character (alphanumeric or '_', as HF's single_word).
bool ends_with_word_char(std::string_view text);
bool starts_with_word_char(std::string_view text);
/// NFC of valid UTF-8 (ICU Normalizer2, UTF-8 in and out; ASCII and already-NFC text returned as is).
std::string nfc(std::string_view text);
/// GPT-2's bytes_to_unicode table: the code point each byte is written as in tokenizer.json.
const std::array<char32_t, 256>& bytes_to_unicode();

template <typename Emit>
void AddedTokenMatcher::split(std::string_view text, Emit&& emit) const {
  if (patterns_.empty()) {
    if (!text.empty()) emit(text, nullptr);
    return;
  }
  std::size_t start_offset = 0;  // first byte not yet emitted
  std::size_t pos = 0;           // where the matcher searches next (after the raw match)
  while (pos < text.size()) {
    const int which = longest_at(text, pos);
    if (which < 0) {
      ++pos;
      continue;
    }
    const auto& [pattern, token] = patterns_[static_cast<std::size_t>(which)];
    std::size_t start = pos;
    std::size_t stop = pos + pattern.size();
    pos = stop;
    if (token->single_word && (ends_with_word_char(text.substr(0, start)) ||
                               starts_with_word_char(text.substr(stop)))) {
      continue;
    }
    if (token->lstrip) {
      const std::size_t new_start = start - trailing_whitespace_bytes(text.substr(0, start));
      start = new_start > start_offset ? new_start : start_offset;
    }
    if (token->rstrip) stop += leading_whitespace_bytes(text.substr(stop));
    if (start_offset < start) emit(text.substr(start_offset, start - start_offset), nullptr);
    emit(text.substr(start, stop - start), token);
    start_offset = stop;
  }
  if (start_offset < text.size()) emit(text.substr(start_offset), nullptr);
}

}  // namespace hs::trainer::detail

namespace hs::trainer {

struct BpeTokenizer::Impl {
  // The BPE model. id_bytes[id] are the raw bytes of vocabulary token `id` (has_id[id] false for
  // ids that only added tokens use); vocab maps those bytes back, its keys viewing id_bytes.
  std::vector<std::string> id_bytes;
  std::vector<char> has_id;
  std::unordered_map<std::string_view, int> vocab;
  detail::MergeTable merges;
  std::array<int, 256> byte_id{};  // id of each single byte (all 256 required)
  bool ignore_merges = false;      // a pre-token that is itself a vocabulary token is not merged

  // Normaliser and pre-tokenizer.
  TextNormalization normalization = TextNormalization::kNone;
  std::unique_ptr<detail::SplitRegex> split_regex;
  bool add_prefix_space = false;  // ByteLevel{add_prefix_space}: " " before a piece not starting with one

  // Added tokens: raw_matcher for normalized=false ones (matched before normalising), norm_matcher
  // for normalized=true ones (matched in the normalised pieces).
  std::vector<AddedToken> added;
  std::unordered_map<int, std::size_t> added_index_by_id;
  detail::AddedTokenMatcher raw_matcher;
  detail::AddedTokenMatcher norm_matcher;

  int pad_id = -1;
  int bos_id = -1;
  int eos_id = -1;
  int vocab_size = 0;
  std::string name;

  // Pre-token -> ids cache (HF caches words under 256 characters too). Keys view cache_keys;
  // values are (offset, count) into cache_ids. Cleared whole when it reaches kCacheMaxEntries.
  static constexpr std::size_t kCacheMaxEntries = std::size_t{1} << 20;
  static constexpr std::size_t kCacheMaxWordBytes = 256;
  mutable std::mutex cache_mutex;
  mutable std::unordered_map<std::string_view, std::pair<std::uint32_t, std::uint32_t>> cache;
  mutable std::deque<std::string> cache_keys;
  mutable std::vector<std::int32_t> cache_ids;

  /// Fills vocab from id_bytes and checks every byte has an id; `where` names the file for errors.
  void index_vocab(const std::string& where);
  /// Builds the matchers from `added` (after it is complete and will not move).
  void index_added_tokens();
  /// BPE of one pre-token's bytes, appended to out.
  void bpe(std::string_view word, std::vector<std::int32_t>& out) const;
  void merge_word(std::string_view word, std::vector<std::int32_t>& out) const;
};

}  // namespace hs::trainer
