// text_setup.cpp — hybridscope.tokenizer: the built-in char tokenizer, or a HuggingFace
// tokenizer directory with its chat template and generation config.
#include "hybridscope/trainer/data/text_setup.h"

#include <string>

#include "hybridscope/trainer/data/bpe_tokenizer.h"

namespace hs::trainer {

TextSetup make_text_setup(const Config& config) {
  TextSetup setup;
  if (resolved_tokenizer(config) == TokenizerKind::kChar) {
    setup.tokenizer = make_tokenizer(TokenizerKind::kChar);
    return setup;
  }
  const std::string& dir = config.data.tokenizer.empty() ? config.actor_rollout_ref.model.path : config.data.tokenizer;
  const std::string key = config.data.tokenizer.empty() ? "actor_rollout_ref.model.path" : "data.tokenizer";
  if (dir.empty()) {
    throw ConfigError("hybridscope.tokenizer = hf needs a directory holding tokenizer.json: set data.tokenizer (or "
                      "actor_rollout_ref.model.path)");
  }
  HfTokenizer hf;
  try {
    hf = load_hf_tokenizer(dir);
  } catch (const TokenizerError& e) {
    throw ConfigError(key + " = " + dir + ": " + e.what());
  }
  BpeTokenizer& tok = *hf.tokenizer;
  const int eos = !hf.eos_token_ids.empty() ? hf.eos_token_ids.front() : tok.eos_token_id();
  if (eos < 0) {
    throw ConfigError(key + " = " + dir + ": no end-of-sequence token (generation_config.json eos_token_id or "
                      "tokenizer_config.json eos_token): a response could never end");
  }
  // verl (and transformers' generate) pad with eos when the tokenizer names no pad token.
  tok.set_special_token_ids(tok.pad_token_id() >= 0 ? tok.pad_token_id() : eos, tok.bos_token_id(), eos);
  tok.set_stop_token_ids(std::vector<std::int32_t>(hf.eos_token_ids.begin(), hf.eos_token_ids.end()));
  if (hf.chat_template.empty()) {
    throw ConfigError(key + " = " + dir + ": the tokenizer has no chat_template (tokenizer_config.json or "
                      "chat_template.jinja); verl's prompts are chat messages — use an instruct model's tokenizer");
  }
  try {
    setup.chat_template = ChatTemplate::from_text(hf.chat_template);
  } catch (const TokenizerError& e) {
    throw ConfigError(key + " = " + dir + ": " + e.what());
  }
  if (!hf.bos_token.empty()) setup.chat_template->set_bos_token(hf.bos_token);
  setup.tokenizer = std::move(hf.tokenizer);
  return setup;
}

}  // namespace hs::trainer
