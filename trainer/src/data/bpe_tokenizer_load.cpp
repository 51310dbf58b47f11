// bpe_tokenizer_load.cpp — building a BpeTokenizer from a HuggingFace tokenizer.json, a tiktoken
// rank file, or a whole HF model directory (tokenizer_config.json, generation_config.json).
//
// The loader accepts exactly the byte-level BPE shapes the encoder implements and refuses every
// other setting by name: a tokenizer that loads is one whose ids match HF `tokenizers`.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "bpe_tokenizer_impl.h"

namespace hs::trainer {
namespace {

using nlohmann::json;

/// GPT-2's default pre-tokenizer regex (HF pre_tokenizers/byte_level.rs, ByteLevel{use_regex: true}).
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

std::string read_file(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw TokenizerError(path + ": cannot open " + what);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

json parse_json(const std::string& path, const char* what) {
  const std::string text = read_file(path, what);
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    throw TokenizerError(path + ": not valid JSON (" + e.what() + ")");
  }
}

std::string dump_short(const json& value) {
  std::string s = value.dump();
  if (s.size() > 80) s = s.substr(0, 77) + "...";
  return s;
}

/// A tokenizer.json string in GPT-2's byte-to-unicode alphabet back to raw bytes.
std::optional<std::string> unmap_byte_level(const std::string& mapped) {
  static const std::unordered_map<char32_t, unsigned char> inverse = [] {
    std::unordered_map<char32_t, unsigned char> m;
    const auto& table = detail::bytes_to_unicode();
    for (int b = 0; b < 256; ++b) m.emplace(table[static_cast<std::size_t>(b)], static_cast<unsigned char>(b));
    return m;
  }();
  std::string raw;
  raw.reserve(mapped.size());
  const auto* s = reinterpret_cast<const unsigned char*>(mapped.data());
  for (std::size_t i = 0; i < mapped.size();) {
    char32_t c = 0;
    if (s[i] < 0x80) { c = s[i]; i += 1; }
    else if ((s[i] & 0xE0) == 0xC0 && i + 1 < mapped.size()) { c = (char32_t{s[i]} & 0x1F) << 6 | (s[i + 1] & 0x3F); i += 2; }
    else return std::nullopt;  // every mapped code point is below U+0800: two bytes at most
    const auto it = inverse.find(c);
    if (it == inverse.end()) return std::nullopt;
    raw.push_back(static_cast<char>(it->second));
  }
  return raw;
}

bool is_null_or(const json& obj, const char* key, const json& allowed) {
  return !obj.contains(key) || obj[key].is_null() || obj[key] == allowed;
}

TextNormalization parse_normalizer(const json& n, const std::string& where) {
  if (n.is_null()) return TextNormalization::kNone;
  const std::string type = n.value("type", "");
  if (type == "NFC") return TextNormalization::kNfc;
  if (type == "Sequence") {
    TextNormalization result = TextNormalization::kNone;
    for (const json& inner : n.at("normalizers")) {
      if (parse_normalizer(inner, where) == TextNormalization::kNfc) result = TextNormalization::kNfc;
    }
    return result;
  }
  throw TokenizerError(where + ": normalizer.type '" + type +
                       "' is not supported (supported: null, NFC, Sequence of NFC); hybridscope's BPE would "
                       "tokenize differently from HF");
}

void parse_byte_level(const json& p, const std::string& where, bool in_sequence, BpeTokenizer::Impl& impl) {
  const bool use_regex = p.value("use_regex", true);
  const bool add_prefix_space = p.value("add_prefix_space", false);
  if (in_sequence) {
    if (use_regex) {
      throw TokenizerError(where + ": pre_tokenizer.pretokenizers[1].use_regex true after a Split is not "
                           "supported (expected false: the Split already pre-tokenizes)");
    }
    if (add_prefix_space) {
      throw TokenizerError(where + ": pre_tokenizer.pretokenizers[1].add_prefix_space true is not supported "
                           "(expected false, as Qwen2 and Llama 3 write it)");
    }
    return;
  }
  if (!use_regex) {
    throw TokenizerError(where + ": pre_tokenizer ByteLevel with use_regex false and no Split is not supported "
                         "(the text would be one pre-token)");
  }
  impl.split_regex = std::make_unique<detail::SplitRegex>(kGpt2Pattern, false, where + ": pre_tokenizer (GPT-2 regex)");
  impl.add_prefix_space = add_prefix_space;
}

void parse_split(const json& p, const std::string& where, BpeTokenizer::Impl& impl) {
  const std::string key = where + ": pre_tokenizer.pretokenizers[0]";
  const std::string behavior = p.value("behavior", "");
  if (behavior != "Isolated") {
    throw TokenizerError(key + ".behavior '" + behavior + "' is not supported (expected 'Isolated')");
  }
  if (p.value("invert", false)) throw TokenizerError(key + ".invert true is not supported (expected false)");
  const json& pattern = p.at("pattern");
  if (pattern.contains("Regex")) {
    impl.split_regex = std::make_unique<detail::SplitRegex>(pattern["Regex"].get<std::string>(), false, key + ".pattern.Regex");
  } else if (pattern.contains("String")) {
    impl.split_regex = std::make_unique<detail::SplitRegex>(pattern["String"].get<std::string>(), true, key + ".pattern.String");
  } else {
    throw TokenizerError(key + ".pattern " + dump_short(pattern) + " is not supported (expected {\"Regex\": ...} or {\"String\": ...})");
  }
}

void parse_pre_tokenizer(const json& p, const std::string& where, BpeTokenizer::Impl& impl) {
  if (p.is_null()) {
    throw TokenizerError(where + ": pre_tokenizer null is not supported (a byte-level BPE needs ByteLevel)");
  }
  const std::string type = p.value("type", "");
  if (type == "ByteLevel") {
    parse_byte_level(p, where, false, impl);
    return;
  }
  if (type == "Sequence") {
    const json& list = p.at("pretokenizers");
    if (list.size() == 2 && list[0].value("type", "") == "Split" && list[1].value("type", "") == "ByteLevel") {
      parse_split(list[0], where, impl);
      parse_byte_level(list[1], where, true, impl);
      return;
    }
    throw TokenizerError(where + ": pre_tokenizer Sequence " + dump_short(list) +
                         " is not supported (expected [Split{Regex, Isolated}, ByteLevel{use_regex false}])");
  }
  throw TokenizerError(where + ": pre_tokenizer.type '" + type +
                       "' is not supported (supported: ByteLevel, Sequence[Split, ByteLevel])");
}

void parse_model(const json& model, const std::string& where, BpeTokenizer::Impl& impl) {
  const std::string type = model.value("type", "BPE");
  if (type != "BPE") throw TokenizerError(where + ": model.type '" + type + "' is not supported (expected 'BPE')");
  if (!is_null_or(model, "dropout", json())) {
    throw TokenizerError(where + ": model.dropout " + dump_short(model["dropout"]) +
                         " is not supported (BPE dropout is a training-time augmentation; expected null)");
  }
  if (model.value("byte_fallback", false)) {
    throw TokenizerError(where + ": model.byte_fallback true is not supported (that is SentencePiece-style BPE; "
                         "hybridscope implements byte-level BPE)");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (!is_null_or(model, key, json(""))) {
      throw TokenizerError(where + ": model." + key + " " + dump_short(model[key]) + " is not supported (expected null or \"\")");
    }
  }
  impl.ignore_merges = model.value("ignore_merges", false);

  const json& vocab = model.at("vocab");
  int max_id = -1;
  for (const auto& [token, id] : vocab.items()) max_id = std::max(max_id, id.get<int>());
  impl.id_bytes.assign(static_cast<std::size_t>(max_id + 1), std::string());
  impl.has_id.assign(static_cast<std::size_t>(max_id + 1), 0);
  for (const auto& [token, id_json] : vocab.items()) {
    const int id = id_json.get<int>();
    if (id < 0) throw TokenizerError(where + ": model.vocab['" + token + "'] has negative id " + std::to_string(id));
    auto raw = unmap_byte_level(token);
    if (!raw) {
      throw TokenizerError(where + ": model.vocab token '" + token +
                           "' is not written in GPT-2's byte-level alphabet (not a byte-level BPE vocabulary)");
    }
    impl.id_bytes[static_cast<std::size_t>(id)] = std::move(*raw);
    impl.has_id[static_cast<std::size_t>(id)] = 1;
  }
  impl.index_vocab(where);

  const json& merges = model.at("merges");
  impl.merges.reserve(merges.size());
  std::string left_mapped, right_mapped;
  for (std::size_t rank = 0; rank < merges.size(); ++rank) {
    const json& merge = merges[rank];
    if (merge.is_string()) {  // "a b": byte-level tokens never contain a raw space (it is "Ġ")
      const std::string& s = merge.get_ref<const std::string&>();
      const std::size_t space = s.find(' ');
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos) {
        throw TokenizerError(where + ": model.merges[" + std::to_string(rank) + "] '" + s + "' is not 'left right'");
      }
      left_mapped = s.substr(0, space);
      right_mapped = s.substr(space + 1);
    } else if (merge.is_array() && merge.size() == 2) {
      left_mapped = merge[0].get<std::string>();
      right_mapped = merge[1].get<std::string>();
    } else {
      throw TokenizerError(where + ": model.merges[" + std::to_string(rank) + "] " + dump_short(merge) +
                           " is neither \"a b\" nor [\"a\", \"b\"]");
    }
    const auto left = unmap_byte_level(left_mapped);
    const auto right = unmap_byte_level(right_mapped);
    const auto l = left ? impl.vocab.find(*left) : impl.vocab.end();
    const auto r = right ? impl.vocab.find(*right) : impl.vocab.end();
    const auto merged = (left && right) ? impl.vocab.find(*left + *right) : impl.vocab.end();
    if (l == impl.vocab.end() || r == impl.vocab.end() || merged == impl.vocab.end()) {
      throw TokenizerError(where + ": model.merges[" + std::to_string(rank) + "] '" + left_mapped + " " + right_mapped +
                           "' names a token (or a merged token) that is not in model.vocab");
    }
    impl.merges.insert(l->second, r->second, static_cast<int>(rank), merged->second);
  }
}

void parse_added_tokens(const json& list, const std::string& where, BpeTokenizer::Impl& impl) {
  for (std::size_t i = 0; i < list.size(); ++i) {
    const json& t = list[i];
    AddedToken token;
    try {
      token.id = t.at("id").get<int>();
      token.content = t.at("content").get<std::string>();
    } catch (const json::exception& e) {
      throw TokenizerError(where + ": added_tokens[" + std::to_string(i) + "] needs 'id' and 'content' (" + e.what() + ")");
    }
    token.special = t.value("special", false);
    token.lstrip = t.value("lstrip", false);
    token.rstrip = t.value("rstrip", false);
    token.single_word = t.value("single_word", false);
    token.normalized = t.value("normalized", !token.special);
    impl.added.push_back(std::move(token));
  }
}

}  // namespace

BpeTokenizer BpeTokenizer::from_tokenizer_json(const std::string& path) {
  const json root = parse_json(path, "tokenizer.json");
  const std::string where = std::filesystem::path(path).filename().string();
  auto impl = std::make_unique<Impl>();
  impl->name = "bpe:" + path;
  try {
    if (!root.contains("model")) throw TokenizerError(where + ": no 'model' key (not a HF tokenizer.json)");
    parse_model(root["model"], where, *impl);
    impl->normalization = parse_normalizer(root.value("normalizer", json()), where);
    parse_pre_tokenizer(root.value("pre_tokenizer", json()), where, *impl);
    const json decoder = root.value("decoder", json());
    if (decoder.is_null() || decoder.value("type", "") != "ByteLevel") {
      throw TokenizerError(where + ": decoder " + dump_short(decoder) + " is not supported (expected {\"type\": \"ByteLevel\"})");
    }
    if (root.contains("added_tokens") && !root["added_tokens"].is_null()) {
      parse_added_tokens(root["added_tokens"], where, *impl);
    }
  } catch (const json::exception& e) {
    throw TokenizerError(path + ": unexpected tokenizer.json shape (" + e.what() + ")");
  } catch (const TokenizerError& e) {
    // `where` is the file name; give the full path once for a reader with many model directories.
    throw TokenizerError(std::string(e.what()) + " [" + path + "]");
  }
  impl->index_added_tokens();
  return BpeTokenizer(std::move(impl));
}

BpeTokenizer BpeTokenizer::from_tiktoken(const std::string& path, const std::string& pattern,
                                         const std::vector<std::pair<std::string, int>>& special_tokens,
                                         TextNormalization normalization) {
  static const auto decode_table = [] {
    std::array<int, 256> t{};
    t.fill(-1);
    const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (int i = 0; i < 64; ++i) t[static_cast<unsigned char>(alphabet[i])] = i;
    return t;
  }();
  std::ifstream in(path, std::ios::binary);
  if (!in) throw TokenizerError(path + ": cannot open tiktoken rank file");
  auto impl = std::make_unique<Impl>();
  impl->name = "tiktoken:" + path;
  std::vector<std::pair<std::string, int>> ranks;
  std::string line;
  for (std::size_t line_no = 1; std::getline(in, line); ++line_no) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    const std::size_t space = line.find(' ');
    std::string bytes;
    bool ok = space != std::string::npos && space % 4 == 0 && space > 0;
    std::uint32_t acc = 0;
    int bits = 0;
    for (std::size_t i = 0; ok && i < space; ++i) {
      if (line[i] == '=') break;
      const int v = decode_table[static_cast<unsigned char>(line[i])];
      if (v < 0) { ok = false; break; }
      acc = (acc << 6) | static_cast<std::uint32_t>(v);
      bits += 6;
      if (bits >= 8) {
        bits -= 8;
        bytes.push_back(static_cast<char>((acc >> bits) & 0xFF));
      }
    }
    int rank = -1;
    if (ok) {  // the whole rest of the line, a non-negative integer
      const char* first = line.data() + space + 1;
      const char* last = line.data() + line.size();
      const auto [end, ec] = std::from_chars(first, last, rank);
      ok = ec == std::errc() && end == last;
    }
    if (!ok || rank < 0 || bytes.empty()) {
      throw TokenizerError(path + ":" + std::to_string(line_no) + ": expected '<base64 token> <rank>', got '" +
                           line.substr(0, 60) + "'");
    }
    ranks.emplace_back(std::move(bytes), rank);
  }
  int max_rank = -1;
  for (const auto& [bytes, rank] : ranks) max_rank = std::max(max_rank, rank);
  // Ids are array indices: a rank far past the token count would make a table of empty ids (a
  // fuzzed "AA== 2000000000" asked for 64 GB). tiktoken's files number their tokens 0..N-1.
  constexpr int kMaxHoles = 1 << 16;
  if (max_rank >= static_cast<int>(ranks.size()) + kMaxHoles) {
    throw TokenizerError(path + ": rank " + std::to_string(max_rank) + " with only " + std::to_string(ranks.size()) +
                         " tokens: a tiktoken rank file numbers its tokens 0..N-1");
  }
  impl->id_bytes.assign(static_cast<std::size_t>(max_rank + 1), std::string());
  impl->has_id.assign(static_cast<std::size_t>(max_rank + 1), 0);
  for (auto& [bytes, rank] : ranks) {
    if (impl->has_id[static_cast<std::size_t>(rank)]) {
      throw TokenizerError(path + ": rank " + std::to_string(rank) + " appears twice");
    }
    impl->id_bytes[static_cast<std::size_t>(rank)] = std::move(bytes);
    impl->has_id[static_cast<std::size_t>(rank)] = 1;
  }
  impl->index_vocab(path);
  // tiktoken merges the adjacent pair whose concatenation has the lowest rank (tiktoken/src/lib.rs
  // byte_pair_merge): every split of a token into two tokens is a merge of that token's rank.
  impl->merges.reserve(impl->vocab.size() * 4);
  for (std::size_t id = 0; id < impl->id_bytes.size(); ++id) {
    const std::string_view token = impl->id_bytes[id];
    for (std::size_t k = 1; k < token.size(); ++k) {
      const auto l = impl->vocab.find(token.substr(0, k));
      if (l == impl->vocab.end()) continue;
      const auto r = impl->vocab.find(token.substr(k));
      if (r == impl->vocab.end()) continue;
      impl->merges.insert(l->second, r->second, static_cast<int>(id), static_cast<int>(id));
    }
  }
  impl->ignore_merges = true;  // tiktoken looks a whole piece up before merging
  impl->normalization = normalization;
  impl->split_regex = std::make_unique<detail::SplitRegex>(pattern, false, path + ": split pattern");
  for (const auto& [content, id] : special_tokens) {
    AddedToken token;
    token.id = id;
    token.content = content;
    token.special = true;
    impl->added.push_back(std::move(token));
  }
  impl->index_added_tokens();
  return BpeTokenizer(std::move(impl));
}

namespace {

/// tokenizer_config.json's bos_token/eos_token/pad_token: a string, {"content": ...}, or null.
std::string special_token_text(const json& config, const char* key, const std::string& where) {
  if (!config.contains(key) || config[key].is_null()) return "";
  const json& v = config[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  throw TokenizerError(where + ": " + key + " " + dump_short(v) + " is neither a string nor {\"content\": ...}");
}

std::vector<int> eos_ids_from(const json& config, const std::string& where) {
  if (!config.contains("eos_token_id") || config["eos_token_id"].is_null()) return {};
  const json& v = config["eos_token_id"];
  if (v.is_number_integer()) return {v.get<int>()};
  if (v.is_array()) {
    std::vector<int> ids;
    for (const json& e : v) {
      if (!e.is_number_integer()) throw TokenizerError(where + ": eos_token_id " + dump_short(v) + " holds a non-integer");
      ids.push_back(e.get<int>());
    }
    return ids;
  }
  throw TokenizerError(where + ": eos_token_id " + dump_short(v) + " is neither an integer nor a list of integers");
}

}  // namespace

HfTokenizer load_hf_tokenizer(const std::string& dir) {
  namespace fs = std::filesystem;
  const fs::path root(dir);
  const fs::path tokenizer_json = root / "tokenizer.json";
  if (!fs::exists(tokenizer_json)) {
    throw TokenizerError(dir + ": no tokenizer.json (hybridscope reads HF fast-tokenizer files; save the tokenizer "
                         "with transformers' save_pretrained, which writes it)");
  }
  HfTokenizer out;
  out.tokenizer = std::make_unique<BpeTokenizer>(BpeTokenizer::from_tokenizer_json(tokenizer_json.string()));
  out.tokenizer->set_name("hf:" + fs::path(dir).filename().string());
  BpeTokenizer& tok = *out.tokenizer;

  auto id_of = [&](const std::string& text, const std::string& where, const char* key) {
    if (text.empty()) return -1;
    const auto id = tok.token_to_id(text);
    if (!id) throw TokenizerError(where + ": " + key + " '" + text + "' is not a token of tokenizer.json");
    return *id;
  };
  int pad = -1, bos = -1, eos = -1;
  const fs::path config_path = root / "tokenizer_config.json";
  if (fs::exists(config_path)) {
    const std::string where = config_path.string();
    const json config = parse_json(where, "tokenizer_config.json");
    out.bos_token = special_token_text(config, "bos_token", where);
    out.eos_token = special_token_text(config, "eos_token", where);
    bos = id_of(out.bos_token, where, "bos_token");
    eos = id_of(out.eos_token, where, "eos_token");
    pad = id_of(special_token_text(config, "pad_token", where), where, "pad_token");
    if (config.contains("add_bos_token") && config["add_bos_token"].is_boolean()) {
      out.add_bos_token = config["add_bos_token"].get<bool>();
    }
    if (config.contains("chat_template")) {
      const json& t = config["chat_template"];
      if (t.is_string()) {
        out.chat_template = t.get<std::string>();
      } else if (t.is_array()) {
        for (const json& entry : t) {
          if (entry.value("name", "") == "default") out.chat_template = entry.value("template", "");
        }
        if (out.chat_template.empty()) {
          throw TokenizerError(where + ": chat_template is a list without a 'default' entry; hybridscope applies the default one");
        }
      }
    }
  }
  tok.set_special_token_ids(pad, bos, eos);
  if (out.chat_template.empty() && fs::exists(root / "chat_template.jinja")) {
    out.chat_template = read_file((root / "chat_template.jinja").string(), "chat_template.jinja");
  }
  // transformers' GenerationConfig: generation_config.json, else the model config's eos_token_id.
  for (const char* file : {"generation_config.json", "config.json"}) {
    const fs::path p = root / file;
    if (!fs::exists(p)) continue;
    out.eos_token_ids = eos_ids_from(parse_json(p.string(), file), p.string());
    if (!out.eos_token_ids.empty()) break;
  }
  if (out.eos_token_ids.empty() && eos >= 0) out.eos_token_ids = {eos};
  for (const int id : out.eos_token_ids) {
    if (id < 0 || id >= tok.vocab_size()) {
      throw TokenizerError(dir + ": eos_token_id " + std::to_string(id) + " is outside the tokenizer's " +
                           std::to_string(tok.vocab_size()) + " ids");
    }
  }
  return out;
}

}  // namespace hs::trainer
