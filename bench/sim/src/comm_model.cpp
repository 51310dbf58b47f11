// comm_model.cpp — the alpha-beta model and its fit (see comm_model.h).
#include "hybridscope/bench/sim/comm_model.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include "hybridscope/probes/recorder.h"

namespace hs::bench::sim {

const char* collective_name(Collective op) noexcept {
  switch (op) {
    case Collective::kAllReduce: return "all_reduce";
    case Collective::kAllGather: return "all_gather";
    case Collective::kReduceScatter: return "reduce_scatter";
    case Collective::kAllToAll: return "all_to_all";
    case Collective::kBroadcast: return "broadcast";
    case Collective::kSendRecv: return "send";
  }
  return "?";
}

std::optional<Collective> collective_from_name(std::string_view name) noexcept {
  for (Collective op : {Collective::kAllReduce, Collective::kAllGather, Collective::kReduceScatter,
                        Collective::kAllToAll, Collective::kBroadcast, Collective::kSendRecv})
    if (name == collective_name(op)) return op;
  if (name == "recv" || name == "send_recv") return Collective::kSendRecv;
  return std::nullopt;
}

double latency_steps(Collective op, int n) noexcept {
  if (n <= 1) return 0.0;
  const double hops = static_cast<double>(n - 1);
  switch (op) {
    case Collective::kAllReduce: return 2.0 * hops;  // a reduce-scatter ring, then an all-gather ring
    case Collective::kAllGather:
    case Collective::kReduceScatter:
    case Collective::kAllToAll:
    case Collective::kBroadcast: return hops;  // the pipeline's fill along the chain
    case Collective::kSendRecv: return 1.0;
  }
  return 0.0;
}

double bus_factor(Collective op, int n) noexcept {
  if (n <= 1) return 0.0;
  // One definition for the recorder, hs_comm_bench and the simulator.
  return probes::bus_bandwidth_factor(collective_name(op), n);
}

double collective_seconds(Collective op, int n, double bytes, const AlphaBeta& link) noexcept {
  return latency_steps(op, n) * link.alpha_s + bus_factor(op, n) * bytes / link.beta_bytes_per_s;
}

LinkLevel link_level_for_group(int n, int devices_per_node) noexcept {
  return n <= devices_per_node ? LinkLevel::kIntraNode : LinkLevel::kInterNode;
}

double collective_seconds(const HardwareSpec& hw, Collective op, int n, double bytes) noexcept {
  const LinkSpec& link = hw.link(link_level_for_group(n, hw.devices_per_node));
  return collective_seconds(op, n, bytes, AlphaBeta{link.latency_s, link.bandwidth_bytes_per_s});
}

namespace {

double mean_abs_pct_error(const std::vector<CommSample>& samples, const AlphaBeta& params) {
  double sum = 0.0;
  for (const auto& s : samples)
    sum += std::abs(collective_seconds(s.op, s.group_size, s.bytes, params) - s.seconds) / s.seconds;
  return 100.0 * sum / static_cast<double>(samples.size());
}

}  // namespace

AlphaBetaFit fit_alpha_beta(const std::vector<CommSample>& samples, FitWeighting weighting) {
  if (samples.size() < 2)
    throw SimError(fmt::format("alpha-beta fit: {} sample(s): give at least two message sizes", samples.size()));
  // Weighted normal equations for t_i ≈ a_i·alpha + b_i·g, g = 1/beta, with a_i = latency steps
  // and b_i = bus factor · bytes; weight w_i = 1/t_i² (relative) or 1 (absolute).
  double saa = 0, sab = 0, sbb = 0, sat = 0, sbt = 0;
  for (const auto& s : samples) {
    if (!(s.seconds > 0.0) || !(s.bytes > 0.0) || s.group_size < 2)
      throw SimError(fmt::format("alpha-beta fit: sample {} over {} ranks, {} bytes, {} s: times and sizes must be "
                                 "> 0 and groups of 2 or more ranks (drop it)",
                                 collective_name(s.op), s.group_size, s.bytes, s.seconds));
    const double a = latency_steps(s.op, s.group_size);
    const double b = bus_factor(s.op, s.group_size) * s.bytes;
    const double w = weighting == FitWeighting::kRelative ? 1.0 / (s.seconds * s.seconds) : 1.0;
    saa += w * a * a, sab += w * a * b, sbb += w * b * b, sat += w * a * s.seconds, sbt += w * b * s.seconds;
  }
  AlphaBetaFit fit;
  fit.samples = static_cast<int>(samples.size());
  const double det = saa * sbb - sab * sab;
  // Singular when every sample has the same ratio of latency steps to bus bytes (one size, one op).
  const bool singular = std::abs(det) <= 1e-12 * saa * sbb;
  double alpha = singular ? 0.0 : (sat * sbb - sab * sbt) / det;
  double inverse_beta = singular ? 0.0 : (saa * sbt - sab * sat) / det;
  if (singular)
    throw SimError("alpha-beta fit: the samples cannot tell latency from bandwidth (one message size per group "
                   "size and op): measure at least two sizes, e.g. hs_comm_bench's 4 KiB … 64 MiB sweep");
  if (alpha < 0.0) {  // constrained least squares: alpha = 0, g alone
    fit.alpha_clamped = true;
    alpha = 0.0;
    inverse_beta = sbt / sbb;
  }
  if (!(inverse_beta > 0.0))
    throw SimError(fmt::format("alpha-beta fit: the bandwidth term came out {} (time does not grow with size): "
                               "include messages large enough to be bandwidth-bound (MiB and up)",
                               inverse_beta));
  fit.params = AlphaBeta{alpha, 1.0 / inverse_beta};
  fit.mean_abs_pct_error = mean_abs_pct_error(samples, fit.params);
  return fit;
}

CommBenchData parse_comm_bench_json(const std::string& json_text, const std::string& origin) {
  nlohmann::json root;
  try {
    root = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::exception& e) {
    throw SimError(fmt::format("{}: not valid JSON: {}", origin, e.what()));
  }
  if (!root.is_object() || !root.contains("benchmarks") || !root["benchmarks"].is_array())
    throw SimError(origin + ": no 'benchmarks' array: expected hs_comm_bench's Google Benchmark JSON "
                            "(--benchmark_out, default out/comm-bench.json)");
  // Google Benchmark's family names -> collectives (bench/micro/comm_bench.cpp).
  const std::pair<const char*, Collective> kFamilies[] = {
      {"BM_AllReduce", Collective::kAllReduce},         {"BM_AllGather", Collective::kAllGather},
      {"BM_ReduceScatter", Collective::kReduceScatter}, {"BM_AllToAll", Collective::kAllToAll},
      {"BM_Broadcast", Collective::kBroadcast},         {"BM_SendRecv", Collective::kSendRecv}};
  CommBenchData data;
  for (const auto& row : root["benchmarks"]) {
    const std::string name = row.value("name", std::string());
    const std::string family = name.substr(0, name.find('/'));
    std::optional<Collective> op;
    // BM_<Op>InSitu, BM_<Op>InSituPairs: timed after compute (the latter 2-rank groups among the
    // world's ranks, the `processes` counter).
    std::string base = family;
    auto strip = [&base](const std::string& suffix) {  // drops `suffix` from base's end, if it ends so
      if (base.size() <= suffix.size() || base.compare(base.size() - suffix.size(), suffix.size(), suffix) != 0)
        return false;
      base.resize(base.size() - suffix.size());
      return true;
    };
    const bool pairs = strip("InSituPairs");
    const bool in_situ = pairs || strip("InSitu");
    for (const auto& [prefix, collective] : kFamilies)
      if (base == prefix) op = collective;
    if (!op || row.value("run_type", std::string("iteration")) != "iteration") {
      data.skipped.push_back(name);
      continue;
    }
    for (const char* key : {"bytes", "group_size", "real_time", "time_unit"})
      if (!row.contains(key))
        throw SimError(fmt::format("{}: benchmark {} has no '{}': rerun hs_comm_bench (its rows carry bytes, "
                                   "group_size, real_time, time_unit)",
                                   origin, name, key));
    const std::string unit = row["time_unit"].get<std::string>();
    const double scale = unit == "ns" ? 1e-9 : unit == "us" ? 1e-6 : unit == "ms" ? 1e-3 : unit == "s" ? 1.0 : 0.0;
    if (scale == 0.0)
      throw SimError(fmt::format("{}: benchmark {}: time_unit '{}' is not ns, us, ms or s", origin, name, unit));
    CommSample sample;
    sample.op = *op;
    sample.in_situ = in_situ;
    if (pairs) {
      if (!row.contains("processes"))
        throw SimError(fmt::format("{}: benchmark {} has no 'processes': rerun hs_comm_bench", origin, name));
      sample.processes = static_cast<int>(std::lround(row["processes"].get<double>()));
    }
    sample.group_size = static_cast<int>(std::lround(row["group_size"].get<double>()));
    sample.bytes = row["bytes"].get<double>();
    // The mean iteration (Google Benchmark's real_time under manual time), not the median: a phase
    // pays the sum of its calls, so the expected cost of one is the mean. On a shared-core machine
    // a small collective's times are bimodal (a call either finds its peer running or waits for it
    // to be scheduled: 0.3 ms or 1.3 ms for a 2-rank all-reduce), and the median sits on one mode.
    sample.seconds = row["real_time"].get<double>() * scale;
    data.samples.push_back(sample);
  }
  return data;
}

CommBenchPasses merge_comm_bench_passes(const std::vector<std::string>& reports, const std::string& origin) {
  if (reports.empty()) throw SimError(origin + ": no pass to merge");
  std::vector<std::string> order;                          // names, as they first appear
  std::map<std::string, std::vector<nlohmann::json>> rows;  // name -> its row of each pass
  nlohmann::json context;
  for (std::size_t i = 0; i < reports.size(); ++i) {
    nlohmann::json report;
    try {
      report = nlohmann::json::parse(reports[i]);
    } catch (const nlohmann::json::exception& e) {
      throw SimError(fmt::format("{}: report {} is not valid JSON: {}", origin, i + 1, e.what()));
    }
    if (!report.is_object() || !report.contains("benchmarks") || !report["benchmarks"].is_array())
      throw SimError(fmt::format("{}: report {} has no 'benchmarks' array", origin, i + 1));
    if (i == 0) context = report.value("context", nlohmann::json::object());
    for (const auto& row : report["benchmarks"]) {
      const std::string name = row.value("name", std::string());
      if (!row.contains("real_time") || !row["real_time"].is_number())
        throw SimError(fmt::format("{}: report {}: benchmark '{}' has no real_time", origin, i + 1, name));
      auto [it, added] = rows.try_emplace(name);
      if (added) order.push_back(name);
      it->second.push_back(row);
    }
  }
  CommBenchPasses out;
  for (const auto& [name, of_name] : rows) out.passes = std::max(out.passes, static_cast<int>(of_name.size()));
  nlohmann::json merged = {{"context", context}, {"benchmarks", nlohmann::json::array()}};
  merged["context"]["passes"] = out.passes;
  std::vector<double> spreads;
  for (const auto& name : order) {
    std::vector<nlohmann::json>& of_name = rows[name];
    if (static_cast<int>(of_name.size()) != out.passes)
      throw SimError(fmt::format("{}: benchmark {} ran in {} of {} passes: every pass must run the same benchmarks",
                                 origin, name, of_name.size(), out.passes));
    std::sort(of_name.begin(), of_name.end(), [](const nlohmann::json& a, const nlohmann::json& b) {
      return a["real_time"].get<double>() < b["real_time"].get<double>();
    });
    nlohmann::json row = of_name[(of_name.size() - 1) / 2];
    const double fastest = of_name.front()["real_time"].get<double>();
    const double slowest = of_name.back()["real_time"].get<double>();
    const double spread = fastest > 0 ? slowest / fastest : 1.0;
    row["passes"] = out.passes;
    row["pass_spread"] = spread;
    spreads.push_back(spread);
    if (spread > out.widest_spread) {
      out.widest_spread = spread;
      out.widest = name;
    }
    merged["benchmarks"].push_back(std::move(row));
  }
  if (!spreads.empty()) {
    std::sort(spreads.begin(), spreads.end());
    out.median_spread = spreads[(spreads.size() - 1) / 2];
  }
  out.benchmarks = order.size();
  out.json = merged.dump(2) + "\n";
  return out;
}

CommBenchData read_comm_bench_json(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    throw SimError(fmt::format("{}: cannot open: run hs_comm_bench first (docs/benchmarks.md, \"Communication "
                               "micro-benchmarks\")",
                               path));
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return parse_comm_bench_json(buffer.str(), path);
}

}  // namespace hs::bench::sim
