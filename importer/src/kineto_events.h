// kineto_events.h — a Kineto (PyTorch profiler) Chrome-trace file read as a stream of flat
// events: nlohmann/json's SAX interface over the file (gzip through zlib), so that memory stays
// bounded by one event whatever the file's size. Private to hs_importer.
//
// What is kept of an event: ph, cat, name, pid, tid, ts and dur (µs in the file, kept as exact
// integer ns: the decimal text is read, not a double), and the `args` the importer reads
// (External id, correlation, device, stream, context, bytes, grid, block, registers, shared
// memory, NCCL's collective metadata, the memory events' totals). Everything else is skipped.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace hs::importer::detail {

struct TraceEvent {
  char ph = 0;
  std::string cat;
  std::string name;
  std::int64_t pid = -1;
  std::int64_t tid = -1;
  std::int64_t ts_ns = 0;
  std::int64_t dur_ns = 0;
  bool has_ts = false;
  bool has_dur = false;
  // args
  std::int64_t external_id = -1;
  std::int64_t correlation = -1;
  std::int64_t device = -1;
  std::int64_t stream = -1;
  std::int64_t context = -1;
  std::int64_t bytes = -1;
  std::int64_t cbid = -1;
  std::int64_t grid[3] = {0, 0, 0};
  std::int64_t block[3] = {0, 0, 0};
  std::int64_t registers = 0;
  std::int64_t shared_memory = 0;
  std::string collective;  // "Collective name": allreduce, allgather, reduce_scatter, ...
  std::string dtype;       // "dtype": Float, BFloat16, ...
  std::string pg_name;     // "Process Group Name"
  std::string pg_desc;     // "Process Group Description"
  std::int64_t in_nelems = -1;
  std::int64_t out_nelems = -1;
  std::int64_t group_size = -1;
  std::int64_t total_allocated = -1;  // [memory] events
  std::int64_t total_reserved = -1;
  std::int64_t device_type = -1;
  std::int64_t device_id = -1;
  std::string arg_name;  // a metadata event's args.name (process_name, thread_name)

  void clear();
};

/// The file's header fields (wherever they stand in the file: Kineto writes baseTimeNanoseconds
/// after traceEvents).
struct TraceHeader {
  std::int64_t rank = -1;        // distributedInfo.rank
  std::int64_t world_size = -1;  // distributedInfo.world_size
  std::string backend;           // distributedInfo.backend
  std::int64_t base_time_ns = -1;  // baseTimeNanoseconds; -1: absent (ts is then epoch µs)
  std::int64_t events = 0;       // events in traceEvents
  std::int64_t bytes_read = 0;   // decompressed bytes parsed
};

/// Parses `path` (.json or .json.gz, by content), calling `on_event` for every event of
/// traceEvents (or of a top-level array). Throws ImportError with the file and offset on a
/// syntax error, and when the file cannot be opened.
TraceHeader read_kineto_trace(const std::string& path, const std::function<void(const TraceEvent&)>& on_event);

/// Exact ns from a µs number as the file writes it ("4458677009853.422" -> 4458677009853422).
std::int64_t micros_text_to_ns(const std::string& text);

}  // namespace hs::importer::detail
