// nsys_import.cpp — Nsight Systems SQLite exports into a run database through the Recorder (see
// nsys_import.h; docs/importing.md says what each table becomes).
#include "hybridscope/importer/nsys_import.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <unordered_map>

#include "hybridscope/probes/kernel_names.h"
#include "hybridscope/probes/recorder.h"
#include "imported_ranges.h"
#include "imported_run.h"
#include "nsys_db.h"
#include "nsys_processes.h"

namespace hs::importer {

namespace fs = std::filesystem;
using detail::Cursor;
using detail::ImportedRange;
using detail::NamePool;
using detail::NsysDb;
using detail::NsysFile;
using detail::NsysProcess;

namespace {

constexpr std::int64_t kFlushEvery = 1 << 18;  // records between flushes (as the Kineto importer)

// NVTX event types (ENUM_NSYS_EVENT_TYPE; the export documentation's NVTX table).
constexpr int kNvtxPushPopRange = 59;
constexpr int kNvtxStartEndRange = 60;
constexpr int kNvtxDomainCreate = 75;
// ENUM_NSYS_EVENT_CLASS: CUPTI_ACTIVITY_KIND_RUNTIME also holds a second row per call whose call
// stack was sampled (class 67, TRACE_PROCESS_EVENT_CUDABACKTRACE, same correlationId): not a call.
constexpr int kEventClassCudaBacktrace = 67;

const char* const kEventTables[] = {"NVTX_EVENTS", "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
                                    "CUPTI_ACTIVITY_KIND_MEMSET", "CUPTI_ACTIVITY_KIND_RUNTIME"};

// Nsight Systems' memory kinds (ENUM_CUDA_MEM_KIND: 0 Pageable ... 6 Managed Static, 7 Unknown) in
// CUPTI's numbering, which memory_kinds uses (0 Unknown, 1 Pageable ... 7 Managed Static). From the
// export's enum table by label where it has one, else the documented order.
std::vector<int> memory_kind_map(const NsysDb& db) {
  std::vector<int> map = {1, 2, 3, 4, 5, 6, 7, 0};
  if (!db.has_table("ENUM_CUDA_MEM_KIND")) return map;
  static const std::map<std::string, int> kCupti = {{"Unknown", 0}, {"Pageable", 1}, {"Pinned", 2},
                                                    {"Device", 3}, {"Array", 4}, {"Managed", 5},
                                                    {"Device Static", 6}, {"Managed Static", 7}};
  Cursor c(db, "SELECT id, label FROM ENUM_CUDA_MEM_KIND");
  while (c.next()) {
    const auto it = kCupti.find(c.text(1));
    const std::int64_t id = c.i64(0);
    if (it == kCupti.end() || id < 0 || id > 64) continue;
    if (static_cast<std::size_t>(id) >= map.size()) map.resize(static_cast<std::size_t>(id) + 1, 0);
    map[static_cast<std::size_t>(id)] = it->second;
  }
  return map;
}

class ProcessImport {
 public:
  ProcessImport(const NsysFile& file, detail::StringIds& strings, const NsysProcess& process, std::int64_t shift_ns,
                probes::Recorder& rec, const NsysImportOptions& options, NamePool& names, ImportSummary& summary)
      : file_(file), db_(*file.db), strings_(strings), process_(process), shift_(shift_ns), rec_(rec),
        options_(options), names_(names), summary_(summary) {}

  void run() {
    read_ranges();
    nest_and_number();
    write_ranges();
    read_activity();
    write_correlation_ranges();
    rec_.flush();
  }

 private:
  std::string who() const { return "rank " + std::to_string(process_.rank) + " (pid " + std::to_string(process_.pid) + ")"; }

  void counted_flush(std::int64_t records) {
    since_flush_ += records;
    if (since_flush_ >= kFlushEvery) {
      rec_.flush();
      since_flush_ = 0;
    }
  }

  const char* string_of(std::int64_t id) {
    const std::string* s = strings_.get(id);
    return s ? s->c_str() : nullptr;
  }

  // NVTX push/pop and start/end ranges of this process; domain names from the domain-create events.
  void read_ranges() {
    if (!db_.has_table("NVTX_EVENTS")) return;
    const bool has_text = db_.has_column("NVTX_EVENTS", "text");
    const bool has_text_id = db_.has_column("NVTX_EVENTS", "textId");
    const bool has_domain = db_.has_column("NVTX_EVENTS", "domainId");
    const std::string text = has_text ? "text" : "NULL";
    const std::string text_id = has_text_id ? "textId" : "NULL";
    const std::string domain = has_domain ? "domainId" : "0";
    std::map<std::int64_t, std::string> domains;
    if (has_domain) {
      Cursor c(db_, "SELECT domainId, " + text + ", " + text_id + " FROM NVTX_EVENTS WHERE eventType = " +
                        std::to_string(kNvtxDomainCreate) + " AND (globalTid >> 24) = ?1");
      c.bind(1, process_.key);
      while (c.next()) {
        const char* registered = string_of(c.i64_or(2, -1));
        domains[c.i64(0)] = !c.is_null(1) ? c.text(1) : registered ? registered : "";
      }
    }
    Cursor c(db_, "SELECT start, end, globalTid, " + domain + ", " + text + ", " + text_id + ", eventType "
                  "FROM NVTX_EVENTS WHERE (globalTid >> 24) = ?1");
    c.bind(1, process_.key);
    std::int64_t unended = 0, nccl = 0;
    while (c.next()) {
      const auto type = c.i64(6);
      if (type != kNvtxPushPopRange && type != kNvtxStartEndRange) {
        ++summary_.skipped;  // marks, thread names, domain and category registrations
        continue;
      }
      if (c.is_null(1)) {
        ++unended;
        ++summary_.skipped;
        continue;
      }
      std::string bare;
      if (!c.is_null(4)) bare = c.text(4);
      else if (const char* registered = string_of(c.i64_or(5, -1))) bare = registered;
      ImportedRange r{detail::nsys_tid(c.i64(2)), c.i64(0) + shift_, c.i64(1) + shift_, 0, nullptr};
      if (const auto phase = options_.phases.phase_of(bare)) {
        r.name = names_.get(*phase);
        r.category = PhaseMap::category_of(*phase);
        r.phase = true;
      } else {
        // Nsight Systems shows a range of another domain as `domain:name`.
        const auto d = domains.find(c.i64_or(3, 0));
        const bool named_domain = d != domains.end() && !d->second.empty();
        if (named_domain && d->second == "NCCL") ++nccl;
        r.name = names_.get(named_domain ? d->second + ":" + bare : bare);
      }
      ranges_.push_back(r);
    }
    if (unended > 0)
      summary_.notes.push_back(who() + ": " + std::to_string(unended) +
                               " NVTX ranges have no end (still open when the capture stopped): not imported");
    if (nccl > 0)
      summary_.notes.push_back(who() + ": " + std::to_string(nccl) +
                               " NCCL NVTX ranges (domain NCCL) imported as ranges `NCCL:<call>`; their payloads "
                               "(message size, reduction op) are not decoded, so they give no comm_ops rows");
  }

  // Nesting per thread, step numbers from the `step` ranges.
  void nest_and_number() {
    steps_ = detail::number_step_ranges(ranges_, options_.first_step);
    if (steps_.empty()) summary_.notes.push_back(who() + ": no `step` NVTX range: every record is in step 0");
    summary_.steps += static_cast<std::int64_t>(steps_.size());
    for (const auto& [start, step] : steps_) rec_.set_step_at(step, start);
    detail::nest_ranges(ranges_, steps_);
  }

  void write_ranges() {
    detail::record_ranges(rec_, ranges_, summary_.ranges, summary_.phase_ranges,
                          [&](std::int64_t n) { counted_flush(n); });
  }

  void hand_over(bool force) {
    detail::hand_over_batch(rec_, batch_, force, [&](std::int64_t n) { counted_flush(n); });
  }

  // A runtime API call (a row of the activity query, kind 3) with the innermost NVTX range of its
  // thread open at its start.
  void add_runtime(const Cursor& c) {
    if (c.i64(19) == kEventClassCudaBacktrace) {
      ++backtraces_;
      ++summary_.skipped;
      return;
    }
    probes::RuntimeApiActivity a;
    a.tid = detail::nsys_tid(c.i64(3));
    a.correlation_id = static_cast<std::uint32_t>(c.i64_or(6, 0));
    a.cbid = -1;  // an export names the call but carries no callback id: -1, as a Kineto trace without one
    const char* name = string_of(c.i64_or(7, -1));
    a.name = name ? name : "";
    a.start_ns = c.i64(1) + shift_;
    a.end_ns = c.i64(2) + shift_;
    a.return_value = c.i64(18);
    batch_.runtime_api.push_back(a);
    const std::int32_t r = detail::innermost_range(ranges_, a.tid, a.start_ns);
    if (r >= 0 && !c.is_null(6)) {
      ranges_[static_cast<std::size_t>(r)].launched = true;
      batch_.external_correlations.push_back({a.correlation_id, static_cast<std::uint64_t>(r) + 1});
    }
    ++summary_.runtime_calls;
  }

  // Runtime calls, kernels, copies and memsets of this process in one start order, sorted by SQLite
  // (in temporary files): each stream's records reach the aggregator in order, as stream_busy's
  // union needs, and every launch shortly before its kernel, so the aggregator's table of pending
  // launches (RecorderOptions::gpu.max_pending_correlations) stays a window, whatever the length.
  void read_activity() {
    const std::string k = "CUPTI_ACTIVITY_KIND_KERNEL", m = "CUPTI_ACTIVITY_KIND_MEMCPY", s = "CUPTI_ACTIVITY_KIND_MEMSET",
                      rt = "CUPTI_ACTIVITY_KIND_RUNTIME";
    auto col = [&](const std::string& table, const char* name) {
      return db_.has_column(table, name) ? std::string(name) : std::string("NULL");
    };
    std::vector<std::string> parts;
    // kind, start, end, device (runtime: globalTid), context, stream, correlation, a (kernel name,
    // runtime name), b, grid xyz, block xyz, registers, static smem, dynamic smem, bytes (runtime:
    // return value), x (runtime: event class), y, z
    if (db_.has_table(k) && db_.has_column(k, "globalPid"))
      parts.push_back("SELECT 0, start, end, deviceId, contextId, streamId, correlationId, demangledName, " +
                      col(k, "shortName") + ", gridX, gridY, gridZ, blockX, blockY, blockZ, " +
                      col(k, "registersPerThread") + ", " + col(k, "staticSharedMemory") + ", " +
                      col(k, "dynamicSharedMemory") + ", NULL, NULL, NULL, NULL FROM " + k +
                      " WHERE (globalPid >> 24) = ?1");
    if (db_.has_table(m) && db_.has_column(m, "globalPid"))
      parts.push_back("SELECT 1, start, end, deviceId, contextId, streamId, correlationId, NULL, NULL, "
                      "NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, bytes, copyKind, " +
                      col(m, "srcKind") + ", " + col(m, "dstKind") + " FROM " + m + " WHERE (globalPid >> 24) = ?1");
    if (db_.has_table(s) && db_.has_column(s, "globalPid"))
      parts.push_back("SELECT 2, start, end, deviceId, contextId, streamId, correlationId, NULL, NULL, "
                      "NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, bytes, " + col(s, "value") + ", " +
                      col(s, "memKind") + ", NULL FROM " + s + " WHERE (globalPid >> 24) = ?1");
    if (db_.has_table(rt) && db_.has_column(rt, "globalTid"))
      parts.push_back("SELECT 3, start, end, globalTid, NULL, NULL, correlationId, nameId, NULL, NULL, NULL, NULL, NULL, "
                      "NULL, NULL, NULL, NULL, NULL, " + (db_.has_column(rt, "returnValue") ? std::string("returnValue") : "-1") +
                      ", " + (db_.has_column(rt, "eventClass") ? std::string("eventClass") : "0") + ", NULL, NULL FROM " +
                      rt + " WHERE (globalTid >> 24) = ?1");
    if (parts.empty()) return;
    std::string sql;
    for (const std::string& p : parts) sql += (sql.empty() ? "" : " UNION ALL ") + p;
    sql += " ORDER BY 2";
    const std::vector<int> memory_kinds = memory_kind_map(db_);
    auto memory_kind = [&](std::int64_t nsys_kind) {
      return nsys_kind >= 0 && static_cast<std::size_t>(nsys_kind) < memory_kinds.size()
                 ? memory_kinds[static_cast<std::size_t>(nsys_kind)] : 0;
    };
    std::unordered_map<std::int64_t, std::pair<const char*, probes::KernelClass>> kernel_names;  // demangledName id
    Cursor c(db_, sql);
    c.bind(1, process_.key);
    while (c.next()) {
      const auto kind = c.i64(0);
      if (kind == 3) {
        add_runtime(c);
        hand_over(false);
        continue;
      }
      const auto device = static_cast<std::uint32_t>(c.i64_or(3, 0));
      const auto context = static_cast<std::uint32_t>(c.i64_or(4, 0));
      const auto stream = static_cast<std::uint32_t>(c.i64_or(5, 0));
      const auto correlation = static_cast<std::uint32_t>(c.i64_or(6, 0));
      const std::int64_t start = c.i64(1) + shift_, end = c.i64(2) + shift_;
      if (kind == 0) {
        probes::KernelActivity a;
        a.device = device, a.context = context, a.stream = stream, a.correlation_id = correlation;
        a.start_ns = start, a.end_ns = end;
        const std::int64_t name_id = c.i64_or(7, -1);
        auto it = kernel_names.find(name_id);
        if (it == kernel_names.end()) {
          const char* name = string_of(name_id);
          name = name ? name : names_.get("(kernel name " + std::to_string(name_id) + " not in StringIds)");
          it = kernel_names.emplace(name_id, std::make_pair(name, probes::classify_kernel(name))).first;
        }
        a.name = it->second.first;
        a.kernel_class = it->second.second;
        const char* short_name = string_of(c.i64_or(8, -1));
        a.short_name = short_name ? short_name : names_.get(probes::short_kernel_name_of_demangled(a.name));
        for (int i = 0; i < 3; ++i) {
          a.grid[i] = static_cast<std::int32_t>(c.i64_or(9 + i, 0));
          a.block[i] = static_cast<std::int32_t>(c.i64_or(12 + i, 0));
        }
        a.registers_per_thread = static_cast<std::int32_t>(c.i64_or(15, 0));
        a.static_shared_memory = static_cast<std::int32_t>(c.i64_or(16, 0));
        a.dynamic_shared_memory = static_cast<std::int32_t>(c.i64_or(17, 0));
        batch_.kernels.push_back(a);
        ++summary_.kernels;
        if (a.kernel_class == probes::KernelClass::kNccl) ++summary_.nccl_without_metadata;
      } else if (kind == 1) {
        probes::MemcpyActivity a;
        a.device = device, a.context = context, a.stream = stream, a.correlation_id = correlation;
        a.start_ns = start, a.end_ns = end, a.bytes = c.i64_or(18, 0);
        a.copy_kind = static_cast<int>(c.i64_or(19, 0));  // ENUM_CUDA_MEMCPY_OPER: CUPTI's numbers
        a.src_kind = memory_kind(c.i64_or(20, -1));
        a.dst_kind = memory_kind(c.i64_or(21, -1));
        batch_.memcpys.push_back(a);
        ++summary_.memcpys;
      } else {
        probes::MemsetActivity a;
        a.device = device, a.context = context, a.stream = stream, a.correlation_id = correlation;
        a.start_ns = start, a.end_ns = end, a.bytes = c.i64_or(18, 0);
        a.value = static_cast<std::uint32_t>(c.i64_or(19, 0));
        a.memory_kind = memory_kind(c.i64_or(20, -1));
        batch_.memsets.push_back(a);
        ++summary_.memsets;
      }
      hand_over(false);
    }
    hand_over(true);
    if (backtraces_ > 0)
      summary_.notes.push_back(who() + ": " + std::to_string(backtraces_) +
                               " runtime rows of event class 67 (CUDA backtrace: a sampled call's second row) not "
                               "imported as calls");
  }

  void write_correlation_ranges() {
    for (std::size_t i = 0; i < ranges_.size(); ++i) {
      const ImportedRange& r = ranges_[i];
      if (!r.launched) continue;
      batch_.correlation_ranges.push_back({static_cast<std::uint64_t>(i) + 1, r.tid, r.depth, r.start, r.name});
      hand_over(false);
    }
    hand_over(true);
  }

  const NsysFile& file_;
  const NsysDb& db_;
  detail::StringIds& strings_;
  const NsysProcess& process_;
  const std::int64_t shift_;
  probes::Recorder& rec_;
  const NsysImportOptions& options_;
  NamePool& names_;
  ImportSummary& summary_;
  std::vector<ImportedRange> ranges_;
  detail::StepStarts steps_;
  probes::GpuActivityBatch batch_;
  std::int64_t since_flush_ = 0;
  std::int64_t backtraces_ = 0;
};

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// What the export lacks, and what that costs the run.
void note_missing_tables(const NsysFile& f, std::vector<std::string>& notes) {
  const NsysDb& db = *f.db;
  const std::string v = f.path + " (export schema " + db.version() + "): ";
  if (!db.has_table("NVTX_EVENTS"))
    notes.push_back(v + "no NVTX_EVENTS (NVTX was not traced, or recorded nothing): no ranges, so no phases, "
                        "no steps and no kernel → range attribution");
  if (!db.has_table("CUPTI_ACTIVITY_KIND_KERNEL"))
    notes.push_back(v + "no CUPTI_ACTIVITY_KIND_KERNEL (CUDA was not traced, or ran no kernel): no kernels");
  if (!db.has_table("CUPTI_ACTIVITY_KIND_MEMCPY")) notes.push_back(v + "no CUPTI_ACTIVITY_KIND_MEMCPY: no copies recorded (newer exports leave out empty tables)");
  if (!db.has_table("CUPTI_ACTIVITY_KIND_MEMSET")) notes.push_back(v + "no CUPTI_ACTIVITY_KIND_MEMSET: no memsets recorded (newer exports leave out empty tables)");
  if (!db.has_table("CUPTI_ACTIVITY_KIND_RUNTIME"))
    notes.push_back(v + "no CUPTI_ACTIVITY_KIND_RUNTIME: launches unknown, so GPU records are attributed to no range");
  for (const char* t : {"CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"})
    if (db.has_table(t) && !db.has_column(t, "globalPid"))
      notes.push_back(v + t + " has no globalPid column: its rows belong to no process and are not imported");
  if (db.has_table("NVTX_EVENTS") && !db.has_column("NVTX_EVENTS", "textId"))
    notes.push_back(v + "NVTX_EVENTS has no textId: registered-string names are unknown (ranges keep their text only)");
}

}  // namespace

bool is_nsys_export(const std::string& path) {
  char header[16] = {};
  std::ifstream in(path, std::ios::binary);
  if (!in.read(header, sizeof header) || std::memcmp(header, "SQLite format 3", 16) != 0) return false;
  try {
    const NsysDb db(path);
    if (!db.has_table("StringIds")) return false;
    for (const char* t : kEventTables)
      if (db.has_table(t)) return true;
  } catch (const ImportError&) {
  }
  return false;
}

void refuse_nsys_report(const std::string& path) {
  if (ends_with(path, ".nsys-rep") || ends_with(path, ".qdrep"))
    throw ImportError(path + " is an Nsight Systems report, not its SQLite export: run `nsys export --type sqlite -o " +
                      fs::path(path).stem().string() + ".sqlite " + path + "` and import the .sqlite file");
}

std::map<std::int64_t, int> parse_rank_map(const std::string& text) {
  std::map<std::int64_t, int> out;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const auto comma = std::min(text.find(',', pos), text.size());
    const std::string entry = text.substr(pos, comma - pos);
    const auto eq = entry.find('=');
    char* end1 = nullptr;
    char* end2 = nullptr;
    const long long pid = eq == std::string::npos ? -1 : std::strtoll(entry.c_str(), &end1, 10);
    const long rank = eq == std::string::npos ? -1 : std::strtol(entry.c_str() + eq + 1, &end2, 10);
    if (eq == std::string::npos || eq == 0 || end1 != entry.c_str() + eq || end2 == nullptr || *end2 != '\0' ||
        eq + 1 == entry.size() || pid < 0 || rank < 0 || rank > std::numeric_limits<int>::max())
      throw ImportError("--rank-map: `" + entry + "` is no pid=rank entry (write e.g. 4242=0,4243=1)");
    if (!out.emplace(pid, static_cast<int>(rank)).second)
      throw ImportError("--rank-map: pid " + std::to_string(pid) + " is given twice");
    pos = comma + 1;
  }
  return out;
}

ImportSummary import_nsys(const std::vector<std::string>& paths, const std::string& db_path,
                          const NsysImportOptions& options) {
  ImportSummary summary;
  summary.source = "nsys";
  if (paths.empty()) throw ImportError("no Nsight Systems export given");
  std::vector<NsysFile> files;
  std::vector<NsysProcess> processes;
  for (std::size_t i = 0; i < paths.size(); ++i) {
    refuse_nsys_report(paths[i]);
    if (!is_nsys_export(paths[i]))
      throw ImportError(paths[i] + " is no Nsight Systems SQLite export (no StringIds table with NVTX_EVENTS or "
                                   "CUPTI_ACTIVITY_KIND_* beside it): export a report with `nsys export --type sqlite`");
    NsysFile f;
    f.path = paths[i];
    f.db = std::make_unique<NsysDb>(paths[i]);
    std::error_code ec;
    f.bytes = static_cast<std::int64_t>(fs::file_size(paths[i], ec));
    summary.bytes += f.bytes;
    read_nsys_file_info(f, summary.notes);
    note_missing_tables(f, summary.notes);
    auto found = detail::find_nsys_processes(f, i, summary.events);
    if (found.empty()) summary.notes.push_back(f.path + ": no process with NVTX, runtime or GPU rows: nothing to import");
    processes.insert(processes.end(), found.begin(), found.end());
    files.push_back(std::move(f));
  }
  if (processes.empty()) throw ImportError("the exports hold no NVTX, CUDA runtime or GPU activity to import");
  detail::assign_nsys_ranks(processes, files, options.rank_map, summary.notes);
  std::sort(processes.begin(), processes.end(), [](const NsysProcess& a, const NsysProcess& b) { return a.rank < b.rank; });

  // One timeline: each export's ns from its session start, every file shifted onto the earliest.
  std::int64_t run_base = std::numeric_limits<std::int64_t>::max();
  for (const NsysFile& f : files) run_base = std::min(run_base, std::max<std::int64_t>(f.session_start_unix_ns, 0));
  std::int64_t start_unix = std::numeric_limits<std::int64_t>::max(), end_unix = 0;
  for (const NsysProcess& p : processes) {
    const std::int64_t base = std::max<std::int64_t>(files[p.file].session_start_unix_ns, 0);
    start_unix = std::min(start_unix, base + p.min_start);
    end_unix = std::max(end_unix, base + p.max_end);
  }
  int world = std::max(detail::nsys_world_size(files), processes.back().rank + 1);
  std::string hosts;
  for (const NsysFile& f : files)
    if (!f.host.empty() && hosts.find(f.host) == std::string::npos) hosts += (hosts.empty() ? "" : ",") + f.host;

  probes::RunInfo info;
  info.name = options.run_name.empty() ? fs::path(files.front().path).filename().string() : options.run_name;
  info.command_line = options.command_line;
  info.world_size = world;
  info.source = "nsys";
  info.imported_clock_offset_ns = run_base;
  info.imported_start_unix_ns = start_unix;
  info.imported_end_unix_ns = end_unix;
  info.imported_host = hosts.empty() ? "unknown (not in the export)" : hosts;
  NamePool names;
  std::vector<std::unique_ptr<detail::StringIds>> strings;
  for (const NsysFile& f : files) strings.push_back(std::make_unique<detail::StringIds>(*f.db));
  // read_activity hands every launch over just before its kernels (one start order), so the
  // aggregator need remember only the launches of a GPU queue's depth, not the export's.
  probes::RecorderOptions recorder_options;
  recorder_options.gpu.max_pending_correlations = std::size_t{1} << 16;
  std::vector<detail::ImportedRank> ranks;
  for (const NsysProcess& p : processes) ranks.push_back({p.rank, p.pid, p.gpu, files[p.file].path});
  detail::record_imported_run(db_path, info, recorder_options, options.step_metrics, ranks,
                              [&](std::size_t i, probes::Recorder& rec) {
                                const NsysProcess& p = processes[i];
                                const NsysFile& f = files[p.file];
                                const std::int64_t shift = std::max<std::int64_t>(f.session_start_unix_ns, 0) - run_base;
                                ProcessImport(f, *strings[p.file], p, shift, rec, options, names, summary).run();
                              },
                              summary);
  if (summary.nccl_without_metadata > 0)
    summary.notes.push_back(std::to_string(summary.nccl_without_metadata) +
                            " NCCL kernels: in kernels (class nccl), but an export carries no collective's op, bytes, "
                            "dtype or group for them, so no comm_ops rows");
  if (summary.lost_records > 0)
    throw ImportError("the import lost " + std::to_string(summary.lost_records) + " records writing " + db_path +
                      " (the run is marked failed)");
  return summary;
}

}  // namespace hs::importer
