// range.h — scoped ranges: one guard times a region with the one clock, adds its duration to the
// step's timing (what timing_s/* is derived from) and, when recording is on, hands a range record
// to the recorder. `HS_PROBE_RANGE(timings, "gen", kPhase)` is the common case.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "hybridscope/probes/clock.h"
#include "hybridscope/probes/range_observer.h"
#include "hybridscope/probes/recorder.h"

namespace hs::probes {

/// Accumulates range durations of the current step by name and forwards records to the recorder
/// (null: time only). Names are string literals.
class StepTimings {
 public:
  explicit StepTimings(Recorder* recorder = nullptr) : recorder_(recorder) {}

  void set_recorder(Recorder* recorder) { recorder_ = recorder; }
  void begin_step(std::int64_t step);
  /// Seconds spent in ranges called `name` during the current step (0 when none).
  double seconds(const char* name) const;
  /// (name, seconds) of every range of the current step, in first-seen order.
  const std::vector<std::pair<const char*, double>>& totals() const { return totals_; }
  std::int64_t step() const { return step_; }

  // Used by ScopedRange.
  int push() { return depth_++; }
  void pop(const char* name, Category category, int depth, std::int64_t start_ns, std::int64_t end_ns) noexcept;

 private:
  Recorder* recorder_;
  std::int64_t step_ = 0;
  int depth_ = 0;
  std::vector<std::pair<const char*, double>> totals_;
};

class ScopedRange {
 public:
  ScopedRange(StepTimings& timings, const char* name, Category category)
      : timings_(timings), name_(name), category_(category), depth_(timings.push()), start_(now_ns()) {
    if (const RangeObserver* o = range_observer()) o->push(o->context, name_, depth_, start_);
  }
  ~ScopedRange() {
    const std::int64_t end = now_ns();
    if (const RangeObserver* o = range_observer()) o->pop(o->context);
    timings_.pop(name_, category_, depth_, start_, end);
  }
  ScopedRange(const ScopedRange&) = delete;
  ScopedRange& operator=(const ScopedRange&) = delete;

 private:
  StepTimings& timings_;
  const char* name_;
  Category category_;
  int depth_;
  std::int64_t start_;
};

}  // namespace hs::probes

#define HS_PROBE_CONCAT_INNER(a, b) a##b
#define HS_PROBE_CONCAT(a, b) HS_PROBE_CONCAT_INNER(a, b)
/// Times the enclosing scope as a range called `name` (a string literal).
#define HS_PROBE_RANGE(timings, name, category)                                          \
  ::hs::probes::ScopedRange HS_PROBE_CONCAT(hs_probe_range_, __LINE__)((timings), (name), \
                                                                       ::hs::probes::Category::category)
