// run_probes.h — one rank's probes: the recorder they write into, the step every record carries,
// and whether probing is on (hybridscope.probes.enable).
//
// One object per rank, handed by pointer to every probe site of the trainer (the collectives, the
// reshard executor, the hybrid switch, the memory sampler, the phase boundaries). Off, it is the
// null object: no recorder, every probe site only forwards or times, and no site re-reads the
// config flag. The step is atomic because probe sites on other threads (the memory sampler's
// timer, pipeline sender threads) read it while the loop advances it.
//
// Not the recorder: the run row and the step metrics are written whether probing is on or off;
// this object decides only what the probes add.
#pragma once

#include <atomic>
#include <cstdint>

namespace hs::probes {

class Recorder;
namespace detail {
void set_recorder_step(Recorder& recorder, std::int64_t step) noexcept;  // Recorder::set_step (recorder.cpp)
}  // namespace detail

class RunProbes {
 public:
  /// Off: records nothing.
  RunProbes() = default;
  /// On when `recorder` is non-null; `recorder` must outlive this object.
  explicit RunProbes(Recorder* recorder) noexcept : recorder_(recorder) {}
  RunProbes(const RunProbes&) = delete;
  RunProbes& operator=(const RunProbes&) = delete;

  bool on() const noexcept { return recorder_ != nullptr; }
  /// Where the probes record; nullptr when off.
  Recorder* recorder() const noexcept { return recorder_; }

  /// The training step the records made now belong to (0: set-up and warm-up).
  std::int64_t step() const noexcept { return step_.load(std::memory_order_relaxed); }
  /// Also tells the recorder, which places GPU records in steps (kernel_stats, the raw window).
  void set_step(std::int64_t step) noexcept {
    step_.store(step, std::memory_order_relaxed);
    if (recorder_) detail::set_recorder_step(*recorder_, step);
  }

  /// The shared "off" object, for probe sites that are given none.
  static const RunProbes& off() noexcept {
    static const RunProbes none;
    return none;
  }

 private:
  Recorder* recorder_ = nullptr;
  std::atomic<std::int64_t> step_{0};
};

}  // namespace hs::probes
