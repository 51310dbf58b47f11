// nsys_import_test.cpp — Nsight Systems SQLite exports into run databases (hs_importer), checked
// against the exports read independently: every count and sum is computed in the test with the SQL
// Nsight Systems' export documentation gives (globalTid unpacking, the correlationId join) on the
// fixture itself, and compared with the imported run's rows. Fixtures: two exports of two Nsight
// Systems versions from hpcgroup/pipit (tests/data/nsys_pipit/, recorded on Perlmutter), and a small
// two-process export written below in Nsight Systems' table layout for what those lack (several
// processes, verl's phase names, steps, NCCL kernels, memsets, start/end ranges).
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "../test_db.h"
#include "hybridscope/importer/nsys_import.h"
#include "hybridscope/importer/phase_map.h"
#include "hybridscope/reports/run_analysis.h"
#include "hybridscope/reports/run_database.h"

namespace {

namespace fs = std::filesystem;
using hs::importer::ImportError;
using hs::test::query_row;
using hs::test::query_rows;
using hs::test::temp_db;

const std::string kData = std::string(HS_SOURCE_DIR) + "/tests/data/nsys_pipit/";
const std::string kSaxpy = kData + "saxpy-mpi-cuda_nsys_perlmutter0.sqlite";
const std::string kClover = kData + "perlmutter-cloverleaf-cuda.sqlite";

std::int64_t number(const std::string& db, const std::string& sql) { return std::stoll(query_row(db, sql)); }

bool has_table(const std::string& db, const std::string& table) {
  return number(db, "SELECT COUNT(*) FROM sqlite_master WHERE name = '" + table + "'") > 0;
}

// |union| of [start, end) intervals, by sorting: HTA's "busy time" of a stream.
std::int64_t union_ns(std::vector<std::pair<std::int64_t, std::int64_t>> v) {
  std::sort(v.begin(), v.end());
  std::int64_t total = 0, cs = 0, ce = -1;
  bool open = false;
  for (const auto& [s, e] : v) {
    if (open && s <= ce) {
      ce = std::max(ce, e);
    } else {
      if (open) total += ce - cs;
      cs = s, ce = e, open = true;
    }
  }
  if (open) total += ce - cs;
  return total;
}

std::vector<std::pair<std::int64_t, std::int64_t>> intervals(const std::string& db, const std::string& sql) {
  std::vector<std::pair<std::int64_t, std::int64_t>> out;
  for (const std::string& row : query_rows(db, sql)) {
    const auto bar = row.find('|');
    out.emplace_back(std::stoll(row.substr(0, bar)), std::stoll(row.substr(bar + 1)));
  }
  return out;
}

// Every count and sum of process `pid`'s rows in `nsys` against rank `rank` of run `run` in `db`.
// `shift` = the run's ns minus the export's (0 for the earliest export of a run).
void expect_process_matches(const std::string& db, std::int64_t run, int rank, const std::string& nsys,
                            std::int64_t pid, std::int64_t shift) {
  SCOPED_TRACE("rank " + std::to_string(rank) + " = pid " + std::to_string(pid) + " of " + nsys);
  const std::string r = " run_id = " + std::to_string(run) + " AND rank = " + std::to_string(rank);
  const std::string proc = "((globalTid >> 24) & 16777215) = " + std::to_string(pid);  // the documented unpacking
  const std::string gproc = "((globalPid >> 24) & 16777215) = " + std::to_string(pid);
  // NVTX ranges per thread: count and summed duration (push/pop 59 and start/end 60 with an end).
  if (has_table(nsys, "NVTX_EVENTS")) {
    EXPECT_EQ(query_rows(db, "SELECT tid, COUNT(*), SUM(end_ns - start_ns) FROM ranges WHERE" + r + " GROUP BY tid ORDER BY tid"),
              query_rows(nsys, "SELECT globalTid & 16777215, COUNT(*), SUM(end - start) FROM NVTX_EVENTS WHERE eventType IN "
                               "(59, 60) AND end IS NOT NULL AND " + proc + " GROUP BY 1 ORDER BY 1"));
  } else {
    EXPECT_EQ(number(db, "SELECT COUNT(*) FROM ranges WHERE" + r), 0);
  }
  // Kernels per device and stream: count, summed duration, first start (on the run's timeline).
  const std::string sh = std::to_string(shift);
  auto per_stream = [&](const std::string& ours, const std::string& theirs) {
    if (!has_table(nsys, theirs)) {
      EXPECT_EQ(number(db, "SELECT COUNT(*) FROM " + ours + " WHERE" + r), 0) << ours;
      return;
    }
    EXPECT_EQ(query_rows(db, "SELECT device, stream, COUNT(*), SUM(end_ns - start_ns), MIN(start_ns) FROM " + ours +
                                 " WHERE" + r + " GROUP BY 1, 2 ORDER BY 1, 2"),
              query_rows(nsys, "SELECT deviceId, streamId, COUNT(*), SUM(end - start), MIN(start) + " + sh + " FROM " +
                                   theirs + " WHERE " + gproc + " GROUP BY 1, 2 ORDER BY 1, 2"))
        << ours;
  };
  per_stream("kernels", "CUPTI_ACTIVITY_KIND_KERNEL");
  per_stream("memcpy", "CUPTI_ACTIVITY_KIND_MEMCPY");
  per_stream("memset", "CUPTI_ACTIVITY_KIND_MEMSET");
  if (has_table(nsys, "CUPTI_ACTIVITY_KIND_MEMCPY")) {
    // bytes per copy kind (nsys' copyKind numbers are CUPTI's: the ids of memcpy_kinds)
    EXPECT_EQ(query_rows(db, "SELECT copy_kind_id, COUNT(*), SUM(bytes) FROM memcpy WHERE" + r + " GROUP BY 1 ORDER BY 1"),
              query_rows(nsys, "SELECT copyKind, COUNT(*), SUM(bytes) FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE " + gproc +
                                   " GROUP BY 1 ORDER BY 1"));
    // memory kinds by their label: nsys numbers them from 0 (Pageable), CUPTI from 1
    if (has_table(nsys, "ENUM_CUDA_MEM_KIND")) {
      EXPECT_EQ(query_rows(db, "SELECT k.label, COUNT(*) FROM memcpy m JOIN memory_kinds k ON k.id = m.src_kind_id WHERE" +
                                   std::string(" m.run_id = ") + std::to_string(run) + " AND m.rank = " +
                                   std::to_string(rank) + " GROUP BY 1 ORDER BY 1"),
                query_rows(nsys, "SELECT e.label, COUNT(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY m JOIN ENUM_CUDA_MEM_KIND e ON "
                                 "e.id = m.srcKind WHERE " + gproc + " GROUP BY 1 ORDER BY 1"));
    }
  }
  // Kernel names: the demangled name and Nsight Systems' short name, as counted there.
  if (has_table(nsys, "CUPTI_ACTIVITY_KIND_KERNEL")) {
    EXPECT_EQ(query_rows(db, "SELECT n.value, s.value, COUNT(*) FROM kernels k JOIN strings n ON n.id = k.name_id JOIN strings s "
                             "ON s.id = k.short_name_id WHERE k.run_id = " + std::to_string(run) + " AND k.rank = " +
                             std::to_string(rank) + " GROUP BY 1, 2 ORDER BY 1, 2"),
              query_rows(nsys, "SELECT d.value, s.value, COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds d ON "
                               "d.id = k.demangledName JOIN StringIds s ON s.id = k.shortName WHERE " + gproc +
                               " GROUP BY 1, 2 ORDER BY 1, 2"));
  }
  // Runtime API calls by name; event class 67 (ENUM_NSYS_EVENT_CLASS: CUDA backtrace) is a second
  // row of a sampled call, not a call.
  if (has_table(nsys, "CUPTI_ACTIVITY_KIND_RUNTIME")) {
    EXPECT_EQ(query_rows(db, "SELECT s.value, COUNT(*), SUM(a.end_ns - a.start_ns) FROM runtime_api a JOIN strings s ON s.id = "
                             "a.name_id WHERE a.run_id = " + std::to_string(run) + " AND a.rank = " + std::to_string(rank) +
                             " GROUP BY 1 ORDER BY 1"),
              query_rows(nsys, "SELECT s.value, COUNT(*), SUM(r.end - r.start) FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN "
                               "StringIds s ON s.id = r.nameId WHERE r.eventClass <> 67 AND " + proc + " GROUP BY 1 ORDER BY 1"));
  }
  // The aggregates: every GPU record once; each stream's busy time the union of its records.
  std::int64_t gpu = 0;
  std::map<std::string, std::vector<std::pair<std::int64_t, std::int64_t>>> streams;
  for (const char* t : {"CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"}) {
    if (!has_table(nsys, t)) continue;
    gpu += number(nsys, std::string("SELECT COUNT(*) FROM ") + t + " WHERE " + gproc);
    for (const std::string& key : query_rows(nsys, std::string("SELECT DISTINCT deviceId || '|' || streamId FROM ") + t)) {
      const auto bar = key.find('|');
      auto v = intervals(nsys, std::string("SELECT start, end FROM ") + t + " WHERE " + gproc + " AND deviceId = " +
                                   key.substr(0, bar) + " AND streamId = " + key.substr(bar + 1));
      streams[key].insert(streams[key].end(), v.begin(), v.end());
    }
  }
  EXPECT_EQ(number(db, "SELECT COALESCE(SUM(count), 0) FROM kernel_stats WHERE" + r), gpu);
  for (const auto& [key, v] : streams) {
    const auto bar = key.find('|');
    EXPECT_EQ(number(db, "SELECT COALESCE(SUM(busy_ns), 0) FROM stream_busy WHERE" + r + " AND device = " + key.substr(0, bar) +
                             " AND stream = " + key.substr(bar + 1)),
              union_ns(v))
        << "stream " << key;
  }
}

// The kernels each NVTX range launched, the export's way: the kernel's runtime call (same
// correlationId), then the innermost push/pop or start/end range of the call's thread open at the
// call's start (the latest-starting one), named `domain:text` outside the default domain.
std::vector<std::string> launches_by_range_in_export(const std::string& nsys, std::int64_t pid) {
  const std::string name = "COALESCE(n.text, (SELECT value FROM StringIds WHERE id = n.textId))";
  return query_rows(
      nsys,
      "SELECT CASE WHEN d.text IS NULL THEN " + name + " ELSE d.text || ':' || " + name + " END AS range_name, COUNT(*) "
      "FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId "
      "AND (r.globalTid >> 24) = (k.globalPid >> 24) AND r.eventClass <> 67 "
      "JOIN NVTX_EVENTS n ON n.rowid = (SELECT n2.rowid FROM NVTX_EVENTS n2 WHERE n2.globalTid = r.globalTid AND n2.eventType "
      "IN (59, 60) AND n2.start <= r.start AND n2.end >= r.start ORDER BY n2.start DESC, n2.end ASC LIMIT 1) "
      "LEFT JOIN NVTX_EVENTS d ON d.eventType = 75 AND d.domainId = n.domainId AND (d.globalTid >> 24) = (n.globalTid >> 24) "
      "WHERE ((k.globalPid >> 24) & 16777215) = " + std::to_string(pid) + " GROUP BY 1 ORDER BY 1");
}

std::vector<std::string> launches_by_range_imported(const std::string& db, std::int64_t run, int rank) {
  return query_rows(db, "SELECT s.value, SUM(k.count) FROM kernel_stats k JOIN correlation_ranges c ON c.run_id = k.run_id AND "
                        "c.rank = k.rank AND c.external_id = k.external_id JOIN strings s ON s.id = c.name_id "
                        "JOIN kernel_classes cl ON cl.id = k.class_id WHERE k.run_id = " + std::to_string(run) +
                        " AND k.rank = " + std::to_string(rank) + " AND k.external_id <> 0 AND cl.name <> 'memory' "
                        "GROUP BY 1 ORDER BY 1");
}

// Runs a command, returns its exit status and output.
int run(const std::string& command, std::string& out) {
  out.clear();
  std::FILE* p = ::popen(command.c_str(), "r");
  if (!p) return -1;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int status = ::pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

bool has_note(const hs::importer::ImportSummary& s, const std::string& text) {
  for (const auto& n : s.notes)
    if (n.find(text) != std::string::npos) return true;
  return false;
}

TEST(NsysImport, AnMpiSaxpyExportMatchesItsTablesReadIndependently) {
  const std::string db = temp_db("importer", "nsys_saxpy.sqlite");
  const auto s = hs::importer::import_nsys({kSaxpy}, db);
  EXPECT_EQ(s.source, "nsys");
  EXPECT_EQ(s.ranks, 1);
  EXPECT_EQ(s.lost_records, 0);
  EXPECT_EQ(query_row(db, "SELECT source || '|' || world_size || '|' || status || '|' || host FROM runs"),
            "nsys|1|completed|nid001608");
  // The rank comes from nsys' MPI trace: the thread named `MPI Rank 0`.
  EXPECT_TRUE(has_note(s, "rank 0 from its NVTX thread name `MPI Rank 0`")) << s.notes.front();
  // The clock: the session's UTC start is the run's offset; ns are kept as the export's.
  EXPECT_EQ(number(db, "SELECT clock_offset_ns FROM runs"), number(kSaxpy, "SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME"));
  EXPECT_EQ(number(db, "SELECT pid FROM ranks"), 1230493);
  expect_process_matches(db, s.run_id, 0, kSaxpy, 1230493, 0);
  // Every push/pop range with an end; MPI's named in their domain (`MPI:MPI_Send`).
  EXPECT_EQ(s.ranges, number(kSaxpy, "SELECT COUNT(*) FROM NVTX_EVENTS WHERE eventType IN (59, 60) AND end IS NOT NULL"));
  EXPECT_EQ(number(db, "SELECT COUNT(*) FROM ranges r JOIN strings n ON n.id = r.name_id WHERE n.value LIKE 'MPI:MPI_%'"),
            number(kSaxpy, "SELECT COUNT(*) FROM NVTX_EVENTS WHERE eventType = 59 AND domainId = 1"));
  // No range of this export lies inside another: depth 0 throughout.
  EXPECT_EQ(number(db, "SELECT MAX(depth) FROM ranges"), 0);
  // Launches attributed to the innermost range of their thread, as the export's own join says.
  const auto expected = launches_by_range_in_export(kSaxpy, 1230493);
  ASSERT_FALSE(expected.empty());
  EXPECT_EQ(launches_by_range_imported(db, s.run_id, 0), expected);
  // No `step` range: everything in step 0, said; the runtime calls' cbid is not in an export: -1.
  EXPECT_TRUE(has_note(s, "no `step` NVTX range"));
  EXPECT_EQ(number(db, "SELECT COUNT(*) FROM runtime_api WHERE cbid <> -1"), 0);
  // The empty MEMSET table is read (no memsets), not reported missing.
  EXPECT_FALSE(has_note(s, "no CUPTI_ACTIVITY_KIND_MEMSET"));
  EXPECT_EQ(s.runtime_calls, 57);  // 95 rows, 38 of them backtraces
  EXPECT_TRUE(has_note(s, "38 runtime rows of event class 67"));
}

TEST(NsysImport, ANewerExportWithoutNvtxSaysWhatIsMissingAndTakesTheRankFromTheEnvironment) {
  const std::string db = temp_db("importer", "nsys_clover.sqlite");
  const auto s = hs::importer::import_nsys({kClover}, db);
  EXPECT_EQ(s.ranks, 1);
  EXPECT_TRUE(has_note(s, "export schema 3.13.2 (Nsight Systems 2024.5.1.113)")) << s.notes.front();
  EXPECT_TRUE(has_note(s, "no NVTX_EVENTS"));
  EXPECT_TRUE(has_note(s, "no CUPTI_ACTIVITY_KIND_MEMSET"));
  // META_DATA_CAPTURE's environment: no RANK, no OMPI_COMM_WORLD_RANK; PMI_RANK="0".
  EXPECT_TRUE(has_note(s, "rank 0 from PMI_RANK=0 in its environment"));
  EXPECT_EQ(s.kernels, 1312);
  EXPECT_EQ(s.memcpys, 279);
  EXPECT_EQ(s.runtime_calls, 3048);
  expect_process_matches(db, s.run_id, 0, kClover, 1701896, 0);
  EXPECT_EQ(number(db, "SELECT COUNT(*) FROM kernel_stats WHERE external_id <> 0"), 0);  // no ranges to attribute to
}

TEST(NsysImport, TwoExportsOfOneRankAreRefusedAndARankMapMakesThemOneRun) {
  const std::string db = temp_db("importer", "nsys_two.sqlite");
  try {
    hs::importer::import_nsys({kSaxpy, kClover}, db);
    FAIL() << "two processes of rank 0 were imported";
  } catch (const ImportError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("are both rank 0"), std::string::npos) << what;
    EXPECT_NE(what.find("--rank-map"), std::string::npos) << what;
  }
  hs::importer::NsysImportOptions options;
  options.rank_map = hs::importer::parse_rank_map("1701896=1,1230493=0");
  const auto s = hs::importer::import_nsys({kSaxpy, kClover}, db, options);
  EXPECT_EQ(s.ranks, 2);
  EXPECT_EQ(query_row(db, "SELECT GROUP_CONCAT(rank || ':' || pid) FROM (SELECT rank, pid FROM ranks ORDER BY rank)"),
            "0:1230493,1:1701896");
  EXPECT_FALSE(fs::exists(db + ".rank1"));
  // One timeline: the earlier session (saxpy, June 2023) is the base; CloverLeaf's ns shifted onto it.
  const std::int64_t base0 = number(kSaxpy, "SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME");
  const std::int64_t base1 = number(kClover, "SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME");
  ASSERT_LT(base0, base1);
  EXPECT_EQ(number(db, "SELECT clock_offset_ns FROM runs"), base0);
  expect_process_matches(db, s.run_id, 0, kSaxpy, 1230493, 0);
  expect_process_matches(db, s.run_id, 1, kClover, 1701896, base1 - base0);
  EXPECT_EQ(number(db, "SELECT start_unix_ns FROM runs"),
            base0 + number(kSaxpy, "SELECT MIN(start) FROM (SELECT start FROM NVTX_EVENTS UNION ALL SELECT start FROM "
                                   "CUPTI_ACTIVITY_KIND_RUNTIME UNION ALL SELECT start FROM CUPTI_ACTIVITY_KIND_KERNEL "
                                   "UNION ALL SELECT start FROM CUPTI_ACTIVITY_KIND_MEMCPY)"));
}

// A two-process export in Nsight Systems' layout (the columns the 2.9/3.x schemas share), as text.
// Process 100 runs two verl steps; process 200 one NCCL kernel. Neither says its rank.
std::string write_small_export() {
  const std::string path = temp_db("importer", "small_nsys.sqlite");
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  // globalTid = (1 << 48) | (pid << 24) | tid, as nsys packs it; globalPid the same with tid 0.
  const std::string p100 = std::to_string((1LL << 48) | (100LL << 24)), p200 = std::to_string((1LL << 48) | (200LL << 24));
  const std::string t100 = std::to_string((1LL << 48) | (100LL << 24) | 101), t200 = std::to_string((1LL << 48) | (200LL << 24) | 201);
  const std::string sql =
      "CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);"
      "INSERT INTO StringIds VALUES (1, 'update_actor'), (2, 'sgemm_kernel(float*)'), (3, 'sgemm_kernel'),"
      " (4, 'ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096>)'), (5, 'ncclDevKernel_AllReduce_Sum_f32_RING_LL'),"
      " (6, 'cudaLaunchKernel_v7000'), (7, 'cudaMemsetAsync_v3020');"
      "CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INTEGER, utcTime TEXT, localTime TEXT);"
      "INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (1700000000000000000, '', '');"
      "CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, rangeId INTEGER,"
      " category INTEGER, color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER, textId INTEGER, domainId INTEGER);"
      // step 1 [1000, 5000]: gen [1100, 2000], update_actor (registered string) [2100, 4900] with
      // `fwd` [2200, 3000] inside; step 2 [6000, 9000]: gen [6100, 8000]; a start/end range
      // `weights` [8100, 8900] (no phase map knows it: an op); one range never ended; a domain
      // NCCL (id 7) with one range inside `weights`; a mark (not a range).
      "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, textId, domainId) VALUES"
      " (10, NULL, 75, 'NCCL', " + t100 + ", NULL, 7),"
      " (1000, 5000, 59, 'step', " + t100 + ", NULL, 0),"
      " (1100, 2000, 59, 'gen', " + t100 + ", NULL, 0),"
      " (2100, 4900, 59, NULL, " + t100 + ", 1, 0),"
      " (2200, 3000, 59, 'fwd', " + t100 + ", NULL, 0),"
      " (6000, 9000, 59, 'step', " + t100 + ", NULL, 0),"
      " (6100, 8000, 59, 'gen', " + t100 + ", NULL, 0),"
      " (8100, 8900, 60, 'weights', " + t100 + ", NULL, 0),"
      " (8200, NULL, 60, 'never ended', " + t100 + ", NULL, 0),"
      " (8300, 8400, 59, 'ncclAllReduce', " + t100 + ", NULL, 7),"
      " (8500, NULL, 34, 'a mark', " + t100 + ", NULL, 0);"
      "CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL,"
      " globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL, callchainId INTEGER);"
      "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES"
      " (1200, 1210, 1, " + t100 + ", 11, 6, 0, NULL),"   // in gen (step 1)
      " (2300, 2310, 1, " + t100 + ", 12, 6, 0, NULL),"   // in fwd, inside update_actor
      " (4000, 4010, 1, " + t100 + ", 13, 7, 0, NULL),"   // in update_actor: a memset
      " (6200, 6210, 1, " + t100 + ", 14, 6, 0, NULL),"   // in gen (step 2)
      " (9500, 9510, 1, " + t200 + ", 1, 6, 0, NULL);"    // process 200, in no range
      "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,"
      " contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,"
      " demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL, mangledName INTEGER, registersPerThread INTEGER NOT NULL,"
      " gridX INTEGER NOT NULL, gridY INTEGER NOT NULL, gridZ INTEGER NOT NULL, blockX INTEGER NOT NULL,"
      " blockY INTEGER NOT NULL, blockZ INTEGER NOT NULL, staticSharedMemory INTEGER NOT NULL,"
      " dynamicSharedMemory INTEGER NOT NULL);"
      "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES"
      " (1300, 1800, 0, 1, 7, 11, " + p100 + ", 2, 3, NULL, 32, 4, 1, 1, 128, 1, 1, 0, 1024),"
      " (2400, 2900, 0, 1, 7, 12, " + p100 + ", 2, 3, NULL, 32, 4, 1, 1, 128, 1, 1, 0, 1024),"
      " (6300, 7000, 0, 1, 7, 14, " + p100 + ", 2, 3, NULL, 32, 4, 1, 1, 128, 1, 1, 0, 1024),"
      " (9600, 9900, 1, 1, 13, 1, " + p200 + ", 4, 5, NULL, 64, 2, 1, 1, 256, 1, 1, 0, 0);"
      "CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,"
      " contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,"
      " value INTEGER NOT NULL, bytes INTEGER NOT NULL, graphNodeId INTEGER, memKind INTEGER);"
      // inside update_actor, after its kernels; memKind 2 is Device in nsys' numbering (3 in CUPTI's)
      "INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET VALUES (4100, 4200, 0, 1, 7, 13, " + p100 + ", 0, 4096, NULL, 2);";
  char* err = nullptr;
  EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err), SQLITE_OK) << (err ? err : "");
  sqlite3_free(err);
  sqlite3_close(db);
  return path;
}

TEST(NsysImport, TwoProcessesWithVerlPhasesStepsAndNcclKernels) {
  const std::string nsys = write_small_export();
  ASSERT_TRUE(hs::importer::is_nsys_export(nsys));
  const std::string db = temp_db("importer", "small_nsys_run.sqlite");
  const auto s = hs::importer::import_nsys({nsys}, db);
  // No rank anywhere: the free ranks in pid order, each said.
  EXPECT_EQ(s.ranks, 2);
  EXPECT_TRUE(has_note(s, "pid 100 of " + nsys + ": no rank in its environment, command line or thread names; imported as rank 0"));
  EXPECT_TRUE(has_note(s, "imported as rank 1"));
  EXPECT_EQ(query_row(db, "SELECT GROUP_CONCAT(rank || ':' || pid || ':' || device) FROM (SELECT * FROM ranks ORDER BY rank)"),
            "0:100:cuda,1:200:cuda");
  // Ranges: the 8 with an end, all rank 0's (the unended one and the mark skipped and counted);
  // phases by verl's names, numbered steps, depth kept, NCCL's domain as `NCCL:` prefix.
  EXPECT_EQ(s.ranges, 8);
  EXPECT_EQ(s.steps, 2);
  EXPECT_EQ(s.phase_ranges, 5);  // step x2, gen x2, update_actor
  EXPECT_TRUE(has_note(s, "1 NVTX ranges have no end"));
  EXPECT_TRUE(has_note(s, "1 NCCL NVTX ranges (domain NCCL)"));
  EXPECT_EQ(query_rows(db, "SELECT n.value, c.name, r.depth, r.step, r.start_ns, r.end_ns FROM ranges r JOIN strings n ON "
                           "n.id = r.name_id JOIN range_categories c ON c.id = r.category_id ORDER BY r.start_ns"),
            (std::vector<std::string>{"step|step|0|1|1000|5000", "gen|phase|1|1|1100|2000", "update_actor|phase|1|1|2100|4900",
                                      "fwd|op|2|1|2200|3000", "step|step|0|2|6000|9000", "gen|phase|1|2|6100|8000",
                                      "weights|op|1|2|8100|8900", "NCCL:ncclAllReduce|op|2|2|8300|8400"}));
  EXPECT_TRUE(has_note(s, "rank 1 (pid 200): no `step` NVTX range"));
  // Kernels and the memset with the range that launched them (the innermost: fwd, not update_actor).
  EXPECT_EQ(launches_by_range_imported(db, s.run_id, 0), (std::vector<std::string>{"fwd|1", "gen|2"}));
  EXPECT_EQ(query_rows(db, "SELECT k.step, s.value, k.count FROM kernel_stats k JOIN correlation_ranges c ON c.run_id = k.run_id "
                           "AND c.rank = k.rank AND c.external_id = k.external_id JOIN strings s ON s.id = c.name_id "
                           "WHERE k.bytes > 0"),
            (std::vector<std::string>{"1|update_actor|1"}));
  EXPECT_EQ(query_row(db, "SELECT k.label || '|' || m.bytes || '|' || m.start_ns FROM memset m JOIN memory_kinds k ON "
                          "k.id = m.memory_kind_id"),
            "Device|4096|4100");
  // The NCCL kernel: class nccl on rank 1; no comm_ops row (no bytes in an export), said.
  EXPECT_EQ(query_row(db, "SELECT k.rank || '|' || c.name || '|' || k.device || '|' || k.stream FROM kernels k JOIN "
                          "kernel_classes c ON c.id = k.class_id WHERE k.end_ns - k.start_ns = 300"),
            "1|nccl|1|13");
  EXPECT_EQ(number(db, "SELECT COUNT(*) FROM comm_ops"), 0);
  EXPECT_EQ(s.nccl_without_metadata, 1);
  EXPECT_TRUE(has_note(s, "1 NCCL kernels: in kernels (class nccl), but an export carries no collective's op, bytes"));
  // The reports read it: verl's phases per step, to the ns of the NVTX ranges.
  const hs::reports::RunDatabase rdb(db);
  const auto analysis = hs::reports::analyze_run(hs::reports::load_run(rdb, s.run_id));
  ASSERT_EQ(analysis.phases.steps.size(), 2u);
  EXPECT_DOUBLE_EQ(analysis.phases.steps[0].phase_s.at("gen"), 900e-9);
  EXPECT_DOUBLE_EQ(analysis.phases.steps[0].phase_s.at("update_actor"), 2800e-9);
  EXPECT_DOUBLE_EQ(analysis.phases.steps[1].phase_s.at("gen"), 1900e-9);
}

// End to end through the CLI: import, then diagnose and report read the run like a recorded one.
TEST(NsysImport, TheCliImportsAnExportThatDiagnoseAndReportRead) {
  const std::string cli = std::string(HS_BINARY_DIR) + "/cli/hybridscope";
  if (!fs::exists(cli)) GTEST_SKIP() << "no hybridscope CLI in this build (HS_BUILD_TRAINER=OFF)";
  const std::string nsys = write_small_export();
  const std::string db = temp_db("importer", "cli_nsys_run.sqlite");
  std::string out;
  ASSERT_EQ(run(cli + " import '" + nsys + "' --db '" + db + "' --name small 2>&1", out), 0) << out;
  EXPECT_NE(out.find("ranges 8 (5 phases, 2 steps), kernels 4, memcpy 0, memset 1, runtime calls 5"), std::string::npos)
      << out;
  EXPECT_NE(out.find("imported as rank 1"), std::string::npos) << out;
  EXPECT_NE(out.find("(source nsys)"), std::string::npos) << out;
  ASSERT_EQ(run(cli + " diagnose '" + db + "' 2>&1", out), 0) << out;
  EXPECT_NE(out.find("run 1 \"small\" — world size 2"), std::string::npos) << out;
  const std::string md = temp_db("importer", "cli_nsys_report.md");
  ASSERT_EQ(run(cli + " report '" + db + "' -o '" + md + "' 2>&1", out), 0) << out;
  std::ifstream in(md);
  const std::string report((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(report.find("update_actor"), std::string::npos) << report;
  EXPECT_NE(report.find("gen"), std::string::npos);
  // Bad input: exit 2 with the fix.
  EXPECT_EQ(run(cli + " import /tmp/run.nsys-rep --db '" + db + "' 2>&1", out), 2);
  EXPECT_NE(out.find("nsys export --type sqlite"), std::string::npos) << out;
  EXPECT_EQ(run(cli + " import '" + nsys + "' --rank-map 100 --db '" + db + "' 2>&1", out), 2);
  EXPECT_NE(out.find("no pid=rank entry"), std::string::npos) << out;
  // --rank-map sets the ranks the export does not say.
  const std::string mapped = temp_db("importer", "cli_nsys_mapped.sqlite");
  ASSERT_EQ(run(cli + " import '" + nsys + "' --rank-map 100=1,200=0 --db '" + mapped + "' 2>&1", out), 0) << out;
  EXPECT_EQ(query_row(mapped, "SELECT GROUP_CONCAT(rank || ':' || pid) FROM (SELECT * FROM ranks ORDER BY rank)"), "0:200,1:100");
}

TEST(NsysImport, RefusesAReportAFileThatIsNoExportAndABadRankMap) {
  try {
    hs::importer::refuse_nsys_report("/data/run.nsys-rep");
    FAIL();
  } catch (const ImportError& e) {
    EXPECT_NE(std::string(e.what()).find("nsys export --type sqlite -o run.sqlite /data/run.nsys-rep"), std::string::npos)
        << e.what();
  }
  // A hybridscope run database is SQLite but no export.
  const std::string own = temp_db("importer", "own_run.sqlite");
  hs::importer::import_nsys({kSaxpy}, own);
  EXPECT_FALSE(hs::importer::is_nsys_export(own));
  EXPECT_THROW(hs::importer::import_nsys({own}, temp_db("importer", "x.sqlite")), ImportError);
  const std::string text = temp_db("importer", "not_sqlite.sqlite");
  std::ofstream(text) << "hello";
  EXPECT_FALSE(hs::importer::is_nsys_export(text));
  EXPECT_FALSE(hs::importer::is_nsys_export(kData + "no_such.sqlite"));
  EXPECT_THROW(hs::importer::parse_rank_map("1234"), ImportError);
  EXPECT_THROW(hs::importer::parse_rank_map("1234=x"), ImportError);
  EXPECT_THROW(hs::importer::parse_rank_map("1=0,1=1"), ImportError);
  EXPECT_EQ(hs::importer::parse_rank_map("7=2"), (std::map<std::int64_t, int>{{7, 2}}));
}

}  // namespace
