#include "hybridscope/probes/range.h"

#include <cstring>

namespace hs::probes {

namespace detail {
std::atomic<const RangeObserver*> g_range_observer{nullptr};
}  // namespace detail

namespace {
thread_local StepTimings* t_timings = nullptr;
}  // namespace

StepTimings& thread_timings() noexcept {
  static thread_local StepTimings off;  // no recorder; NVTX as attached: what an unprobed site sees
  return t_timings ? *t_timings : off;
}

ThreadTimings::ThreadTimings(StepTimings& timings) noexcept : previous_(t_timings) { t_timings = &timings; }

ThreadTimings::~ThreadTimings() { t_timings = previous_; }

StepTimings::StepTimings(Recorder* recorder) : recorder_(recorder), nvtx_(nvtx_attached()) {
  detail::init_clock();  // before any range reads now_ticks()
  set_recorder(recorder);
}

void StepTimings::set_recorder(Recorder* recorder) noexcept {
  recorder_ = recorder;
  trace_consumers_ = (recorder_ ? kConsumerRecorder : 0u) | (nvtx_ ? kConsumerNvtx : 0u);
}

void StepTimings::begin_step(std::int64_t step) {
  step_ = step;
  totals_.clear();
}

double StepTimings::seconds(const char* name) const {
  for (const auto& [n, s] : totals_)
    if (n == name || std::strcmp(n, name) == 0) return s;
  return 0.0;
}

void StepTimings::pop(const TickRange& range, unsigned consumers) noexcept {
  --depth_;
  if (consumers & kConsumerTiming) {
    const double seconds = static_cast<double>(range.end_ticks - range.start_ticks) * seconds_per_tick();
    bool found = false;
    for (auto& [n, s] : totals_) {
      if (n == range.name || std::strcmp(n, range.name) == 0) {
        s += seconds;
        found = true;
        break;
      }
    }
    if (!found) {
      try {
        totals_.emplace_back(range.name, seconds);
      } catch (...) {
      }
    }
  }
  // The recorder may have been detached while the range was open.
  if ((consumers & kConsumerRecorder) && recorder_) {
    TickRange r = range;
    r.step = step_;
    recorder_->record_ticks(r);
  }
}

}  // namespace hs::probes
