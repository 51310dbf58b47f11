// import_check.h — what the importer's tests share: the fixtures' folders, a command's output, and
// kineto_expect.py's numbers (the traces read with Python's json, independently of the importer)
// checked against a run's rows.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../test_db.h"

namespace hs::test {

inline const std::string kData = std::string(HS_SOURCE_DIR) + "/tests/data/kineto_hta/";
inline const std::string kScripts = std::string(HS_SOURCE_DIR) + "/tests/importer/";

inline std::int64_t number(const std::string& db, const std::string& sql) { return std::stoll(query_row(db, sql)); }

// Runs a command, returns its exit status and stdout.
inline int run(const std::string& command, std::string& out) {
  out.clear();
  std::FILE* p = ::popen(command.c_str(), "r");
  if (!p) return -1;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int status = ::pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// kineto_expect.py's numbers for `traces`; nullopt (the caller skips) without a python.
inline std::optional<nlohmann::json> expected(const std::vector<std::string>& traces) {
  std::string cmd = std::string(HS_TEST_PYTHON) + " " + kScripts + "kineto_expect.py";
  for (const auto& t : traces) cmd += " '" + t + "'";
  std::string out;
  if (std::string(HS_TEST_PYTHON).empty() || run(cmd, out) != 0) return std::nullopt;
  return nlohmann::json::parse(out);
}

// Every count and sum kineto_expect.py computes for rank `rank`, against the run's rows.
inline void expect_rank_matches(const std::string& db, std::int64_t run, int rank, const nlohmann::json& e) {
  const std::string where = " WHERE run_id = " + std::to_string(run) + " AND rank = " + std::to_string(rank);
  SCOPED_TRACE("rank " + std::to_string(rank));
  EXPECT_EQ(number(db, "SELECT COUNT(*) FROM ranges" + where), e["ranges"].get<std::int64_t>());
  EXPECT_EQ(number(db, "SELECT COUNT(*) FROM kernels" + where), e["kernels"].get<std::int64_t>());
  EXPECT_EQ(number(db, "SELECT COALESCE(SUM(end_ns - start_ns), 0) FROM kernels" + where), e["kernel_ns"].get<std::int64_t>());
  EXPECT_EQ(number(db, "SELECT COUNT(*) FROM memcpy" + where), e["memcpys"].get<std::int64_t>());
  EXPECT_EQ(number(db, "SELECT COALESCE(SUM(bytes), 0) FROM memcpy" + where), e["memcpy_bytes"].get<std::int64_t>());
  EXPECT_EQ(number(db, "SELECT COUNT(*) FROM memset" + where), e["memsets"].get<std::int64_t>());
  EXPECT_EQ(number(db, "SELECT COALESCE(SUM(bytes), 0) FROM memset" + where), e["memset_bytes"].get<std::int64_t>());
  EXPECT_EQ(number(db, "SELECT COUNT(*) FROM runtime_api" + where), e["runtime"].get<std::int64_t>());
  EXPECT_EQ(number(db, "SELECT COUNT(*) FROM memory_samples" + where), e["memory"].get<std::int64_t>());
  EXPECT_EQ(number(db, "SELECT COUNT(*) FROM kernels k JOIN kernel_classes c ON c.id = k.class_id" + where +
                           " AND c.name = 'nccl'"),
            e["nccl"].get<std::int64_t>());
  EXPECT_EQ(number(db, "SELECT COUNT(*) FROM comm_ops" + where), e["collectives"].get<std::int64_t>());
  EXPECT_EQ(number(db, "SELECT COALESCE(SUM(bytes), 0) FROM comm_ops" + where), e["collective_bytes"].get<std::int64_t>());
  EXPECT_EQ(number(db, "SELECT COALESCE(SUM(end_ns - start_ns), 0) FROM comm_ops" + where),
            e["collective_ns"].get<std::int64_t>());
  // The aggregates count every GPU record once, as the raw tables do.
  EXPECT_EQ(number(db, "SELECT COALESCE(SUM(count), 0) FROM kernel_stats" + where),
            e["kernels"].get<std::int64_t>() + e["memcpys"].get<std::int64_t>() + e["memsets"].get<std::int64_t>());
  for (const auto& [name, count] : e["phase_ranges"].items())
    EXPECT_EQ(number(db, "SELECT COUNT(*) FROM ranges r JOIN strings s ON s.id = r.name_id" + std::string(" WHERE r.run_id = ") +
                             std::to_string(run) + " AND r.rank = " + std::to_string(rank) + " AND s.value = '" + name + "'"),
              count.get<std::int64_t>())
        << name;
}

}  // namespace hs::test
