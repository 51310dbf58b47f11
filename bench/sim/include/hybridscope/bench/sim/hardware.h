// hardware.h — a cluster's description for the simulator: what one device computes and holds,
// how its links move bytes, and how many devices share a node. Read from a small YAML file
// (bench/hardware/*.yaml; the schema is in docs/simulator.md and in read_hardware's comment).
//
// Not here: efficiencies (achieved/peak) — those are fitted from measured runs and live with the
// calibration, not with the hardware's peak figures; the collectives' cost (comm_model.h).
#pragma once

#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace hs::bench::sim {

/// A description or measurement the simulator cannot use: the message names the file, the key and
/// the fix ("bench/hardware/x.yaml: device.memory_capacity_bytes = -1: must be a number > 0").
class SimError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Where a number came from, so every projection can list its assumptions.
enum class Basis {
  kSpec,      // a vendor's published peak (datasheet); cite it in the file
  kMeasured,  // measured on the machine (a micro-benchmark or a fit of one)
  kAssumed,   // neither: an engineering guess, listed as an assumption in every projection
};

/// "spec", "measured", "assumed".
const char* basis_name(Basis basis) noexcept;

/// The peak figures of one device (a GPU, or a CPU socket).
struct DeviceSpec {
  std::string name;
  /// Dense (no structured sparsity) peak FLOP/s per dtype: "bf16", "fp16", "fp32", "tf32", "fp8".
  std::map<std::string, double> dense_flops_per_s;
  double memory_bandwidth_bytes_per_s = 0.0;  // HBM / DRAM, one direction's peak
  double memory_capacity_bytes = 0.0;         // usable by the framework
  Basis basis = Basis::kSpec;
  /// The share of its rate on many rows that a linear layer's product reaches with `rows` input
  /// rows (a decode step's sequences, a forward call's tokens), as (rows, share) points in
  /// ascending rows: a CPU's products of a few dozen rows run well below their large-product rate
  /// (hs_micro_bench BM_LinearRows). Empty: 1 at every size.
  std::vector<std::pair<double, double>> rows_efficiency;

  /// Peak dense FLOP/s for `dtype`; throws SimError naming the dtypes the file gives.
  double flops_per_s(const std::string& dtype) const;
  /// rows_efficiency at `rows`: linear in log2(rows) between its points, the first point's share
  /// below them, the last's above; 1 when there are none.
  double rows_share(double rows) const noexcept;
};

/// One level of the interconnect, in the alpha-beta form: moving `b` bytes point to point costs
/// latency_s + b / bandwidth_bytes_per_s. Bandwidth is per device and per direction (NVLink's
/// "900 GB/s" is both directions together: 450e9 here).
struct LinkSpec {
  double bandwidth_bytes_per_s = 0.0;
  double latency_s = 0.0;
  Basis basis = Basis::kSpec;
};

enum class LinkLevel { kIntraNode, kInterNode };

/// "intra_node", "inter_node".
const char* link_level_name(LinkLevel level) noexcept;

struct HardwareSpec {
  std::string name;
  std::string source;  // where the numbers come from (datasheets, the measurement's command)
  DeviceSpec device;
  int devices_per_node = 1;
  LinkSpec intra_node;  // between devices of one node (NVLink, or shared memory on a CPU host)
  LinkSpec inter_node;  // between nodes (InfiniBand, RoCE, Ethernet)

  const LinkSpec& link(LinkLevel level) const noexcept {
    return level == LinkLevel::kIntraNode ? intra_node : inter_node;
  }
};

/// Parses a hardware description; `origin` names it in messages (a path). Unknown keys, missing
/// keys and non-positive numbers throw SimError with the key and the fix.
HardwareSpec parse_hardware(const std::string& yaml_text, const std::string& origin);

/// Reads and parses the file at `path` (parse_hardware).
HardwareSpec read_hardware(const std::string& path);

}  // namespace hs::bench::sim
