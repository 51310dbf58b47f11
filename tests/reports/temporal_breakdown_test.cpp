// temporal_breakdown_test.cpp — HTA's temporal breakdown and comm/compute overlap on hand-built
// timelines whose answers are worked out by hand in the comments (times in ns).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "hybridscope/reports/temporal_breakdown.h"

using namespace hs::reports;

namespace {

using Kind = GpuActivityRow::Kind;

GpuActivityRow gpu(int rank, std::int64_t stream, const std::string& name, std::int64_t start, std::int64_t end,
                   Kind kind = Kind::kKernel) {
  GpuActivityRow g;
  g.kind = kind;
  g.rank = rank;
  g.stream = stream;
  g.name = name;
  g.short_name = name;
  g.start_ns = start;
  g.end_ns = end;
  return g;
}

RangeRow range(int rank, std::int64_t tid, std::int64_t step, const std::string& name, const std::string& category,
               std::int64_t start, std::int64_t end) {
  RangeRow r;
  r.rank = rank;
  r.tid = tid;
  r.step = step;
  r.name = name;
  r.category = category;
  r.depth = category == "step" ? 0 : 1;
  r.start_ns = start;
  r.end_ns = end;
  return r;
}

CommOpRow comm(int rank, std::int64_t step, const std::string& op, std::int64_t start, std::int64_t end) {
  CommOpRow c;
  c.rank = rank;
  c.step = step;
  c.op = op;
  c.group = "world";
  c.group_size = 2;
  c.start_ns = start;
  c.end_ns = end;
  return c;
}

// Rank 0, step 1 = [1000, 2000) (measured), step 0 = [0, 1000) (warm-up, left out):
//
//   stream 7 (compute)   K1 [1100,1300)                K2 [1500,1600)       K4 [1800,1900)
//   stream 8 (compute)        K3 [1200,1400)
//   stream 20 (nccl)               C [1350,1550)
//   copy engine                                               M [1700,1750)
//
// plus a kernel in step 0 [500,600) and one after step 1 ended [2100,2200): neither counts.
// Rank 1, step 1 = [1000, 2000): one compute kernel [1000,1100), no communication.
RunData kernel_run() {
  RunData data;
  data.run.world_size = 2;
  data.ranges = {
      range(0, 11, 0, "step", "step", 0, 1000),
      range(0, 11, 1, "step", "step", 1000, 2000),
      range(1, 12, 1, "step", "step", 1000, 2000),
  };
  data.gpu = {
      gpu(0, 7, "warmup_gemm", 500, 600),
      gpu(1, 7, "ampere_sgemm_128x64_tn", 1000, 1100),
      gpu(0, 7, "ampere_sgemm_128x64_tn", 1100, 1300),  // K1
      gpu(0, 8, "vectorized_elementwise_kernel", 1200, 1400),  // K3
      gpu(0, 20, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", 1350, 1550),  // C
      gpu(0, 7, "softmax_warp_forward", 1500, 1600),  // K2
      gpu(0, 9, "Memcpy HtoD (Pageable -> Device)", 1700, 1750, Kind::kMemcpy),  // M
      gpu(0, 7, "ampere_sgemm_128x64_tn", 1800, 1900),  // K4
      gpu(0, 7, "after_the_step", 2100, 2200),
  };
  return data;
}

// Rank 0 on host ranges only (a CPU run). Main thread 1; thread 2 runs `ref` alongside.
//   step 0 [0,1000): warm-up, left out (gen [100,900), a collective [500,600)).
//   step 1 [1000,2000): switch [1050,1100); gen [1100,1500); update_actor [1600,1950) on thread 1
//                       with an all_reduce [1700,1800) inside it; ref [1650,1750) on thread 2.
//   step 2 [2000,3000): gen [2100,2400); a barrier [2500,2600) between phases.
RunData host_run() {
  RunData data;
  data.ranges = {
      range(0, 1, 0, "step", "step", 0, 1000),
      range(0, 1, 0, "gen", "phase", 100, 900),
      range(0, 1, 1, "step", "step", 1000, 2000),
      range(0, 1, 1, "switch/train_to_rollout", "switch", 1050, 1100),
      range(0, 1, 1, "gen", "phase", 1100, 1500),
      range(0, 1, 1, "update_actor", "phase", 1600, 1950),
      range(0, 2, 1, "ref", "phase", 1650, 1750),
      range(0, 1, 2, "step", "step", 2000, 3000),
      range(0, 1, 2, "gen", "phase", 2100, 2400),
  };
  data.comm_ops = {
      comm(0, 0, "all_reduce", 500, 600),
      comm(0, 1, "all_reduce", 1700, 1800),
      comm(0, 2, "barrier", 2500, 2600),
  };
  return data;
}

// Rank 0 on host ranges, fsdp with forward prefetch. Step 1 = [1000,2000), main thread 1:
//   update_actor [1100,1900), with the wait range fsdp/gather_wait [1700,1720) inside it (a phase
//   range, as the trainer records it);
//   an asynchronous all_gather issued at 1200, its post returning at 1230, completed at 1710,
//   waited for [1700,1720) (its wait outlasts the transfer: the thread sees the completion when the
//   wait returns);
//   a synchronous all_reduce [1800,1850).
RunData prefetch_run() {
  RunData data;
  data.ranges = {
      range(0, 1, 1, "step", "step", 1000, 2000),
      range(0, 1, 1, "update_actor", "phase", 1100, 1900),
      range(0, 1, 1, "fsdp/gather_wait", "phase", 1700, 1720),
  };
  CommOpRow gather = comm(0, 1, "all_gather", 1200, 1710);
  gather.posted_ns = 1230;
  gather.wait_start_ns = 1700;
  gather.wait_end_ns = 1720;
  data.comm_ops = {gather, comm(0, 1, "all_reduce", 1800, 1850)};
  return data;
}

}  // namespace

TEST(TemporalBreakdownTest, ClassifiesKernelsAsHtaDoes) {
  EXPECT_EQ(classify_kernel(gpu(0, 1, "ncclDevKernel_AllGather_RING_LL", 0, 1)), KernelClass::kCommunication);
  EXPECT_EQ(classify_kernel(gpu(0, 1, "ncclKernel_AllReduce_RING_LL_Sum_float", 0, 1)), KernelClass::kCommunication);
  // Mangled name with the bare name in short_name; and the kernel family inside a mangled name.
  GpuActivityRow mangled = gpu(0, 1, "_Z28ncclDevKernel_AllGather_RING_LL24ncclDevKernelArgsStorageILm4096EE", 0, 1);
  mangled.short_name = "ncclDevKernel_AllGather_RING_LL";
  EXPECT_EQ(classify_kernel(mangled), KernelClass::kCommunication);
  mangled.short_name = "";
  EXPECT_EQ(classify_kernel(mangled), KernelClass::kCommunication);
  EXPECT_EQ(classify_kernel(gpu(0, 1, "Memcpy DtoH (Device -> Pinned)", 0, 1, Kind::kMemcpy)), KernelClass::kMemory);
  EXPECT_EQ(classify_kernel(gpu(0, 1, "Memset (Device)", 0, 1, Kind::kMemset)), KernelClass::kMemory);
  EXPECT_EQ(classify_kernel(gpu(0, 1, "ampere_sgemm_128x64_tn", 0, 1)), KernelClass::kCompute);
  // A kernel that merely mentions nccl later in its name is compute (HTA: `^nccl`).
  EXPECT_EQ(classify_kernel(gpu(0, 1, "my_pre_nccl_pack", 0, 1)), KernelClass::kCompute);
  EXPECT_EQ(to_string(TimelineSource::kKernels), "kernels");
  EXPECT_EQ(to_string(TimelineSource::kHostRanges), "host ranges");
}

TEST(TemporalBreakdownTest, KernelTimelineWithOverlappingStreams) {
  const TemporalAnalysis a = temporal_analysis(kernel_run(), {1});
  EXPECT_EQ(a.source, TimelineSource::kKernels);
  EXPECT_NE(a.note.find("kernels"), std::string::npos) << a.note;
  EXPECT_NE(a.note.find("7 GPU records"), std::string::npos) << a.note;  // 6 on rank 0 + 1 on rank 1
  ASSERT_EQ(a.breakdown.size(), 2u);
  ASSERT_EQ(a.overlap.size(), 2u);

  const TemporalBreakdown& b = a.breakdown[0];
  EXPECT_EQ(b.rank, 0);
  // kernel_time = last end − first start = 1900 − 1100 = 800.
  EXPECT_EQ(b.window_ns, 800);
  // ∪ all = [1100,1600) (K1 ∪ K3 ∪ C ∪ K2) + [1700,1750) (M) + [1800,1900) (K4) = 500 + 50 + 100 = 650;
  // idle = 800 − 650 = 150 (the gaps [1600,1700) and [1750,1800)).
  EXPECT_EQ(b.idle_ns, 150);
  // ∪ compute = [1100,1400) (K1 ∪ K3) + [1500,1600) (K2) + [1800,1900) (K4) = 300 + 100 + 100 = 500.
  EXPECT_EQ(b.compute_ns, 500);
  // non_compute = 800 − 500 − 150 = 150: communication alone [1400,1500) = 100 and the copy = 50.
  EXPECT_EQ(b.non_compute_ns, 150);
  EXPECT_DOUBLE_EQ(b.idle_share, 150.0 / 800.0);
  EXPECT_DOUBLE_EQ(b.compute_share, 500.0 / 800.0);
  EXPECT_DOUBLE_EQ(b.non_compute_share, 150.0 / 800.0);

  const CommComputeOverlap& o = a.overlap[0];
  // ∪ comm = [1350,1550) = 200; ∩ compute = [1350,1400) (K3) + [1500,1550) (K2) = 100; ratio 0.5.
  EXPECT_EQ(o.comm_ns, 200);
  EXPECT_EQ(o.compute_ns, 500);
  EXPECT_EQ(o.overlap_ns, 100);
  ASSERT_TRUE(o.overlap_ratio.has_value());
  EXPECT_DOUBLE_EQ(*o.overlap_ratio, 0.5);
  EXPECT_EQ(o.exposed_comm_ns, 100);

  // Rank 1: one kernel [1000,1100): window 100, all compute, no communication -> no ratio.
  EXPECT_EQ(a.breakdown[1].rank, 1);
  EXPECT_EQ(a.breakdown[1].window_ns, 100);
  EXPECT_EQ(a.breakdown[1].idle_ns, 0);
  EXPECT_EQ(a.breakdown[1].compute_ns, 100);
  EXPECT_EQ(a.overlap[1].comm_ns, 0);
  EXPECT_FALSE(a.overlap[1].overlap_ratio.has_value());
}

TEST(TemporalBreakdownTest, OverlappingKernelsCountOnce) {
  // The summed-duration trap: K1 + K3 + C + K2 + M + K4 = 200 + 200 + 200 + 100 + 50 + 100 = 850 ns
  // of kernels in an 800 ns window; summed durations would give idle = 800 − 850 = −50.
  const TemporalBreakdown b = temporal_analysis(kernel_run(), {1}).breakdown[0];
  EXPECT_GE(b.idle_ns, 0);
  EXPECT_EQ(b.idle_ns + b.compute_ns + b.non_compute_ns, b.window_ns);

  // Two streams running the same 100 ns at once, a third overlapping half: compute is 150, not 300.
  const std::vector<Interval> compute{{0, 100}, {0, 100}, {50, 150}};
  const TemporalBreakdown t = temporal_breakdown(3, {0, 200}, compute, compute);
  EXPECT_EQ(t.rank, 3);
  EXPECT_EQ(t.compute_ns, 150);
  EXPECT_EQ(t.idle_ns, 50);  // [150,200)
  EXPECT_EQ(t.non_compute_ns, 0);
  // Duplicated collectives: ∪ comm = 100 (not 200), overlap with [50,100) = 50, ratio 0.5 (not 0.25).
  const CommComputeOverlap o = comm_compute_overlap(3, {{0, 100}, {0, 100}}, {{50, 100}});
  EXPECT_EQ(o.comm_ns, 100);
  EXPECT_EQ(o.overlap_ns, 50);
  EXPECT_DOUBLE_EQ(*o.overlap_ratio, 0.5);
}

TEST(TemporalBreakdownTest, FormulasClipToTheWindowAndHandleAnEmptyOne) {
  // Activity outside the window does not count: window [100,200), all = [50,150) ∪ [180,300).
  // busy = [100,150) + [180,200) = 70, idle = 30; compute [0,120) -> [100,120) = 20, non-compute 50.
  const TemporalBreakdown b = temporal_breakdown(0, {100, 200}, {{50, 150}, {180, 300}, {0, 120}}, {{0, 120}});
  EXPECT_EQ(b.window_ns, 100);
  EXPECT_EQ(b.idle_ns, 30);
  EXPECT_EQ(b.compute_ns, 20);
  EXPECT_EQ(b.non_compute_ns, 50);
  const TemporalBreakdown empty = temporal_breakdown(0, {100, 100}, {{0, 500}}, {{0, 500}});
  EXPECT_EQ(empty.window_ns, 0);
  EXPECT_EQ(empty.idle_ns, 0);
  EXPECT_DOUBLE_EQ(empty.idle_share, 0.0);
}

TEST(TemporalBreakdownTest, HostRangesWhenThereAreNoKernels) {
  const TemporalAnalysis a = temporal_analysis(host_run(), {1, 2});
  EXPECT_EQ(a.source, TimelineSource::kHostRanges);
  EXPECT_NE(a.note.find("host ranges"), std::string::npos) << a.note;
  EXPECT_NE(a.note.find("no kernel records"), std::string::npos) << a.note;
  ASSERT_EQ(a.breakdown.size(), 1u);
  const TemporalBreakdown& b = a.breakdown[0];
  // Window = span of the measured steps' `step` ranges = [1000, 3000) = 2000.
  EXPECT_EQ(b.window_ns, 2000);
  // ∪ all = [1050,1500) (switch ∪ gen) + [1600,1950) (update_actor ⊇ ref, all_reduce) + [2100,2400)
  //       + [2500,2600) (barrier) = 450 + 350 + 300 + 100 = 1200; idle = 2000 − 1200 = 800.
  EXPECT_EQ(b.idle_ns, 800);
  // compute = gen [1100,1500) 400 + (update_actor minus the all_reduce on the same thread:
  // [1600,1700) ∪ [1800,1950)) ∪ ref [1650,1750) on thread 2 = [1600,1750) 150 + [1800,1950) 150
  // + gen [2100,2400) 300 = 1000.
  EXPECT_EQ(b.compute_ns, 1000);
  // non_compute = 2000 − 1000 − 800 = 200: switch 50 + all_reduce not under ref [1750,1800) 50 + barrier 100.
  EXPECT_EQ(b.non_compute_ns, 200);

  const CommComputeOverlap& o = a.overlap[0];
  // ∪ comm = [1700,1800) + [2500,2600) = 200 (step 0's collective is warm-up); only ref on thread 2
  // runs under a collective: [1700,1750) = 50; ratio 50 / 200 = 0.25; exposed 150.
  EXPECT_EQ(o.comm_ns, 200);
  EXPECT_EQ(o.overlap_ns, 50);
  ASSERT_TRUE(o.overlap_ratio.has_value());
  EXPECT_DOUBLE_EQ(*o.overlap_ratio, 0.25);
  EXPECT_EQ(o.exposed_comm_ns, 150);
}

// The trainer's final validation runs after the last step's range and carries that step's number:
// its generation and its collectives are outside the breakdown's window (the step ranges), and the
// overlap leaves them out as well, so both count the same compute (the overlap took 0.2 s more
// compute per rank than the breakdown on the demo's runs).
TEST(TemporalBreakdownTest, RangesAfterTheLastStepRangeCountInNeitherTable) {
  RunData data = host_run();
  data.ranges.push_back(range(0, 1, 2, "testing", "validation", 3050, 3300));
  data.ranges.push_back(range(0, 1, 2, "gen/decode_step", "phase", 3100, 3200));
  data.comm_ops.push_back(comm(0, 2, "all_reduce", 3210, 3250));
  const TemporalAnalysis a = temporal_analysis(data, {1, 2});
  ASSERT_EQ(a.breakdown.size(), 1u);
  EXPECT_EQ(a.breakdown[0].window_ns, 2000);
  EXPECT_EQ(a.breakdown[0].compute_ns, 1000);
  EXPECT_EQ(a.overlap[0].compute_ns, 1000);  // as without the validation (HostRangesWhenThereAreNoKernels)
  EXPECT_EQ(a.overlap[0].comm_ns, 200);
  EXPECT_EQ(a.overlap[0].overlap_ns, 50);
}

TEST(TemporalBreakdownTest, SynchronousCollectivesOnTheStepThreadOverlapNothing) {
  RunData data = host_run();
  data.ranges.erase(data.ranges.begin() + 6);  // drop `ref` on thread 2
  const TemporalAnalysis a = temporal_analysis(data, {1, 2});
  ASSERT_EQ(a.overlap.size(), 1u);
  EXPECT_EQ(a.overlap[0].overlap_ns, 0);
  EXPECT_DOUBLE_EQ(*a.overlap[0].overlap_ratio, 0.0);
  EXPECT_EQ(a.overlap[0].exposed_comm_ns, 200);
}

TEST(TemporalBreakdownTest, FallsBackToHostRangesWhenNoKernelIsInTheMeasuredSteps) {
  // Kernel records only in the warm-up step: the measured steps are judged on host ranges.
  RunData data = host_run();
  data.gpu = {gpu(0, 7, "warmup_gemm", 200, 300)};
  const TemporalAnalysis a = temporal_analysis(data, {1, 2});
  EXPECT_EQ(a.source, TimelineSource::kHostRanges);
  EXPECT_NE(a.note.find("no kernel records in these steps"), std::string::npos) << a.note;
  EXPECT_EQ(a.breakdown[0].idle_ns, 800);
}

TEST(TemporalBreakdownTest, AnAsynchronousCollectiveOverlapsTheComputeBetweenItsPostAndItsWait) {
  const TemporalAnalysis a = temporal_analysis(prefetch_run(), {1});
  EXPECT_EQ(a.source, TimelineSource::kHostRanges);
  EXPECT_NE(a.note.find("an asynchronous one's post and wait"), std::string::npos) << a.note;
  ASSERT_EQ(a.overlap.size(), 1u);
  const CommComputeOverlap& o = a.overlap[0];
  // ∪ comm = all_gather [1200,1710) 510 + all_reduce [1800,1850) 50 = 560.
  EXPECT_EQ(o.comm_ns, 560);
  // compute = update_actor minus what the thread blocked on: the gather's post [1200,1230) and
  // wait [1700,1720), the whole all_reduce [1800,1850): [1100,1200) 100 + [1230,1700) 470
  // + [1720,1800) 80 + [1850,1900) 50 = 700.
  EXPECT_EQ(o.compute_ns, 700);
  // overlap = the gather less its post and its wait inside the row: [1230,1700) = 510 − 30 − 10
  // = 470; the all_reduce overlaps nothing. ratio 470 / 560; exposed = 30 + 10 + 50 = 90.
  EXPECT_EQ(o.overlap_ns, 470);
  ASSERT_TRUE(o.overlap_ratio.has_value());
  EXPECT_DOUBLE_EQ(*o.overlap_ratio, 470.0 / 560.0);
  EXPECT_EQ(o.exposed_comm_ns, 90);

  const TemporalBreakdown& b = a.breakdown[0];
  // window [1000,2000) 1000; busy = update_actor [1100,1900) 800, idle 200; non_compute = the
  // post 30 + the wait 20 + the all_reduce 50 = 100.
  EXPECT_EQ(b.window_ns, 1000);
  EXPECT_EQ(b.idle_ns, 200);
  EXPECT_EQ(b.compute_ns, 700);
  EXPECT_EQ(b.non_compute_ns, 100);
}

TEST(TemporalBreakdownTest, TheSameCollectiveRecordedSynchronouslyOverlapsNothing) {
  // The gather of prefetch_run() without its post and wait (as every row of a file before schema v9 reads):
  // the thread is taken as blocked from its issue to its completion.
  RunData data = prefetch_run();
  data.comm_ops[0].posted_ns.reset();
  data.comm_ops[0].wait_start_ns.reset();
  data.comm_ops[0].wait_end_ns.reset();
  const CommComputeOverlap o = temporal_analysis(data, {1}).overlap[0];
  EXPECT_EQ(o.comm_ns, 560);
  EXPECT_EQ(o.overlap_ns, 0);
  EXPECT_DOUBLE_EQ(*o.overlap_ratio, 0.0);
  EXPECT_EQ(o.exposed_comm_ns, 560);
  // compute = [1100,1200) 100 + [1710,1800) 90 + [1850,1900) 50 = 240 (the wait range is compute
  // here: nothing says the thread blocked there).
  EXPECT_EQ(o.compute_ns, 240);
}

// A split rollout pool (hybridscope.placement.rollout=[1]) on host ranges, step 1 = [1000,2000)
// on both ranks, as rollout_server.cpp and trainer.cpp record it (every collective on `world`):
//   rank 0 (actor, thread 1): gen [1000,1400) = its wait for the pool's batch, the hand-over
//     broadcast [1010,1400) inside it; update_actor [1400,boundary); the step-boundary all_reduce
//     [boundary,1995).
//   rank 1 (pool, thread 2): gen [1000,1380); the hand-over broadcast [1380,1400) (its root,
//     arriving last); the step-boundary all_reduce [1400,1995), waiting for the actor's training.
RunData split_pool_run(const std::string& pool = "[1]", std::int64_t boundary = 1990) {
  RunData data;
  data.run.world_size = 2;
  data.config = {{"hybridscope.placement.rollout", pool}};
  data.ranges = {
      range(0, 1, 1, "step", "step", 1000, 2000),
      range(0, 1, 1, "gen", "phase", 1000, 1400),
      range(0, 1, 1, "update_actor", "phase", 1400, boundary),
      range(1, 2, 1, "step", "step", 1000, 2000),
      range(1, 2, 1, "gen", "phase", 1000, 1380),
  };
  data.comm_ops = {
      comm(0, 1, "broadcast", 1010, 1400), comm(1, 1, "broadcast", 1380, 1400),
      comm(1, 1, "all_reduce", 1400, 1995), comm(0, 1, "all_reduce", boundary, 1995),
  };
  return data;
}

TEST(TemporalBreakdownTest, ASplitPoolsWaitForTheOtherRoleIsNotCommunication) {
  const TemporalAnalysis a = temporal_analysis(split_pool_run(), {1});
  ASSERT_EQ(a.overlap.size(), 2u);
  // Rank 0: the hand-over's transfer is the pool's row, 20 (the pool arrived last); the actor's
  // [1010,1380) 370 waited for the generation. The all_reduce: the actor's row, 5, is the transfer.
  const CommComputeOverlap& actor = a.overlap[0];
  EXPECT_EQ(actor.comm_ns, 25);
  EXPECT_EQ(actor.exposed_comm_ns, 25);
  EXPECT_EQ(actor.role_wait_ns, 370);
  EXPECT_EQ(actor.role_wait_by_group_ns.at("world"), 370);
  EXPECT_EQ(actor.exposed_by_group_ns.at("world"), 25);
  // Rank 1: its hand-over row is all transfer (20); of its all_reduce 595, [1400,1990) 590 waited
  // for the actor's update and [1990,1995) 5 moved data.
  const CommComputeOverlap& rollout = a.overlap[1];
  EXPECT_EQ(rollout.comm_ns, 25);
  EXPECT_EQ(rollout.exposed_comm_ns, 25);
  EXPECT_EQ(rollout.role_wait_ns, 590);
  // The pool's wait is neither compute nor busy: idle in the breakdown, as role_idle counts it
  // (busy = gen 380 + the hand-over 20 + the all_reduce's transfer 5).
  EXPECT_EQ(a.breakdown[1].idle_ns, 1000 - 405);
  EXPECT_EQ(a.breakdown[1].compute_ns, 380);
  EXPECT_NE(a.note.find("the wait for the other role is that role's idle"), std::string::npos) << a.note;
}

TEST(TemporalBreakdownTest, WithoutASplitPoolEveryCollectiveIsCommunicationWhole) {
  // The same records read as a colocated run (HTA: a collective is communication from issue to
  // completion): rank 1's all_reduce 595 + the broadcast 20.
  const TemporalAnalysis a = temporal_analysis(split_pool_run("[]"), {1});
  EXPECT_EQ(a.overlap[0].comm_ns, 395);
  EXPECT_EQ(a.overlap[1].comm_ns, 615);
  EXPECT_EQ(a.overlap[1].exposed_comm_ns, 615);
  EXPECT_EQ(a.overlap[1].role_wait_ns, 0);
  // An imported run has no hybridscope placement: left whole too.
  RunData imported = split_pool_run();
  imported.run.source = "kineto";
  EXPECT_EQ(temporal_analysis(imported, {1}).overlap[1].comm_ns, 615);
}

TEST(TemporalBreakdownTest, ASplitPoolsCollectivesAreLeftWholeWhenTheirRowsDoNotMatch) {
  // The actor's all_reduce row lost (the recorder refused a write): step 1's all_reduces of
  // `world` are one rank's, not group_size ranks', so the pool's is read whole, as HTA reads it.
  RunData data = split_pool_run();
  data.comm_ops.pop_back();
  EXPECT_EQ(temporal_analysis(data, {1}).overlap[1].comm_ns, 615);
}
