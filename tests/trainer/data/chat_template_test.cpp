// chat_template_test.cpp — ChatTemplate against transformers: the real template texts (in
// chat_templates/, with their source in its README) rendered by transformers'
// render_jinja_template for several conversations (goldens: make_tokenizer_goldens.py) must equal
// the C++ rendering byte for byte. Plus renderings written out by hand from the model cards, and
// the refusals, which need no peer.
#include "hybridscope/trainer/data/chat_template.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tokenizer_goldens.h"

namespace hs::trainer {
namespace {

using nlohmann::json;
using testing::load_goldens;
using testing::read_text;

std::string template_text(const std::string& file) {
  return read_text(std::string(HS_SOURCE_DIR) + "/tests/trainer/data/chat_templates/" + file);
}

TEST(ChatTemplate, MatchesTransformersByteForByte) {
  json g;
  std::string skip;
  if (!load_goldens("chat_goldens.json", &g, &skip)) GTEST_SKIP() << skip;
  int checked = 0;
  for (const json& c : g["cases"]) {
    ChatTemplate tmpl = ChatTemplate::from_text(template_text(c["file"].get<std::string>()));
    EXPECT_EQ(tmpl.name(), c["template"].get<std::string>());
    const json& options = c["options"];
    if (options.contains("enable_thinking")) tmpl.set_enable_thinking(options["enable_thinking"].get<bool>());
    if (options.contains("date_string")) tmpl.set_date_string(options["date_string"].get<std::string>());
    std::vector<ChatMessage> messages;
    for (const json& m : c["messages"]) messages.push_back({m["role"].get<std::string>(), m["content"].get<std::string>()});
    EXPECT_EQ(tmpl.apply(messages, c["add_generation_prompt"].get<bool>()), c["rendered"].get<std::string>())
        << c["template"] << " " << c["messages"].dump() << " add_generation_prompt=" << c["add_generation_prompt"]
        << " options=" << options.dump();
    ++checked;
  }
  EXPECT_GE(checked, 100);
}

// Renderings written from the model cards (Qwen2.5: default system message; Llama 3.1: the system
// block with the knowledge cut-off and the template's default date).
TEST(ChatTemplate, KnownRenderingsFromTheModelCards) {
  const std::vector<ChatMessage> question = {{"user", "Hi"}};
  EXPECT_EQ(ChatTemplate::from_text(template_text("qwen2.5-instruct.jinja")).apply(question, true),
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(ChatTemplate::from_text(template_text("qwen3.jinja")).apply(question, true),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(ChatTemplate::from_text(template_text("llama3-instruct.jinja")).apply(question, true),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(ChatTemplate::from_text(template_text("llama3.1-instruct.jinja")).apply(question, true),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
            "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatTemplate, RecognisesWithOrWithoutTheTrailingNewline) {
  const std::string text = template_text("llama3-instruct.jinja");  // stored without one
  EXPECT_EQ(ChatTemplate::from_text(text + "\n").name(), "llama3");
  const std::string qwen = template_text("qwen2.5-instruct.jinja");  // stored with one
  ASSERT_EQ(qwen.back(), '\n');
  EXPECT_EQ(ChatTemplate::from_text(qwen.substr(0, qwen.size() - 1)).name(), "chatml-qwen2.5");
}

TEST(ChatTemplate, RefusesAnUnknownTemplate) {
  std::string text = template_text("qwen2.5-instruct.jinja");
  text.replace(text.find("You are Qwen"), 12, "You are Kwen");  // a one-word edit is another template
  for (const std::string& unknown : {text, std::string("{{ messages }}"), std::string()}) {
    try {
      (void)ChatTemplate::from_text(unknown);
      ADD_FAILURE() << "recognised " << unknown.substr(0, 40);
    } catch (const TokenizerError& e) {
      const std::string msg = e.what();
      EXPECT_EQ(msg.rfind("chat template not recognised (known: chatml-qwen2.5", 0), 0u) << msg;
      EXPECT_NE(msg.find("llama3.1"), std::string::npos) << msg;
    }
  }
}

TEST(ChatTemplate, RefusesMessagesItCannotRender) {
  const ChatTemplate tmpl = ChatTemplate::from_text(template_text("qwen3.jinja"));
  EXPECT_THROW((void)tmpl.apply({}, true), TokenizerError);
  EXPECT_THROW((void)tmpl.apply({{"user", "q"}, {"tool", "r"}}, true), TokenizerError);
  EXPECT_EQ(ChatTemplate::known_names(), (std::vector<std::string>{"chatml-qwen2.5", "qwen3", "llama3", "llama3.1"}));
}

}  // namespace
}  // namespace hs::trainer
