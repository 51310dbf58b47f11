// run_recording.h — this rank's part of the run database and the probes that write into it.
//
// Owns the rank's file (rank 0: the run database itself; rank k: RUN.sqlite.rank<k>, merged at the
// end), the run row from begin() to end(), the RunProbes every probe site is given (off when
// hybridscope.probes.enable=false: then only the run row, the step metrics and timing_s/* are
// kept), the phase timings, the memory sampler and the CUPTI collector, and the flush at each
// step's end. Not here: what a step computes, or which metrics it reports.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "hybridscope/probes/range.h"
#include "hybridscope/probes/recorder.h"
#include "hybridscope/probes/run_probes.h"
#include "hybridscope/trainer/config/config.h"
#include "hybridscope/trainer/rollout/kv_block_pool.h"

namespace hs::trainer {

class Communicator;
struct Topology;

class RunRecording {
 public:
  /// Opens this rank's file. World > 1: rank 0 first merges the rank files a dead earlier run left
  /// beside the database, every rank waits for that, and a stale rank file that could not be merged
  /// is replaced (said on stderr).
  RunRecording(const Config& cfg, Topology& topology);
  ~RunRecording();
  RunRecording(const RunRecording&) = delete;
  RunRecording& operator=(const RunRecording&) = delete;

  probes::Recorder& recorder() { return *recorder_; }
  /// What every probe site records through; off when hybridscope.probes.enable=false.
  const probes::RunProbes& probes() const { return *probes_; }
  probes::StepTimings& timings() { return timings_; }

  /// The run row (world > 1: rank 0 creates it and every rank records under its id, broadcast over
  /// `world`), then the collectors that record into the run: the memory sampler and CUPTI.
  void begin(probes::RunInfo info, Communicator& world, int rank);
  /// The collectors stopped, then the run row says how the run ended; records the probes lost
  /// (dropped or not written) are also said on stderr.
  void end(probes::RunStatus status, const std::string& message = {});
  bool begun() const { return recorder_->run_id() >= 0; }

  /// Step `step` begins: phase timings restart and every probe record now carries `step`.
  void begin_step(std::int64_t step);
  /// The records from here on carry `step` (a resumed run's step, without restarting the timings).
  void set_step(std::int64_t step) { probes_->set_step(step); }
  /// Step end: the GPU activity CUPTI holds, then everything the recorder holds, into the database.
  void flush();
  /// After flush(), at a step boundary: with hybridscope.recorder.on_write_error=stop and records
  /// this rank's recorder failed to write, why the run must stop ("the recorder of rank 0 could not
  /// write 97 records: " and SQLite's error, the OS error, the database); empty otherwise.
  std::string stop_reason() const;

  /// Whether the run stops at this step boundary, agreed by every rank: the highest stop signal any
  /// rank received (0: none) and, with on_write_error=stop, a rank whose recorder failed a write
  /// (-1: none).
  struct StopRequest {
    int signal = 0;
    int write_failed_rank = -1;
  };
  /// One all-reduce over `world` (none when it is one rank): every rank of `world`, the actor's and
  /// a split reference's alike, calls it at the same step boundaries. `signal`: this rank's.
  StopRequest agree_on_stop(Communicator& world, int signal) const;
  /// The message a stop for a failed write ends the run with, after `step`: this rank's own
  /// failure (stop_reason()) when it has one, else the failing rank's number.
  std::string write_stop_message(const StopRequest& stop, std::int64_t step) const;
  /// The step boundary every rank of `world` passes (the actor's, a split reference's, a rollout
  /// pool's): agree_on_stop, then on a signal end the run killed and throw std::runtime_error, on
  /// a rank's failed write throw probes::RecorderError with write_stop_message (the caller's catch
  /// marks the run failed). `step`: the last step completed.
  void stop_if_requested(Communicator& world, int signal, std::int64_t step);

  /// Memory probe at a phase boundary (nothing when the probes are off): the device's or the CPU
  /// tracking allocator's memory, and the KV block pool (`stats`, `cache_bytes`).
  void sample(const char* phase, const KvPoolStats& stats, std::int64_t cache_bytes);
  /// The KV block pool alone (nothing when the probes are off).
  void record_kv(const char* phase, const KvPoolStats& stats, std::int64_t cache_bytes);

 private:
  struct Collectors;
  int rank_;
  int memory_device_;
  int memory_interval_ms_;
  OnWriteError on_write_error_;
  std::unique_ptr<probes::Recorder> recorder_;
  std::unique_ptr<probes::RunProbes> probes_;
  probes::StepTimings timings_;
  // The constructing thread (the loop's) records the fine ranges of the rollout, the micro-batches
  // and the optimizer step through timings_ (probes::thread_timings()).
  probes::ThreadTimings thread_timings_{timings_};
  std::unique_ptr<Collectors> collectors_;  // while a run is being recorded
};

}  // namespace hs::trainer
