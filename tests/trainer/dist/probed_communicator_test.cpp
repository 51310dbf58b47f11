// probed_communicator_test.cpp — the collective wrapper forwards to the communicator it wraps and
// records each collective with nccl-tests' byte convention, read back from the run database.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>
#include <tuple>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "../../test_db.h"
#include "hybridscope/probes/recorder.h"
#include "hybridscope/trainer/dist/probed_communicator.h"

#include "hybridscope/probes/range_observer.h"

namespace fs = std::filesystem;

namespace hs::trainer {
namespace {

// Rank 1 of a group of 4 whose other ranks hold the same tensors: results are computable by hand.
class FakeCommunicator final : public Communicator {
 public:
  static constexpr int kSize = 4;
  int rank() const override { return 1; }
  int size() const override { return kSize; }
  std::string name() const override { return "tp"; }
  void all_reduce(at::Tensor& tensor, ReduceOp) override { tensor.mul_(kSize); }  // sum of 4 equal
  at::Tensor all_gather(const at::Tensor& input) override { return at::cat({input, input, input, input}, 0); }
  at::Tensor reduce_scatter(const at::Tensor& input, ReduceOp) override {
    const auto rows = input.size(0) / kSize;
    return input.narrow(0, rank() * rows, rows) * kSize;
  }
  void broadcast(at::Tensor& tensor, int root) override { tensor.fill_(root); }
  void send(const at::Tensor&, int) override { ++sends; }
  void recv(at::Tensor& tensor, int peer) override { tensor.fill_(peer); }
  void barrier() override { ++barriers; }
  int sends = 0;
  int barriers = 0;
};

TEST(ProbedCommunicator, RecordsEachCollectiveWithNcclTestsBytes) {
  const auto path = hs::test::temp_db("probed_comm_test", "comm.sqlite");
  auto fake = std::make_shared<FakeCommunicator>();
  {
    probes::Recorder rec(path, 1);
    rec.begin_run({});
    probes::RunProbes run_probes(&rec);
    run_probes.set_step(3);
    ProbedCommunicator comm(fake, run_probes);
    EXPECT_EQ(comm.size(), 4);
    EXPECT_EQ(comm.rank(), 1);
    EXPECT_EQ(comm.name(), "tp");

    // all_reduce: (8, 16) float32 = 512 B, in place.
    auto grad = torch::ones({8, 16}, torch::kFloat32);
    comm.all_reduce(grad);
    EXPECT_TRUE(torch::equal(grad, torch::full({8, 16}, 4.0f)));

    // all_gather: input (2, 8) bfloat16 = 32 B; output (8, 8) = 128 B = 4 × input.
    auto shard = torch::arange(16, torch::kFloat32).reshape({2, 8}).to(torch::kBFloat16);
    const auto gathered = comm.all_gather(shard);
    EXPECT_EQ(gathered.sizes(), (std::vector<std::int64_t>{8, 8}));
    EXPECT_TRUE(torch::equal(gathered, at::cat({shard, shard, shard, shard}, 0)));

    run_probes.set_step(4);
    // reduce_scatter: input (12, 5) float16 = 120 B; output (3, 5), rows 3..5 times 4.
    auto full = torch::arange(60, torch::kFloat32).reshape({12, 5}).to(torch::kFloat16);
    const auto scattered = comm.reduce_scatter(full);
    EXPECT_EQ(scattered.sizes(), (std::vector<std::int64_t>{3, 5}));
    EXPECT_TRUE(torch::equal(scattered, full.narrow(0, 3, 3) * 4));

    // broadcast: (10,) int64 = 80 B.
    auto ids = torch::zeros({10}, torch::kInt64);
    comm.broadcast(ids, 2);
    EXPECT_TRUE(torch::equal(ids, torch::full({10}, 2, torch::kInt64)));

    // send: (6,) float32 = 24 B; recv: (3,) int32 = 12 B, filled by the fake with the peer.
    comm.send(torch::ones({6}, torch::kFloat32), 2);
    EXPECT_EQ(fake->sends, 1);
    auto inbox = torch::zeros({3}, torch::kInt32);
    comm.recv(inbox, 3);
    EXPECT_TRUE(torch::equal(inbox, torch::full({3}, 3, torch::kInt32)));

    comm.barrier();
    EXPECT_EQ(fake->barriers, 1);
    rec.end_run(probes::RunStatus::kCompleted);
    EXPECT_EQ(rec.write_errors(), 0);
  }
  EXPECT_EQ(hs::test::query_rows(path, "SELECT c.rank, c.step, o.value, g.value, c.group_size, c.bytes, d.value, "
                       "c.end_ns >= c.start_ns FROM comm_ops c JOIN strings o ON o.id = c.op_id "
                       "JOIN strings g ON g.id = c.group_id JOIN strings d ON d.id = c.dtype_id ORDER BY c.start_ns"),
            (std::vector<std::string>{
                "1|3|all_reduce|tp|4|512|float32|1",          // 8·16·4
                "1|3|all_gather|tp|4|128|bfloat16|1",         // 4 × 2·8·2
                "1|4|reduce_scatter|tp|4|120|float16|1",      // 12·5·2
                "1|4|broadcast|tp|4|80|int64|1",              // 10·8
                "1|4|send|tp|4|24|float32|1",                 // 6·4
                "1|4|recv|tp|4|12|int32|1",                   // 3·4
                "1|4|barrier|tp|4|0||1",
            }));
  // busbw = algbw × factor wherever the duration was measurable (a few ns may read as 0).
  EXPECT_EQ(hs::test::query_rows(path, "SELECT COUNT(*) FROM comm_ops c JOIN strings o ON o.id = c.op_id WHERE c.end_ns > c.start_ns "
                       "AND ABS(c.algbw_gbps - c.bytes * 1.0 / (c.end_ns - c.start_ns)) > 1e-12 * c.algbw_gbps"),
            (std::vector<std::string>{"0"}));
  EXPECT_EQ(hs::test::query_rows(path, "SELECT COUNT(*) FROM comm_ops c JOIN strings o ON o.id = c.op_id WHERE c.end_ns > c.start_ns "
                       "AND ABS(c.busbw_gbps - c.algbw_gbps * CASE o.value WHEN 'all_reduce' THEN 1.5 "
                       "WHEN 'broadcast' THEN 1.0 WHEN 'send' THEN 1.0 WHEN 'recv' THEN 1.0 WHEN 'barrier' THEN 0.0 ELSE 0.75 END) > 1e-9 * c.algbw_gbps"),
            (std::vector<std::string>{"0"}));
}

// A batched exchange over a communicator without asynchronous ops runs the default: rank 1's
// pairs in the global order — peer 0 (receive first), then 2 and 3 (send first). The probe
// records one row per message, in that order, with the message's bytes; every hook fires once,
// recv_done after the tensor is filled.
TEST(ProbedCommunicator, ExchangeRecordsOneRowPerMessageInPairOrder) {
  const auto path = hs::test::temp_db("probed_comm_test", "exchange.sqlite");
  auto fake = std::make_shared<FakeCommunicator>();
  std::vector<std::string> events;
  {
    probes::Recorder rec(path, 1);
    rec.begin_run({});
    probes::RunProbes run_probes(&rec);
    ProbedCommunicator comm(fake, run_probes);
    // Sends (1,), (2,), (3,) float32 to 0, 2, 3; receives (4,), (5,) int32 from 3 and 0.
    const std::vector<P2POp> sends = {{torch::ones({1}), 0}, {torch::ones({2}), 2}, {torch::ones({3}), 3}};
    const std::vector<P2POp> recvs = {{torch::zeros({4}, torch::kInt32), 3}, {torch::zeros({5}, torch::kInt32), 0}};
    ExchangeHooks hooks;
    hooks.send_posted = [&](std::size_t i) { events.push_back("send_posted " + std::to_string(i)); };
    hooks.send_done = [&](std::size_t i) { events.push_back("send_done " + std::to_string(i)); };
    hooks.recv_posted = [&](std::size_t i) { events.push_back("recv_posted " + std::to_string(i)); };
    hooks.recv_done = [&](std::size_t i) {
      events.push_back("recv_done " + std::to_string(i) + " holds " + std::to_string(recvs[i].tensor[0].item<int>()));
    };
    comm.exchange(sends, recvs, hooks);
    EXPECT_EQ(fake->sends, 3);
    rec.end_run(probes::RunStatus::kCompleted);
  }
  EXPECT_EQ(events, (std::vector<std::string>{"recv_posted 1", "recv_done 1 holds 0", "send_posted 0", "send_done 0",
                                              "send_posted 1", "send_done 1", "send_posted 2", "send_done 2",
                                              "recv_posted 0", "recv_done 0 holds 3"}));
  EXPECT_EQ(hs::test::query_rows(path, "SELECT o.value, c.bytes, d.value, c.end_ns >= c.start_ns FROM comm_ops c "
                                       "JOIN strings o ON o.id = c.op_id JOIN strings d ON d.id = c.dtype_id "
                                       "ORDER BY c.start_ns, c.rowid"),
            (std::vector<std::string>{"recv|20|int32|1", "send|4|float32|1", "send|8|float32|1", "send|12|float32|1",
                                      "recv|16|int32|1"}));
  // A peer outside the group, or the rank itself, is refused before anything moves.
  ProbedCommunicator unprobed(fake, probes::RunProbes::off());
  EXPECT_THROW(unprobed.exchange({{torch::ones({1}), 1}}, {}), std::invalid_argument);
  EXPECT_THROW(unprobed.exchange({}, {{torch::ones({1}), 4}}), std::invalid_argument);
  EXPECT_EQ(fake->sends, 3);
}

TEST(ProbedCommunicator, WithoutRecorderOnlyForwards) {
  auto fake = std::make_shared<FakeCommunicator>();
  ProbedCommunicator comm(fake, probes::RunProbes::off());
  auto t = torch::ones({4, 2});
  comm.all_reduce(t);
  EXPECT_TRUE(torch::equal(t, torch::full({4, 2}, 4.0f)));
  EXPECT_EQ(comm.all_gather(torch::ones({1, 3})).size(0), 4);
  EXPECT_EQ(comm.reduce_scatter(torch::ones({8, 3})).size(0), 2);
  comm.barrier();
  EXPECT_EQ(fake->barriers, 1);
}

TEST(ProbedCommunicator, DtypeNames) {
  EXPECT_STREQ(comm_dtype_name(torch::kFloat32), "float32");
  EXPECT_STREQ(comm_dtype_name(torch::kBFloat16), "bfloat16");
  EXPECT_STREQ(comm_dtype_name(torch::kFloat16), "float16");
  EXPECT_STREQ(comm_dtype_name(torch::kFloat64), "float64");
  EXPECT_STREQ(comm_dtype_name(torch::kInt64), "int64");
  EXPECT_STREQ(comm_dtype_name(torch::kComplexFloat), "other");
}

}  // namespace
}  // namespace hs::trainer

namespace hs::trainer {
namespace {

// Each collective is announced to the range observer (CUPTI's external correlation) as
// "comm/<op>" with the comm_ops row's start, and closed after it: the documented query then
// gives the collective the GPU time of the kernels launched inside it.
TEST(ProbedCommunicator, AnnouncesEachCollectiveToTheRangeObserverForGpuTime) {
  struct Seen {
    std::vector<std::tuple<std::string, int, std::int64_t>> pushes;
    int pops = 0;
  } seen;
  const probes::RangeObserver observer{
      [](void* c, const char* name, int depth, std::int64_t start_ns) noexcept {
        static_cast<Seen*>(c)->pushes.emplace_back(name, depth, start_ns);
      },
      [](void* c) noexcept { ++static_cast<Seen*>(c)->pops; }, &seen};
  const auto path = hs::test::temp_db("probed_comm_test", "observer.sqlite");
  {
    probes::Recorder rec(path, 1);
    rec.begin_run({});
    const probes::RunProbes run_probes(&rec);
    ProbedCommunicator comm(std::make_shared<FakeCommunicator>(), run_probes);
    const auto* previous = probes::set_range_observer(&observer);
    auto grad = torch::ones({4}, torch::kFloat32);
    comm.all_reduce(grad);
    (void)comm.all_gather(grad);
    probes::set_range_observer(previous);
    comm.barrier();  // no observer: nothing announced
    rec.end_run(probes::RunStatus::kCompleted);
  }
  ASSERT_EQ(seen.pushes.size(), 2u);
  EXPECT_EQ(seen.pops, 2);
  EXPECT_EQ(std::get<0>(seen.pushes[0]), "comm/all_reduce");
  EXPECT_EQ(std::get<0>(seen.pushes[1]), "comm/all_gather");
  EXPECT_EQ(std::get<1>(seen.pushes[0]), ProbedCommunicator::kCollectiveDepth);
  const auto starts = hs::test::query_rows(path, "SELECT start_ns FROM comm_ops ORDER BY start_ns LIMIT 2");
  ASSERT_EQ(starts.size(), 2u);
  EXPECT_EQ(starts[0], std::to_string(std::get<2>(seen.pushes[0])));
  EXPECT_EQ(starts[1], std::to_string(std::get<2>(seen.pushes[1])));

  // What the CUPTI collector would add for the all_reduce: its external id, one NCCL kernel of
  // 700 ns correlated to it. The documented query gives the collective that GPU time.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  const std::string fill =
      "INSERT OR IGNORE INTO strings(value) VALUES('comm/all_reduce'), ('ncclDevKernel_AllReduce');"
      "INSERT INTO correlation_ranges(run_id, rank, external_id, tid, depth, start_ns, name_id) "
      "SELECT 1, 1, 77, 0, -1, " + starts[0] + ", id FROM strings WHERE value = 'comm/all_reduce';"
      "INSERT INTO external_correlations(run_id, rank, correlation_id, external_id) VALUES(1, 1, 5, 77);";
  ASSERT_EQ(sqlite3_exec(db, fill.c_str(), nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
  const auto kernel_columns = hs::test::query_rows(path, "SELECT name FROM pragma_table_info('kernels') ORDER BY cid");
  std::string columns, values;
  for (const auto& c : kernel_columns) {
    columns += (columns.empty() ? "" : ", ") + c;
    std::string v = "0";
    if (c == "run_id" || c == "rank") v = "1";
    if (c == "correlation_id") v = "5";
    if (c == "start_ns") v = "1000";
    if (c == "end_ns") v = "1700";
    if (c == "name_id" || c == "short_name_id") v = "(SELECT id FROM strings WHERE value = 'ncclDevKernel_AllReduce')";
    values += (values.empty() ? "" : ", ") + v;
  }
  const std::string kernel = "INSERT INTO kernels(" + columns + ") VALUES(" + values + ")";
  ASSERT_EQ(sqlite3_exec(db, kernel.c_str(), nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
  sqlite3_close(db);
  EXPECT_EQ(hs::test::query_rows(path, std::string(kCollectiveGpuTimeSql)),
            (std::vector<std::string>{"all_reduce|1|700", "all_gather|0|NULL", "barrier|0|NULL"}));
}

}  // namespace
}  // namespace hs::trainer
