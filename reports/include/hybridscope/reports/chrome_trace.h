// chrome_trace.h — exports a run in the Chrome Trace Event Format (the JSON that Perfetto and
// chrome://tracing open):
//   {"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {run info}}
// - each range is a complete event ("ph": "X") with ts/dur in microseconds on the UNIX-epoch
//   timeline (monotonic ns + the run's clock_offset_ns), pid = rank, tid = OS thread id,
//   cat = range category, args {"step"};
// - metadata events ("ph": "M") name each process "rank N" and each thread;
// - selected step metrics become counter events ("ph": "C"), one track per metric, placed at the
//   end of that step's "step" range.
// The whole trace is built in memory (fine for the thousands of ranges a run records; a streaming
// writer is the change to make if per-kernel records ever land in the same export).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hybridscope/reports/run_database.h"

namespace hs::reports {

/// Could not write the trace file.
class ExportError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The step metrics exported as counters unless told otherwise (verl's names, docs/metrics.md).
inline const std::vector<std::string> kDefaultTraceCounters = {
    "perf/throughput", "perf/cpu_memory_used_gb", "critic/score/mean", "response_length/mean", "actor/entropy",
};

struct ChromeTraceOptions {
  std::vector<std::string> counters = kDefaultTraceCounters;
};

/// What an export wrote.
struct ChromeTraceSummary {
  std::size_t complete_events = 0;  // "X": one per range
  std::size_t metadata_events = 0;  // "M": process and thread names
  std::size_t counter_events = 0;   // "C": one per (step, counter metric) with a step range
  std::size_t skipped_metrics = 0;  // chosen metrics left out: no "step" range for their step, or not finite
  std::size_t total() const { return complete_events + metadata_events + counter_events; }
};

/// Builds the trace document from rows already read (pure: no I/O). `database_path` and
/// `schema_version` only go into otherData.
nlohmann::json build_chrome_trace(const RunSummary& run, const std::vector<RangeRow>& ranges,
                                  const std::vector<StepMetric>& metrics, const ChromeTraceOptions& options = {},
                                  ChromeTraceSummary* summary = nullptr, const std::string& database_path = "",
                                  int schema_version = 0);

/// Reads run `run_id` from `db` and writes its trace to `out_path` (through a temporary file
/// renamed into place, so a failed export leaves no half-written trace). Throws RunDatabaseError
/// or ExportError.
ChromeTraceSummary export_chrome_trace(const RunDatabase& db, std::int64_t run_id, const std::string& out_path,
                                       const ChromeTraceOptions& options = {});

/// Microseconds on the UNIX-epoch timeline for a monotonic ns time of a run: the value of "ts".
double trace_timestamp_us(std::int64_t monotonic_ns, std::int64_t clock_offset_ns);

}  // namespace hs::reports
