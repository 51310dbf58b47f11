// gpu_aggregator.h — GPU activity at any scale: folds every kernel, copy and memset the CUPTI
// collector hands over into aggregates (the kernel_stats and stream_busy tables) and keeps the raw
// records only of the steps asked for (like Nsight Systems' capture range). An H100 runs ~80k
// kernels per step of the tiny demo and a 7B model as many in a few steps: written raw they are
// millions of rows that no analysis can join in seconds; aggregated they are a few thousand.
//
// Used by the Recorder (record_gpu_activity folds, flush takes the changed aggregates) on the
// collector's thread, under the recorder's lock; pure and single-threaded itself, so tests and the
// scale benchmark drive it with constructed streams of records.
//
// Attribution:
//   * step: the step current (set_step) at the record's start — a kernel counts in the step it
//     started in, as docs/schema.md's queries place it; runtime API calls by their own start;
//   * range: the external id CUPTI tagged its launching call with (external_correlations), i.e.
//     the innermost hybridscope range open at the launch; 0 when none was open. CUPTI delivers a
//     kernel and its call in different buffers, in no fixed order: a record whose call has not been
//     seen waits (take_changed() finalizes those still unresolved one flush later as "no range");
//   * stream busy time: the union of a stream's records of one step, merged as they arrive. Exact
//     when each stream's records arrive in start order (a stream executes in order and CUPTI
//     reports a stream's records in completion order); an out-of-order record is counted only for
//     the part outside the interval being merged.
#pragma once

#include <cstdint>
#include <deque>
#include <limits>
#include <map>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "hybridscope/probes/gpu_activity.h"

namespace hs::probes {

/// Which steps keep their raw GPU records (kernels, memcpy, memset, runtime_api and the
/// external_correlations of those): [raw_first_step, raw_last_step], inclusive. The default keeps
/// every step (what the recorder did before v10); raw_last_step < raw_first_step keeps none.
/// Aggregates are kept for every step either way.
struct GpuCaptureOptions {
  std::int64_t raw_first_step = 0;
  std::int64_t raw_last_step = std::numeric_limits<std::int64_t>::max();
  /// Correlations (launch call -> range) remembered for records still to come; the oldest are
  /// forgotten beyond this (a kernel finishing a million launches after its call is unattributed).
  std::size_t max_pending_correlations = std::size_t{1} << 20;

  bool keeps_raw(std::int64_t step) const noexcept { return step >= raw_first_step && step <= raw_last_step; }
  /// No raw records at all.
  static GpuCaptureOptions none() noexcept { return {0, -1}; }
  /// Only steps first..last.
  static GpuCaptureOptions steps(std::int64_t first, std::int64_t last) noexcept { return {first, last}; }
};

/// Parses a step window as a config value writes it: "" or "none" (no raw records), "all", "N"
/// (one step) or "A-B" (steps A to B). Returns false on anything else.
bool parse_raw_steps(const char* text, GpuCaptureOptions& out) noexcept;

/// One kernel_stats row: what the records of one (step, range, name) did.
struct KernelStat {
  std::int64_t step = 0;
  std::uint64_t external_id = 0;  // 0: launched outside every range (or its call was never seen)
  const char* name = "";          // process-lifetime string (as KernelActivity::name)
  const char* short_name = "";
  KernelClass kernel_class = KernelClass::kCompute;
  std::int64_t count = 0;
  std::int64_t total_ns = 0;
  std::int64_t min_ns = 0;
  std::int64_t max_ns = 0;
  std::int64_t bytes = 0;     // copies and memsets
  std::int64_t launched = 0;  // records whose launching call was seen
  std::int64_t launch_first_ns = -1;  // -1: none seen (NULL)
  std::int64_t launch_last_ns = -1;
};

/// One stream_busy row.
struct StreamBusy {
  std::int64_t step = 0;
  std::uint32_t device = 0;
  std::uint32_t stream = 0;
  std::int64_t activities = 0;
  std::int64_t busy_ns = 0;  // union of the step's records on the stream
  std::int64_t first_start_ns = 0;
  std::int64_t last_end_ns = 0;
};

/// The aggregates that changed since the last take_changed(), with their values so far (a row is
/// written again, replaced, each time it changes).
struct GpuAggregates {
  std::vector<KernelStat> kernels;
  std::vector<StreamBusy> streams;
  bool empty() const noexcept { return kernels.empty() && streams.empty(); }
  std::size_t size() const noexcept { return kernels.size() + streams.size(); }
};

class GpuActivityAggregator {
 public:
  explicit GpuActivityAggregator(GpuCaptureOptions options = {});

  /// From `since_ns` on (probes::now_ns()), records belong to `step`. Calls come in time order.
  void set_step(std::int64_t step, std::int64_t since_ns);
  /// The step current at `ts_ns` (0 before the first set_step).
  std::int64_t step_at(std::int64_t ts_ns) const noexcept;

  /// Folds every kernel, copy and memset of `batch` into the aggregates and leaves in `batch` only
  /// the raw records of the capture window (with the external correlations of those); correlation
  /// ranges and overhead records stay as they are.
  void fold(GpuActivityBatch& batch);
  /// The aggregates changed since the last call. Records still waiting for their launching call
  /// since before the previous call are attributed to no range first; `final` attributes every
  /// waiting record (the run's end).
  GpuAggregates take_changed(bool final = false);

  /// Records waiting for their launching call.
  std::size_t waiting() const noexcept { return waiting_.size(); }

 private:
  struct Launch {
    std::uint64_t external_id = 0;
    std::int64_t start_ns = -1, end_ns = -1;
    bool seen = false;  // the runtime API record arrived
  };
  struct Record {  // a kernel, copy or memset as aggregated
    std::int64_t step;
    std::uint32_t correlation_id;
    const char* name;
    const char* short_name;
    KernelClass kernel_class;
    std::int64_t start_ns, end_ns, bytes;
    int age;  // take_changed() calls it has waited through
  };
  struct Busy {
    StreamBusy row;
    std::int64_t open_start = 0, open_end = -1;  // the interval being merged
    bool dirty = false;
  };
  using StatKey = std::tuple<std::int64_t, std::uint64_t, const char*>;  // step, external id, name
  struct Stat {
    KernelStat row;
    bool dirty = false;
  };

  void add(const Record& r, const Launch* launch);
  void add_busy(std::int64_t step, std::uint32_t device, std::uint32_t stream, std::int64_t start, std::int64_t end);
  Launch& remember(std::uint32_t correlation_id);
  void resolve_waiting();
  const char* canonical(const char* name);

  GpuCaptureOptions options_;
  std::vector<std::pair<std::int64_t, std::int64_t>> steps_;  // (since_ns, step), ascending
  std::unordered_map<std::uint32_t, Launch> launches_;        // by correlation id
  std::deque<std::uint32_t> launch_order_;                    // for forgetting the oldest
  std::vector<Record> waiting_;                               // records whose call is not seen yet
  std::map<StatKey, Stat> stats_;
  std::vector<Stat*> dirty_stats_;
  std::map<std::tuple<std::int64_t, std::uint32_t, std::uint32_t>, Busy> busy_;  // step, device, stream
  std::vector<Busy*> dirty_busy_;
  // Names are keyed by pointer; one pointer per distinct text (callers may pass equal texts at
  // different addresses, and the writer interns by text: two keys would become one row).
  std::unordered_map<const char*, const char*> canonical_by_pointer_;
  std::unordered_map<std::string, const char*> canonical_by_text_;
};

}  // namespace hs::probes
