// reshard_plan_test.cpp — the device mesh, the layouts and the reshard planner, without
// processes or tensors: rank order, boxes, HybridFlow's rank grouping, Table 2's byte volumes
// per rank for every (training layout, t_g) pair and mode, exact covers (nothing received or kept
// twice) and the shapes the planner must reject.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "hybridscope/trainer/hybrid/reshard_planner.h"

#include "hybrid/reshard_fixtures.h"

namespace hs::trainer {
namespace {

using test::sharded_model;
using test::tiny_llama;

struct Case {
  int pp, tp, dp, t_g;
};
// The (pp, tp, dp) / t_g pairs of issue 4 plus (1,4,2)/2 (micro-DP groups inside 2 replicas).
const std::vector<Case> kCases = {{1, 1, 2, 1}, {1, 1, 4, 1}, {1, 2, 1, 1}, {1, 2, 2, 1}, {1, 4, 1, 1},
                                  {1, 4, 1, 2}, {2, 1, 2, 1}, {2, 2, 1, 1}, {2, 2, 1, 2}, {1, 4, 2, 2}};
const std::vector<ReshardMode> kModes = {ReshardMode::kHybrid, ReshardMode::kVanilla, ReshardMode::kNaive};

std::string name(const Case& c, ReshardMode m, DpSharding dp) {
  return "pp=" + std::to_string(c.pp) + " tp=" + std::to_string(c.tp) + " dp=" + std::to_string(c.dp) +
         " t_g=" + std::to_string(c.t_g) + " " + to_string(m) +
         (dp == DpSharding::kReplicated ? " megatron" : " fsdp");
}

// Every element of each assembled box is filled exactly once, by a local piece or a received
// one; every sent piece lies in the sender's training shard; sends and receives pair up.
void expect_exact_cover(const ReshardPlan& plan, const std::string& what) {
  const int world = plan.training.world();
  for (int r = 0; r < world; ++r) {
    const RankPlan& rp = plan.ranks[static_cast<std::size_t>(r)];
    std::map<std::size_t, std::vector<Box>> filled;
    for (const Piece& piece : rp.local) filled[piece.param].push_back(piece.box);
    for (const Transfer& t : rp.recvs) {
      for (const Piece& piece : t.pieces) filled[piece.param].push_back(piece.box);
    }
    for (std::size_t p = 0; p < plan.training.params.size(); ++p) {
      const auto& assembled = rp.assembled[p];
      const auto& pieces = filled[p];
      std::int64_t volume = 0;
      for (std::size_t a = 0; a < pieces.size(); ++a) {
        ASSERT_TRUE(assembled && contains(*assembled, pieces[a])) << what << " rank " << r;
        volume += pieces[a].numel();
        for (std::size_t b = a + 1; b < pieces.size(); ++b) {
          EXPECT_FALSE(intersect(pieces[a], pieces[b]).has_value())
              << what << ": rank " << r << " gets part of " << plan.training.params[p].spec.name << " twice";
        }
      }
      EXPECT_EQ(volume, assembled ? assembled->numel() : 0) << what << " rank " << r << " param " << p;
    }
    for (const Transfer& t : rp.sends) {
      for (const Piece& piece : t.pieces) {
        const auto held = plan.training.box(piece.param, r);
        ASSERT_TRUE(held && contains(*held, piece.box)) << what << ": rank " << r << " sends what it does not hold";
      }
      const RankPlan& peer = plan.ranks[static_cast<std::size_t>(t.peer)];
      auto it = std::find_if(peer.recvs.begin(), peer.recvs.end(), [&](const Transfer& x) { return x.peer == r; });
      ASSERT_NE(it, peer.recvs.end()) << what;
      EXPECT_EQ(it->bytes, t.bytes) << what;
      ASSERT_EQ(it->pieces.size(), t.pieces.size()) << what;
      for (std::size_t i = 0; i < t.pieces.size(); ++i) EXPECT_EQ(it->pieces[i].box, t.pieces[i].box) << what;
    }
  }
}

TEST(DeviceMesh, MegatronOrderIsTpFastestThenDpThenPp) {
  const MeshShape mesh{2, 2, 2};
  EXPECT_EQ(mesh.world(), 8);
  // rank = tp + 2 * (dp + 2 * pp)
  EXPECT_EQ(megatron_coord(mesh, 0), (MeshCoord{0, 0, 0}));
  EXPECT_EQ(megatron_coord(mesh, 1), (MeshCoord{0, 1, 0}));
  EXPECT_EQ(megatron_coord(mesh, 2), (MeshCoord{0, 0, 1}));
  EXPECT_EQ(megatron_coord(mesh, 5), (MeshCoord{1, 1, 0}));
  EXPECT_EQ(megatron_coord(mesh, 7), (MeshCoord{1, 1, 1}));
  for (int r = 0; r < 8; ++r) EXPECT_EQ(megatron_rank(mesh, megatron_coord(mesh, r)), r);
  EXPECT_THROW(megatron_coord(mesh, 8), LayoutError);
}

TEST(Layouts, TrainingBoxesFollowStagesAndSplits) {
  const auto params = llama_parameters(tiny_llama());
  const LayoutSet l = training_layout(params, {2, 2, 1}, DpSharding::kReplicated);
  auto index = [&](const std::string& n) {
    return static_cast<std::size_t>(std::find_if(params.begin(), params.end(), [&](auto& p) { return p.name == n; }) -
                                    params.begin());
  };
  // Embedding on stage 0 (ranks 0, 1), replicated over tp.
  EXPECT_EQ(l.box(index("model.embed_tokens.weight"), 1), full_box({16, 16}));
  EXPECT_FALSE(l.box(index("model.embed_tokens.weight"), 2).has_value());
  // Layer 1 and the LM head on stage 1 (ranks 2, 3); q column-parallel, o row-parallel.
  EXPECT_FALSE(l.box(index("model.layers.1.self_attn.q_proj.weight"), 0).has_value());
  EXPECT_EQ(l.box(index("model.layers.1.self_attn.q_proj.weight"), 3), (Box{{{8, 16}, {0, 16}}}));
  EXPECT_EQ(l.box(index("model.layers.0.self_attn.o_proj.weight"), 1), (Box{{{0, 16}, {8, 16}}}));
  EXPECT_EQ(l.box(index("lm_head.weight"), 2), (Box{{{0, 8}, {0, 16}}}));
  // fsdp: each tp shard's rows split over dp.
  const LayoutSet f = training_layout(params, {1, 2, 2}, DpSharding::kSharded);
  EXPECT_EQ(f.box(index("model.layers.0.mlp.up_proj.weight"), 3), (Box{{{24, 32}, {0, 16}}}));  // tp 1, dp 1
  EXPECT_EQ(f.box(index("model.layers.0.mlp.down_proj.weight"), 2), (Box{{{8, 16}, {0, 16}}}));  // tp 0, dp 1
  EXPECT_EQ(f.box(index("model.norm.weight"), 1), (Box{{{0, 8}}}));
}

TEST(Layouts, HybridGroupingPutsEachTrainingShardInsideItsGenerationShard) {
  // HybridFlow Fig. 8: t = 4, t_g = 2 -> generation TP groups {0,2}, {1,3} (stride t/t_g = 2),
  // micro-DP groups {0,1}, {2,3} (consecutive).
  const LayoutSet t = training_layout(sharded_model(), {1, 4, 1}, DpSharding::kReplicated);
  const LayoutSet g = generation_layout(t, 2, ReshardMode::kHybrid);
  std::map<int, std::set<int>> tp_groups, micro_dp;
  for (int r = 0; r < 4; ++r) {
    tp_groups[g.coords[static_cast<std::size_t>(r)].dp].insert(r);
    micro_dp[g.coords[static_cast<std::size_t>(r)].tp].insert(r);
  }
  EXPECT_EQ(tp_groups, (std::map<int, std::set<int>>{{0, {0, 2}}, {1, {1, 3}}}));
  EXPECT_EQ(micro_dp, (std::map<int, std::set<int>>{{0, {0, 1}}, {1, {2, 3}}}));
  // Vanilla keeps consecutive generation TP groups.
  const LayoutSet v = generation_layout(t, 2, ReshardMode::kVanilla);
  EXPECT_EQ(v.coords[1].dp, 0);
  EXPECT_EQ(v.coords[1].tp, 1);
  for (const Case& c : kCases) {
    const LayoutSet tl = training_layout(sharded_model(), {c.pp, c.tp, c.dp}, DpSharding::kSharded);
    const LayoutSet gl = generation_layout(tl, c.t_g, ReshardMode::kHybrid);
    std::set<std::pair<int, int>> seen;
    for (int r = 0; r < tl.world(); ++r) {
      seen.insert({gl.coords[static_cast<std::size_t>(r)].tp, gl.coords[static_cast<std::size_t>(r)].dp});
      for (std::size_t p = 0; p < tl.params.size(); ++p) {
        if (auto tb = tl.box(p, r)) {
          EXPECT_TRUE(contains(*gl.box(p, r), *tb)) << name(c, ReshardMode::kHybrid, DpSharding::kSharded);
        }
      }
    }
    EXPECT_EQ(static_cast<int>(seen.size()), tl.world()) << "the generation coordinates are a permutation";
  }
}

// HybridFlow Table 2 per rank (every parameter tp-split, balanced stages; M model bytes, tp
// meaning t·p): megatron hybrid (tp - t_g)/(t_g·tp)·M, vanilla (tp-1)/tp·M, naive (tpd-1)/(tpd)·M;
// fsdp (each rank holds M/(tpd)): hybrid M/t_g - M/(tpd), vanilla and naive M - M/(tpd).
// Peak parameter memory: hybrid M/t_g, vanilla and naive M.
TEST(ReshardPlanner, ReceivedBytesPerRankEqualHybridFlowTable2) {
  for (const Case& c : kCases) {
    for (DpSharding dp : {DpSharding::kReplicated, DpSharding::kSharded}) {
      for (ReshardMode mode : kModes) {
        const std::string what = name(c, mode, dp);
        const ReshardPlan plan = plan_reshard(sharded_model(), {c.pp, c.tp, c.dp}, dp, c.t_g, mode);
        const std::int64_t M = plan.training.model_bytes();
        const std::int64_t tp = c.tp * c.pp, tpd = tp * c.dp;
        std::int64_t expected = 0;
        if (dp == DpSharding::kReplicated) {
          expected = mode == ReshardMode::kHybrid    ? (tp - c.t_g) * M / (c.t_g * tp)
                     : mode == ReshardMode::kVanilla ? (tp - 1) * M / tp
                                                     : (tpd - 1) * M / tpd;
        } else {
          expected = mode == ReshardMode::kHybrid ? M / c.t_g - M / tpd : M - M / tpd;
        }
        const std::int64_t peak = mode == ReshardMode::kHybrid ? M / c.t_g : M;
        std::int64_t sent = 0;
        for (int r = 0; r < plan.training.world(); ++r) {
          const RankPlan& rp = plan.ranks[static_cast<std::size_t>(r)];
          EXPECT_EQ(rp.bytes_received, expected) << what << " rank " << r;
          EXPECT_EQ(rp.peak_parameter_bytes, peak) << what << " rank " << r;
          EXPECT_EQ(rp.bytes_received + rp.bytes_local, mode == ReshardMode::kHybrid ? M / c.t_g : M) << what;
          EXPECT_EQ(rp.generation_bytes, M / c.t_g) << what;
          if (mode == ReshardMode::kHybrid) {
            EXPECT_EQ(rp.redundant_bytes, 0) << what << ": hybrid keeps nothing twice";
            EXPECT_EQ(rp.bytes_local, rp.training_bytes) << what << ": the whole training shard is reused";
          }
          sent += rp.bytes_sent;
        }
        EXPECT_EQ(sent, expected * plan.training.world()) << what;
        expect_exact_cover(plan, what);
      }
    }
  }
}

// reshard_traffic (the simulator's byte counts, no pieces) walks the plan plan_reshard keeps: every
// per-rank total and every per-peer byte count equals the plan's, on every case, both dp
// shardings and every mode, for the real actor (unbalanced stages, replicated embedding); its
// packed bytes are the plan's pieces that the executor's rule does not move directly. Returns the
// bytes of the direct and of the packed pieces over all cases.
std::pair<std::int64_t, std::int64_t> check_traffic_equals_plan(const std::vector<ParamSpec>& params) {
  std::int64_t direct_total = 0, packed_total = 0;
  for (const Case& c : kCases) {
    for (DpSharding dp : {DpSharding::kReplicated, DpSharding::kSharded}) {
      for (ReshardMode mode : kModes) {
        const std::string what = name(c, mode, dp);
        const ReshardPlan plan = plan_reshard(params, {c.pp, c.tp, c.dp}, dp, c.t_g, mode);
        const ReshardTraffic traffic = reshard_traffic(params, {c.pp, c.tp, c.dp}, dp, c.t_g, mode);
        EXPECT_EQ(traffic.ranks.size(), plan.ranks.size()) << what;
        if (traffic.ranks.size() != plan.ranks.size()) continue;
        EXPECT_EQ(traffic.model_bytes, plan.training.model_bytes()) << what;
        for (std::size_t r = 0; r < plan.ranks.size(); ++r) {
          const RankPlan& p = plan.ranks[r];
          const RankTraffic& t = traffic.ranks[r];
          EXPECT_EQ(t.bytes_sent, p.bytes_sent) << what << " rank " << r;
          EXPECT_EQ(t.bytes_received, p.bytes_received) << what << " rank " << r;
          EXPECT_EQ(t.bytes_local, p.bytes_local) << what << " rank " << r;
          EXPECT_EQ(t.training_bytes, p.training_bytes) << what << " rank " << r;
          EXPECT_EQ(t.generation_bytes, p.generation_bytes) << what << " rank " << r;
          EXPECT_EQ(t.peak_parameter_bytes, p.peak_parameter_bytes) << what << " rank " << r;
          EXPECT_EQ(t.redundant_bytes, p.redundant_bytes) << what << " rank " << r;
          std::vector<std::pair<int, std::int64_t>> sends, recvs;
          for (const Transfer& x : p.sends) sends.emplace_back(x.peer, x.bytes);
          for (const Transfer& x : p.recvs) recvs.emplace_back(x.peer, x.bytes);
          EXPECT_EQ(t.sent_to, sends) << what << " rank " << r;
          EXPECT_EQ(t.received_from, recvs) << what << " rank " << r;
        }
        std::vector<std::int64_t> packed_sent(plan.ranks.size(), 0), packed_received(plan.ranks.size(), 0);
        for (std::size_t r = 0; r < plan.ranks.size(); ++r) {
          for (const Transfer& x : plan.ranks[r].recvs) {
            for (const Piece& piece : x.pieces) {
              const std::int64_t bytes = piece.box.numel() * plan.training.params[piece.param].spec.element_size;
              const bool direct = moves_directly(*plan.training.box(piece.param, x.peer),
                                                 *plan.ranks[r].assembled[piece.param], piece.box);
              (direct ? direct_total : packed_total) += bytes;
              if (direct) continue;
              packed_received[r] += bytes;
              packed_sent[static_cast<std::size_t>(x.peer)] += bytes;
            }
          }
        }
        for (std::size_t r = 0; r < plan.ranks.size(); ++r) {
          EXPECT_EQ(traffic.ranks[r].packed_bytes_sent, packed_sent[r]) << what << " rank " << r;
          EXPECT_EQ(traffic.ranks[r].packed_bytes_received, packed_received[r]) << what << " rank " << r;
        }
      }
    }
  }
  return {direct_total, packed_total};
}

TEST(ReshardPlanner, TrafficEqualsThePlansByteCounts) {
  // The tiny actor's pieces are all below the executor's floor: everything is packed.
  EXPECT_EQ(check_traffic_equals_plan(llama_parameters(tiny_llama())).first, 0);
  // Wide enough that both kinds occur (a 256 × 256 projection is 16384 elements per rank at tp 4).
  ModelShape wide = tiny_llama();
  wide.hidden_size = 256;
  wide.intermediate_size = 512;
  wide.vocab_size = 64;
  const auto [direct, packed] = check_traffic_equals_plan(llama_parameters(wide));
  EXPECT_GT(direct, 0);
  EXPECT_GT(packed, 0);
}

// Contiguity of a box inside another (row-major): whole trailing dims, then one partial dim, then
// dims of size 1.
TEST(ReshardPlanner, ContiguousWithinFollowsRowMajorOrder) {
  const Box outer{{{0, 4}, {0, 6}, {0, 8}}};
  EXPECT_TRUE(contiguous_within(outer, outer));
  EXPECT_TRUE(contiguous_within(outer, Box{{{1, 3}, {0, 6}, {0, 8}}}));   // rows of whole planes
  EXPECT_TRUE(contiguous_within(outer, Box{{{2, 3}, {1, 4}, {0, 8}}}));   // one plane, whole rows
  EXPECT_TRUE(contiguous_within(outer, Box{{{2, 3}, {1, 2}, {3, 5}}}));   // part of one row
  EXPECT_FALSE(contiguous_within(outer, Box{{{1, 3}, {1, 4}, {0, 8}}}));  // rows of two planes
  EXPECT_FALSE(contiguous_within(outer, Box{{{0, 4}, {0, 6}, {0, 4}}}));  // half of every row
  EXPECT_FALSE(moves_directly(outer, outer, Box{{{2, 3}, {1, 2}, {3, 5}}}));  // below the floor
  EXPECT_TRUE(moves_directly(outer, outer, Box{{{2, 3}, {1, 2}, {3, 5}}}, 2));
}

// The real actor (tp-replicated embedding and norms, unbalanced stages): received bytes per rank
// equal an element-by-element count of "assembled but not contributed by this rank", computed
// here without boxes.
TEST(ReshardPlanner, LlamaReceivedBytesEqualElementCount) {
  const auto params = llama_parameters(tiny_llama());
  for (const Case& c : kCases) {
    for (DpSharding dp : {DpSharding::kReplicated, DpSharding::kSharded}) {
      for (ReshardMode mode : kModes) {
        const std::string what = name(c, mode, dp);
        const ReshardPlan plan = plan_reshard(params, {c.pp, c.tp, c.dp}, dp, c.t_g, mode);
        const int world = plan.training.world();
        for (int r = 0; r < world; ++r) {
          const MeshCoord tc = plan.training.coords[static_cast<std::size_t>(r)];
          const MeshCoord gc = plan.generation.coords[static_cast<std::size_t>(r)];
          std::int64_t expected = 0;
          for (std::size_t p = 0; p < params.size(); ++p) {
            const ParamLayout& tl = plan.training.params[p];
            const auto& shape = params[p].shape;
            const std::int64_t rows = shape[0], cols = shape.size() > 1 ? shape[1] : 1;
            for (std::int64_t i = 0; i < rows; ++i) {
              for (std::int64_t j = 0; j < cols; ++j) {
                const std::int64_t idx[2] = {i, j};
                // Generation: tp block of the split dim.
                bool wanted = true;
                if (mode == ReshardMode::kHybrid && plan.generation.params[p].tp_dim >= 0) {
                  const int d = plan.generation.params[p].tp_dim;
                  wanted = idx[d] / (shape[static_cast<std::size_t>(d)] / c.t_g) == gc.tp;
                }
                if (!wanted) continue;
                // What this rank contributes: its stage, tp block, and (fsdp or naive) row block.
                bool own = tl.stage == tc.pp;
                std::int64_t row_lo = 0, row_n = rows;
                if (own && tl.tp_dim >= 0) {
                  const std::int64_t n = shape[static_cast<std::size_t>(tl.tp_dim)] / c.tp;
                  own = idx[tl.tp_dim] / n == tc.tp;
                  if (tl.tp_dim == 0) row_lo = tc.tp * n, row_n = n;
                }
                if (own && (tl.dp_dim == 0 || mode == ReshardMode::kNaive)) {
                  own = (i - row_lo) / (row_n / c.dp) == tc.dp;
                }
                if (!own) expected += params[p].element_size;
              }
            }
          }
          EXPECT_EQ(plan.ranks[static_cast<std::size_t>(r)].bytes_received, expected) << what << " rank " << r;
        }
        expect_exact_cover(plan, what);
      }
    }
  }
}

// Rollout tp above training tp (verl's usual fsdp + rollout tp 2): the generation shards nest
// inside the training shards, so a megatron rank already holds its own stage's generation shard.
TEST(ReshardPlanner, HybridWithRolloutTpAboveTrainingTp) {
  const std::int64_t M = training_layout(sharded_model(), {1, 1, 1}, DpSharding::kReplicated).model_bytes();
  struct Nested {
    Case c;
    DpSharding dp;
    std::int64_t received, peak;
  };
  // (1,1,4) fsdp -> 2: rank j holds row block j; its generation half j/2 contains that block of the
  // column-parallel half of M and 1/8 of the row-parallel half: M/2 - (M/8 + M/16) = 5M/16; the
  // other M/16 of its rows stays outside the generation shard: peak M/2 + M/16.
  const std::vector<Nested> cases = {{{1, 1, 4, 2}, DpSharding::kReplicated, 0, M},
                                     {{1, 2, 2, 4}, DpSharding::kReplicated, 0, M / 2},
                                     {{2, 1, 2, 2}, DpSharding::kReplicated, M / 2 - M / 4, M / 2 + M / 4},
                                     {{1, 1, 4, 2}, DpSharding::kSharded, 5 * M / 16, 9 * M / 16}};
  for (const auto& n : cases) {
    const std::string what = name(n.c, ReshardMode::kHybrid, n.dp);
    const ReshardPlan plan = plan_reshard(sharded_model(), {n.c.pp, n.c.tp, n.c.dp}, n.dp, n.c.t_g, ReshardMode::kHybrid);
    for (int r = 0; r < plan.training.world(); ++r) {
      EXPECT_EQ(plan.ranks[static_cast<std::size_t>(r)].bytes_received, n.received) << what << " rank " << r;
      EXPECT_EQ(plan.ranks[static_cast<std::size_t>(r)].peak_parameter_bytes, n.peak) << what << " rank " << r;
    }
    expect_exact_cover(plan, what);
  }
}

TEST(ReshardPlanner, RejectsShapesThatCannotBeLaidOut) {
  auto message = [](auto&& fn) {
    try {
      fn();
    } catch (const LayoutError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::vector<ParamSpec> odd = {{"w", {6, 8}, 4, 0, 0}};
  EXPECT_NE(message([&] { training_layout(odd, {1, 4, 1}, DpSharding::kReplicated); }).find("w: dim 0 (size 6)"),
            std::string::npos);
  EXPECT_NE(message([&] { training_layout(odd, {1, 1, 4}, DpSharding::kSharded); }).find("dp"), std::string::npos);
  // Naive's DS-Chat contributions are row blocks of the training shard, uneven when dp does not
  // divide the rows (6 rows over 4 ranks: 1, 2, 1, 2), still an exact cover.
  const ReshardPlan naive = plan_reshard(odd, {1, 1, 4}, DpSharding::kReplicated, 1, ReshardMode::kNaive);
  EXPECT_EQ(naive.ranks[0].bytes_received, (6 - 1) * 8 * 4);
  EXPECT_EQ(naive.ranks[1].bytes_received, (6 - 2) * 8 * 4);
  expect_exact_cover(naive, "naive uneven");
  // Whole heads per rank: 3 heads of 8 do not split over tp 2 although 24 rows would.
  const std::vector<ParamSpec> heads = {{"q", {24, 8}, 4, 0, 0, 8}};
  EXPECT_NE(message([&] { training_layout(heads, {1, 2, 1}, DpSharding::kReplicated); }).find("3 heads of 8"),
            std::string::npos);
  EXPECT_NE(message([&] { training_layout(sharded_model(), {3, 1, 1}, DpSharding::kReplicated); })
                .find("pipeline_model_parallel_size"),
            std::string::npos);
  const LayoutSet t = training_layout(sharded_model(), {1, 2, 2}, DpSharding::kReplicated);
  const std::vector<ParamSpec> six = {{"w", {12, 12}, 4, 0, 0}};
  const LayoutSet t6 = training_layout(six, {1, 2, 3}, DpSharding::kReplicated);
  EXPECT_NE(message([&] { generation_layout(t6, 3, ReshardMode::kHybrid); }).find("reshard.mode=vanilla"),
            std::string::npos);
  EXPECT_NO_THROW(generation_layout(t6, 3, ReshardMode::kVanilla));
  EXPECT_NE(message([&] { generation_layout(t, 3, ReshardMode::kVanilla); }).find("must divide the world size 4"),
            std::string::npos);
}

}  // namespace
}  // namespace hs::trainer
