// hardware.cpp — reading a hardware description (see hardware.h).
//
// The schema (every number in SI base units, the unit in the key's name):
//
//   name: h100-sxm-ib                      # required
//   source: "NVIDIA H100 datasheet ..."    # required: where the numbers come from
//   devices_per_node: 8                    # required, integer >= 1
//   device:
//     name: NVIDIA H100 SXM5 80GB          # required
//     basis: spec                          # spec | measured | assumed (default spec)
//     dense_flops_per_s: {bf16: 989.4e12}  # required, at least one dtype
//     memory_bandwidth_bytes_per_s: 3.35e12
//     memory_capacity_bytes: 80e9
//     rows_efficiency: [[16, 0.66], [64, 0.9], [256, 1]]  # optional: (input rows, share of the
//                                                         # large-product rate), rows ascending
//   intra_node: {bandwidth_bytes_per_s: 450e9, latency_s: 3e-6, basis: spec}
//   inter_node: {bandwidth_bytes_per_s: 50e9, latency_s: 5e-6, basis: assumed}
#include "hybridscope/bench/sim/hardware.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "yaml_fields.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>
#include <vector>

namespace hs::bench::sim {

const char* basis_name(Basis basis) noexcept {
  switch (basis) {
    case Basis::kSpec: return "spec";
    case Basis::kMeasured: return "measured";
    case Basis::kAssumed: return "assumed";
  }
  return "?";
}

const char* link_level_name(LinkLevel level) noexcept {
  return level == LinkLevel::kIntraNode ? "intra_node" : "inter_node";
}

double DeviceSpec::flops_per_s(const std::string& dtype) const {
  const auto it = dense_flops_per_s.find(dtype);
  if (it != dense_flops_per_s.end()) return it->second;
  std::string known;
  for (const auto& [name, value] : dense_flops_per_s) known += (known.empty() ? "" : ", ") + name;
  throw SimError(fmt::format("device {} has no dense FLOP/s for dtype '{}': add device.dense_flops_per_s.{} "
                             "to the hardware file (it gives: {})",
                             name, dtype, dtype, known));
}

double DeviceSpec::rows_share(double rows) const noexcept {
  if (rows_efficiency.empty()) return 1.0;
  if (rows <= rows_efficiency.front().first) return rows_efficiency.front().second;
  for (std::size_t i = 1; i < rows_efficiency.size(); ++i) {
    const auto& [r0, s0] = rows_efficiency[i - 1];
    const auto& [r1, s1] = rows_efficiency[i];
    if (rows <= r1) return s0 + (std::log2(rows) - std::log2(r0)) / (std::log2(r1) - std::log2(r0)) * (s1 - s0);
  }
  return rows_efficiency.back().second;
}

namespace {

Basis read_basis(const YAML::Node& map, const Where& where) {
  const YAML::Node node = map["basis"];
  if (!node) return Basis::kSpec;
  const std::string value = text(node, where / "basis");
  if (value == "spec") return Basis::kSpec;
  if (value == "measured") return Basis::kMeasured;
  if (value == "assumed") return Basis::kAssumed;
  throw SimError(fmt::format("{} = {}: must be spec, measured or assumed", (where / "basis")(), value));
}

LinkSpec read_link(const YAML::Node& map, const Where& where) {
  if (!map.IsMap())
    throw SimError(where() + ": must be a map {bandwidth_bytes_per_s: ..., latency_s: ..., basis: ...}");
  check_keys(map, {"bandwidth_bytes_per_s", "latency_s", "basis"}, where);
  LinkSpec link;
  link.bandwidth_bytes_per_s = positive_number(required(map, "bandwidth_bytes_per_s", where),
                                               where / "bandwidth_bytes_per_s", "450e9 (450 GB/s per direction)");
  link.latency_s = positive_number(required(map, "latency_s", where), where / "latency_s", "3e-6 (3 µs)");
  link.basis = read_basis(map, where);
  return link;
}

DeviceSpec read_device(const YAML::Node& map, const Where& where) {
  if (!map.IsMap()) throw SimError(where() + ": must be a map (name, dense_flops_per_s, memory_...)");
  check_keys(map,
             {"name", "basis", "dense_flops_per_s", "memory_bandwidth_bytes_per_s", "memory_capacity_bytes",
              "rows_efficiency"},
             where);
  DeviceSpec device;
  device.name = text(required(map, "name", where), where / "name");
  device.basis = read_basis(map, where);
  const Where flops_where = where / "dense_flops_per_s";
  const YAML::Node flops = required(map, "dense_flops_per_s", where);
  if (!flops.IsMap() || flops.size() == 0)
    throw SimError(flops_where() + ": must map at least one dtype to its dense peak, e.g. {bf16: 989.4e12}");
  check_keys(flops, {"bf16", "fp16", "fp32", "tf32", "fp8"}, flops_where);
  for (const auto& entry : flops) {
    const std::string dtype = entry.first.as<std::string>();
    device.dense_flops_per_s[dtype] = positive_number(entry.second, flops_where / dtype, "989.4e12");
  }
  device.memory_bandwidth_bytes_per_s =
      positive_number(required(map, "memory_bandwidth_bytes_per_s", where), where / "memory_bandwidth_bytes_per_s",
                      "3.35e12 (3.35 TB/s)");
  device.memory_capacity_bytes = positive_number(required(map, "memory_capacity_bytes", where),
                                                 where / "memory_capacity_bytes", "80e9 (80 GB)");
  if (const YAML::Node rows = map["rows_efficiency"]) {
    const Where rows_where = where / "rows_efficiency";
    if (!rows.IsSequence() || rows.size() == 0)
      throw SimError(rows_where() + ": must be a list of [rows, share] pairs, e.g. [[16, 0.66], [64, 0.9], [256, 1]]");
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const Where point = rows_where / std::to_string(i);
      if (!rows[i].IsSequence() || rows[i].size() != 2)
        throw SimError(point() + ": must be a [rows, share] pair, e.g. [64, 0.9]");
      const double r = positive_number(rows[i][0], point / "rows", "64");
      const double share = positive_number(rows[i][1], point / "share", "0.9");
      if (share > 1.0)
        throw SimError(fmt::format("{} = {}: a share of the large-product rate is at most 1 (divide the measured "
                                   "rates by the largest)",
                                   (point / "share")(), share));
      if (!device.rows_efficiency.empty() && r <= device.rows_efficiency.back().first)
        throw SimError(fmt::format("{} = {}: the rows must ascend (the point before has {})", (point / "rows")(), r,
                                   device.rows_efficiency.back().first));
      device.rows_efficiency.emplace_back(r, share);
    }
  }
  return device;
}

}  // namespace

HardwareSpec parse_hardware(const std::string& yaml_text, const std::string& origin) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    throw SimError(fmt::format("{}: not valid YAML: {}", origin, e.what()));
  }
  const Where top{origin, ""};
  if (!root.IsMap()) throw SimError(origin + ": must be a YAML map (name, source, devices_per_node, device, ...)");
  check_keys(root, {"name", "source", "devices_per_node", "device", "intra_node", "inter_node"}, top);

  HardwareSpec hw;
  hw.name = text(required(root, "name", top), top / "name");
  hw.source = text(required(root, "source", top), top / "source");
  const double per_node = positive_number(required(root, "devices_per_node", top), top / "devices_per_node", "8");
  if (per_node != std::floor(per_node))
    throw SimError(fmt::format("{} = {}: must be a whole number of devices", (top / "devices_per_node")(), per_node));
  hw.devices_per_node = static_cast<int>(per_node);
  hw.device = read_device(required(root, "device", top), top / "device");
  hw.intra_node = read_link(required(root, "intra_node", top), top / "intra_node");
  hw.inter_node = read_link(required(root, "inter_node", top), top / "inter_node");
  return hw;
}

HardwareSpec read_hardware(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw SimError(fmt::format("{}: cannot open the hardware file: check the path (presets: bench/hardware/)", path));
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return parse_hardware(buffer.str(), path);
}

}  // namespace hs::bench::sim
