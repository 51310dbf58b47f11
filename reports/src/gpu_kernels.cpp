// gpu_kernels.cpp — see gpu_kernels.h.
#include "hybridscope/reports/gpu_kernels.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "hybridscope/reports/temporal_breakdown.h"

namespace hs::reports {

namespace {

const char* class_name(const GpuActivityRow& g) {
  switch (classify_kernel(g)) {
    case KernelClass::kCommunication: return "nccl";
    case KernelClass::kMemory: return "memory";
    case KernelClass::kCompute: return "compute";
  }
  return "compute";
}

}  // namespace

GpuKernelSummary gpu_kernel_summary(const RunData& data, const std::vector<std::int64_t>& measured, std::size_t top) {
  const std::set<std::int64_t> steps(measured.begin(), measured.end());
  std::map<std::pair<std::string, std::string>, GpuKernelTime> by;
  GpuKernelSummary out;
  auto add = [&](const std::string& range, const std::string& kernel, const std::string& cls, std::int64_t count,
                 std::int64_t total, std::int64_t min, std::int64_t max) {
    auto [it, added] = by.try_emplace({range, kernel});
    GpuKernelTime& t = it->second;
    if (added) t = {range, kernel, cls, 0, 0, min, max, 0.0};
    t.count += count;
    t.total_ns += total;
    t.min_ns = std::min(t.min_ns, min);
    t.max_ns = std::max(t.max_ns, max);
    out.records += count;
    out.total_ns += total;
  };
  if (!data.kernel_stats.empty()) {
    out.source = "kernel_stats";
    for (const KernelStatRow& k : data.kernel_stats)
      if (steps.count(k.step)) add(k.range, k.short_name, k.kernel_class, k.count, k.total_ns, k.min_ns, k.max_ns);
    for (const StreamBusyRow& s : data.stream_busy)
      if (steps.count(s.step)) out.busy_ns += s.busy_ns;
  } else if (!data.gpu.empty()) {
    // Raw records carry no step: each is placed in the step whose `step` range it started in.
    std::vector<std::tuple<int, std::int64_t, std::int64_t>> step_ranges;  // rank, start, end
    for (const RangeRow& r : data.ranges)
      if (r.name == "step" && steps.count(r.step)) step_ranges.emplace_back(r.rank, r.start_ns, r.end_ns);
    for (const GpuActivityRow& g : data.gpu) {
      const bool in = std::any_of(step_ranges.begin(), step_ranges.end(), [&](const auto& s) {
        return std::get<0>(s) == g.rank && g.start_ns >= std::get<1>(s) && g.start_ns < std::get<2>(s);
      });
      if (!in) continue;
      out.source = "raw kernels";
      const std::int64_t d = g.end_ns - g.start_ns;
      add("", g.short_name.empty() ? g.name : g.short_name, class_name(g), 1, d, d, d);
    }
  }
  for (auto& [key, t] : by) {
    t.share = out.total_ns > 0 ? static_cast<double>(t.total_ns) / static_cast<double>(out.total_ns) : 0.0;
    out.top.push_back(std::move(t));
  }
  std::sort(out.top.begin(), out.top.end(), [](const GpuKernelTime& a, const GpuKernelTime& b) {
    return std::tie(b.total_ns, a.range, a.kernel) < std::tie(a.total_ns, b.range, b.kernel);
  });
  if (out.top.size() > top) out.top.resize(top);
  return out;
}

}  // namespace hs::reports
