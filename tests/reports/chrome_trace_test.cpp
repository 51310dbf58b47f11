// chrome_trace_test.cpp — the exported trace follows the Chrome Trace Event Format's rules and
// carries the recorded times: ts = (start_ns + clock_offset_ns) / 1000 on the UNIX-epoch
// timeline, ranges nest as recorded, every process is named, counters carry numbers.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hybridscope/reports/chrome_trace.h"
#include "hybridscope/reports/run_database.h"
#include "../test_db.h"
#include "recorded_run.h"

using namespace hs::reports;
using hs::reports::testing::record_run;
using hs::reports::testing::temp_dir;
using nlohmann::json;

namespace {

json read_json(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  return json::parse(in);  // throws (and fails the test) when the file is not JSON
}

// The µs value an independent reader computes: integer ns on the epoch timeline, then / 1000.
double epoch_us(std::int64_t ns, std::int64_t offset) { return static_cast<double>(ns + offset) / 1000.0; }

TraceRows rows_of(const std::vector<RangeRow>& ranges, const std::vector<StepMetric>& metrics) {
  TraceRows rows;
  rows.ranges = ranges;
  rows.metrics = metrics;
  return rows;
}

std::vector<json> events_of(const json& trace, const std::string& ph) {
  std::vector<json> out;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == ph) out.push_back(e);
  return out;
}

// Checks the rules every event obeys and the nesting of complete events per thread; returns, for
// each complete event name, the names of the parents it was found inside.
std::multimap<std::string, std::string> check_format_rules(const json& trace) {
  EXPECT_TRUE(trace.is_object());
  EXPECT_EQ(trace["displayTimeUnit"], "ms");
  EXPECT_TRUE(trace["otherData"].is_object());
  EXPECT_TRUE(trace["traceEvents"].is_array());
  std::map<std::pair<int, std::int64_t>, std::vector<json>> by_thread;
  for (const auto& e : trace["traceEvents"]) {
    for (const char* key : {"ph", "ts", "pid", "tid", "name"}) EXPECT_TRUE(e.contains(key)) << key << " in " << e;
    EXPECT_TRUE(e["ts"].is_number()) << e;
    EXPECT_TRUE(e["pid"].is_number_integer()) << e;
    EXPECT_TRUE(e["tid"].is_number_integer()) << e;
    EXPECT_TRUE(e["name"].is_string()) << e;
    if (e["ph"] == "X") {
      EXPECT_TRUE(e["dur"].is_number()) << e;
      EXPECT_GE(e["dur"].get<double>(), 0.0) << e;
      by_thread[{e["pid"].get<int>(), e["tid"].get<std::int64_t>()}].push_back(e);
    } else if (e["ph"] == "C") {
      EXPECT_TRUE(e["args"].is_object() && !e["args"].empty()) << e;
      for (const auto& [k, v] : e["args"].items()) EXPECT_TRUE(v.is_number()) << k << " in " << e;
    } else if (e["ph"] == "s" || e["ph"] == "f") {
      EXPECT_TRUE(e.contains("id") && e["id"].is_number_integer()) << e;
      EXPECT_TRUE(e.contains("cat") && e["cat"].is_string()) << e;
    } else {
      EXPECT_EQ(e["ph"], "M") << e;
    }
  }
  // Nesting: walking a thread's events by start (longer first on ties), an event either starts
  // after the enclosing one ended or ends within it; partial overlap is a broken trace.
  std::multimap<std::string, std::string> parents;
  for (auto& [thread, events] : by_thread) {
    std::stable_sort(events.begin(), events.end(), [](const json& a, const json& b) {
      const double ta = a["ts"], tb = b["ts"], da = a["dur"], db = b["dur"];
      return ta < tb || (ta == tb && da > db);
    });
    std::vector<json> stack;
    for (const auto& e : events) {
      const double ts = e["ts"], end = ts + e["dur"].get<double>();
      while (!stack.empty() && stack.back()["ts"].get<double>() + stack.back()["dur"].get<double>() <= ts)
        stack.pop_back();
      if (!stack.empty()) {
        const double parent_end = stack.back()["ts"].get<double>() + stack.back()["dur"].get<double>();
        EXPECT_LE(end, parent_end) << e << " overlaps " << stack.back();
        parents.emplace(e["name"], stack.back()["name"]);
      } else {
        parents.emplace(e["name"], "");
      }
      stack.push_back(e);
    }
  }
  return parents;
}

}  // namespace

TEST(ChromeTrace, ExportedFileFollowsTheFormatAndTheRecordedTimes) {
  const auto dir = temp_dir("export");
  const auto run = record_run(dir);
  const RunDatabase db(run.path);
  const auto info = db.run(run.run_id);
  const auto out = (dir / "trace.json").string();

  const auto summary = export_chrome_trace(db, run.run_id, out);
  EXPECT_FALSE(std::filesystem::exists(out + ".tmp"));
  const json trace = read_json(out);
  const auto parents = check_format_rules(trace);

  // otherData: the run row.
  EXPECT_EQ(trace["otherData"]["run_id"], run.run_id);
  EXPECT_EQ(trace["otherData"]["name"], run.info.name);
  EXPECT_EQ(trace["otherData"]["status"], "completed");
  EXPECT_EQ(trace["otherData"]["clock_offset_ns"], info.clock_offset_ns);
  EXPECT_EQ(trace["otherData"]["database"], run.path);

  // One complete event per recorded range, at its recorded time on the epoch timeline.
  const auto xs = events_of(trace, "X");
  ASSERT_EQ(xs.size(), run.ranges.size());
  EXPECT_EQ(summary.complete_events, run.ranges.size());
  for (const auto& r : run.ranges) {
    int found = 0;
    for (const auto& e : xs) {
      if (e["name"] != r.name || e["args"]["step"] != r.step) continue;
      ++found;
      EXPECT_EQ(e["ts"].get<double>(), epoch_us(r.start_ns, info.clock_offset_ns)) << e;
      EXPECT_NEAR(e["dur"].get<double>(), (r.end_ns - r.start_ns) / 1000.0, 0.5) << e;  // double resolves 0.25 µs
      EXPECT_EQ(e["ts"].get<double>() + e["dur"].get<double>(), epoch_us(r.end_ns, info.clock_offset_ns)) << e;
      EXPECT_EQ(e["cat"], r.category);
      EXPECT_EQ(e["pid"], r.rank);
      EXPECT_EQ(e["tid"], r.tid);
    }
    EXPECT_EQ(found, 1) << r.name << " step " << r.step;
  }
  // The timeline is the UNIX epoch: the step ranges fall inside the run's wall-clock span.
  for (const auto& e : xs) {
    EXPECT_GT(e["ts"].get<double>(), 1.6e15);  // after 2020 in µs
  }

  // Nesting as recorded: phases and switches inside their step, steps and validation outermost.
  EXPECT_EQ(parents.count("step"), 2u);
  for (const auto& [child, parent] : parents) {
    if (child == "step" || child == "testing")
      EXPECT_EQ(parent, "") << child;
    else
      EXPECT_EQ(parent, "step") << child;
  }

  // Metadata: every pid named "rank N", every thread named.
  std::set<int> pids;
  std::set<std::pair<int, std::int64_t>> threads;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] != "M") {
      pids.insert(e["pid"].get<int>());
      if (e["ph"] == "X") threads.emplace(e["pid"].get<int>(), e["tid"].get<std::int64_t>());
    }
  EXPECT_EQ(pids, std::set<int>{0});
  std::set<int> named;
  std::set<std::pair<int, std::int64_t>> named_threads;
  for (const auto& e : events_of(trace, "M")) {
    if (e["name"] == "process_name") {
      EXPECT_EQ(e["args"]["name"], "rank " + std::to_string(e["pid"].get<int>()));
      named.insert(e["pid"].get<int>());
    }
    if (e["name"] == "thread_name") named_threads.emplace(e["pid"].get<int>(), e["tid"].get<std::int64_t>());
  }
  EXPECT_EQ(named, pids);
  EXPECT_EQ(named_threads, threads);
  EXPECT_EQ(summary.metadata_events, events_of(trace, "M").size());

  // Counters: the default metrics recorded at steps 1 and 2 (4 of the 5 defaults were recorded,
  // perf/cpu_memory_used_gb was not), at the end of that step's "step" range, value as recorded.
  const auto cs = events_of(trace, "C");
  EXPECT_EQ(cs.size(), 8u);
  EXPECT_EQ(summary.counter_events, 8u);
  EXPECT_EQ(summary.skipped_metrics, 0u);  // val/mean@1 at step 0 is not a chosen counter
  EXPECT_EQ(summary.total(), trace["traceEvents"].size());
  for (const auto& m : run.metrics) {
    const bool chosen = std::find(kDefaultTraceCounters.begin(), kDefaultTraceCounters.end(), m.name) !=
                        kDefaultTraceCounters.end();
    int found = 0;
    for (const auto& c : cs) {
      if (c["name"] != m.name) continue;
      const auto step_end = std::find_if(run.ranges.begin(), run.ranges.end(), [&](const RangeRow& r) {
        return r.name == "step" && epoch_us(r.end_ns, info.clock_offset_ns) == c["ts"].get<double>();
      });
      ASSERT_NE(step_end, run.ranges.end()) << c;
      if (step_end->step != m.step) continue;
      ++found;
      EXPECT_EQ(c["args"]["value"].get<double>(), m.value) << c;
    }
    EXPECT_EQ(found, chosen ? 1 : 0) << m.name << " step " << m.step;
  }
}

TEST(ChromeTrace, EveryRankIsAProcessAndCountersFollowRankZero) {
  RunSummary run;
  run.id = 7;
  run.world_size = 2;
  run.clock_offset_ns = 1'700'000'000'000'000'000;
  const std::vector<RangeRow> ranges = {
      {0, 100, 1, "step", "step", 0, 1'000, 9'000, {}, {}},
      {0, 100, 1, "gen", "phase", 1, 1'000, 5'000, {}, {}},
      {1, 200, 1, "step", "step", 0, 1'500, 9'500, {}, {}},
      {1, 200, 1, "gen", "phase", 1, 2'000, 6'000, {}, {}},
      {1, 201, 1, "update_actor", "phase", 0, 6'000, 9'000, {}, {}},
  };
  const std::vector<StepMetric> metrics = {
      {1, "perf/throughput", 100.0},
      {1, "actor/entropy", std::numeric_limits<double>::quiet_NaN()},  // JSON cannot carry it
      {2, "critic/score/mean", 0.5},                                   // step 2 has no step range
      {1, "timing_s/gen", 0.004},                                      // not chosen
  };
  ChromeTraceSummary summary;
  const json trace = build_chrome_trace(run, rows_of(ranges, metrics), {}, &summary);
  const json reparsed = json::parse(trace.dump());  // what a viewer reads
  check_format_rules(reparsed);

  std::map<int, std::string> process_names;
  std::set<std::pair<int, std::int64_t>> thread_names;
  for (const auto& e : events_of(reparsed, "M")) {
    if (e["name"] == "process_name") process_names[e["pid"]] = e["args"]["name"];
    if (e["name"] == "thread_name") thread_names.emplace(e["pid"], e["tid"]);
  }
  EXPECT_EQ(process_names, (std::map<int, std::string>{{0, "rank 0"}, {1, "rank 1"}}));
  EXPECT_EQ(thread_names, (std::set<std::pair<int, std::int64_t>>{{0, 100}, {1, 200}, {1, 201}}));

  const auto cs = events_of(reparsed, "C");
  ASSERT_EQ(cs.size(), 1u);
  EXPECT_EQ(cs[0]["name"], "perf/throughput");
  EXPECT_EQ(cs[0]["pid"], 0);
  EXPECT_EQ(cs[0]["ts"].get<double>(), epoch_us(9'000, run.clock_offset_ns));
  EXPECT_EQ(summary.counter_events, 1u);
  EXPECT_EQ(summary.skipped_metrics, 2u);
  EXPECT_EQ(summary.complete_events, ranges.size());
}

TEST(ChromeTrace, ChosenCountersReplaceTheDefaults) {
  RunSummary run;
  const std::vector<RangeRow> ranges = {{0, 1, 3, "step", "step", 0, 10, 20, {}, {}}};
  const std::vector<StepMetric> metrics = {{3, "perf/throughput", 1.0}, {3, "timing_s/gen", 2.0}};
  ChromeTraceOptions options;
  options.counters = {"timing_s/gen"};
  ChromeTraceSummary summary;
  const json trace = build_chrome_trace(run, rows_of(ranges, metrics), options, &summary);
  const auto cs = events_of(trace, "C");
  ASSERT_EQ(cs.size(), 1u);
  EXPECT_EQ(cs[0]["name"], "timing_s/gen");
  EXPECT_EQ(cs[0]["args"]["value"], 2.0);
}

TEST(ChromeTrace, UnwritableOutputIsAnExportErrorAndUnknownRunADatabaseError) {
  const auto dir = temp_dir("export_errors");
  const auto run = record_run(dir);
  const RunDatabase db(run.path);
  const auto bad = (dir / "no_such_dir" / "trace.json").string();
  try {
    export_chrome_trace(db, run.run_id, bad);
    ADD_FAILURE() << "no ExportError";
  } catch (const ExportError& e) {
    EXPECT_EQ(std::string(e.what()),
              "cannot write " + bad + ": directory " + (dir / "no_such_dir").string() + " does not exist");
  }
  try {
    export_chrome_trace(db, run.run_id + 5, (dir / "t.json").string());
    ADD_FAILURE() << "no RunDatabaseError";
  } catch (const RunDatabaseError& e) {
    EXPECT_EQ(e.kind(), RunDatabaseError::Kind::kUnknownRun);
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "t.json"));
}

namespace {

// What a GPU rank records in one step besides its ranges: two collectives, a switch with its
// components, memory and KV-pool samples, and CUPTI activity (two kernels on two streams, a copy,
// a memset, the launch of the first kernel).
struct GpuRun {
  std::string path;
  std::int64_t run_id = -1;
  std::int64_t tid = 0;
  std::int64_t t0 = 7'000'000'001;
};

GpuRun record_gpu_run() {
  namespace p = hs::probes;
  GpuRun run;
  run.path = hs::test::temp_db("chrome_trace_test", "gpu_run.sqlite");
  run.tid = static_cast<std::int64_t>(::gettid());
  const std::int64_t t0 = run.t0;
  p::Recorder rec(run.path, /*rank=*/1);
  run.run_id = rec.begin_run({"gpu_trace", "cmd", "", 2, "t"});
  rec.record_range({"step", p::Category::kStep, 0, 1, t0, t0 + 1'000'000});
  rec.record_range({"update_actor", p::Category::kPhase, 1, 1, t0 + 100'000, t0 + 900'000});
  rec.record_range({"gen/decode_step", p::Category::kPhase, 2, 1, t0 + 100'000, t0 + 120'000, 8, 513});
  rec.record_comm({"all_reduce", "dp", 2, 4'000'000, "float32", t0 + 200'000, t0 + 300'000, 1});
  rec.record_comm({"all_gather", "tp", 2, 1'000'000, "bfloat16", t0 + 400'000, t0 + 450'000, 1});
  p::SwitchRecord sw;
  sw.step = 1;
  sw.direction = "train_to_rollout";
  sw.start_ns = t0 + 10'000;
  sw.end_ns = t0 + 90'000;
  sw.bytes_sent = 100, sw.bytes_received = 200, sw.bytes_local = 300;
  sw.components = {{"rng_save", 5'000}, {"reshard_weights", 60'000}, {"kv_allocate", 30'000}};  // sum > span
  rec.record_switch(sw);
  p::MemorySample cpu;
  cpu.ts_ns = t0 + 500'000;
  cpu.step = 1;
  cpu.phase = "update_actor";
  cpu.device = -1;
  cpu.allocated_bytes = 123'456'789;  // the tracking allocator's live bytes; reserve unknown (NULL)
  rec.record_memory(cpu);
  p::MemorySample gpu = cpu;
  gpu.device = 0;
  gpu.reserved_bytes = 200'000'000;
  gpu.active_bytes = 150'000'000;
  rec.record_memory(gpu);
  p::KvPoolSample kv;
  kv.ts_ns = t0 + 600'000;
  kv.step = 1;
  kv.phase = "gen";
  kv.num_blocks = 64, kv.blocks_used = 40, kv.shared_blocks = 8;
  rec.record_kv_pool(kv);
  p::GpuActivityBatch batch;
  p::KernelActivity gemm;
  gemm.device = 0, gemm.stream = 7, gemm.correlation_id = 55;
  gemm.start_ns = t0 + 150'000, gemm.end_ns = t0 + 180'000;
  gemm.name = "sgemm_128x64";
  gemm.kernel_class = p::KernelClass::kCompute;
  gemm.grid[0] = 4, gemm.grid[1] = 2, gemm.grid[2] = 1, gemm.block[0] = 256, gemm.block[1] = 1, gemm.block[2] = 1;
  batch.kernels.push_back(gemm);
  p::KernelActivity nccl = gemm;
  nccl.stream = 13, nccl.correlation_id = 56;
  nccl.start_ns = t0 + 210'000, nccl.end_ns = t0 + 290'000;
  nccl.name = "_Z39ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE";
  nccl.short_name = "ncclDevKernel_AllReduce_Sum_f32_RING_LL";
  nccl.kernel_class = p::KernelClass::kNccl;
  batch.kernels.push_back(nccl);
  p::MemcpyActivity copy;
  copy.device = 0, copy.stream = 7, copy.correlation_id = 57;
  copy.start_ns = t0 + 190'000, copy.end_ns = t0 + 195'000, copy.bytes = 65536, copy.copy_kind = 1;
  batch.memcpys.push_back(copy);
  p::MemsetActivity set;
  set.device = 0, set.stream = 7, set.correlation_id = 58;
  set.start_ns = t0 + 196'000, set.end_ns = t0 + 197'000, set.bytes = 4096, set.memory_kind = 3;
  batch.memsets.push_back(set);
  p::RuntimeApiActivity launch;
  launch.tid = run.tid, launch.correlation_id = 55, launch.cbid = 211, launch.name = "cudaLaunchKernel_v7000";
  launch.start_ns = t0 + 120'000, launch.end_ns = t0 + 125'000;
  batch.runtime_api.push_back(launch);
  rec.record_gpu_activity(std::move(batch));
  rec.end_run(hs::probes::RunStatus::kCompleted);
  return run;
}

std::vector<json> named(const std::vector<json>& events, const std::string& name) {
  std::vector<json> out;
  for (const auto& e : events)
    if (e["name"] == name) out.push_back(e);
  return out;
}

}  // namespace

TEST(ChromeTrace, CommSwitchGpuAndMemoryEventsFollowTheFormat) {
  const GpuRun run = record_gpu_run();
  const RunDatabase db(run.path);
  const auto info = db.run(run.run_id);
  const auto out = std::filesystem::path(run.path).parent_path() / "gpu_trace.json";
  const auto summary = export_chrome_trace(db, run.run_id, out.string());
  const json trace = read_json(out.string());
  const auto parents = check_format_rules(trace);
  const auto off = info.clock_offset_ns;
  const std::int64_t t0 = run.t0;
  EXPECT_EQ(summary.total(), trace["traceEvents"].size());

  // Track names: every (pid, tid) that carries an event is named; synthetic tracks by what they show.
  std::map<std::pair<int, std::int64_t>, std::string> track_names;
  for (const auto& e : events_of(trace, "M"))
    if (e["name"] == "thread_name") track_names[{e["pid"].get<int>(), e["tid"].get<std::int64_t>()}] = e["args"]["name"];
  std::map<std::string, std::int64_t> tid_of;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] != "X") continue;
    EXPECT_EQ(e["pid"], 1) << e;  // the rank
    const auto key = std::make_pair(1, e["tid"].get<std::int64_t>());
    ASSERT_TRUE(track_names.count(key)) << e;
    tid_of[e["name"]] = key.second;
  }
  EXPECT_EQ(track_names.at({1, kTrackTidBase}), "comm");
  EXPECT_EQ(track_names.at({1, tid_of.at("all_reduce")}), "comm");
  EXPECT_EQ(track_names.at({1, tid_of.at("switch/train_to_rollout")}), "switches");
  EXPECT_EQ(track_names.at({1, tid_of.at("sgemm_128x64")}), "GPU 0 stream 7");
  EXPECT_EQ(track_names.at({1, tid_of.at("Memcpy Host-to-Device")}), "GPU 0 stream 7");
  EXPECT_EQ(track_names.at({1, tid_of.at("Memset Device")}), "GPU 0 stream 7");
  EXPECT_EQ(track_names.at({1, tid_of.at("ncclDevKernel_AllReduce_Sum_f32_RING_LL")}), "GPU 0 stream 13");
  EXPECT_EQ(tid_of.at("cudaLaunchKernel_v7000"), run.tid);  // the launching thread
  EXPECT_EQ(tid_of.at("update_actor"), run.tid);
  for (const auto& [name, tid] : tid_of) {
    if (tid != run.tid) {
      EXPECT_GE(tid, kTrackTidBase) << name;  // never an OS thread id
    }
  }

  // Comm ops: recorded times, args with the nccl-tests bandwidths.
  const auto xs = events_of(trace, "X");
  // A range's payload is in its args; a range without one has none.
  const auto decode = named(xs, "gen/decode_step");
  ASSERT_EQ(decode.size(), 1u);
  EXPECT_EQ(decode[0]["args"], (json{{"step", 1}, {"batch_size", 8}, {"context_len", 513}}));
  EXPECT_EQ(named(xs, "update_actor").at(0)["args"], (json{{"step", 1}}));
  const auto ar = named(xs, "all_reduce");
  ASSERT_EQ(ar.size(), 1u);
  EXPECT_EQ(ar[0]["cat"], "comm");
  EXPECT_EQ(ar[0]["ts"].get<double>(), epoch_us(t0 + 200'000, off));
  EXPECT_NEAR(ar[0]["dur"].get<double>(), 100.0, 0.5);
  EXPECT_EQ(ar[0]["args"]["op"], "all_reduce");
  EXPECT_EQ(ar[0]["args"]["group"], "dp");
  EXPECT_EQ(ar[0]["args"]["bytes"], 4'000'000);
  EXPECT_EQ(ar[0]["args"]["dtype"], "float32");
  EXPECT_DOUBLE_EQ(ar[0]["args"]["algbw_gbps"].get<double>(), 40.0);  // 4e6 B / 100 µs
  EXPECT_DOUBLE_EQ(ar[0]["args"]["busbw_gbps"].get<double>(), 40.0);  // × 2(n−1)/n = 1 for n = 2
  EXPECT_EQ(summary.comm_events, 2u);

  // Switch components nest in their switch, one after another, clamped to its end.
  EXPECT_EQ(summary.switch_events, 4u);
  for (const char* c : {"rng_save", "reshard_weights", "kv_allocate"}) {
    ASSERT_EQ(parents.count(c), 1u) << c;
    EXPECT_EQ(parents.find(c)->second, "switch/train_to_rollout") << c;
  }
  const auto reshard = named(xs, "reshard_weights");
  EXPECT_EQ(reshard[0]["ts"].get<double>(), epoch_us(t0 + 15'000, off));
  const auto kv_alloc = named(xs, "kv_allocate");
  EXPECT_EQ(kv_alloc[0]["ts"].get<double>(), epoch_us(t0 + 75'000, off));
  EXPECT_EQ(kv_alloc[0]["ts"].get<double>() + kv_alloc[0]["dur"].get<double>(), epoch_us(t0 + 90'000, off));
  EXPECT_EQ(named(xs, "switch/train_to_rollout")[0]["args"]["bytes_local"], 300);

  // GPU work: recorded times on the epoch timeline, correlation ids and shapes in args.
  EXPECT_EQ(summary.gpu_events, 4u);
  const auto gemm = named(xs, "sgemm_128x64");
  ASSERT_EQ(gemm.size(), 1u);
  EXPECT_EQ(gemm[0]["cat"], "kernel");
  EXPECT_EQ(gemm[0]["ts"].get<double>(), epoch_us(t0 + 150'000, off));
  EXPECT_EQ(gemm[0]["ts"].get<double>() + gemm[0]["dur"].get<double>(), epoch_us(t0 + 180'000, off));
  EXPECT_EQ(gemm[0]["args"]["correlation_id"], 55);
  EXPECT_EQ(gemm[0]["args"]["class"], "compute");
  EXPECT_EQ(gemm[0]["args"]["grid"], json::array({4, 2, 1}));
  EXPECT_EQ(named(xs, "ncclDevKernel_AllReduce_Sum_f32_RING_LL")[0]["args"]["class"], "nccl");
  EXPECT_EQ(named(xs, "ncclDevKernel_AllReduce_Sum_f32_RING_LL")[0]["args"]["name"],
            "_Z39ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE");  // the short name shows
  EXPECT_EQ(gemm[0]["args"]["name"], "sgemm_128x64");
  EXPECT_EQ(named(xs, "Memcpy Host-to-Device")[0]["args"]["bytes"], 65536);
  EXPECT_EQ(named(xs, "Memset Device")[0]["args"]["correlation_id"], 58);

  // The launch flows from the API call on its thread to the kernel on its stream.
  const auto starts = events_of(trace, "s");
  const auto finishes = events_of(trace, "f");
  ASSERT_EQ(starts.size(), 1u);
  ASSERT_EQ(finishes.size(), 1u);
  EXPECT_EQ(starts[0]["id"], finishes[0]["id"]);
  EXPECT_EQ(starts[0]["tid"], run.tid);
  EXPECT_EQ(starts[0]["ts"].get<double>(), epoch_us(t0 + 120'000, off));
  EXPECT_EQ(finishes[0]["tid"], tid_of.at("sgemm_128x64"));
  EXPECT_EQ(finishes[0]["ts"].get<double>(), epoch_us(t0 + 150'000, off));
  EXPECT_EQ(finishes[0]["bp"], "e");
  EXPECT_EQ(summary.flow_events, 2u);

  // Memory counters: one series per quantity the device provides, NULL left out.
  const auto cs = events_of(trace, "C");
  std::map<std::string, double> counters;
  for (const auto& c : cs) {
    EXPECT_EQ(c["pid"], 1) << c;
    const auto& args = c["args"];
    counters[c["name"]] = args.begin()->get<double>();
  }
  EXPECT_EQ(counters, (std::map<std::string, double>{{"memory cpu allocated_bytes", 123'456'789},
                                                       {"memory cuda:0 allocated_bytes", 123'456'789},
                                                       {"memory cuda:0 reserved_bytes", 200'000'000},
                                                       {"memory cuda:0 active_bytes", 150'000'000},
                                                       {"kv_pool blocks_used", 40},
                                                       {"kv_pool shared_blocks", 8}}));
  for (const auto& c : cs) {
    const double want = c["name"].get<std::string>().rfind("kv_pool", 0) == 0 ? epoch_us(t0 + 600'000, off)
                                                                              : epoch_us(t0 + 500'000, off);
    EXPECT_EQ(c["ts"].get<double>(), want) << c;
  }
  EXPECT_EQ(summary.memory_counter_events, 6u);
}

// Collectives that overlap in time (fsdp's prefetched gathers, async ops in flight together) go
// to separate comm lanes: Perfetto cannot draw partially overlapping slices on one track. Every
// track nests (check_format_rules), no collective is lost, and a rank gets as many lanes as it
// had collectives in flight at once.
TEST(ChromeTrace, OverlappingCollectivesGetLanesSoEveryTrackNests) {
  RunSummary run;
  run.id = 1;
  run.world_size = 2;
  run.clock_offset_ns = 1'700'000'000'000'000'000;
  TraceRows rows;
  auto op = [](int rank, const char* name, std::int64_t start_us, std::int64_t end_us) {
    CommOpRow c;
    c.rank = rank, c.step = 1, c.op = name, c.group = "dp", c.group_size = 2, c.bytes = 1024, c.dtype = "bf16";
    c.start_ns = start_us * 1000, c.end_ns = end_us * 1000;
    return c;
  };
  // Rank 0: three in flight at once at 60 µs (a, b, c); d starts as a ends (a lane frees up exactly
  // then); e after everything. Rank 1: two disjoint ones.
  rows.comm_ops = {op(0, "a", 0, 100),   op(0, "b", 50, 150),  op(0, "c", 60, 70), op(0, "d", 100, 200),
                   op(0, "e", 300, 400), op(1, "f", 0, 10),    op(1, "g", 20, 30)};
  ChromeTraceSummary summary;
  const json trace = build_chrome_trace(run, rows, {}, &summary);
  check_format_rules(trace);  // fails ("overlaps") when two collectives partially overlap on one track

  std::map<std::pair<int, std::int64_t>, std::string> track_names;
  for (const auto& e : events_of(trace, "M"))
    if (e["name"] == "thread_name") track_names[{e["pid"].get<int>(), e["tid"].get<std::int64_t>()}] = e["args"]["name"];
  std::map<int, std::set<std::int64_t>> lanes_of_rank;
  std::map<std::string, std::int64_t> tid_of;
  for (const auto& e : events_of(trace, "X")) {
    EXPECT_EQ(e["cat"], "comm");
    const int pid = e["pid"].get<int>();
    const auto tid = e["tid"].get<std::int64_t>();
    lanes_of_rank[pid].insert(tid);
    tid_of[e["name"]] = tid;
    ASSERT_TRUE(track_names.count({pid, tid})) << e;
    EXPECT_EQ(track_names.at({pid, tid}).rfind("comm", 0), 0u) << track_names.at({pid, tid});
    EXPECT_GE(tid, kTrackTidBase) << e;
  }
  EXPECT_EQ(summary.comm_events, 7u);
  EXPECT_EQ(lanes_of_rank[0].size(), 3u);  // the most in flight at once
  EXPECT_EQ(lanes_of_rank[1].size(), 1u);  // disjoint collectives stay on the one "comm" track
  EXPECT_EQ(tid_of.at("a"), kTrackTidBase);
  EXPECT_EQ(tid_of.at("d"), tid_of.at("a"));  // reuses a's lane, which is free from 100 µs
  EXPECT_EQ(tid_of.at("e"), kTrackTidBase);
  EXPECT_NE(tid_of.at("b"), tid_of.at("a"));
  EXPECT_NE(tid_of.at("c"), tid_of.at("b"));
  EXPECT_EQ(track_names.at({0, tid_of.at("b")}), "comm 2");
  EXPECT_EQ(track_names.at({0, tid_of.at("c")}), "comm 3");
}
