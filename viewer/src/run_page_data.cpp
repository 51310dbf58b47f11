// run_page_data.cpp — the Memory, Switch and Comm tabs' data from RunData (run_page_data.h).
#include "hybridscope/viewer/run_page_data.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <tuple>

#include "hybridscope/reports/comm_time.h"
#include "hybridscope/reports/statistics.h"

namespace hs::viewer {
namespace {

constexpr double kNsPerSecond = 1e9;
constexpr double kMiB = 1024.0 * 1024.0;
constexpr double kGiB = 1024.0 * kMiB;

std::string rank_name(int rank) { return "rank " + std::to_string(rank); }

// The run's start on the probes' monotonic clock (RunSummary: UNIX-epoch ns = monotonic ns +
// clock_offset_ns), or the earliest sample when a sample precedes it (a hand-built fixture).
std::int64_t time_origin_ns(const reports::RunData& data) {
  std::int64_t origin = data.run.start_unix_ns - data.run.clock_offset_ns;
  for (const auto& m : data.memory) origin = std::min(origin, m.ts_ns);
  for (const auto& k : data.kv_pool) origin = std::min(origin, k.ts_ns);
  return origin;
}

// A chart of one value per sample, a line per rank; nullopt values are skipped and a chart with no
// point at all is not made. `scale` turns the value into the axis's unit.
template <typename Row>
void add_per_rank_chart(std::vector<LineChartData>& out, const std::vector<Row>& rows, std::int64_t origin,
                        std::size_t max_points, const std::string& title, const std::string& y_label,
                        const std::function<std::optional<double>(const Row&)>& value) {
  std::map<int, LineSeries> by_rank;
  for (const Row& r : rows) {
    const auto v = value(r);
    if (!v || !std::isfinite(*v)) continue;
    auto& series = by_rank[r.rank];
    series.points.emplace_back(static_cast<double>(r.ts_ns - origin) / kNsPerSecond, *v);
  }
  if (by_rank.empty()) return;
  LineChartData chart;
  chart.title = title;
  chart.x_label = "s since the run started";
  chart.y_label = y_label;
  for (auto& [rank, series] : by_rank) {
    series.name = rank_name(rank);
    std::stable_sort(series.points.begin(), series.points.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    series.points = decimate_min_max(series.points, max_points);
    chart.series.push_back(std::move(series));
  }
  out.push_back(std::move(chart));
}

// MiB, or GiB when the largest value of the field is above 10 GiB (a 70B model's shards).
std::pair<double, std::string> byte_unit(const std::vector<reports::MemorySampleRow>& rows,
                                         std::optional<std::int64_t> reports::MemorySampleRow::*field) {
  std::int64_t top = 0;
  for (const auto& r : rows)
    if (const auto& v = r.*field) top = std::max(top, *v);
  return static_cast<double>(top) > 10.0 * kGiB ? std::make_pair(kGiB, std::string("GiB"))
                                                : std::make_pair(kMiB, std::string("MiB"));
}

}  // namespace

std::vector<std::pair<double, double>> decimate_min_max(const std::vector<std::pair<double, double>>& points,
                                                        std::size_t max_points) {
  if (max_points < 2 || points.size() <= max_points) return points;
  const std::size_t buckets = max_points / 2;
  std::vector<std::pair<double, double>> out;
  out.reserve(2 * buckets);
  for (std::size_t b = 0; b < buckets; ++b) {
    // Bucket b holds points [b·n/buckets, (b+1)·n/buckets): every point in exactly one bucket.
    const std::size_t begin = b * points.size() / buckets, end = (b + 1) * points.size() / buckets;
    if (begin == end) continue;
    std::size_t lo = begin, hi = begin;
    for (std::size_t i = begin; i < end; ++i) {
      if (points[i].second < points[lo].second) lo = i;
      if (points[i].second > points[hi].second) hi = i;
    }
    out.push_back(points[std::min(lo, hi)]);
    if (lo != hi) out.push_back(points[std::max(lo, hi)]);
  }
  return out;
}

std::vector<LineChartData> memory_charts(const reports::RunData& data, std::size_t max_points) {
  using Row = reports::MemorySampleRow;
  std::vector<LineChartData> out;
  const std::int64_t origin = time_origin_ns(data);
  const auto bytes_chart = [&](const std::string& title, std::optional<std::int64_t> Row::*field) {
    const auto [unit, unit_name] = byte_unit(data.memory, field);
    add_per_rank_chart<Row>(out, data.memory, origin, max_points, title + " (" + unit_name + ")", unit_name,
                            [field, unit = unit](const Row& r) -> std::optional<double> {
                              if (!(r.*field)) return std::nullopt;
                              return static_cast<double>(*(r.*field)) / unit;
                            });
  };
  const auto ratio_chart = [&](const std::string& title, std::optional<double> Row::*field) {
    add_per_rank_chart<Row>(out, data.memory, origin, max_points, title, "%",
                            [field](const Row& r) -> std::optional<double> {
                              if (!(r.*field)) return std::nullopt;
                              return 100.0 * *(r.*field);
                            });
  };
  bytes_chart("Allocated", &Row::allocated_bytes);
  bytes_chart("Reserved", &Row::reserved_bytes);
  bytes_chart("Active", &Row::active_bytes);
  ratio_chart("Reserved slack: 1 − allocated/reserved (%)", &Row::reserved_slack);
  ratio_chart("Split fragmentation: inactive split/reserved (%)", &Row::split_fragmentation);
  ratio_chart("External fragmentation: 1 − largest free/(reserved − active) (%)", &Row::external_fragmentation);
  bytes_chart("Inactive split", &Row::inactive_split_bytes);
  bytes_chart("Largest free block", &Row::largest_free_block_bytes);

  // Cumulative counters: charted only when one of them ever counted something.
  bool counted = false;
  for (const auto& m : data.memory)
    counted = counted || m.num_alloc_retries.value_or(0) > 0 || m.num_ooms.value_or(0) > 0;
  if (counted) {
    LineChartData chart;
    chart.title = "Allocation retries and OOMs (cumulative)";
    chart.x_label = "s since the run started";
    chart.y_label = "count";
    std::map<std::pair<int, int>, LineSeries> lines;  // (rank, 0 retries | 1 OOMs)
    for (const auto& m : data.memory) {
      const double t = static_cast<double>(m.ts_ns - origin) / kNsPerSecond;
      if (m.num_alloc_retries) lines[{m.rank, 0}].points.emplace_back(t, static_cast<double>(*m.num_alloc_retries));
      if (m.num_ooms) lines[{m.rank, 1}].points.emplace_back(t, static_cast<double>(*m.num_ooms));
    }
    for (auto& [key, series] : lines) {
      series.name = rank_name(key.first) + (key.second == 0 ? " retries" : " OOMs");
      std::stable_sort(series.points.begin(), series.points.end(),
                       [](const auto& a, const auto& b) { return a.first < b.first; });
      series.points = decimate_min_max(series.points, max_points);
      chart.series.push_back(std::move(series));
    }
    out.push_back(std::move(chart));
  }

  add_per_rank_chart<reports::KvPoolSampleRow>(
      out, data.kv_pool, origin, max_points, "KV pool occupancy: blocks used/blocks (%)", "%",
      [](const reports::KvPoolSampleRow& k) -> std::optional<double> {
        if (k.num_blocks <= 0) return std::nullopt;
        return 100.0 * static_cast<double>(k.blocks_used) / static_cast<double>(k.num_blocks);
      });

  // One time axis for every chart, so that a moment reads at the same place in each.
  std::optional<std::pair<double, double>> range;
  for (const auto& chart : out)
    for (const auto& series : chart.series)
      for (const auto& [x, y] : series.points)
        range = range ? std::make_pair(std::min(range->first, x), std::max(range->second, x)) : std::make_pair(x, x);
  for (auto& chart : out) chart.x_range = range;
  return out;
}

std::vector<SwitchTableRow> switch_table(const reports::RunData& data, const reports::SwitchAnalysis& analysis) {
  std::map<std::tuple<std::int64_t, std::string, int>, const reports::SwitchRow*> rows;
  for (const auto& w : data.switches) rows.try_emplace({w.step, w.direction, w.rank}, &w);
  std::vector<SwitchTableRow> out;
  std::vector<std::int64_t> start_ns;  // of each row's slowest rank, to order a step's switches as they ran
  for (const auto& e : analysis.events) {
    SwitchTableRow r;
    r.step = e.step;
    r.direction = e.direction;
    r.seconds = e.seconds;
    r.slowest_rank = e.slowest_rank;
    r.max_bytes_received = e.max_bytes_received;
    r.total_bytes_received = e.total_bytes_received;
    r.wire_bound_s = e.wire_bound_s;
    double inside = 0.0;
    const auto it = rows.find({e.step, e.direction, e.slowest_rank});
    start_ns.push_back(it == rows.end() ? 0 : it->second->start_ns);
    if (it != rows.end()) {
      for (const auto& [name, ns] : it->second->components) {
        r.components_s.emplace_back(name, static_cast<double>(ns) / kNsPerSecond);
        inside += static_cast<double>(ns) / kNsPerSecond;
      }
    }
    r.unaccounted_s = std::max(0.0, r.seconds - inside);
    out.push_back(std::move(r));
  }
  // SwitchAnalysis lists a step's switches by direction name (rollout_to_train first); within a
  // step they ran train_to_rollout first.
  std::vector<std::size_t> order(out.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return out[a].step != out[b].step ? out[a].step < out[b].step : start_ns[a] < start_ns[b];
  });
  std::vector<SwitchTableRow> sorted;
  for (const auto i : order) sorted.push_back(std::move(out[i]));
  return sorted;
}

std::vector<StackedBarData> switch_component_bars(const std::vector<SwitchTableRow>& rows) {
  std::vector<StackedBarData> out;
  for (const std::string direction : {"train_to_rollout", "rollout_to_train"}) {
    std::vector<const SwitchTableRow*> of;
    for (const auto& r : rows)
      if (r.direction == direction) of.push_back(&r);
    if (of.empty()) continue;
    StackedBarData chart;
    chart.title = "Switch " + direction + ": components on the slowest rank";
    chart.y_label = "ms";
    for (const auto* r : of) {
      chart.categories.push_back("step " + std::to_string(r->step));
      for (const auto& [name, _] : r->components_s)
        if (std::none_of(chart.sets.begin(), chart.sets.end(), [&](const BarSet& s) { return s.name == name; }))
          chart.sets.push_back({name, {}});
    }
    chart.sets.push_back({"unaccounted", {}});
    for (auto& set : chart.sets) {
      for (const auto* r : of) {
        double s = set.name == "unaccounted" ? r->unaccounted_s : 0.0;
        for (const auto& [name, seconds] : r->components_s)
          if (name == set.name) s += seconds;
        set.values.push_back(1e3 * s);
      }
    }
    out.push_back(std::move(chart));
  }
  return out;
}

std::vector<CommTableRow> comm_table(const reports::RunData& data, const std::vector<std::int64_t>& measured) {
  const std::set<std::int64_t> steps(measured.begin(), measured.end());
  const reports::StepWindows windows(data);
  struct Sums {
    CommTableRow row;
    std::vector<double> algbw, busbw;
  };
  std::map<std::tuple<std::string, std::string, int>, Sums> groups;
  for (const auto& c : data.comm_ops) {
    if (!windows.in(steps, c.rank, c.start_ns, c.step)) continue;
    auto& g = groups[{c.op, c.group, c.group_size}];
    g.row.calls += 1;
    g.row.bytes += c.bytes;
    g.row.summed_s += static_cast<double>(c.end_ns - c.start_ns) / kNsPerSecond;
    if (c.algbw_gbps && std::isfinite(*c.algbw_gbps)) g.algbw.push_back(*c.algbw_gbps);
    if (c.busbw_gbps && std::isfinite(*c.busbw_gbps)) g.busbw.push_back(*c.busbw_gbps);
  }
  std::vector<CommTableRow> out;
  for (auto& [key, g] : groups) {
    CommTableRow row = g.row;
    std::tie(row.op, row.group, row.group_size) = key;
    row.mean_s = row.summed_s / static_cast<double>(row.calls);
    // Wall time with at least one such call in flight, per rank, summed over ranks: concurrent
    // calls (the reshard exchange, fsdp's asynchronous gathers) are counted once (comm_time.h).
    const auto select = [&key = key](const reports::CommOpRow& c) {
      return c.op == std::get<0>(key) && c.group == std::get<1>(key) && c.group_size == std::get<2>(key);
    };
    for (const auto& [rank, ns] : reports::collective_union_ns(data, measured, select))
      row.total_s += static_cast<double>(ns) / kNsPerSecond;
    if (!g.algbw.empty()) row.algbw_gbps = reports::spread(g.algbw).median;
    if (!g.busbw.empty()) {
      const auto s = reports::spread(g.busbw);
      row.busbw_gbps = s.median;
      row.max_busbw_gbps = s.max;
    }
    out.push_back(std::move(row));
  }
  std::stable_sort(out.begin(), out.end(), [](const CommTableRow& a, const CommTableRow& b) { return a.total_s > b.total_s; });
  return out;
}

}  // namespace hs::viewer
