// process_group_test.cpp — c10d Gloo process groups between real processes (hs_dist_child):
// the rendezvous environment, every collective's result against its arithmetic, the bytes the
// communication probe records per op, and data-parallel updates equal to the single-process one.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "../../test_db.h"
#include "dist/dist_test_util.h"
#include "hybridscope/trainer/dist/free_port.h"
#include "hybridscope/trainer/dist/process_group.h"
#include "hybridscope/trainer/dist/probed_communicator.h"
#include "hybrid/reshard_fixtures.h"
#include "hybridscope/trainer/hybrid/reshard_executor.h"

namespace hs::trainer {
namespace {

// The TCP sockets listening on `port`, as "address:port" in /proc/net/tcp{,6}'s hex.
std::vector<std::string> listeners_on(int port) {
  std::vector<std::string> out;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::istringstream row(line);
      std::string slot, local, remote, state;
      row >> slot >> local >> remote >> state;
      const auto colon = local.rfind(':');
      if (state == "0A" && std::stoi(local.substr(colon + 1), nullptr, 16) == port) out.push_back(local);
    }
  }
  return out;
}

// c10d's TCPStore alone listens on every interface; rank 0's store listens on MASTER_ADDR only.
TEST(ProcessGroupGloo, TheStoreListensOnTheMasterAddressOnly) {
  DistEnv env;
  env.master_addr = "127.0.0.1";
  env.master_port = free_loopback_port();
  ProcessGroupOptions options;
  options.timeout = std::chrono::seconds(20);
  const C10dGroupFactory groups(env, options);
  EXPECT_EQ(listeners_on(env.master_port), (std::vector<std::string>{fmt::format("0100007F:{:04X}", env.master_port)}));
  EXPECT_EQ(groups.hosts().size(), 1u);
  // An address that is not this host's is refused at once, naming it.
  DistEnv elsewhere = env;
  elsewhere.master_addr = "192.0.2.1";  // TEST-NET-1: never a local address
  try {
    C10dGroupFactory refused(elsewhere, options);
    ADD_FAILURE() << "served a store on an address this host does not have";
  } catch (const DistError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot serve the TCPStore on 192.0.2.1:"), std::string::npos) << e.what();
  }
}

// Every collective between `world` processes, over Gloo alone (shm_bytes 0) or with the one-host
// shared-memory paths (the default): the child checks each result against the arithmetic (exit 0 =
// all equal); here the comm probe's rows are checked op by op, the same rows either way.
void check_collectives(int world, std::int64_t shm_bytes) {
  const auto db = hs::test::temp_db("process_group_test", fmt::format("collectives{}-{}.sqlite", world, shm_bytes));
  const auto status = hs::test::run_ranks({HS_DIST_CHILD, "collectives", db, std::to_string(shm_bytes)}, world);
  for (int r = 0; r < world; ++r) ASSERT_TRUE(hs::test::exited_ok(status[static_cast<std::size_t>(r)])) << "rank " << r;
  const std::string n = std::to_string(world);
  for (int r = 0; r < world; ++r) {
    const auto rows = hs::test::query_rows(
        db + ".rank" + std::to_string(r),
        "SELECT o.value, g.value, c.group_size, c.bytes, c.step FROM comm_ops c JOIN strings o ON o.id = c.op_id "
        "JOIN strings g ON g.id = c.group_id ORDER BY c.start_ns");
    std::vector<std::string> want = {
        "all_reduce|world|" + n + "|16|7",                                  // 4 float32
        "all_reduce|world|" + n + "|16|7",                                  // 2 int64
        "all_reduce|world|" + n + "|8|7",                                   // 2 float32 (avg)
        "all_gather|world|" + n + "|" + std::to_string(12 * world) + "|7",  // n x 3 float32 out
        "reduce_scatter|world|" + n + "|" + std::to_string(16 * world) + "|7",  // (2n, 2) float32 in
        "broadcast|world|" + n + "|20|7",                                   // 5 int32
    };
    if (world > 1) {
      const bool even = r % 2 == 0;
      want.push_back(std::string(even ? "send" : "recv") + "|world|" + n + "|24|7");
      want.push_back(std::string(even ? "recv" : "send") + "|world|" + n + "|24|7");
    }
    if (r <= 1) want.push_back("all_reduce|pair|2|8|7");  // 1 float64
    want.push_back("barrier|world|" + n + "|0|7");
    EXPECT_EQ(rows, want) << "rank " << r;
  }
}

TEST(ProcessGroupGloo, CollectivesBetweenTwoProcesses) { check_collectives(2, 0); }
TEST(ProcessGroupGloo, CollectivesBetweenFourProcesses) { check_collectives(4, 0); }
TEST(ProcessGroupGloo, CollectivesThroughSharedMemoryBetweenFourProcesses) {
  check_collectives(4, ProcessGroupOptions{}.shm_bytes);
}

// A one-host group's small collectives and exchanges through shared memory (dist_child.cpp,
// run_shm): the same results as Gloo's on every op and dtype, the same bits on every rank, every
// exchanged message as sent (several chunks, empty ones, a pair among more ranks), a mismatched
// exchange refused naming the sizes, no segment left behind, and a peer that exits fails the
// others' next call at once, naming it, not after the 60 s timeout.
void check_shm(int world) {
  const auto out = hs::test::temp_db("process_group_test", "shm" + std::to_string(world) + ".txt");
  const auto status = hs::test::run_ranks({HS_DIST_CHILD, "shm", out}, world, std::chrono::seconds(120));
  for (int r = 0; r < world; ++r) ASSERT_TRUE(hs::test::exited_ok(status[static_cast<std::size_t>(r)])) << "rank " << r;
  std::ifstream in(out);
  double seconds = -1;
  std::string line, error;
  in >> seconds;
  std::getline(in, line);
  std::getline(in, error);
  ASSERT_GE(seconds, 0.0) << "rank 0 wrote nothing to " << out;
  EXPECT_NE(error.find(fmt::format("all_reduce on group 'world' (rank 0 of {}; its ranks: 0 (", world)), std::string::npos)
      << error;
  EXPECT_NE(error.find(fmt::format("failed: shared memory: rank {} (pid ", world - 1)), std::string::npos) << error;
  EXPECT_NE(error.find("exited before joining"), std::string::npos) << error;
  EXPECT_LT(seconds, 30.0) << "a dead peer was found only by the timeout";
  double both = -1;
  std::string exchange_error;
  in >> both;
  std::getline(in, line);
  std::getline(in, exchange_error);
  EXPECT_NE(exchange_error.find(fmt::format("exchange on group 'world' (rank 0 of {};", world)), std::string::npos)
      << exchange_error;
  EXPECT_NE(exchange_error.find(fmt::format("failed: shared memory: rank {} (pid ", world - 1)), std::string::npos)
      << exchange_error;
  EXPECT_NE(exchange_error.find("exited during an exchange"), std::string::npos) << exchange_error;
  EXPECT_LT(both, 30.0) << "a dead peer of an exchange was found only by the timeout";
}

TEST(ProcessGroupGloo, SharedMemoryCollectivesBetweenTwoProcesses) { check_shm(2); }
TEST(ProcessGroupGloo, SharedMemoryCollectivesBetweenFourProcesses) { check_shm(4); }

// One PPO actor step, data parallel over `world` processes vs the single-process trainer on the
// same 8-sample batch (several micro-batches per rank, unequal response lengths so the token
// weighting matters). float32 throughout: parameters within 2e-6 (the step is (lr/eps)·g = 1e-2·g,
// see dist_child.cpp, so a gradient weighted by local instead of global counts shows as ~1e-3),
// the loss within 1e-6.
void check_dp_update(int world, const std::string& loss_agg) {
  const auto out = hs::test::temp_db("process_group_test", "dp" + std::to_string(world) + loss_agg + ".txt");
  ::setenv("HS_LOSS_AGG", loss_agg.c_str(), 1);
  const auto status = hs::test::run_ranks({HS_DIST_CHILD, "dp_update", out}, world);
  ::unsetenv("HS_LOSS_AGG");
  for (int r = 0; r < world; ++r) ASSERT_TRUE(hs::test::exited_ok(status[static_cast<std::size_t>(r)])) << "rank " << r;
  std::ifstream in(out);
  double param_diff = -1, loss_diff = -1;
  in >> param_diff >> loss_diff;
  ASSERT_TRUE(in) << "rank 0 wrote no result to " << out;
  std::printf("dp=%d %s: max |param - single| = %.3g, |loss - single| = %.3g\n", world, loss_agg.c_str(), param_diff,
              loss_diff);
  EXPECT_LE(param_diff, 2e-6);
  EXPECT_LE(loss_diff, 1e-6);
}

TEST(DataParallel, TwoRanksUpdateEqualsSingleProcessTokenMean) { check_dp_update(2, "token-mean"); }
TEST(DataParallel, FourRanksUpdateEqualsSingleProcessTokenMean) { check_dp_update(4, "token-mean"); }
TEST(DataParallel, TwoRanksUpdateEqualsSingleProcessSeqMean) { check_dp_update(2, "seq-mean-token-mean"); }

// The reshard executor over real Gloo processes (4 ranks, megatron layout): each rank checks its
// generation weights bit-for-bit and its restored shards (dist_child.cpp); here, the bytes each
// rank received according to its comm_ops rows equal HybridFlow's Table 2 (M = model bytes,
// T = pp·tp): hybrid (T − t_g)/(t_g·T)·M, vanilla (T − 1)/T·M, naive (T·dp − 1)/(T·dp)·M.
// `direct_min_elements`: the executor's floor for a piece to move as its own message (1: every
// piece contiguous on both sides moves unpacked; the default packs all of this small model).
void check_reshard_over_gloo(int pp, int tp, int dp, int t_g, const std::string& mode,
                             std::int64_t direct_min_elements = ReshardExecutor::kDirectMinElements) {
  const std::string tag = "reshard_" + mode + std::to_string(pp) + std::to_string(tp) + std::to_string(dp) +
                          std::to_string(t_g) + "_direct" + std::to_string(direct_min_elements);
  const auto db = hs::test::temp_db("process_group_test", tag + ".sqlite");
  const int world = pp * tp * dp;
  const auto status = hs::test::run_ranks({HS_DIST_CHILD, "reshard", db, std::to_string(pp), std::to_string(tp),
                                           std::to_string(dp), std::to_string(t_g), mode,
                                           std::to_string(direct_min_elements)},
                                          world);
  for (int r = 0; r < world; ++r) ASSERT_TRUE(hs::test::exited_ok(status[static_cast<std::size_t>(r)])) << tag << " rank " << r;
  std::int64_t model_bytes = 0;
  for (const auto& p : test::sharded_model()) {
    std::int64_t numel = 1;
    for (const auto d : p.shape) numel *= d;
    model_bytes += numel * p.element_size;
  }
  const std::int64_t T = pp * tp;
  std::int64_t expected = 0;
  if (mode == "hybrid") expected = (T - t_g) * model_bytes / (t_g * T);
  if (mode == "vanilla") expected = (T - 1) * model_bytes / T;
  if (mode == "naive") expected = (T * dp - 1) * model_bytes / (T * dp);
  for (int r = 0; r < world; ++r) {
    std::int64_t received = 0;
    for (const auto& row : hs::test::query_rows(
             db + ".rank" + std::to_string(r),
             "SELECT s.value, c.bytes, c.group_size FROM comm_ops c JOIN strings s ON s.id = c.op_id "
             "JOIN strings g ON g.id = c.group_id WHERE g.value = 'reshard'")) {
      const auto a = row.find('|'), b = row.rfind('|');
      received += received_bytes(row.substr(0, a), std::stoll(row.substr(a + 1, b - a - 1)), std::stoi(row.substr(b + 1)));
    }
    EXPECT_EQ(received, expected) << tag << " rank " << r;
  }
}

TEST(ReshardOverGloo, ReceivedBytesEqualTable2ForEveryMode) {
  for (const char* mode : {"hybrid", "vanilla", "naive"}) {
    check_reshard_over_gloo(1, 4, 1, 2, mode);  // tp 4 -> t_g 2
    check_reshard_over_gloo(2, 2, 1, 2, mode);  // pp 2, tp 2 -> t_g 2
  }
}

// Unpacked pieces posted beside packed buffers to the same peer, over Gloo's asynchronous
// point-to-point ops: the messages pair up in order (bit-exact weights, checked by every rank).
TEST(ReshardOverGloo, PiecesMoveUnpackedWhereContiguous) {
  for (const char* mode : {"hybrid", "vanilla", "naive"}) check_reshard_over_gloo(2, 2, 1, 2, mode, 1);
}

}  // namespace
}  // namespace hs::trainer
