// memory_analysis.h — memory over a run: allocated / reserved / active over time and per phase,
// PyTorch's caching-allocator fragmentation ratios (profiling-facts "PyTorch CUDA caching
// allocator": reserved slack, split fragmentation, external fragmentation, retries and OOMs), the
// peak against the model's parameter bytes, and the paged KV pool's occupancy.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hybridscope/reports/run_data.h"

namespace hs::reports {

struct MemoryPhasePeak {
  std::string phase;  // the sample's phase; a periodic ("timer") sample's is the top-level phase or
                      // switch running when it was taken, or "between phases"
  int rank = 0;
  std::int64_t peak_allocated_bytes = 0;
  std::optional<std::int64_t> peak_reserved_bytes;
  std::optional<double> min_allocated_over_reserved;  // the worst allocated/reserved in the phase
};

struct MemoryAnalysis {
  std::string device;  // "cpu" (tracking allocator) | "cuda"
  bool has_samples = false;
  std::vector<MemoryPhasePeak> phases;  // by rank, then phase (verl's order)
  std::int64_t peak_allocated_bytes = 0;  // over ranks and measured steps
  int peak_rank = 0;
  std::int64_t peak_step = 0;
  std::optional<std::int64_t> peak_reserved_bytes;
  /// allocated/reserved at the sample where it is lowest (only samples with reserved > 0); absent on CPU.
  std::optional<double> min_allocated_over_reserved;
  std::optional<double> worst_reserved_slack, worst_split_fragmentation, worst_external_fragmentation;
  std::int64_t alloc_retries = 0;  // over the run (deltas of the cumulative counter, summed over ranks)
  std::int64_t ooms = 0;
  /// Whether any sample carried the allocator's retry and OOM counters (CUDA caching-allocator
  /// stats; an imported trace's memory events carry none): without them the two counts above are
  /// unknown, not 0.
  bool has_allocator_counters = false;
  /// The actor's parameter bytes (`perf/actor_param_bytes`, the whole model in its training dtype);
  /// absent when the run did not record it.
  std::optional<std::int64_t> param_bytes;
  std::optional<double> peak_over_params;  // peak_allocated_bytes / param_bytes
  /// The paged KV pool.
  std::int64_t kv_num_blocks = 0;
  std::int64_t kv_peak_blocks_used = 0;
  std::optional<double> kv_peak_occupancy;  // peak used / blocks
};

MemoryAnalysis memory_analysis(const RunData& data, const std::vector<std::int64_t>& measured);

}  // namespace hs::reports
