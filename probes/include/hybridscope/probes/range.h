// range.h — scoped ranges: one guard per region, read by up to three consumers:
//   - the step's timing totals (what timing_s/* is derived from; only *timed* ranges),
//   - the recorder (a range record; when StepTimings has one),
//   - NVTX (domain `hybridscope`, registered names, one category each; when a tool is attached).
// A range nobody consumes costs one load and a branch: a trace-only range while recording is off
// and no NVTX tool is attached. Timed ranges always read the clock twice so that the step's phases
// are timed by the ranges themselves, not by a second timer. The clock is read in raw ticks
// (now_ticks(): rdtsc on an invariant TSC) and the record carries them: the writer converts them
// to ns off the hot path (clock.h); only a range observer (CUPTI) gets the start converted at once.
//
//   HS_PROBE_RANGE(timings, "gen", kPhase);               // a verl phase: timed and traced
//   HS_PROBE_TRACE_RANGE(timings, "gen/decode", kPhase);  // fine-grained: traced only
//   HS_PROBE_TRACE_RANGE_ARGS(timings, "gen/decode_step", kPhase, batch, context);  // with a payload
//
// Built with HS_PROBES_DISABLED (CMake HS_ENABLE_PROBES=OFF, or defined by one translation unit)
// both macros compile to nothing: no clock read, no record, no NVTX, no timing_s.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "hybridscope/probes/clock.h"
#include "hybridscope/probes/nvtx.h"
#include "hybridscope/probes/range_observer.h"
#include "hybridscope/probes/recorder.h"

namespace hs::probes {

/// Who reads a range (bits of a mask).
enum RangeConsumer : unsigned { kConsumerTiming = 1u, kConsumerRecorder = 2u, kConsumerNvtx = 4u };

/// A timed range feeds the step's timing totals (timing_s/*) besides the trace; a trace-only
/// range goes to the recorder and NVTX only.
enum class RangeKind { kTimed, kTraceOnly };

/// Accumulates timed-range durations of the current step by name and forwards range records to
/// the recorder (null: no records). Names are string literals. One StepTimings per thread.
class StepTimings {
 public:
  /// Asks once whether an NVTX tool is attached (see nvtx.h).
  explicit StepTimings(Recorder* recorder = nullptr);

  void set_recorder(Recorder* recorder) noexcept;
  void begin_step(std::int64_t step);
  /// Seconds spent in timed ranges called `name` during the current step (0 when none).
  double seconds(const char* name) const;
  /// (name, seconds) of every timed range of the current step, in first-closed order.
  const std::vector<std::pair<const char*, double>>& totals() const { return totals_; }
  std::int64_t step() const { return step_; }

  /// The consumers of a range of `kind`; 0: nobody, the range does nothing.
  unsigned consumers(RangeKind kind) const noexcept {
    return trace_consumers_ | (kind == RangeKind::kTimed ? kConsumerTiming : 0u);
  }

  // Used by ScopedRange. Times in clock ticks (now_ticks()).
  int push() noexcept { return depth_++; }
  void pop(const TickRange& range, unsigned consumers) noexcept;

 private:
  Recorder* recorder_;
  unsigned trace_consumers_ = 0;  // kConsumerRecorder and kConsumerNvtx bits
  bool nvtx_ = false;
  std::int64_t step_ = 0;
  int depth_ = 0;
  std::vector<std::pair<const char*, double>> totals_;
};

/// The StepTimings installed on the calling thread (ThreadTimings), or one nobody consumes: for
/// trace-only probe sites deep in the trainer that are not handed one (the rollout's prefill and
/// decode steps, the micro-batches' forward and backward, the optimizer step). Costs a call and a
/// thread-local load on top of the range's own load and branch.
StepTimings& thread_timings() noexcept;

/// Installs `timings` as the calling thread's thread_timings() for the object's lifetime (the
/// previous one is restored after).
class ThreadTimings {
 public:
  explicit ThreadTimings(StepTimings& timings) noexcept;
  ~ThreadTimings();
  ThreadTimings(const ThreadTimings&) = delete;
  ThreadTimings& operator=(const ThreadTimings&) = delete;

 private:
  StepTimings* previous_;
};

class ScopedRange {
 public:
  /// `batch_size` and `context_len`: the range's optional payload (RangeRecord; -1: none).
  ScopedRange(StepTimings& timings, const char* name, Category category, RangeKind kind = RangeKind::kTimed,
              std::int32_t batch_size = -1, std::int32_t context_len = -1) noexcept
      : timings_(timings), consumers_(timings.consumers(kind)) {
    if (consumers_ == 0) return;
    name_ = name;
    category_ = category;
    depth_ = timings_.push();
    batch_size_ = batch_size;
    context_len_ = context_len;
    if (consumers_ & kConsumerNvtx) detail::nvtx_push(name_, category_);
    start_ = now_ticks();
    if (const RangeObserver* o = range_observer()) o->push(o->context, name_, depth_, ticks_to_ns(start_));
  }
  ~ScopedRange() {
    if (consumers_ == 0) return;
    const std::int64_t end = now_ticks();
    if (const RangeObserver* o = range_observer()) o->pop(o->context);
    if (consumers_ & kConsumerNvtx) detail::nvtx_pop();
    // The step is filled in by pop (the StepTimings' current step).
    timings_.pop({name_, category_, depth_, 0, start_, end, batch_size_, context_len_}, consumers_);
  }
  ScopedRange(const ScopedRange&) = delete;
  ScopedRange& operator=(const ScopedRange&) = delete;

 private:
  // Set only when the range is consumed: a range nobody consumes stores nothing.
  StepTimings& timings_;
  unsigned consumers_;
  const char* name_;
  Category category_;
  int depth_;
  std::int32_t batch_size_;
  std::int32_t context_len_;
  std::int64_t start_;  // now_ticks()
};

}  // namespace hs::probes

#define HS_PROBE_CONCAT_INNER(a, b) a##b
#define HS_PROBE_CONCAT(a, b) HS_PROBE_CONCAT_INNER(a, b)
#if defined(HS_PROBES_DISABLED)
// Compiled out: the arguments are still type-checked (unevaluated), nothing runs.
#define HS_PROBE_RANGE(timings, name, category) \
  static_cast<void>(sizeof(timings) + sizeof(name) + sizeof(::hs::probes::Category::category))
#define HS_PROBE_TRACE_RANGE(timings, name, category) HS_PROBE_RANGE(timings, name, category)
#define HS_PROBE_TRACE_RANGE_ARGS(timings, name, category, batch_size, context_len) \
  static_cast<void>(sizeof(timings) + sizeof(name) + sizeof(::hs::probes::Category::category) + \
                    sizeof(batch_size) + sizeof(context_len))
#else
/// Times the enclosing scope as a range called `name` (a string literal): timing_s/<name>, a
/// range record, an NVTX range.
#define HS_PROBE_RANGE(timings, name, category)                                          \
  ::hs::probes::ScopedRange HS_PROBE_CONCAT(hs_probe_range_, __LINE__)((timings), (name), \
                                                                       ::hs::probes::Category::category)
/// Traces the enclosing scope (range record, NVTX range) without adding to timing_s; a load and a
/// branch when recording is off and no NVTX tool is attached.
#define HS_PROBE_TRACE_RANGE(timings, name, category)                   \
  ::hs::probes::ScopedRange HS_PROBE_CONCAT(hs_probe_range_, __LINE__)( \
      (timings), (name), ::hs::probes::Category::category, ::hs::probes::RangeKind::kTraceOnly)
/// HS_PROBE_TRACE_RANGE with a payload: the rows the range works on and the tokens of context per
/// row (ranges.batch_size, ranges.context_len; the trace's args). The two arguments are evaluated
/// whether or not the range is consumed: pass sizes at hand, not computations.
#define HS_PROBE_TRACE_RANGE_ARGS(timings, name, category, batch_size, context_len)                        \
  ::hs::probes::ScopedRange HS_PROBE_CONCAT(hs_probe_range_, __LINE__)(                                   \
      (timings), (name), ::hs::probes::Category::category, ::hs::probes::RangeKind::kTraceOnly,           \
      static_cast<std::int32_t>(batch_size), static_cast<std::int32_t>(context_len))
#endif
