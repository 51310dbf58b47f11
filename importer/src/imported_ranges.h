// imported_ranges.h — what both trace importers (Kineto traces, Nsight Systems exports) do with a
// trace's CPU-side ranges: keep them compactly (~56 B each), nest them per thread, number the steps
// and find the range a launch was made in. Private to hs_importer.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "hybridscope/probes/recorder.h"

namespace hs::importer::detail {

/// Names that live as long as the import (the recorder interns them by pointer when it writes them).
class NamePool {
 public:
  const char* get(const std::string& s) { return pool_.insert(s).first->c_str(); }

 private:
  std::unordered_set<std::string> pool_;
};

/// A range of a trace (Kineto: cpu_op, user_annotation; nsys: an NVTX range), kept to nest it and to
/// find the range a runtime call was made in. Times in the run's ns.
struct ImportedRange {
  std::int64_t tid;
  std::int64_t start;
  std::int64_t end;
  std::int64_t step = 0;
  const char* name;
  std::int64_t profiler_step = -1;  // Kineto: N of ProfilerStep#N; -1 otherwise
  std::int32_t parent = -1;         // index in the nested ranges; -1: top level
  std::int32_t depth = 0;
  probes::Category category = probes::Category::kOp;
  bool phase = false;     // a phase map named it
  bool launched = false;  // a runtime call was made inside it (gets a correlation_ranges row)
};

/// (start ns, step) of each step, by start.
using StepStarts = std::vector<std::pair<std::int64_t, std::int64_t>>;

/// The `step` ranges (category kStep) numbered from `first_step` in time order (one number per start).
StepStarts number_step_ranges(const std::vector<ImportedRange>& ranges, std::int64_t first_step);

/// The step whose start is the last at or before `t`; 0 before the first.
std::int64_t step_at(const StepStarts& steps, std::int64_t t);

/// Sorts by (tid, start, the longer first) and sets each range's parent, depth and step.
void nest_ranges(std::vector<ImportedRange>& ranges, const StepStarts& steps);

/// The innermost range of thread `tid` open at `t` in nested `ranges`; -1 when none.
std::int32_t innermost_range(const std::vector<ImportedRange>& ranges, std::int64_t tid, std::int64_t t);

/// GPU and runtime records per hand-over to the recorder (both importers batch them).
constexpr std::size_t kBatchRecords = 16384;

/// Hands `batch` to `rec` once it holds kBatchRecords records (or any, with `force`), leaving it
/// empty, and calls `handed(n)` with the count handed (the importer's flush cadence).
template <typename Handed>
void hand_over_batch(probes::Recorder& rec, probes::GpuActivityBatch& batch, bool force, Handed&& handed) {
  if (batch.empty() || (!force && batch.size() < kBatchRecords)) return;
  const auto n = static_cast<std::int64_t>(batch.size());
  rec.record_gpu_activity(std::move(batch));
  batch = probes::GpuActivityBatch();
  handed(n);
}

/// Hands the nested ranges to `rec` per thread (at most 4096 per call), calling `handed(n)` after
/// each call (the importer's flush cadence); counts them into `ranges` and `phase_ranges`.
template <typename Handed>
void record_ranges(probes::Recorder& rec, const std::vector<ImportedRange>& nested, std::int64_t& ranges,
                   std::int64_t& phase_ranges, Handed&& handed) {
  std::vector<probes::RangeRecord> batch;
  std::int64_t tid = 0;
  auto hand_over = [&] {
    if (batch.empty()) return;
    rec.record_thread_ranges(tid, batch);
    handed(static_cast<std::int64_t>(batch.size()));
    batch.clear();
  };
  for (const ImportedRange& r : nested) {
    if (r.tid != tid || batch.size() >= 4096) hand_over();
    tid = r.tid;
    batch.push_back({r.name, r.category, r.depth, r.step, r.start, r.end});
    ++ranges;
    if (r.phase) ++phase_ranges;
  }
  hand_over();
}

}  // namespace hs::importer::detail
