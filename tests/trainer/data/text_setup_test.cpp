// text_setup_test.cpp — hybridscope.tokenizer = hf from a config: the real Qwen2.5 tokenizer
// directory the goldens fixture writes (tokenizer.json, tokenizer_config.json with Qwen2.5-Instruct's
// template, generation_config.json as the hub ships it), and the refusals.
#include "hybridscope/trainer/data/text_setup.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "tokenizer_goldens.h"

namespace hs::trainer {
namespace {

namespace fs = std::filesystem;

TEST(TextSetup, CharHasNoTemplateAndHfReadsTheDirectory) {
  Config config;
  const TextSetup plain = make_text_setup(config);
  EXPECT_EQ(plain.tokenizer->name(), "char");
  EXPECT_FALSE(plain.chat_template.has_value());

  nlohmann::json goldens;
  std::string skip;
  if (!testing::load_goldens("qwen2_goldens.json", &goldens, &skip)) {
    if (!skip.empty()) GTEST_SKIP() << skip;
    return;
  }
  config.hybridscope.tokenizer = TokenizerKind::kHf;
  config.data.tokenizer = goldens["tokenizer_dir"].get<std::string>();
  const TextSetup hf = make_text_setup(config);
  ASSERT_TRUE(hf.chat_template.has_value());
  EXPECT_EQ(hf.chat_template->name(), "chatml-qwen2.5");
  // generation_config.json: eos [151645 <|im_end|>, 151643 <|endoftext|>]; pad <|endoftext|>.
  EXPECT_EQ(hf.tokenizer->stop_token_ids(), (std::vector<std::int32_t>{151645, 151643}));
  EXPECT_EQ(hf.tokenizer->eos_token_id(), 151645);
  EXPECT_EQ(hf.tokenizer->pad_token_id(), 151643);
  // The rendered prompt (transformers' apply_chat_template in the fixture) tokenizes with the
  // special tokens as their ids and no bos in front.
  const std::string prompt = hf.chat_template->apply({{"user", "What is 2+2?"}}, true);
  EXPECT_EQ(prompt, goldens["chat_prompt"].get<std::string>());
  const auto ids = hf.tokenizer->encode(prompt);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids.front(), 151644);  // <|im_start|>
  EXPECT_EQ(hf.tokenizer->decode(ids, false), prompt);

  // The model path stands in for data.tokenizer, as verl reads the tokenizer from the model.
  config.data.tokenizer.clear();
  config.actor_rollout_ref.model.path = goldens["tokenizer_dir"].get<std::string>();
  EXPECT_EQ(make_text_setup(config).tokenizer->vocab_size(), hf.tokenizer->vocab_size());
}

TEST(TextSetup, RefusesADirectoryWithoutAKnownTemplate) {
  nlohmann::json goldens;
  std::string skip;
  if (!testing::load_goldens("qwen2_goldens.json", &goldens, &skip)) {
    if (!skip.empty()) GTEST_SKIP() << skip;
    return;
  }
  const fs::path source = goldens["tokenizer_dir"].get<std::string>();
  const fs::path dir = fs::temp_directory_path() / ("hs_text_setup_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::copy_file(source / "tokenizer.json", dir / "tokenizer.json", fs::copy_options::overwrite_existing);
  Config config;
  config.hybridscope.tokenizer = TokenizerKind::kHf;
  config.data.tokenizer = dir.string();
  auto refused = [&](const std::string& expected) {
    try {
      (void)make_text_setup(config);
      ADD_FAILURE() << "accepted " << dir;
    } catch (const ConfigError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("data.tokenizer = " + dir.string()), std::string::npos) << what;
      EXPECT_NE(what.find(expected), std::string::npos) << what;
    }
  };
  std::ofstream(dir / "tokenizer_config.json") << R"({"eos_token": "<|im_end|>"})";
  refused("no chat_template");
  std::ofstream(dir / "tokenizer_config.json") << R"({"eos_token": "<|im_end|>", "chat_template": "{{ messages }}"})";
  refused("chat template not recognised");
  config.data.tokenizer = (dir / "missing").string();
  try {
    (void)make_text_setup(config);
    ADD_FAILURE() << "a missing directory was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("missing"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace hs::trainer
