// yaml_fields.cpp — the simulator's YAML field readers (yaml_fields.h).
#include "yaml_fields.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "hybridscope/bench/sim/hardware.h"

namespace hs::bench::sim {

namespace {

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace


// Throws on a key outside `allowed`, suggesting the nearest allowed key.
void check_keys(const YAML::Node& map, const std::set<std::string>& allowed, const Where& where) {
  for (const auto& entry : map) {
    const std::string key = entry.first.as<std::string>();
    if (allowed.count(key)) continue;
    std::string nearest;
    std::size_t best = 4;  // suggest only near misses (a typo, not a different key)
    for (const auto& candidate : allowed) {
      const std::size_t d = edit_distance(key, candidate);
      if (d < best) best = d, nearest = candidate;
    }
    std::string allowed_list;
    for (const auto& candidate : allowed) allowed_list += (allowed_list.empty() ? "" : ", ") + candidate;
    throw SimError(nearest.empty()
                       ? fmt::format("{}: unknown key (allowed: {})", (where / key)(), allowed_list)
                       : fmt::format("{}: unknown key — did you mean {}?", (where / key)(), nearest));
  }
}

const YAML::Node required(const YAML::Node& map, const std::string& key, const Where& where) {
  const YAML::Node node = map[key];
  if (!node) throw SimError(fmt::format("{}: missing: add it (see docs/simulator.md)", (where / key)()));
  return node;
}

std::string text(const YAML::Node& node, const Where& where) {
  if (!node.IsScalar()) throw SimError(where() + ": must be a scalar");
  return node.Scalar();
}

// A number > 0 ("989.4e12", "3e-6"); the whole scalar must be the number.
double positive_number(const YAML::Node& node, const Where& where, const char* example) {
  const std::string value = text(node, where);
  std::size_t used = 0;
  double parsed = 0.0;
  try {
    parsed = std::stod(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != value.size() || !std::isfinite(parsed) || parsed <= 0.0)
    throw SimError(fmt::format("{} = {}: must be a number > 0 in SI units, e.g. {}", where(), value, example));
  return parsed;
}

bool boolean(const YAML::Node& node, const Where& where) {
  const std::string value = text(node, where);
  if (value == "true") return true;
  if (value == "false") return false;
  throw SimError(fmt::format("{} = {}: must be true or false", where(), value));
}

}  // namespace hs::bench::sim
