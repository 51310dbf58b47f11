#include "hybridscope/probes/range.h"

#include <cstring>

namespace hs::probes {

namespace detail {
std::atomic<const RangeObserver*> g_range_observer{nullptr};
}  // namespace detail

StepTimings::StepTimings(Recorder* recorder) : recorder_(recorder), nvtx_(nvtx_attached()) { set_recorder(recorder); }

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

void StepTimings::pop(const char* name, Category category, int depth, std::int64_t start_ns, std::int64_t end_ns,
                      unsigned consumers) noexcept {
  --depth_;
  if (consumers & kConsumerTiming) {
    const double seconds = static_cast<double>(end_ns - start_ns) * 1e-9;
    bool found = false;
    for (auto& [n, s] : totals_) {
      if (n == name || std::strcmp(n, name) == 0) {
        s += seconds;
        found = true;
        break;
      }
    }
    if (!found) {
      try {
        totals_.emplace_back(name, seconds);
      } catch (...) {
      }
    }
  }
  // The recorder may have been detached while the range was open.
  if ((consumers & kConsumerRecorder) && recorder_)
    recorder_->record_range(RangeRecord{name, category, depth, step_, start_ns, end_ns});
}

}  // namespace hs::probes
