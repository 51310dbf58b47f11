// dataset.cpp — verl-format JSONL rows -> Examples, and the epoch sampler that orders them.
//
// Every problem in a data file is reported as `<file>:<line>: <what> — <what to do>` with a
// 1-based line number, so a user can open the file at the offending row. The sampler's
// permutation is built from std::mt19937_64 (fully specified by the standard) and our own
// Fisher-Yates with unbiased bounded draws, so the same (seed, epoch) gives the same order with
// every standard library; std::shuffle and std::uniform_int_distribution do not promise that.
#include "hybridscope/trainer/data/dataset.h"

#include <algorithm>
#include <fstream>
#include <numeric>
#include <random>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

namespace hs::trainer {
namespace {

using nlohmann::json;

/// "file:line: " prefix of every row error.
std::string where(const std::string& file, int line) { return file + ":" + std::to_string(line) + ": "; }

/// Type name for messages ("number", "array", ...).
std::string type_of(const json& j) { return j.type_name(); }

/// The prompt as chat messages: a list of {"role", "content"} objects, or a plain string taken as
/// one user message.
std::vector<ChatMessage> prompt_messages(const json& prompt, const std::string& prompt_key, const std::string& at) {
  if (prompt.is_string()) return {ChatMessage{"user", prompt.get<std::string>()}};
  const std::string expected = "prompt '" + prompt_key + "' (data.prompt_key) must be a string or a list of "
                               "{\"role\": ..., \"content\": ...} messages";
  if (!prompt.is_array()) throw DataError(at + expected + ", got " + type_of(prompt));
  if (prompt.empty()) throw DataError(at + expected + ", got an empty list");
  std::vector<ChatMessage> messages;
  for (std::size_t i = 0; i < prompt.size(); ++i) {
    const json& message = prompt[i];
    const std::string item = " (message " + std::to_string(i) + ")";
    if (!message.is_object()) throw DataError(at + expected + item + ": got " + type_of(message));
    const auto role = message.find("role");
    const auto content = message.find("content");
    if (role == message.end() || !role->is_string()) {
      throw DataError(at + expected + item + ": 'role' is missing or not a string");
    }
    if (content == message.end() || !content->is_string()) {
      throw DataError(at + expected + item + ": 'content' is missing or not a string");
    }
    messages.push_back({role->get<std::string>(), content->get<std::string>()});
  }
  return messages;
}

/// The prompt text: with a chat template, the messages rendered with the generation prompt (verl's
/// apply_chat_template(add_generation_prompt=True)); without one, their contents concatenated in
/// order (the char tokenizer has no template, so roles do not appear in the text).
std::string prompt_text(const std::vector<ChatMessage>& messages, const ChatTemplate* chat, const std::string& at) {
  if (chat != nullptr) {
    try {
      return chat->apply(messages, /*add_generation_prompt=*/true);
    } catch (const TokenizerError& e) {
      throw DataError(at + "the chat template cannot render this prompt: " + e.what());
    }
  }
  std::string text;
  for (const auto& m : messages) text += m.content;
  return text;
}

/// An optional string field; empty when absent, an error when present with another type.
std::string optional_string(const json& row, const char* key, const std::string& at) {
  const auto it = row.find(key);
  if (it == row.end() || it->is_null()) return {};
  if (!it->is_string()) throw DataError(at + "'" + key + "' must be a string, got " + type_of(*it));
  return it->get<std::string>();
}

/// Applies data.max_prompt_length / data.truncation to the encoded prompt (bos included).
void truncate_prompt(std::vector<std::int32_t>& ids, const DataConfig& data, const std::string& at) {
  const auto limit = static_cast<std::size_t>(data.max_prompt_length);
  if (ids.size() <= limit) return;
  switch (data.truncation) {
    case Truncation::kError:
      throw DataError(at + "prompt is " + std::to_string(ids.size()) +
                      " tokens (bos included), longer than data.max_prompt_length=" +
                      std::to_string(data.max_prompt_length) +
                      " with data.truncation=error; raise data.max_prompt_length or set data.truncation "
                      "to left or right");
    case Truncation::kLeft:  // keep the end of the prompt (verl: input_ids[-max_length:])
      ids.erase(ids.begin(), ids.end() - static_cast<std::ptrdiff_t>(limit));
      return;
    case Truncation::kRight:  // keep the start of the prompt (verl: input_ids[:max_length])
      ids.resize(limit);
      return;
  }
}

Example parse_row(const std::string& line_text, const std::string& file, int line, const Tokenizer& tokenizer,
                  const DataConfig& data, const ChatTemplate* chat) {
  const std::string at = where(file, line);
  json row;
  try {
    row = json::parse(line_text);
  } catch (const json::parse_error& e) {
    // nlohmann's text counts lines within this one row ("line 1, column 20: ..."); keep only its
    // explanation and give the column, since the file line is already in `at`.
    std::string detail = e.what();
    const auto column = detail.find("column ");
    const auto colon = column == std::string::npos ? std::string::npos : detail.find(": ", column);
    if (colon != std::string::npos) detail = detail.substr(colon + 2);
    throw DataError(at + "not valid JSON at column " + std::to_string(e.byte) + " (" + detail +
                    "); each line must hold one JSON object");
  }
  if (!row.is_object()) throw DataError(at + "a row must be a JSON object, got " + type_of(row));

  Example ex;
  ex.file = file;
  ex.line = line;

  const auto prompt = row.find(data.prompt_key);
  if (prompt == row.end()) {
    throw DataError(at + "missing prompt key '" + data.prompt_key +
                    "' (data.prompt_key); add it to the row or set data.prompt_key to the row's prompt field");
  }
  ex.prompt = prompt_text(prompt_messages(*prompt, data.prompt_key, at), chat, at);

  const auto reward_model = row.find("reward_model");
  if (reward_model == row.end() || !reward_model->is_object()) {
    throw DataError(at + "missing reward_model.ground_truth (no 'reward_model' object); rule rewards need it");
  }
  const auto ground_truth = reward_model->find("ground_truth");
  if (ground_truth == reward_model->end()) {
    throw DataError(at + "missing reward_model.ground_truth; rule rewards need it");
  }
  if (!ground_truth->is_string()) {
    throw DataError(at + "reward_model.ground_truth must be a string, got " + type_of(*ground_truth));
  }
  ex.ground_truth = ground_truth->get<std::string>();
  ex.reward_style = optional_string(*reward_model, "style", at);
  ex.data_source = optional_string(row, "data_source", at);
  ex.ability = optional_string(row, "ability", at);

  const auto extra_info = row.find("extra_info");
  ex.extra_info_json = (extra_info == row.end() || extra_info->is_null()) ? "{}" : extra_info->dump();

  try {
    ex.prompt_ids = tokenizer.encode(ex.prompt);
  } catch (const TokenizerError& e) {
    throw DataError(at + "prompt cannot be tokenized: " + e.what());
  }
  // A chat template writes its own bos where the model wants one (Llama 3's <|begin_of_text|>;
  // Qwen has none), and verl tokenizes its output with add_special_tokens=False.
  if (chat == nullptr) ex.prompt_ids.insert(ex.prompt_ids.begin(), tokenizer.bos_token_id());
  return ex;
}

bool is_blank(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; });
}

/// splitmix64 finaliser: spreads (seed, epoch) over all 64 bits before seeding the engine, so
/// neighbouring seeds and epochs do not give correlated engine states.
std::uint64_t mix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

/// Uniform integer in [0, bound) by rejection (no modulo bias), portable across libraries.
std::uint64_t uniform_below(std::mt19937_64& engine, std::uint64_t bound) {
  const std::uint64_t threshold = (0 - bound) % bound;  // 2^64 mod bound
  for (;;) {
    const std::uint64_t r = engine();
    if (r >= threshold) return r % bound;
  }
}

}  // namespace

RLDataset RLDataset::load(const std::string& path, const Tokenizer& tokenizer, const DataConfig& data,
                          const ChatTemplate* chat_template) {
  if (data.max_prompt_length < 1) {
    throw ConfigError("data.max_prompt_length must be at least 1 (it counts the bos token), got " +
                      std::to_string(data.max_prompt_length));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw DataError(path + ": cannot open data file; check data.train_files / data.val_files (relative paths "
                           "are resolved from the working directory)");
  }

  RLDataset dataset;
  std::string text;
  int line = 0;
  while (std::getline(in, text)) {
    ++line;
    if (line == 1 && text.rfind("\xEF\xBB\xBF", 0) == 0) text.erase(0, 3);  // UTF-8 byte order mark
    if (is_blank(text)) continue;
    if (!text.empty() && text.back() == '\r') text.pop_back();  // CRLF files
    Example ex = parse_row(text, path, line, tokenizer, data, chat_template);
    if (data.filter_overlong_prompts && ex.prompt_ids.size() > static_cast<std::size_t>(data.max_prompt_length)) {
      ++dataset.filtered_;  // verl's filter_overlong_prompts: the row is dropped, not cut
      continue;
    }
    truncate_prompt(ex.prompt_ids, data, where(path, line));
    dataset.examples_.push_back(std::move(ex));
  }
  if (in.bad()) throw DataError(path + ":" + std::to_string(line + 1) + ": read error");
  if (dataset.examples_.empty() && dataset.filtered_ > 0) {
    throw DataError(path + ": every one of its " + std::to_string(dataset.filtered_) + " prompts is longer than "
                    "data.max_prompt_length = " + std::to_string(data.max_prompt_length) +
                    " tokens and data.filter_overlong_prompts dropped them all; raise max_prompt_length");
  }
  if (dataset.examples_.empty()) {
    throw DataError(path + ": data file is empty (no rows in " + std::to_string(line) +
                    " lines); expected one JSON object per line");
  }
  return dataset;
}

DataLoader::DataLoader(std::size_t dataset_size, std::size_t batch_size, bool shuffle, std::uint64_t seed)
    : dataset_size_(dataset_size), batch_size_(batch_size), shuffle_(shuffle), seed_(seed) {
  if (dataset_size_ == 0) {
    throw std::invalid_argument("data loader over an empty dataset: no batch of data.train_batch_size=" +
                                std::to_string(batch_size_) + " can be drawn");
  }
  if (batch_size_ == 0 || dataset_size_ / batch_size_ == 0) {
    throw std::invalid_argument("batch size " + std::to_string(batch_size_) +
                                " (data.train_batch_size) gives no full batch from a dataset of " +
                                std::to_string(dataset_size_) +
                                " rows (batches drop the remainder); set data.train_batch_size between 1 and " +
                                std::to_string(dataset_size_));
  }
}

std::size_t DataLoader::batches_per_epoch() const { return dataset_size_ / batch_size_; }

std::vector<std::size_t> DataLoader::permutation(std::int64_t epoch) const {
  std::vector<std::size_t> order(dataset_size_);
  std::iota(order.begin(), order.end(), std::size_t{0});
  if (!shuffle_) return order;
  std::mt19937_64 engine(mix64(seed_ ^ mix64(static_cast<std::uint64_t>(epoch))));
  for (std::size_t i = order.size(); i > 1; --i) {  // Fisher-Yates (Durstenfeld), back to front
    const auto j = static_cast<std::size_t>(uniform_below(engine, i));
    std::swap(order[i - 1], order[j]);
  }
  return order;
}

std::vector<std::size_t> DataLoader::next_batch() {
  if (order_epoch_ != state_.epoch) {
    order_ = permutation(state_.epoch);
    order_epoch_ = state_.epoch;
  }
  const auto begin = order_.begin() + static_cast<std::ptrdiff_t>(state_.batch_in_epoch) *
                                          static_cast<std::ptrdiff_t>(batch_size_);
  std::vector<std::size_t> batch(begin, begin + static_cast<std::ptrdiff_t>(batch_size_));
  if (static_cast<std::size_t>(++state_.batch_in_epoch) == batches_per_epoch()) {
    ++state_.epoch;
    state_.batch_in_epoch = 0;
  }
  return batch;
}

void DataLoader::set_state(const State& state) {
  if (state.epoch < 0 || state.batch_in_epoch < 0 ||
      static_cast<std::size_t>(state.batch_in_epoch) >= batches_per_epoch()) {
    throw std::invalid_argument("data loader state (epoch " + std::to_string(state.epoch) + ", batch " +
                                std::to_string(state.batch_in_epoch) + ") is out of range: an epoch has " +
                                std::to_string(batches_per_epoch()) +
                                " batches; was the checkpoint written with another dataset or "
                                "data.train_batch_size?");
  }
  state_ = state;
}

}  // namespace hs::trainer
