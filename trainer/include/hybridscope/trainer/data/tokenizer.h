// tokenizer.h — text <-> token ids. Deliberately free of LibTorch.
//
// The Tokenizer interface is what the trainer, dataset and rollout use; CharTokenizer is the
// built-in one for the verifiable tasks in datasets/, BpeTokenizer (bpe_tokenizer.h) a
// HuggingFace tokenizer.json or tiktoken vocabulary. make_text_setup (text_setup.h) is the one
// place that picks.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "hybridscope/trainer/config/config.h"

namespace hs::trainer {

class TokenizerError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  /// Token ids of `text`, without bos/eos. Throws TokenizerError on a character it cannot encode.
  virtual std::vector<std::int32_t> encode(std::string_view text) const = 0;
  /// Text of `ids`; special tokens (pad/bos/eos) are dropped when skip_special_tokens.
  virtual std::string decode(const std::vector<std::int32_t>& ids, bool skip_special_tokens = true) const = 0;
  virtual int vocab_size() const = 0;
  virtual int pad_token_id() const = 0;
  virtual int bos_token_id() const = 0;
  virtual int eos_token_id() const = 0;
  virtual std::string name() const = 0;
  /// Ids that end a response (the rollout stops at any of them): eos, and for a HuggingFace model
  /// every eos_token_id of its generation_config.json (Qwen2.5-Instruct: <|im_end|> and
  /// <|endoftext|>).
  virtual std::vector<std::int32_t> stop_token_ids() const { return {eos_token_id()}; }
};

/// Character tokenizer: 0 <pad>, 1 <bos>, 2 <eos>, then printable ASCII 32..126 (ids 3..97).
class CharTokenizer final : public Tokenizer {
 public:
  std::vector<std::int32_t> encode(std::string_view text) const override;
  std::string decode(const std::vector<std::int32_t>& ids, bool skip_special_tokens = true) const override;
  int vocab_size() const override { return kCharTokenizerVocabSize; }
  int pad_token_id() const override { return 0; }
  int bos_token_id() const override { return 1; }
  int eos_token_id() const override { return 2; }
  std::string name() const override { return "char"; }
};

/// The built-in tokenizer `kind` names (char); hf is read from a directory (text_setup.h).
std::unique_ptr<Tokenizer> make_tokenizer(TokenizerKind kind);


}  // namespace hs::trainer
