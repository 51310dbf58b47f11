// run_recording.cpp — this rank's run file, the run row and the collectors that record into it.
#include "hybridscope/trainer/loop/run_recording.h"

#include <chrono>
#include <filesystem>

#include <fmt/format.h>
#include <torch/torch.h>

#include "hybridscope/probes/clock.h"
#include "hybridscope/probes/merge.h"
#include "hybridscope/probes/rank_files.h"
#if HS_HAVE_CUPTI
#include "hybridscope/probes/cupti_collector.h"
#endif
#include "hybridscope/trainer/dist/topology.h"
#include "hybridscope/trainer/memory/memory_probe.h"

namespace hs::trainer {

struct RunRecording::Collectors {
  std::unique_ptr<MemorySampler> memory_sampler;  // memory on a timer besides the phase boundaries
#if HS_HAVE_CUPTI
  std::unique_ptr<probes::CuptiCollector> cupti;  // GPU activity; says "inactive" without a device
#endif
};

RunRecording::RunRecording(const Config& cfg, Topology& topology)
    : rank_(topology.rank()),
      memory_device_(topology.memory_device),
      memory_interval_ms_(cfg.hybridscope.probes.memory_interval_ms),
      on_write_error_(cfg.hybridscope.recorder.on_write_error),
      collectors_(std::make_unique<Collectors>()) {
  const std::string& db = cfg.hybridscope.db;
  const int rank = topology.rank();
  if (topology.world() > 1) {
    // Files a dead earlier run left behind are merged before this run's ranks open theirs.
    if (rank == 0 && std::filesystem::exists(db) && !probes::rank_files(db).empty()) {
      for (const auto& line : probes::merge_rank_files(db).messages) fmt::print("merged earlier rank file: {}\n", line);
    }
    topology.groups->world()->barrier();
  }
  const std::string rank_db = probes::rank_file_path(db, rank);
  if (rank > 0 && std::filesystem::exists(rank_db)) {
    // Left over and not mergeable (its run is not in the run database): replaced, said aloud.
    fmt::print(stderr, "warning: replacing a stale rank file {} that could not be merged into {}\n", rank_db, db);
    probes::remove_run_file(rank_db);
  }
  probes::RecorderOptions options;
  if (!probes::parse_raw_steps(cfg.hybridscope.probes.cupti_raw_steps.c_str(), options.gpu))
    throw ConfigError(fmt::format("hybridscope.probes.cupti_raw_steps = '{}': give none, all, a step N or a range A-B "
                                  "(e.g. 2-3)",
                                  cfg.hybridscope.probes.cupti_raw_steps));
  recorder_ = std::make_unique<probes::Recorder>(rank_db, rank, options);
  probes_ = std::make_unique<probes::RunProbes>(cfg.hybridscope.probes.enable ? recorder_.get() : nullptr);
  timings_.set_recorder(probes_->recorder());
}

RunRecording::~RunRecording() = default;

void RunRecording::begin(probes::RunInfo info, Communicator& world, int rank) {
  if (world.size() > 1) {
    // Rank 0 creates the run row in the run database; the others record under the same id.
    auto id = torch::full({1}, rank == 0 ? recorder_->begin_run(info) : std::int64_t{-1}, torch::kInt64);
    world.broadcast(id, 0);
    if (rank > 0) {
      info.run_id = id.item<std::int64_t>();
      recorder_->begin_run(info);
    }
  } else {
    recorder_->begin_run(info);
  }
  // Which clock the records are on (each rank's is in ranks.clock_source).
  if (rank == 0) {
    const probes::ClockInfo clock = probes::clock_info();
    if (clock.source == probes::ClockSource::kTsc)
      fmt::print("clock: tsc at {:.4f} GHz, calibrated against CLOCK_MONOTONIC\n", clock.tsc_hz * 1e-9);
    else
      fmt::print("clock: steady_clock (CLOCK_MONOTONIC: no invariant TSC, or HS_CLOCK=steady_clock)\n");
  }
  if (!probes_->on()) return;
  if (memory_interval_ms_ > 0)
    collectors_->memory_sampler = std::make_unique<MemorySampler>(*probes_, memory_device_,
                                                                  std::chrono::milliseconds(memory_interval_ms_));
#if HS_HAVE_CUPTI
  if (!collectors_->cupti) collectors_->cupti = std::make_unique<probes::CuptiCollector>(*recorder_);
  collectors_->cupti->start();  // never throws; collector_stats records why it is not active
#endif
}

void RunRecording::end(probes::RunStatus status, const std::string& message) {
  collectors_->memory_sampler.reset();
#if HS_HAVE_CUPTI
  if (collectors_->cupti) collectors_->cupti->stop();
#endif
  const bool recorded = recorder_->end_run(status, message);
  // Lost records are said aloud, as well as stored in the run row (runs.dropped_records and
  // runs.write_errors): a probe never throws on the hot path, so this is where a user learns of it.
  const std::int64_t dropped = recorder_->dropped_records(), failed = recorder_->failed_writes();
  if (dropped > 0 || failed > 0)
    fmt::print(stderr,
               "warning: rank {} lost probe records: {} dropped (the recorder's queue was full), {} not written "
               "(SQLite write errors{}); the run database misses them\n",
               rank_, dropped, failed, failed > 0 ? ": " + recorder_->write_error() : std::string());
  if (!recorded)
    fmt::print(stderr,
               "error: rank {} could not record how the run ended in {} ({}): its row there still reads "
               "'running' and reads 'killed' once the file is next opened\n",
               rank_, recorder_->path(), recorder_->write_error());
}

RunRecording::StopRequest RunRecording::agree_on_stop(Communicator& world, int signal) const {
  StopRequest stop;
  stop.signal = signal;
  stop.write_failed_rank = stop_reason().empty() ? -1 : rank_;
  if (world.size() > 1) {  // max over ranks; the rank as 1 + rank, so that none (-1) is 0
    auto flags = torch::tensor({std::int64_t{stop.signal}, std::int64_t{stop.write_failed_rank + 1}}, torch::kInt64);
    world.all_reduce(flags, ReduceOp::kMax);
    stop.signal = static_cast<int>(flags[0].item<std::int64_t>());
    stop.write_failed_rank = static_cast<int>(flags[1].item<std::int64_t>()) - 1;
  }
  return stop;
}

std::string RunRecording::write_stop_message(const StopRequest& stop, std::int64_t step) const {
  const std::string own = stop_reason();
  return fmt::format("stopped after step {} (hybridscope.recorder.on_write_error=stop): {}", step,
                     !own.empty() ? own
                                  : fmt::format("the recorder of rank {} could not write records (its log says why)",
                                                stop.write_failed_rank));
}

void RunRecording::stop_if_requested(Communicator& world, int signal, std::int64_t step) {
  const StopRequest stop = agree_on_stop(world, signal);
  if (stop.signal) {
    const std::string message = fmt::format("stopped by signal {} after step {}", stop.signal, step);
    end(probes::RunStatus::kKilled, message);
    throw std::runtime_error(message);
  }
  if (stop.write_failed_rank >= 0) throw probes::RecorderError(write_stop_message(stop, step));
}

std::string RunRecording::stop_reason() const {
  if (on_write_error_ != OnWriteError::kStop || recorder_->failed_writes() == 0) return {};
  return fmt::format("the recorder of rank {} could not write {} records: {}", rank_, recorder_->failed_writes(),
                     recorder_->write_error());
}

void RunRecording::begin_step(std::int64_t step) {
  timings_.begin_step(step);
  probes_->set_step(step);
}

void RunRecording::flush() {
#if HS_HAVE_CUPTI
  if (collectors_->cupti) collectors_->cupti->flush();
#endif
  recorder_->flush();
}

void RunRecording::record_kv(const char* phase, const KvPoolStats& stats, std::int64_t cache_bytes) {
  probes::Recorder* recorder = probes_->recorder();
  if (recorder == nullptr) return;
  probes::KvPoolSample k;
  k.ts_ns = probes::now_ns();
  k.step = probes_->step();
  k.phase = phase;
  k.num_blocks = stats.num_blocks;
  k.block_size = stats.block_size;
  k.blocks_used = stats.blocks_used;
  k.shared_blocks = stats.shared_blocks;
  k.num_sequences = stats.num_sequences;
  k.tokens_stored = stats.tokens_stored;
  k.token_capacity_used = stats.token_capacity_used;
  k.cache_bytes = cache_bytes;
  recorder->record_kv_pool(k);
}

void RunRecording::sample(const char* phase, const KvPoolStats& stats, std::int64_t cache_bytes) {
  probes::Recorder* recorder = probes_->recorder();
  if (recorder == nullptr) return;
  recorder->record_memory(read_memory(memory_device_, probes_->step(), phase));
  record_kv(phase, stats, cache_bytes);
}

}  // namespace hs::trainer
