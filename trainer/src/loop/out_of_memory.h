// out_of_memory.h — a device out-of-memory reported with the phase it hit, the allocator's
// figures and the config keys that bound that phase's memory (private to hs_trainer's loop/).
//
// PyTorch's c10::OutOfMemoryError says how many bytes one allocation wanted; a user needs to know
// which phase of the RL step asked (generation's KV pool, a log-prob pass, the update) and which
// key to change. PhaseMark keeps the innermost phase the training thread is in; when an exception
// leaves a phase, the innermost such phase is remembered until the step's handler reads it.
#pragma once

#include <cstdint>
#include <exception>
#include <stdexcept>
#include <string>

namespace hs::trainer {

struct Config;

namespace detail {

/// Marks the calling thread as inside phase `name` (a string literal) for the object's lifetime.
class PhaseMark {
 public:
  explicit PhaseMark(const char* name) noexcept;
  ~PhaseMark();
  PhaseMark(const PhaseMark&) = delete;
  PhaseMark& operator=(const PhaseMark&) = delete;

  /// The innermost phase an exception left since clear_failed() (nullptr: none).
  static const char* failed() noexcept;
  static void clear_failed() noexcept;

 private:
  const char* previous_;
  int exceptions_;
};

/// What to tell a user whose step `step` ran out of device memory in `phase` (nullptr: unknown)
/// on `device` (-1: the CPU): the phase, the caching allocator's allocated/reserved bytes and the
/// device's total, the config keys bounding that phase (with their values), then PyTorch's own
/// first line `what`.
std::string out_of_memory_message(const Config& cfg, const char* phase, std::int64_t step, int device,
                                  const std::string& what);

}  // namespace detail

/// A step ran out of device memory; what() says where and what to change (out_of_memory_message).
class TrainingOutOfMemory : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace hs::trainer

#define HS_PHASE_MARK_CAT2(a, b) a##b
#define HS_PHASE_MARK_CAT(a, b) HS_PHASE_MARK_CAT2(a, b)
/// Marks the rest of the enclosing scope as phase `name` for out-of-memory reports.
#define HS_PHASE_MARK(name) const ::hs::trainer::detail::PhaseMark HS_PHASE_MARK_CAT(hs_phase_mark_, __LINE__)(name)
