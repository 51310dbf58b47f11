// projection_data_test.cpp — the viewer's reader of `hybridscope simulate --json` files on two real
// outputs (tests/viewer/data: qwen7b-h100.json, the 8..1024-rank H100 projection with a 64-rank
// layout search, and demo-cpu.json, ranks 1, 2, 4 on this machine; the .txt beside them in
// docs/simulator.md reads the same numbers), on broken files (the error names the file and the
// field), and the charts built from them. Expected values are copied from the JSON files.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "hybridscope/viewer/projection_data.h"

namespace hs::viewer {
namespace {

const std::string kData = HS_VIEWER_TEST_DATA;

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The message of the ProjectionError that parsing `text` throws; "" when it parses.
std::string parse_error(const std::string& text) {
  try {
    parse_projection(text, "broken.json");
  } catch (const ProjectionError& e) {
    return e.what();
  }
  return "";
}

const LineSeries* series_named(const LineChartData& chart, const std::string& name) {
  for (const auto& s : chart.series)
    if (s.name == name) return &s;
  return nullptr;
}

TEST(ProjectionData, ReadsTheH100ProjectionWithItsRefusalsAndSearch) {
  const Projection p = load_projection(kData + "/qwen7b-h100.json");
  EXPECT_EQ(p.hardware, "h100-sxm-ib");
  EXPECT_EQ(p.layout, "fsdp dp 8 -> rollout tp 2, hybrid");
  EXPECT_EQ(p.key(), "h100-sxm-ib | fsdp dp 8 -> rollout tp 2, hybrid");
  EXPECT_EQ(p.model.at("hidden_size"), 3584.0);
  EXPECT_EQ(p.prompts, 1024);
  EXPECT_EQ(p.samples_per_prompt, 5);
  EXPECT_EQ(p.response_length, 1024.0);
  EXPECT_DOUBLE_EQ(p.efficiency.at("train_compute"), 0.4);
  ASSERT_EQ(p.assumptions.size(), 9u);
  EXPECT_EQ(p.assumptions[5].rfind("communication is never overlapped", 0), 0u);

  ASSERT_EQ(p.sizes.size(), 8u);  // 8, 16, ..., 1024
  EXPECT_EQ(p.sizes.front().ranks, 8);
  EXPECT_FALSE(p.sizes.front().feasible);
  EXPECT_EQ(p.sizes.front().refusal.rfind("generation needs 80.2 GB per rank > 80.0 GB", 0), 0u);
  EXPECT_EQ(p.sizes.back().ranks, 1024);
  EXPECT_FALSE(p.sizes.back().feasible);
  EXPECT_NE(p.sizes.back().refusal.find("cannot lay out model.embed_tokens.weight"), std::string::npos);

  const ProjectedSize& s16 = p.sizes[1];
  EXPECT_EQ(s16.ranks, 16);
  ASSERT_TRUE(s16.feasible);
  EXPECT_DOUBLE_EQ(s16.step_s(), 114.73447986978405);
  EXPECT_DOUBLE_EQ(s16.phase("gen"), 19.763901928095105);
  EXPECT_DOUBLE_EQ(s16.phase("no such phase"), 0.0);
  // Peak = max(training_peak 60670083072, generation_peak 57429736448).
  EXPECT_DOUBLE_EQ(s16.peak_memory_bytes(), 60670083072.0);
  EXPECT_DOUBLE_EQ(s16.capacity_bytes(), 80e9);
  EXPECT_DOUBLE_EQ(s16.tokens_per_s_per_device, 4283.978108044263);
  EXPECT_DOUBLE_EQ(s16.mfu_actor, 0.3848113266873357);
  EXPECT_DOUBLE_EQ(s16.strong_efficiency, 1.0);
  ASSERT_TRUE(s16.weak_efficiency.has_value());
  EXPECT_DOUBLE_EQ(*s16.weak_efficiency, 1.0);
  EXPECT_DOUBLE_EQ(p.sizes[2].strong_efficiency, 0.9368692649545197);

  ASSERT_EQ(p.search.size(), 90u);
  EXPECT_EQ(p.search.front().ranks, 64);
  EXPECT_EQ(p.search.front().layout, "megatron tp 2 pp 1 dp 32 -> rollout tp 4, hybrid");
  EXPECT_DOUBLE_EQ(p.search.front().step_s(), 32.064035756033974);
  EXPECT_EQ(p.search.front().why, "update_actor 50%, gen 22%; peak 56.8 GB");
  EXPECT_FALSE(p.search.back().feasible);
  EXPECT_EQ(p.search.back().refusal.rfind("training needs 100.7 GB per rank > 80.0 GB", 0), 0u);
}

TEST(ProjectionData, ReadsTheCpuProjectionWithoutASearch) {
  const Projection p = load_projection(kData + "/demo-cpu.json");
  EXPECT_EQ(p.hardware, "cpu-local");
  ASSERT_EQ(p.sizes.size(), 3u);
  EXPECT_EQ(p.sizes[2].ranks, 4);
  EXPECT_DOUBLE_EQ(p.sizes[2].step_s(), 0.1714981345105037);
  EXPECT_DOUBLE_EQ(*p.sizes[1].weak_step_s, 0.642928433302332);
  EXPECT_DOUBLE_EQ(*p.sizes[1].weak_efficiency, 0.9174339350462274);
  EXPECT_TRUE(p.search.empty());
}

// split-one-step-off-cpu.json: the demo model as async-split-cpu.yaml's one_step_off cell (rank 1
// generates), calibrated on that matrix, at 2 and 4 ranks:
//   hybridscope simulate --hardware bench/hardware/cpu-local.yaml --config configs/demo_grpo.yaml \
//     --calibrate out/async-split.sqlite --comm-bench out/comm-bench.json --ranks 2,4 --json FILE \
//     hybridscope.warmup.steps=0 data.train_batch_size=16 actor_rollout_ref.rollout.n=4 \
//     actor_rollout_ref.actor.ppo_mini_batch_size=16 actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=64 \
//     actor_rollout_ref.actor.strategy=fsdp actor_rollout_ref.hybrid_engine=false \
//     hybridscope.placement.rollout=[1] hybridscope.async_mode=one_step_off hybridscope.num_threads=1
TEST(ProjectionData, ReadsASplitPoolsTermsAndNoneForAColocatedProjection) {
  const Projection p = load_projection(kData + "/split-one-step-off-cpu.json");
  ASSERT_TRUE(p.split_pool.has_value());
  EXPECT_EQ(p.split_pool->async_mode, "one_step_off");
  EXPECT_EQ(p.split_pool->rollout_ranks, 1);
  EXPECT_EQ(p.split_pool->trigger_parameter_sync_step, 4);
  EXPECT_DOUBLE_EQ(p.split_pool->staleness_threshold, 0.1);
  ASSERT_EQ(p.sizes.size(), 2u);
  ASSERT_TRUE(p.sizes[0].split_pool.has_value());
  const ProjectedSplitPool& two = *p.sizes[0].split_pool;
  EXPECT_EQ(two.rollout_ranks, 1);
  EXPECT_EQ(two.actor_ranks, 1);
  EXPECT_EQ(two.bound, "train");
  EXPECT_DOUBLE_EQ(two.rollout_pipeline_s, 0.02526465637865368);
  EXPECT_DOUBLE_EQ(two.train_pipeline_s, 0.042331111756104656);
  EXPECT_DOUBLE_EQ(two.handoff_s, 0.0003061447812500001);
  EXPECT_DOUBLE_EQ(two.sync_s, 0.0016729416818799389);
  EXPECT_DOUBLE_EQ(two.gen_wait_s, 0.0003061447812500001);
  // one_step_off: step = max(G, T) + H + S.
  EXPECT_NEAR(p.sizes[0].step_s(), two.train_pipeline_s + two.handoff_s + two.sync_s, 1e-15);
  EXPECT_EQ(p.sizes[1].split_pool->rollout_ranks, 2);  // the pool's half of 4 ranks
  EXPECT_EQ(describe_split_pool(two),
            "train-bound: the pool's generation 25.3 ms (1 rank) against training 42.3 ms (1 rank); hand-over "
            "306 µs, sync 1.67 ms (1.67 ms per step); the actor waits 306 µs for each batch");

  // A colocated projection carries none: absent, not zeros.
  const Projection colocated = load_projection(kData + "/demo-cpu.json");
  EXPECT_FALSE(colocated.split_pool.has_value());
  for (const auto& size : colocated.sizes) EXPECT_FALSE(size.split_pool.has_value());

  // A bound that is neither pipeline is an error naming the field.
  std::string text = read_text(kData + "/split-one-step-off-cpu.json");
  const auto bound = text.find("\"bound\": \"train\"");
  ASSERT_NE(bound, std::string::npos);
  text.replace(bound, 16, "\"bound\": \"sync\"");
  const std::string e = parse_error(text);
  EXPECT_NE(e.find("broken.json: sizes[0].split_pool.bound: is \"sync\", expected rollout or train"), std::string::npos) << e;
}

TEST(ProjectionData, ErrorsNameTheFileAndTheField) {
  const std::string good = read_text(kData + "/demo-cpu.json");
  ASSERT_FALSE(good.empty());
  ASSERT_EQ(parse_error(good), "");

  // step_s of the second size removed: "sizes[1].phases_s.step_s".
  std::string no_step = good;
  const auto second = no_step.find("\"ranks\": 2");
  ASSERT_NE(second, std::string::npos);
  const auto step = no_step.rfind("\"step_s\"", second);
  ASSERT_NE(step, std::string::npos);
  no_step.replace(step, 8, "\"stepXs\"");
  std::string e = parse_error(no_step);
  EXPECT_EQ(e.rfind("broken.json: sizes[1].phases_s.step_s: missing", 0), 0u) << e;

  // A number where a string belongs.
  std::string bad_type = good;
  const auto hw = bad_type.find("\"hardware\": \"cpu-local\"");
  ASSERT_NE(hw, std::string::npos);
  bad_type.replace(hw, 23, "\"hardware\": 7");
  e = parse_error(bad_type);
  EXPECT_NE(e.find("broken.json: hardware: is number, expected a string"), std::string::npos) << e;

  // A feasible size without its memory, a size that is not an object, no sizes at all, not JSON.
  e = parse_error(R"({"hardware":"h","layout":"l","model":{},"batch":{"prompts":1,"samples_per_prompt":1,
      "prompt_length":1,"response_length":1},"efficiency":{},"assumptions":[],
      "sizes":[{"ranks":1,"feasible":true,"phases_s":{"step_s":1}}, 3]})");
  EXPECT_NE(e.find("sizes[0].memory_bytes: missing"), std::string::npos) << e;
  e = parse_error(R"({"hardware":"h","layout":"l","model":{},"batch":{"prompts":1,"samples_per_prompt":1,
      "prompt_length":1,"response_length":1},"efficiency":{},"assumptions":[],"sizes":[3]})");
  EXPECT_NE(e.find("sizes[0]: is number, expected an object"), std::string::npos) << e;
  e = parse_error(R"({"hardware":"h","layout":"l"})");
  EXPECT_NE(e.find("broken.json: model: missing"), std::string::npos) << e;
  e = parse_error("{\"hardware\": ");
  EXPECT_EQ(e.rfind("broken.json: not JSON", 0), 0u) << e;

  try {
    load_projection(kData + "/no-such-projection.json");
    FAIL() << "a missing file must throw";
  } catch (const ProjectionError& error) {
    EXPECT_NE(std::string(error.what()).find("no-such-projection.json: cannot be read"), std::string::npos);
  }
}

TEST(ProjectionData, StepChartSumsTheTextOutputsGroupsAndSkipsRefusedSizes) {
  const Projection p = load_projection(kData + "/qwen7b-h100.json");
  const LineChartData chart = projection_step_chart(p);
  EXPECT_TRUE(chart.log2_x);
  const LineSeries* step = series_named(chart, "step");
  ASSERT_NE(step, nullptr);
  ASSERT_EQ(step->points.size(), 6u);  // 16..512: 8 and 1024 are refused
  EXPECT_EQ(step->points.front(), std::make_pair(16.0, 114.73447986978405));
  const LineSeries* logp = series_named(chart, "log-prob passes");
  ASSERT_NE(logp, nullptr);
  // 16 ranks: old_log_prob 17.440050211348023 + ref 17.15440209134802 + values 0 + reward 0.
  EXPECT_DOUBLE_EQ(logp->points.front().second, 17.440050211348023 + 17.15440209134802);
  const LineSeries* update = series_named(chart, "update");
  ASSERT_NE(update, nullptr);
  EXPECT_DOUBLE_EQ(update->points.back().second, 4.261824417571861);  // 512: update_actor, no critic
}

TEST(ProjectionData, EfficiencyChartDrawsProjectedAndMeasuredAtTheSameRanks) {
  const Projection p = load_projection(kData + "/demo-cpu.json");
  // A matrix with a world axis at 1, 2 and 8 ranks, two modes: 8 is not projected.
  reports::MatrixSummary m;
  m.matrix.name = "demo";
  m.axes = {{0, "mode", false, "", ""}, {1, "trainer.world_size", true, "strong", ""}};
  auto cell = [&](const std::string& mode, int ranks, double efficiency) {
    reports::CellSummary c;
    c.cell.levels = {mode, std::to_string(ranks)};
    c.cell.ranks = ranks;
    c.scaling.push_back({"trainer.world_size", "strong", 1, 0, 0.0, efficiency, 0.0});
    m.cells.push_back(c);
  };
  cell("hybrid", 1, 1.0);
  cell("hybrid", 2, 0.9);
  cell("naive", 1, 1.0);
  cell("naive", 2, 0.7);
  cell("hybrid", 8, 0.5);
  cell("hybrid", 4, 0.6);
  cell("naive", 4, 0.5);
  // A projection from 2 ranks: the matrix's efficiencies (against its 1-rank cells) rebased to 2.
  const auto from_two = measured_efficiency_series(m, {2, 4});
  ASSERT_EQ(from_two.size(), 1u);
  EXPECT_EQ(from_two[0].name, "measured strong: demo (mean of 2 cells), relative to 2 ranks");
  ASSERT_EQ(from_two[0].points.size(), 2u);
  EXPECT_DOUBLE_EQ(from_two[0].points[0].second, 100.0);
  EXPECT_DOUBLE_EQ(from_two[0].points[1].second, 100.0 * 0.55 / 0.8);  // (0.6 + 0.5) / 2 over (0.9 + 0.7) / 2
  const auto measured = measured_efficiency_series(m, {1, 2});
  ASSERT_EQ(measured.size(), 1u);
  EXPECT_EQ(measured[0].name, "measured strong: demo (mean of 2 cells), relative to 1 rank");
  ASSERT_EQ(measured[0].points.size(), 2u);
  EXPECT_DOUBLE_EQ(measured[0].points[0].second, 100.0);
  EXPECT_DOUBLE_EQ(measured[0].points[1].second, 80.0);  // (0.9 + 0.7) / 2

  const LineChartData chart = projection_efficiency_chart(p, measured);
  const LineSeries* strong = series_named(chart, "projected strong");
  const LineSeries* weak = series_named(chart, "projected weak");
  ASSERT_NE(strong, nullptr);
  ASSERT_NE(weak, nullptr);
  EXPECT_DOUBLE_EQ(strong->points[1].second, 100.0 * 0.8474623071483435);
  EXPECT_DOUBLE_EQ(weak->points[2].second, 100.0 * 0.9608441571441341);
  EXPECT_NE(series_named(chart, "measured strong: demo (mean of 2 cells), relative to 1 rank"), nullptr);
  const LineSeries* ideal = series_named(chart, "ideal");
  ASSERT_NE(ideal, nullptr);
  EXPECT_TRUE(ideal->dashed);
  EXPECT_EQ(ideal->points.back(), std::make_pair(4.0, 100.0));
}

}  // namespace
}  // namespace hs::viewer
