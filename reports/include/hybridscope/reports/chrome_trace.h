// chrome_trace.h — exports a run in the Chrome Trace Event Format (the JSON that Perfetto and
// chrome://tracing open):
//   {"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {run info}}
// - each range is a complete event ("ph": "X") with ts/dur in microseconds on the UNIX-epoch
//   timeline (monotonic ns + the run's clock_offset_ns), pid = rank, tid = OS thread id,
//   cat = range category, args {"step"};
// - metadata events ("ph": "M") name each process "rank N" and each thread;
// - selected step metrics become counter events ("ph": "C"), one track per metric, placed at the
//   end of that step's "step" range;
// - per rank, besides its threads: a "comm" track (one X per collective, args op, group, bytes,
//   dtype, algbw/busbw) — and "comm 2", "comm 3", ... where collectives overlap in time, since a
//   track's slices must nest: each collective goes to the lowest lane free at its start, so a
//   rank has as many lanes as it had collectives in flight at once —, a "switches" track (each switch with its components as children), one
//   track per GPU (device, stream) with kernels, copies and memsets (args incl. correlation_id),
//   CUDA runtime API calls on the calling thread, and a flow arrow ("s" -> "f") from each launch
//   to the GPU work it started (same rank and correlation id);
// - memory counters: "memory cpu" / "memory cuda:N" (allocated, reserved, active bytes) and
//   "kv_pool" (used and shared blocks) from memory_samples and kv_pool_samples.
// Synthetic tracks use tids from kTrackTidBase up, above any OS thread id (Linux pid_max ≤ 2^22).
// The whole trace is built in memory (fine for the ranges and the kernels of a few steps; a
// streaming writer is the change to make for long GPU runs).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hybridscope/reports/run_database.h"
#include "hybridscope/reports/run_records.h"

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

/// tid of the first synthetic track of a rank (comm); switches and GPU streams follow.
inline constexpr std::int64_t kTrackTidBase = std::int64_t{1} << 30;

/// What an export wrote.
struct ChromeTraceSummary {
  std::size_t complete_events = 0;  // "X": one per range
  std::size_t metadata_events = 0;  // "M": process and track names and sort order
  std::size_t counter_events = 0;   // "C": one per (step, counter metric) with a step range
  std::size_t skipped_metrics = 0;  // chosen metrics left out: no "step" range for their step, or not finite
  std::size_t comm_events = 0;      // "X" on the comm tracks
  std::size_t switch_events = 0;    // "X" on the switch tracks: switches and their components
  std::size_t gpu_events = 0;       // "X" on the GPU stream tracks: kernels, copies, memsets
  std::size_t api_events = 0;       // "X": CUDA runtime API calls
  std::size_t flow_events = 0;      // "s" and "f": launch -> GPU work
  std::size_t memory_counter_events = 0;  // "C": memory and KV-pool samples
  std::size_t total() const {
    return complete_events + metadata_events + counter_events + comm_events + switch_events + gpu_events +
           api_events + flow_events + memory_counter_events;
  }
};

/// Everything of one run that goes into its trace: the records RunData shows too (RunRecords, read
/// by the same read_run_records()) and the CUDA runtime API calls.
struct TraceRows : RunRecords {
  std::vector<RuntimeApiRow> runtime_api;
};

/// Builds the trace document from rows already read (pure: no I/O). `database_path` and
/// `schema_version` only go into otherData.
nlohmann::json build_chrome_trace(const RunSummary& run, const TraceRows& rows, const ChromeTraceOptions& options = {},
                                  ChromeTraceSummary* summary = nullptr, const std::string& database_path = "",
                                  int schema_version = 0);

/// Reads every table the trace shows for run `run_id`: read_run_records(), then runtime_api.
TraceRows read_trace_rows(const RunDatabase& db, std::int64_t run_id);

/// Reads run `run_id` from `db` and writes its trace to `out_path` (through a temporary file
/// renamed into place, so a failed export leaves no half-written trace). Throws RunDatabaseError
/// or ExportError.
ChromeTraceSummary export_chrome_trace(const RunDatabase& db, std::int64_t run_id, const std::string& out_path,
                                       const ChromeTraceOptions& options = {});

/// Microseconds on the UNIX-epoch timeline for a monotonic ns time of a run: the value of "ts".
double trace_timestamp_us(std::int64_t monotonic_ns, std::int64_t clock_offset_ns);

}  // namespace hs::reports
