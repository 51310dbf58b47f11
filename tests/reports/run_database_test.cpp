// run_database_test.cpp — RunDatabase reads back exactly what the real writer recorded, and
// refuses missing files, non-databases, other schema versions and unknown runs with messages
// that name the file and the version.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "hybridscope/probes/clock.h"
#include "hybridscope/probes/schema.h"
#include "hybridscope/reports/run_database.h"
#include "recorded_run.h"

using namespace hs::reports;
using hs::reports::testing::record_run;
using hs::reports::testing::temp_dir;
using hs::reports::testing::write_sqlite;

namespace {

// Runs `fn`, expects a RunDatabaseError of `kind`, returns its message.
template <typename Fn>
std::string error_of(RunDatabaseError::Kind kind, Fn&& fn) {
  try {
    fn();
  } catch (const RunDatabaseError& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no RunDatabaseError thrown";
  return {};
}

}  // namespace

TEST(RunDatabase, ReadsTheRunRowAsWritten) {
  const auto run = record_run(temp_dir("run_row"));
  const RunDatabase db(run.path);
  EXPECT_EQ(db.schema_version(), hs::probes::schema::kSchemaVersion);

  const auto runs = db.runs();
  ASSERT_EQ(runs.size(), 1u);
  const RunSummary& r = runs[0];
  EXPECT_EQ(r.id, run.run_id);
  EXPECT_EQ(r.name, run.info.name);
  EXPECT_EQ(r.command_line, run.info.command_line);
  EXPECT_EQ(r.world_size, run.info.world_size);
  EXPECT_EQ(r.status, "completed");
  EXPECT_EQ(r.status_message, "");
  EXPECT_FALSE(r.host.empty());
  EXPECT_FALSE(r.hybridscope_version.empty());
  EXPECT_EQ(r.clock_offset_ns, hs::probes::epoch_offset_ns());
  EXPECT_GE(r.start_unix_ns, run.wall_before_ns);
  ASSERT_TRUE(r.end_unix_ns.has_value());
  EXPECT_GE(*r.end_unix_ns, r.start_unix_ns);
  EXPECT_LE(*r.end_unix_ns, run.wall_after_ns);

  EXPECT_EQ(db.run(run.run_id), r);
  EXPECT_EQ(db.last_run(), r);
  EXPECT_EQ(db.config_yaml(run.run_id), run.info.config_yaml);
}

TEST(RunDatabase, ReadsRangesAndMetricsExactly) {
  const auto run = record_run(temp_dir("rows"));
  const RunDatabase db(run.path);
  EXPECT_EQ(db.ranges(run.run_id), run.ranges);
  EXPECT_EQ(db.step_metrics(run.run_id), run.metrics);
  EXPECT_TRUE(db.ranges(run.run_id + 1).empty());
}

TEST(RunDatabase, LastRunIsTheLatestAppended) {
  const auto dir = temp_dir("last_run");
  const auto first = record_run(dir);
  std::int64_t second_id = -1;
  {
    hs::probes::Recorder rec(first.path, 0);
    hs::probes::RunInfo info;
    info.name = "second";
    second_id = rec.begin_run(info);
    rec.end_run(hs::probes::RunStatus::kFailed, "out of memory");
  }
  const RunDatabase db(first.path);
  ASSERT_EQ(db.runs().size(), 2u);
  const auto last = db.last_run();
  EXPECT_EQ(last.id, second_id);
  EXPECT_EQ(last.name, "second");
  EXPECT_EQ(last.status, "failed");
  EXPECT_EQ(last.status_message, "out of memory");
  EXPECT_TRUE(db.ranges(second_id).empty());
  EXPECT_EQ(db.ranges(first.run_id), first.ranges);
}

TEST(RunDatabaseErrors, MissingFileNamesThePath) {
  const auto path = (temp_dir("missing") / "nowhere.sqlite").string();
  const auto msg = error_of(RunDatabaseError::Kind::kMissingFile, [&] { RunDatabase db(path); });
  EXPECT_NE(msg.find("no run database at " + path), std::string::npos) << msg;
  EXPECT_FALSE(std::filesystem::exists(path)) << "opening must not create the file";
}

TEST(RunDatabaseErrors, TextFileIsNotADatabase) {
  const auto path = (temp_dir("not_db") / "notes.sqlite").string();
  {
    std::ofstream out(path);
    for (int i = 0; i < 64; ++i) out << "this is a text file, not an SQLite database\n";
  }
  const auto msg = error_of(RunDatabaseError::Kind::kNotADatabase, [&] { RunDatabase db(path); });
  EXPECT_NE(msg.find(path + " is not an SQLite database"), std::string::npos) << msg;
}

TEST(RunDatabaseErrors, ForeignSqliteFileIsNotARunDatabase) {
  const auto path = (temp_dir("foreign") / "other.sqlite").string();
  write_sqlite(path, "CREATE TABLE t(x INTEGER);");
  const auto msg = error_of(RunDatabaseError::Kind::kNotADatabase, [&] { RunDatabase db(path); });
  EXPECT_NE(msg.find(path + " is an SQLite file but not a hybridscope run database"), std::string::npos) << msg;
}

TEST(RunDatabaseErrors, OtherSchemaVersionNamesBothVersions) {
  const auto path = (temp_dir("version") / "future.sqlite").string();
  const int other = hs::probes::schema::kSchemaVersion + 6;
  write_sqlite(path, "CREATE TABLE runs(id INTEGER); PRAGMA user_version=" + std::to_string(other) + ";");
  const auto msg = error_of(RunDatabaseError::Kind::kSchemaVersion, [&] { RunDatabase db(path); });
  EXPECT_NE(msg.find(path + " has schema version " + std::to_string(other) + ", newer than the " +
                     std::to_string(hs::probes::schema::kSchemaVersion) + " this build reads"),
            std::string::npos)
      << msg;
}

// A file written before schema v6 (no matrix tables) and before v5 (no write_errors columns) is
// read through an upgraded in-memory copy: its runs read back, matrices() is empty, and the file
// itself keeps its version and shape.
TEST(RunDatabase, ReadsOlderSchemaVersionsWithoutChangingTheFile) {
  const auto run = record_run(temp_dir("old_version"));
  write_sqlite(run.path,
               "DROP TABLE matrix_runs; DROP TABLE matrix_cells; DROP TABLE matrix_axes; DROP TABLE matrices; "
               "ALTER TABLE runs DROP COLUMN write_errors; ALTER TABLE ranks DROP COLUMN write_errors; "
               "PRAGMA user_version=4;");
  {
    const RunDatabase db(run.path);
    EXPECT_EQ(db.schema_version(), 4);
    ASSERT_EQ(db.runs().size(), 1u);
    EXPECT_EQ(db.runs()[0].id, run.run_id);
    EXPECT_FALSE(db.ranges(run.run_id).empty());
    EXPECT_TRUE(db.matrices().empty());
  }
  const RunDatabase again(run.path);
  EXPECT_EQ(again.schema_version(), 4) << "a report must not upgrade the file it reads";
}

// A v8 file has no comm_ops wait columns: its collectives read back as synchronous, the rest of
// each row unchanged.
TEST(RunDatabase, ReadsAVersion8FileWithoutCommWaitsAsSynchronous) {
  namespace p = hs::probes;
  const auto path = (temp_dir("v8_comm") / "run.sqlite").string();
  std::int64_t run_id = -1;
  {
    p::Recorder rec(path);
    p::RunInfo info;
    info.name = "v8";
    info.world_size = 2;
    run_id = rec.begin_run(info);
    rec.record_comm({"all_gather", "dp", 2, 4096, "float32", 100, 300, 1, 120, 250, 310});
    rec.end_run(p::RunStatus::kCompleted);
  }
  write_sqlite(path, "ALTER TABLE comm_ops DROP COLUMN posted_ns; ALTER TABLE comm_ops DROP COLUMN wait_start_ns; "
                     "ALTER TABLE comm_ops DROP COLUMN wait_end_ns; PRAGMA user_version=8;");
  const RunDatabase db(path);
  EXPECT_EQ(db.schema_version(), 8);
  const auto comm = db.comm_ops(run_id);
  ASSERT_EQ(comm.size(), 1u);
  EXPECT_EQ(comm[0].op, "all_gather");
  EXPECT_EQ(comm[0].start_ns, 100);
  EXPECT_EQ(comm[0].end_ns, 300);
  EXPECT_FALSE(comm[0].asynchronous());
  EXPECT_FALSE(comm[0].posted_ns.has_value());
  EXPECT_FALSE(comm[0].wait_end_ns.has_value());
}

TEST(RunDatabaseErrors, SchemaOlderThanAnyMigrationIsRefused) {
  const auto path = (temp_dir("ancient") / "ancient.sqlite").string();
  write_sqlite(path, "CREATE TABLE runs(id INTEGER); PRAGMA user_version=-3;");
  const auto msg = error_of(RunDatabaseError::Kind::kSchemaVersion, [&] { RunDatabase db(path); });
  EXPECT_NE(msg.find("older than any this build can upgrade"), std::string::npos) << msg;
}

TEST(RunDatabaseErrors, UnknownRunIdListsTheRunsPresent) {
  const auto run = record_run(temp_dir("unknown_run"));
  const RunDatabase db(run.path);
  const auto msg = error_of(RunDatabaseError::Kind::kUnknownRun, [&] { db.run(run.run_id + 41); });
  EXPECT_EQ(msg, run.path + " has no run " + std::to_string(run.run_id + 41) + " (runs: " +
                     std::to_string(run.run_id) + ")");
  error_of(RunDatabaseError::Kind::kUnknownRun, [&] { db.config_yaml(run.run_id + 41); });
}

TEST(RunDatabaseErrors, EmptyRunDatabaseHasNoLastRun) {
  const auto dir = temp_dir("no_runs");
  const auto path = (dir / "empty.sqlite").string();
  { hs::probes::Recorder rec(path, 0); }  // schema written, no run begun
  const RunDatabase db(path);
  EXPECT_TRUE(db.runs().empty());
  const auto msg = error_of(RunDatabaseError::Kind::kUnknownRun, [&] { db.last_run(); });
  EXPECT_EQ(msg, path + " holds no runs");
}

TEST(RunDatabase, ReadsCommSwitchMemoryAndGpuRowsExactly) {
  namespace p = hs::probes;
  const auto path = (temp_dir("gpu_rows") / "run.sqlite").string();
  std::int64_t run_id = -1;
  {
    p::Recorder rec(path, 3);
    run_id = rec.begin_run({"rows", "cmd", "", 4, "t"});
    rec.record_comm({"all_gather", "tp", 4, 4096, "bfloat16", 500, 500, 2});  // zero duration: NULL bandwidths
    rec.record_comm({"all_reduce", "dp", 4, 8000, "float32", 100, 300, 2});
    rec.record_comm({"reduce_scatter", "dp", 4, 8000, "float32", 600, 900, 2, 620, 850, 905});  // asynchronous
    p::SwitchRecord w;
    w.step = 2;
    w.direction = "rollout_to_train";
    w.start_ns = 50, w.end_ns = 90, w.bytes_sent = 1, w.bytes_received = 2, w.bytes_local = 3;
    w.components = {{"kv_release", 30}, {"rng_restore", 5}};
    rec.record_switch(w);
    p::MemorySample m;
    m.ts_ns = 70, m.step = 2, m.phase = "update_actor", m.device = 1, m.allocated_bytes = 10, m.active_bytes = 9;
    rec.record_memory(m);
    p::KvPoolSample k;
    k.ts_ns = 80, k.step = 2, k.phase = "gen", k.num_blocks = 16, k.blocks_used = 5, k.shared_blocks = 2;
    rec.record_kv_pool(k);
    p::GpuActivityBatch b;
    p::KernelActivity kern;
    kern.device = 1, kern.stream = 9, kern.correlation_id = 4, kern.start_ns = 200, kern.end_ns = 260;
    kern.name = "ncclDevKernel_AllReduce", kern.kernel_class = p::KernelClass::kNccl;
    kern.grid[0] = 2, kern.grid[1] = 3, kern.grid[2] = 4, kern.block[0] = 5, kern.block[1] = 6, kern.block[2] = 7;
    b.kernels.push_back(kern);
    p::MemcpyActivity copy;
    copy.device = 1, copy.stream = 9, copy.correlation_id = 5, copy.start_ns = 150, copy.end_ns = 160;
    copy.bytes = 64, copy.copy_kind = 2;
    b.memcpys.push_back(copy);
    p::MemsetActivity set;
    set.device = 1, set.stream = 9, set.correlation_id = 6, set.start_ns = 170, set.end_ns = 171;
    set.bytes = 32, set.memory_kind = 1;
    b.memsets.push_back(set);
    b.runtime_api.push_back({42, 4, 211, "cudaLaunchKernel_v7000", 190, 195, 0});
    rec.record_gpu_activity(std::move(b));
    rec.end_run(p::RunStatus::kCompleted);
  }
  const RunDatabase db(path);
  const auto comm = db.comm_ops(run_id);
  ASSERT_EQ(comm.size(), 3u);  // by start_ns
  EXPECT_EQ(comm[0].op, "all_reduce");
  EXPECT_FALSE(comm[0].asynchronous());  // no wait recorded: NULL
  EXPECT_FALSE(comm[0].wait_start_ns.has_value());
  EXPECT_EQ(comm[2].op, "reduce_scatter");
  EXPECT_TRUE(comm[2].asynchronous());
  EXPECT_EQ(comm[2].posted_ns, std::optional<std::int64_t>(620));
  EXPECT_EQ(comm[2].wait_start_ns, std::optional<std::int64_t>(850));
  EXPECT_EQ(comm[2].wait_end_ns, std::optional<std::int64_t>(905));
  EXPECT_EQ(comm[0].rank, 3);
  EXPECT_EQ(comm[0].group, "dp");
  EXPECT_EQ(comm[0].bytes, 8000);
  EXPECT_EQ(comm[0].algbw_gbps, std::optional<double>(40.0));  // 8000 B / 200 ns
  EXPECT_EQ(comm[0].busbw_gbps, std::optional<double>(60.0));  // × 2(n−1)/n = 1.5
  EXPECT_EQ(comm[1].dtype, "bfloat16");
  EXPECT_FALSE(comm[1].algbw_gbps.has_value());
  EXPECT_FALSE(comm[1].busbw_gbps.has_value());

  const auto switches = db.switches(run_id);
  ASSERT_EQ(switches.size(), 1u);
  EXPECT_EQ(switches[0].direction, "rollout_to_train");
  EXPECT_EQ(switches[0].bytes_local, 3);
  EXPECT_EQ(switches[0].components,
            (std::vector<std::pair<std::string, std::int64_t>>{{"kv_release", 30}, {"rng_restore", 5}}));

  const auto memory = db.memory_samples(run_id);
  ASSERT_EQ(memory.size(), 1u);
  EXPECT_EQ(memory[0].phase, "update_actor");
  EXPECT_EQ(memory[0].device, 1);
  EXPECT_EQ(memory[0].allocated_bytes, std::optional<std::int64_t>(10));
  EXPECT_FALSE(memory[0].reserved_bytes.has_value());  // -1 recorded = NULL
  EXPECT_EQ(memory[0].active_bytes, std::optional<std::int64_t>(9));
  const auto kv = db.kv_pool_samples(run_id);
  ASSERT_EQ(kv.size(), 1u);
  EXPECT_EQ(kv[0], (KvPoolSampleRow{3, 2, 80, "gen", 16, 5, 2}));

  const auto gpu = db.gpu_activity(run_id);
  ASSERT_EQ(gpu.size(), 3u);  // kernels, then copies, then memsets
  EXPECT_EQ(gpu[0].kind, GpuActivityRow::Kind::kKernel);
  EXPECT_EQ(gpu[0].name, "ncclDevKernel_AllReduce");
  EXPECT_EQ(gpu[0].short_name, "ncclDevKernel_AllReduce");  // none given: the name
  EXPECT_EQ(gpu[0].detail, "nccl");
  EXPECT_EQ(gpu[0].grid[2], 4);
  EXPECT_EQ(gpu[0].block[1], 6);
  EXPECT_EQ(gpu[1].kind, GpuActivityRow::Kind::kMemcpy);
  EXPECT_EQ(gpu[1].name, "Memcpy Device-to-Host");
  EXPECT_EQ(gpu[1].short_name, "Memcpy Device-to-Host");
  EXPECT_EQ(gpu[1].bytes, 64);
  EXPECT_EQ(gpu[2].kind, GpuActivityRow::Kind::kMemset);
  EXPECT_EQ(gpu[2].name, "Memset Pageable");
  EXPECT_EQ(gpu[2].correlation_id, 6);
  const auto api = db.runtime_api(run_id);
  ASSERT_EQ(api.size(), 1u);
  EXPECT_EQ(api[0].tid, 42);
  EXPECT_EQ(api[0].name, "cudaLaunchKernel_v7000");
  EXPECT_EQ(api[0].end_ns, 195);
}
