// config_loader.cpp — the one place that reads configuration: YAML text plus Hydra-style
// `a.b.c=value` overrides become the typed Config of config.h, and a Config becomes YAML again.
//
// Everything here walks the key table of config_keys.cpp: parsing, to_yaml, the "did you mean"
// hints, ${a.b} interpolation and the Markdown reference in docs/config.md, so a key exists in all
// of them or in none. Relations between keys are checked afterwards by validate()
// (config_validate.cpp). Not here: reading datasets, tokenizers or model files.

#include "hybridscope/trainer/config/config.h"

#include "config/config_keys.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <sstream>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>

namespace hs::trainer {
namespace {

using namespace detail;  // the key table and its types

std::string_view parent_of(std::string_view path) {
  const auto dot = path.rfind('.');
  return dot == std::string_view::npos ? std::string_view{} : path.substr(0, dot);
}

std::string_view last_segment(std::string_view path) {
  const auto dot = path.rfind('.');
  return dot == std::string_view::npos ? path : path.substr(dot + 1);
}

/// Lookup structures derived from the table: leaf keys by path, and every section path.
struct KeyIndex {
  std::map<std::string, const Key*, std::less<>> leaves;
  std::set<std::string, std::less<>> sections;
};

const KeyIndex& index() {
  static const KeyIndex idx = [] {
    KeyIndex built;
    for (const Key& key : keys()) {
      built.leaves.emplace(key.path, &key);
      for (auto p = parent_of(key.path); !p.empty(); p = parent_of(p)) built.sections.emplace(p);
    }
    return built;
  }();
  return idx;
}

const Key* find_key(std::string_view path) {
  const auto it = index().leaves.find(path);
  return it == index().leaves.end() ? nullptr : it->second;
}

bool is_section(std::string_view path) { return index().sections.count(path) > 0; }

/// Names directly below `section` ("" = the top level), in table order.
std::vector<std::string> children_of(std::string_view section) {
  std::vector<std::string> names;
  for (const Key& key : keys()) {
    std::string_view rest = key.path;
    if (!section.empty()) {
      if (rest.substr(0, section.size()) != section || rest.size() <= section.size() ||
          rest[section.size()] != '.') {
        continue;
      }
      rest.remove_prefix(section.size() + 1);
    }
    const std::string name{rest.substr(0, rest.find('.'))};
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }
  return names;
}

std::string join(const std::vector<std::string>& items, std::string_view sep) {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += sep;
    out += items[i];
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// "Did you mean": edit distance on the full path and on the last segment, so that both a typo
// (rollout.tesnor_model_parallel_size) and a key in the wrong section
// (actor_rollout_ref.tensor_model_parallel_size) find the intended key.

/// Optimal-string-alignment distance: Levenshtein plus adjacent transpositions ("tesnor" is one
/// edit from "tensor", the commonest typo).
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

std::vector<std::string_view> words_of(std::string_view name) {  // "ppo_mini_batch_size" -> 4 words
  std::vector<std::string_view> words;
  for (std::size_t start = 0; start <= name.size();) {
    const auto end = std::min(name.find('_', start), name.size());
    if (end > start) words.push_back(name.substr(start, end - start));
    start = end + 1;
  }
  return words;
}

/// True when `part` is a part of `name`, as when a name is typed short: a substring ("temp" of
/// "temperature") or a subset of its words ("kl_coef" of "kl_loss_coef").
bool is_part_of(std::string_view part, std::string_view name) {
  if (part.size() >= name.size()) return false;
  if (part.size() >= 3 && name.find(part) != std::string_view::npos) return true;
  const auto small = words_of(part);
  const auto large = words_of(name);
  return small.size() >= 2 && std::all_of(small.begin(), small.end(), [&](std::string_view w) {
           return std::find(large.begin(), large.end(), w) != large.end();
         });
}

/// The known paths closest to `wanted` (at most three, equally good), or none when nothing is
/// close enough to be a useful hint. Three kinds of closeness, scored in edits: a typo anywhere
/// in the path; the right name in another section (two edits more); a shortened name in the same
/// section (one edit). Among equal scores the same section wins, then the kind of entry wanted
/// (a section when the value was a map); the rest are ordered by whole-path distance.
std::vector<std::string> closest_paths(std::string_view wanted, bool wanted_section) {
  constexpr std::size_t kFar = std::numeric_limits<std::size_t>::max();
  const std::string_view wanted_last = last_segment(wanted);
  const std::size_t tolerance = std::max<std::size_t>(1, wanted_last.size() / 3);
  struct Candidate {
    std::size_t score, other_section, other_kind, full;
    std::string_view path;
    auto group() const { return std::tie(score, other_section, other_kind); }
  };
  std::vector<Candidate> found;
  const auto consider = [&](std::string_view path, bool section) {
    const bool same_section = parent_of(path) == parent_of(wanted);
    const std::size_t full = edit_distance(wanted, path);
    const std::size_t last = edit_distance(wanted_last, last_segment(path));
    std::size_t score = kFar;
    if (full <= tolerance) score = full;
    if (last <= tolerance && last * 3 <= wanted_last.size()) score = std::min(score, last + (same_section ? 0 : 2));
    if (same_section && is_part_of(wanted_last, last_segment(path))) score = std::min<std::size_t>(score, 1);
    if (score != kFar) found.push_back({score, same_section ? 0u : 1u, section != wanted_section ? 1u : 0u, full, path});
  };
  for (const auto& [path, key] : index().leaves) consider(path, false);
  for (const auto& path : index().sections) consider(path, true);
  std::sort(found.begin(), found.end(), [](const Candidate& a, const Candidate& b) {
    return std::tie(a.score, a.other_section, a.other_kind, a.full, a.path) <
           std::tie(b.score, b.other_section, b.other_kind, b.full, b.path);
  });
  std::vector<std::string> best;
  for (const auto& c : found) {
    if (best.size() == 3 || c.group() != found.front().group()) break;
    best.emplace_back(c.path);
  }
  return best;
}

/// "a", "a or b", "a, b or c", each wrapped as prefix + item + suffix.
std::string alternatives(const std::vector<std::string>& items, std::string_view prefix = {},
                         std::string_view suffix = {}) {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += i + 1 == items.size() ? " or " : ", ";
    out.append(prefix).append(items[i]).append(suffix);
  }
  return out;
}

std::string unknown_key_message(std::string_view path, bool is_map) {
  const char* what = is_map ? "section" : "key";
  if (const auto near = closest_paths(path, is_map); !near.empty()) {
    return fmt::format("unknown {} {} — did you mean {}?", what, path, alternatives(near));
  }
  // No close match: list what the deepest existing enclosing section does hold.
  std::string_view section = parent_of(path);
  while (!section.empty() && !is_section(section)) section = parent_of(section);
  return fmt::format("unknown {} {} — {} has: {} (every key is listed in docs/config.md)", what, path,
                     section.empty() ? std::string_view{"the top level"} : section,
                     join(children_of(section), ", "));
}

template <class E>
std::optional<std::string> closest_spelling(std::string_view wanted) {
  return nearest_name(wanted, spellings<E>());
}

// ---------------------------------------------------------------------------------------------
// Values: text <-> typed value, one overload set per type.

template <class T>
inline constexpr bool kIsEnum = std::is_enum_v<T>;

template <class T>
std::string type_name() {  // for docs/config.md
  if constexpr (std::is_same_v<T, bool>) return "bool";
  else if constexpr (std::is_same_v<T, int>) return "int";
  else if constexpr (std::is_same_v<T, std::uint64_t>) return "uint64";
  else if constexpr (std::is_same_v<T, double>) return "float";
  else if constexpr (std::is_same_v<T, std::string>) return "string";
  else if constexpr (std::is_same_v<T, StringList>) return "list of strings";
  else if constexpr (std::is_same_v<T, IntList>) return "list of ints";
  else if constexpr (std::is_same_v<T, NumberPair>) return "[float, float]";
  else return "enum";
}

template <class E>
std::string spelling_list() {
  std::vector<std::string> names;
  for (const auto& s : EnumSpellings<E>::kAll) names.emplace_back(s.name);
  return join(names, ", ");
}

template <class T>
std::string expected_type() {  // for error messages: "expected <this>"
  if constexpr (std::is_same_v<T, bool>) return "a boolean (true or false)";
  else if constexpr (std::is_same_v<T, int>) return "an integer";
  else if constexpr (std::is_same_v<T, std::uint64_t>) return "a non-negative integer";
  else if constexpr (std::is_same_v<T, double>) return "a number";
  else if constexpr (std::is_same_v<T, std::string>) return "a string";
  else if constexpr (std::is_same_v<T, StringList>) return "a list of strings such as [console]";
  else if constexpr (std::is_same_v<T, IntList>) return "a list of integers such as [0, 1]";
  else if constexpr (std::is_same_v<T, NumberPair>) return "a list of two numbers such as [0.9, 0.999]";
  else return "one of " + spelling_list<T>();
}

template <class N>
std::optional<N> parse_number(std::string_view text) {
  N value{};
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc{} || ptr != end || text.empty()) return std::nullopt;
  return value;
}

template <class T>
std::optional<T> from_text(const std::string& text) {
  if constexpr (std::is_same_v<T, bool>) {
    std::string lower = text;
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
    if (lower == "true" || lower == "yes" || lower == "on") return true;
    if (lower == "false" || lower == "no" || lower == "off") return false;
    return std::nullopt;
  } else if constexpr (std::is_same_v<T, int>) {
    const auto wide = parse_number<long long>(text);
    if (!wide || *wide < std::numeric_limits<int>::min() || *wide > std::numeric_limits<int>::max()) {
      return std::nullopt;
    }
    return static_cast<int>(*wide);
  } else if constexpr (std::is_same_v<T, std::uint64_t> || std::is_same_v<T, double>) {
    return parse_number<T>(text);
  } else if constexpr (std::is_same_v<T, std::string>) {
    return text;
  } else {
    return enum_from_name<T>(text);
  }
}

/// Shortest text that reads back to the same double, always recognisable as a float: "1.0",
/// "1.0e-06" (YAML 1.1 readers such as PyYAML take "1e-06" for a string).
std::string format_double(double value) {
  char buffer[64];
  const auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, value);
  std::string text(buffer, ec == std::errc{} ? end : buffer);
  if (text.find_first_of(".inf") != std::string::npos) return text;  // has a point, or inf/nan
  const auto exponent = text.find('e');
  text.insert(exponent == std::string::npos ? text.size() : exponent, ".0");
  return text;
}

/// A value as plain text: the default column of the docs, interpolation, messages.
template <class T>
std::string format_value(const T& value) {
  if constexpr (std::is_same_v<T, bool>) return value ? "true" : "false";
  else if constexpr (std::is_same_v<T, int> || std::is_same_v<T, std::uint64_t>) return std::to_string(value);
  else if constexpr (std::is_same_v<T, double>) return format_double(value);
  else if constexpr (std::is_same_v<T, std::string>) return value;
  else if constexpr (std::is_same_v<T, StringList>) return "[" + join(value, ", ") + "]";
  else if constexpr (std::is_same_v<T, IntList>) {
    std::vector<std::string> items;
    for (int v : value) items.push_back(std::to_string(v));
    return "[" + join(items, ", ") + "]";
  }
  else if constexpr (std::is_same_v<T, NumberPair>) return "[" + format_double(value[0]) + ", " + format_double(value[1]) + "]";
  else return canonical_name(value);
}

std::string describe(const YAML::Node& node) {
  if (node.IsSequence()) {  // the items when they are plain, so a bad one shows: [0, x]
    std::vector<std::string> items;
    for (const auto& item : node) {
      if (!item.IsScalar()) return "a list";
      items.push_back(item.Scalar());
    }
    return "[" + join(items, ", ") + "]";
  }
  if (node.IsMap()) return "a map";
  return "'" + node.Scalar() + "'";
}

/// Decodes a non-null YAML node into T; std::nullopt when it does not have T's shape.
template <class T>
std::optional<T> decode(const YAML::Node& node) {
  if constexpr (std::is_same_v<T, StringList>) {
    if (!node.IsSequence()) return std::nullopt;
    StringList items;
    for (const auto& item : node) {
      if (!item.IsScalar()) return std::nullopt;
      items.push_back(item.Scalar());
    }
    return items;
  } else if constexpr (std::is_same_v<T, IntList>) {
    if (!node.IsSequence()) return std::nullopt;
    IntList items;
    for (const auto& item : node) {
      if (!item.IsScalar()) return std::nullopt;
      const auto value = from_text<int>(item.Scalar());
      if (!value) return std::nullopt;
      items.push_back(*value);
    }
    return items;
  } else if constexpr (std::is_same_v<T, NumberPair>) {
    if (!node.IsSequence() || node.size() != 2) return std::nullopt;
    NumberPair pair{};
    for (std::size_t i = 0; i < 2; ++i) {
      if (!node[i].IsScalar()) return std::nullopt;
      const auto value = parse_number<double>(node[i].Scalar());
      if (!value) return std::nullopt;
      pair[i] = *value;
    }
    return pair;
  } else {
    if (!node.IsScalar()) return std::nullopt;
    return from_text<T>(node.Scalar());
  }
}

// ---------------------------------------------------------------------------------------------
// Applying YAML (a file's tree or one override) onto a Config.

class Applier {
 public:
  /// `source` names where the values come from: a file name (messages then carry line:column),
  /// or the text of one override.
  Applier(Config& config, std::string source, bool is_file)
      : config_(config), source_(std::move(source)), is_file_(is_file) {}

  void apply_root(const YAML::Node& root) {
    if (!root || root.IsNull()) return;
    if (!root.IsMap()) {
      fail(root.Mark(), fmt::format("the top level must be a map of sections ({}), got {}",
                                    join(children_of(""), ", "), describe(root)));
    }
    apply_map("", root);
  }

  /// Sets `path` (a key, or a section when `value` is a map) from `value`.
  void apply(const std::string& path, const YAML::Node& value, const YAML::Mark& mark) {
    if (const Key* key = find_key(path)) {
      std::visit([&](const auto& field) { set(path, field, value, mark); }, key->field);
    } else if (is_section(path)) {
      if (value.IsNull()) return;  // an empty section
      if (!value.IsMap()) {
        fail(mark, fmt::format("{} is a section ({}), not a value: set one of its keys, e.g. {}.{}",
                               path, join(children_of(path), ", "), path, children_of(path).front()));
      }
      apply_map(path, value);
    } else {
      fail(mark, unknown_key_message(path, value.IsMap()) + extra_unknown_hint_);
    }
  }

  /// Appended to unknown-key messages (a `+key=value` override cannot add keys).
  void set_unknown_hint(std::string hint) { extra_unknown_hint_ = std::move(hint); }

 private:
  void apply_map(const std::string& prefix, const YAML::Node& map) {
    for (const auto& entry : map) {
      if (!entry.first.IsScalar()) fail(entry.first.Mark(), "map keys must be plain names");
      const std::string name = entry.first.Scalar();
      apply(prefix.empty() ? name : prefix + "." + name, entry.second, entry.first.Mark());
    }
  }

  template <class T>
  void set(const std::string& path, const Field<T>& field, const YAML::Node& value,
           const YAML::Mark& mark) {
    if (value.IsNull()) {  // verl spells "unset" as null: the key keeps its default
      *field.get(config_) = *field.view(defaults());
      return;
    }
    if (auto decoded = decode<T>(value)) {
      *field.get(config_) = std::move(*decoded);
      return;
    }
    std::string message = fmt::format("{}: expected {}, got {}", path, expected_type<T>(), describe(value));
    if constexpr (kIsEnum<T>) {
      if (value.IsScalar()) {
        if (auto near = closest_spelling<T>(value.Scalar())) message += " — did you mean " + *near + "?";
      }
    }
    fail(mark, message);
  }

  [[noreturn]] void fail(const YAML::Mark& mark, const std::string& message) const {
    if (is_file_ && !mark.is_null()) {
      throw ConfigError(fmt::format("{}:{}:{}: {}", source_, mark.line + 1, mark.column + 1, message));
    }
    throw ConfigError(fmt::format("{}: {}", source_, message));
  }

  Config& config_;
  std::string source_;
  bool is_file_;
  std::string extra_unknown_hint_;
};

std::string trim(std::string_view text) {
  const auto first = text.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  const auto last = text.find_last_not_of(" \t");
  return std::string{text.substr(first, last - first + 1)};
}

/// One Hydra-style override: `a.b.c=value`, `+a.b.c=value` or `++a.b.c=value` (the same for
/// keys that exist, which all keys here do). The value is a YAML scalar or flow collection.
void apply_override(Config& config, const std::string& text) {
  const std::string source = fmt::format("override '{}'", text);
  if (trim(text).substr(0, 1) == "~") {
    throw ConfigError(fmt::format(
        "{}: keys cannot be deleted (every key has a default); set the value instead", source));
  }
  const auto eq = text.find('=');
  if (eq == std::string::npos) {
    throw ConfigError(fmt::format(
        "{} has no '=': write key=value, e.g. actor_rollout_ref.rollout.n=4", source));
  }
  std::string key = trim(std::string_view{text}.substr(0, eq));
  const std::string value_text = trim(std::string_view{text}.substr(eq + 1));
  bool plus = false;
  while (!key.empty() && key.front() == '+') key.erase(0, 1), plus = true;
  if (key.empty()) throw ConfigError(fmt::format("{} has an empty key: write key=value", source));

  YAML::Node value;
  if (value_text.empty()) {
    value = YAML::Node(std::string{});  // `key=` is the empty string, as in Hydra
  } else {
    try {
      value = YAML::Load(value_text);
    } catch (const YAML::Exception& e) {
      throw ConfigError(fmt::format("{}: the value is not valid YAML ({}); quote it, e.g. {}='...'",
                                    source, e.msg, key));
    }
  }
  Applier applier(config, source, /*is_file=*/false);
  if (plus) applier.set_unknown_hint(" ('+' cannot add keys: the configuration is typed)");
  applier.apply(key, value, YAML::Mark::null_mark());
}

// ---------------------------------------------------------------------------------------------
// ${a.b} interpolation in string values, resolved after all overrides. `\${` is a literal "${".

constexpr std::string_view kEscapedOpen = "\\${";

class Interpolator {
 public:
  explicit Interpolator(const Config& raw) : raw_(raw) {}

  std::string resolve(const std::string& owner, const std::string& text) {
    stack_.push_back(owner);
    std::string out;
    for (std::size_t i = 0; i < text.size();) {
      if (text.compare(i, kEscapedOpen.size(), kEscapedOpen) == 0) {
        out += "${";
        i += kEscapedOpen.size();
      } else if (text.compare(i, 2, "${") == 0) {
        const auto close = text.find('}', i + 2);
        if (close == std::string::npos) {
          throw ConfigError(fmt::format(
              "{}: unterminated '${{' in '{}': close it with '}}', or write '\\${{' for a literal",
              owner, text));
        }
        out += lookup(owner, trim(std::string_view{text}.substr(i + 2, close - i - 2)));
        i = close + 1;
      } else {
        out += text[i++];
      }
    }
    stack_.pop_back();
    return out;
  }

 private:
  std::string lookup(const std::string& owner, const std::string& ref) {
    const Key* key = find_key(ref);
    if (key == nullptr) {
      const auto near = closest_paths(ref, false);
      throw ConfigError(fmt::format("{}: ${{{}}} refers to an unknown key{}", owner, ref,
                                    near.empty() ? std::string{}
                                                 : " — did you mean " + alternatives(near, "${", "}") + "?"));
    }
    if (std::find(stack_.begin(), stack_.end(), ref) != stack_.end()) {
      throw ConfigError(fmt::format("interpolation cycle: {} -> {}; make one of them a plain value",
                                    join(stack_, " -> "), ref));
    }
    return std::visit(
        [&](const auto& field) -> std::string {
          using T = std::remove_const_t<std::remove_pointer_t<decltype(field.view(raw_))>>;
          if constexpr (std::is_same_v<T, std::string>) {
            return resolve(ref, *field.view(raw_));
          } else if constexpr (std::is_same_v<T, StringList> || std::is_same_v<T, IntList> ||
                               std::is_same_v<T, NumberPair>) {
            throw ConfigError(fmt::format(
                "{}: ${{{}}} is a list; only single values can be interpolated", owner, ref));
          } else {
            return format_value(*field.view(raw_));
          }
        },
        key->field);
  }

  const Config& raw_;
  std::vector<std::string> stack_;  // keys being resolved, to report cycles
};

void resolve_interpolations(Config& config) {
  const Config raw = config;
  Interpolator interpolator(raw);
  for (const Key& key : keys()) {
    if (const auto* field = std::get_if<Field<std::string>>(&key.field)) {
      *field->get(config) = interpolator.resolve(key.path, *field->view(raw));
    } else if (const auto* list = std::get_if<Field<StringList>>(&key.field)) {
      StringList& items = *list->get(config);
      for (std::size_t i = 0; i < items.size(); ++i) {
        items[i] = interpolator.resolve(key.path, (*list->view(raw))[i]);
      }
    }
  }
}

/// A resolved string written back as YAML must not be interpolated again.
std::string escape_interpolation(const std::string& text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text.compare(i, 2, "${") == 0) out += '\\';
    out += text[i];
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Emitting.

template <class T>
void emit_value(YAML::Emitter& out, const T& value) {
  if constexpr (std::is_same_v<T, std::string>) {
    out << YAML::DoubleQuoted << escape_interpolation(value);
  } else if constexpr (std::is_same_v<T, StringList>) {
    out << YAML::Flow << YAML::BeginSeq;
    for (const auto& item : value) out << YAML::DoubleQuoted << escape_interpolation(item);
    out << YAML::EndSeq;
  } else if constexpr (std::is_same_v<T, IntList>) {
    out << YAML::Flow << YAML::BeginSeq;
    for (int item : value) out << item;
    out << YAML::EndSeq;
  } else if constexpr (std::is_same_v<T, NumberPair>) {
    out << YAML::Flow << YAML::BeginSeq << format_double(value[0]) << format_double(value[1])
        << YAML::EndSeq;
  } else {
    out << format_value(value);
  }
}

std::vector<std::string> split_path(std::string_view path) {
  std::vector<std::string> parts;
  for (std::size_t start = 0;;) {
    const auto dot = path.find('.', start);
    parts.emplace_back(path.substr(start, dot - start));
    if (dot == std::string_view::npos) return parts;
    start = dot + 1;
  }
}

/// Markdown list of an enum's spellings, aliases in parentheses: "`kl` (`k1`), `abs`".
template <class E>
std::string spelling_doc() {
  std::vector<std::string> entries;
  std::vector<E> seen;
  for (const auto& s : EnumSpellings<E>::kAll) {
    if (std::find(seen.begin(), seen.end(), s.value) != seen.end()) continue;
    seen.push_back(s.value);
    std::vector<std::string> aliases;
    for (const auto& a : EnumSpellings<E>::kAll) {
      if (a.value == s.value && std::strcmp(a.name, s.name) != 0) aliases.push_back(fmt::format("`{}`", a.name));
    }
    entries.push_back(fmt::format("`{}`", s.name) +
                      (aliases.empty() ? std::string{} : " (" + join(aliases, ", ") + ")"));
  }
  return join(entries, ", ");
}

}  // namespace

namespace detail {

std::optional<std::string> nearest_name(std::string_view wanted, const std::vector<std::string>& names) {
  std::optional<std::string> best;
  std::size_t best_distance = std::max<std::size_t>(1, wanted.size() / 3) + 1;
  for (const auto& name : names) {
    const std::size_t d = edit_distance(wanted, name);
    if (d < best_distance) best_distance = d, best = name;
  }
  return best;
}

}  // namespace detail

Config parse_config_unvalidated(const std::string& yaml_text, const std::vector<std::string>& overrides,
                                const std::string& source_name) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    throw ConfigError(fmt::format("{}:{}:{}: invalid YAML: {}", source_name, e.mark.line + 1,
                                  e.mark.column + 1, e.msg));
  }
  Config config;
  Applier(config, source_name, /*is_file=*/true).apply_root(root);
  for (const auto& text : overrides) apply_override(config, text);
  resolve_interpolations(config);
  return config;
}

Config parse_config(const std::string& yaml_text, const std::vector<std::string>& overrides,
                    const std::string& source_name) {
  Config config = parse_config_unvalidated(yaml_text, overrides, source_name);
  validate(config);
  return config;
}

Config load_config(const std::string& yaml_path, const std::vector<std::string>& overrides) {
  if (yaml_path.empty()) return parse_config("", overrides, "<defaults>");
  std::ifstream file(yaml_path);
  if (!file) {
    throw ConfigError(fmt::format("cannot open config file '{}': {} — check the path (an empty "
                                  "path starts from the defaults)", yaml_path, std::strerror(errno)));
  }
  std::ostringstream text;
  text << file.rdbuf();
  return parse_config(text.str(), overrides, yaml_path);
}

std::string to_yaml(const Config& config) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  std::vector<std::string> open;    // segments of the sections currently open
  std::set<std::string> closed;     // sections already written, which must not reopen
  const auto path_of = [&](std::size_t depth) {
    return join(std::vector<std::string>(open.begin(), open.begin() + static_cast<std::ptrdiff_t>(depth)), ".");
  };
  for (const Key& key : keys()) {
    const auto parts = split_path(key.path);
    std::size_t common = 0;
    while (common < open.size() && common + 1 < parts.size() && open[common] == parts[common]) ++common;
    while (open.size() > common) {
      closed.insert(path_of(open.size()));
      open.pop_back();
      out << YAML::EndMap;
    }
    for (std::size_t i = common; i + 1 < parts.size(); ++i) {
      open.push_back(parts[i]);
      if (closed.count(path_of(open.size())) > 0) {
        throw std::logic_error("config key table: section " + path_of(open.size()) + " is not contiguous");
      }
      out << YAML::Key << parts[i] << YAML::Value << YAML::BeginMap;
    }
    out << YAML::Key << parts.back() << YAML::Value;
    std::visit([&](const auto& field) { emit_value(out, *field.view(config)); }, key.field);
  }
  while (!open.empty()) open.pop_back(), out << YAML::EndMap;
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

std::vector<std::pair<std::string, std::string>> config_entries(const Config& config) {
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(keys().size());
  for (const Key& key : keys())
    std::visit([&](const auto& field) { out.emplace_back(key.path, format_value(*field.view(config))); }, key.field);
  return out;
}

std::string config_reference_markdown() {
  std::string out;
  std::string_view section;
  for (const Key& key : keys()) {
    const std::string_view parent = parent_of(key.path);
    if (parent != section || out.empty()) {
      section = parent;
      out += fmt::format("{}### `{}`\n\n| key | type | default | meaning |\n|---|---|---|---|\n",
                         out.empty() ? "" : "\n", section);
    }
    std::visit(
        [&](const auto& field) {
          using T = std::remove_const_t<std::remove_pointer_t<decltype(field.view(defaults()))>>;
          const std::string value = format_value(*field.view(defaults()));
          std::string meaning = key.doc;
          if constexpr (kIsEnum<T>) meaning += " One of " + spelling_doc<T>() + ".";
          if (meaning.find('|') != std::string::npos) {
            throw std::logic_error("config key table: '|' in the meaning of " + key.path + " breaks the Markdown table");
          }
          out += fmt::format("| `{}` | {} | `{}` | {} |\n", key.path, type_name<T>(),
                             value.empty() ? "\"\"" : value, meaning);
        },
        key.field);
  }
  return out;
}

}  // namespace hs::trainer
