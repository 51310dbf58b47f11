// comm_test.cpp — the communication probe's arithmetic (nccl-tests' bus-bandwidth factors,
// profiling-facts.md) and the comm_ops rows the recorder writes with it.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "../test_db.h"
#include "hybridscope/probes/recorder.h"
#include "hybridscope/probes/schema.h"

namespace fs = std::filesystem;
using namespace hs::probes;

TEST(BusBandwidthFactor, FollowsNcclTests) {
  // n = 4: all_reduce 2·3/4, the (n−1)/n family 3/4, broadcast and reduce 1, barrier 0.
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor("all_reduce", 4), 1.5);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor("all_gather", 4), 0.75);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor("reduce_scatter", 4), 0.75);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor("all_to_all", 4), 0.75);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor("broadcast", 4), 1.0);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor("reduce", 4), 1.0);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor("barrier", 4), 0.0);
  // n = 8 and the single rank (nothing crosses a bus).
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor("all_reduce", 8), 1.75);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor("all_gather", 8), 0.875);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor("all_reduce", 1), 0.0);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor("reduce_scatter", 1), 0.0);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor("broadcast", 1), 1.0);
  // Point to point (nccl-tests sendrecv): 1.
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor("send", 4), 1.0);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor("recv", 2), 1.0);
  // Unknown ops and nonsense sizes claim nothing.
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor("gossip", 4), 0.0);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(nullptr, 4), 0.0);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor("all_reduce", 0), 0.0);
}

TEST(AlgorithmBandwidth, IsBytesPerSecondInGB) {
  EXPECT_DOUBLE_EQ(algorithm_bandwidth_gbps(8'000'000, 0, 1'000'000), 8.0);  // 8 MB in 1 ms
  EXPECT_DOUBLE_EQ(algorithm_bandwidth_gbps(1'000'000'000, 5, 5 + 2'000'000'000), 0.5);  // 1 GB in 2 s
  EXPECT_TRUE(std::isnan(algorithm_bandwidth_gbps(100, 10, 10)));
}

TEST(CommOps, RowsCarryAlgbwAndBusbw) {
  const auto path = hs::test::temp_db("comm_test", "comm.sqlite");
  {
    Recorder rec(path, 3);
    rec.begin_run({});
    // 8 MB in 1 ms over 4 ranks: algbw 8 GB/s, busbw 8 × 1.5 = 12.
    rec.record_comm({"all_reduce", "dp", 4, 8'000'000, "float32", 1'000'000, 2'000'000, 7});
    // 4 MB in 2 ms: algbw 2, busbw 2 × 0.75 = 1.5.
    rec.record_comm({"all_gather", "tp", 4, 4'000'000, "bfloat16", 3'000'000, 5'000'000, 7});
    // 1 MB in 0.5 ms: algbw 2, busbw 2 × 1 = 2.
    rec.record_comm({"broadcast", "world", 8, 1'000'000, "int64", 6'000'000, 6'500'000, 8});
    rec.record_comm({"barrier", "world", 8, 0, "", 7'000'000, 7'001'000, 8});
    // A zero duration has no bandwidth: NULL, not inf.
    rec.record_comm({"reduce_scatter", "tp", 4, 64, "float16", 9'000'000, 9'000'000, 8});
    rec.end_run(RunStatus::kCompleted);
    EXPECT_EQ(rec.write_errors(), 0);
  }
  const std::string sql = std::string("SELECT c.rank, c.step, o.value, g.value, c.group_size, c.bytes, d.value, c.start_ns, "
                                      "c.end_ns, c.algbw_gbps, c.busbw_gbps FROM ") +
                          schema::kCommOps +
                          " c JOIN strings o ON o.id = c.op_id JOIN strings g ON g.id = c.group_id "
                          "JOIN strings d ON d.id = c.dtype_id ORDER BY c.start_ns";
  EXPECT_EQ(hs::test::query_rows(path, sql), (std::vector<std::string>{
                                 "3|7|all_reduce|dp|4|8000000|float32|1000000|2000000|8.0|12.0",
                                 "3|7|all_gather|tp|4|4000000|bfloat16|3000000|5000000|2.0|1.5",
                                 "3|8|broadcast|world|8|1000000|int64|6000000|6500000|2.0|2.0",
                                 "3|8|barrier|world|8|0||7000000|7001000|0.0|0.0",
                                 "3|8|reduce_scatter|tp|4|64|float16|9000000|9000000|NULL|NULL",
                             }));
  // The viewer's index is there.
  EXPECT_EQ(hs::test::query_rows(path, "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'comm_ops'"),
            (std::vector<std::string>{"comm_ops_by_run"}));
}
