// yaml_fields.h — reading the simulator's small YAML files (hardware descriptions, external
// points) with messages that name the file, the key and the fix. Internal to hs_sim.
#pragma once

#include <yaml-cpp/yaml.h>

#include <set>
#include <string>

namespace hs::bench::sim {

// A key of the file, for messages: "bench/hardware/h100-ib.yaml: device.memory_capacity_bytes".
struct Where {
  const std::string& origin;
  std::string key;
  std::string operator()() const { return origin + ": " + key; }
  Where operator/(const std::string& child) const { return {origin, key.empty() ? child : key + "." + child}; }
};

// Throws SimError on a key outside `allowed`, suggesting the nearest allowed key.
void check_keys(const YAML::Node& map, const std::set<std::string>& allowed, const Where& where);
// map[key], or SimError naming it.
const YAML::Node required(const YAML::Node& map, const std::string& key, const Where& where);
// A scalar's text, or SimError.
std::string text(const YAML::Node& node, const Where& where);
// A number > 0 ("989.4e12", "3e-6"); the whole scalar must be the number; `example` in the message.
double positive_number(const YAML::Node& node, const Where& where, const char* example);
// true / false, or SimError.
bool boolean(const YAML::Node& node, const Where& where);

}  // namespace hs::bench::sim
