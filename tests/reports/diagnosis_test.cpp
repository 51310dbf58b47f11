// diagnosis_test.cpp — every diagnosis rule fires on a RunAnalysis built by hand to trigger it
// (its id, severity, impact, the numbers its evidence quotes, the config keys with their values)
// and stays silent on one just below its threshold; diagnose() orders critical before warning and
// larger impact first; the console text and the JSON carry every finding; every key a rule names
// is a key of the trainer's configuration (checked against trainer/src/config/config_keys.cpp),
// and every rule is documented in docs/diagnosis.md.
//
// Fixtures set only the fields a rule reads; the analyses themselves are tested elsewhere.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hybridscope/reports/diagnosis.h"

using namespace hs::reports;

namespace {

constexpr std::int64_t kGiB = 1024LL * 1024 * 1024;
constexpr std::int64_t kMiB = 1024LL * 1024;

// A run with a 10 s mean step over steps 2–5 on 4 ranks, a config holding every key the rules
// name, and nothing wrong with it.
RunAnalysis clean_run() {
  RunAnalysis a;
  a.data.run.id = 7;
  a.data.run.name = "fixture";
  a.data.run.world_size = 4;
  a.data.config = {
      {"data.train_batch_size", "64"},
      {"data.max_response_length", "512"},
      {"actor_rollout_ref.rollout.n", "4"},
      {"actor_rollout_ref.rollout.tensor_model_parallel_size", "2"},
      {"actor_rollout_ref.rollout.gpu_memory_utilization", "0.5"},
      {"actor_rollout_ref.rollout.max_num_seqs", "64"},
      {"actor_rollout_ref.rollout.free_cache_engine", "true"},
      {"hybridscope.kv_num_blocks", "-1"},
      {"hybridscope.reshard.mode", "naive"},
      {"hybridscope.precision", "fp32"},
      {"trainer.device", "cuda"},
      {"actor_rollout_ref.actor.strategy", "fsdp"},
      {"actor_rollout_ref.actor.megatron.tensor_model_parallel_size", "1"},
      {"actor_rollout_ref.actor.ppo_mini_batch_size", "16"},
      {"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", "2"},
      {"actor_rollout_ref.actor.use_dynamic_bsz", "false"},
      {"actor_rollout_ref.actor.ppo_max_token_len_per_gpu", "4096"},
      {"actor_rollout_ref.actor.fsdp_config.param_offload", "false"},
      {"actor_rollout_ref.actor.fsdp_config.optimizer_offload", "false"},
      {"actor_rollout_ref.actor.fsdp_config.per_layer", "false"},
      {"actor_rollout_ref.actor.fsdp_config.forward_prefetch", "false"},
      {"actor_rollout_ref.model.enable_gradient_checkpointing", "true"},
      {"trainer.balance_batch", "false"},
      {"trainer.test_freq", "1"},
      {"hybridscope.placement.ref", "[2, 3]"},
      {"hybridscope.placement.rollout", "[]"},
  };
  std::sort(a.data.config.begin(), a.data.config.end());  // RunData keeps its config by key
  a.measured = {2, 3, 4, 5};
  a.phases.measured = a.measured;
  a.phases.mean_step_s = 10.0;
  return a;
}

// Sets a phase's mean seconds and its share of the 10 s step.
void set_phase(RunAnalysis& a, const std::string& phase, double seconds) {
  a.phases.mean_phase_s[phase] = seconds;
  a.phases.share[phase] = seconds / a.phases.mean_step_s;
}

std::optional<Finding> check(const std::string& id, const RunAnalysis& a, const DiagnosisThresholds& t = {}) {
  for (const DiagnosisRule& rule : diagnosis_rules())
    if (id == rule.id) return rule.check(a, t);
  ADD_FAILURE() << "no rule " << id;
  return std::nullopt;
}

bool names_key(const Finding& f, const std::string& key_value) {
  return std::find(f.config_keys.begin(), f.config_keys.end(), key_value) != f.config_keys.end();
}

#define EXPECT_CONTAINS(text, part) EXPECT_NE((text).find(part), std::string::npos) << "'" << (part) << "' not in: " << (text)

// ---------------------------------------------------------------------------------------------
RunAnalysis rollout_heavy(double gen_s) {
  RunAnalysis a = clean_run();
  set_phase(a, "gen", gen_s);
  StepPhases warmup{1, 10.0, 0, {{"gen", 9.5}}, 0.5};  // 95 %, but not measured: never blamed
  StepPhases s2{2, 10.0, 0, {{"gen", 6.0}}, 4.0};       // 60 %
  StepPhases s3{3, 10.0, 1, {{"gen", 7.0}}, 3.0};       // 70 %: the worst measured step
  a.phases.steps = {warmup, s2, s3};
  return a;
}

TEST(DiagnosisRules, RolloutDominatesFiresAboveSixtyPercent) {
  const auto f = check("rollout-dominates", rollout_heavy(6.4));
  ASSERT_TRUE(f);
  EXPECT_EQ(f->rule, "rollout-dominates");
  EXPECT_EQ(f->severity, Severity::kCritical);  // 0.64 of the step > 0.30
  EXPECT_DOUBLE_EQ(f->impact, 0.64);
  EXPECT_CONTAINS(f->title, "64.0 %");
  EXPECT_CONTAINS(f->evidence, "6.4 s of the 10 s mean step over steps 2–5");
  EXPECT_CONTAINS(f->evidence, "largest at step 3: 7 s of 10 s (70.0 %)");
  EXPECT_EQ(f->step, 3);
  EXPECT_EQ(f->range, "gen");
  EXPECT_TRUE(names_key(*f, "actor_rollout_ref.rollout.tensor_model_parallel_size=2"));
  EXPECT_TRUE(names_key(*f, "actor_rollout_ref.rollout.gpu_memory_utilization=0.5"));
  EXPECT_TRUE(names_key(*f, "data.max_response_length=512"));
  EXPECT_TRUE(names_key(*f, "actor_rollout_ref.rollout.n=4"));
  EXPECT_CONTAINS(f->suggestion, "actor_rollout_ref.rollout.n (now 4)");
}

TEST(DiagnosisRules, RolloutDominatesSilentAtSixtyPercent) {
  EXPECT_FALSE(check("rollout-dominates", rollout_heavy(6.0)));  // share 0.60 is not above 0.60
  EXPECT_FALSE(check("rollout-dominates", rollout_heavy(5.99)));
}

// ---------------------------------------------------------------------------------------------
RunAnalysis small_decode(const std::string& train_batch_size, double gen_s) {
  RunAnalysis a = clean_run();
  for (auto& [key, value] : a.data.config)
    if (key == "data.train_batch_size") value = train_batch_size;
  set_phase(a, "gen", gen_s);
  return a;
}

TEST(DiagnosisRules, DecodeMemoryBoundFiresOnFewSequences) {
  // 8 prompts × 4 responses = 32 sequences < 64; world 4 / rollout tp 2 = 2 replicas of 16 each.
  const auto f = check("decode-memory-bound", small_decode("8", 3.5));
  ASSERT_TRUE(f);
  EXPECT_EQ(f->severity, Severity::kCritical);  // generation is 35 % of the step
  EXPECT_DOUBLE_EQ(f->impact, 0.35);
  EXPECT_CONTAINS(f->title, "32 sequences per generation for 35.0 % of the step");
  EXPECT_CONTAINS(f->evidence, "= data.train_batch_size 8 × actor_rollout_ref.rollout.n 4");
  EXPECT_CONTAINS(f->evidence, "2 rollout replica(s) of tp 2: 16.0 per decode batch");
  EXPECT_CONTAINS(f->evidence, "3.5 s of the 10 s mean step");
  EXPECT_TRUE(names_key(*f, "actor_rollout_ref.rollout.n=4"));
  EXPECT_TRUE(names_key(*f, "data.train_batch_size=8"));
  EXPECT_TRUE(names_key(*f, "actor_rollout_ref.rollout.tensor_model_parallel_size=2"));
}

TEST(DiagnosisRules, DecodeMemoryBoundPrefersTheAnalysedRolloutBatch) {
  RunAnalysis a = small_decode("64", 3.5);  // the config says 256 sequences...
  a.rollout_batch = 48;                     // ...but the run generated 48
  const auto f = check("decode-memory-bound", a);
  ASSERT_TRUE(f);
  EXPECT_CONTAINS(f->evidence, "48 sequences per generation (below 64)");
}

TEST(DiagnosisRules, DecodeMemoryBoundSilentAtSixtyFourOrWhenGenerationIsSmall) {
  EXPECT_FALSE(check("decode-memory-bound", small_decode("16", 3.5)));  // 16 × 4 = 64, not below 64
  EXPECT_FALSE(check("decode-memory-bound", small_decode("8", 3.0)));   // 32 sequences but gen 30 %
}

// ---------------------------------------------------------------------------------------------
RunAnalysis slow_switch(double train_to_rollout_s, double over_bound) {
  RunAnalysis a = clean_run();
  set_phase(a, "switch/train_to_rollout", train_to_rollout_s);
  set_phase(a, "switch/rollout_to_train", 0.5);
  SwitchDirectionSummary d;
  d.direction = "train_to_rollout";
  d.switches = 4;
  d.median_s = train_to_rollout_s;
  d.max_s = 1.5;
  d.median_max_bytes_received = 51 * kMiB;
  d.wire_bound_s = train_to_rollout_s / over_bound;
  d.over_bound = over_bound;
  d.components_s = {{"gather", 0.5}, {"pack", 0.3}};
  d.unaccounted_s = 0.4;
  a.switches.directions = {d};
  a.switches.bandwidth_gbps = 0.27;
  a.switches.bandwidth_source = "run's own all_reduce";
  a.switches.headline = "the switch moved 51 MiB in 1.2 s; the wire needs 200 ms; 83 % of it is packing and waiting";
  a.switches.events = {{2, "train_to_rollout", 1.1, 0, 51 * kMiB, 102 * kMiB, std::nullopt},
                       {3, "train_to_rollout", 1.5, 2, 51 * kMiB, 102 * kMiB, std::nullopt},
                       {3, "rollout_to_train", 0.5, 1, 0, 0, std::nullopt}};
  return a;
}

TEST(DiagnosisRules, SwitchSlowFiresOnItsShareOfTheStep) {
  // (1.2 + 0.5) / 10 = 17 % of the step > 15 %.
  const auto f = check("switch-slow", slow_switch(1.2, 6.0));
  ASSERT_TRUE(f);
  EXPECT_EQ(f->severity, Severity::kWarning);  // 0.17 <= 0.30
  EXPECT_NEAR(f->impact, 0.17, 1e-12);
  EXPECT_CONTAINS(f->title, "17.0 % of the step");
  EXPECT_CONTAINS(f->evidence, "the switch moved 51 MiB in 1.2 s; the wire needs 200 ms");
  EXPECT_CONTAINS(f->evidence, "both directions: 1.7 s of the 10 s mean step");
  EXPECT_CONTAINS(f->evidence, "train_to_rollout: median 1.2 s over 4 switch(es) (max 1.5 s), 51.0 MiB");
  EXPECT_CONTAINS(f->evidence, "wire bound 200 ms (6.0× it)");
  EXPECT_CONTAINS(f->evidence, "components: gather 500 ms, pack 300 ms, unaccounted 400 ms");
  EXPECT_CONTAINS(f->evidence, "bandwidth 0.27 GB/s from run's own all_reduce");
  EXPECT_CONTAINS(f->evidence, "slowest: step 3 train_to_rollout 1.5 s on rank 2");
  EXPECT_EQ(f->step, 3);
  EXPECT_EQ(f->rank, 2);
  EXPECT_EQ(f->range, "switch/train_to_rollout");
  EXPECT_TRUE(names_key(*f, "hybridscope.reshard.mode=naive"));
  EXPECT_TRUE(names_key(*f, "actor_rollout_ref.rollout.tensor_model_parallel_size=2"));
  EXPECT_TRUE(names_key(*f, "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=1"));
  EXPECT_CONTAINS(f->suggestion, "set hybridscope.reshard.mode (now naive) to hybrid");

  // Equal tp in both layouts already moves only data-parallel shards: no advice to make them equal.
  auto same_tp = slow_switch(1.2, 6.0);
  for (auto& [key, value] : same_tp.data.config)
    if (key == "actor_rollout_ref.rollout.tensor_model_parallel_size") value = "1";
  const auto g = check("switch-slow", same_tp);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->suggestion.find("equal to"), std::string::npos) << g->suggestion;
  EXPECT_FALSE(names_key(*g, "actor_rollout_ref.rollout.tensor_model_parallel_size=1"));
}

TEST(DiagnosisRules, SwitchSlowFiresFarAboveItsWireBoundEvenWhenShort) {
  RunAnalysis a = slow_switch(0.2, 4.5);  // (0.2 + 0.5) / 10 = 7 %, but 4.5× its bound
  for (auto& [key, value] : a.data.config)
    if (key == "hybridscope.reshard.mode") value = "hybrid";
  const auto f = check("switch-slow", a);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->severity, Severity::kWarning);
  EXPECT_CONTAINS(f->title, "(train_to_rollout) takes 4.5× its wire bound");
  EXPECT_CONTAINS(f->suggestion, "already hybrid");
}

TEST(DiagnosisRules, SwitchSlowSilentBelowBothThresholds) {
  // (0.99 + 0.5) / 10 = 14.9 % and 3.9× the bound.
  EXPECT_FALSE(check("switch-slow", slow_switch(0.99, 3.9)));
}

// ---------------------------------------------------------------------------------------------
RunAnalysis exposed_comm(std::int64_t rank1_comm_ns, std::int64_t rank1_overlap_ns) {
  RunAnalysis a = clean_run();
  a.temporal.note = "host ranges: comm_ops against the phase ranges";
  for (int rank : {0, 1}) {
    TemporalBreakdown b;
    b.rank = rank;
    b.window_ns = 10'000'000'000;
    a.temporal.breakdown.push_back(b);
  }
  const auto overlap = [](int rank, std::int64_t comm, std::int64_t hidden) {
    CommComputeOverlap o;
    o.rank = rank;
    o.comm_ns = comm;
    o.overlap_ns = hidden;
    o.overlap_ratio = static_cast<double>(hidden) / static_cast<double>(comm);
    o.exposed_comm_ns = comm - hidden;
    return o;
  };
  a.temporal.overlap = {overlap(0, 800'000'000, 0),  // 8 % of its window: below 10 %
                        overlap(1, rank1_comm_ns, rank1_overlap_ns)};
  return a;
}

TEST(DiagnosisRules, CommExposedSplitsTheExposedTimeByGroupAndAdvisesEach) {
  // Run 29 of the demo: dp 1.62 s, rollout_tp 0.91 s, reshard 0.20 s exposed on the worst rank.
  RunAnalysis a = exposed_comm(3'000'000'000, 200'000'000);
  a.temporal.overlap[1].exposed_by_group_ns = {{"dp", 1'620'000'000}, {"rollout_tp", 910'000'000}, {"reshard", 200'000'000}};
  const auto f = check("comm-exposed", a);
  ASSERT_TRUE(f);
  EXPECT_CONTAINS(f->evidence, "exposed by process group on rank 1: dp 1.62 s, rollout_tp 910 ms, reshard 200 ms");
  // Training keys for dp, rollout keys for rollout_tp, the reshard mode for reshard.
  EXPECT_TRUE(names_key(*f, "actor_rollout_ref.actor.ppo_mini_batch_size=16"));
  EXPECT_TRUE(names_key(*f, "actor_rollout_ref.rollout.tensor_model_parallel_size=2"));
  EXPECT_TRUE(names_key(*f, "hybridscope.reshard.mode=naive"));
  EXPECT_CONTAINS(f->suggestion, "rollout_tp (910 ms exposed)");
  EXPECT_CONTAINS(f->suggestion, "reshard (200 ms exposed)");
  EXPECT_LT(f->suggestion.find("dp (1.62 s exposed)"), f->suggestion.find("rollout_tp (")) << "largest first";
}

TEST(DiagnosisRules, CommExposedNamesTheRankAndItsExposedTime) {
  // Rank 1: 2.0 s of 10 s (20 %), 0.4 s hidden (ratio 0.2), 1.6 s exposed (16 % of the window).
  const auto f = check("comm-exposed", exposed_comm(2'000'000'000, 400'000'000));
  ASSERT_TRUE(f);
  EXPECT_EQ(f->severity, Severity::kWarning);
  EXPECT_NEAR(f->impact, 0.16, 1e-12);
  EXPECT_EQ(f->rank, 1);
  EXPECT_CONTAINS(f->title, "16.0 % of rank 1's time");
  EXPECT_CONTAINS(f->evidence, "rank 1 over steps 2–5: communication 2 s of its 10 s window (20.0 %)");
  EXPECT_CONTAINS(f->evidence, "overlap ratio 0.20, so 1.6 s exposed (16.0 % of the window)");
  EXPECT_CONTAINS(f->evidence, "host ranges");
  EXPECT_TRUE(names_key(*f, "actor_rollout_ref.actor.ppo_mini_batch_size=16"));
  // Actor tp is 1 here: nothing to shrink, so it is not advised.
  EXPECT_FALSE(names_key(*f, "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=1"));
  EXPECT_EQ(f->suggestion.find("tensor_model_parallel_size"), std::string::npos) << f->suggestion;
  EXPECT_TRUE(names_key(*f, "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2"));
  EXPECT_TRUE(names_key(*f, "actor_rollout_ref.actor.strategy=fsdp"));
  // fsdp without forward prefetch: per-layer units with prefetch would overlap the actor's collectives.
  EXPECT_TRUE(names_key(*f, "actor_rollout_ref.actor.fsdp_config.per_layer=false"));
  EXPECT_TRUE(names_key(*f, "actor_rollout_ref.actor.fsdp_config.forward_prefetch=false"));
  EXPECT_CONTAINS(f->suggestion, "actor_rollout_ref.actor.fsdp_config.per_layer (now false) with "
                                 "actor_rollout_ref.actor.fsdp_config.forward_prefetch (now false)");

  auto tp2 = exposed_comm(2'000'000'000, 400'000'000);
  for (auto& [key, value] : tp2.data.config)
    if (key == "actor_rollout_ref.actor.megatron.tensor_model_parallel_size") value = "2";
  const auto g = check("comm-exposed", tp2);
  ASSERT_TRUE(g);
  EXPECT_TRUE(names_key(*g, "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2"));
  EXPECT_CONTAINS(g->suggestion, "a smaller actor_rollout_ref.actor.megatron.tensor_model_parallel_size (now 2)");
}

// The fsdp prefetch keys are named only where they would change something: an fsdp run without
// prefetch (above), not one that has it on, nor one under megatron, nor a run recorded before the
// keys existed.
TEST(DiagnosisRules, CommExposedNamesForwardPrefetchOnlyForAnFsdpRunWithoutIt) {
  const auto with_config = [](const std::string& key, const std::optional<std::string>& value) {
    auto a = exposed_comm(2'000'000'000, 400'000'000);
    auto& config = a.data.config;
    const auto it = std::find_if(config.begin(), config.end(), [&](const auto& kv) { return kv.first == key; });
    if (value)
      it->second = *value;
    else
      config.erase(it);
    return a;
  };
  const auto names_prefetch = [](const Finding& f) {
    return std::any_of(f.config_keys.begin(), f.config_keys.end(),
                       [](const std::string& k) { return k.find("forward_prefetch") != std::string::npos; });
  };
  auto prefetching = with_config("actor_rollout_ref.actor.fsdp_config.per_layer", "true");
  for (auto& [key, value] : prefetching.data.config)
    if (key == "actor_rollout_ref.actor.fsdp_config.forward_prefetch") value = "true";
  const auto on = check("comm-exposed", prefetching);
  ASSERT_TRUE(on);
  EXPECT_FALSE(names_prefetch(*on));
  EXPECT_CONTAINS(on->suggestion, "Forward prefetch is on");

  const auto megatron = check("comm-exposed", with_config("actor_rollout_ref.actor.strategy", "megatron"));
  ASSERT_TRUE(megatron);
  EXPECT_FALSE(names_prefetch(*megatron));

  const auto old_run = check("comm-exposed", with_config("actor_rollout_ref.actor.fsdp_config.per_layer", std::nullopt));
  ASSERT_TRUE(old_run);
  EXPECT_FALSE(names_prefetch(*old_run));

  // CPU ranks on one host with shared-memory collectives: their gathers run when posted, so
  // prefetch would hide nothing; the finding says so and names shm_bytes instead. With
  // shm_bytes 0 (Gloo's threads) prefetch is advised again.
  auto cpu_one_host = with_config("trainer.device", "cpu");
  cpu_one_host.data.config.emplace_back("trainer.nnodes", "1");
  cpu_one_host.data.config.emplace_back("hybridscope.dist.shm_bytes", "1048576");
  std::sort(cpu_one_host.data.config.begin(), cpu_one_host.data.config.end());
  const auto shm = check("comm-exposed", cpu_one_host);
  ASSERT_TRUE(shm);
  EXPECT_FALSE(names_prefetch(*shm)) << shm->suggestion;
  EXPECT_TRUE(names_key(*shm, "hybridscope.dist.shm_bytes=1048576"));
  EXPECT_CONTAINS(shm->suggestion, "through shared memory as they are posted");
  for (auto& [key, value] : cpu_one_host.data.config)
    if (key == "hybridscope.dist.shm_bytes") value = "0";
  const auto gloo = check("comm-exposed", cpu_one_host);
  ASSERT_TRUE(gloo);
  EXPECT_TRUE(names_prefetch(*gloo)) << gloo->suggestion;
}

TEST(DiagnosisRules, CommExposedSilentWhenSmallOrHidden) {
  EXPECT_FALSE(check("comm-exposed", exposed_comm(990'000'000, 0)));              // 9.9 % of the window
  EXPECT_FALSE(check("comm-exposed", exposed_comm(2'000'000'000, 1'000'000'000)));  // ratio 0.5: hidden enough
}

// ---------------------------------------------------------------------------------------------
RunAnalysis fragmented(double min_ratio, std::int64_t retries, std::int64_t ooms) {
  RunAnalysis a = clean_run();
  a.memory.device = "cuda";
  a.memory.has_samples = true;
  a.memory.min_allocated_over_reserved = min_ratio;
  a.memory.alloc_retries = retries;
  a.memory.ooms = ooms;
  a.memory.has_allocator_counters = true;  // a CUDA run's samples carry them
  a.memory.worst_split_fragmentation = 0.21;
  a.memory.peak_allocated_bytes = 6 * kGiB;
  a.memory.peak_reserved_bytes = 8 * kGiB;
  a.memory.phases = {{"update_actor", 0, 6 * kGiB, 7 * kGiB, 0.9}, {"gen", 1, 4 * kGiB, 8 * kGiB, min_ratio}};
  return a;
}

TEST(DiagnosisRules, FragmentationFiresBelowPointEight) {
  const auto f = check("fragmentation", fragmented(0.62, 0, 0));
  ASSERT_TRUE(f);
  EXPECT_EQ(f->severity, Severity::kWarning);
  EXPECT_DOUBLE_EQ(f->impact, 0.0);  // costs no step time until it retries or fails
  EXPECT_CONTAINS(f->title, "allocated/reserved fell to 0.62");
  EXPECT_CONTAINS(f->evidence, "allocated/reserved as low as 0.62 (below 0.80), worst on rank 1 in gen (0.62)");
  EXPECT_CONTAINS(f->evidence, "split fragmentation up to 0.21");
  EXPECT_CONTAINS(f->evidence, "peak reserved 8.0 GiB against peak allocated 6.0 GiB");
  EXPECT_EQ(f->rank, 1);
  EXPECT_CONTAINS(f->suggestion, "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True");
  EXPECT_TRUE(names_key(*f, "actor_rollout_ref.rollout.free_cache_engine=true"));
  EXPECT_TRUE(names_key(*f, "actor_rollout_ref.rollout.gpu_memory_utilization=0.5"));
  EXPECT_TRUE(names_key(*f, "hybridscope.kv_num_blocks=-1"));
  // A run whose config records hybridscope.expandable_segments is told the key, not the variable.
  RunAnalysis keyed = fragmented(0.62, 0, 0);
  keyed.data.config.emplace_back("hybridscope.expandable_segments", "false");
  std::sort(keyed.data.config.begin(), keyed.data.config.end());  // RunData keeps it by key
  const auto k = check("fragmentation", keyed);
  ASSERT_TRUE(k);
  EXPECT_CONTAINS(k->suggestion, "set hybridscope.expandable_segments (now false) to true");
  EXPECT_TRUE(names_key(*k, "hybridscope.expandable_segments=false"));
}

// An imported trace's memory events carry allocated and reserved, not the allocator's counters:
// its retries and OOMs are unknown, not "0 over the run".
TEST(DiagnosisRules, FragmentationOfAnImportedRunDoesNotQuoteCountersItLacks) {
  RunAnalysis a = fragmented(0.62, 0, 0);
  a.memory.has_allocator_counters = false;
  a.data.run.source = "kineto";
  const auto f = check("fragmentation", a);
  ASSERT_TRUE(f);
  EXPECT_CONTAINS(f->evidence, "allocation retries and OOMs not in the source (an imported kineto run)");
  EXPECT_EQ(f->evidence.find("allocation retries 0"), std::string::npos) << f->evidence;
}

TEST(DiagnosisRules, FragmentationIsCriticalOnAnOomAndWarnsOnRetries) {
  const auto oom = check("fragmentation", fragmented(0.85, 0, 2));
  ASSERT_TRUE(oom);
  EXPECT_EQ(oom->severity, Severity::kCritical);
  EXPECT_DOUBLE_EQ(oom->impact, 1.0);
  EXPECT_CONTAINS(oom->title, "2 out-of-memory error(s)");
  EXPECT_CONTAINS(oom->evidence, "allocation retries 0, OOMs 2 over the run");

  const auto retries = check("fragmentation", fragmented(0.9, 3, 0));
  ASSERT_TRUE(retries);
  EXPECT_EQ(retries->severity, Severity::kWarning);
  EXPECT_CONTAINS(retries->title, "retried 3 allocation(s)");
  EXPECT_CONTAINS(retries->evidence, "allocated/reserved at least 0.90");
}

TEST(DiagnosisRules, FragmentationSilentAtPointEightWithoutRetriesOrOnCpu) {
  EXPECT_FALSE(check("fragmentation", fragmented(0.8, 0, 0)));
  RunAnalysis cpu = clean_run();  // the CPU tracking allocator has no reserved bytes: no ratio
  cpu.memory.device = "cpu";
  EXPECT_FALSE(check("fragmentation", cpu));
}

// ---------------------------------------------------------------------------------------------
RunAnalysis big_peak(std::int64_t peak_bytes) {
  RunAnalysis a = clean_run();
  a.memory.peak_allocated_bytes = peak_bytes;
  a.memory.peak_rank = 3;
  a.memory.peak_step = 4;
  a.memory.param_bytes = 2 * kGiB;
  a.memory.peak_over_params = static_cast<double>(peak_bytes) / static_cast<double>(2 * kGiB);
  a.memory.phases = {{"update_actor", 0, 2 * kGiB + kGiB / 2, std::nullopt, std::nullopt},
                     {"gen", 3, 1 * kGiB, std::nullopt, std::nullopt},
                     {"update_actor", 3, peak_bytes, std::nullopt, std::nullopt}};
  return a;
}

TEST(DiagnosisRules, MemoryOverParamsQuotesThePeakRankAndPhase) {
  const auto f = check("memory-over-params", big_peak(14 * kGiB));  // 14 GiB / 2 GiB = 7×
  ASSERT_TRUE(f);
  EXPECT_EQ(f->severity, Severity::kWarning);
  EXPECT_EQ(f->rank, 3);
  EXPECT_EQ(f->step, 4);
  EXPECT_CONTAINS(f->title, "7.00× the model's parameter bytes");
  EXPECT_CONTAINS(f->evidence, "peak allocated 14.0 GiB on rank 3 at step 4: 7.00× the actor's 2.0 GiB of parameters");
  EXPECT_CONTAINS(f->evidence, "AdamW's weights, gradients and two moments alone are 4×");
  EXPECT_CONTAINS(f->evidence, "its highest phase is update_actor (14.0 GiB)");
  EXPECT_TRUE(names_key(*f, "actor_rollout_ref.actor.fsdp_config.param_offload=false"));
  EXPECT_TRUE(names_key(*f, "actor_rollout_ref.actor.fsdp_config.optimizer_offload=false"));
  EXPECT_TRUE(names_key(*f, "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2"));
  // Already configured: the fixture runs fsdp with gradient checkpointing on. Not advised again.
  EXPECT_FALSE(names_key(*f, "actor_rollout_ref.actor.strategy=fsdp"));
  EXPECT_FALSE(names_key(*f, "actor_rollout_ref.model.enable_gradient_checkpointing=true"));
  EXPECT_EQ(f->suggestion.find("actor_rollout_ref.actor.strategy"), std::string::npos) << f->suggestion;
  EXPECT_EQ(f->suggestion.find("enable_gradient_checkpointing"), std::string::npos) << f->suggestion;
}

TEST(DiagnosisRules, MemoryOverParamsAdvisesOnlyWhatIsNotSet) {
  RunAnalysis a = big_peak(14 * kGiB);
  for (auto& [key, value] : a.data.config) {
    if (key == "actor_rollout_ref.actor.strategy") value = "megatron";
    if (key == "actor_rollout_ref.actor.fsdp_config.param_offload") value = "true";
    if (key == "actor_rollout_ref.model.enable_gradient_checkpointing") value = "false";
  }
  const auto f = check("memory-over-params", a);
  ASSERT_TRUE(f);
  EXPECT_TRUE(names_key(*f, "actor_rollout_ref.actor.strategy=megatron"));
  EXPECT_TRUE(names_key(*f, "actor_rollout_ref.model.enable_gradient_checkpointing=false"));
  EXPECT_TRUE(names_key(*f, "actor_rollout_ref.actor.fsdp_config.optimizer_offload=false"));
  EXPECT_FALSE(names_key(*f, "actor_rollout_ref.actor.fsdp_config.param_offload=true"));
}

TEST(DiagnosisRules, MemoryOverParamsSilentForWhatAdamWMustHold) {
  // AdamW's fp32 weights, gradients and two moments are 4× the parameters' bytes: every training
  // run holds that, so 1.2× (the old threshold) fired on every run. Silent up to 6×.
  EXPECT_FALSE(check("memory-over-params", big_peak(8 * kGiB)));   // 4×
  EXPECT_FALSE(check("memory-over-params", big_peak(12 * kGiB)));  // 6×: strict
  EXPECT_FALSE(check("memory-over-params", clean_run()));          // no parameter bytes
}

// ---------------------------------------------------------------------------------------------
RunAnalysis imbalanced(double imbalance) {
  RunAnalysis a = clean_run();
  set_phase(a, "update_actor", 4.0);
  set_phase(a, "old_log_prob", 1.0);
  set_phase(a, "ref", 1.0);
  set_phase(a, "gen", 2.0);  // not a data-parallel phase here
  a.stragglers.token_imbalance = imbalance;
  a.stragglers.global_seqlen = {{"global_seqlen/min", 900}, {"global_seqlen/max", 1150}, {"global_seqlen/mean", 1000}};
  return a;
}

TEST(DiagnosisRules, DpImbalanceQuotesGlobalSeqlenAndNamesTheBalanceKeys) {
  const auto f = check("dp-imbalance", imbalanced(0.25));
  ASSERT_TRUE(f);
  // impact = 0.25 × (4 + 1 + 1)/10 = 0.15: warning.
  EXPECT_NEAR(f->impact, 0.15, 1e-12);
  EXPECT_EQ(f->severity, Severity::kWarning);
  EXPECT_CONTAINS(f->title, "(max − min)/mean = 0.25");
  EXPECT_CONTAINS(f->evidence, "global_seqlen/min 900; global_seqlen/max 1150; global_seqlen/mean 1000");
  EXPECT_CONTAINS(f->evidence, "the data-parallel phases take 60.0 % of the step");
  EXPECT_TRUE(names_key(*f, "trainer.balance_batch=false"));
  EXPECT_TRUE(names_key(*f, "actor_rollout_ref.actor.use_dynamic_bsz=false"));
  EXPECT_TRUE(names_key(*f, "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=4096"));
  EXPECT_CONTAINS(f->suggestion, "trainer.balance_batch (now false)");

  const auto severe = check("dp-imbalance", imbalanced(0.6));  // 0.6 × 0.6 = 0.36 > 0.30
  ASSERT_TRUE(severe);
  EXPECT_EQ(severe->severity, Severity::kCritical);
}

TEST(DiagnosisRules, DpImbalanceSilentAtTenPercentOrWithoutSeqlen) {
  EXPECT_FALSE(check("dp-imbalance", imbalanced(0.10)));
  EXPECT_FALSE(check("dp-imbalance", clean_run()));
}

// ---------------------------------------------------------------------------------------------
RunAnalysis with_straggler(double excess_share) {
  RunAnalysis a = clean_run();
  a.stragglers.world_size = 4;
  a.stragglers.straggler_rank = 3;
  a.stragglers.straggler_excess_share = excess_share;
  a.stragglers.straggler_excess_s = excess_share * 8.0;  // the median rank's step is 8 s
  a.stragglers.straggler_steps = 3;
  // The step's spread is the widest, but the step is not a phase to blame.
  a.stragglers.phases = {{"step", 8.0, 20.0, 8.2, 3, 0, 12.0 / 8.2},
                         {"update_actor", 2.0, 4.0, 2.2, 3, 0, 2.0 / 2.2},
                         {"gen", 4.0, 4.4, 4.2, 1, 2, 0.4 / 4.2}};
  a.stragglers.late_collective_rank = 3;
  a.stragglers.late_collective_stddev_ms = 12.5;
  return a;
}

TEST(DiagnosisRules, StragglerNamesTheRankItsStepsAndTheWidestPhase) {
  const auto f = check("straggler", with_straggler(0.25));
  ASSERT_TRUE(f);
  // Excess 0.25 × 8 s = 2 s of the 10 s step: impact 0.2, warning.
  EXPECT_NEAR(f->impact, 0.2, 1e-12);
  EXPECT_EQ(f->severity, Severity::kWarning);
  EXPECT_EQ(f->rank, 3);
  EXPECT_CONTAINS(f->title, "rank 3 is a straggler: 25.0 % longer steps");
  EXPECT_CONTAINS(f->evidence, "rank 3 was the slowest in 3 of 4 measured steps (steps 2–5)");
  EXPECT_CONTAINS(f->evidence, "its mean step is 2 s longer than the median rank's (25.0 %)");
  EXPECT_CONTAINS(f->evidence, "widest phase update_actor: 4 s on rank 3 against 2 s on rank 0 (median 2.2 s, spread 0.91)");
  EXPECT_CONTAINS(f->evidence, "HTA: rank 3's last collective starts latest most often (std 12.5 ms");
  EXPECT_CONTAINS(f->suggestion, "Check rank 3's host and device");
  EXPECT_TRUE(names_key(*f, "trainer.balance_batch=false"));
  EXPECT_TRUE(names_key(*f, "actor_rollout_ref.actor.use_dynamic_bsz=false"));
}

TEST(DiagnosisRules, StragglerSilentAtTenPercent) {
  EXPECT_FALSE(check("straggler", with_straggler(0.10)));
  EXPECT_FALSE(check("straggler", clean_run()));  // no straggler rank at all
}

// ---------------------------------------------------------------------------------------------
TEST(DiagnosisRules, LowMfuIsInformational) {
  RunAnalysis a = clean_run();
  set_phase(a, "update_actor", 3.0);
  a.mfu = 0.08;
  const auto f = check("low-mfu", a);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->severity, Severity::kInfo);
  EXPECT_DOUBLE_EQ(f->impact, 0.3);  // update_actor's share of the step
  EXPECT_CONTAINS(f->title, "8.0 % of peak FLOP/s (MFU 0.080)");
  EXPECT_CONTAINS(f->evidence, "perf/mfu/actor (verl's flops_counter convention) 0.080 mean over steps 2–5 (below 0.25)");
  EXPECT_CONTAINS(f->evidence, "perf/mfu/actor_palm) not recorded");
  a.mfu_palm = 0.061;
  EXPECT_CONTAINS(check("low-mfu", a)->evidence, "in PaLM's / torchtitan's convention (6N + 12·L·H·Q·T, perf/mfu/actor_palm) 0.061");
  EXPECT_CONTAINS(f->evidence, "update_actor: 3 s of the 10 s mean step");
  EXPECT_TRUE(names_key(*f, "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2"));
  EXPECT_TRUE(names_key(*f, "actor_rollout_ref.actor.use_dynamic_bsz=false"));
  EXPECT_TRUE(names_key(*f, "actor_rollout_ref.model.enable_gradient_checkpointing=true"));
  EXPECT_TRUE(names_key(*f, "hybridscope.precision=fp32"));
  EXPECT_CONTAINS(f->suggestion, "hybridscope.precision (now fp32) set to bf16");

  // On the CPU the peak is a measured float32 GEMM: precision is no advice there.
  for (auto& [key, value] : a.data.config)
    if (key == "trainer.device") value = "cpu";
  const auto cpu = check("low-mfu", a);
  ASSERT_TRUE(cpu);
  EXPECT_FALSE(names_key(*cpu, "hybridscope.precision=fp32"));
  EXPECT_EQ(cpu->suggestion.find("hybridscope.precision"), std::string::npos);

  // Without gradient checkpointing there is nothing to turn off.
  for (auto& [key, value] : a.data.config)
    if (key == "actor_rollout_ref.model.enable_gradient_checkpointing") value = "false";
  const auto plain = check("low-mfu", a);
  ASSERT_TRUE(plain);
  EXPECT_FALSE(names_key(*plain, "actor_rollout_ref.model.enable_gradient_checkpointing=false"));
  EXPECT_EQ(plain->suggestion.find("enable_gradient_checkpointing"), std::string::npos) << plain->suggestion;
}

TEST(DiagnosisRules, LowMfuSilentAtTheThresholdOrWhenNotRecorded) {
  RunAnalysis a = clean_run();
  a.mfu = 0.25;
  EXPECT_FALSE(check("low-mfu", a));
  EXPECT_FALSE(check("low-mfu", clean_run()));
}

// ---------------------------------------------------------------------------------------------
RunAnalysis kv_pool(std::int64_t used) {
  RunAnalysis a = clean_run();
  set_phase(a, "gen", 5.0);
  a.memory.kv_num_blocks = 1000;
  a.memory.kv_peak_blocks_used = used;
  a.memory.kv_peak_occupancy = static_cast<double>(used) / 1000.0;
  return a;
}

TEST(DiagnosisRules, KvPressureFiresOnAFullPoolWithGenerationAtStake) {
  const auto full = check("kv-pressure", kv_pool(970));
  ASSERT_TRUE(full);
  EXPECT_EQ(full->severity, Severity::kCritical);  // generation, 50 % of the step, at stake
  EXPECT_DOUBLE_EQ(full->impact, 0.5);
  EXPECT_CONTAINS(full->title, "ran 97.0 % full");
  EXPECT_CONTAINS(full->evidence, "peak 970 of 1000 KV blocks in use (97.0 %, threshold 95.0 %) over steps 2–5");
  EXPECT_TRUE(names_key(*full, "hybridscope.kv_num_blocks=-1"));
  EXPECT_TRUE(names_key(*full, "actor_rollout_ref.rollout.gpu_memory_utilization=0.5"));
  EXPECT_TRUE(names_key(*full, "actor_rollout_ref.rollout.max_num_seqs=64"));
  EXPECT_TRUE(names_key(*full, "actor_rollout_ref.rollout.tensor_model_parallel_size=2"));
}

TEST(DiagnosisRules, KvPressureSilentAtNinetyFivePercent) {
  EXPECT_FALSE(check("kv-pressure", kv_pool(950)));
}

// ---------------------------------------------------------------------------------------------
LinearTrend trend(const std::string& series, const std::string& unit, double slope, double ci_low, double mean,
                  double first, double last) {
  LinearTrend t;
  t.series = series;
  t.unit = unit;
  t.n = 4;
  t.slope = slope;
  t.slope_ci_low = ci_low;
  t.slope_ci_high = slope + (slope - ci_low);
  t.mean = mean;
  t.relative_slope = slope / mean;
  t.first_fit = first;
  t.last_fit = last;
  t.increasing = ci_low > 0;
  t.decreasing = t.slope_ci_high < 0;
  return t;
}

TEST(DiagnosisRules, PhaseTrendingUpBlamesTheGrowingPhaseBeforeTheStep) {
  RunAnalysis a = clean_run();
  a.trends = {trend("timing_s/step", "s", 0.5, 0.1, 10.0, 9.25, 10.75),            // 5 %/step
              trend("switch/train_to_rollout", "s", 0.04, 0.03, 1.0, 0.94, 1.06),    // 4 %/step
              trend("timing_s/gen", "s", 0.01, 0.005, 1.0, 0.985, 1.015),            // 1 %/step: too slow
              trend("timing_s/update_actor", "s", 0.2, -0.1, 2.0, 1.7, 2.3)};        // CI crosses 0
  const auto f = check("phase-trending-up", a);
  ASSERT_TRUE(f);
  EXPECT_CONTAINS(f->title, "switch/train_to_rollout grows 4.0 % per step");
  // Growth 1.06 − 0.94 = 0.12 s (3 steps × 0.04 s) over the 10 s step: impact 0.012, warning.
  EXPECT_NEAR(f->impact, 0.012, 1e-12);
  EXPECT_EQ(f->severity, Severity::kWarning);
  EXPECT_EQ(f->step, 5);
  EXPECT_CONTAINS(f->evidence,
                  "switch/train_to_rollout: +40 ms/step (95 % CI 30 ms to 50 ms), 4.0 % of its mean per step; the fit "
                  "goes from 940 ms to 1.06 s over 4 points (steps 2–5)");
  EXPECT_CONTAINS(f->evidence, "timing_s/step: +500 ms/step");
  EXPECT_EQ(f->evidence.find("timing_s/gen"), std::string::npos);
  EXPECT_EQ(f->evidence.find("update_actor"), std::string::npos);
  EXPECT_CONTAINS(f->suggestion, "Refit creep");
  EXPECT_TRUE(names_key(*f, "actor_rollout_ref.rollout.free_cache_engine=true"));
  EXPECT_TRUE(names_key(*f, "hybridscope.reshard.mode=naive"));
}

TEST(DiagnosisRules, PhaseTrendingUpOnMemoryAndGeneration) {
  RunAnalysis memory = clean_run();
  memory.trends = {trend("memory/allocated_gb", "GB", 0.2, 0.1, 4.0, 3.7, 4.3)};  // 5 %/step
  const auto m = check("phase-trending-up", memory);
  ASSERT_TRUE(m);
  EXPECT_DOUBLE_EQ(m->impact, 0.0);  // memory growth is not step time
  EXPECT_CONTAINS(m->evidence, "memory/allocated_gb: +0.2 GB/step (95 % CI 0.1 GB to 0.3 GB)");
  EXPECT_TRUE(names_key(*m, "actor_rollout_ref.rollout.gpu_memory_utilization=0.5"));

  RunAnalysis gen = clean_run();
  gen.trends = {trend("timing_s/gen", "s", 1.5, 1.0, 5.0, 2.75, 7.25)};  // 30 %/step; +4.5 s
  const auto g = check("phase-trending-up", gen);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->severity, Severity::kCritical);  // 4.5 s of growth over a 10 s step
  EXPECT_TRUE(names_key(*g, "data.max_response_length=512"));
}

TEST(DiagnosisRules, PhaseTrendingUpSilentOnThreePoints) {
  RunAnalysis a = clean_run();
  a.trends = {trend("timing_s/update_actor", "s", 0.5, 0.1, 2.0, 1.5, 2.5)};  // 25 %/step, CI above 0...
  a.trends[0].n = 3;                                                           // ...but three steps only
  EXPECT_FALSE(check("phase-trending-up", a));
  a.trends[0].n = 4;
  EXPECT_TRUE(check("phase-trending-up", a));
}

TEST(DiagnosisRules, PhaseTrendingUpSilentAtTwoPercentOrWithoutASignificantSlope) {
  RunAnalysis a = clean_run();
  a.trends = {trend("timing_s/gen", "s", 0.02, 0.01, 1.0, 0.97, 1.03),   // exactly 2 %/step
              trend("timing_s/ref", "s", 0.5, -0.01, 1.0, 0.25, 1.75)};  // CI reaches below 0
  EXPECT_FALSE(check("phase-trending-up", a));
}

// ---------------------------------------------------------------------------------------------
// A run with five problems of different severity and impact.
RunAnalysis troubled_run() {
  RunAnalysis a = rollout_heavy(6.4);          // critical, 0.64
  a.memory.ooms = 1;                           // critical, 1.0
  a.memory.min_allocated_over_reserved = 0.9;
  set_phase(a, "update_actor", 2.0);
  a.mfu = 0.1;                                 // info, 0.2
  RunAnalysis s = with_straggler(0.25);        // warning, 0.2
  a.stragglers = s.stragglers;
  RunAnalysis c = exposed_comm(2'000'000'000, 400'000'000);  // warning, 0.16
  a.temporal = c.temporal;
  return a;
}

TEST(Diagnose, OrdersBySeverityThenImpact) {
  const auto findings = diagnose(troubled_run());
  std::vector<std::string> ids;
  for (const Finding& f : findings) ids.push_back(f.rule);
  EXPECT_EQ(ids, (std::vector<std::string>{"fragmentation", "rollout-dominates", "straggler", "comm-exposed", "low-mfu"}));
}

TEST(Diagnose, ThresholdsComeFromTheCaller) {
  DiagnosisThresholds strict;
  strict.rollout_share = 0.70;  // 64 % no longer dominates
  strict.low_mfu = 0.05;        // MFU 0.1 is fine
  const auto findings = diagnose(troubled_run(), strict);
  for (const Finding& f : findings) {
    EXPECT_NE(f.rule, "rollout-dominates");
    EXPECT_NE(f.rule, "low-mfu");
  }
  EXPECT_EQ(findings.size(), 3u);
}

TEST(Diagnose, CleanRunHasNoFindings) {
  const RunAnalysis a = clean_run();
  EXPECT_TRUE(diagnose(a).empty());
  const std::string text = format_findings(a, {});
  EXPECT_CONTAINS(text, "run 7 \"fixture\" — world size 4, mean step 10 s over steps 2–5 (4 measured)");
  EXPECT_CONTAINS(text, "no findings: none of the 13 rules crossed its threshold");
}

TEST(Diagnose, FormatFindingsNumbersEachFindingWithItsEvidenceSuggestionAndKeys) {
  const RunAnalysis a = troubled_run();
  const auto findings = diagnose(a);
  const std::string text = format_findings(a, findings);
  EXPECT_CONTAINS(text, "run 7 \"fixture\" — world size 4");
  std::size_t previous = 0;
  for (std::size_t i = 0; i < findings.size(); ++i) {
    const std::string head = std::to_string(i + 1) + ". [" + to_string(findings[i].severity) + "] " + findings[i].title;
    const std::size_t at = text.find(head);
    ASSERT_NE(at, std::string::npos) << head;
    EXPECT_GT(at, previous);  // in diagnose()'s order
    previous = at;
    EXPECT_CONTAINS(text, findings[i].evidence);
    EXPECT_CONTAINS(text, "→ " + findings[i].suggestion);
  }
  EXPECT_CONTAINS(text, "1. [critical] 1 out-of-memory error(s)");
  EXPECT_CONTAINS(text, "keys: actor_rollout_ref.rollout.tensor_model_parallel_size=2, "
                        "actor_rollout_ref.rollout.gpu_memory_utilization=0.5");
}

TEST(Diagnose, FindingsJsonCarriesEveryField) {
  const auto findings = diagnose(troubled_run());
  const nlohmann::json parsed = nlohmann::json::parse(findings_json(findings).dump());
  ASSERT_EQ(parsed.size(), findings.size());
  for (std::size_t i = 0; i < findings.size(); ++i) {
    const Finding& f = findings[i];
    const nlohmann::json& j = parsed[i];
    EXPECT_EQ(j.at("rule"), f.rule);
    EXPECT_EQ(j.at("severity"), to_string(f.severity));
    EXPECT_EQ(j.at("title"), f.title);
    EXPECT_EQ(j.at("evidence"), f.evidence);
    EXPECT_EQ(j.at("suggestion"), f.suggestion);
    EXPECT_EQ(j.at("config_keys").get<std::vector<std::string>>(), f.config_keys);
    EXPECT_DOUBLE_EQ(j.at("impact").get<double>(), f.impact);
    if (f.rank) EXPECT_EQ(j.at("rank").get<int>(), *f.rank); else EXPECT_TRUE(j.at("rank").is_null());
    if (f.step) EXPECT_EQ(j.at("step").get<std::int64_t>(), *f.step); else EXPECT_TRUE(j.at("step").is_null());
    if (!f.range.empty()) EXPECT_EQ(j.at("range"), f.range); else EXPECT_TRUE(j.at("range").is_null());
  }
  EXPECT_EQ(parsed[2].at("rank"), 3);  // the straggler
  EXPECT_TRUE(parsed[0].at("step").is_null());
}

TEST(Diagnose, SeverityNames) {
  EXPECT_EQ(to_string(Severity::kInfo), "info");
  EXPECT_EQ(to_string(Severity::kWarning), "warning");
  EXPECT_EQ(to_string(Severity::kCritical), "critical");
}

// ---------------------------------------------------------------------------------------------
std::string read_source(const std::string& relative) {
  std::ifstream in(std::string(HS_SOURCE_DIR) + "/" + relative);
  EXPECT_TRUE(in.good()) << relative;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Every finding of every fixture above.
// Idle ratios per role (role_idle.h). Colocated: ranks 0–3 hold both roles; split: rollout on
// ranks 0–1, train on 2–3 (another framework's separate pools).
RoleIdle role_idle(const std::string& role, std::vector<int> ranks, double idle) {
  RoleIdle r;
  r.role = role;
  r.verl_name = role == "rollout" ? "rollouter/idle_ratio" : role == "train" ? "trainer/idle_ratio" : "";
  r.ranks = std::move(ranks);
  r.idle_ratio = idle;
  r.busy_s = 10.0 * (1.0 - idle);
  r.window_s = 10.0;
  r.idlest_rank = r.ranks.back();
  r.idlest_ratio = idle + 0.05;
  return r;
}

RunAnalysis with_roles(bool colocated, double train_idle, double rollout_idle) {
  RunAnalysis a = clean_run();
  a.roles.colocated = colocated;
  a.roles.roles = {role_idle("rollout", colocated ? std::vector<int>{0, 1, 2, 3} : std::vector<int>{0, 1}, rollout_idle),
                   role_idle("train", colocated ? std::vector<int>{0, 1, 2, 3} : std::vector<int>{2, 3}, train_idle)};
  a.roles.verdict = train_idle > rollout_idle ? "rollout-bound" : "train-bound";
  return a;
}

// with_roles' separate pools as a hybridscope run's split rollout pool (ranks 0, 1) in `mode`,
// with `extra` config keys and per measured step the metrics `metrics` (name, value).
RunAnalysis with_split_pool(bool rollout_bound, const std::string& mode,
                            std::vector<std::pair<std::string, std::string>> extra = {},
                            std::vector<std::pair<std::string, double>> metrics = {}) {
  RunAnalysis a = rollout_bound ? with_roles(false, 0.7, 0.2) : with_roles(false, 0.2, 0.6);
  for (auto& [key, value] : a.data.config)
    if (key == "hybridscope.placement.rollout") value = "[0, 1]";
  a.data.config.emplace_back("hybridscope.async_mode", mode);
  for (auto& kv : extra) a.data.config.push_back(std::move(kv));
  std::sort(a.data.config.begin(), a.data.config.end());
  for (const std::int64_t step : a.measured)
    for (const auto& [name, value] : metrics) a.data.metrics.push_back({step, name, value + static_cast<double>(step - 2)});
  return a;
}

// A weight-sync analysis whose step 3 ran `syncs` syncs of 2 s together, 1 GiB at 0.54 GB/s.
RunAnalysis with_syncs(int syncs) {
  RunAnalysis a = clean_run();
  a.weight_sync.range_name = "update_weights";
  for (std::int64_t step = 2; step <= 5; ++step) {
    WeightSyncStep s;
    s.step = step;
    s.syncs = step == 3 ? syncs : 1;
    s.rank = 1;
    s.seconds = 2.0;
    s.bytes = 1LL << 30;
    s.gbps = 1073741824.0 / 2.0 / 1e9;
    a.weight_sync.steps.push_back(s);
    if (s.syncs > a.weight_sync.max_syncs) a.weight_sync.max_syncs = s.syncs, a.weight_sync.max_syncs_step = step;
    if (s.syncs > 1) ++a.weight_sync.steps_with_repeats;
  }
  return a;
}

std::vector<Finding> every_fixture_finding() {
  std::vector<RunAnalysis> fixtures = {rollout_heavy(6.4), small_decode("8", 3.5), slow_switch(1.2, 6.0),
                                       exposed_comm(2'000'000'000, 400'000'000), fragmented(0.62, 1, 1),
                                       big_peak(14 * kGiB), imbalanced(0.25), with_straggler(0.25), kv_pool(970)};
  RunAnalysis mfu = clean_run();
  mfu.mfu = 0.01;
  fixtures.push_back(mfu);
  RunAnalysis colocated = with_roles(true, 0.7, 0.4);
  colocated.roles.roles.push_back(role_idle("reference", {4, 5}, 0.9));
  fixtures.push_back(colocated);
  fixtures.push_back(with_roles(false, 0.2, 0.6));
  fixtures.push_back(with_split_pool(true, "sync"));
  fixtures.push_back(with_split_pool(false, "one_step_off"));
  fixtures.push_back(with_split_pool(true, "fully_async",
                                     {{"async_training.staleness_threshold", "0.5"},
                                      {"async_training.trigger_parameter_sync_step", "2"},
                                      {"async_training.partial_rollout", "false"}},
                                     {{"fully_async/monitor/queue/mq_queue_size", 1.0}}));
  fixtures.push_back(with_syncs(2));
  for (const char* series : {"switch/train_to_rollout", "memory/allocated_gb", "timing_s/gen", "timing_s/values"}) {
    RunAnalysis t = clean_run();
    t.trends = {trend(series, "s", 0.5, 0.1, 1.0, 0.25, 1.75)};
    fixtures.push_back(t);
  }
  std::vector<Finding> all;
  for (const RunAnalysis& a : fixtures)
    for (Finding& f : diagnose(a)) all.push_back(std::move(f));
  return all;
}

TEST(DiagnosisRules, RoleBoundGivesTheVerdictWithTheWaitingRolesIdleRatio) {
  // Colocated, the trainer idles 70 % (generation's turn), the rollouter 40 %: rollout-bound, a
  // verdict (info) with no step time at stake: the roles take turns on the same ranks, so nothing
  // idles that a layout would put to work (it ranked above the real bottlenecks when its impact
  // was the busy role's share).
  RunAnalysis a = with_roles(true, 0.7, 0.4);
  auto f = check("role-bound", a);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->severity, Severity::kInfo);
  EXPECT_DOUBLE_EQ(f->impact, 0.0);
  EXPECT_EQ(f->range, "gen");
  EXPECT_EQ(f->rank, 3);  // the idlest train rank
  EXPECT_CONTAINS(f->title, "rollout-bound");
  EXPECT_CONTAINS(f->title, "70.0 %");
  EXPECT_CONTAINS(f->evidence, "trainer/idle_ratio (train role, ranks 0, 1, 2, 3) 70.0 %");
  EXPECT_CONTAINS(f->evidence, "rollouter/idle_ratio (rollout role, ranks 0, 1, 2, 3) 40.0 %");
  EXPECT_CONTAINS(f->evidence, "colocated");
  EXPECT_CONTAINS(f->evidence, "verl #6693");
  EXPECT_TRUE(names_key(*f, "actor_rollout_ref.rollout.tensor_model_parallel_size=2"));
  EXPECT_TRUE(names_key(*f, "actor_rollout_ref.rollout.n=4"));
  EXPECT_EQ(f->suggestion.find("rollout.n_gpus_per_node"), std::string::npos);  // no separate pools here
  // A split reference idling 90 % is named with its placement key.
  a.roles.roles.push_back(role_idle("reference", {4, 5}, 0.9));
  f = check("role-bound", a);
  EXPECT_CONTAINS(f->evidence, "the split reference (ranks 4, 5) idles 90.0 %");
  EXPECT_TRUE(names_key(*f, "hybridscope.placement.ref=[2, 3]"));

  // Separate pools, the rollouter idles 60 %: train-bound; two of four ranks idle 60 %: impact 0.3.
  f = check("role-bound", with_roles(false, 0.2, 0.6));
  ASSERT_TRUE(f);
  EXPECT_CONTAINS(f->title, "train-bound");
  EXPECT_EQ(f->severity, Severity::kWarning);
  EXPECT_DOUBLE_EQ(f->impact, 0.6 * 2 / 4);
  EXPECT_EQ(f->range, "update_actor");
  EXPECT_TRUE(names_key(*f, "actor_rollout_ref.actor.use_dynamic_bsz=false"));
  EXPECT_TRUE(names_key(*f, "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2"));
  // An own run's pools are hybridscope's split placement: its key, not verl's.
  EXPECT_CONTAINS(f->suggestion, "move ranks out of the rollout pool in hybridscope.placement.rollout");
  EXPECT_EQ(f->suggestion.find("rollout.n_gpus_per_node"), std::string::npos);
  // An imported verl run's pools: verl's pool keys, in words.
  RunAnalysis imported = with_roles(false, 0.2, 0.6);
  imported.data.run.source = "kineto";
  f = check("role-bound", imported);
  ASSERT_TRUE(f);
  EXPECT_CONTAINS(f->suggestion, "rollout.nnodes / rollout.n_gpus_per_node against trainer.nnodes");
  EXPECT_EQ(f->suggestion.find("hybridscope.placement.rollout"), std::string::npos);

  // At the threshold (50 %) it stays silent; without a verdict too.
  EXPECT_FALSE(check("role-bound", with_roles(false, 0.2, 0.5)));
  RunAnalysis none = clean_run();
  EXPECT_FALSE(check("role-bound", none));
}

// Sets `key` to `value` in the run's config, adding it when absent (kept sorted, as recorded).
void set_config(RunAnalysis& a, const std::string& key, const std::string& value) {
  for (auto& [k, v] : a.data.config)
    if (k == key) {
      v = value;
      return;
    }
  a.data.config.emplace_back(key, value);
  std::sort(a.data.config.begin(), a.data.config.end());
}

TEST(DiagnosisRules, ASplitPoolsGenerationIsCountedOnThePoolsRanks) {
  // 8 prompts × 4 on a world of 4 whose rollout pool is rank 3 alone at tp 1: one replica decodes
  // all 32 sequences, not four replicas 8 each.
  RunAnalysis a = small_decode("8", 3.5);
  set_config(a, "hybridscope.placement.rollout", "[3]");
  set_config(a, "actor_rollout_ref.rollout.tensor_model_parallel_size", "1");
  const auto f = check("decode-memory-bound", a);
  ASSERT_TRUE(f);
  EXPECT_CONTAINS(f->evidence, "over 1 rollout replica(s) of tp 1 on the rollout pool rank 3: 32.0 per decode batch");
}

TEST(DiagnosisRules, RollOutBoundAdvisesOnlyWhatCanMove) {
  // Rollout-bound on a split pool at rollout tp 1 with max_num_seqs 2 under the step's 32
  // sequences: no "smaller tp" (1 cannot shrink); max_num_seqs is named, with the sequences.
  RunAnalysis a = with_split_pool(true, "sync");
  set_config(a, "actor_rollout_ref.rollout.tensor_model_parallel_size", "1");
  set_config(a, "actor_rollout_ref.rollout.max_num_seqs", "2");
  set_config(a, "data.train_batch_size", "8");
  auto f = check("role-bound", a);
  ASSERT_TRUE(f);
  EXPECT_CONTAINS(f->title, "rollout-bound");
  EXPECT_EQ(f->suggestion.find("a smaller actor_rollout_ref.rollout.tensor_model_parallel_size"), std::string::npos);
  EXPECT_FALSE(names_key(*f, "actor_rollout_ref.rollout.tensor_model_parallel_size=1"));
  EXPECT_CONTAINS(f->suggestion,
                  "a larger actor_rollout_ref.rollout.max_num_seqs (now 2) decodes more of the step's 32 sequences");
  EXPECT_TRUE(names_key(*f, "actor_rollout_ref.rollout.max_num_seqs=2"));
  // At tp 2 and max_num_seqs above the step's sequences: the tp is named, max_num_seqs is not.
  set_config(a, "actor_rollout_ref.rollout.tensor_model_parallel_size", "2");
  set_config(a, "actor_rollout_ref.rollout.max_num_seqs", "256");
  f = check("role-bound", a);
  ASSERT_TRUE(f);
  EXPECT_CONTAINS(f->suggestion, "a smaller actor_rollout_ref.rollout.tensor_model_parallel_size (now 2)");
  EXPECT_FALSE(names_key(*f, "actor_rollout_ref.rollout.max_num_seqs=256"));
}

TEST(DiagnosisRules, RoleBoundOnASplitPoolNamesTheAsyncModesKeys) {
  // one_step_off, train-bound: samples 1–4 updates stale (mean 2.5), a sync of 0.5–3.5 s (mean
  // 2 s of the 10 s step): the evidence quotes both; the pool's share and rollout.n are named.
  auto f = check("role-bound", with_split_pool(false, "one_step_off", {},
                                               {{"async/staleness/mean", 1.0}, {"timing_s/sync_rollout_weights", 0.5}}));
  ASSERT_TRUE(f);
  EXPECT_CONTAINS(f->title, "train-bound");
  EXPECT_CONTAINS(f->evidence, "async mode one_step_off with a rollout pool of ranks 0, 1");
  EXPECT_CONTAINS(f->evidence, "samples 2.5 updates stale on average (async/staleness/mean)");
  EXPECT_CONTAINS(f->evidence, "the weight sync exposed 2 s per step (20.0 % of the step, timing_s/sync_rollout_weights)");
  EXPECT_CONTAINS(f->suggestion, "move ranks out of the rollout pool in hybridscope.placement.rollout (now [0, 1])");
  EXPECT_CONTAINS(f->suggestion, "A smaller actor_rollout_ref.rollout.n (now 4) also shrinks what the actor trains");
  EXPECT_TRUE(names_key(*f, "hybridscope.placement.rollout=[0, 1]"));
  EXPECT_TRUE(names_key(*f, "actor_rollout_ref.rollout.n=4"));
  EXPECT_FALSE(names_key(*f, "hybridscope.async_mode=one_step_off"));  // already overlapping
  EXPECT_EQ(f->evidence.find("queue"), std::string::npos);  // one_step_off has no queue to speak of

  // A pool of one rank cannot give one up: the suggestion says to grow the world instead.
  RunAnalysis single = with_split_pool(false, "one_step_off");
  single.roles.roles[0].ranks = {1};  // the rollout role: rank 1 alone
  for (auto& [key, value] : single.data.config)
    if (key == "hybridscope.placement.rollout") value = "[1]";
  f = check("role-bound", single);
  ASSERT_TRUE(f);
  EXPECT_CONTAINS(f->suggestion, "the rollout pool holds a single rank already: give the actor more ranks");
  EXPECT_EQ(f->suggestion.find("move ranks out of"), std::string::npos);
  EXPECT_TRUE(names_key(*f, "hybridscope.placement.rollout=[1]"));

  // sync with a pool, rollout-bound: one_step_off would hide the shorter pipeline.
  f = check("role-bound", with_split_pool(true, "sync"));
  ASSERT_TRUE(f);
  EXPECT_CONTAINS(f->title, "rollout-bound");
  EXPECT_CONTAINS(f->suggestion, "move ranks into the rollout pool");
  EXPECT_CONTAINS(f->suggestion, "hybridscope.async_mode (now sync) set to one_step_off lets the pool generate the next batch");
  EXPECT_TRUE(names_key(*f, "hybridscope.async_mode=sync"));
  EXPECT_TRUE(names_key(*f, "actor_rollout_ref.rollout.n=4"));  // the rollout-bound keys stay

  // fully_async (verl's async_training keys, as the run records them), rollout-bound: the
  // staleness bound, the sync period and partial rollouts, and the queue depth the run logged
  // (read only when present: any step metric named with "queue").
  const std::vector<std::pair<std::string, std::string>> verl_keys = {
      {"async_training.staleness_threshold", "0.5"},
      {"async_training.trigger_parameter_sync_step", "2"},
      {"async_training.partial_rollout", "false"}};
  f = check("role-bound", with_split_pool(true, "fully_async", verl_keys,
                                          {{"fully_async/monitor/queue/mq_queue_size", 1.0}}));
  ASSERT_TRUE(f);
  EXPECT_CONTAINS(f->evidence, "queue depth fully_async/monitor/queue/mq_queue_size 2.5 on average, 4 at most");
  EXPECT_CONTAINS(f->suggestion, "a larger async_training.staleness_threshold (now 0.5) lets the rollouter generate");
  EXPECT_CONTAINS(f->suggestion, "async_training.partial_rollout (now false)");
  EXPECT_TRUE(names_key(*f, "async_training.staleness_threshold=0.5"));
  EXPECT_TRUE(names_key(*f, "async_training.trigger_parameter_sync_step=2"));
  EXPECT_TRUE(names_key(*f, "async_training.partial_rollout=false"));
  // Train-bound fully_async without a queue metric: said so; raising the bound does not help.
  f = check("role-bound", with_split_pool(false, "fully_async", verl_keys));
  ASSERT_TRUE(f);
  EXPECT_CONTAINS(f->evidence, "no queue depth recorded");
  EXPECT_CONTAINS(f->suggestion, "raising it only makes samples staler");
  EXPECT_TRUE(names_key(*f, "async_training.trigger_parameter_sync_step=2"));
  EXPECT_FALSE(names_key(*f, "async_training.partial_rollout=false"));
}

TEST(DiagnosisRules, WeightSyncRepeatedCountsSyncsPerStep) {
  const auto f = check("weight-sync-repeated", with_syncs(3));
  ASSERT_TRUE(f);
  EXPECT_EQ(f->step, 3);
  EXPECT_EQ(f->rank, 1);
  EXPECT_EQ(f->range, "update_weights");
  // Three syncs in 2 s: the two extra cost 4/3 s of the 10 s step.
  EXPECT_DOUBLE_EQ(f->impact, 2.0 * 2.0 / 3.0 / 10.0);
  EXPECT_EQ(f->severity, Severity::kWarning);
  EXPECT_CONTAINS(f->title, "3 weight syncs in one step (1 of 4 measured steps");
  EXPECT_CONTAINS(f->evidence, "step 3: 3 `update_weights` ranges on rank 1, 2 s in all, 1.0 GiB moved at 0.5369 GB/s; the repeats cost 1.333 s");
  EXPECT_CONTAINS(f->suggestion, "verl #3672");
  EXPECT_TRUE(names_key(*f, "trainer.test_freq=1"));
  EXPECT_FALSE(check("weight-sync-repeated", with_syncs(1)));
}

TEST(DiagnosisKeys, EveryNamedKeyIsAKeyOfTheTrainersConfig) {
  // The trainer's key table: HS_CONFIG_KEY(<dotted key>, "<doc>").
  const std::string table = read_source("trainer/src/config/config_keys.cpp");
  std::set<std::string> known;
  const std::regex entry(R"(HS_CONFIG_KEY\(([a-z_][a-z0-9_.]*),)");
  for (auto it = std::sregex_iterator(table.begin(), table.end(), entry); it != std::sregex_iterator(); ++it)
    known.insert((*it)[1]);
  ASSERT_GT(known.size(), 100u);

  const auto findings = every_fixture_finding();
  std::set<std::string> rules;
  const std::regex dotted(R"(\b(?:data|actor_rollout_ref|critic|trainer|hybridscope|algorithm|reward_model|async_training)\.[a-z0-9_.]*[a-z0-9_])");
  for (const Finding& f : findings) {
    rules.insert(f.rule);
    for (const std::string& kv : f.config_keys) {
      const std::string key = kv.substr(0, kv.find('='));
      EXPECT_TRUE(known.count(key)) << f.rule << " names " << key;
      EXPECT_NE(kv.find('='), std::string::npos);
      EXPECT_EQ(kv.find("not in the run's config"), std::string::npos) << kv;  // the fixture config has them all
    }
    for (auto it = std::sregex_iterator(f.suggestion.begin(), f.suggestion.end(), dotted); it != std::sregex_iterator();
         ++it)
      EXPECT_TRUE(known.count(it->str())) << f.rule << "'s suggestion mentions " << it->str();
  }
  EXPECT_EQ(rules.size(), diagnosis_rules().size());  // the fixtures reach every rule
}

TEST(DiagnosisKeys, AKeyMissingFromTheRunIsSaidSo) {
  RunAnalysis a = rollout_heavy(6.4);
  a.data.config.clear();
  const auto f = check("rollout-dominates", a);
  ASSERT_TRUE(f);
  EXPECT_TRUE(names_key(*f, "actor_rollout_ref.rollout.n=(not in the run's config)"));
  EXPECT_CONTAINS(f->suggestion, "actor_rollout_ref.rollout.n (not in the run's config)");
}

TEST(DiagnosisRuleTable, UniqueIdsEachDocumented) {
  const std::string doc = read_source("docs/diagnosis.md");
  std::set<std::string> ids;
  for (const DiagnosisRule& rule : diagnosis_rules()) {
    EXPECT_TRUE(ids.insert(rule.id).second) << rule.id;
    EXPECT_NE(std::string(rule.description), "");
    EXPECT_CONTAINS(doc, std::string("`") + rule.id + "`");
  }
  EXPECT_EQ(ids.size(), 13u);
}

// comm-exposed on a split rollout pool, through temporal_analysis (temporal_breakdown.h): 2 ranks,
// rank 1 the pool, one measured step [0, 1 s) as rollout_server.cpp records it. The actor (rank 0)
// waits in the hand-over broadcast [10, 400) ms while the pool generates; the pool, after handing
// over [380, 400) ms, waits in the step-boundary all_reduce from 400 ms until the actor has trained
// and joins it at `boundary_ms`; the all_reduce ends at `boundary_ms` + `transfer_ms`.
RunAnalysis split_pool_comm(const std::string& pool, std::int64_t boundary_ms, std::int64_t transfer_ms) {
  constexpr std::int64_t ms = 1'000'000;
  RunAnalysis a = clean_run();
  set_config(a, "hybridscope.placement.rollout", pool);
  a.data.run.world_size = 2;
  auto range = [](int rank, const char* name, const char* category, std::int64_t start, std::int64_t end) {
    RangeRow r;
    r.rank = rank;
    r.tid = rank + 1;
    r.step = 2;
    r.name = name;
    r.category = category;
    r.depth = std::string(category) == "step" ? 0 : 1;
    r.start_ns = start * ms;
    r.end_ns = end * ms;
    return r;
  };
  auto comm = [](int rank, const char* op, std::int64_t start, std::int64_t end) {
    CommOpRow c;
    c.rank = rank;
    c.step = 2;
    c.op = op;
    c.group = "world";
    c.group_size = 2;
    c.start_ns = start * ms;
    c.end_ns = end * ms;
    return c;
  };
  const std::int64_t end = boundary_ms + transfer_ms;
  a.data.ranges = {range(0, "step", "step", 0, 1000),  range(0, "gen", "phase", 0, 400),
                   range(0, "update_actor", "phase", 400, boundary_ms), range(1, "step", "step", 0, 1000),
                   range(1, "gen", "phase", 0, 380)};
  a.data.comm_ops = {comm(0, "broadcast", 10, 400), comm(1, "broadcast", 380, 400), comm(1, "all_reduce", 400, end),
                     comm(0, "all_reduce", boundary_ms, end)};
  a.measured = {2};
  a.temporal = temporal_analysis(a.data, a.measured);
  return a;
}

TEST(DiagnosisRules, CommExposedLeavesASplitPoolsWaitForTheOtherRoleToTheRolesIdle) {
  // The pool's all_reduce is 595 ms of its 1 s step, 590 of them waiting for the actor's update:
  // idle of the rollout role, not communication (its transfer 5 ms + the hand-over 20 ms = 2.5 %).
  EXPECT_FALSE(check("comm-exposed", split_pool_comm("[1]", 990, 5)));
  // The same records as a colocated run: 615 ms of communication on rank 1, none of it hidden.
  const auto colocated = check("comm-exposed", split_pool_comm("[]", 990, 5));
  ASSERT_TRUE(colocated);
  EXPECT_EQ(colocated->rank, 1);
  EXPECT_NEAR(colocated->impact, 0.615, 1e-9);
}

TEST(DiagnosisRules, CommExposedOnASplitPoolCountsTheTransferAndSaysWhatItLeftOut) {
  // A slow step-boundary all_reduce of its own: 150 ms of transfer after the actor joins at 850 ms.
  // Each rank: the hand-over 20 + 150 = 170 ms exposed (17 %); rank 0 (the first of the two) is
  // named, with its 370 ms wait [10, 380) in the hand-over for the pool's generation left out.
  const auto f = check("comm-exposed", split_pool_comm("[1]", 850, 150));
  ASSERT_TRUE(f);
  EXPECT_EQ(f->rank, 0);
  EXPECT_NEAR(f->impact, 0.17, 1e-9);
  EXPECT_CONTAINS(f->evidence, "left out of communication: 370 ms rank 0 waited for the other role in collectives "
                               "with it (world 370 ms), that role's idle, not transfer");
}

}  // namespace
