// import_summary.h — what an import wrote and what its source lacked, per kind: the one summary
// every importer returns (Kineto traces, Nsight Systems exports, verl's metrics) and the CLI prints.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hs::importer {

/// What an import wrote and what it could not, per kind (the CLI prints it).
struct ImportSummary {
  std::int64_t run_id = -1;
  int ranks = 0;
  std::int64_t events = 0;           // trace events (Kineto) or table rows (nsys) read, every file once
  std::int64_t bytes = 0;            // decompressed JSON bytes (Kineto) or database file bytes (nsys)
  std::int64_t ranges = 0;           // ranges written (Kineto: cpu_op and user_annotation; nsys: NVTX ranges)
  std::int64_t phase_ranges = 0;     // of which a phase map named a hybridscope phase
  std::int64_t steps = 0;            // step ranges (every rank)
  std::int64_t kernels = 0;
  std::int64_t memcpys = 0;
  std::int64_t memsets = 0;
  std::int64_t runtime_calls = 0;
  std::int64_t collectives = 0;      // comm_ops rows from NCCL kernels with metadata
  std::int64_t nccl_without_metadata = 0;  // NCCL kernels without collective metadata: kernels only
  std::int64_t memory_samples = 0;
  std::int64_t skipped = 0;          // events of kinds not imported (Kineto: python_function, flows, ...; nsys: NVTX marks, domain and thread names, unended ranges)
  std::int64_t lost_records = 0;     // the recorder's dropped + failed writes (0 unless the disk failed)
  std::string source;                // runs.source: "kineto", "nsys", "verl-log"
  std::vector<std::string> notes;    // what the trace lacked ("no distributedInfo: rank taken from ...")
};

}  // namespace hs::importer
