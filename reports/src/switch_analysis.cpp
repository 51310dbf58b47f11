// switch_analysis.cpp — each weight switch against its wire bound (switch_analysis.h).
#include "hybridscope/reports/switch_analysis.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>
#include <set>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "hybridscope/reports/statistics.h"

namespace hs::reports {

namespace {

constexpr double kNsPerSecond = 1e9;
constexpr double kBytesPerGB = 1e9;
constexpr double kMiB = 1024.0 * 1024.0;
constexpr std::int64_t kMinOwnCollectiveBytes = 1 << 20;  // smaller calls are latency-bound

// "BM_AllGather/ranks:2/..." -> "all_gather".
std::string op_from_benchmark_name(const std::string& name) {
  std::string camel = name.substr(0, name.find('/'));
  if (camel.rfind("BM_", 0) == 0) camel = camel.substr(3);
  std::string out;
  for (const char c : camel) {
    if (std::isupper(static_cast<unsigned char>(c)) && !out.empty()) out += '_';
    out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

std::string ranks_text(int n) { return fmt::format("{} rank{}", n, n == 1 ? "" : "s"); }

std::string mib(std::int64_t bytes) { return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / kMiB); }

struct Bandwidth {
  std::optional<double> gbps;
  std::string source;
};

// The fastest measured link at the run's world size (or the largest size measured below it).
Bandwidth pick_bandwidth(const RunData& data, const std::vector<LinkMeasurement>& links) {
  int ranks = 0;
  for (const auto& l : links)
    if (l.ranks <= data.run.world_size) ranks = std::max(ranks, l.ranks);
  const LinkMeasurement* best = nullptr;
  for (const auto& l : links)
    if (l.ranks == ranks && l.busbw_gbps > 0 && (!best || l.busbw_gbps > best->busbw_gbps)) best = &l;
  if (best)
    return {best->busbw_gbps, fmt::format("communication micro-benchmark: {} on {} at {}, {:.2f} GB/s bus "
                                          "bandwidth (the fastest measured there)",
                                          best->op, ranks_text(best->ranks), mib(best->bytes), best->busbw_gbps)};
  // Only the collectives whose recorded time covers the transfer: a point-to-point send is timed
  // while it is posted (Gloo completes it asynchronously) and read 10 GB/s on the demo's loopback.
  const auto synchronous = [](const std::string& op) {
    return op == "all_reduce" || op == "all_gather" || op == "reduce_scatter" || op == "broadcast";
  };
  const CommOpRow* own = nullptr;
  for (const auto& c : data.comm_ops)
    if (synchronous(c.op) && c.bytes >= kMinOwnCollectiveBytes && c.busbw_gbps &&
        (!own || *c.busbw_gbps > *own->busbw_gbps))
      own = &c;
  if (own)
    return {*own->busbw_gbps, fmt::format("the run's own collectives: {} on group {} ({}) at {}, {:.2f} GB/s bus "
                                          "bandwidth (the fastest of the run)",
                                          own->op, own->group, ranks_text(own->group_size), mib(own->bytes), *own->busbw_gbps)};
  return {std::nullopt, "no bandwidth measured (no micro-benchmark JSON and no collective of 1 MiB or more in the "
                        "run): the switch has no wire bound"};
}

double median(std::vector<double> v) { return spread(std::move(v)).median; }

}  // namespace

std::vector<LinkMeasurement> load_comm_bench(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path + ": run `make comm-bench` to produce it");
  nlohmann::json doc;
  try {
    in >> doc;
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(path + " is not JSON (" + e.what() + "): pass the file hs_comm_bench wrote");
  }
  if (!doc.is_object() || !doc.contains("benchmarks") || !doc["benchmarks"].is_array())
    throw std::runtime_error(path + " has no \"benchmarks\" array: pass the Google Benchmark JSON hs_comm_bench wrote "
                                    "(out/comm-bench.json)");
  // All-reduces and all-gathers of up to the context's shm_bytes went through the collectives'
  // shared-memory slots (hybridscope.dist.shm_bytes): a reduction's speed, not a transfer's, left
  // out. The exchange rows (send) are the switch's own op, through the same mailboxes on one host.
  std::int64_t shm_bytes = 0;
  if (doc.contains("context") && doc["context"].is_object() && doc["context"].contains("shm_bytes")) {
    const auto& v = doc["context"]["shm_bytes"];
    try {
      shm_bytes = v.is_string() ? std::stoll(v.get<std::string>()) : v.get<std::int64_t>();
    } catch (const std::exception&) {
      throw std::runtime_error(path + ": context shm_bytes is not a byte count: " + v.dump());
    }
  }
  std::vector<LinkMeasurement> out;
  for (const auto& b : doc["benchmarks"]) {
    if (b.value("run_type", "iteration") != "iteration") continue;  // aggregates repeat the iterations
    if (!b.contains("busbw_GBps") || !b.contains("bytes") || !b.contains("group_size") || !b.contains("name"))
      throw std::runtime_error(path + ": benchmark " + b.value("name", std::string("?")) +
                               " lacks busbw_GBps, bytes or group_size: not an hs_comm_bench result");
    LinkMeasurement m;
    m.op = op_from_benchmark_name(b["name"].get<std::string>());
    m.ranks = static_cast<int>(b["group_size"].get<double>());
    m.bytes = static_cast<std::int64_t>(b["bytes"].get<double>());
    m.busbw_gbps = b["busbw_GBps"].get<double>();
    const bool shm_op = m.op.rfind("all_reduce", 0) == 0 || m.op.rfind("all_gather", 0) == 0;
    if (shm_op && m.bytes <= shm_bytes) continue;
    out.push_back(std::move(m));
  }
  return out;
}

SwitchAnalysis switch_analysis(const RunData& data, const std::vector<std::int64_t>& measured,
                               const std::vector<LinkMeasurement>& links) {
  SwitchAnalysis out;
  const auto bandwidth = pick_bandwidth(data, links);
  out.bandwidth_gbps = bandwidth.gbps;
  out.bandwidth_source = bandwidth.source;
  const std::set<std::int64_t> steps(measured.begin(), measured.end());

  // (step, direction) -> the ranks' rows of that switch; a switch is in the step whose range it
  // starts in (StepWindows): the final validation's switch carries the last step's number.
  std::map<std::pair<std::int64_t, std::string>, std::vector<const SwitchRow*>> groups;
  const StepWindows windows(data);
  for (const auto& w : data.switches) {
    const auto step = windows.step_of(w.rank, w.start_ns, w.step);
    if (step && steps.count(*step)) groups[{*step, w.direction}].push_back(&w);
  }

  std::map<std::string, std::vector<const SwitchRow*>> slowest_by_direction;
  for (const auto& [key, rows] : groups) {
    SwitchEvent e;
    e.step = key.first;
    e.direction = key.second;
    const SwitchRow* slowest = rows.front();
    for (const auto* w : rows) {
      if (w->end_ns - w->start_ns > slowest->end_ns - slowest->start_ns) slowest = w;
      e.max_bytes_received = std::max(e.max_bytes_received, w->bytes_received);
      e.total_bytes_received += w->bytes_received;
    }
    e.seconds = static_cast<double>(slowest->end_ns - slowest->start_ns) / kNsPerSecond;
    e.slowest_rank = slowest->rank;
    if (out.bandwidth_gbps && e.max_bytes_received > 0)
      e.wire_bound_s = static_cast<double>(e.max_bytes_received) / (*out.bandwidth_gbps * kBytesPerGB);
    slowest_by_direction[e.direction].push_back(slowest);
    out.events.push_back(std::move(e));
  }

  for (const std::string direction : {"train_to_rollout", "rollout_to_train"}) {
    const auto it = slowest_by_direction.find(direction);
    if (it == slowest_by_direction.end()) continue;
    SwitchDirectionSummary d;
    d.direction = direction;
    std::vector<double> seconds, bounds;
    std::vector<double> bytes;
    for (const auto& e : out.events) {
      if (e.direction != direction) continue;
      seconds.push_back(e.seconds);
      bytes.push_back(static_cast<double>(e.max_bytes_received));
      if (e.wire_bound_s) bounds.push_back(*e.wire_bound_s);
    }
    d.switches = static_cast<int>(seconds.size());
    d.median_s = median(seconds);
    d.max_s = *std::max_element(seconds.begin(), seconds.end());
    d.median_max_bytes_received = static_cast<std::int64_t>(median(bytes));
    if (!bounds.empty()) {
      d.wire_bound_s = median(bounds);
      if (*d.wire_bound_s > 0) d.over_bound = d.median_s / *d.wire_bound_s;
    }
    // Components on each switch's slowest rank, averaged, in the order they first ran.
    std::vector<std::pair<std::string, double>> sums;
    double unaccounted = 0.0;
    for (const auto* w : it->second) {
      double inside = 0.0;
      for (const auto& [name, ns] : w->components) {
        // (a structured binding cannot be captured before C++20: clang refuses it)
        auto pos = std::find_if(sums.begin(), sums.end(), [&name = name](const auto& s) { return s.first == name; });
        if (pos == sums.end()) pos = sums.insert(sums.end(), {name, 0.0});
        pos->second += static_cast<double>(ns) / kNsPerSecond;
        inside += static_cast<double>(ns) / kNsPerSecond;
      }
      unaccounted += std::max(0.0, static_cast<double>(w->end_ns - w->start_ns) / kNsPerSecond - inside);
    }
    const double n = static_cast<double>(it->second.size());
    for (auto& [name, total] : sums) d.components_s.emplace_back(name, total / n);
    d.unaccounted_s = unaccounted / n;
    out.directions.push_back(std::move(d));
  }

  if (!out.directions.empty()) {
    const auto& d = *std::max_element(out.directions.begin(), out.directions.end(),
                                      [](const auto& a, const auto& b) { return a.median_s < b.median_s; });
    std::string line = fmt::format("the {} switch: the busiest rank received {} in {:.1f} ms (median of {})",
                                   d.direction, mib(d.median_max_bytes_received), d.median_s * 1e3, d.switches);
    if (d.wire_bound_s) {
      const double above = d.median_s > 0 ? std::max(0.0, 1.0 - *d.wire_bound_s / d.median_s) : 0.0;
      line += fmt::format("; the wire needs {:.1f} ms at {:.2f} GB/s; {:.0f} % of it is above the wire bound",
                          *d.wire_bound_s * 1e3, *out.bandwidth_gbps, above * 100.0);
    } else {
      line += d.median_max_bytes_received == 0 ? "; no bytes crossed the wire (the layouts share every shard)"
                                               : "; no wire bound (no bandwidth measured)";
    }
    std::vector<std::pair<std::string, double>> parts = d.components_s;
    parts.emplace_back("unaccounted", d.unaccounted_s);
    std::sort(parts.begin(), parts.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    std::string list;
    for (std::size_t i = 0; i < parts.size() && i < 3; ++i)
      list += fmt::format("{}{} {:.1f} ms", i ? ", " : "", parts[i].first, parts[i].second * 1e3);
    out.headline = line + " (largest parts, mean per switch: " + list + ")";
  }
  return out;
}

}  // namespace hs::reports
