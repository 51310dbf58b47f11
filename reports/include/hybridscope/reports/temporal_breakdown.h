// temporal_breakdown.h — HTA's temporal breakdown and comm/compute overlap per rank, with HTA's
// exact definitions (profiling-facts "HTA definitions"): interval unions, never summed durations.
//
// On kernel records (GPU runs with the CUPTI collector) the classes are HTA's: communication =
// kernels whose name starts with `nccl` or contains `ncclKernel`/`ncclDevKernel`; memory =
// Memcpy/Memset records; compute = every other kernel.
//   kernel_time = last kernel end − first kernel start; idle = kernel_time − |∪ all|;
//   compute = |∪ compute|; non_compute = kernel_time − compute − idle;
//   overlap = |∪ comm ∩ ∪ compute|; overlap ratio = overlap / |∪ comm|.
// On host ranges (CPU runs, or GPU runs without kernel records) the same formulas run over host
// intervals: communication = the `comm_ops` records, each from its issue to its completion;
// compute = the phase ranges (category phase) with the time the rank's step thread blocked on its
// collectives cut out (a thread blocked in a collective is not computing): a synchronous
// collective's whole row, an asynchronous one's post and wait (comm_ops start_ns..posted_ns and
// wait_start_ns..wait_end_ns, v9);
// memory = none; the window is the measured steps' `step` ranges. Synchronous collectives on the
// training thread therefore overlap nothing; an asynchronous one (fsdp's per-layer gathers and
// reduce-scatters with forward_prefetch) overlaps the compute between its post and its wait, and
// phases on other threads overlap whatever runs under them.
//
// A split rollout pool (hybridscope.placement.rollout) on host ranges: the pool's ranks and the
// actor's meet in collectives of groups both roles take part in (the hand-over's broadcasts and
// the step-boundary agreement over `world`, the weight sync over `sync_rollout`); a rank that
// arrives first is blocked there until the other role arrives — the actor while the pool
// generates, the pool while the actor trains. That wait is the role's idle (role_idle.h), not
// communication: of each such collective only its transfer counts as communication, taken as the
// shortest duration among the members' rows of it (the last to arrive waited for no one; a
// duration, so clocks need not agree across hosts), the end of each row; the rest, the row's
// start, is the wait (role_wait_ns): neither communication nor compute (busy only where a range
// covers it, as the actor's `gen` does). The members' rows of a collective are paired by group,
// step and op, in order (the k-th all_reduce of `world` in step 3 on each rank); a set that not
// group_size ranks recorded equally often (a row lost on one rank) is left whole. Kernel records
// name no group and are read as HTA reads them.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "hybridscope/reports/intervals.h"
#include "hybridscope/reports/run_data.h"

namespace hs::reports {

enum class TimelineSource { kKernels, kHostRanges };
/// "kernels" | "host ranges".
std::string to_string(TimelineSource source);

/// HTA kernel class of a kernel or GPU activity name.
enum class KernelClass { kCommunication, kMemory, kCompute };
KernelClass classify_kernel(const GpuActivityRow& activity);

struct TemporalBreakdown {
  int rank = 0;
  std::int64_t window_ns = 0;  // HTA's kernel_time (first start to last end)
  std::int64_t idle_ns = 0;
  std::int64_t compute_ns = 0;
  std::int64_t non_compute_ns = 0;
  double idle_share = 0.0;  // of window_ns; 0 when the window is empty
  double compute_share = 0.0;
  double non_compute_share = 0.0;
};

struct CommComputeOverlap {
  int rank = 0;
  std::int64_t comm_ns = 0;     // |∪ communication|
  std::int64_t compute_ns = 0;  // |∪ compute|
  std::int64_t overlap_ns = 0;  // |∪ comm ∩ ∪ compute|
  std::optional<double> overlap_ratio;  // overlap_ns / comm_ns; absent without communication
  std::int64_t exposed_comm_ns = 0;     // comm_ns − overlap_ns: what communication costs the step
  /// Host ranges only (a comm_ops row names its process group; a kernel does not): per process
  /// group, |∪ that group's collectives| − its overlap with compute. Two groups in flight at once
  /// each count the shared time, so these may add up to more than exposed_comm_ns.
  std::map<std::string, std::int64_t> exposed_by_group_ns;
  /// Host ranges of a split rollout pool only: |∪ the waits for the other role| in collectives of
  /// groups both roles take part in, left out of comm_ns (0 otherwise), in all and per group.
  std::int64_t role_wait_ns = 0;
  std::map<std::string, std::int64_t> role_wait_by_group_ns;
};

struct TemporalAnalysis {
  TimelineSource source = TimelineSource::kHostRanges;
  std::string note;  // one line for reports: which records the numbers come from
  std::vector<TemporalBreakdown> breakdown;  // by rank
  std::vector<CommComputeOverlap> overlap;   // by rank
};

/// Temporal breakdown and overlap over the `measured` steps (kernels and comm ops are taken by the
/// step they belong to; host ranges by their step). Kernel records are used when any falls inside
/// the measured steps; otherwise host ranges, and `note` says so.
TemporalAnalysis temporal_analysis(const RunData& data, const std::vector<std::int64_t>& measured);

/// The HTA formulas on explicit interval sets (what temporal_analysis() feeds them): `all` is
/// every activity, `compute` and `comm` the classes; `window` the span to account for.
TemporalBreakdown temporal_breakdown(int rank, const Interval& window, const std::vector<Interval>& all,
                                     const std::vector<Interval>& compute);
CommComputeOverlap comm_compute_overlap(int rank, const std::vector<Interval>& comm,
                                        const std::vector<Interval>& compute);

}  // namespace hs::reports
