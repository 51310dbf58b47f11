// temporal_breakdown.cpp — HTA's temporal breakdown and comm/compute overlap (temporal_breakdown.h).
//
// Checked against HTA's own code (facebookresearch/HolisticTraceAnalysis):
// - hta/analyzers/breakdown_analysis.py, get_temporal_breakdown / _get_idle_time_for_kernels:
//   every GPU record (stream != -1, so kernels, copies and memsets) is merged; kernel_time = last
//   merged end − first merged start; idle = kernel_time − Σ merged lengths; compute = Σ merged
//   lengths of the COMPUTATION kernels alone; non_compute = kernel_time − compute − idle; shares are
//   each over kernel_time.
// - hta/analyzers/communication_analysis.py, get_comm_comp_overlap: communication and computation
//   kernels merged separately; overlap = time where both are running (their sweep's state 1 + 2);
//   ratio = overlap / Σ merged communication lengths. Memory records take part in neither.
// - hta/utils/utils.py, get_kernel_type: communication first ("ncclKernel" in the name; earlier
//   versions `^nccl`), then memory ("Memcpy"/"Memset" in the name), else computation.
// The arithmetic here is the same, on interval unions (intervals.h) instead of DataFrames.
#include "hybridscope/reports/temporal_breakdown.h"

#include <fmt/format.h>

#include "hybridscope/reports/role_idle.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <utility>

namespace hs::reports {
namespace {

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

// The parts of `intervals` that lie inside `window`.
std::vector<Interval> clip(const std::vector<Interval>& intervals, const Interval& window) {
  std::vector<Interval> clipped;
  clipped.reserve(intervals.size());
  for (const Interval& i : intervals) {
    const Interval c{std::max(i.start_ns, window.start_ns), std::min(i.end_ns, window.end_ns)};
    if (c.end_ns > c.start_ns) clipped.push_back(c);
  }
  return clipped;
}

// [first start, last end) of a set of intervals; empty ({0, 0}) when there are none.
Interval span_of(const std::vector<Interval>& intervals) {
  if (intervals.empty()) return {};
  Interval span = intervals.front();
  for (const Interval& i : intervals) {
    span.start_ns = std::min(span.start_ns, i.start_ns);
    span.end_ns = std::max(span.end_ns, i.end_ns);
  }
  return span;
}

double share_of(std::int64_t part, std::int64_t whole) {
  return whole > 0 ? static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}

// One rank's `step` ranges of the measured steps, sorted by start, to place GPU records in steps.
struct RankSteps {
  std::vector<std::pair<Interval, std::int64_t>> steps;  // (range, step)
  std::int64_t main_tid = 0;                             // the thread that runs the steps
};

std::map<int, RankSteps> measured_step_ranges(const RunData& data, const std::set<std::int64_t>& measured) {
  std::map<int, RankSteps> by_rank;
  for (const RangeRow& r : data.ranges) {
    if (r.category != "step" || measured.count(r.step) == 0) continue;
    RankSteps& rank = by_rank[r.rank];
    if (rank.steps.empty()) rank.main_tid = r.tid;
    rank.steps.push_back({{r.start_ns, r.end_ns}, r.step});
  }
  for (auto& [rank, steps] : by_rank) {
    std::sort(steps.steps.begin(), steps.steps.end(),
              [](const auto& a, const auto& b) { return a.first.start_ns < b.first.start_ns; });
  }
  return by_rank;
}

// Which records a rank's measured steps hold: StepWindows (run_data.h), the rule every analysis uses.
struct MeasuredSteps {
  const StepWindows& windows;
  const std::set<std::int64_t>& measured;
  bool holds(int rank, std::int64_t start_ns, std::int64_t recorded_step) const {
    return windows.has_ranges(rank) && windows.in(measured, rank, start_ns, recorded_step);
  }
};

std::string steps_text(const std::vector<std::int64_t>& measured) {
  if (measured.empty()) return "no measured steps";
  const auto [lo, hi] = std::minmax_element(measured.begin(), measured.end());
  return measured.size() == 1 ? fmt::format("step {}", *lo)
                              : fmt::format("{} measured steps ({}–{})", measured.size(), *lo, *hi);
}

// Per-rank interval sets the HTA formulas run over.
struct RankTimeline {
  Interval window;
  std::vector<Interval> all, compute, comm;
  std::map<std::string, std::vector<Interval>> comm_by_group;  // host ranges only
  std::map<std::string, std::vector<Interval>> role_wait_by_group;  // split pool, host ranges only
};

// A split rollout pool's collectives with the other role (temporal_breakdown.h): per comm_ops
// index, the transfer's own length (the shortest duration among the members' rows of that
// collective); absent for every other row. The members' rows are paired by group, step and op, in
// order: the k-th all_reduce of `world` in step 3 on each rank is one collective. A set of rows
// counts when both the pool's ranks and the others' recorded it, group_size ranks each as many
// times (a row one rank lacks, such as the final barrier after the pool's recorder closed, leaves
// its set whole).
std::vector<std::optional<std::int64_t>> cross_role_transfers(const RunData& data) {
  std::vector<std::optional<std::int64_t>> transfer(data.comm_ops.size());
  const std::vector<int> pool_list = split_rollout_ranks(data);
  if (pool_list.empty()) return transfer;
  const std::set<int> pool(pool_list.begin(), pool_list.end());
  using Key = std::tuple<std::string, std::int64_t, std::string>;  // group, step, op
  std::map<Key, std::map<int, std::vector<std::size_t>>> rows;   // -> rank -> its rows
  for (std::size_t i = 0; i < data.comm_ops.size(); ++i) {
    const CommOpRow& c = data.comm_ops[i];
    rows[{c.group, c.step, c.op}][c.rank].push_back(i);
  }
  for (auto& [key, by_rank] : rows) {
    const bool has_pool = std::any_of(by_rank.begin(), by_rank.end(), [&](const auto& r) { return pool.count(r.first) > 0; });
    const bool has_other = std::any_of(by_rank.begin(), by_rank.end(), [&](const auto& r) { return pool.count(r.first) == 0; });
    if (!has_pool || !has_other) continue;
    const std::size_t count = by_rank.begin()->second.size();
    const bool matched = std::all_of(by_rank.begin(), by_rank.end(), [&](const auto& r) {
      return r.second.size() == count && data.comm_ops[r.second.front()].group_size == static_cast<int>(by_rank.size());
    });
    if (!matched) continue;
    for (auto& [rank, indices] : by_rank)
      std::stable_sort(indices.begin(), indices.end(),
                       [&](std::size_t x, std::size_t y) { return data.comm_ops[x].start_ns < data.comm_ops[y].start_ns; });
    for (std::size_t k = 0; k < count; ++k) {
      std::int64_t shortest = -1;
      for (const auto& [rank, indices] : by_rank) {
        const CommOpRow& c = data.comm_ops[indices[k]];
        const std::int64_t length = c.end_ns - c.start_ns;
        if (shortest < 0 || length < shortest) shortest = length;
      }
      for (const auto& [rank, indices] : by_rank) transfer[indices[k]] = std::max<std::int64_t>(shortest, 0);
    }
  }
  return transfer;
}

// Kernel records of the measured steps, each placed in a step by its start on the same rank.
std::map<int, RankTimeline> kernel_timelines(const RunData& data, const std::map<int, RankSteps>& steps,
                                             const MeasuredSteps& in_steps, std::size_t* records) {
  std::map<int, RankTimeline> timelines;
  *records = 0;
  for (const GpuActivityRow& g : data.gpu) {
    if (steps.count(g.rank) == 0 || !in_steps.holds(g.rank, g.start_ns, 0)) continue;  // no step number: by time alone
    ++*records;
    RankTimeline& t = timelines[g.rank];
    const Interval i{g.start_ns, g.end_ns};
    t.all.push_back(i);
    switch (classify_kernel(g)) {
      case KernelClass::kCommunication: t.comm.push_back(i); break;
      case KernelClass::kCompute: t.compute.push_back(i); break;
      case KernelClass::kMemory: break;  // part of `all` only, as in HTA
    }
  }
  for (auto& [rank, t] : timelines) t.window = span_of(t.all);  // HTA's kernel_time
  // A rank that ran measured steps without a single GPU record still gets its (empty) row.
  for (const auto& [rank, s] : steps) timelines.try_emplace(rank);
  return timelines;
}

// Host ranges of the measured steps: each range and collective that starts inside one of its rank's
// measured `step` ranges (as kernel records are placed), so that the breakdown, whose window is
// those step ranges, and the overlap see the same intervals — a final validation after the last
// step carries that step's number but lies outside its range. CommOpRow carries no thread id: every collective is taken as
// issued on the rank's main thread (the thread of its `step` ranges), where the trainer issues
// them. What that thread spent blocked is cut out of its phases: a synchronous collective's whole
// row; an asynchronous one's post (start_ns..posted_ns: Gloo copies and splits the input on the
// calling thread) and its wait (wait_start_ns..wait_end_ns) — between the two the thread computed,
// so the collective overlaps that compute. Phases on other threads keep everything (they compute
// while the collective runs).
std::map<int, RankTimeline> host_timelines(const RunData& data, const std::map<int, RankSteps>& steps,
                                           const MeasuredSteps& in_steps) {
  std::map<int, RankTimeline> timelines;
  for (const auto& [rank, s] : steps) {
    std::vector<Interval> step_intervals;
    for (const auto& [interval, step] : s.steps) step_intervals.push_back(interval);
    timelines[rank].window = span_of(step_intervals);
  }
  std::map<int, std::vector<Interval>> blocked;  // rank -> when its main thread was blocked on a collective
  const std::vector<std::optional<std::int64_t>> cross_role = cross_role_transfers(data);
  for (std::size_t index = 0; index < data.comm_ops.size(); ++index) {
    const CommOpRow& c = data.comm_ops[index];
    const auto t = timelines.find(c.rank);
    if (t == timelines.end() || !in_steps.holds(c.rank, c.start_ns, c.step)) continue;
    if (cross_role[index] && c.end_ns - c.start_ns > *cross_role[index]) {
      // A collective with the other role: its start waited for that role (idle), its end moved data.
      const Interval wait{c.start_ns, c.end_ns - *cross_role[index]}, moved{wait.end_ns, c.end_ns};
      t->second.role_wait_by_group[c.group].push_back(wait);
      t->second.comm.push_back(moved);
      t->second.comm_by_group[c.group].push_back(moved);
      t->second.all.push_back(moved);
      blocked[c.rank].push_back({c.start_ns, c.end_ns});  // blocked throughout: computing in neither
      continue;
    }
    const Interval transfer{c.start_ns, c.end_ns};
    t->second.comm.push_back(transfer);
    t->second.comm_by_group[c.group].push_back(transfer);
    t->second.all.push_back(transfer);
    if (!c.asynchronous()) {
      blocked[c.rank].push_back(transfer);
      continue;
    }
    const Interval post{c.start_ns, *c.posted_ns}, wait{*c.wait_start_ns, *c.wait_end_ns};
    blocked[c.rank].insert(blocked[c.rank].end(), {post, wait});
    t->second.all.insert(t->second.all.end(), {post, wait});  // busy, not computing (may outlast the row)
  }
  std::map<int, std::vector<Interval>> main_thread_phases;  // rank -> its phases on the step thread
  for (const RangeRow& r : data.ranges) {
    const auto t = timelines.find(r.rank);
    if (t == timelines.end() || !in_steps.holds(r.rank, r.start_ns, r.step)) continue;
    const Interval i{r.start_ns, r.end_ns};
    if (r.category == "switch") {
      t->second.all.push_back(i);
    } else if (r.category == "phase") {
      t->second.all.push_back(i);
      if (r.tid == steps.at(r.rank).main_tid)
        main_thread_phases[r.rank].push_back(i);
      else
        t->second.compute.push_back(i);
    }
  }
  // The step thread's phases minus its blocked time, in one sweep per rank (not one per phase).
  for (auto& [rank, phases] : main_thread_phases) {
    auto& t = timelines.at(rank);
    const auto uncovered = subtract_intervals(std::move(phases), blocked[rank]);
    t.compute.insert(t.compute.end(), uncovered.begin(), uncovered.end());
  }
  return timelines;
}

}  // namespace

std::string to_string(TimelineSource source) {
  return source == TimelineSource::kKernels ? "kernels" : "host ranges";
}

KernelClass classify_kernel(const GpuActivityRow& activity) {
  // HTA tests communication first. NCCL kernels are `ncclKernel_*` (older) or `ncclDevKernel_*`
  // (current); the stored kernel name may be mangled (`_Z..ncclDevKernel_...`), so the bare
  // short name is tested for the `nccl` prefix and both names for the kernel families.
  for (const std::string* name : {&activity.short_name, &activity.name}) {
    if (starts_with(*name, "nccl") || contains(*name, "ncclKernel") || contains(*name, "ncclDevKernel")) {
      return KernelClass::kCommunication;
    }
  }
  if (activity.kind != GpuActivityRow::Kind::kKernel) return KernelClass::kMemory;
  if (starts_with(activity.name, "Memcpy") || starts_with(activity.name, "Memset")) return KernelClass::kMemory;
  return KernelClass::kCompute;
}

TemporalBreakdown temporal_breakdown(int rank, const Interval& window, const std::vector<Interval>& all,
                                     const std::vector<Interval>& compute) {
  TemporalBreakdown b;
  b.rank = rank;
  if (window.end_ns <= window.start_ns) return b;
  b.window_ns = window.end_ns - window.start_ns;
  const std::vector<Interval> busy = clip(all, window);
  b.idle_ns = b.window_ns - union_length(busy);
  // Compute counts where it is also busy: HTA's compute kernels are a subset of all kernels, and
  // so are the host phases here; the intersection keeps non_compute >= 0 for any caller.
  b.compute_ns = intersection_length(clip(compute, window), busy);
  b.non_compute_ns = b.window_ns - b.compute_ns - b.idle_ns;
  b.idle_share = share_of(b.idle_ns, b.window_ns);
  b.compute_share = share_of(b.compute_ns, b.window_ns);
  b.non_compute_share = share_of(b.non_compute_ns, b.window_ns);
  return b;
}

CommComputeOverlap comm_compute_overlap(int rank, const std::vector<Interval>& comm,
                                        const std::vector<Interval>& compute) {
  CommComputeOverlap o;
  o.rank = rank;
  o.comm_ns = union_length(comm);
  o.compute_ns = union_length(compute);
  o.overlap_ns = intersection_length(comm, compute);
  if (o.comm_ns > 0) o.overlap_ratio = static_cast<double>(o.overlap_ns) / static_cast<double>(o.comm_ns);
  o.exposed_comm_ns = o.comm_ns - o.overlap_ns;
  return o;
}

TemporalAnalysis temporal_analysis(const RunData& data, const std::vector<std::int64_t>& measured) {
  const std::set<std::int64_t> measured_set(measured.begin(), measured.end());
  const std::map<int, RankSteps> steps = measured_step_ranges(data, measured_set);
  const StepWindows windows(data);
  const MeasuredSteps in_steps{windows, measured_set};

  TemporalAnalysis analysis;
  std::size_t records = 0;
  std::map<int, RankTimeline> timelines = kernel_timelines(data, steps, in_steps, &records);
  if (records > 0) {
    analysis.source = TimelineSource::kKernels;
    analysis.note = fmt::format(
        "kernels: {} GPU records (kernels, copies, memsets) of {} on {} rank(s); nccl* kernels are "
        "communication, Memcpy/Memset memory, the rest compute (HTA)",
        records, steps_text(measured), timelines.size());
  } else {
    // No CUPTI records (a CPU run, or the collector off), or none inside the measured steps.
    analysis.source = TimelineSource::kHostRanges;
    timelines = host_timelines(data, steps, in_steps);
    analysis.note = fmt::format(
        "host ranges: phase and switch ranges and collectives of {} on {} rank(s){}; compute = phases "
        "minus the time each rank's step thread blocked on collectives (a synchronous one's whole "
        "duration, an asynchronous one's post and wait)",
        steps_text(measured), timelines.size(), data.gpu.empty() ? " (no kernel records)" : " (no kernel records in these steps)");
  }
  for (const auto& [rank, t] : timelines) {
    analysis.breakdown.push_back(temporal_breakdown(rank, t.window, t.all, t.compute));
    CommComputeOverlap o = comm_compute_overlap(rank, t.comm, t.compute);
    for (const auto& [group, comm] : t.comm_by_group) {
      const std::int64_t exposed = union_length(comm) - intersection_length(comm, t.compute);
      if (exposed > 0) o.exposed_by_group_ns[group] = exposed;
    }
    std::vector<Interval> waits;
    for (const auto& [group, wait] : t.role_wait_by_group) {
      o.role_wait_by_group_ns[group] = union_length(wait);
      waits.insert(waits.end(), wait.begin(), wait.end());
    }
    o.role_wait_ns = union_length(waits);
    analysis.overlap.push_back(std::move(o));
  }
  const bool waits = std::any_of(analysis.overlap.begin(), analysis.overlap.end(),
                                 [](const CommComputeOverlap& o) { return o.role_wait_ns > 0; });
  if (waits)
    analysis.note += "; in collectives of the split rollout pool with the actor only the transfer counts as "
                     "communication (the shortest member's duration), the wait for the other role is that role's idle";
  return analysis;
}

}  // namespace hs::reports
