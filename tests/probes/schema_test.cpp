// schema_test.cpp — the schema is described once (schema.h) and everything follows the
// description: a fresh database has exactly the described tables and columns (PRAGMA
// table_info), the writer fills every described column of every table it writes with the field
// it belongs to, and merge carries every described column of a rank file's rows unchanged. A
// column added to the description but not to the writer (or the other way round) fails here.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "../test_db.h"
#include "hybridscope/probes/clock.h"
#include "hybridscope/probes/merge.h"
#include "hybridscope/probes/rank_files.h"
#include "hybridscope/probes/recorder.h"
#include "hybridscope/probes/schema.h"

namespace hs::probes {
namespace {

using schema::Column;
using schema::Table;
using Row = std::map<std::string, std::string>;  // column -> value as text ("NULL" for NULL)

bool in_composite_key(const Table& t, const char* column) {
  if (!t.primary_key) return false;
  const std::string key = std::string(", ") + t.primary_key + ",";
  return key.find(std::string(" ") + column + ",") != std::string::npos;
}

TEST(Schema, AFreshDatabaseHasExactlyTheDescribedTablesAndColumns) {
  const auto path = hs::test::temp_db("schema_test", "fresh.sqlite");
  { Recorder rec(path); }
  std::set<std::string> described;
  for (const Table* t : schema::kTables) {
    described.insert(t->name);
    std::vector<std::string> expected;
    for (const Column& c : t->columns) {
      const bool pk = c.primary_key() || in_composite_key(*t, c.name);
      expected.push_back(std::string(c.name) + "|" + c.type + "|" + (c.not_null() || (pk && t->without_rowid) ? "1" : "0") +
                         "|" + (c.default_value ? c.default_value : "NULL") + "|" + (pk ? "pk" : "-"));
    }
    EXPECT_EQ(hs::test::query_rows(path, std::string("SELECT name, type, \"notnull\", COALESCE(dflt_value, 'NULL'), "
                                                     "CASE WHEN pk > 0 THEN 'pk' ELSE '-' END FROM pragma_table_info('") +
                                             t->name + "') ORDER BY cid"),
              expected)
        << t->name;
  }
  const auto tables = hs::test::query_rows(
      path, "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name");
  EXPECT_EQ(std::set<std::string>(tables.begin(), tables.end()), described);
  EXPECT_EQ(hs::test::query_row(path, "PRAGMA user_version"), std::to_string(schema::kSchemaVersion));
}

TEST(Schema, InsertStatementsShareRunAndRankAndNumberTheRest) {
  EXPECT_EQ(schema::insert_statement(schema::kRangesTable, schema::OnConflict::kAbort, 2),
            "INSERT INTO ranges(run_id, rank, tid, step, name_id, category_id, depth, start_ns, end_ns, batch_size, "
            "context_len) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11),"
            "(?1, ?2, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20)");
  EXPECT_EQ(schema::insert_statement(schema::kStringsTable, schema::OnConflict::kIgnore),
            "INSERT OR IGNORE INTO strings(value) VALUES(?1)");
  EXPECT_EQ(schema::insert_parameter(schema::kRunsTable, "id"), 1);
  EXPECT_EQ(schema::insert_parameter(schema::kRangesTable, "id"), 0) << "SQLite assigns range ids";
  EXPECT_EQ(schema::insert_parameter(schema::kRangesTable, "end_ns"), 9);
}

// Every column of `t`'s rows matching `where`, by name; a string id reads as its string, so that
// rows of two files compare by what they say.
// The one row of a table that record_one_of_each() gives several: kernel_stats holds one row per
// name (the kernel, the copy and the memset); the kernel's is compared column by column.
std::string one_row(const Table& t) {
  return std::string(t.name) == schema::kKernelStats ? "x.class_id = 2" : "1";
}

std::vector<Row> read_rows(const std::string& path, const Table& t, const std::string& where) {
  std::string select;
  for (const Column& c : t.columns) {
    const std::string value = c.references && std::string(c.references) == schema::kStrings
                                  ? std::string("(SELECT value FROM strings WHERE id = x.") + c.name + ")"
                                  : std::string("x.") + c.name;
    select += (select.empty() ? "" : " || '|' || ") + std::string("COALESCE(CAST(") + value + " AS TEXT), 'NULL')";
  }
  std::vector<Row> out;
  for (const std::string& line : hs::test::query_rows(
           path, "SELECT " + select + " FROM " + t.name + " x " + where + " ORDER BY " + schema::column_list(t, "x"))) {
    Row row;
    std::size_t start = 0;
    for (const Column& c : t.columns) {
      const std::size_t bar = line.find('|', start);
      row[c.name] = line.substr(start, bar == std::string::npos ? std::string::npos : bar - start);
      start = bar == std::string::npos ? line.size() : bar + 1;
    }
    out.push_back(std::move(row));
  }
  return out;
}

// One record of every kind, every field set to a value of its own, recorded as rank `rank`.
void record_one_of_each(const std::string& path, int rank, std::int64_t run_id) {
  Recorder rec(path, rank);
  RunInfo info;
  info.name = "schema";
  info.command_line = "hybridscope train";
  info.config_yaml = "a: 1";
  info.torch_version = "2.11.0";
  info.world_size = 2;
  info.run_id = run_id;
  info.local_rank = rank;
  info.device = "cuda:1";
  info.config = {{"a", "1"}};
  info.clock_sync_offset_ns = -1234;
  info.clock_sync_error_ns = 56;
  info.clock_sync_applied = true;
  info.source = "kineto";
  rec.begin_run(info);
  rec.record_range({"gen", Category::kPhase, 3, 7, 100, 200, 4, 96});
  rec.record_metrics(7, {{"timing_s/gen", 0.5}});
  MemorySample m;
  m.ts_ns = 11;
  m.step = 7;
  m.phase = "after_gen";
  m.device = 1;
  m.allocated_bytes = 400;
  m.reserved_bytes = 1000;
  m.active_bytes = 500;
  m.inactive_split_bytes = 100;
  m.largest_free_block_bytes = 250;
  m.peak_allocated_bytes = 900;
  m.num_allocs = 12;
  m.num_alloc_retries = 2;
  m.num_ooms = 1;
  rec.record_memory(m);
  rec.record_kv_pool({12, 7, "rollout", 64, 16, 10, 3, 4, 150, 140, 4096});
  rec.record_comm({"all_reduce", "dp", 4, 1000, "float32", 1000, 2000, 7, 1100, 1900, 2010});  // asynchronous
  SwitchRecord w;
  w.step = 7;
  w.direction = "train_to_rollout";
  w.start_ns = 300;
  w.end_ns = 400;
  w.bytes_sent = 21;
  w.bytes_received = 22;
  w.bytes_local = 23;
  w.memory_before_bytes = 24;
  w.memory_after_bytes = 25;
  w.peak_memory_bytes = 26;
  w.components = {{"reshard_weights", 60}};
  rec.record_switch(w);
  GpuActivityBatch b;
  KernelActivity k;
  k.device = 1;
  k.context = 2;
  k.stream = 3;
  k.correlation_id = 4;
  k.start_ns = 500;
  k.end_ns = 600;
  k.name = "_Z6kernelv";
  k.short_name = "kernel";
  k.kernel_class = KernelClass::kNccl;
  k.grid[0] = 5, k.grid[1] = 6, k.grid[2] = 7;
  k.block[0] = 8, k.block[1] = 9, k.block[2] = 10;
  k.registers_per_thread = 11;
  k.static_shared_memory = 12;
  k.dynamic_shared_memory = 13;
  b.kernels.push_back(k);
  b.memcpys.push_back({1, 2, 3, 5, 610, 620, 4096, 1, 2, 3});
  b.memsets.push_back({1, 2, 3, 6, 630, 640, 512, 255, 3});
  b.runtime_api.push_back({77, 4, 211, "cudaLaunchKernel_v7000", 490, 495, 0});
  b.external_correlations.push_back({4, 99});
  b.correlation_ranges.push_back({99, 77, 2, 480, "gen"});
  b.overhead.push_back({"cupti_buffer_flush", 700, 710});
  rec.record_gpu_activity(std::move(b));
  rec.record_collector_stats({800, "active", 3, 1, 2, 7, 5, 65536});
  rec.end_run(RunStatus::kCompleted, "done");
  EXPECT_EQ(rec.write_errors(), 0);
}

// What record_one_of_each() writes, column by column, for every table the writer writes.
std::map<std::string, Row> expected_rows(const std::string& run, int rank) {
  const std::string r = std::to_string(rank);
  return {
      {schema::kRanges,
       {{"run_id", run}, {"rank", r}, {"step", "7"}, {"name_id", "gen"}, {"category_id", "2"}, {"depth", "3"},
        {"start_ns", "100"}, {"end_ns", "200"}, {"batch_size", "4"}, {"context_len", "96"}}},
      {schema::kMemorySamples,
       {{"run_id", run}, {"rank", r}, {"step", "7"}, {"ts_ns", "11"}, {"phase_id", "after_gen"}, {"device", "1"},
        {"allocated_bytes", "400"}, {"reserved_bytes", "1000"}, {"active_bytes", "500"},
        {"inactive_split_bytes", "100"}, {"largest_free_block_bytes", "250"}, {"peak_allocated_bytes", "900"},
        {"num_allocs", "12"}, {"num_alloc_retries", "2"}, {"num_ooms", "1"}, {"reserved_slack", "0.6"},
        {"split_fragmentation", "0.1"}, {"external_fragmentation", "0.5"}}},
      {schema::kKvPoolSamples,
       {{"run_id", run}, {"rank", r}, {"ts_ns", "12"}, {"step", "7"}, {"phase_id", "rollout"}, {"num_blocks", "64"},
        {"block_size", "16"}, {"blocks_used", "10"}, {"shared_blocks", "3"}, {"num_sequences", "4"},
        {"tokens_stored", "150"}, {"token_capacity_used", "140"}, {"cache_bytes", "4096"}}},
      {schema::kCommOps,
       {{"run_id", run}, {"rank", r}, {"step", "7"}, {"op_id", "all_reduce"}, {"group_id", "dp"},
        {"group_size", "4"}, {"bytes", "1000"}, {"dtype_id", "float32"}, {"start_ns", "1000"}, {"end_ns", "2000"},
        {"algbw_gbps", "1.0"}, {"busbw_gbps", "1.5"}, {"posted_ns", "1100"}, {"wait_start_ns", "1900"},
        {"wait_end_ns", "2010"}}},
      {schema::kSwitches,
       {{"run_id", run}, {"rank", r}, {"step", "7"}, {"direction_id", "train_to_rollout"}, {"start_ns", "300"},
        {"end_ns", "400"}, {"bytes_sent", "21"}, {"bytes_received", "22"}, {"bytes_local", "23"},
        {"memory_before_bytes", "24"}, {"memory_after_bytes", "25"}, {"peak_memory_bytes", "26"}}},
      {schema::kSwitchComponents, {{"name_id", "reshard_weights"}, {"duration_ns", "60"}}},
      {schema::kKernels,
       {{"run_id", run}, {"rank", r}, {"device", "1"}, {"context", "2"}, {"stream", "3"}, {"correlation_id", "4"},
        {"start_ns", "500"}, {"end_ns", "600"}, {"name_id", "_Z6kernelv"}, {"short_name_id", "kernel"},
        {"class_id", "2"}, {"grid_x", "5"}, {"grid_y", "6"}, {"grid_z", "7"}, {"block_x", "8"}, {"block_y", "9"},
        {"block_z", "10"}, {"registers_per_thread", "11"}, {"static_shared_memory", "12"},
        {"dynamic_shared_memory", "13"}}},
      {schema::kMemcpy,
       {{"run_id", run}, {"rank", r}, {"device", "1"}, {"context", "2"}, {"stream", "3"}, {"correlation_id", "5"},
        {"start_ns", "610"}, {"end_ns", "620"}, {"bytes", "4096"}, {"copy_kind_id", "1"}, {"src_kind_id", "2"},
        {"dst_kind_id", "3"}}},
      {schema::kMemset,
       {{"run_id", run}, {"rank", r}, {"device", "1"}, {"context", "2"}, {"stream", "3"}, {"correlation_id", "6"},
        {"start_ns", "630"}, {"end_ns", "640"}, {"bytes", "512"}, {"value", "255"}, {"memory_kind_id", "3"}}},
      {schema::kRuntimeApi,
       {{"run_id", run}, {"rank", r}, {"tid", "77"}, {"correlation_id", "4"}, {"cbid", "211"},
        {"name_id", "cudaLaunchKernel_v7000"}, {"start_ns", "490"}, {"end_ns", "495"}, {"return_value", "0"}}},
      {schema::kExternalCorrelations, {{"run_id", run}, {"rank", r}, {"correlation_id", "4"}, {"external_id", "99"}}},
      {schema::kCorrelationRanges,
       {{"run_id", run}, {"rank", r}, {"external_id", "99"}, {"tid", "77"}, {"depth", "2"}, {"start_ns", "480"},
        {"name_id", "gen"}}},
      {schema::kCuptiOverhead,
       {{"run_id", run}, {"rank", r}, {"kind_id", "cupti_buffer_flush"}, {"start_ns", "700"}, {"end_ns", "710"}}},
      {schema::kCollectorStats,
       {{"run_id", run}, {"rank", r}, {"ts_ns", "800"}, {"status_id", "active"}, {"buffers_requested", "3"},
        {"buffers_refused", "1"}, {"buffers_completed", "2"}, {"records", "7"}, {"dropped_records", "5"},
        {"peak_buffer_bytes", "65536"}}},
      // The aggregates of the batch (v10): the kernel's row (one per name) and the stream's; step 0:
      // the recorder was told no step. The kernel's call (correlation 4) ran 490..495 in range 99.
      {schema::kKernelStats,
       {{"run_id", run}, {"rank", r}, {"step", "0"}, {"external_id", "99"}, {"name_id", "_Z6kernelv"},
        {"short_name_id", "kernel"}, {"class_id", "2"}, {"count", "1"}, {"total_ns", "100"}, {"min_ns", "100"},
        {"max_ns", "100"}, {"bytes", "0"}, {"launched", "1"}, {"launch_first_ns", "490"}, {"launch_last_ns", "495"}}},
      {schema::kStreamBusy,
       {{"run_id", run}, {"rank", r}, {"step", "0"}, {"device", "1"}, {"stream", "3"}, {"activities", "3"},
        {"busy_ns", "120"}, {"first_start_ns", "500"}, {"last_end_ns", "640"}}},
      {schema::kStepMetrics, {{"run_id", run}, {"step", "7"}, {"name_id", "timing_s/gen"}, {"value", "0.5"}}},
      {schema::kConfig, {{"run_id", run}, {"key", "a"}, {"value", "1"}}},
      {schema::kRanks,
       {{"run_id", run}, {"rank", r}, {"local_rank", r}, {"device", "cuda:1"}, {"status", "completed"},
        {"status_message", "done"}, {"dropped_records", "0"}, {"write_errors", "0"},
        {"clock_sync_offset_ns", "-1234"}, {"clock_sync_error_ns", "56"}, {"clock_sync_applied", "1"},
        {"clock_source", to_string(clock_info().source)}}},
      {schema::kRuns,
       {{"id", run}, {"name", "schema"}, {"command_line", "hybridscope train"}, {"config_yaml", "a: 1"},
        {"world_size", "2"}, {"torch_version", "2.11.0"}, {"status", "completed"}, {"status_message", "done"},
        {"dropped_records", "0"}, {"write_errors", "0"}, {"source", "kineto"}}},
  };
}

// Columns whose value the test cannot know beforehand (ids SQLite assigns, clocks, host, pid):
// they must be filled, whatever they hold.
bool filled_only(const Table& t, const Column& c) {
  static const std::set<std::string> kRunFacts = {"host", "pid", "hybridscope_version", "start_unix_ns",
                                                  "end_unix_ns", "clock_offset_ns", "tsc_hz",
                                                  "clock_calibration_error_ns"};
  return c.auto_id() || (std::string(c.name) == "tid" && std::string(t.name) == schema::kRanges) ||
         std::string(c.name) == "switch_id" || kRunFacts.count(c.name) > 0;
}

bool close_enough(const std::string& actual, const std::string& expected) {
  if (actual == expected) return true;
  try {
    return std::abs(std::stod(actual) - std::stod(expected)) < 1e-9;
  } catch (...) {
    return false;
  }
}

TEST(Schema, TheWriterFillsEveryDescribedColumnWithItsField) {
  const auto path = hs::test::temp_db("schema_test", "writer.sqlite");
  record_one_of_each(path, 0, -1);
  const auto expected = expected_rows("1", 0);
  for (const Table* t : schema::kTables) {
    const auto rows = read_rows(path, *t, "WHERE " + one_row(*t));
    const auto want = expected.find(t->name);
    if (want == expected.end()) continue;  // enum tables and strings: written by RunFile and interning
    ASSERT_EQ(rows.size(), 1u) << t->name;
    for (const Column& c : t->columns) {
      const std::string& actual = rows[0].at(c.name);
      const bool may_be_null = std::string(c.name) == "tsc_hz" && clock_info().source != ClockSource::kTsc;
      if (!may_be_null) {
        EXPECT_NE(actual, "NULL") << t->name << "." << c.name << " is not written";
      }
      if (filled_only(*t, c)) continue;
      const auto value = want->second.find(c.name);
      ASSERT_NE(value, want->second.end()) << t->name << "." << c.name << " is described but this test does not "
                                           << "know what the writer should put there: add it to expected_rows()";
      EXPECT_TRUE(close_enough(actual, value->second))
          << t->name << "." << c.name << ": " << actual << ", expected " << value->second;
    }
  }
}

TEST(Schema, MergeCarriesEveryDescribedColumnOfARankFile) {
  const auto db = hs::test::temp_db("schema_test", "merged.sqlite");
  const std::string rank1 = rank_file_path(db, 1);
  remove_run_file(rank1);
  record_one_of_each(db, 0, -1);
  record_one_of_each(rank1, 1, 1);
  // Rank 1's rows as its own file holds them, every column (ids that merge renumbers aside).
  std::map<std::string, std::vector<Row>> before;
  for (const Table* t : schema::kTables) {
    if (!t->per_rank() && std::string(t->name) != schema::kSwitchComponents) continue;
    before[t->name] = read_rows(rank1, *t, t->per_rank() ? "WHERE x.rank = 1 AND " + one_row(*t) : "");
    EXPECT_EQ(before[t->name].size(), 1u) << t->name;
  }
  const MergeReport report = merge_rank_files(db);
  ASSERT_EQ(report.files_merged, 1) << (report.messages.empty() ? "" : report.messages[0]);
  for (const auto& [table, rows] : before) {
    const Table& t = *schema::find_table(table.c_str());
    const auto merged =
        read_rows(db, t,
                  t.per_rank() ? "WHERE x.rank = 1 AND " + one_row(t)
                               : "WHERE x.switch_id IN (SELECT id FROM switches WHERE rank = 1)");
    ASSERT_EQ(merged.size(), rows.size()) << table;
    for (const Column& c : t.columns) {
      if (c.auto_id() || std::string(c.name) == "switch_id") continue;  // renumbered above the run database's
      EXPECT_EQ(merged[0].at(c.name), rows[0].at(c.name)) << table << "." << c.name;
    }
  }
}

}  // namespace
}  // namespace hs::probes
