// chat_template.h — verl's chat-message prompts rendered as a model family's chat template does.
//
// HuggingFace ships a chat template as Jinja text in tokenizer_config.json; transformers renders it
// with apply_chat_template. hybridscope does not interpret Jinja: it recognises the exact template
// texts of the families it supports (the same identity check TRL's chat_template_utils uses) and
// renders them in C++, byte for byte as transformers 5 does for messages of role and content.
// Any other text is refused — rendering a lookalike template differently would be a silent bug.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hybridscope/trainer/data/tokenizer.h"

namespace hs::trainer {

struct ChatMessage {
  std::string role;     // "system", "user" or "assistant"
  std::string content;
};

/// The chat templates hybridscope knows, recognised from a template's text, applied as
/// transformers' apply_chat_template(messages, tokenize=False, add_generation_prompt=...) renders
/// them (no tools, no documents, no extra template variables unless set below):
///   chatml-qwen2.5  Qwen2.5-Instruct: ChatML, "You are Qwen, created by Alibaba Cloud. You are a
///                   helpful assistant." as the system message when the first message is not one;
///   qwen3           Qwen3 (hybrid thinking): ChatML without a default system message; assistant
///                   turns after the last user turn carry their <think> block; the generation
///                   prompt is "<|im_start|>assistant\n" (thinking on, the template's default when
///                   enable_thinking is not passed); set_enable_thinking(false) adds the empty
///                   "<think>\n\n</think>\n\n" as enable_thinking=False does;
///   llama3          Llama 3 Instruct: bos + <|start_header_id|>role<|end_header_id|>\n\n + trimmed
///                   content + <|eot_id|>;
///   llama3.1        Llama 3.1 Instruct: bos, then always a system block "Cutting Knowledge Date:
///                   December 2023\nToday Date: 26 Jul 2024\n\n" + the (trimmed) system message;
///                   set_date_string changes the date as the date_string variable does.
class ChatTemplate {
 public:
  /// Recognises `jinja_text` (one trailing newline ignored, as Jinja drops it). Unknown text:
  /// TokenizerError "chat template not recognised (known: ...); ...".
  static ChatTemplate from_text(const std::string& jinja_text);
  /// The rendered prompt. TokenizerError for no messages or a role other than system/user/assistant.
  std::string apply(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const;
  std::string name() const;   // "chatml-qwen2.5", "qwen3", "llama3", "llama3.1"
  static std::vector<std::string> known_names();

  /// Text of {{ bos_token }} for the Llama templates (tokenizer_config.json's bos_token);
  /// default "<|begin_of_text|>".
  void set_bos_token(std::string bos_token) { bos_token_ = std::move(bos_token); }
  /// qwen3 only: enable_thinking=false (true and unset render the same).
  void set_enable_thinking(bool enable) { enable_thinking_ = enable; }
  /// llama3.1 only: the date_string variable (default "26 Jul 2024").
  void set_date_string(std::string date) { date_string_ = std::move(date); }

 private:
  enum class Kind { kChatmlQwen25, kQwen3, kLlama3, kLlama31 };
  explicit ChatTemplate(Kind kind) : kind_(kind) {}
  std::string apply_qwen3(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const;
  Kind kind_;
  std::string bos_token_ = "<|begin_of_text|>";
  std::optional<bool> enable_thinking_;
  std::string date_string_ = "26 Jul 2024";
};

}  // namespace hs::trainer
