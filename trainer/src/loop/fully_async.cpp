// fully_async.cpp — verl's fully-async rollouter (on the rollout ranks) and the actor's side of its
// queue: the plan's bounds, the wire format of a prompt group, the rollouter's loop (fully_async.h).
#include "hybridscope/trainer/loop/fully_async.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>
#include <torch/torch.h>

#include "hybridscope/probes/clock.h"
#include "hybridscope/trainer/data/tokenizer.h"
#include "hybridscope/trainer/dist/topology.h"
#include "hybridscope/trainer/loop/reference_server.h"
#include "hybridscope/trainer/loop/rollout_server.h"
#include "hybridscope/trainer/loop/run_recording.h"
#include "hybridscope/trainer/rollout/rollout.h"
#include "loop/random_streams.h"
#include "loop/sample_queue.h"

namespace hs::trainer {

namespace {

// A prompt group on the wire: this float64 header, then its n packed rows (pack_rollouts's float32
// (n, 1 + 2 L)).
// kReprefilled: the tokens the wave's re-prefills recomputed after a mid-wave sync, on the wave's
// first group (0 on the others), so that the step sums count each wave once.
enum Header { kPrompt, kVersionStart, kVersionEnd, kSeconds, kReprefilled, kHeaderSize };

std::vector<std::uint8_t> encode_group(const double (&header)[kHeaderSize], const torch::Tensor& rows) {
  const torch::Tensor r = rows.contiguous();
  const std::size_t head = sizeof(header), body = static_cast<std::size_t>(r.nbytes());
  std::vector<std::uint8_t> bytes(head + body);
  std::memcpy(bytes.data(), header, head);
  std::memcpy(bytes.data() + head, r.data_ptr(), body);
  return bytes;
}

// How long the rollouter sleeps between two looks at the queue's sync counter while it may not
// start a group (the staleness bound holds it back) or has nothing left to generate.
constexpr std::chrono::milliseconds kPoll{2};

}  // namespace

std::int64_t FullyAsyncPlan::claim_end(std::int64_t syncs_joined) const {
  return syncs_joined * trigger * required_samples + max_queue_size;
}

std::int64_t FullyAsyncPlan::staleness_bound() const { return (max_queue_size - 1) / required_samples; }

FullyAsyncPlan fully_async_plan(const Config& cfg, std::int64_t total_steps) {
  const auto& at = cfg.async_training;
  FullyAsyncPlan plan;
  plan.required_samples = static_cast<std::int64_t>(at.require_batches) * cfg.actor_rollout_ref.actor.ppo_mini_batch_size;
  plan.trigger = at.trigger_parameter_sync_step;
  // verl: int(required_samples * (staleness_threshold + 1) * trigger_parameter_sync_step).
  plan.max_queue_size = static_cast<std::int64_t>(static_cast<double>(plan.required_samples) *
                                                  (at.staleness_threshold + 1) * static_cast<double>(plan.trigger));
  plan.total_samples = total_steps * plan.required_samples;
  plan.syncs = total_steps >= 1 ? (total_steps - 1) / plan.trigger : 0;
  return plan;
}

FullyAsyncBatch take_fully_async_batch(const Topology& topology, SampleQueue* queue, const FullyAsyncPlan& plan,
                                       std::int64_t step, int n, int max_response_length) {
  const std::int64_t groups = plan.required_samples;
  const std::int64_t width = 1 + 2 * static_cast<std::int64_t>(max_response_length);
  torch::Tensor headers = torch::empty({groups, kHeaderSize + 1}, torch::kFloat64);  // + the queue depth
  torch::Tensor rows = torch::empty({groups * n, width}, torch::kFloat32);
  if (queue) {
    auto h = headers.accessor<double, 2>();
    const std::size_t head = sizeof(double) * kHeaderSize;
    const std::size_t body = static_cast<std::size_t>(n * width) * sizeof(float);
    for (std::int64_t g = 0; g < groups; ++g) {
      // The most groups waiting at any take of this step: the queue only grows between takes.
      h[g][kHeaderSize] = static_cast<double>(queue->depth());
      const std::int64_t index = (step - 1) * groups + g;
      const std::vector<std::uint8_t> bytes = queue->take(index);
      if (bytes.size() != head + body)
        throw std::runtime_error(fmt::format("fully_async: prompt group {} has {} bytes, expected {} ({} responses of "
                                             "{} tokens): the rollout ranks run another configuration",
                                             index, bytes.size(), head + body, n, max_response_length));
      std::memcpy(&h[g][0], bytes.data(), head);
      std::memcpy(rows[g * n].data_ptr(), bytes.data() + head, body);
    }
  }
  Communicator& pool = *topology.parallel.world;
  if (pool.size() > 1) {
    pool.broadcast(headers, 0);
    pool.broadcast(rows, 0);
  }
  FullyAsyncBatch out;
  out.rollouts.responses.resize(static_cast<std::size_t>(groups * n));
  out.rollouts.log_probs.resize(out.rollouts.responses.size());
  unpack_rollouts(rows, 0, groups * n, out.rollouts, 0);
  const auto h = headers.accessor<double, 2>();
  for (std::int64_t g = 0; g < groups; ++g) {
    out.prompts.push_back(static_cast<std::size_t>(h[g][kPrompt]));
    out.version_start.push_back(static_cast<std::int64_t>(h[g][kVersionStart]));
    out.version_end.push_back(static_cast<std::int64_t>(h[g][kVersionEnd]));
    out.generate_seconds = std::max(out.generate_seconds, h[g][kSeconds]);
    out.reprefilled_tokens += static_cast<std::int64_t>(h[g][kReprefilled]);
    out.queue_depth = std::max(out.queue_depth, static_cast<std::int64_t>(h[g][kHeaderSize]));
  }
  return out;
}

int serve_fully_async(const Config& cfg, Topology& topology, RunRecording& recording, Transformer& model,
                      const RLDataset& train_data, DataLoader& loader, const Tokenizer& tokenizer,
                      std::int64_t total_steps, const std::atomic<int>& stop_signal) {
  probes::StepTimings& timings = recording.timings();
  probes::Recorder* recorder = recording.probes().recorder();
  const auto& rollout_cfg = cfg.actor_rollout_ref.rollout;
  const FullyAsyncPlan plan = fully_async_plan(cfg, total_steps);
  const std::int64_t bucket_bytes = static_cast<std::int64_t>(rollout_cfg.update_weights_bucket_megabytes) << 20;
  recording.begin_step(0);
  // A resumed run (share_pool_start): the checkpoint's weights and step, no warm-up. The queue and
  // the groups in flight when the run stopped are not in the checkpoint: the stream starts again
  // at the checkpoint's first untaken group, generated with the resumed weights.
  const PoolStart start = share_pool_start(topology, {});
  const bool resumed = start.kind == PoolStart::Kind::kResumed;
  const std::int64_t resumed_step =
      take_the_actors_base(cfg, recording, *topology.global_world, model, train_data, tokenizer, !resumed);
  if (resumed_step != start.step)
    throw std::logic_error(fmt::format("fully_async: the actor announced step {} and started from step {}", start.step,
                                       resumed_step));
  if (resumed) loader.set_state(start.data);
  SampleQueue queue(topology.env, std::chrono::milliseconds(static_cast<std::int64_t>(cfg.hybridscope.dist.timeout_s * 1000)));
  const std::unique_ptr<RolloutEngine> engine = make_pool_engine(cfg, model, tokenizer);

  const auto& pool = topology.rollout_ranks;
  const auto replicas = static_cast<std::int64_t>(pool.size());
  const int replica = static_cast<int>(std::find(pool.begin(), pool.end(), topology.rank()) - pool.begin());
  const auto batch_size = static_cast<std::int64_t>(cfg.data.train_batch_size);
  const int n = rollout_cfg.n;

  std::int64_t version = start.param_version;  // the actor updates the weights held here have seen
  // Weight syncs joined, counted from the run's start: a resumed run has had those of the steps up
  // to its checkpoint's (syncs_weights_at), and the queue's counter (a new store) counts the rest.
  const std::int64_t syncs_before = resumed_step >= 1 ? (resumed_step - 1) / plan.trigger : 0;
  std::int64_t joined = syncs_before;
  // The groups the actor took before the run started: the resumed weights count as a sync there,
  // so the staleness bound allows M groups from it (as verl's rollouter, whose staleness count
  // restarts at zero with the restored parameter version).
  const std::int64_t taken_before = resumed_step * plan.required_samples;
  auto claim_end = [&] { return std::max(plan.claim_end(joined), taken_before + plan.max_queue_size); };
  // The rollouter's records carry the actor's step at the time: the one whose groups the actor
  // takes or trains (taken / R + 1), so that both roles' ranges line up step by step.
  std::int64_t step = 0;
  auto follow_the_actor = [&](std::int64_t actor_step) {
    actor_step = std::min(actor_step, total_steps);
    if (actor_step != step) recording.begin_step(step = actor_step);
  };
  // Sync j happens at the start of the actor's step jT + 1 (syncs_weights_at).
  auto join_requested_syncs = [&] {
    while (joined < plan.syncs && syncs_before + queue.sync_requests() > joined) {
      ++joined;
      follow_the_actor(joined * plan.trigger + 1);
      HS_PROBE_RANGE(timings, "sync_rollout_weights", kSwitch);
      sync_rollout_weights(topology, model, version, bucket_bytes, step, recorder);
    }
  };
  auto stop_if_signalled = [&] {
    if (const int signal = stop_signal.load()) {
      const std::string message = fmt::format("stopped by signal {} after {} weight syncs", signal, joined);
      recording.end(probes::RunStatus::kKilled, message);
      throw std::runtime_error(message);
    }
  };

  // The loader's batches in order: group k is prompt k mod B of batch k div B.
  std::int64_t loaded = resumed_step - 1;  // the loader's batch of group k: k div B (resumed: from the checkpoint's)
  std::vector<std::size_t> batch;
  auto prompt_of = [&](std::int64_t k) {
    while (loaded < k / batch_size) {
      batch = loader.next_batch();
      ++loaded;
    }
    return batch.at(static_cast<std::size_t>(k % batch_size));
  };

  follow_the_actor(resumed_step + 1);
  // The actor taking groups or asking for a sync is its sign of life: a rollouter held back for
  // longer than the collective timeout without either gives up, as a collective would.
  const auto patience = std::chrono::milliseconds(static_cast<std::int64_t>(cfg.hybridscope.dist.timeout_s * 1000));
  std::int64_t seen_taken = taken_before, seen_syncs = joined;
  auto last_sign = std::chrono::steady_clock::now();
  const std::int64_t per_wave = std::max(1, rollout_cfg.max_num_seqs / n);
  std::int64_t next = taken_before + replica;  // this replica's next group: k = replica, replica + P, ...
  int put = 0;
  while (true) {
    join_requested_syncs();
    const std::int64_t taken = taken_before + queue.taken();
    if (taken != seen_taken || joined != seen_syncs) {
      seen_taken = taken;
      seen_syncs = joined;
      last_sign = std::chrono::steady_clock::now();
    }
    follow_the_actor(taken / plan.required_samples + 1);
    std::vector<std::int64_t> wave;
    while (static_cast<std::int64_t>(wave.size()) < per_wave && next < plan.total_samples &&
           next < claim_end()) {
      wave.push_back(next);
      next += replicas;
    }
    if (wave.empty()) {
      if (next >= plan.total_samples && joined == plan.syncs) break;
      stop_if_signalled();
      if (std::chrono::steady_clock::now() - last_sign > patience)
        throw std::runtime_error(fmt::format(
            "fully_async: the actor took no prompt group and asked for no weight sync for {} s "
            "(hybridscope.dist.timeout_s) while this rollout rank waited ({} groups taken, {} of {} syncs joined): it "
            "stopped or failed — its log says why",
            cfg.hybridscope.dist.timeout_s, seen_taken, joined, plan.syncs));
      std::this_thread::sleep_for(kPoll);  // held back by the staleness bound, or waiting for the last syncs
      continue;
    }
    GenerationRequest request;
    request.params = rollout_cfg.sampling();
    request.max_response_length = cfg.data.max_response_length;
    std::vector<std::size_t> prompts;
    for (const std::int64_t k : wave) {
      prompts.push_back(prompt_of(k));
      request.prompts.push_back(train_data[prompts.back()].prompt_ids);
    }
    if (cfg.async_training.partial_rollout) {
      request.between_steps = [&] {  // true when a sync landed: the engine re-prefills
        const std::int64_t before = joined;
        join_requested_syncs();
        return joined != before;
      };
    }
    const std::int64_t start_version = version;
    // The wave's seed: its first group's position in the stream, on this replica's stream.
    auto gen = at::detail::createCPUGenerator(
        detail::rank_stream_seed(cfg.hybridscope.seed, wave.front(), detail::kRolloutStream, replica));
    GenerationResult result;
    double seconds = 0;
    {
      HS_PROBE_RANGE(timings, "gen", kPhase);
      const std::int64_t begin = probes::now_ns();
      result = engine->generate(request, gen);
      seconds = static_cast<double>(probes::now_ns() - begin) * 1e-9;
    }
    recording.record_kv("gen_peak", result.peak_pool, engine->cache_bytes());
    const torch::Tensor rows = pack_rollouts(result.responses, result.log_probs, cfg.data.max_response_length);
    for (std::size_t i = 0; i < wave.size(); ++i) {
      const double header[kHeaderSize] = {static_cast<double>(prompts[i]), static_cast<double>(start_version),
                                          static_cast<double>(version), seconds,
                                          i == 0 ? static_cast<double>(result.reprefilled_tokens) : 0.0};
      queue.put(wave[i], encode_group(header, rows.slice(0, static_cast<std::int64_t>(i) * n,
                                                         static_cast<std::int64_t>(i + 1) * n)));
      ++put;
    }
    recording.flush();
  }
  recording.flush();
  return put;
}

}  // namespace hs::trainer
