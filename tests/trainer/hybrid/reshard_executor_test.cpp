// reshard_executor_test.cpp — the reshard executor over in-process thread ranks: after
// train->rollout every rank's generation weights equal the matching slice of the full weights bit
// for bit, after rollout->train the training shards are bit-identical to before, and the bytes
// each rank received according to its own comm_ops rows equal HybridFlow's closed form (or, for
// the real actor's tp-replicated parameters, the plan verified in reshard_plan_test.cpp).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <atomic>
#include <cstring>
#include <optional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "../../test_db.h"
#include "hybridscope/trainer/hybrid/hybrid_switch.h"
#include "hybridscope/trainer/dist/probed_communicator.h"
#include "hybridscope/trainer/hybrid/reshard_executor.h"
#include "hybridscope/trainer/rollout/rollout.h"
#include "hybridscope/trainer/dist/thread_world.h"

#include "hybrid/reshard_fixtures.h"

namespace hs::trainer {
namespace {

using test::sharded_model;
using test::tiny_llama;

at::Tensor slice(const at::Tensor& full, const Box& box) {
  at::Tensor v = full;
  for (std::size_t d = 0; d < box.ranges.size(); ++d) {
    v = v.slice(static_cast<std::int64_t>(d), box.ranges[d].begin, box.ranges[d].end);
  }
  return v.contiguous();
}

// Bit-for-bit: the same bytes, not merely equal values.
bool same_bits(const at::Tensor& a, const at::Tensor& b) {
  return a.sizes() == b.sizes() && a.scalar_type() == b.scalar_type() &&
         std::memcmp(a.contiguous().data_ptr(), b.contiguous().data_ptr(), a.nbytes()) == 0;
}

struct Case {
  int pp, tp, dp, t_g;
};

// How run_plan moves the pieces: the executor's message split and the wire dtype.
struct RunOptions {
  std::int64_t direct_min_elements = ReshardExecutor::kDirectMinElements;
  std::optional<at::ScalarType> wire_dtype;
  int* direct_messages = nullptr;  // when set: the direct (unpacked) messages received, over ranks
};

// Runs train->rollout->train on every rank of `plan` with a recorder per rank (as the real ranks
// have) and returns the bytes each rank received according to its comm_ops rows. In another wire
// dtype the generation shards are the full weights' slices cast to it, bit for bit, and
// rollout->train is refused (the training tensors hold the weights).
std::vector<std::int64_t> run_plan(std::shared_ptr<const ReshardPlan> plan, const std::string& tag,
                                   const RunOptions& run = {}) {
  const int world = plan->training.world();
  std::atomic<int> direct{0};
  std::vector<at::Tensor> full;
  torch::manual_seed(11);
  for (const auto& p : plan->training.params) full.push_back(torch::randn(p.spec.shape, torch::kFloat32));
  std::vector<std::int64_t> received(static_cast<std::size_t>(world), -1);
  run_thread_ranks(world, [&](int rank, GroupFactory& groups) {
    const std::string path = hs::test::temp_db("reshard_executor_test", tag + "_rank" + std::to_string(rank) + ".sqlite");
    {
      probes::Recorder recorder(path, rank);
      recorder.begin_run({});
      const probes::RunProbes run_probes(&recorder);
      ReshardExecutor executor(plan, rank, groups, &run_probes, run.direct_min_elements);
      for (const auto& m : executor.recv_messages()) direct += m.piece != ReshardExecutor::Message::kPacked;
      std::vector<at::Tensor> training(full.size());
      for (std::size_t p = 0; p < full.size(); ++p) {
        if (auto box = plan->training.box(p, rank)) training[p] = slice(full[p], *box);
      }
      const std::vector<at::Tensor> before = [&] {
        std::vector<at::Tensor> copy;
        for (const auto& t : training) copy.push_back(t.defined() ? t.clone() : t);
        return copy;
      }();
      const auto generation = executor.to_generation(training, run.wire_dtype);
      training.clear();  // the executor must not need the caller's references
      for (std::size_t p = 0; p < full.size(); ++p) {
        at::Tensor expected = slice(full[p], *plan->generation.box(p, rank));
        if (run.wire_dtype) expected = expected.to(*run.wire_dtype);
        EXPECT_TRUE(same_bits(generation[p], expected))
            << tag << " rank " << rank << " " << plan->training.params[p].spec.name;
      }
      if (run.wire_dtype) {
        EXPECT_THROW(executor.to_training(generation), std::logic_error) << tag;
      } else {
        const auto restored = executor.to_training(generation);
        for (std::size_t p = 0; p < full.size(); ++p) {
          ASSERT_EQ(restored[p].defined(), before[p].defined()) << tag;
          if (before[p].defined()) {
            EXPECT_TRUE(same_bits(restored[p], before[p]))
                << tag << " rank " << rank << " " << plan->training.params[p].spec.name;
          }
        }
      }
      const auto& bytes = executor.last_bytes();
      const auto& mine = plan->ranks[static_cast<std::size_t>(rank)];
      EXPECT_EQ(bytes.received, mine.bytes_received);
      EXPECT_EQ(bytes.sent, mine.bytes_sent);
      EXPECT_EQ(bytes.local, mine.bytes_local);
      recorder.end_run(probes::RunStatus::kCompleted);
    }
    std::int64_t total = 0;
    for (const auto& row : hs::test::query_rows(
             path, "SELECT s.value, c.bytes, c.group_size FROM comm_ops c JOIN strings s ON s.id = c.op_id "
                   "JOIN strings g ON g.id = c.group_id WHERE g.value = 'reshard'")) {
      const auto a = row.find('|'), b = row.rfind('|');
      total += received_bytes(row.substr(0, a), std::stoll(row.substr(a + 1, b - a - 1)), std::stoi(row.substr(b + 1)));
    }
    received[static_cast<std::size_t>(rank)] = total;
  });
  if (run.direct_messages) *run.direct_messages = direct.load();
  return received;
}

const std::vector<Case> kCases = {{1, 2, 2, 1}, {1, 4, 1, 2}, {2, 2, 1, 2}, {2, 1, 2, 1}, {1, 1, 4, 1}};
const std::vector<ReshardMode> kModes = {ReshardMode::kHybrid, ReshardMode::kVanilla, ReshardMode::kNaive};

std::string tag_of(const Case& c, ReshardMode m, DpSharding dp) {
  return "pp" + std::to_string(c.pp) + "tp" + std::to_string(c.tp) + "dp" + std::to_string(c.dp) + "tg" +
         std::to_string(c.t_g) + "_" + to_string(m) + (dp == DpSharding::kReplicated ? "_megatron" : "_fsdp");
}

// HybridFlow Table 2 (per rank; every parameter tp-split, balanced stages), measured from comm_ops.
TEST(ReshardExecutor, MeasuredReceivedBytesEqualClosedForm) {
  for (const Case& c : kCases) {
    for (DpSharding dp : {DpSharding::kReplicated, DpSharding::kSharded}) {
      for (ReshardMode mode : kModes) {
        const std::string tag = tag_of(c, mode, dp);
        auto plan = std::make_shared<const ReshardPlan>(plan_reshard(sharded_model(), {c.pp, c.tp, c.dp}, dp, c.t_g, mode));
        const std::int64_t M = plan->training.model_bytes(), tp = c.pp * c.tp, tpd = tp * c.dp;
        std::int64_t expected = 0;
        if (dp == DpSharding::kReplicated) {
          expected = mode == ReshardMode::kHybrid    ? (tp - c.t_g) * M / (c.t_g * tp)
                     : mode == ReshardMode::kVanilla ? (tp - 1) * M / tp
                                                     : (tpd - 1) * M / tpd;
        } else {
          expected = mode == ReshardMode::kHybrid ? M / c.t_g - M / tpd : M - M / tpd;
        }
        // Every piece packed (the sharded model's pieces are all below the default), and every
        // piece that is contiguous on both sides moved directly: the same bits, the same bytes.
        for (const std::int64_t direct_min : {ReshardExecutor::kDirectMinElements, std::int64_t{1}}) {
          const auto received = run_plan(plan, tag, {direct_min, std::nullopt, nullptr});
          for (std::size_t r = 0; r < received.size(); ++r)
            EXPECT_EQ(received[r], expected) << tag << " direct from " << direct_min << " elements, rank " << r;
        }
      }
    }
  }
}

// Which pieces move directly: on pp 2 × tp 2 → t_g 2 (hybrid) every piece is a whole layer's tp
// shard, contiguous on both sides, so with no size floor nothing is packed; vanilla assembles the
// full tensors, where the row-parallel weight's tp halves (split along dim 1) are not contiguous and
// ride in the packed buffers. The default floor packs all of this small model. Each split also in
// bf16 on the wire (the casts happen where the pieces are packed or sent).
TEST(ReshardExecutor, PiecesContiguousOnBothSidesMoveWithoutPacking) {
  std::vector<ParamSpec> bf16 = sharded_model();
  for (auto& p : bf16) p.element_size = 2;
  for (const auto& [mode, all_direct] : {std::pair{ReshardMode::kHybrid, true}, std::pair{ReshardMode::kVanilla, false}}) {
    for (const bool wire_bf16 : {false, true}) {
      const std::string tag = std::string("direct_") + to_string(mode) + (wire_bf16 ? "_bf16" : "_fp32");
      auto plan = std::make_shared<const ReshardPlan>(
          plan_reshard(wire_bf16 ? bf16 : sharded_model(), {2, 2, 1}, DpSharding::kReplicated, 2, mode));
      int recv_messages = 0;
      for (const auto& r : plan->ranks)
        for (const auto& t : r.recvs) recv_messages += static_cast<int>(t.pieces.size());
      RunOptions run{1, std::nullopt, nullptr};
      if (wire_bf16) run.wire_dtype = at::kBFloat16;
      int direct = -1;
      run.direct_messages = &direct;
      const auto received = run_plan(plan, tag, run);
      if (all_direct) {
        EXPECT_EQ(direct, recv_messages) << tag;
      } else {
        EXPECT_GT(direct, 0) << tag;
        EXPECT_LT(direct, recv_messages) << tag;
      }
      if (!wire_bf16) {
        for (std::size_t r = 0; r < received.size(); ++r) EXPECT_EQ(received[r], plan->ranks[r].bytes_received) << tag;
      }
      run.direct_min_elements = ReshardExecutor::kDirectMinElements;
      run_plan(plan, tag + "_packed", run);
      EXPECT_EQ(direct, 0) << tag;
    }
  }
}

// The real actor's parameters (replicated embedding and norms, unbalanced stages): bit-exact
// weights, and measured bytes equal to the plan's.
TEST(ReshardExecutor, LlamaActorWeightsAndBytesMatchThePlan) {
  for (const Case& c : kCases) {
    for (ReshardMode mode : kModes) {
      const std::string tag = "llama_" + tag_of(c, mode, DpSharding::kReplicated);
      auto plan = std::make_shared<const ReshardPlan>(
          plan_reshard(llama_parameters(tiny_llama()), {c.pp, c.tp, c.dp}, DpSharding::kReplicated, c.t_g, mode));
      const auto received = run_plan(plan, tag);
      for (std::size_t r = 0; r < received.size(); ++r) {
        EXPECT_EQ(received[r], plan->ranks[r].bytes_received) << tag << " rank " << r;
        // Only a world of pure dp replicas (tp·pp equal to what is assembled per rank) moves nothing.
        const bool moves = mode == ReshardMode::kNaive || c.pp * c.tp > (mode == ReshardMode::kHybrid ? c.t_g : 1);
        EXPECT_EQ(received[r] > 0, moves) << tag;
      }
    }
  }
}

// Rollout tp above training tp (generation shards inside training shards; rollout->train returns
// the kept training tensors).
TEST(ReshardExecutor, HybridWithRolloutTpAboveTrainingTp) {
  for (const auto& [c, dp] : {std::pair{Case{1, 1, 4, 2}, DpSharding::kSharded},
                              std::pair{Case{2, 1, 2, 2}, DpSharding::kReplicated}}) {
    const std::string tag = "nested_" + tag_of(c, ReshardMode::kHybrid, dp);
    auto plan = std::make_shared<const ReshardPlan>(
        plan_reshard(llama_parameters(tiny_llama()), {c.pp, c.tp, c.dp}, dp, c.t_g, ReshardMode::kHybrid));
    const auto received = run_plan(plan, tag);
    for (std::size_t r = 0; r < received.size(); ++r) {
      EXPECT_EQ(received[r], plan->ranks[r].bytes_received) << tag << " rank " << r;
      EXPECT_GT(received[r], 0) << tag;
    }
  }
}

// Qwen2 (q/k/v biases split with their rows) and Qwen3 (replicated q/k norms, head_dim 8 apart
// from hidden / heads) reshard bit for bit in every mode, on a tp and a pp/dp mesh.
TEST(ReshardExecutor, QwenActorsWeightsAndBytesMatchThePlan) {
  for (const auto arch : {ModelArchitecture::kQwen2, ModelArchitecture::kQwen3}) {
    ModelShape shape = tiny_llama();
    shape.architecture = arch;
    if (arch == ModelArchitecture::kQwen3) shape.explicit_head_dim = 8;
    for (const Case& c : {Case{1, 4, 1, 2}, Case{2, 2, 1, 1}}) {
      for (ReshardMode mode : kModes) {
        const std::string tag = std::string(to_string(arch)) + "_" + tag_of(c, mode, DpSharding::kReplicated);
        auto plan = std::make_shared<const ReshardPlan>(
            plan_reshard(llama_parameters(shape), {c.pp, c.tp, c.dp}, DpSharding::kReplicated, c.t_g, mode));
        const auto received = run_plan(plan, tag);
        for (std::size_t r = 0; r < received.size(); ++r) {
          EXPECT_EQ(received[r], plan->ranks[r].bytes_received) << tag << " rank " << r;
        }
      }
    }
  }
}

TEST(ReshardExecutor, ParameterSpecsOfTheModelEqualLlamaParameters) {
  for (const auto& [tied, arch] : {std::pair{false, ModelArchitecture::kLlama}, std::pair{true, ModelArchitecture::kLlama},
                                   std::pair{false, ModelArchitecture::kQwen2}, std::pair{true, ModelArchitecture::kQwen3}}) {
    ModelShape shape = tiny_llama();
    shape.tie_word_embeddings = tied;
    shape.architecture = arch;
    if (arch == ModelArchitecture::kQwen3) shape.explicit_head_dim = 8;
    ParallelContext ctx;
    ctx.tp = std::make_shared<ThreadCommunicator>(1, std::make_shared<ThreadGroup>(2), "tp");
    Transformer model(shape, HeadKind::kLm, ctx);  // rank 1 of tp 2: shards, global shapes restored
    const auto from_model = parameter_specs(*model);
    const auto expected = llama_parameters(shape);
    ASSERT_EQ(from_model.size(), expected.size());
    for (std::size_t i = 0; i < expected.size(); ++i) {
      EXPECT_EQ(from_model[i].name, expected[i].name);
      EXPECT_EQ(from_model[i].shape, expected[i].shape) << expected[i].name;
      EXPECT_EQ(from_model[i].tp_dim, expected[i].tp_dim) << expected[i].name;
      EXPECT_EQ(from_model[i].layer, expected[i].layer) << expected[i].name;
      EXPECT_EQ(from_model[i].tp_unit, expected[i].tp_unit) << expected[i].name;
      EXPECT_EQ(from_model[i].element_size, 4);
    }
  }
}

// The switch wiring: a tp=2 actor on two thread ranks reshards (hybrid, t_g = 1) into a full
// rollout model on each rank; the switch record carries the plan's bytes and rollout->train
// restores the actor's shards bit for bit.
TEST(ReshardExecutor, HybridSwitchReshardsTheActorIntoTheRolloutModel) {
  const ModelShape shape = tiny_llama();
  torch::manual_seed(3);
  Transformer full(shape, HeadKind::kLm);
  std::map<std::string, at::Tensor> full_params;
  for (const auto& item : full->named_parameters()) full_params[item.key()] = item.value().detach();
  auto plan = std::make_shared<const ReshardPlan>(
      plan_reshard(llama_parameters(shape), {1, 2, 1}, DpSharding::kReplicated, 1, ReshardMode::kHybrid));
  auto tp_group = std::make_shared<ThreadGroup>(2);
  run_thread_ranks(2, [&](int rank, GroupFactory& groups) {
    torch::NoGradGuard no_grad;
    ParallelContext ctx;
    ctx.tp = std::make_shared<ThreadCommunicator>(rank, tp_group, "tp");
    Transformer actor(shape, HeadKind::kLm, ctx);
    std::map<std::string, at::Tensor> expected_shards;
    for (std::size_t p = 0; p < plan->training.params.size(); ++p) {
      const std::string& name = plan->training.params[p].spec.name;
      expected_shards[name] = slice(full_params.at(name), *plan->training.box(p, rank));
    }
    for (auto& item : actor->named_parameters()) item.value().copy_(expected_shards.at(item.key()));
    Transformer rollout_model(shape, HeadKind::kLm);
    for (auto& item : rollout_model->named_parameters()) item.value().zero_();
    RolloutEngine rollout(rollout_model, /*eos=*/1, /*pad=*/0, /*block_size=*/4, /*num_blocks=*/8,
                          /*max_num_seqs=*/2, /*max_seq_len=*/16);
    HybridSwitch hybrid_switch(actor, rollout, /*free_cache_engine=*/true, probes::RunProbes::off());
    std::set<const void*> generation_storage;
    hybrid_switch.set_resharder(std::make_shared<ReshardExecutor>(plan, rank, groups),
                                [&](const std::vector<at::Tensor>& generation) {
                                  auto params = rollout_model->named_parameters();
                                  for (std::size_t p = 0; p < generation.size(); ++p) {
                                    params[plan->training.params[p].spec.name].copy_(generation[p]);
                                    generation_storage.insert(generation[p].data_ptr());
                                  }
                                });
    const auto to_rollout = hybrid_switch.to_rollout(1);
    const RankPlan& mine = plan->ranks[static_cast<std::size_t>(rank)];
    EXPECT_EQ(to_rollout.bytes_received, mine.bytes_received);
    EXPECT_EQ(to_rollout.bytes_sent, mine.bytes_sent);
    EXPECT_EQ(to_rollout.bytes_local, mine.bytes_local);
    EXPECT_GT(to_rollout.bytes_received, 0);
    for (const auto& item : rollout_model->named_parameters()) {
      EXPECT_TRUE(same_bits(item.value(), full_params.at(item.key()))) << "rank " << rank << " " << item.key();
    }
    // Where the training box is the generation box (the tp-replicated norms and embedding) the
    // executor hands out the actor's own tensor, no copy; everything else is a fresh tensor, so
    // disturbing the actor there shows whether restore_weights really copies back.
    for (auto& item : actor->named_parameters()) {
      const bool replicated = item.value().sizes() == full_params.at(item.key()).sizes();
      EXPECT_EQ(generation_storage.count(item.value().data_ptr()) == 1, replicated) << item.key();
      if (!replicated) item.value().add_(1.0);
    }
    const auto to_train = hybrid_switch.to_train(1);
    bool restored_component = false;
    for (const auto& [name, ns] : to_train.components) restored_component |= std::string(name) == "restore_weights";
    EXPECT_TRUE(restored_component);
    for (const auto& item : actor->named_parameters()) {
      EXPECT_TRUE(same_bits(item.value(), expected_shards.at(item.key()))) << "rank " << rank << " " << item.key();
    }
  });
}

TEST(ReshardExecutor, ReceivedBytesFollowNcclTestsConvention) {
  EXPECT_EQ(received_bytes("all_gather", 400, 4), 300);
  EXPECT_EQ(received_bytes("reduce_scatter", 400, 4), 300);
  EXPECT_EQ(received_bytes("all_reduce", 400, 4), 600);
  EXPECT_EQ(received_bytes("recv", 52, 4), 52);
  EXPECT_EQ(received_bytes("send", 52, 4), 0);
  EXPECT_EQ(received_bytes("barrier", 0, 4), 0);
  EXPECT_THROW(received_bytes("all_to_all", 1, 2), std::invalid_argument);
}

}  // namespace
}  // namespace hs::trainer
