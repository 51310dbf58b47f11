// range.h — scoped ranges: one guard per region, read by up to three consumers:
//   - the step's timing totals (what timing_s/* is derived from; only *timed* ranges),
//   - the recorder (a range record; when StepTimings has one),
//   - NVTX (domain `hybridscope`, registered names, one category each; when a tool is attached).
// A range nobody consumes costs one load and a branch: a trace-only range while recording is off
// and no NVTX tool is attached. Timed ranges always read the clock twice (~50 ns) so that the
// step's phases are timed by the ranges themselves, not by a second timer.
//
//   HS_PROBE_RANGE(timings, "gen", kPhase);               // a verl phase: timed and traced
//   HS_PROBE_TRACE_RANGE(timings, "gen/decode", kPhase);  // fine-grained: traced only
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

  // Used by ScopedRange.
  int push() noexcept { return depth_++; }
  void pop(const char* name, Category category, int depth, std::int64_t start_ns, std::int64_t end_ns,
           unsigned consumers) noexcept;

 private:
  Recorder* recorder_;
  unsigned trace_consumers_ = 0;  // kConsumerRecorder and kConsumerNvtx bits
  bool nvtx_ = false;
  std::int64_t step_ = 0;
  int depth_ = 0;
  std::vector<std::pair<const char*, double>> totals_;
};

class ScopedRange {
 public:
  ScopedRange(StepTimings& timings, const char* name, Category category, RangeKind kind = RangeKind::kTimed) noexcept
      : timings_(timings), name_(name), category_(category), consumers_(timings.consumers(kind)) {
    if (consumers_ == 0) return;
    depth_ = timings_.push();
    if (consumers_ & kConsumerNvtx) detail::nvtx_push(name_, category_);
    start_ = now_ns();
    if (const RangeObserver* o = range_observer()) o->push(o->context, name_, depth_, start_);
  }
  ~ScopedRange() {
    if (consumers_ == 0) return;
    const std::int64_t end = now_ns();
    if (const RangeObserver* o = range_observer()) o->pop(o->context);
    if (consumers_ & kConsumerNvtx) detail::nvtx_pop();
    timings_.pop(name_, category_, depth_, start_, end, consumers_);
  }
  ScopedRange(const ScopedRange&) = delete;
  ScopedRange& operator=(const ScopedRange&) = delete;

 private:
  StepTimings& timings_;
  const char* name_;
  Category category_;
  unsigned consumers_;
  int depth_ = 0;
  std::int64_t start_ = 0;
};

}  // namespace hs::probes

#define HS_PROBE_CONCAT_INNER(a, b) a##b
#define HS_PROBE_CONCAT(a, b) HS_PROBE_CONCAT_INNER(a, b)
#if defined(HS_PROBES_DISABLED)
// Compiled out: the arguments are still type-checked (unevaluated), nothing runs.
#define HS_PROBE_RANGE(timings, name, category) \
  static_cast<void>(sizeof(timings) + sizeof(name) + sizeof(::hs::probes::Category::category))
#define HS_PROBE_TRACE_RANGE(timings, name, category) HS_PROBE_RANGE(timings, name, category)
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
#endif
