// gpu_kernels.h — where the GPU time of the measured steps went: per range (the phase that
// launched the kernels) and kernel, count, total, min and max duration, from the v10 aggregates
// (kernel_stats: every kernel the collector saw) or, for a run without them, from the raw records
// (no range then). What report and diagnose print under "GPU kernels".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hybridscope/reports/run_data.h"

namespace hs::reports {

struct GpuKernelTime {
  std::string range;   // the launching range's name; "" outside every range (or unknown: raw records)
  std::string kernel;  // short name ("Memcpy Host-to-Device" for copies)
  std::string kernel_class;  // compute | nccl | memory
  std::int64_t count = 0;
  std::int64_t total_ns = 0;
  std::int64_t min_ns = 0;
  std::int64_t max_ns = 0;
  double share = 0.0;  // of the summary's total_ns (summed durations, not wall time)
};

struct GpuKernelSummary {
  std::string source;  // "kernel_stats", "raw kernels" or "" (no GPU records in the measured steps)
  std::int64_t records = 0;   // kernels, copies and memsets counted
  std::int64_t total_ns = 0;  // their summed durations
  std::int64_t busy_ns = 0;   // Σ stream_busy of the measured steps (union per stream); 0 without aggregates
  std::vector<GpuKernelTime> top;  // by total_ns, largest first, at most `top` of them
};

/// The GPU time of the `measured` steps by (range, kernel), all ranks together.
GpuKernelSummary gpu_kernel_summary(const RunData& data, const std::vector<std::int64_t>& measured,
                                    std::size_t top = 15);

}  // namespace hs::reports
