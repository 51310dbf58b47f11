// text_setup.h — the tokenizer and chat template a run's config names. Free of LibTorch.
#pragma once

#include <memory>
#include <optional>

#include "hybridscope/trainer/config/config.h"
#include "hybridscope/trainer/data/chat_template.h"
#include "hybridscope/trainer/data/tokenizer.h"

namespace hs::trainer {

/// How a run turns rows into token ids: the tokenizer, and for hybridscope.tokenizer = hf the chat
/// template every prompt goes through (as verl's RLHFDataset applies apply_chat_template with
/// add_generation_prompt), recognised from the tokenizer's files.
struct TextSetup {
  std::unique_ptr<Tokenizer> tokenizer;
  std::optional<ChatTemplate> chat_template;  // none for char
};
/// char: the CharTokenizer, no template. hf: load_hf_tokenizer(data.tokenizer, else
/// actor_rollout_ref.model.path); pad falls back to eos when the files name none (Llama 3), the
/// stop ids are generation_config.json's; a directory without a chat template, or with one
/// hybridscope does not know, is a ConfigError naming the directory.
TextSetup make_text_setup(const Config& config);

}  // namespace hs::trainer
