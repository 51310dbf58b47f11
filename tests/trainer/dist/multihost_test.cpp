// multihost_test.cpp — ranks on two hosts (network namespaces with their own addresses and host
// names, netns_hosts.h) and faults injected between them (a slow, lossy link by tc tbf; a
// partition by taking the link down), and a rank stopped with SIGSTOP. What is asserted is the outcome — exit status, messages, records — never a duration:
// the deadlines only turn a hang into a failure.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>

#include "../../test_db.h"
#include "dist/dist_test_util.h"
#include "dist/netns_hosts.h"
#include "../../tiny_grpo.h"

namespace {

namespace fs = std::filesystem;
using hs::test::kBinary;
using hs::test::NetnsHosts;

using hs::test::read_all;

std::string fresh_dir(const std::string& tag) { return hs::test::fresh_dir("multihost_test", tag); }

// Waits until `path` contains `text` (false at the deadline).
bool wait_for_text(const std::string& path, const std::string& text, std::chrono::seconds deadline) {
  const auto until = std::chrono::steady_clock::now() + deadline;
  while (std::chrono::steady_clock::now() < until) {
    if (read_all(path).find(text) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

class MultiHost : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string why = NetnsHosts::unavailable(); !why.empty()) GTEST_SKIP() << why;
    hosts_ = std::make_unique<NetnsHosts>();
    if (!hosts_->ok()) GTEST_SKIP() << "could not make the network-namespace hosts (ip netns/veth refused here)";
  }

  // One `hybridscope launch` per host, `per_host` ranks each, node 0's address as the master;
  // `train` are the ranks' arguments. Returns the launchers' pids; their output in DIR/node<h>.txt.
  std::vector<pid_t> launch_on_hosts(const std::string& dir, int per_host, const std::vector<std::string>& train) {
    std::vector<pid_t> pids;
    for (int h = 0; h < NetnsHosts::kHosts; ++h) {
      std::vector<std::string> argv = {kBinary,       "launch",         "-n",          std::to_string(per_host),
                                       "--nnodes",    "2",              "--node-rank", std::to_string(h),
                                       "--master-addr", hosts_->addr(0), "--master-port", "29517",
                                       "--grace",     "3",              "--log-dir",   dir + "/logs",
                                       "--"};
      argv.insert(argv.end(), train.begin(), train.end());
      pids.push_back(hs::test::spawn(hosts_->on_host(h, argv), {}, fmt::format("{}/node{}.txt", dir, h),
                                     fmt::format("{}/node{}.err", dir, h)));
    }
    return pids;
  }

  std::string logs(const std::string& dir) const {
    std::string all;
    for (int h = 0; h < NetnsHosts::kHosts; ++h)
      all += read_all(fmt::format("{}/node{}.txt", dir, h)) + read_all(fmt::format("{}/node{}.err", dir, h));
    return all;
  }

  std::unique_ptr<NetnsHosts> hosts_;
};

// Four ranks on two hosts train with fsdp over all four and generate at rollout tp 2: every
// train -> rollout switch gathers fsdp shards from the other host. The run database names each
// rank's host and holds every rank's clock offset.
TEST_F(MultiHost, TwoHostsTrainAndReshardAcrossThem) {
  const std::string dir = fresh_dir("two_hosts");
  auto train = hs::test::tiny_grpo_on(dir, 2, 4);
  train.insert(train.end(), {"hybridscope.model.num_key_value_heads=2",
                             "actor_rollout_ref.rollout.tensor_model_parallel_size=2",
                             "hybridscope.reshard.mode=hybrid"});
  const auto pids = launch_on_hosts(dir, 2, train);
  for (const pid_t pid : pids)
    ASSERT_TRUE(hs::test::exited_ok(hs::test::wait_for(pid, std::chrono::seconds(300)))) << logs(dir);
  const std::string db = dir + "/run.sqlite";
  EXPECT_EQ(hs::test::query_row(db, "SELECT status, world_size FROM runs"), "completed|4");
  EXPECT_EQ(hs::test::query_rows(db, "SELECT rank, host, status FROM ranks ORDER BY rank"),
            (std::vector<std::string>{"0|host-a|completed", "1|host-a|completed", "2|host-b|completed",
                                      "3|host-b|completed"}));
  EXPECT_EQ(hs::test::query_row(db, "SELECT COUNT(*) FROM ranks WHERE clock_offset_ns <> 0"), "4");
  // Each rank estimated rank 0's clock at the rendezvous. These "hosts" share one kernel, so the
  // true offset is 0: every estimate must hold it within its error bound, and none was applied.
  EXPECT_EQ(hs::test::query_row(db, "SELECT clock_sync_offset_ns, clock_sync_error_ns, clock_sync_applied FROM ranks "
                                    "WHERE rank = 0"),
            "0|0|0");
  EXPECT_EQ(hs::test::query_row(db, "SELECT COUNT(*) FROM ranks WHERE rank > 0 AND clock_sync_error_ns > 0 AND "
                                    "ABS(clock_sync_offset_ns) <= clock_sync_error_ns AND clock_sync_applied = 0"),
            "3");
  std::printf("clock estimates (offset ± error ns): %s\n",
              hs::test::query_row(db, "SELECT GROUP_CONCAT(clock_sync_offset_ns || ' ± ' || clock_sync_error_ns, ', ') "
                                      "FROM ranks WHERE rank > 0").c_str());
  // Each rank received weights in every train -> rollout switch (fsdp shards from all four).
  EXPECT_EQ(hs::test::query_rows(db, "SELECT w.rank, MIN(w.bytes_received) > 0 FROM switches w JOIN strings d ON "
                                     "d.id = w.direction_id WHERE d.value = 'train_to_rollout' GROUP BY w.rank"),
            (std::vector<std::string>{"0|1", "1|1", "2|1", "3|1"}));
  // The store listened on host a's address: the ranks of host b reached it there.
  EXPECT_NE(logs(dir).find(fmt::format("dist: rank 3 of 4 (local rank 1, node 1) from hybridscope launch; store at "
                                       "{}:29517",
                                       hosts_->addr(0))),
            std::string::npos);
}

// Each host's link limited to 1 Mbit/s with a 3 KB queue (tc tbf): the run still completes; the
// queue overflowed (TCP recovered the lost packets), and no collective between the hosts finished
// faster than the wire allows — half its bytes must cross the link one way at 1 Mbit/s.
TEST_F(MultiHost, ASlowLossyLinkSlowsTheCollectivesButTheRunCompletes) {
  constexpr int kRateKbit = 1000, kBurst = 1600;
  for (int h = 0; h < NetnsHosts::kHosts; ++h) ASSERT_TRUE(hosts_->limit_rate(h, kRateKbit, kBurst, 3200));
  const std::string dir = fresh_dir("slow_link");
  const auto pids = launch_on_hosts(dir, 1, hs::test::tiny_grpo_on(dir, 2, 2));
  for (const pid_t pid : pids)
    ASSERT_TRUE(hs::test::exited_ok(hs::test::wait_for(pid, std::chrono::seconds(300)))) << logs(dir);
  const std::string db = dir + "/run.sqlite";
  EXPECT_EQ(hs::test::query_row(db, "SELECT status FROM runs"), "completed");
  EXPECT_GT(hosts_->dropped(0) + hosts_->dropped(1), 0) << "the 3 KB queues never overflowed";
  // The k-th collective of a group on rank 0 and on rank 1 are one operation; the rank that
  // entered it first waits at least until the other's half crossed the wire (a rank's own send
  // may return as soon as the kernel buffered it, so the bound holds for the longer of the two).
  const auto rows = hs::test::query_rows(
      db, "WITH ops AS (SELECT c.rank, c.group_id, o.value AS op, c.bytes, c.end_ns - c.start_ns AS ns, ROW_NUMBER() "
          "OVER (PARTITION BY c.rank, c.group_id ORDER BY c.start_ns) AS k FROM comm_ops c JOIN strings o ON o.id = "
          "c.op_id WHERE c.group_size = 2) SELECT op, MAX(bytes), MAX(ns) FROM ops WHERE op IN ('all_reduce', "
          "'all_gather', 'reduce_scatter') GROUP BY group_id, k HAVING MAX(bytes) > 8000 AND COUNT(*) = 2");
  ASSERT_FALSE(rows.empty());
  for (const auto& row : rows) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(row, m, std::regex("([a-z_]+)\\|([0-9]+)\\|([0-9]+)")));
    const double wire_s = (std::stod(m[2]) / 2 - kBurst) * 8 / (kRateKbit * 1000.0);
    EXPECT_GE(std::stod(m[3]) / 1e9, wire_s) << row << ": faster than 1 Mbit/s";
  }
  std::printf("%zu collectives over 8 KB; packets dropped by the links: %lld\n", rows.size(),
              hosts_->dropped(0) + hosts_->dropped(1));
}

// The link between the hosts drops everything mid-run: every rank fails within the collective
// timeout with a message naming the operation and the peers' hosts, both launchers end, and the
// merged run is failed with what each rank flushed before the partition.
TEST_F(MultiHost, PartitionMidRunEndsEveryRankWithinTheTimeout) {
  const std::string dir = fresh_dir("partition");
  auto train = hs::test::tiny_grpo_on(dir, 100000, 2);
  train.back() = "hybridscope.dist.timeout_s=10";
  const auto pids = launch_on_hosts(dir, 1, train);
  ASSERT_TRUE(wait_for_text(dir + "/node0.txt", "[rank 0] step    3/", std::chrono::seconds(240))) << logs(dir);
  ASSERT_TRUE(hosts_->partition());
  const auto cut_at = std::chrono::steady_clock::now();
  for (const pid_t pid : pids) {
    const int status = hs::test::wait_for(pid, std::chrono::seconds(180));
    ASSERT_NE(status, -1) << "a launcher hung after the partition: " << logs(dir);
    EXPECT_FALSE(hs::test::exited_ok(status));
  }
  std::printf("every process ended %.1f s after the partition (timeout_s 10)\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - cut_at).count());
  const std::string all = logs(dir);
  EXPECT_TRUE(std::regex_search(all, std::regex("(all_reduce|all_gather|reduce_scatter|broadcast|barrier|send|recv) on "
                                                "group '[a-z_]+' \\(rank [01] of 2; its ranks: [^)]*host-a[^)]*\\)")))
      << all;
  EXPECT_NE(all.find("host-b " + hosts_->addr(1)), std::string::npos) << all;
  const pid_t merge = hs::test::spawn({kBinary, "merge", dir + "/run.sqlite"}, {}, dir + "/merge.txt");
  ASSERT_TRUE(hs::test::exited_ok(hs::test::wait_for(merge, std::chrono::seconds(60)))) << read_all(dir + "/merge.txt");
  const std::string db = dir + "/run.sqlite";
  EXPECT_EQ(hs::test::query_row(db, "SELECT status FROM runs"), "failed");
  EXPECT_EQ(hs::test::query_rows(db, "SELECT rank, status FROM ranks ORDER BY rank"),
            (std::vector<std::string>{"0|failed", "1|failed"}));
  for (int r = 0; r < 2; ++r)
    EXPECT_NE(hs::test::query_row(db, fmt::format("SELECT COUNT(*) FROM ranges WHERE rank = {} AND step >= 2", r)), "0");
  EXPECT_EQ(hs::test::query_row(db, "PRAGMA integrity_check"), "ok");
}

}  // namespace

// A rank stopped with SIGSTOP (one host): the other times out in its collective and fails naming
// the stopped rank; the launcher then ends the stopped one (SIGKILL after the grace) and exits.
TEST(StoppedRank, TheOtherRanksTimeOutCleanly) {
  const std::string dir = fresh_dir("sigstop");
  auto train = hs::test::tiny_grpo_on(dir, 100000, 2);
  train.back() = "hybridscope.dist.timeout_s=10";
  std::vector<std::string> argv = {kBinary, "launch", "-n", "2", "--grace", "3", "--log-dir", dir + "/logs", "--"};
  argv.insert(argv.end(), train.begin(), train.end());
  const pid_t launcher = hs::test::spawn(argv, {}, dir + "/out.txt", dir + "/err.txt");
  ASSERT_TRUE(wait_for_text(dir + "/out.txt", "[rank 0] step    3/", std::chrono::seconds(240))) << read_all(dir + "/err.txt");
  std::smatch m;
  const std::string out = read_all(dir + "/out.txt");
  ASSERT_TRUE(std::regex_search(out, m, std::regex("launch: rank 1 pid ([0-9]+)")));
  const pid_t stopped = static_cast<pid_t>(std::stol(m[1]));
  ::kill(stopped, SIGSTOP);
  const auto stopped_at = std::chrono::steady_clock::now();
  const int status = hs::test::wait_for(launcher, std::chrono::seconds(180));
  ASSERT_NE(status, -1) << "the launcher hung on a stopped rank";
  std::printf("every process ended %.1f s after the SIGSTOP (timeout_s 10, grace 3 s)\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - stopped_at).count());
  EXPECT_FALSE(hs::test::exited_ok(status));
  const std::string err = read_all(dir + "/err.txt");
  EXPECT_NE(err.find("launch: FAILED — rank 0"), std::string::npos) << err;
  EXPECT_TRUE(std::regex_search(err, std::regex("on group '[a-z_]+' \\(rank 0 of 2; its ranks: 0 \\([^)]*\\), 1 ")))
      << err;
  const pid_t merge = hs::test::spawn({kBinary, "merge", dir + "/run.sqlite"}, {}, dir + "/merge.txt");
  ASSERT_TRUE(hs::test::exited_ok(hs::test::wait_for(merge, std::chrono::seconds(60)))) << read_all(dir + "/merge.txt");
  const std::string db = dir + "/run.sqlite";
  EXPECT_EQ(hs::test::query_row(db, "SELECT status FROM runs"), "failed");
  EXPECT_EQ(hs::test::query_row(db, "SELECT status FROM ranks WHERE rank = 0"), "failed");
  EXPECT_NE(hs::test::query_row(db, "SELECT COUNT(*) FROM ranges WHERE rank = 1 AND step >= 2"), "0");
}
