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
      {"start_unix_ns", run.start_unix_ns},
      {"end_unix_ns", run.end_unix_ns ? json(*run.end_unix_ns) : json(nullptr)},
      {"clock_offset_ns", run.clock_offset_ns},
      {"exporter", "hybridscope export-trace"},
  };
  if (!database_path.empty()) info["database"] = database_path;
  if (schema_version > 0) info["schema_version"] = schema_version;
  return info;
}

}  // namespace

json build_chrome_trace(const RunSummary& run, const std::vector<RangeRow>& ranges,
                        const std::vector<StepMetric>& metrics, const ChromeTraceOptions& options,
                        ChromeTraceSummary* summary, const std::string& database_path, int schema_version) {
  ChromeTraceSummary counts;
  json events = json::array();

  // Metadata first: a name for every process (rank) and thread that carries an event.
  const auto ends = step_ends(ranges);
  std::set<int> pids;
  std::set<std::pair<int, std::int64_t>> threads;
  for (const auto& r : ranges) threads.emplace(r.rank, r.tid);
  for (const auto& [rank, tid] : threads) pids.insert(rank);
  const std::unordered_set<std::string> chosen(options.counters.begin(), options.counters.end());
  for (const auto& m : metrics)
    if (chosen.count(m.name)) {
      const auto it = ends.find(m.step);
      if (it != ends.end()) pids.insert(it->second.rank);
    }
  for (int pid : pids) {
    events.push_back(metadata_event("process_name", pid, 0, {{"name", "rank " + std::to_string(pid)}}));
    events.push_back(metadata_event("process_sort_index", pid, 0, {{"sort_index", pid}}));
    counts.metadata_events += 2;
  }
  for (const auto& [rank, tid] : threads) {
    events.push_back(metadata_event("thread_name", rank, tid, {{"name", "thread " + std::to_string(tid)}}));
    ++counts.metadata_events;
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
    const double ts = trace_timestamp_us(r->start_ns, run.clock_offset_ns);
    const double end = trace_timestamp_us(r->end_ns, run.clock_offset_ns);
    // dur = end − ts, both rounded the same way, so ts + dur lands exactly on the rounded end and
    // a child never pokes out of its parent (Sterbenz: the subtraction of close doubles is exact).
    events.push_back({{"ph", "X"},
                      {"name", r->name},
                      {"cat", r->category},
                      {"ts", ts},
                      {"dur", std::max(0.0, end - ts)},
                      {"pid", r->rank},
                      {"tid", r->tid},
                      {"args", {{"step", r->step}}}});
    ++counts.complete_events;
  }

  // Counters: one track per chosen metric, a sample at the end of each step.
  for (const auto& m : metrics) {
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
  const json trace = build_chrome_trace(run, db.ranges(run_id), db.step_metrics(run_id), options, &summary, db.path(),
                                        db.schema_version());

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
