// matrix.cpp — reading a matrix spec and expanding it into cells (see matrix.h).
#include "hybridscope/bench/matrix.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <set>
#include <string_view>

#include "hybridscope/trainer/config/config.h"

namespace hs::bench {

namespace fs = std::filesystem;

namespace {

const std::set<std::string> kTopKeys = {"name",         "description",    "base",      "ranks", "repetitions",
                                        "warmup_steps", "measured_steps", "overrides", "axes",  "baseline",
                                        "scaling"};

// A key of the spec, for messages: "bench/matrices/gpu.yaml: axes.shape".
struct Where {
  const std::string& path;
  std::string key;
  std::string operator()() const { return path + ": " + key; }
};

std::string scalar(const YAML::Node& node, const Where& where) {
  if (!node.IsScalar()) throw MatrixError(where() + " must be a scalar (text or a number)");
  return node.Scalar();
}

int positive_int(const YAML::Node& node, const Where& where, int minimum) {
  const std::string text = scalar(node, where);
  int value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < minimum)
    throw MatrixError(fmt::format("{} = {}: must be an integer >= {}", where(), text, minimum));
  return value;
}

// "key=value", with a non-empty key; "ranks=N" must carry a positive integer.
std::string checked_override(const std::string& text, const Where& where) {
  const auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0)
    throw MatrixError(fmt::format("{}: '{}' is not an override: write key=value, e.g. data.train_batch_size=32",
                                  where(), text));
  if (text.compare(0, eq, "ranks") == 0) {
    int ranks = 0;
    const std::string_view value(text.data() + eq + 1, text.size() - eq - 1);
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), ranks);
    if (ec != std::errc() || end != value.data() + value.size() || ranks < 1)
      throw MatrixError(fmt::format("{}: '{}': ranks must be an integer >= 1", where(), text));
  }
  return text;
}

std::vector<std::string> override_list(const YAML::Node& node, const Where& where) {
  if (!node.IsSequence())
    throw MatrixError(where() + " must be a list of key=value overrides, e.g. [trainer.device=cuda]");
  std::vector<std::string> out;
  for (std::size_t i = 0; i < node.size(); ++i) {
    const Where item{where.path, fmt::format("{}[{}]", where.key, i)};
    out.push_back(checked_override(scalar(node[i], item), item));
  }
  return out;
}

// An axis is either a list of values of the config key it is named after, or a map from level
// names to their override lists.
MatrixAxis read_axis(const std::string& name, const YAML::Node& node, const Where& where) {
  MatrixAxis axis{name, {}};
  if (node.IsSequence()) {
    for (std::size_t i = 0; i < node.size(); ++i) {
      const std::string value = scalar(node[i], Where{where.path, fmt::format("{}[{}]", where.key, i)});
      axis.levels.push_back({value, {checked_override(name + "=" + value, where)}});
    }
  } else if (node.IsMap() && node["zip"]) {
    // Zipped: every key's list has one value per level; level k applies the k-th value of each.
    const YAML::Node zip = node["zip"];
    for (const auto& item : node) {
      const std::string key = item.first.Scalar();
      if (key != "zip" && key != "names")
        throw MatrixError(fmt::format("{}: unknown key '{}' in a zipped axis (it has zip and names)", where(), key));
    }
    if (!zip.IsMap() || zip.size() == 0)
      throw MatrixError(where() + ".zip must map config keys to lists of equal length, e.g. "
                                  "{ranks: [1, 2], actor_rollout_ref.rollout.tensor_model_parallel_size: [1, 2]}");
    std::size_t count = 0;
    std::vector<std::pair<std::string, std::vector<std::string>>> columns;
    for (const auto& item : zip) {
      const std::string key = item.first.Scalar();
      const Where list_where{where.path, where.key + ".zip." + key};
      if (!item.second.IsSequence()) throw MatrixError(list_where() + " must be a list of values");
      std::vector<std::string> values;
      for (std::size_t i = 0; i < item.second.size(); ++i)
        values.push_back(scalar(item.second[i], Where{where.path, fmt::format("{}[{}]", list_where.key, i)}));
      if (!columns.empty() && values.size() != count)
        throw MatrixError(fmt::format("{} has {} values but {} has {}: zipped lists move together and must be "
                                      "equally long", list_where(), values.size(), columns.front().first, count));
      count = values.size();
      columns.emplace_back(key, std::move(values));
    }
    std::vector<std::string> names;
    if (node["names"]) {
      const Where names_where{where.path, where.key + ".names"};
      if (!node["names"].IsSequence() || node["names"].size() != count)
        throw MatrixError(fmt::format("{} must be a list of {} level names, one per zipped value", names_where(), count));
      for (std::size_t i = 0; i < count; ++i) names.push_back(scalar(node["names"][i], names_where));
    }
    for (std::size_t i = 0; i < count; ++i) {
      AxisLevel level;
      for (const auto& [key, values] : columns) {
        level.name += (level.name.empty() ? "" : "/") + values[i];
        level.overrides.push_back(checked_override(key + "=" + values[i], where));
      }
      if (!names.empty()) level.name = names[i];
      axis.levels.push_back(std::move(level));
    }
  } else if (node.IsMap()) {
    for (const auto& level : node) {
      const std::string level_name = level.first.Scalar();
      axis.levels.push_back({level_name, override_list(level.second, Where{where.path, where.key + "." + level_name})});
    }
  } else {
    throw MatrixError(where() + " must be a list of values of the key it names (data.train_batch_size: [32, 64]), "
                                "a map of named levels to override lists (shape: {small: [k=v, ...], ...}) "
                                "or a zipped axis ({zip: {key: [...], key2: [...]}})");
  }
  if (axis.levels.empty()) throw MatrixError(where() + " has no levels");
  std::set<std::string> seen;
  for (const auto& level : axis.levels)
    if (!seen.insert(level.name).second) throw MatrixError(fmt::format("{}: level '{}' appears twice", where(), level.name));
  return axis;
}

std::string quoted(const std::string& arg) {
  if (arg.find_first_of(" \t'\"$`\\*?[]{}()<>|&;") == std::string::npos && !arg.empty()) return arg;
  std::string out = "'";
  for (const char c : arg) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

MatrixSpec load_matrix(const std::string& path) {
  if (!fs::is_regular_file(path))
    throw MatrixError(fmt::format("matrix spec {} does not exist (the specs that ship are in bench/matrices/)", path));
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::Exception& e) {
    throw MatrixError(fmt::format("{}: not valid YAML: {}", path, e.what()));
  }
  if (!root.IsMap()) throw MatrixError(path + ": the spec must be a YAML map (name, base, axes, ...)");
  for (const auto& item : root) {
    const std::string key = item.first.Scalar();
    if (!kTopKeys.count(key)) {
      std::string known;
      for (const auto& k : kTopKeys) known += (known.empty() ? "" : ", ") + k;
      throw MatrixError(fmt::format("{}: unknown key '{}' (a spec has: {})", path, key, known));
    }
  }
  MatrixSpec spec;
  spec.path = path;
  spec.name = root["name"] ? scalar(root["name"], Where{path, "name"}) : fs::path(path).stem().string();
  if (root["description"]) spec.description = scalar(root["description"], Where{path, "description"});
  if (!root["base"]) throw MatrixError(path + ": 'base' is missing: name the config every cell starts from");
  const fs::path base = scalar(root["base"], Where{path, "base"});
  spec.base_config = (base.is_absolute() ? base : fs::path(path).parent_path() / base).lexically_normal().string();
  if (!fs::is_regular_file(spec.base_config))
    throw MatrixError(fmt::format("{}: base = {}: no such file ({}; a relative base is read from the spec's folder)",
                                  path, base.string(), spec.base_config));
  if (root["ranks"]) spec.ranks = positive_int(root["ranks"], Where{path, "ranks"}, 1);
  if (root["repetitions"]) spec.repetitions = positive_int(root["repetitions"], Where{path, "repetitions"}, 1);
  if (root["warmup_steps"]) spec.warmup_steps = positive_int(root["warmup_steps"], Where{path, "warmup_steps"}, 0);
  if (root["measured_steps"])
    spec.measured_steps = positive_int(root["measured_steps"], Where{path, "measured_steps"}, 1);
  if (root["overrides"]) spec.overrides = override_list(root["overrides"], Where{path, "overrides"});
  if (!root["axes"] || !root["axes"].IsMap() || root["axes"].size() == 0)
    throw MatrixError(path + ": 'axes' must be a map of at least one axis (see docs/benchmarks.md, \"Matrix specs\")");
  for (const auto& axis : root["axes"]) {
    const std::string name = axis.first.Scalar();
    spec.axes.push_back(read_axis(name, axis.second, Where{path, "axes." + name}));
  }
  if (root["baseline"]) {
    if (!root["baseline"].IsMap()) throw MatrixError(path + ": 'baseline' must map axis names to level names");
    for (const auto& item : root["baseline"]) {
      const std::string axis_name = item.first.Scalar();
      const std::string level = scalar(item.second, Where{path, "baseline." + axis_name});
      const auto axis = std::find_if(spec.axes.begin(), spec.axes.end(),
                                     [&](const MatrixAxis& a) { return a.name == axis_name; });
      if (axis == spec.axes.end()) throw MatrixError(fmt::format("{}: baseline names axis '{}', which axes lacks", path, axis_name));
      const bool has = std::any_of(axis->levels.begin(), axis->levels.end(),
                                   [&](const AxisLevel& l) { return l.name == level; });
      if (!has) throw MatrixError(fmt::format("{}: baseline.{} = {}: axis '{}' has no such level", path, axis_name, level, axis_name));
      spec.baseline[axis_name] = level;
    }
  }
  if (root["scaling"]) {
    if (!root["scaling"].IsMap()) throw MatrixError(path + ": 'scaling' must map rank axes to strong or weak");
    for (const auto& item : root["scaling"]) {
      const std::string axis_name = item.first.Scalar();
      const Where where{path, "scaling." + axis_name};
      const auto axis = std::find_if(spec.axes.begin(), spec.axes.end(),
                                     [&](const MatrixAxis& a) { return a.name == axis_name; });
      if (axis == spec.axes.end()) throw MatrixError(fmt::format("{}: scaling names axis '{}', which axes lacks", path, axis_name));
      if (!axis->rank_axis())
        throw MatrixError(fmt::format("{}: axis '{}' sets no ranks=N, so it has no scaling: only rank axes scale",
                                      where(), axis_name));
      const std::string kind = scalar(item.second, where);
      if (kind != "strong" && kind != "weak")
        throw MatrixError(fmt::format("{} = {}: must be strong (fixed global batch) or weak (fixed per-rank batch)",
                                      where(), kind));
      spec.scaling[axis_name] = kind == "weak" ? ScalingKind::kWeak : ScalingKind::kStrong;
    }
  }
  return spec;
}

bool MatrixAxis::rank_axis() const {
  return std::any_of(levels.begin(), levels.end(), [](const AxisLevel& l) { return level_ranks(l) > 0; });
}

int MatrixAxis::level_ranks(const AxisLevel& level) {
  int ranks = 0;
  for (const auto& o : level.overrides)
    if (o.rfind("ranks=", 0) == 0) ranks = std::stoi(o.substr(6));
  return ranks;
}

const char* to_string(ScalingKind kind) { return kind == ScalingKind::kWeak ? "weak" : "strong"; }

ScalingKind MatrixSpec::scaling_of(const std::string& axis) const {
  const auto it = scaling.find(axis);
  return it == scaling.end() ? ScalingKind::kStrong : it->second;
}

int MatrixSpec::reference_ranks(const MatrixAxis& axis) const {
  const auto base = baseline.find(axis.name);
  int smallest = 0;
  for (const auto& level : axis.levels) {
    const int n = MatrixAxis::level_ranks(level) > 0 ? MatrixAxis::level_ranks(level) : ranks;
    if (base != baseline.end() && base->second == level.name) return n;
    if (smallest == 0 || n < smallest) smallest = n;
  }
  return smallest;
}

std::vector<MatrixCell> expand_matrix(const MatrixSpec& spec) {
  std::size_t total = 1;
  for (const auto& axis : spec.axes) total *= axis.levels.size();
  std::vector<MatrixCell> cells;
  cells.reserve(total);
  std::vector<std::size_t> at(spec.axes.size(), 0);  // an odometer over the axes, the last fastest
  for (std::size_t c = 0; c < total; ++c) {
    MatrixCell cell;
    cell.index = static_cast<int>(c);
    cell.ranks = spec.ranks;
    cell.overrides = spec.overrides;
    cell.overrides.push_back(
        fmt::format("trainer.total_training_steps={}", spec.warmup_steps + spec.measured_steps));
    cell.baseline = !spec.baseline.empty();
    std::vector<std::string> config_overrides;
    for (std::size_t a = 0; a < spec.axes.size(); ++a) {
      const auto& axis = spec.axes[a];
      const auto& level = axis.levels[at[a]];
      cell.levels.push_back(level.name);
      cell.name += (a ? "," : "") + axis.name + "=" + level.name;
      cell.overrides.insert(cell.overrides.end(), level.overrides.begin(), level.overrides.end());
      const auto base = spec.baseline.find(axis.name);
      if (base != spec.baseline.end() && base->second != level.name) cell.baseline = false;
    }
    for (const auto& o : cell.overrides) {
      if (o.rfind("ranks=", 0) == 0)
        cell.ranks = std::stoi(o.substr(6));
      else
        config_overrides.push_back(o);
    }
    // The config's world (trainer.nnodes x trainer.n_gpus_per_node) is the cell's rank count on
    // one host, so that the validator checks the layout against the ranks the launcher starts.
    config_overrides.push_back("trainer.nnodes=1");
    config_overrides.push_back(fmt::format("trainer.n_gpus_per_node={}", cell.ranks));
    cell.overrides = config_overrides;
    try {
      const auto config = hs::trainer::load_config(spec.base_config, config_overrides);
      for (const auto& axis : spec.axes) {
        if (!axis.rank_axis() || spec.scaling_of(axis.name) != ScalingKind::kWeak) continue;
        // Weak scaling: the per-rank batch of the reference rank count N0, times N/N0 ranks.
        const int n0 = spec.reference_ranks(axis);
        auto scaled = [&](const char* key, int value) {
          if ((value * cell.ranks) % n0 != 0)
            throw hs::trainer::ConfigError(fmt::format(
                "weak scaling along '{}': {} = {} x {}/{} ranks is not a whole number; choose rank counts that are "
                "multiples of {}", axis.name, key, value, cell.ranks, n0, n0));
          return fmt::format("{}={}", key, value * cell.ranks / n0);
        };
        cell.overrides.push_back(scaled("data.train_batch_size", config.data.train_batch_size));
        cell.overrides.push_back(
            scaled("actor_rollout_ref.actor.ppo_mini_batch_size", config.actor_rollout_ref.actor.ppo_mini_batch_size));
        cell.overrides.push_back(scaled("critic.ppo_mini_batch_size", config.critic.ppo_mini_batch_size));
        (void)hs::trainer::load_config(spec.base_config, cell.overrides);
      }
    } catch (const std::exception& e) {
      cell.invalid_reason = e.what();
    }
    cells.push_back(std::move(cell));
    for (std::size_t a = spec.axes.size(); a-- > 0;) {  // advance the odometer
      if (++at[a] < spec.axes[a].levels.size()) break;
      at[a] = 0;
    }
  }
  return cells;
}

std::string cell_command(const MatrixSpec& spec, const MatrixCell& cell, const std::string& program) {
  std::string cmd = quoted(program);
  if (cell.ranks > 1) cmd += fmt::format(" launch -n {} --", cell.ranks);
  cmd += " train --config " + quoted(spec.base_config) + " --no-progress --db " +
         quoted(fmt::format("out/matrix/{}/cell{}.sqlite", spec.name, cell.index + 1));
  for (const auto& o : cell.overrides) cmd += " " + quoted(o);
  return cmd;
}

}  // namespace hs::bench
