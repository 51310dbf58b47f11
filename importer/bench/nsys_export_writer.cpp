// nsys_export_writer.cpp — a synthetic Nsight Systems SQLite export for the import benchmark
// (docs/benchmarks.md, "Importing"): the tables and columns the 3.x export schema gives
// (StringIds, NVTX_EVENTS, CUPTI_ACTIVITY_KIND_KERNEL/_MEMCPY/_MEMSET/_RUNTIME, PROCESSES,
// TARGET_INFO_SESSION_START_TIME, ENUM_CUDA_MEM_KIND) shaped like verl ranks under `nsys profile`:
// per process, steps of verl's phases as NVTX push/pop ranges (registered strings), an NVTX range
// per layer of 8 launches inside them, one runtime launch and one kernel per launch (an NCCL
// all-reduce on its own stream every 100th), a copy every 50th and a memset every 200th. Written
// with prepared statements in one transaction. A benchmark input, not a fixture: nothing asserts on it.
#include <sqlite3.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

namespace {

bool exec(sqlite3* db, const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &err) == SQLITE_OK) return true;
  std::fprintf(stderr, "gen-nsys: %s\n", err ? err : "?");
  sqlite3_free(err);
  return false;
}

struct Insert {
  sqlite3_stmt* st = nullptr;
  Insert(sqlite3* db, const char* sql) { sqlite3_prepare_v2(db, sql, -1, &st, nullptr); }
  ~Insert() { sqlite3_finalize(st); }
  void row(std::initializer_list<std::int64_t> values) {
    int i = 1;
    for (std::int64_t v : values) sqlite3_bind_int64(st, i++, v);
    sqlite3_step(st);
    sqlite3_reset(st);
  }
};

}  // namespace

/// Writes `path` with `kernels` kernel rows spread over `processes` processes; returns 0 on success.
int generate_nsys_export(const std::string& path, std::int64_t kernels, int processes) {
  std::filesystem::remove(path);
  sqlite3* db = nullptr;
  if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) return 1;
  exec(db, "PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF;");
  const bool ok = exec(db,
      "CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL);"
      "CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INTEGER, utcTime TEXT, localTime TEXT);"
      "CREATE TABLE PROCESSES (globalPid INTEGER, pid INTEGER, name TEXT);"
      "CREATE TABLE ENUM_CUDA_MEM_KIND (id INTEGER NOT NULL PRIMARY KEY, name TEXT NOT NULL, label TEXT NOT NULL);"
      "INSERT INTO ENUM_CUDA_MEM_KIND VALUES (0, 'CUDA_MEMOPR_MEMORY_KIND_PAGEABLE', 'Pageable'),"
      " (1, 'CUDA_MEMOPR_MEMORY_KIND_PINNED', 'Pinned'), (2, 'CUDA_MEMOPR_MEMORY_KIND_DEVICE', 'Device'),"
      " (7, 'CUDA_MEMOPR_MEMORY_KIND_UNKNOWN', 'Unknown');"
      "CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, rangeId INTEGER,"
      " category INTEGER, color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER, textId INTEGER,"
      " domainId INTEGER, uint64Value INTEGER, int64Value INTEGER, doubleValue REAL, uint32Value INTEGER,"
      " int32Value INTEGER, floatValue REAL, jsonTextId INTEGER, jsonText TEXT);"
      "CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL,"
      " globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL, callchainId INTEGER);"
      "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,"
      " contextId INTEGER NOT NULL, greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER,"
      " globalPid INTEGER, demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL, mangledName INTEGER,"
      " launchType INTEGER, cacheConfig INTEGER, registersPerThread INTEGER NOT NULL, gridX INTEGER NOT NULL,"
      " gridY INTEGER NOT NULL, gridZ INTEGER NOT NULL, blockX INTEGER NOT NULL, blockY INTEGER NOT NULL,"
      " blockZ INTEGER NOT NULL, staticSharedMemory INTEGER NOT NULL, dynamicSharedMemory INTEGER NOT NULL,"
      " localMemoryPerThread INTEGER NOT NULL, localMemoryTotal INTEGER NOT NULL, gridId INTEGER NOT NULL,"
      " sharedMemoryExecuted INTEGER, graphNodeId INTEGER, sharedMemoryLimitConfig INTEGER);"
      "CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,"
      " contextId INTEGER NOT NULL, greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER,"
      " globalPid INTEGER, bytes INTEGER NOT NULL, copyKind INTEGER NOT NULL, deprecatedSrcId INTEGER, srcKind INTEGER,"
      " dstKind INTEGER, srcDeviceId INTEGER, srcContextId INTEGER, dstDeviceId INTEGER, dstContextId INTEGER,"
      " migrationCause INTEGER, graphNodeId INTEGER, virtualAddress INTEGER);"
      "CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,"
      " contextId INTEGER NOT NULL, greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER,"
      " globalPid INTEGER, value INTEGER NOT NULL, bytes INTEGER NOT NULL, graphNodeId INTEGER, memKind INTEGER);"
      "INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (1790000000000000000, '', '');"
      "INSERT INTO StringIds VALUES (1, 'step'), (2, 'gen'), (3, 'old_log_prob'), (4, 'ref'), (5, 'update_actor'),"
      " (6, 'layer'), (7, 'cudaLaunchKernel_v7000'), (8, 'cudaMemcpyAsync_v3020'), (9, 'cudaMemsetAsync_v3020'),"
      " (10, 'sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64'),"
      " (11, 'ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)'),"
      " (12, 'ncclDevKernel_AllReduce_Sum_bf16_RING_LL');"
      "BEGIN;");
  if (!ok) {
    sqlite3_close(db);
    return 1;
  }
  {
    Insert nvtx(db, "INSERT INTO NVTX_EVENTS (start, end, eventType, globalTid, textId, domainId) VALUES (?, ?, 59, ?, ?, 0)");
    Insert runtime(db, "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?, ?, 0, ?, ?, ?, 0, NULL)");
    Insert kernel(db, "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?, ?, ?, 1, NULL, ?, ?, ?, ?, ?, NULL, 1, 0, 168,"
                      " 132, 1, 1, 384, 1, 1, 0, 98304, 0, 0, ?, NULL, NULL, NULL)");
    Insert memcpy(db, "INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY (start, end, deviceId, contextId, streamId, correlationId, "
                      "globalPid, bytes, copyKind, srcKind, dstKind) VALUES (?, ?, ?, 1, 7, ?, ?, 65536, 1, 1, 2)");
    Insert memset(db, "INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET (start, end, deviceId, contextId, streamId, correlationId, "
                      "globalPid, value, bytes, memKind) VALUES (?, ?, ?, 1, 7, ?, ?, 0, 1048576, 2)");
    Insert process(db, "INSERT INTO PROCESSES VALUES (?, ?, NULL)");
    const std::int64_t per_process = kernels / processes;
    for (int p = 0; p < processes; ++p) {
      const std::int64_t pid = 4000 + p;
      const std::int64_t gpid = (std::int64_t{1} << 48) | (pid << 24), gtid = gpid | pid;
      process.row({gpid, pid});
      std::int64_t t = 1000000, correlation = 0, launches = 0;
      while (launches < per_process) {
        const std::int64_t step_start = t;
        for (std::int64_t phase = 2; phase <= 5 && launches < per_process; ++phase) {
          const std::int64_t phase_start = t;
          for (int layer = 0; layer < 500 && launches < per_process; ++layer) {
            const std::int64_t layer_start = t;
            for (int k = 0; k < 8 && launches < per_process; ++k, ++launches) {
              ++correlation;
              const bool nccl = correlation % 100 == 0;
              runtime.row({t + 1, t + 6, gtid, correlation, 7});
              kernel.row({t + 8, t + (nccl ? 48 : 20), p, nccl ? 20 : 7, correlation, gpid, nccl ? 11 : 10,
                          nccl ? 12 : 10, correlation});
              if (correlation % 50 == 0) {
                ++correlation;
                runtime.row({t + 21, t + 24, gtid, correlation, 8});
                memcpy.row({t + 25, t + 28, p, correlation, gpid});
              }
              if (correlation % 200 == 1) {
                ++correlation;
                runtime.row({t + 29, t + 31, gtid, correlation, 9});
                memset.row({t + 32, t + 34, p, correlation, gpid});
              }
              t += 40;
            }
            nvtx.row({layer_start, t, gtid, 6});
          }
          nvtx.row({phase_start - 1, t + 1, gtid, phase});
          t += 10;
        }
        nvtx.row({step_start - 2, t + 2, gtid, 1});
        t += 100;
      }
    }
  }
  const bool committed = exec(db, "COMMIT;");
  sqlite3_close(db);
  return committed ? 0 : 1;
}
