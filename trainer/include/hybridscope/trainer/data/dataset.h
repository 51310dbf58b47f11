// dataset.h — verl-style JSONL datasets: loading, prompt encoding, truncation, batching order.
// Deliberately free of LibTorch.
//
// Row fields follow verl: data_source, prompt (chat messages [{"role": "user", "content": ...}]
// rendered by the tokenizer's chat template, or concatenated for the char tokenizer, which has
// none; a plain string is one user message), ability, reward_model.{style, ground_truth},
// extra_info (kept as JSON text).
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "hybridscope/trainer/config/config.h"
#include "hybridscope/trainer/data/chat_template.h"
#include "hybridscope/trainer/data/tokenizer.h"

namespace hs::trainer {

/// A bad data file or row; the message names the file and 1-based line.
class DataError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Example {
  std::string data_source;
  std::string prompt;                    // the prompt text: the chat template's rendering, or the joined contents
  std::string ability;
  std::string reward_style;              // reward_model.style ("rule")
  std::string ground_truth;              // reward_model.ground_truth
  std::string extra_info_json;           // extra_info as compact JSON ("{}" if absent)
  std::vector<std::int32_t> prompt_ids;  // encoded, bos first, after truncation
  std::string file;
  int line = 0;
};

class RLDataset {
 public:
  /// Reads every row of `path` (JSONL). `prompt_key` names the prompt field. Prompts longer than
  /// max_prompt_length tokens: dropped with data.filter_overlong_prompts (counted in filtered()),
  /// else an error (naming file:line and the keys data.max_prompt_length / data.truncation), or
  /// cut on the left/right as verl does.
  /// With `chat_template` the prompt's messages (a plain string: one user message) are rendered
  /// with the generation prompt and tokenized as they are (the template writes any bos); without
  /// one their contents are joined and bos is put first.
  static RLDataset load(const std::string& path, const Tokenizer& tokenizer, const DataConfig& data,
                        const ChatTemplate* chat_template = nullptr);

  std::size_t size() const { return examples_.size(); }
  const Example& operator[](std::size_t i) const { return examples_.at(i); }
  const std::vector<Example>& examples() const { return examples_; }
  /// Rows dropped by data.filter_overlong_prompts.
  std::size_t filtered() const { return filtered_; }

 private:
  std::vector<Example> examples_;
  std::size_t filtered_ = 0;
};

/// Epoch-based sampler over dataset indices with drop_last (as verl's StatefulDataLoader):
/// a seeded permutation per epoch when shuffling. Its position is saved in checkpoints.
class DataLoader {
 public:
  struct State {
    std::int64_t epoch = 0;
    std::int64_t batch_in_epoch = 0;
  };

  DataLoader(std::size_t dataset_size, std::size_t batch_size, bool shuffle, std::uint64_t seed);

  /// Indices of the next batch; moves to the next epoch (new permutation) when one is exhausted.
  std::vector<std::size_t> next_batch();
  std::size_t batches_per_epoch() const;
  State state() const { return state_; }
  void set_state(const State& state);

 private:
  std::vector<std::size_t> permutation(std::int64_t epoch) const;

  std::size_t dataset_size_;
  std::size_t batch_size_;
  bool shuffle_;
  std::uint64_t seed_;
  State state_{};
  std::vector<std::size_t> order_;  // permutation of the current epoch
  std::int64_t order_epoch_ = -1;
};

}  // namespace hs::trainer
