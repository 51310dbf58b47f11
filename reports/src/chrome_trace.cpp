// chrome_trace.cpp — Chrome Trace Event Format export of one run.
// Format reference: "Trace Event Format" (Google, the document chrome://tracing and Perfetto's
// JSON importer follow): X = complete event, M = metadata, C = counter; ts and dur in µs.
#include "hybridscope/reports/chrome_trace.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <tuple>
#include <unordered_set>
#include <utility>

namespace hs::reports {

using nlohmann::json;

double trace_timestamp_us(std::int64_t monotonic_ns, std::int64_t clock_offset_ns) {
  // Integer addition first (exact), then one rounding to double. At today's epoch (~1.8e15 µs)
  // a double resolves 0.25 µs, below the timer's useful precision for phase ranges.
  return static_cast<double>(monotonic_ns + clock_offset_ns) / 1000.0;
}

namespace {

json metadata_event(const char* what, int pid, std::int64_t tid, json args) {
  return {{"ph", "M"}, {"name", what}, {"ts", 0}, {"pid", pid}, {"tid", tid}, {"args", std::move(args)}};
}

// Where a step's counters go: the end of its "step" range on the lowest rank that recorded one
// (rank 0 in a healthy run; metrics are reduced across ranks before they are recorded).
struct StepEnd {
  int rank;
  std::int64_t tid;
  std::int64_t end_ns;
};

std::map<std::int64_t, StepEnd> step_ends(const std::vector<RangeRow>& ranges) {
  std::map<std::int64_t, StepEnd> out;
  for (const auto& r : ranges) {
    if (r.name != "step") continue;
    auto it = out.find(r.step);
    if (it == out.end() || r.rank < it->second.rank ||
        (r.rank == it->second.rank && r.end_ns > it->second.end_ns))
      out[r.step] = {r.rank, r.tid, r.end_ns};
  }
  return out;
}

json run_info(const RunSummary& run, const std::string& database_path, int schema_version) {
  json info = {
      {"run_id", run.id},
      {"name", run.name},
      {"status", run.status},
      {"status_message", run.status_message},
      {"host", run.host},
      {"command_line", run.command_line},
      {"hybridscope_version", run.hybridscope_version},
      {"world_size", run.world_size},
      {"source", run.source},  // "hybridscope", or the importer's ("kineto"): docs/importing.md
      {"start_unix_ns", run.start_unix_ns},
      {"end_unix_ns", run.end_unix_ns ? json(*run.end_unix_ns) : json(nullptr)},
      {"clock_offset_ns", run.clock_offset_ns},
      {"exporter", "hybridscope export-trace"},
  };
  if (!database_path.empty()) info["database"] = database_path;
  if (schema_version > 0) info["schema_version"] = schema_version;
  return info;
}

// The synthetic tracks of one rank: comm (lane 0), switches, one per GPU (device, stream) in
// order, then the comm track's further lanes.
struct RankTracks {
  std::map<std::pair<int, std::int64_t>, std::int64_t> gpu;  // (device, stream) -> tid
};
constexpr std::int64_t kCommTid = kTrackTidBase;
constexpr std::int64_t kSwitchTid = kTrackTidBase + 1;
constexpr std::int64_t kFirstGpuTid = kTrackTidBase + 16;
constexpr std::int64_t kFirstExtraCommLaneTid = kTrackTidBase + 4096;  // lane k ≥ 1 at + k − 1

std::int64_t comm_lane_tid(std::size_t lane) {
  return lane == 0 ? kCommTid : kFirstExtraCommLaneTid + static_cast<std::int64_t>(lane) - 1;
}

// Perfetto (and chrome://tracing) draw the X events of one track as a stack: they must nest or be
// disjoint. Collectives overlap freely (fsdp's prefetched all-gathers run under the previous
// layer's reduce-scatter; async ops stay in flight while the next is posted), so each rank's
// collectives are partitioned into lanes by greedy interval partitioning: in start order, each
// goes to the lowest lane whose last collective has ended (Kleinberg–Tardos §4.1: the number of
// lanes equals the largest number of collectives in flight at once, the fewest possible). Returns
// the lane of each comm op, by index into `ops`.
std::vector<std::size_t> comm_lanes(const std::vector<CommOpRow>& ops) {
  std::vector<std::size_t> order(ops.size());
  for (std::size_t i = 0; i < ops.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&ops](std::size_t a, std::size_t b) {
    return std::make_pair(ops[a].rank, ops[a].start_ns) < std::make_pair(ops[b].rank, ops[b].start_ns);
  });
  std::vector<std::size_t> lane(ops.size(), 0);
  std::map<int, std::vector<std::int64_t>> lane_ends;  // rank -> end of each lane's last collective
  for (std::size_t i : order) {
    auto& ends = lane_ends[ops[i].rank];
    const std::int64_t end = std::max(ops[i].start_ns, ops[i].end_ns);
    std::size_t l = 0;
    while (l < ends.size() && ends[l] > ops[i].start_ns) ++l;
    if (l == ends.size()) ends.push_back(end);
    else ends[l] = end;
    lane[i] = l;
  }
  return lane;
}

const char* gpu_category(GpuActivityRow::Kind kind) {
  switch (kind) {
    case GpuActivityRow::Kind::kKernel: return "kernel";
    case GpuActivityRow::Kind::kMemcpy: return "memcpy";
    case GpuActivityRow::Kind::kMemset: return "memset";
  }
  return "gpu";
}

}  // namespace

TraceRows read_trace_rows(const RunDatabase& db, std::int64_t run_id) {
  TraceRows rows;
  static_cast<RunRecords&>(rows) = read_run_records(db, run_id);
  rows.runtime_api = db.runtime_api(run_id);
  return rows;
}

json build_chrome_trace(const RunSummary& run, const TraceRows& rows, const ChromeTraceOptions& options,
                        ChromeTraceSummary* summary, const std::string& database_path, int schema_version) {
  ChromeTraceSummary counts;
  json events = json::array();
  const std::int64_t offset = run.clock_offset_ns;
  // ts and dur of [start_ns, end_ns]: dur = end − ts, both rounded the same way, so ts + dur lands
  // exactly on the rounded end and a child never pokes out of its parent (Sterbenz: the
  // subtraction of close doubles is exact).
  auto span = [offset](json& e, std::int64_t start_ns, std::int64_t end_ns) {
    const double ts = trace_timestamp_us(start_ns, offset);
    const double end = trace_timestamp_us(std::max(start_ns, end_ns), offset);
    e["ts"] = ts;
    e["dur"] = std::max(0.0, end - ts);
  };

  // Metadata first: a name for every process (rank) and track that carries an event.
  const auto& ranges = rows.ranges;
  const auto ends = step_ends(ranges);
  std::set<int> pids;
  std::set<std::pair<int, std::int64_t>> threads;
  std::map<std::pair<int, std::int64_t>, std::pair<std::string, std::int64_t>> tracks;  // -> (name, sort index)
  std::map<int, RankTracks> rank_tracks;
  for (const auto& r : ranges) threads.emplace(r.rank, r.tid);
  for (const auto& a : rows.runtime_api) threads.emplace(a.rank, a.tid);
  for (const auto& [rank, tid] : threads) pids.insert(rank);
  const std::unordered_set<std::string> chosen(options.counters.begin(), options.counters.end());
  for (const auto& m : rows.metrics)
    if (chosen.count(m.name)) {
      const auto it = ends.find(m.step);
      if (it != ends.end()) pids.insert(it->second.rank);
    }
  const std::vector<std::size_t> lanes = comm_lanes(rows.comm_ops);
  for (std::size_t i = 0; i < rows.comm_ops.size(); ++i) {
    const std::size_t lane = lanes[i];
    // Sort indices: comm lanes 1.., switches after them, GPU streams from 16 + 4096.
    tracks[{rows.comm_ops[i].rank, comm_lane_tid(lane)}] = {
        lane == 0 ? std::string("comm") : "comm " + std::to_string(lane + 1), 1 + static_cast<std::int64_t>(lane)};
  }
  for (const auto& w : rows.switches) tracks[{w.rank, kSwitchTid}] = {"switches", 4096};
  for (const auto& g : rows.gpu) rank_tracks[g.rank].gpu.emplace(std::make_pair(g.device, g.stream), 0);
  for (auto& [rank, rt] : rank_tracks) {
    std::int64_t next = kFirstGpuTid;
    for (auto& [device_stream, tid] : rt.gpu) {
      tid = next++;
      tracks[{rank, tid}] = {"GPU " + std::to_string(device_stream.first) + " stream " +
                                 std::to_string(device_stream.second),
                             4096 + 16 + (tid - kFirstGpuTid)};
    }
  }
  for (const auto& [track, name] : tracks) pids.insert(track.first);
  for (const auto& m : rows.memory) pids.insert(m.rank);
  for (const auto& k : rows.kv_pool) pids.insert(k.rank);
  for (int pid : pids) {
    events.push_back(metadata_event("process_name", pid, 0, {{"name", "rank " + std::to_string(pid)}}));
    events.push_back(metadata_event("process_sort_index", pid, 0, {{"sort_index", pid}}));
    counts.metadata_events += 2;
  }
  for (const auto& [rank, tid] : threads) {
    events.push_back(metadata_event("thread_name", rank, tid, {{"name", "thread " + std::to_string(tid)}}));
    ++counts.metadata_events;
  }
  for (const auto& [track, name_sort] : tracks) {
    events.push_back(metadata_event("thread_name", track.first, track.second, {{"name", name_sort.first}}));
    // Synthetic tracks below the CPU threads (Perfetto orders threads by sort index, then tid).
    events.push_back(
        metadata_event("thread_sort_index", track.first, track.second, {{"sort_index", 1'000'000 + name_sort.second}}));
    counts.metadata_events += 2;
  }

  // Complete events, in time order with parents before children that start at the same instant,
  // the order trace viewers expect for nesting on one thread.
  std::vector<const RangeRow*> order;
  order.reserve(ranges.size());
  for (const auto& r : ranges) order.push_back(&r);
  std::stable_sort(order.begin(), order.end(), [](const RangeRow* a, const RangeRow* b) {
    return std::make_tuple(a->start_ns, -a->end_ns, a->depth) < std::make_tuple(b->start_ns, -b->end_ns, b->depth);
  });
  for (const RangeRow* r : order) {
    json args = {{"step", r->step}};
    if (r->batch_size) args["batch_size"] = *r->batch_size;  // the range's payload (decode steps, micro-batches)
    if (r->context_len) args["context_len"] = *r->context_len;
    json e = {{"ph", "X"}, {"name", r->name}, {"cat", r->category}, {"pid", r->rank}, {"tid", r->tid},
              {"args", std::move(args)}};
    span(e, r->start_ns, r->end_ns);
    events.push_back(std::move(e));
    ++counts.complete_events;
  }

  // Collectives on the rank's comm lanes.
  for (std::size_t i = 0; i < rows.comm_ops.size(); ++i) {
    const CommOpRow& c = rows.comm_ops[i];
    json args = {{"op", c.op},       {"group", c.group}, {"group_size", c.group_size},
                 {"bytes", c.bytes}, {"dtype", c.dtype}, {"step", c.step}};
    if (c.algbw_gbps && std::isfinite(*c.algbw_gbps)) args["algbw_gbps"] = *c.algbw_gbps;
    if (c.busbw_gbps && std::isfinite(*c.busbw_gbps)) args["busbw_gbps"] = *c.busbw_gbps;
    json e = {{"ph", "X"}, {"name", c.op}, {"cat", "comm"}, {"pid", c.rank}, {"tid", comm_lane_tid(lanes[i])},
              {"args", std::move(args)}};
    span(e, c.start_ns, c.end_ns);
    events.push_back(std::move(e));
    ++counts.comm_events;
  }

  // Switches with their components, which run one after another from the switch's start
  // (clamped to its end so that they nest).
  for (const auto& w : rows.switches) {
    json e = {{"ph", "X"},
              {"name", "switch/" + w.direction},
              {"cat", "switch"},
              {"pid", w.rank},
              {"tid", kSwitchTid},
              {"args",
               {{"step", w.step}, {"bytes_sent", w.bytes_sent}, {"bytes_received", w.bytes_received},
                {"bytes_local", w.bytes_local}}}};
    span(e, w.start_ns, w.end_ns);
    events.push_back(std::move(e));
    ++counts.switch_events;
    std::int64_t at = w.start_ns;
    for (const auto& [name, duration_ns] : w.components) {
      const std::int64_t begin = std::min(at, w.end_ns);
      const std::int64_t end = std::min(begin + std::max<std::int64_t>(0, duration_ns), w.end_ns);
      json c = {{"ph", "X"}, {"name", name}, {"cat", "switch_component"}, {"pid", w.rank}, {"tid", kSwitchTid},
                {"args", {{"step", w.step}, {"duration_ns", duration_ns}}}};
      span(c, begin, end);
      events.push_back(std::move(c));
      ++counts.switch_events;
      at = end;
    }
  }

  // GPU work on one track per (device, stream); launches on their CPU thread, linked by flows.
  std::map<std::pair<int, std::int64_t>, const GpuActivityRow*> gpu_by_correlation;
  for (const auto& g : rows.gpu) {
    const std::int64_t tid = rank_tracks[g.rank].gpu.at({g.device, g.stream});
    json args = {{"correlation_id", g.correlation_id}, {"device", g.device}, {"stream", g.stream}};
    if (g.kind == GpuActivityRow::Kind::kKernel) {
      args["class"] = g.detail;
      args["name"] = g.name;  // the event shows the short name
      args["grid"] = {g.grid[0], g.grid[1], g.grid[2]};
      args["block"] = {g.block[0], g.block[1], g.block[2]};
    } else {
      args["kind"] = g.detail;
      args["bytes"] = g.bytes;
    }
    json e = {{"ph", "X"}, {"name", g.short_name}, {"cat", gpu_category(g.kind)}, {"pid", g.rank}, {"tid", tid},
              {"args", std::move(args)}};
    span(e, g.start_ns, g.end_ns);
    events.push_back(std::move(e));
    ++counts.gpu_events;
    gpu_by_correlation.emplace(std::make_pair(g.rank, g.correlation_id), &g);
  }
  for (const auto& a : rows.runtime_api) {
    json e = {{"ph", "X"}, {"name", a.name}, {"cat", "cuda_api"}, {"pid", a.rank}, {"tid", a.tid},
              {"args", {{"correlation_id", a.correlation_id}}}};
    span(e, a.start_ns, a.end_ns);
    events.push_back(std::move(e));
    ++counts.api_events;
    const auto it = gpu_by_correlation.find({a.rank, a.correlation_id});
    if (it == gpu_by_correlation.end()) continue;
    const GpuActivityRow& g = *it->second;
    // One id per (rank, correlation id): CUPTI's ids restart in every process.
    const std::int64_t id = (static_cast<std::int64_t>(a.rank) << 32) | (a.correlation_id & 0xffffffff);
    events.push_back({{"ph", "s"}, {"name", "launch"}, {"cat", "cuda_launch"}, {"id", id}, {"pid", a.rank},
                      {"tid", a.tid}, {"ts", trace_timestamp_us(a.start_ns, offset)}});
    events.push_back({{"ph", "f"}, {"bp", "e"}, {"name", "launch"}, {"cat", "cuda_launch"}, {"id", id},
                      {"pid", g.rank}, {"tid", rank_tracks[g.rank].gpu.at({g.device, g.stream})},
                      {"ts", trace_timestamp_us(g.start_ns, offset)}});
    counts.flow_events += 2;
  }

  // Memory counters: one series per (device, quantity); NULL (not provided) is left out.
  for (const auto& m : rows.memory) {
    const std::string device = m.device < 0 ? "cpu" : "cuda:" + std::to_string(m.device);
    for (const auto& [quantity, value] : {std::make_pair("allocated_bytes", m.allocated_bytes),
                                          std::make_pair("reserved_bytes", m.reserved_bytes),
                                          std::make_pair("active_bytes", m.active_bytes)}) {
      if (!value) continue;
      events.push_back({{"ph", "C"}, {"name", "memory " + device + " " + quantity}, {"pid", m.rank}, {"tid", 0},
                        {"ts", trace_timestamp_us(m.ts_ns, offset)}, {"args", {{"bytes", *value}}}});
      ++counts.memory_counter_events;
    }
  }
  for (const auto& k : rows.kv_pool) {
    for (const auto& [quantity, value] :
         {std::make_pair("blocks_used", k.blocks_used), std::make_pair("shared_blocks", k.shared_blocks)}) {
      events.push_back({{"ph", "C"}, {"name", std::string("kv_pool ") + quantity}, {"pid", k.rank}, {"tid", 0},
                        {"ts", trace_timestamp_us(k.ts_ns, offset)}, {"args", {{"blocks", value}}}});
      ++counts.memory_counter_events;
    }
  }

  // Counters: one track per chosen metric, a sample at the end of each step.
  for (const auto& m : rows.metrics) {
    if (!chosen.count(m.name)) continue;
    const auto it = ends.find(m.step);
    if (it == ends.end() || !std::isfinite(m.value)) {  // JSON has no NaN/inf; no step range, no time
      ++counts.skipped_metrics;
      continue;
    }
    events.push_back({{"ph", "C"},
                      {"name", m.name},
                      {"ts", trace_timestamp_us(it->second.end_ns, run.clock_offset_ns)},
                      {"pid", it->second.rank},
                      {"tid", it->second.tid},
                      {"args", {{"value", m.value}}}});
    ++counts.counter_events;
  }

  if (summary) *summary = counts;
  return {{"traceEvents", std::move(events)},
          {"displayTimeUnit", "ms"},
          {"otherData", run_info(run, database_path, schema_version)}};
}

ChromeTraceSummary export_chrome_trace(const RunDatabase& db, std::int64_t run_id, const std::string& out_path,
                                       const ChromeTraceOptions& options) {
  const RunSummary run = db.run(run_id);
  ChromeTraceSummary summary;
  const json trace =
      build_chrome_trace(run, read_trace_rows(db, run_id), options, &summary, db.path(), db.schema_version());

  namespace fs = std::filesystem;
  const fs::path target(out_path);
  std::error_code ec;
  if (target.has_parent_path() && !fs::is_directory(target.parent_path(), ec))
    throw ExportError("cannot write " + out_path + ": directory " + target.parent_path().string() + " does not exist");
  const fs::path tmp = target.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw ExportError("cannot write " + tmp.string() + ": check the path and its permissions");
    out << trace.dump() << '\n';
    out.close();
    if (!out) {
      fs::remove(tmp, ec);
      throw ExportError("writing " + tmp.string() + " failed (disk full?)");
    }
  }
  fs::rename(tmp, target, ec);
  if (ec) {
    const std::string why = ec.message();
    fs::remove(tmp, ec);
    throw ExportError("cannot move the trace into place at " + out_path + ": " + why);
  }
  return summary;
}

}  // namespace hs::reports
