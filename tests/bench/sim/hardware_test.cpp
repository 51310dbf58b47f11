// hardware_test.cpp — hardware descriptions: the presets parse to their datasheet figures, and a
// bad file is refused with the key and the fix.
#include "hybridscope/bench/sim/hardware.h"

#include <gtest/gtest.h>

#include <string>

namespace sim = hs::bench::sim;

namespace {

std::string preset(const char* name) { return std::string(HS_SOURCE_DIR) + "/bench/hardware/" + name; }

const char* kValid = R"(
name: tiny
source: test
devices_per_node: 4
device:
  name: toy
  dense_flops_per_s: {bf16: 100e12, fp32: 25e12}
  memory_bandwidth_bytes_per_s: 1e12
  memory_capacity_bytes: 16e9
intra_node: {bandwidth_bytes_per_s: 100e9, latency_s: 1e-6, basis: measured}
inter_node: {bandwidth_bytes_per_s: 10e9, latency_s: 1e-5, basis: assumed}
)";

// The message of the SimError that parsing `text` throws ("" when it does not throw).
std::string error_of(const std::string& text) {
  try {
    sim::parse_hardware(text, "x.yaml");
  } catch (const sim::SimError& e) {
    return e.what();
  }
  return "";
}

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return text.replace(at, from.size(), to);
}

}  // namespace

TEST(Hardware, ParsesEveryField) {
  const sim::HardwareSpec hw = sim::parse_hardware(kValid, "x.yaml");
  EXPECT_EQ(hw.name, "tiny");
  EXPECT_EQ(hw.devices_per_node, 4);
  EXPECT_EQ(hw.device.name, "toy");
  EXPECT_EQ(hw.device.basis, sim::Basis::kSpec);  // the default
  EXPECT_DOUBLE_EQ(hw.device.flops_per_s("bf16"), 100e12);
  EXPECT_DOUBLE_EQ(hw.device.flops_per_s("fp32"), 25e12);
  EXPECT_DOUBLE_EQ(hw.device.memory_bandwidth_bytes_per_s, 1e12);
  EXPECT_DOUBLE_EQ(hw.device.memory_capacity_bytes, 16e9);
  EXPECT_DOUBLE_EQ(hw.link(sim::LinkLevel::kIntraNode).bandwidth_bytes_per_s, 100e9);
  EXPECT_DOUBLE_EQ(hw.link(sim::LinkLevel::kIntraNode).latency_s, 1e-6);
  EXPECT_EQ(hw.intra_node.basis, sim::Basis::kMeasured);
  EXPECT_DOUBLE_EQ(hw.link(sim::LinkLevel::kInterNode).bandwidth_bytes_per_s, 10e9);
  EXPECT_EQ(hw.inter_node.basis, sim::Basis::kAssumed);
}

// rows_efficiency: linear in log2(rows) between its points, flat outside them, 1 without any.
TEST(Hardware, RowsEfficiencyInterpolatesInLogRows) {
  EXPECT_EQ(sim::parse_hardware(kValid, "x.yaml").device.rows_share(3.0), 1.0);  // none given
  const sim::HardwareSpec hw = sim::parse_hardware(
      replaced(kValid, "memory_capacity_bytes: 16e9", "memory_capacity_bytes: 16e9\n  rows_efficiency: [[16, 0.5], [64, 1]]"),
      "x.yaml");
  ASSERT_EQ(hw.device.rows_efficiency.size(), 2u);
  EXPECT_EQ(hw.device.rows_share(4.0), 0.5);    // below the first point: its share
  EXPECT_EQ(hw.device.rows_share(16.0), 0.5);
  EXPECT_DOUBLE_EQ(hw.device.rows_share(32.0), 0.75);  // log2 32 = 5: half way from 4 to 6
  // 20 rows: 0.5 + (log2 20 − 4) / 2 · 0.5 = 0.5 + 0.3219281 / 4 = 0.58048202.
  EXPECT_NEAR(hw.device.rows_share(20.0), 0.58048202, 1e-8);
  EXPECT_EQ(hw.device.rows_share(1000.0), 1.0);  // above the last: its share
  const sim::HardwareSpec cpu = sim::read_hardware(preset("cpu-local.yaml"));
  EXPECT_GE(cpu.device.rows_efficiency.size(), 4u);  // measured (BM_LinearRows)
}

TEST(Hardware, UnknownDtypeNamesTheOnesGiven) {
  const sim::HardwareSpec hw = sim::parse_hardware(kValid, "x.yaml");
  try {
    hw.device.flops_per_s("fp8");
    FAIL() << "fp8 is not in the file";
  } catch (const sim::SimError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("device.dense_flops_per_s.fp8"), std::string::npos) << what;
    EXPECT_NE(what.find("bf16, fp32"), std::string::npos) << what;
  }
}

TEST(Hardware, PresetsMatchTheDatasheets) {
  const sim::HardwareSpec h100 = sim::read_hardware(preset("h100-ib.yaml"));
  EXPECT_EQ(h100.devices_per_node, 8);
  EXPECT_DOUBLE_EQ(h100.device.flops_per_s("bf16"), 989.4e12);  // 1,979 TFLOPS sparse / 2
  EXPECT_DOUBLE_EQ(h100.device.memory_bandwidth_bytes_per_s, 3.35e12);
  EXPECT_DOUBLE_EQ(h100.device.memory_capacity_bytes, 80e9);
  EXPECT_DOUBLE_EQ(h100.intra_node.bandwidth_bytes_per_s, 450e9);  // 900 GB/s both ways / 2
  EXPECT_DOUBLE_EQ(h100.inter_node.bandwidth_bytes_per_s, 50e9);   // 400 Gb/s / 8 bits

  const sim::HardwareSpec h200 = sim::read_hardware(preset("h200-ib.yaml"));
  EXPECT_DOUBLE_EQ(h200.device.flops_per_s("bf16"), h100.device.flops_per_s("bf16"));  // same die
  EXPECT_DOUBLE_EQ(h200.device.memory_bandwidth_bytes_per_s, 4.8e12);
  EXPECT_DOUBLE_EQ(h200.device.memory_capacity_bytes, 141e9);

  const sim::HardwareSpec cpu = sim::read_hardware(preset("cpu-local.yaml"));
  EXPECT_EQ(cpu.intra_node.basis, sim::Basis::kMeasured);  // fitted from out/comm-bench.json
  EXPECT_GT(cpu.device.flops_per_s("fp32"), 0.0);
}

TEST(Hardware, ErrorsNameTheKeyAndTheFix) {
  struct Case {
    std::string text;
    std::string expected;
  };
  const Case cases[] = {
      // a typo gets the nearest key
      {replaced(kValid, "devices_per_node", "device_per_node"), "device_per_node: unknown key — did you mean devices_per_node?"},
      {replaced(kValid, "memory_capacity_bytes: 16e9", "memory_capacty_bytes: 16e9"),
       "device.memory_capacty_bytes: unknown key — did you mean memory_capacity_bytes?"},
      // missing
      {replaced(kValid, "source: test\n", ""), "x.yaml: source: missing"},
      {replaced(kValid, "inter_node: {bandwidth_bytes_per_s: 10e9, latency_s: 1e-5, basis: assumed}", ""),
       "x.yaml: inter_node: missing"},
      // values
      {replaced(kValid, "memory_capacity_bytes: 16e9", "memory_capacity_bytes: -1"),
       "device.memory_capacity_bytes = -1: must be a number > 0"},
      {replaced(kValid, "latency_s: 1e-6", "latency_s: 1us"), "intra_node.latency_s = 1us: must be a number > 0 in SI units"},
      {replaced(kValid, "devices_per_node: 4", "devices_per_node: 2.5"), "devices_per_node = 2.5: must be a whole number"},
      {replaced(kValid, "basis: measured", "basis: guessed"), "intra_node.basis = guessed: must be spec, measured or assumed"},
      {replaced(kValid, "{bf16: 100e12, fp32: 25e12}", "{bf61: 100e12}"), "device.dense_flops_per_s.bf61: unknown key — did you mean bf16?"},
      {replaced(kValid, "{bf16: 100e12, fp32: 25e12}", "{}"), "device.dense_flops_per_s: must map at least one dtype"},
      {replaced(kValid, "memory_capacity_bytes: 16e9", "memory_capacity_bytes: 16e9\n  rows_efficiency: 0.9"),
       "device.rows_efficiency: must be a list of [rows, share] pairs"},
      {replaced(kValid, "memory_capacity_bytes: 16e9", "memory_capacity_bytes: 16e9\n  rows_efficiency: [[16, 0.5, 1]]"),
       "device.rows_efficiency.0: must be a [rows, share] pair"},
      {replaced(kValid, "memory_capacity_bytes: 16e9", "memory_capacity_bytes: 16e9\n  rows_efficiency: [[16, 1.2]]"),
       "device.rows_efficiency.0.share = 1.2: a share of the large-product rate is at most 1"},
      {replaced(kValid, "memory_capacity_bytes: 16e9", "memory_capacity_bytes: 16e9\n  rows_efficiency: [[64, 0.9], [16, 0.5]]"),
       "device.rows_efficiency.1.rows = 16: the rows must ascend (the point before has 64)"},
      {replaced(kValid, "memory_capacity_bytes: 16e9", "memory_capacity_bytes: 16e9\n  rows_efficiency: [[0, 0.5]]"),
       "device.rows_efficiency.0.rows = 0: must be a number > 0"},
      {"[1, 2]", "x.yaml: must be a YAML map"},
      {"name: [unclosed", "x.yaml: not valid YAML"},
  };
  for (const auto& c : cases) {
    const std::string what = error_of(c.text);
    EXPECT_NE(what.find(c.expected), std::string::npos) << "expected '" << c.expected << "' in '" << what << "'";
  }
}

TEST(Hardware, MissingFileSaysWhereThePresetsAre) {
  try {
    sim::read_hardware("/nonexistent/h100.yaml");
    FAIL();
  } catch (const sim::SimError& e) {
    EXPECT_NE(std::string(e.what()).find("bench/hardware/"), std::string::npos) << e.what();
  }
}
