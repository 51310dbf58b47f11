// memory_analysis.cpp — peaks, fragmentation ratios and KV-pool occupancy (memory_analysis.h).
#include "hybridscope/reports/memory_analysis.h"

#include <algorithm>
#include <map>
#include <set>

#include "hybridscope/reports/phase_breakdown.h"

namespace hs::reports {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;  // the trainer's *_gb metrics are GiB (trainer.cpp)

void keep_max(std::optional<double>& into, const std::optional<double>& value) {
  if (value && (!into || *value > *into)) into = value;
}

int phase_rank(const std::string& phase) {
  const auto& order = verl_phase_order();
  const auto it = std::find(order.begin(), order.end(), phase);
  return it == order.end() ? static_cast<int>(order.size()) : static_cast<int>(it - order.begin());
}

// The trainer's periodic sampler (hybridscope.probes.memory_interval_ms) records its samples with
// the phase "timer", a name that means nothing to a reader: each is put in the top-level phase or
// switch range running on its rank when it was taken, or "between phases" when none was.
constexpr const char* kTimerPhase = "timer";
constexpr const char* kBetweenPhases = "between phases";

class RunningPhase {
 public:
  explicit RunningPhase(const RunData& data) {
    // Ranges sorted by start (RunData's order): a range that ends inside the current outermost one
    // is nested in it; the outermost ones do not overlap, so a binary search finds the one running.
    std::map<int, const RangeRow*> outer;
    for (const RangeRow& r : data.ranges) {
      if (r.category != "phase" && r.category != "switch" && r.category != "validation" && r.category != "checkpoint")
        continue;
      const RangeRow*& o = outer[r.rank];
      if (o != nullptr && r.end_ns <= o->end_ns) continue;
      o = &r;
      top_[r.rank].push_back(&r);
    }
  }
  std::string at(int rank, std::int64_t ts_ns) const {
    const auto it = top_.find(rank);
    if (it == top_.end()) return kBetweenPhases;
    const auto& v = it->second;
    auto r = std::upper_bound(v.begin(), v.end(), ts_ns, [](std::int64_t t, const RangeRow* x) { return t < x->start_ns; });
    if (r == v.begin()) return kBetweenPhases;
    --r;
    return ts_ns < (*r)->end_ns ? (*r)->name : kBetweenPhases;
  }

 private:
  std::map<int, std::vector<const RangeRow*>> top_;  // rank -> its outermost ranges, by start
};

}  // namespace

MemoryAnalysis memory_analysis(const RunData& data, const std::vector<std::int64_t>& measured) {
  MemoryAnalysis out;
  out.device = "cpu";
  const std::set<std::int64_t> steps(measured.begin(), measured.end());
  std::map<std::pair<int, std::string>, MemoryPhasePeak> phases;
  std::map<int, std::pair<std::int64_t, std::int64_t>> retries, ooms;  // rank -> (min, max) of the counters
  // Samples belong to the step whose range they were taken in (StepWindows): the final
  // validation's samples carry the last step's number but come after it.
  const StepWindows windows(data);
  const RunningPhase running(data);

  for (const auto& m : data.memory) {
    if (m.device >= 0) out.device = "cuda";
    // Cumulative counters: every sample counts, warm-up included (an OOM is an OOM).
    const auto track = [&](std::map<int, std::pair<std::int64_t, std::int64_t>>& into,
                           const std::optional<std::int64_t>& value) {
      if (!value) return;
      auto [it, inserted] = into.try_emplace(m.rank, *value, *value);
      it->second.first = std::min(it->second.first, *value);
      it->second.second = std::max(it->second.second, *value);
    };
    track(retries, m.num_alloc_retries);
    track(ooms, m.num_ooms);
    const auto step = windows.step_of(m.rank, m.ts_ns, m.step);
    if (!step || !steps.count(*step)) continue;
    out.has_samples = true;
    const std::int64_t allocated = std::max(m.allocated_bytes.value_or(0), m.peak_allocated_bytes.value_or(0));
    if (allocated > out.peak_allocated_bytes) {
      out.peak_allocated_bytes = allocated;
      out.peak_rank = m.rank;
      out.peak_step = *step;
    }
    const std::string phase = m.phase == kTimerPhase ? running.at(m.rank, m.ts_ns) : m.phase;
    auto& p = phases[{m.rank, phase}];
    p.rank = m.rank;
    p.phase = phase;
    p.peak_allocated_bytes = std::max(p.peak_allocated_bytes, allocated);
    if (m.reserved_bytes) {
      p.peak_reserved_bytes = std::max(p.peak_reserved_bytes.value_or(0), *m.reserved_bytes);
      out.peak_reserved_bytes = std::max(out.peak_reserved_bytes.value_or(0), *m.reserved_bytes);
      if (*m.reserved_bytes > 0 && m.allocated_bytes) {
        const double ratio = static_cast<double>(*m.allocated_bytes) / static_cast<double>(*m.reserved_bytes);
        if (!p.min_allocated_over_reserved || ratio < *p.min_allocated_over_reserved) p.min_allocated_over_reserved = ratio;
        if (!out.min_allocated_over_reserved || ratio < *out.min_allocated_over_reserved)
          out.min_allocated_over_reserved = ratio;
      }
    }
    keep_max(out.worst_reserved_slack, m.reserved_slack);
    keep_max(out.worst_split_fragmentation, m.split_fragmentation);
    keep_max(out.worst_external_fragmentation, m.external_fragmentation);
  }
  out.has_allocator_counters = !retries.empty() || !ooms.empty();
  for (const auto& [rank, range] : retries) out.alloc_retries += range.second - range.first;
  for (const auto& [rank, range] : ooms) out.ooms += range.second - range.first;
  for (auto& [key, p] : phases) out.phases.push_back(std::move(p));
  std::stable_sort(out.phases.begin(), out.phases.end(), [](const MemoryPhasePeak& a, const MemoryPhasePeak& b) {
    return a.rank != b.rank ? a.rank < b.rank : phase_rank(a.phase) < phase_rank(b.phase);
  });

  // The step metric is the allocator's own peak over the step (the samples may fall beside it).
  for (const auto& [step, gib] : data.metric_series("perf/max_memory_allocated_gb")) {
    if (!steps.count(step)) continue;
    const auto bytes = static_cast<std::int64_t>(gib * kGiB);
    if (bytes > out.peak_allocated_bytes) {
      out.peak_allocated_bytes = bytes;
      out.peak_step = step;
    }
  }
  const auto params = data.metric_series("perf/actor_param_bytes");
  if (!params.empty() && params.back().second > 0) {
    out.param_bytes = static_cast<std::int64_t>(params.back().second);
    if (out.peak_allocated_bytes > 0)
      out.peak_over_params = static_cast<double>(out.peak_allocated_bytes) / static_cast<double>(*out.param_bytes);
  }

  for (const auto& k : data.kv_pool) {
    const auto step = windows.step_of(k.rank, k.ts_ns, k.step);
    if (!step || !steps.count(*step)) continue;
    out.kv_num_blocks = std::max(out.kv_num_blocks, k.num_blocks);
    out.kv_peak_blocks_used = std::max(out.kv_peak_blocks_used, k.blocks_used);
  }
  if (out.kv_num_blocks == 0) {  // probes off: the rollout's own per-step metrics
    for (const auto step : measured) {
      out.kv_num_blocks = std::max(out.kv_num_blocks,
                                   static_cast<std::int64_t>(data.metric(step, "rollout/kv_num_blocks").value_or(0)));
      out.kv_peak_blocks_used = std::max(
          out.kv_peak_blocks_used, static_cast<std::int64_t>(data.metric(step, "rollout/kv_peak_blocks_used").value_or(0)));
    }
  }
  if (out.kv_num_blocks > 0)
    out.kv_peak_occupancy = static_cast<double>(out.kv_peak_blocks_used) / static_cast<double>(out.kv_num_blocks);
  return out;
}

}  // namespace hs::reports
