// chat_template.cpp — the known chat templates, recognised by their text and rendered in C++.
//
// Each render function below is the Jinja template it names, read with the variables transformers
// 5 passes (messages, add_generation_prompt, bos_token/eos_token..., no tools), the environment
// it uses (trim_blocks, lstrip_blocks: only the {{ }} outputs reach the text) and Python string
// semantics for the methods the templates call (str.strip() whitespace is str.isspace()).
// The template texts are in tests/trainer/data/chat_templates/ with where they come from; the test
// renders them with transformers and compares byte for byte.
#include "hybridscope/trainer/data/chat_template.h"

#include <cstdint>
#include <cstdio>
#include <string_view>

namespace hs::trainer {
namespace {

/// FNV-1a, 64 bit: identifies a template text (a one-byte difference is another template).
std::uint64_t fnv1a(std::string_view text) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (const char c : text) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ULL;
  }
  return h;
}

struct KnownTemplate {
  const char* name;
  std::uint64_t hash;          // fnv1a of the text without its trailing newline
  std::size_t length;
  const char* source;
};

// Texts as shipped in the models' tokenizer_config.json "chat_template" (copies, byte-identical,
// in TRL's trl/chat_templates/, which compares them the same way to recognise models).
constexpr KnownTemplate kKnown[] = {
    {"chatml-qwen2.5", 0xe642ce246d7f2e3dULL, 2506, "Qwen/Qwen2.5-*-Instruct"},
    {"qwen3", 0x959a4551391a6549ULL, 4168, "Qwen/Qwen3-* (hybrid thinking)"},
    {"llama3", 0x0e60067a5537498eULL, 389, "meta-llama/Meta-Llama-3-*-Instruct"},
    {"llama3.1", 0xcc0368e1ffb6b958ULL, 4613, "meta-llama/Llama-3.1-*-Instruct"},
};

/// Python's str.isspace() for one code point (what str.strip() with no argument removes).
bool python_isspace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

/// Decodes the code point at s[i] (valid UTF-8 assumed; a stray byte counts as itself).
char32_t code_point_at(std::string_view s, std::size_t i, std::size_t* len) {
  const auto b = static_cast<unsigned char>(s[i]);
  std::size_t n = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 1;
  if (i + n > s.size()) n = 1;
  char32_t c = n == 1 ? b : n == 2 ? (b & 0x1F) : n == 3 ? (b & 0x0F) : (b & 0x07);
  for (std::size_t k = 1; k < n; ++k) c = (c << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  *len = n;
  return c;
}

/// Jinja's |trim: Python str.strip().
std::string py_strip(std::string_view s) {
  std::size_t begin = 0;
  while (begin < s.size()) {
    std::size_t len = 0;
    if (!python_isspace(code_point_at(s, begin, &len))) break;
    begin += len;
  }
  std::size_t end = s.size();
  while (end > begin) {
    std::size_t start = end - 1;
    while (start > begin && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
    std::size_t len = 0;
    if (!python_isspace(code_point_at(s, start, &len))) break;
    end = start;
  }
  return std::string(s.substr(begin, end - begin));
}

/// Python str.lstrip('\n') / rstrip('\n') / strip('\n').
std::string_view lstrip_newlines(std::string_view s) {
  while (!s.empty() && s.front() == '\n') s.remove_prefix(1);
  return s;
}
std::string_view rstrip_newlines(std::string_view s) {
  while (!s.empty() && s.back() == '\n') s.remove_suffix(1);
  return s;
}

void check_messages(const std::vector<ChatMessage>& messages, const std::string& name) {
  if (messages.empty()) {
    throw TokenizerError("chat template " + name + ": no messages (its first message decides the system block)");
  }
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const std::string& role = messages[i].role;
    if (role != "system" && role != "user" && role != "assistant") {
      throw TokenizerError("chat template " + name + ": message " + std::to_string(i) + " has role '" + role +
                           "'; hybridscope renders system, user and assistant messages (no tool calls)");
    }
  }
}

// ---- chatml-qwen2.5 -----------------------------------------------------------------------------
// {%- if messages[0]['role'] == 'system' %} '<|im_start|>system\n' + content + '<|im_end|>\n'
// {%- else %} the default system message; then every user, non-first system and assistant message
// (without tool_calls) as '<|im_start|>' + role + '\n' + content + '<|im_end|>\n'.
std::string apply_qwen25(const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
  std::string out;
  if (messages[0].role == "system") {
    out += "<|im_start|>system\n" + messages[0].content + "<|im_end|>\n";
  } else {
    out += "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n";
  }
  for (std::size_t i = 0; i < messages.size(); ++i) {
    if (i == 0 && messages[i].role == "system") continue;  // (message.role == "system" and not loop.first)
    out += "<|im_start|>" + messages[i].role + "\n" + messages[i].content + "<|im_end|>\n";
  }
  if (add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
}

// ---- llama3 / llama3.1 --------------------------------------------------------------------------
std::string llama_turn(const ChatMessage& m) {
  return "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + py_strip(m.content) + "<|eot_id|>";
}

std::string apply_llama3(const std::vector<ChatMessage>& messages, bool add_generation_prompt, const std::string& bos) {
  std::string out = bos;  // {% if loop.index0 == 0 %}{% set content = bos_token + content %}
  for (const ChatMessage& m : messages) out += llama_turn(m);
  if (add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

std::string apply_llama31(const std::vector<ChatMessage>& messages, bool add_generation_prompt, const std::string& bos,
                          const std::string& date_string) {
  std::string out = bos;
  std::size_t first = 0;
  std::string system_message;
  if (messages[0].role == "system") {  // system_message = messages[0]['content']|trim; messages = messages[1:]
    system_message = py_strip(messages[0].content);
    first = 1;
  }
  out += "<|start_header_id|>system<|end_header_id|>\n\n";
  out += "Cutting Knowledge Date: December 2023\n";
  out += "Today Date: " + date_string + "\n\n";
  out += system_message + "<|eot_id|>";
  for (std::size_t i = first; i < messages.size(); ++i) out += llama_turn(messages[i]);
  if (add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

}  // namespace

// ---- qwen3 --------------------------------------------------------------------------------------
std::string ChatTemplate::apply_qwen3(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const {
  std::string out;
  if (messages[0].role == "system") out += "<|im_start|>system\n" + messages[0].content + "<|im_end|>\n";
  // ns.last_query_index: the last user message that is not a '<tool_response>...</tool_response>'.
  std::size_t last_query_index = messages.size() - 1;
  for (std::size_t k = messages.size(); k-- > 0;) {
    const std::string& c = messages[k].content;
    const bool tool_response = c.rfind("<tool_response>", 0) == 0 && c.size() >= 16 &&
                               c.compare(c.size() - 16, 16, "</tool_response>") == 0;
    if (messages[k].role == "user" && !tool_response) {
      last_query_index = k;
      break;
    }
  }
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "user" || (m.role == "system" && i != 0)) {
      out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
    } else if (m.role == "assistant") {
      std::string_view content = m.content;
      std::string reasoning;
      if (content.find("</think>") != std::string_view::npos) {
        // reasoning = content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n')
        std::string_view before = rstrip_newlines(content.substr(0, content.find("</think>")));
        const std::size_t open = before.rfind("<think>");
        if (open != std::string_view::npos) before = before.substr(open + 7);
        reasoning = std::string(lstrip_newlines(before));
        // content = content.split('</think>')[-1].lstrip('\n')
        content = lstrip_newlines(content.substr(content.rfind("</think>") + 8));
      }
      const bool last = i + 1 == messages.size();
      if (i > last_query_index && (last || !reasoning.empty())) {
        out += "<|im_start|>" + m.role + "\n<think>\n" + std::string(lstrip_newlines(rstrip_newlines(reasoning))) +
               "\n</think>\n\n" + std::string(lstrip_newlines(content));
      } else {
        out += "<|im_start|>" + m.role + "\n" + std::string(content);
      }
      out += "<|im_end|>\n";
    }
  }
  if (add_generation_prompt) {
    out += "<|im_start|>assistant\n";
    if (enable_thinking_.has_value() && !*enable_thinking_) out += "<think>\n\n</think>\n\n";
  }
  return out;
}

ChatTemplate ChatTemplate::from_text(const std::string& jinja_text) {
  std::string_view text = jinja_text;
  if (!text.empty() && text.back() == '\n') text.remove_suffix(1);  // Jinja: keep_trailing_newline=False
  const std::uint64_t hash = fnv1a(text);
  for (const KnownTemplate& k : kKnown) {
    if (k.hash == hash && k.length == text.size()) {
      const std::string name = k.name;
      if (name == "chatml-qwen2.5") return ChatTemplate(Kind::kChatmlQwen25);
      if (name == "qwen3") return ChatTemplate(Kind::kQwen3);
      if (name == "llama3") return ChatTemplate(Kind::kLlama3);
      return ChatTemplate(Kind::kLlama31);
    }
  }
  std::string known;
  for (const KnownTemplate& k : kKnown) known += std::string(known.empty() ? "" : ", ") + k.name + " (" + k.source + ")";
  char fingerprint[32];
  std::snprintf(fingerprint, sizeof(fingerprint), "%016llx", static_cast<unsigned long long>(hash));
  throw TokenizerError("chat template not recognised (known: " + known + "); this text (" +
                       std::to_string(text.size()) + " bytes, fnv1a " + fingerprint +
                       ") is none of them byte for byte, and hybridscope renders only the templates it knows "
                       "rather than guess: use the model family's original tokenizer_config.json chat_template");
}

std::string ChatTemplate::apply(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const {
  check_messages(messages, name());
  switch (kind_) {
    case Kind::kChatmlQwen25: return apply_qwen25(messages, add_generation_prompt);
    case Kind::kQwen3: return apply_qwen3(messages, add_generation_prompt);
    case Kind::kLlama3: return apply_llama3(messages, add_generation_prompt, bos_token_);
    case Kind::kLlama31: return apply_llama31(messages, add_generation_prompt, bos_token_, date_string_);
  }
  return {};
}

std::string ChatTemplate::name() const {
  switch (kind_) {
    case Kind::kChatmlQwen25: return "chatml-qwen2.5";
    case Kind::kQwen3: return "qwen3";
    case Kind::kLlama3: return "llama3";
    case Kind::kLlama31: return "llama3.1";
  }
  return {};
}

std::vector<std::string> ChatTemplate::known_names() {
  std::vector<std::string> names;
  for (const KnownTemplate& k : kKnown) names.emplace_back(k.name);
  return names;
}

}  // namespace hs::trainer
