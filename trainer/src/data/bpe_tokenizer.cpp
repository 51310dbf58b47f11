// bpe_tokenizer.cpp — byte-level BPE encoding and decoding (the loaders are in
// bpe_tokenizer_load.cpp). The order of steps and every tie-break follow HuggingFace `tokenizers`
// 0.2x: added_vocabulary.rs (find_matches), pre_tokenizers/split.rs (Isolated), byte_level.rs,
// models/bpe/word.rs (merge_all: a heap of (rank, position), stale entries skipped).
#include "bpe_tokenizer_impl.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <unicode/normalizer2.h>
#include <unicode/bytestream.h>
#include <unicode/uchar.h>
#include <unicode/utf8.h>

#include <algorithm>
#include <cstring>
#include <queue>

namespace hs::trainer {
namespace detail {

// ---- merge table --------------------------------------------------------------------------------

void MergeTable::reserve(std::size_t entries) {
  std::size_t capacity = 16;
  while (capacity < entries * 2) capacity *= 2;
  if (capacity <= slots_.size()) return;
  std::vector<Entry> old = std::move(slots_);
  slots_.assign(capacity, Entry{});
  mask_ = capacity - 1;
  size_ = 0;
  for (const Entry& e : old) {
    if (e.key != kEmpty) insert(static_cast<int>(e.key >> 32), static_cast<int>(e.key & 0xffffffffu), e.rank, e.merged);
  }
}

void MergeTable::grow() { reserve(slots_.size()); }  // doubles: capacity >= 2 * slots_.size()

void MergeTable::insert(int left, int right, int rank, int merged) {
  if ((size_ + 1) * 2 > slots_.size()) grow();
  const std::uint64_t key = pack(left, right);
  std::size_t slot = hash(key) & mask_;
  while (slots_[slot].key != kEmpty) {
    if (slots_[slot].key == key) {
      if (rank < slots_[slot].rank) slots_[slot] = Entry{key, rank, merged};
      return;
    }
    slot = (slot + 1) & mask_;
  }
  slots_[slot] = Entry{key, rank, merged};
  ++size_;
}

// ---- PCRE2 --------------------------------------------------------------------------------------

SplitRegex::SplitRegex(const std::string& pattern, bool literal, const std::string& where) : pattern_(pattern) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  const std::uint32_t options = PCRE2_UTF | PCRE2_UCP | (literal ? PCRE2_LITERAL : 0u);
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), options,
                                   &error, &offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    throw TokenizerError(where + ": pattern does not compile with PCRE2 (" +
                         reinterpret_cast<const char*>(message) + " at offset " + std::to_string(offset) +
                         "); the tokenizer's regex must be PCRE2/Oniguruma-compatible");
  }
  // JIT is a speed-up only: where the platform lacks it, pcre2_match interprets the same pattern.
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  code_ = code;
}

SplitRegex::~SplitRegex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

/// PCRE2 state for matching on one thread: match data (room for 32 groups; the split patterns
/// use none, and only group 0 is read) and a JIT stack larger than the 32 KiB default, so a long
/// run of one character class (a 1 MB line of digits) does not exhaust it. One per thread, made
/// on first use (thread_local): creating it per encode call cost ~10 us, most of a short prompt.
class MatchScratch {
 public:
  static const MatchScratch& for_this_thread() {
    thread_local const MatchScratch scratch;
    return scratch;
  }
  ~MatchScratch() { release(); }
  MatchScratch(const MatchScratch&) = delete;
  MatchScratch& operator=(const MatchScratch&) = delete;
  pcre2_match_data* data() const { return data_; }
  pcre2_match_context* context() const { return context_; }

 private:
  MatchScratch()
      : data_(pcre2_match_data_create(32, nullptr)),
        context_(pcre2_match_context_create(nullptr)),
        stack_(pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr)) {
    if (data_ == nullptr || context_ == nullptr || stack_ == nullptr) {
      release();
      throw TokenizerError("bpe tokenizer: out of memory allocating PCRE2 match data");
    }
    pcre2_jit_stack_assign(context_, nullptr, stack_);
  }
  void release() {
    if (data_ != nullptr) pcre2_match_data_free(data_);
    if (context_ != nullptr) pcre2_match_context_free(context_);
    if (stack_ != nullptr) pcre2_jit_stack_free(stack_);
    data_ = nullptr;
    context_ = nullptr;
    stack_ = nullptr;
  }
  pcre2_match_data* data_;
  pcre2_match_context* context_;
  pcre2_jit_stack* stack_;
};

// ---- added tokens -------------------------------------------------------------------------------

void AddedTokenMatcher::add(std::string pattern, const AddedToken* token) {
  if (pattern.empty()) return;  // HF never matches an empty added token either
  patterns_.emplace_back(std::move(pattern), token);
}

void AddedTokenMatcher::finish() {
  for (auto& bucket : by_first_byte_) bucket.clear();
  for (std::uint32_t i = 0; i < patterns_.size(); ++i) {
    by_first_byte_[static_cast<unsigned char>(patterns_[i].first[0])].push_back(i);
  }
  for (auto& bucket : by_first_byte_) {  // longest first; equal lengths: the earlier token
    std::stable_sort(bucket.begin(), bucket.end(), [this](std::uint32_t a, std::uint32_t b) {
      return patterns_[a].first.size() > patterns_[b].first.size();
    });
  }
}

int AddedTokenMatcher::longest_at(std::string_view text, std::size_t pos) const {
  const auto& bucket = by_first_byte_[static_cast<unsigned char>(text[pos])];
  for (const std::uint32_t i : bucket) {
    const std::string& p = patterns_[i].first;
    if (text.size() - pos >= p.size() && std::memcmp(text.data() + pos, p.data(), p.size()) == 0) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

// ---- Unicode helpers ----------------------------------------------------------------------------

namespace {

/// Rust's char::is_whitespace is the White_Space property.
bool is_whitespace(UChar32 c) { return u_isUWhiteSpace(c) != 0; }

/// HF's single_word test: c.is_alphanumeric() || c == '_' (Rust: Alphabetic, or Nd/Nl/No).
bool is_word_char(UChar32 c) {
  if (c == '_') return true;
  if (u_hasBinaryProperty(c, UCHAR_ALPHABETIC)) return true;
  const auto type = u_charType(c);
  return type == U_DECIMAL_DIGIT_NUMBER || type == U_LETTER_NUMBER || type == U_OTHER_NUMBER;
}

UChar32 last_char(std::string_view text, std::size_t* bytes) {
  auto end = static_cast<std::int32_t>(text.size());
  UChar32 c = 0;
  U8_PREV(reinterpret_cast<const std::uint8_t*>(text.data()), 0, end, c);
  *bytes = text.size() - static_cast<std::size_t>(end);
  return c;
}

UChar32 first_char(std::string_view text, std::size_t* bytes) {
  std::int32_t i = 0;
  UChar32 c = 0;
  U8_NEXT(reinterpret_cast<const std::uint8_t*>(text.data()), i, static_cast<std::int32_t>(text.size()), c);
  *bytes = static_cast<std::size_t>(i);
  return c;
}

}  // namespace

std::size_t trailing_whitespace_bytes(std::string_view text) {
  std::size_t total = 0;
  while (total < text.size()) {
    std::size_t bytes = 0;
    if (!is_whitespace(last_char(text.substr(0, text.size() - total), &bytes))) break;
    total += bytes;
  }
  return total;
}

std::size_t leading_whitespace_bytes(std::string_view text) {
  std::size_t total = 0;
  while (total < text.size()) {
    std::size_t bytes = 0;
    if (!is_whitespace(first_char(text.substr(total), &bytes))) break;
    total += bytes;
  }
  return total;
}

bool ends_with_word_char(std::string_view text) {
  std::size_t bytes = 0;
  return !text.empty() && is_word_char(last_char(text, &bytes));
}

bool starts_with_word_char(std::string_view text) {
  std::size_t bytes = 0;
  return !text.empty() && is_word_char(first_char(text, &bytes));
}

std::string nfc(std::string_view text) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* normalizer = icu::Normalizer2::getNFCInstance(status);
  if (U_FAILURE(status)) throw TokenizerError(std::string("ICU: NFC normaliser unavailable: ") + u_errorName(status));
  const icu::StringPiece piece(text.data(), static_cast<std::int32_t>(text.size()));
  if (normalizer->isNormalizedUTF8(piece, status) && U_SUCCESS(status)) return std::string(text);
  status = U_ZERO_ERROR;
  std::string out;
  out.reserve(text.size());
  icu::StringByteSink<std::string> sink(&out);
  normalizer->normalizeUTF8(0, piece, sink, nullptr, status);
  if (U_FAILURE(status)) throw TokenizerError(std::string("ICU: NFC normalisation failed: ") + u_errorName(status));
  return out;
}

const std::array<char32_t, 256>& bytes_to_unicode() {
  // GPT-2 (openai/gpt-2 encoder.py): printable Latin-1 bytes ('!'..'~', '¡'..'¬', '®'..'ÿ') stand
  // for themselves; the other 68 bytes map, in byte order, to U+0100, U+0101, ...
  static const std::array<char32_t, 256> table = [] {
    std::array<char32_t, 256> t{};
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      t[static_cast<std::size_t>(b)] = printable ? static_cast<char32_t>(b) : next++;
    }
    return t;
  }();
  return table;
}

}  // namespace detail

namespace {

/// Length of the valid UTF-8 sequence starting at s[i], or 0 with *valid_prefix set to the number
/// of bytes that begin a valid sequence (Unicode's "maximal subpart", at least 1).
std::size_t utf8_sequence(const unsigned char* s, std::size_t n, std::size_t i, std::size_t* valid_prefix) {
  const unsigned char b0 = s[i];
  if (b0 < 0x80) return 1;
  std::size_t need = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) { need = 1; }
  else if (b0 == 0xE0) { need = 2; lo = 0xA0; }
  else if ((b0 >= 0xE1 && b0 <= 0xEC) || b0 == 0xEE || b0 == 0xEF) { need = 2; }
  else if (b0 == 0xED) { need = 2; hi = 0x9F; }
  else if (b0 == 0xF0) { need = 3; lo = 0x90; }
  else if (b0 >= 0xF1 && b0 <= 0xF3) { need = 3; }
  else if (b0 == 0xF4) { need = 3; hi = 0x8F; }
  else { *valid_prefix = 1; return 0; }
  std::size_t k = 1;
  for (; k <= need; ++k) {
    if (i + k >= n) break;
    const unsigned char b = s[i + k];
    const bool ok = k == 1 ? (b >= lo && b <= hi) : (b >= 0x80 && b <= 0xBF);
    if (!ok) break;
  }
  if (k == need + 1) return need + 1;
  *valid_prefix = k;
  return 0;
}

void check_utf8(std::string_view text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  for (std::size_t i = 0; i < text.size();) {
    if (s[i] < 0x80) { ++i; continue; }
    std::size_t prefix = 0;
    const std::size_t len = utf8_sequence(s, text.size(), i, &prefix);
    if (len == 0) {
      throw TokenizerError("bpe tokenizer: text is not valid UTF-8 at byte offset " + std::to_string(i) +
                           "; decode the input as UTF-8 (or replace invalid bytes) before encoding");
    }
    i += len;
  }
}

/// String::from_utf8_lossy: each maximal invalid subpart becomes U+FFFD.
std::string utf8_lossy(const std::string& bytes) {
  const auto* s = reinterpret_cast<const unsigned char*>(bytes.data());
  std::string out;
  out.reserve(bytes.size());
  for (std::size_t i = 0; i < bytes.size();) {
    std::size_t prefix = 0;
    const std::size_t len = utf8_sequence(s, bytes.size(), i, &prefix);
    if (len > 0) {
      out.append(bytes, i, len);
      i += len;
    } else {
      out += "\xEF\xBF\xBD";
      i += prefix;
    }
  }
  return out;
}

}  // namespace

// ---- BPE ----------------------------------------------------------------------------------------

void BpeTokenizer::Impl::merge_word(std::string_view word, std::vector<std::int32_t>& out) const {
  // models/bpe/word.rs: symbols in a linked list; a min-heap of candidate merges ordered by
  // (rank, position of the left symbol); a popped candidate is applied only if both symbols still
  // exist and still form that pair.
  struct Symbol {
    std::int32_t id;
    std::int32_t prev;
    std::int32_t next;
    std::int32_t len;  // bytes; 0 once merged into its left neighbour
  };
  struct Candidate {
    std::int32_t rank;
    std::int32_t pos;
    std::int32_t merged;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  const auto n = static_cast<std::int32_t>(word.size());
  std::vector<Symbol> symbols(static_cast<std::size_t>(n));
  for (std::int32_t i = 0; i < n; ++i) {
    symbols[static_cast<std::size_t>(i)] = Symbol{byte_id[static_cast<unsigned char>(word[static_cast<std::size_t>(i)])],
                                                  i - 1, i + 1 < n ? i + 1 : -1, 1};
  }
  std::vector<Candidate> storage;
  storage.reserve(static_cast<std::size_t>(n));
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> heap(std::greater<Candidate>(),
                                                                                      std::move(storage));
  for (std::int32_t i = 0; i + 1 < n; ++i) {
    if (const auto* m = merges.find(symbols[static_cast<std::size_t>(i)].id, symbols[static_cast<std::size_t>(i + 1)].id)) {
      heap.push(Candidate{m->rank, i, m->merged});
    }
  }
  while (!heap.empty()) {
    const Candidate top = heap.top();
    heap.pop();
    Symbol& left = symbols[static_cast<std::size_t>(top.pos)];
    if (left.len == 0 || left.next < 0) continue;
    Symbol& right = symbols[static_cast<std::size_t>(left.next)];
    const auto* m = merges.find(left.id, right.id);
    if (m == nullptr || m->merged != top.merged) continue;
    left.id = top.merged;
    left.len += right.len;
    right.len = 0;
    left.next = right.next;
    if (left.next >= 0) symbols[static_cast<std::size_t>(left.next)].prev = top.pos;
    if (left.prev >= 0) {
      if (const auto* p = merges.find(symbols[static_cast<std::size_t>(left.prev)].id, left.id)) {
        heap.push(Candidate{p->rank, left.prev, p->merged});
      }
    }
    if (left.next >= 0) {
      if (const auto* p = merges.find(left.id, symbols[static_cast<std::size_t>(left.next)].id)) {
        heap.push(Candidate{p->rank, top.pos, p->merged});
      }
    }
  }
  for (std::int32_t i = 0; i >= 0; i = symbols[static_cast<std::size_t>(i)].next) {
    out.push_back(symbols[static_cast<std::size_t>(i)].id);
  }
}

void BpeTokenizer::Impl::bpe(std::string_view word, std::vector<std::int32_t>& out) const {
  if (word.size() == 1) {
    out.push_back(byte_id[static_cast<unsigned char>(word[0])]);
    return;
  }
  if (ignore_merges) {
    if (const auto it = vocab.find(word); it != vocab.end()) {
      out.push_back(it->second);
      return;
    }
  }
  const bool cacheable = word.size() < kCacheMaxWordBytes;
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex);
    if (const auto it = cache.find(word); it != cache.end()) {
      out.insert(out.end(), cache_ids.begin() + it->second.first,
                 cache_ids.begin() + it->second.first + it->second.second);
      return;
    }
  }
  const std::size_t first = out.size();
  merge_word(word, out);
  if (!cacheable) return;
  std::lock_guard<std::mutex> lock(cache_mutex);
  if (cache.size() >= kCacheMaxEntries) {
    cache.clear();
    cache_keys.clear();
    cache_ids.clear();
  }
  if (cache.count(word) != 0) return;  // another thread added it meanwhile
  cache_keys.emplace_back(word);
  const auto offset = static_cast<std::uint32_t>(cache_ids.size());
  cache_ids.insert(cache_ids.end(), out.begin() + static_cast<std::ptrdiff_t>(first), out.end());
  cache.emplace(std::string_view(cache_keys.back()), std::make_pair(offset, static_cast<std::uint32_t>(out.size() - first)));
}

void BpeTokenizer::Impl::index_vocab(const std::string& where) {
  vocab.clear();
  vocab.reserve(id_bytes.size());
  for (std::size_t id = 0; id < id_bytes.size(); ++id) {
    if (has_id[id]) vocab.emplace(std::string_view(id_bytes[id]), static_cast<int>(id));
  }
  for (int b = 0; b < 256; ++b) {
    const auto it = vocab.find(std::string_view(std::string(1, static_cast<char>(b))));
    if (it == vocab.end()) {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "0x%02X", b);
      throw TokenizerError(where + ": the vocabulary has no token for byte " + hex +
                           "; a byte-level BPE needs all 256 single-byte tokens");
    }
    byte_id[static_cast<std::size_t>(b)] = it->second;
  }
}

void BpeTokenizer::Impl::index_added_tokens() {
  added_index_by_id.clear();
  raw_matcher = detail::AddedTokenMatcher{};
  norm_matcher = detail::AddedTokenMatcher{};
  for (std::size_t i = 0; i < added.size(); ++i) {
    const AddedToken& token = added[i];
    added_index_by_id[token.id] = i;
    if (token.normalized) {
      norm_matcher.add(normalization == TextNormalization::kNfc ? detail::nfc(token.content) : token.content, &token);
    } else {
      raw_matcher.add(token.content, &token);
    }
    vocab_size = std::max(vocab_size, token.id + 1);
  }
  raw_matcher.finish();
  norm_matcher.finish();
  vocab_size = std::max(vocab_size, static_cast<int>(id_bytes.size()));
}

// ---- BpeTokenizer -------------------------------------------------------------------------------

BpeTokenizer::BpeTokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
BpeTokenizer::BpeTokenizer(BpeTokenizer&&) noexcept = default;
BpeTokenizer& BpeTokenizer::operator=(BpeTokenizer&&) noexcept = default;
BpeTokenizer::~BpeTokenizer() = default;

std::vector<std::int32_t> BpeTokenizer::encode(std::string_view text) const {
  check_utf8(text);
  const Impl& m = *impl_;
  std::vector<std::int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  const detail::MatchScratch& scratch = detail::MatchScratch::for_this_thread();
  auto* code = static_cast<pcre2_code*>(m.split_regex->code());
  std::string prefixed;  // ByteLevel{add_prefix_space}: the piece with a leading ' '

  // One piece of text between added tokens, already normalised: pre-tokenize and BPE. Split with
  // behavior Isolated: every match is a pre-token and so is every gap between matches.
  auto pre_tokenize = [&](std::string_view piece) {
    if (piece.empty()) return;
    if (m.add_prefix_space && piece.front() != ' ') {
      prefixed.assign(1, ' ');
      prefixed.append(piece);
      piece = prefixed;
    }
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
    std::size_t offset = 0;
    std::size_t emitted = 0;
    while (offset < piece.size()) {
      const int rc = pcre2_match(code, subject, piece.size(), offset, PCRE2_NO_UTF_CHECK, scratch.data(), scratch.context());
      if (rc == PCRE2_ERROR_NOMATCH) break;
      if (rc < 0) {  // 0 is a match whose groups did not fit: group 0 is still set
        PCRE2_UCHAR message[256];
        pcre2_get_error_message(rc, message, sizeof(message));
        throw TokenizerError("bpe tokenizer " + m.name + ": pre-tokenizer regex failed (" +
                             reinterpret_cast<const char*>(message) + ")");
      }
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(scratch.data());
      const std::size_t start = ov[0];
      const std::size_t end = ov[1];
      if (end == start) {  // an empty match splits nothing; move one character on
        offset = start + 1;
        while (offset < piece.size() && (static_cast<unsigned char>(piece[offset]) & 0xC0) == 0x80) ++offset;
        continue;
      }
      if (start > emitted) m.bpe(piece.substr(emitted, start - emitted), ids);
      m.bpe(piece.substr(start, end - start), ids);
      emitted = offset = end;
    }
    if (emitted < piece.size()) m.bpe(piece.substr(emitted), ids);
  };

  auto normalised_piece = [&](std::string_view piece, const AddedToken* token) {
    if (token != nullptr) {
      ids.push_back(token->id);
      return;
    }
    std::string normalised;
    if (m.normalization == TextNormalization::kNfc &&
        std::any_of(piece.begin(), piece.end(), [](char c) { return static_cast<unsigned char>(c) >= 0x80; })) {
      normalised = detail::nfc(piece);
      piece = normalised;
    }
    if (m.norm_matcher.empty()) {
      pre_tokenize(piece);
    } else {
      m.norm_matcher.split(piece, [&](std::string_view p, const AddedToken* t) {
        if (t != nullptr) ids.push_back(t->id);
        else pre_tokenize(p);
      });
    }
  };
  m.raw_matcher.split(text, normalised_piece);
  return ids;
}

std::string BpeTokenizer::decode(const std::vector<std::int32_t>& ids, bool skip_special_tokens) const {
  const Impl& m = *impl_;
  std::string bytes;
  bytes.reserve(ids.size() * 4);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const std::int32_t id = ids[i];
    if (const auto it = m.added_index_by_id.find(id); it != m.added_index_by_id.end()) {
      const AddedToken& token = m.added[it->second];
      if (!(skip_special_tokens && token.special)) bytes += token.content;
      continue;
    }
    if (id < 0 || static_cast<std::size_t>(id) >= m.id_bytes.size() || !m.has_id[static_cast<std::size_t>(id)]) {
      throw TokenizerError("bpe tokenizer " + m.name + " cannot decode id " + std::to_string(id) + " at position " +
                           std::to_string(i) + ": not in the vocabulary (vocab_size " +
                           std::to_string(m.vocab_size) + ")");
    }
    bytes += m.id_bytes[static_cast<std::size_t>(id)];
  }
  return utf8_lossy(bytes);
}

int BpeTokenizer::vocab_size() const { return impl_->vocab_size; }
int BpeTokenizer::pad_token_id() const { return impl_->pad_id; }
int BpeTokenizer::bos_token_id() const { return impl_->bos_id; }
int BpeTokenizer::eos_token_id() const { return impl_->eos_id; }
std::string BpeTokenizer::name() const { return impl_->name; }

std::optional<int> BpeTokenizer::token_to_id(std::string_view token) const {
  for (const AddedToken& t : impl_->added) {
    if (t.content == token) return t.id;
  }
  if (const auto it = impl_->vocab.find(token); it != impl_->vocab.end()) return it->second;
  return std::nullopt;
}

std::string BpeTokenizer::id_to_token(int id) const {
  if (const auto it = impl_->added_index_by_id.find(id); it != impl_->added_index_by_id.end()) {
    return impl_->added[it->second].content;
  }
  if (id < 0 || static_cast<std::size_t>(id) >= impl_->id_bytes.size() || !impl_->has_id[static_cast<std::size_t>(id)]) {
    throw TokenizerError("bpe tokenizer " + impl_->name + ": id " + std::to_string(id) + " is not in the vocabulary");
  }
  return impl_->id_bytes[static_cast<std::size_t>(id)];
}

std::vector<int> BpeTokenizer::special_token_ids() const {
  std::vector<int> ids;
  for (const AddedToken& t : impl_->added) {
    if (t.special) ids.push_back(t.id);
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

const std::vector<AddedToken>& BpeTokenizer::added_tokens() const { return impl_->added; }

void BpeTokenizer::set_special_token_ids(int pad_id, int bos_id, int eos_id) {
  impl_->pad_id = pad_id;
  impl_->bos_id = bos_id;
  impl_->eos_id = eos_id;
}

void BpeTokenizer::clear_cache() const {
  std::lock_guard<std::mutex> lock(impl_->cache_mutex);
  impl_->cache.clear();
  impl_->cache_keys.clear();
  impl_->cache_ids.clear();
}

void BpeTokenizer::set_name(std::string name) { impl_->name = std::move(name); }

}  // namespace hs::trainer
