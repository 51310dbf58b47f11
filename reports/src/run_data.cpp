// run_data.cpp — loads one run into RunData and puts every list in start-time order.
#include "hybridscope/reports/run_data.h"

#include <algorithm>
#include <cstdlib>
#include <set>
#include <tuple>

namespace hs::reports {

std::optional<double> RunData::metric(std::int64_t step, const std::string& name) const {
  const auto it = std::lower_bound(metrics.begin(), metrics.end(), std::make_pair(step, &name),
                                   [](const StepMetric& m, const std::pair<std::int64_t, const std::string*>& key) {
                                     return std::tie(m.step, m.name) < std::tie(key.first, *key.second);
                                   });
  if (it != metrics.end() && it->step == step && it->name == name) return it->value;
  return std::nullopt;
}

std::vector<std::pair<std::int64_t, double>> RunData::metric_series(const std::string& name) const {
  std::vector<std::pair<std::int64_t, double>> out;
  for (const auto& m : metrics)
    if (m.name == name) out.emplace_back(m.step, m.value);
  return out;
}

std::vector<std::pair<std::int64_t, double>> RunData::tokens_per_s_series() const {
  std::vector<std::pair<std::int64_t, double>> out;
  for (const auto& [step, tokens] : metric_series("perf/total_num_tokens")) {
    const auto seconds = metric(step, "timing_s/step");
    if (seconds && *seconds > 0.0) out.emplace_back(step, tokens / *seconds);
  }
  return out;
}

std::optional<std::string> RunData::config_value(const std::string& key) const {
  const auto it = std::lower_bound(config.begin(), config.end(), key,
                                   [](const auto& entry, const std::string& k) { return entry.first < k; });
  if (it != config.end() && it->first == key) return it->second;
  return std::nullopt;
}

std::optional<double> RunData::config_number(const std::string& key) const {
  const auto value = config_value(key);
  if (!value || value->empty()) return std::nullopt;
  char* end = nullptr;
  const double number = std::strtod(value->c_str(), &end);
  if (end != value->c_str() + value->size()) return std::nullopt;
  return number;
}

std::vector<std::int64_t> RunData::steps() const {
  std::set<std::int64_t> out;
  for (const auto& r : ranges)
    if (r.category == "step") out.insert(r.step);
  if (out.empty())  // probes off: the step metrics still time the step
    for (const auto& m : metrics)
      if (m.name == "timing_s/step") out.insert(m.step);
  return {out.begin(), out.end()};
}

void sort_by_start(RunData& data) {
  std::sort(data.config.begin(), data.config.end());
  std::stable_sort(data.ranges.begin(), data.ranges.end(), [](const RangeRow& a, const RangeRow& b) {
    return std::tie(a.start_ns, a.rank, a.tid, a.depth) < std::tie(b.start_ns, b.rank, b.tid, b.depth);
  });
  std::stable_sort(data.metrics.begin(), data.metrics.end(),
                   [](const StepMetric& a, const StepMetric& b) { return std::tie(a.step, a.name) < std::tie(b.step, b.name); });
  std::stable_sort(data.comm_ops.begin(), data.comm_ops.end(), [](const CommOpRow& a, const CommOpRow& b) {
    return std::tie(a.start_ns, a.rank) < std::tie(b.start_ns, b.rank);
  });
  std::stable_sort(data.switches.begin(), data.switches.end(), [](const SwitchRow& a, const SwitchRow& b) {
    return std::tie(a.start_ns, a.rank) < std::tie(b.start_ns, b.rank);
  });
  std::stable_sort(data.memory.begin(), data.memory.end(), [](const MemorySampleRow& a, const MemorySampleRow& b) {
    return std::tie(a.ts_ns, a.rank) < std::tie(b.ts_ns, b.rank);
  });
  std::stable_sort(data.kv_pool.begin(), data.kv_pool.end(), [](const KvPoolSampleRow& a, const KvPoolSampleRow& b) {
    return std::tie(a.ts_ns, a.rank) < std::tie(b.ts_ns, b.rank);
  });
  std::stable_sort(data.gpu.begin(), data.gpu.end(), [](const GpuActivityRow& a, const GpuActivityRow& b) {
    return std::tie(a.start_ns, a.rank) < std::tie(b.start_ns, b.rank);
  });
}

RunData load_run(const RunDatabase& db, std::int64_t run_id) {
  RunData data;
  data.source_path = db.path();
  data.run = db.run(run_id);
  data.config = db.config(run_id);
  static_cast<RunRecords&>(data) = read_run_records(db, run_id);
  data.kernel_stats = db.kernel_stats(run_id);
  data.stream_busy = db.stream_busy(run_id);
  sort_by_start(data);
  return data;
}

std::vector<std::int64_t> measured_steps(const RunData& data, int warmup_steps) {
  auto steps = data.steps();
  const auto skip = static_cast<std::size_t>(std::max(warmup_steps, 0));
  if (steps.size() > skip) steps.erase(steps.begin(), steps.begin() + static_cast<std::ptrdiff_t>(skip));
  return steps;
}

StepWindows::StepWindows(const RunData& data) {
  for (const auto& r : data.ranges)
    if (r.category == "step") by_rank_[r.rank].push_back({{r.start_ns, r.end_ns}, r.step});
  for (auto& [rank, windows] : by_rank_)
    std::stable_sort(windows.begin(), windows.end(),
                     [](const Window& a, const Window& b) { return a.range.start_ns < b.range.start_ns; });
}

std::optional<std::int64_t> StepWindows::step_of(int rank, std::int64_t start_ns, std::int64_t recorded_step) const {
  const auto it = by_rank_.find(rank);
  if (it == by_rank_.end()) return recorded_step;
  const auto& windows = it->second;
  // The last step range starting at or before start_ns (one rank's steps do not overlap).
  auto w = std::upper_bound(windows.begin(), windows.end(), start_ns,
                            [](std::int64_t t, const Window& x) { return t < x.range.start_ns; });
  if (w == windows.begin()) return std::nullopt;
  --w;
  if (start_ns < w->range.end_ns) return w->step;
  return std::nullopt;
}

bool StepWindows::in(const std::set<std::int64_t>& steps, int rank, std::int64_t start_ns,
                     std::int64_t recorded_step) const {
  const auto step = step_of(rank, start_ns, recorded_step);
  return step && steps.count(*step) != 0;
}

std::vector<Interval> StepWindows::ranges(int rank, const std::set<std::int64_t>& steps) const {
  std::vector<Interval> out;
  const auto it = by_rank_.find(rank);
  if (it == by_rank_.end()) return out;
  for (const auto& w : it->second)
    if (steps.count(w.step)) out.push_back(w.range);
  return out;
}

}  // namespace hs::reports
