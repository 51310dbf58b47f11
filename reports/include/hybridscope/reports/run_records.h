// run_records.h — the record tables of one run that both the analyses (RunData, run_data.h) and
// the Chrome trace (TraceRows, chrome_trace.h) read, and the one loader that reads them. Each
// derives from RunRecords and reads only its own extra tables (RunData the GPU aggregates,
// TraceRows the CUDA runtime API calls).
#pragma once

#include <cstdint>
#include <vector>

#include "hybridscope/reports/run_database.h"

namespace hs::reports {

/// One run's records as RunDatabase's readers return them (each list in that reader's order;
/// load_run() then sorts RunData's by start time).
struct RunRecords {
  std::vector<RangeRow> ranges;          // RunDatabase::ranges
  std::vector<StepMetric> metrics;       // RunDatabase::step_metrics
  std::vector<CommOpRow> comm_ops;       // RunDatabase::comm_ops
  std::vector<SwitchRow> switches;       // RunDatabase::switches, with their components
  std::vector<MemorySampleRow> memory;   // RunDatabase::memory_samples
  std::vector<KvPoolSampleRow> kv_pool;  // RunDatabase::kv_pool_samples
  std::vector<GpuActivityRow> gpu;       // RunDatabase::gpu_activity: raw kernels, copies and memsets (the capture window)
};

/// Reads every table of RunRecords for run `run_id`. Throws RunDatabaseError.
RunRecords read_run_records(const RunDatabase& db, std::int64_t run_id);

}  // namespace hs::reports
