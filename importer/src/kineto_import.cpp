// kineto_import.cpp — Kineto traces into a run database through the Recorder (see
// kineto_import.h; docs/importing.md says what each event becomes).
#include "hybridscope/importer/kineto_import.h"

#include <algorithm>
#include <filesystem>
#include <limits>
#include <map>

#include "hybridscope/probes/kernel_names.h"
#include "hybridscope/probes/recorder.h"
#include "imported_ranges.h"
#include "imported_run.h"
#include "kineto_events.h"

namespace hs::importer {

namespace fs = std::filesystem;
using detail::TraceEvent;
using detail::NamePool;
using detail::TraceHeader;

namespace {

// Records between flushes: the recorder's queue then holds at most this many (its cap, 4M,
// would drop beyond: an importer must lose nothing).
constexpr std::int64_t kFlushEvery = 1 << 18;
// GPU and runtime records per hand-over (a CUPTI buffer's worth).

// NCCL's collective names (Kineto's "Collective name", ParamCommsUtils) in the comm_ops spelling.
std::string comm_op_name(const std::string& collective) {
  std::string c;
  for (char ch : collective)
    if (ch != '_') c += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (c == "allreduce" || c == "allreduce_coalesced") return "all_reduce";
  if (c == "allgather" || c == "allgatherintotensorcoalesced" || c == "allgatherbase" || c == "allgatherintotensor")
    return "all_gather";
  if (c == "reducescatter" || c == "reducescatterbase" || c == "reducescattertensorcoalesced") return "reduce_scatter";
  if (c == "broadcast") return "broadcast";
  if (c == "reduce") return "reduce";
  if (c == "alltoall" || c == "alltoallbase" || c == "alltoallv") return "all_to_all";
  if (c == "send") return "send";
  if (c == "recv") return "recv";
  if (c == "barrier") return "barrier";
  return collective;  // another collective keeps its name
}

// Kineto's dtype names (c10::ScalarType's) in the comm_ops spelling, with their sizes in bytes.
std::pair<std::string, int> comm_dtype(const std::string& dtype) {
  static const std::map<std::string, std::pair<std::string, int>> kTypes = {
      {"Float", {"float32", 4}},  {"Double", {"float64", 8}}, {"Half", {"float16", 2}},
      {"BFloat16", {"bfloat16", 2}}, {"Long", {"int64", 8}}, {"Int", {"int32", 4}},
      {"Short", {"int16", 2}},    {"Char", {"int8", 1}},      {"Byte", {"uint8", 1}},
      {"Bool", {"bool", 1}},      {"Float8_e4m3fn", {"float8_e4m3fn", 1}}, {"Float8_e5m2", {"float8_e5m2", 1}}};
  const auto it = kTypes.find(dtype);
  return it == kTypes.end() ? std::pair<std::string, int>{dtype, 0} : it->second;
}

// "Memcpy DtoH (Device -> Pageable)" -> CUPTI's copy kind and memory kinds (gpu_activity.h).
int memory_kind(const std::string& s) {
  if (s == "Pageable") return 1;
  if (s == "Pinned") return 2;
  if (s == "Device") return 3;
  if (s == "Array") return 4;
  if (s == "Managed") return 5;
  return 0;
}
void parse_memcpy_name(const std::string& name, int& copy_kind, int& src, int& dst) {
  copy_kind = 0, src = 0, dst = 0;
  static const std::pair<const char*, int> kKinds[] = {{"HtoD", 1}, {"DtoH", 2}, {"HtoA", 3}, {"AtoH", 4},
                                                       {"AtoA", 5}, {"AtoD", 6}, {"DtoA", 7}, {"DtoD", 8},
                                                       {"HtoH", 9}, {"PtoP", 10}};
  for (const auto& [text, kind] : kKinds)
    if (name.find(text) != std::string::npos) copy_kind = kind;
  const auto open = name.find('('), arrow = name.find(" -> "), close = name.rfind(')');
  if (open != std::string::npos && arrow != std::string::npos && close != std::string::npos && arrow > open) {
    src = memory_kind(name.substr(open + 1, arrow - open - 1));
    dst = memory_kind(name.substr(arrow + 4, close - arrow - 4));
  }
}
int parse_memset_kind(const std::string& name) {
  const auto open = name.find('('), close = name.rfind(')');
  return open != std::string::npos && close != std::string::npos && close > open
             ? memory_kind(name.substr(open + 1, close - open - 1))
             : 0;
}

bool is_gpu_cat(const std::string& cat) { return cat == "kernel" || cat == "gpu_memcpy" || cat == "gpu_memset"; }
bool is_runtime_cat(const std::string& cat) { return cat == "cuda_runtime" || cat == "cuda_driver"; }
bool is_memory_event(const TraceEvent& e) { return e.ph == 'i' && e.name == "[memory]"; }

// One file's header and span, from the first pass.
struct TraceFile {
  std::string path;
  TraceHeader header;
  int rank = 0;
  std::int64_t min_ts = std::numeric_limits<std::int64_t>::max();  // file ns
  std::int64_t max_end = std::numeric_limits<std::int64_t>::min();
  std::int64_t cpu_pid = -1;  // the process that recorded the CPU side
  bool gpu = false;           // the trace holds GPU activity
  std::int64_t base_ns() const { return header.base_time_ns >= 0 ? header.base_time_ns : 0; }
};

// A CPU range: cat cpu_op or user_annotation.
using CpuRange = detail::ImportedRange;

class RankImport {
 public:
  RankImport(const TraceFile& file, std::int64_t shift_ns, probes::Recorder& rec, const KinetoImportOptions& options,
             NamePool& names, ImportSummary& summary)
      : file_(file), shift_(shift_ns), rec_(rec), options_(options), names_(names), summary_(summary) {}

  void run() {
    read_ranges();
    nest_and_number();
    write_ranges();
    read_runtime_and_memory();
    read_gpu();
    write_correlation_ranges();
    rec_.flush();
  }

 private:
  std::int64_t ns(const TraceEvent& e) const { return e.ts_ns + shift_; }

  void counted_flush(std::int64_t records) {
    since_flush_ += records;
    if (since_flush_ >= kFlushEvery) {
      rec_.flush();
      since_flush_ = 0;
    }
  }

  // Pass 1: CPU ranges and the step boundaries.
  void read_ranges() {
    detail::read_kineto_trace(file_.path, [&](const TraceEvent& e) {
      const bool annotation = e.cat == "user_annotation";
      const bool op = e.cat == "cpu_op";
      if (e.ph != 'X' || !(annotation || (op && options_.cpu_ops))) {
        if (!(e.ph == 'X' && (op || is_gpu_cat(e.cat) || is_runtime_cat(e.cat))) && !is_memory_event(e) &&
            e.ph != 'M')
          ++summary_.skipped;
        return;
      }
      CpuRange r{e.tid, ns(e), ns(e) + e.dur_ns, 0, nullptr, -1, -1, 0, probes::Category::kOp};
      const auto phase = annotation ? options_.phases.phase_of(e.name) : std::nullopt;
      if (phase) {
        r.name = names_.get(*phase);
        r.category = PhaseMap::category_of(*phase);
        r.phase = true;
        if (*phase == "step") has_step_annotation_ = true;
      } else {
        r.name = names_.get(e.name);
        if (annotation && e.name.rfind("ProfilerStep#", 0) == 0)
          r.profiler_step = std::strtoll(e.name.c_str() + 13, nullptr, 10);
      }
      ranges_.push_back(r);
    });
  }

  // Nesting per thread (sorted by start, the longer first), step numbers, step boundaries.
  void nest_and_number() {
    // Steps: verl's `step` annotations (numbered from first_step in time order), else the
    // profiler's ProfilerStep#N (step N), else none (everything in step 0).
    detail::StepStarts steps;
    if (has_step_annotation_) {
      steps = detail::number_step_ranges(ranges_, options_.first_step);
    } else {
      for (CpuRange& r : ranges_)
        if (r.profiler_step >= 0) {
          r.name = names_.get("step");
          r.category = probes::Category::kStep;
          r.phase = true;
          steps.emplace_back(r.start, r.profiler_step);
        }
      std::sort(steps.begin(), steps.end());
      if (!steps.empty())
        summary_.notes.push_back("rank " + std::to_string(file_.rank) +
                                 ": no `step` annotation; the profiler's ProfilerStep#N ranges are the steps");
    }
    if (steps.empty())
      summary_.notes.push_back("rank " + std::to_string(file_.rank) +
                               ": no step ranges (neither `step` nor ProfilerStep#N): every record is in step 0");
    steps_ = steps;
    summary_.steps += static_cast<std::int64_t>(steps.size());
    for (const auto& [start, step] : steps) rec_.set_step_at(step, start);

    detail::nest_ranges(ranges_, steps_);
  }

  std::int64_t step_at(std::int64_t t) const { return detail::step_at(steps_, t); }

  void write_ranges() {
    detail::record_ranges(rec_, ranges_, summary_.ranges, summary_.phase_ranges,
                          [&](std::int64_t n) { counted_flush(n); });
  }

  void hand_over(bool force) {
    detail::hand_over_batch(rec_, batch_, force, [&](std::int64_t n) { counted_flush(n); });
  }

  // Pass 2: runtime calls (with the range each was made in) and the allocator's [memory] events.
  void read_runtime_and_memory() {
    detail::read_kineto_trace(file_.path, [&](const TraceEvent& e) {
      if (e.ph == 'X' && is_runtime_cat(e.cat)) {
        if (e.correlation < 0) return;
        probes::RuntimeApiActivity a;
        a.tid = e.tid;
        a.correlation_id = static_cast<std::uint32_t>(e.correlation);
        a.cbid = static_cast<int>(e.cbid);
        a.name = names_.get(e.name);
        a.start_ns = ns(e);
        a.end_ns = ns(e) + e.dur_ns;
        batch_.runtime_api.push_back(a);
        const std::int32_t r = detail::innermost_range(ranges_, e.tid, a.start_ns);
        if (r >= 0) {
          ranges_[static_cast<std::size_t>(r)].launched = true;
          batch_.external_correlations.push_back({a.correlation_id, static_cast<std::uint64_t>(r) + 1});
        }
        ++summary_.runtime_calls;
        hand_over(false);
      } else if (is_memory_event(e) && e.has_ts) {
        probes::MemorySample m;
        m.ts_ns = ns(e);
        m.step = step_at(m.ts_ns);
        m.phase = "allocator_event";
        const bool cuda = e.device_type == 1;
        m.device = cuda ? static_cast<int>(std::max<std::int64_t>(e.device_id, 0)) : -1;
        m.allocated_bytes = e.total_allocated;
        m.reserved_bytes = cuda ? e.total_reserved : -1;  // the CPU allocator has no reserve
        rec_.record_memory(m);
        ++summary_.memory_samples;
        counted_flush(1);
      }
    });
    hand_over(true);
  }

  // Pass 3: kernels, copies, memsets; NCCL kernels with metadata also as collectives.
  void read_gpu() {
    detail::read_kineto_trace(file_.path, [&](const TraceEvent& e) {
      if (e.ph != 'X' || !is_gpu_cat(e.cat)) return;
      const auto device = static_cast<std::uint32_t>(e.device >= 0 ? e.device : std::max<std::int64_t>(e.pid, 0));
      const auto stream = static_cast<std::uint32_t>(e.stream >= 0 ? e.stream : std::max<std::int64_t>(e.tid, 0));
      const auto context = static_cast<std::uint32_t>(std::max<std::int64_t>(e.context, 0));
      const auto correlation = static_cast<std::uint32_t>(std::max<std::int64_t>(e.correlation, 0));
      const std::int64_t start = ns(e), end = ns(e) + e.dur_ns;
      if (e.cat == "kernel") {
        probes::KernelActivity k;
        k.device = device, k.context = context, k.stream = stream, k.correlation_id = correlation;
        k.start_ns = start, k.end_ns = end;
        k.name = names_.get(e.name);
        k.short_name = names_.get(probes::short_kernel_name_of_demangled(e.name));
        k.kernel_class = probes::classify_kernel(k.name);
        for (int i = 0; i < 3; ++i) k.grid[i] = static_cast<std::int32_t>(e.grid[i]), k.block[i] = static_cast<std::int32_t>(e.block[i]);
        k.registers_per_thread = static_cast<std::int32_t>(e.registers);
        k.dynamic_shared_memory = static_cast<std::int32_t>(e.shared_memory);  // Kineto: one "shared memory" figure
        batch_.kernels.push_back(k);
        ++summary_.kernels;
        if (k.kernel_class == probes::KernelClass::kNccl) record_collective(e, start, end);
      } else if (e.cat == "gpu_memcpy") {
        probes::MemcpyActivity m;
        m.device = device, m.context = context, m.stream = stream, m.correlation_id = correlation;
        m.start_ns = start, m.end_ns = end, m.bytes = std::max<std::int64_t>(e.bytes, 0);
        parse_memcpy_name(e.name, m.copy_kind, m.src_kind, m.dst_kind);
        batch_.memcpys.push_back(m);
        ++summary_.memcpys;
      } else {
        probes::MemsetActivity m;
        m.device = device, m.context = context, m.stream = stream, m.correlation_id = correlation;
        m.start_ns = start, m.end_ns = end, m.bytes = std::max<std::int64_t>(e.bytes, 0);
        m.memory_kind = parse_memset_kind(e.name);
        batch_.memsets.push_back(m);
        ++summary_.memsets;
      }
      hand_over(false);
    });
    hand_over(true);
  }

  // An NCCL kernel with Kineto's collective metadata (PyTorch 2.x with record_shapes): one comm_ops
  // row, timed by the kernel on the GPU. Without the metadata the bytes are unknown: no row (a
  // collective of 0 bytes would be a fake number), counted instead.
  void record_collective(const TraceEvent& e, std::int64_t start, std::int64_t end) {
    const auto [dtype, size] = comm_dtype(e.dtype);
    if (e.collective.empty() || e.group_size <= 0 || size == 0 || (e.in_nelems < 0 && e.out_nelems < 0)) {
      ++summary_.nccl_without_metadata;
      return;
    }
    probes::CommRecord c{};
    c.op = names_.get(comm_op_name(e.collective));
    c.group = names_.get(!e.pg_desc.empty() ? e.pg_desc : !e.pg_name.empty() ? e.pg_name : "unknown");
    c.group_size = static_cast<int>(e.group_size);
    c.bytes = std::max(e.in_nelems, e.out_nelems) * size;
    c.dtype = names_.get(dtype);
    c.start_ns = start;
    c.end_ns = end;
    c.step = step_at(start);
    rec_.record_comm(c);
    ++summary_.collectives;
  }

  void write_correlation_ranges() {
    for (std::size_t i = 0; i < ranges_.size(); ++i) {
      const CpuRange& r = ranges_[i];
      if (!r.launched) continue;
      batch_.correlation_ranges.push_back({static_cast<std::uint64_t>(i) + 1, r.tid, r.depth, r.start, r.name});
      hand_over(false);
    }
    hand_over(true);
  }

  const TraceFile& file_;
  const std::int64_t shift_;
  probes::Recorder& rec_;
  const KinetoImportOptions& options_;
  NamePool& names_;
  ImportSummary& summary_;
  std::vector<CpuRange> ranges_;
  detail::StepStarts steps_;
  bool has_step_annotation_ = false;
  probes::GpuActivityBatch batch_;
  std::int64_t since_flush_ = 0;
};

bool is_trace_file(const fs::path& p) {
  const std::string name = p.filename().string();
  auto ends = [&](const std::string& s) { return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0; };
  return ends(".json") || ends(".json.gz");
}

}  // namespace

std::vector<std::string> kineto_trace_files(const std::vector<std::string>& inputs) {
  std::vector<std::string> out;
  for (const std::string& in : inputs) {
    std::error_code ec;
    if (fs::is_directory(in, ec)) {
      std::vector<std::string> found;
      for (const auto& entry : fs::directory_iterator(in, ec))
        if (entry.is_regular_file() && is_trace_file(entry.path())) found.push_back(entry.path().string());
      std::sort(found.begin(), found.end());
      if (found.empty()) throw ImportError("no *.json or *.json.gz trace in the folder " + in);
      out.insert(out.end(), found.begin(), found.end());
    } else if (fs::is_regular_file(in, ec)) {
      out.push_back(in);
    } else {
      throw ImportError("no such trace file or folder: " + in);
    }
  }
  if (out.empty()) throw ImportError("no trace given");
  return out;
}

ImportSummary import_kineto(const std::vector<std::string>& paths, const std::string& db_path,
                            const KinetoImportOptions& options) {
  ImportSummary summary;
  summary.source = "kineto";
  // Pass 0: each file's header (rank, world, clock base: Kineto writes the base after the events)
  // and span, so that the run row and every rank share one timeline before anything is written.
  std::vector<TraceFile> files;
  for (std::size_t i = 0; i < paths.size(); ++i) {
    TraceFile f;
    f.path = paths[i];
    f.header = detail::read_kineto_trace(f.path, [&](const TraceEvent& e) {
      if (!e.has_ts || e.ph == 'M') return;
      f.min_ts = std::min(f.min_ts, e.ts_ns);
      f.max_end = std::max(f.max_end, e.ts_ns + e.dur_ns);
      if (f.cpu_pid < 0 && (e.cat == "cpu_op" || e.cat == "user_annotation")) f.cpu_pid = e.pid;
      if (is_gpu_cat(e.cat)) f.gpu = true;
    });
    summary.events += f.header.events;
    summary.bytes += f.header.bytes_read;
    if (f.header.rank >= 0) {
      f.rank = static_cast<int>(f.header.rank);
    } else {
      f.rank = static_cast<int>(i);
      summary.notes.push_back(f.path + ": no distributedInfo.rank; imported as rank " + std::to_string(i) +
                              " (its position among the files)");
    }
    if (f.header.base_time_ns < 0)
      summary.notes.push_back(f.path + ": no baseTimeNanoseconds; its ts are taken as UNIX-epoch µs");
    files.push_back(std::move(f));
  }
  std::sort(files.begin(), files.end(), [](const TraceFile& a, const TraceFile& b) { return a.rank < b.rank; });
  for (std::size_t i = 1; i < files.size(); ++i)
    if (files[i].rank == files[i - 1].rank)
      throw ImportError(files[i - 1].path + " and " + files[i].path + " are both rank " +
                        std::to_string(files[i].rank) + ": import one run's ranks at a time");
  // One timeline: ns relative to the earliest base; each file shifted onto it.
  std::int64_t run_base = std::numeric_limits<std::int64_t>::max();
  std::int64_t start_unix = std::numeric_limits<std::int64_t>::max(), end_unix = 0;
  int world = 0;
  for (const TraceFile& f : files) {
    run_base = std::min(run_base, f.base_ns());
    if (f.min_ts <= f.max_end) {
      start_unix = std::min(start_unix, f.base_ns() + f.min_ts);
      end_unix = std::max(end_unix, f.base_ns() + f.max_end);
    }
    world = std::max<int>(world, static_cast<int>(f.header.world_size));
  }
  if (start_unix > end_unix) start_unix = end_unix = run_base;
  if (world <= 0) world = static_cast<int>(files.size());

  probes::RunInfo info;
  info.name = options.run_name.empty() ? fs::path(files.front().path).filename().string() : options.run_name;
  info.command_line = options.command_line;
  info.config_yaml = "";
  info.world_size = world;
  info.torch_version = "";  // the trace does not say
  info.source = "kineto";
  info.imported_clock_offset_ns = run_base;
  info.imported_start_unix_ns = start_unix;
  info.imported_end_unix_ns = end_unix;
  info.imported_host = "unknown (not in the trace)";
  NamePool names;
  probes::RecorderOptions recorder_options;
  recorder_options.gpu.max_pending_correlations = std::size_t{1} << 24;  // a trace's launches all come first
  std::vector<detail::ImportedRank> ranks;
  for (const TraceFile& f : files) ranks.push_back({f.rank, f.cpu_pid, f.gpu, f.path});
  detail::record_imported_run(db_path, info, recorder_options, options.step_metrics, ranks,
                              [&](std::size_t i, probes::Recorder& rec) {
                                const TraceFile& f = files[i];
                                RankImport(f, f.base_ns() - run_base, rec, options, names, summary).run();
                              },
                              summary);
  if (summary.lost_records > 0)
    throw ImportError("the import lost " + std::to_string(summary.lost_records) + " records writing " + db_path +
                      " (the run is marked failed)");
  return summary;
}

}  // namespace hs::importer
