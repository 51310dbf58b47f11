// rollout_server.cpp — the split rollout pool: the weight sync, the hand-over of a batch, the
// rollout ranks' loop.
#include "hybridscope/trainer/loop/rollout_server.h"

#include <algorithm>
#include <optional>
#include <stdexcept>

#include <fmt/format.h>
#include <torch/torch.h>

#include "hybridscope/probes/clock.h"
#include "hybridscope/trainer/data/tokenizer.h"
#include "hybridscope/trainer/dist/topology.h"
#include "hybridscope/trainer/loop/fully_async.h"
#include "hybridscope/trainer/loop/reference_server.h"
#include "hybridscope/trainer/loop/run_recording.h"
#include "hybridscope/trainer/rollout/rollout.h"
#include "loop/random_streams.h"

namespace hs::trainer {

namespace {

/// `model`'s parameters in named order, cut into buckets of at most `bucket_bytes` of one dtype
/// (a parameter larger than a bucket travels alone). Every rank cuts the same buckets.
std::vector<std::vector<torch::Tensor>> weight_buckets(Transformer& model, std::int64_t bucket_bytes) {
  std::vector<std::vector<torch::Tensor>> buckets;
  std::int64_t filled = 0;
  for (const auto& p : model->parameters()) {
    const auto bytes = static_cast<std::int64_t>(p.nbytes());
    const bool fits = !buckets.empty() && filled + bytes <= bucket_bytes &&
                      buckets.back().front().scalar_type() == p.scalar_type();
    if (!fits) {
      buckets.emplace_back();
      filled = 0;
    }
    buckets.back().push_back(p);
    filled += bytes;
  }
  return buckets;
}

/// One rollout rank's share of a step's batch, generated and packed.
struct Share {
  torch::Tensor header;  // (2,) float64: the generating weights' version, the generation's seconds
  torch::Tensor rows;    // pack_rollouts's (share x n, 1 + 2 L)
};

/// Every rollout rank's share to every rank of the world, one broadcast pair per rollout rank in
/// pool order; `mine` is this rank's share on a rollout rank (null on an actor rank). Returns the
/// shares in pool order.
std::vector<Share> hand_over(const Topology& topology, const Share* mine, std::size_t prompts, int n,
                             int max_response_length) {
  Communicator& world = *topology.global_world;
  const auto& pool = topology.rollout_ranks;
  const auto rows = static_cast<std::int64_t>(prompts / pool.size()) * n;
  std::vector<Share> shares;
  for (const int root : pool) {
    Share share;
    if (root == topology.rank()) {
      TORCH_CHECK(mine && mine->rows.size(0) == rows, "rollout hand-over: rank ", root, " generated ",
                  mine ? mine->rows.size(0) : 0, " rows for a share of ", rows);
      share = *mine;
    } else {
      share.header = torch::empty({2}, torch::kFloat64);
      share.rows = torch::empty({rows, 1 + 2 * static_cast<std::int64_t>(max_response_length)}, torch::kFloat32);
    }
    world.broadcast(share.header, root);
    world.broadcast(share.rows, root);
    shares.push_back(std::move(share));
  }
  return shares;
}

}  // namespace

PoolStart share_pool_start(const Topology& topology, const PoolStart& start) {
  auto wire = torch::tensor({static_cast<std::int64_t>(start.kind), start.step, start.data.epoch,
                             start.data.batch_in_epoch, start.param_version, start.rollout_version},
                            torch::kInt64);
  topology.global_world->broadcast(wire, 0);
  const auto w = wire.accessor<std::int64_t, 1>();
  PoolStart out;
  out.kind = static_cast<PoolStart::Kind>(w[0]);
  out.step = w[1];
  out.data.epoch = w[2];
  out.data.batch_in_epoch = w[3];
  out.param_version = w[4];
  out.rollout_version = w[5];
  if (out.kind == PoolStart::Kind::kRefused && topology.serves_rollout())
    throw std::runtime_error("the actor's ranks refused to start this run (rank 0's log says why); this rollout "
                             "rank stops with them");
  return out;
}

bool syncs_weights_at(AsyncMode mode, std::int64_t step, std::int64_t total_steps, int trigger_parameter_sync_step) {
  if (mode == AsyncMode::kOneStepOff) return step >= 2 && step < total_steps;
  if (mode == AsyncMode::kFullyAsync) return step >= 2 && (step - 1) % trigger_parameter_sync_step == 0;
  return step >= 2;
}

std::unique_ptr<RolloutEngine> make_pool_engine(const Config& cfg, Transformer& model, const Tokenizer& tokenizer) {
  const auto& rollout_cfg = cfg.actor_rollout_ref.rollout;
  auto engine = std::make_unique<RolloutEngine>(
      model, tokenizer.eos_token_id(), tokenizer.pad_token_id(), cfg.hybridscope.kv_block_size,
      cfg.hybridscope.kv_num_blocks, rollout_cfg.max_num_seqs, cfg.data.max_prompt_length + cfg.data.max_response_length,
      rollout_cfg.gpu_memory_utilization);
  engine->limit_sampling_to(tokenizer.vocab_size());
  engine->set_stop_token_ids(tokenizer.stop_token_ids());
  engine->set_decode(decode_options(cfg.hybridscope.decode));
  engine->allocate_cache();  // the pool only generates: its KV blocks stay allocated
  return engine;
}

RolloutHandoff receive_rollouts(const Topology& topology, std::size_t prompts, int n, int max_response_length) {
  const auto shares = hand_over(topology, nullptr, prompts, n, max_response_length);
  RolloutHandoff out;
  out.rollouts.responses.resize(prompts * static_cast<std::size_t>(n));
  out.rollouts.log_probs.resize(out.rollouts.responses.size());
  std::size_t at = 0;
  for (const auto& share : shares) {
    const auto count = share.rows.size(0);
    unpack_rollouts(share.rows, 0, count, out.rollouts, at);
    at += static_cast<std::size_t>(count);
    const auto header = share.header.accessor<double, 1>();
    out.param_versions.push_back(static_cast<std::int64_t>(header[0]));
    out.generate_seconds = std::max(out.generate_seconds, header[1]);
  }
  return out;
}

WeightSync sync_rollout_weights(const Topology& topology, Transformer& model, std::int64_t& version,
                                std::int64_t bucket_bytes, std::int64_t step, probes::Recorder* recorder) {
  torch::NoGradGuard no_grad;
  const auto buckets = weight_buckets(model, bucket_bytes);
  WeightSync sync;
  sync.buckets = static_cast<std::int64_t>(buckets.size());
  for (const auto& bucket : buckets)
    for (const auto& p : bucket) sync.bytes += static_cast<std::int64_t>(p.nbytes());
  if (!topology.sync_group) return sync;  // an actor rank other than rank 0: nothing moves here
  Communicator& group = *topology.sync_group;
  const bool sender = group.rank() == 0;
  probes::SwitchRecord record;
  record.step = step;
  record.direction = "sync_rollout_weights";
  record.start_ns = probes::now_ns();
  std::int64_t pack_ns = 0, wire_ns = 0, unpack_ns = 0;
  auto timed = [](std::int64_t& total, auto&& fn) {
    const std::int64_t start = probes::now_ns();
    fn();
    total += probes::now_ns() - start;
  };
  auto tag = torch::full({1}, version, torch::kInt64);
  timed(wire_ns, [&] { group.broadcast(tag, 0); });
  if (!sender) version = tag.item<std::int64_t>();
  for (const auto& bucket : buckets) {
    torch::Tensor flat;
    if (sender) {
      timed(pack_ns, [&] {
        std::vector<torch::Tensor> pieces;
        for (const auto& p : bucket) pieces.push_back(p.detach().reshape({-1}));
        flat = torch::cat(pieces);
      });
    } else {
      std::int64_t numel = 0;
      for (const auto& p : bucket) numel += p.numel();
      flat = torch::empty({numel}, bucket.front().options().requires_grad(false));
    }
    timed(wire_ns, [&] { group.broadcast(flat, 0); });
    if (!sender) {
      timed(unpack_ns, [&] {
        std::int64_t offset = 0;
        for (const auto& p : bucket) {
          p.detach().copy_(flat.slice(0, offset, offset + p.numel()).view(p.sizes()));
          offset += p.numel();
        }
      });
    }
  }
  if (sender) {
    record.components.emplace_back("sync_pack", pack_ns);
    record.components.emplace_back("sync_broadcast", wire_ns);
    record.bytes_sent = sync.bytes;
  } else {
    record.components.emplace_back("sync_broadcast", wire_ns);
    record.components.emplace_back("sync_unpack", unpack_ns);
    record.bytes_received = sync.bytes;
  }
  record.end_ns = probes::now_ns();
  if (recorder) recorder->record_switch(record);
  return sync;
}

int serve_rollout(const Config& cfg, Topology& topology, RunRecording& recording, Transformer& model,
                  const RLDataset& train_data, DataLoader& loader, const Tokenizer& tokenizer,
                  std::int64_t total_steps, const std::atomic<int>& stop_signal) {
  Communicator& world = *topology.global_world;
  probes::StepTimings& timings = recording.timings();
  probes::Recorder* recorder = recording.probes().recorder();
  const auto& rollout_cfg = cfg.actor_rollout_ref.rollout;
  const AsyncMode mode = cfg.hybridscope.async_mode;
  const std::int64_t bucket_bytes = static_cast<std::int64_t>(rollout_cfg.update_weights_bucket_megabytes) << 20;
  if (mode == AsyncMode::kFullyAsync)
    return serve_fully_async(cfg, topology, recording, model, train_data, loader, tokenizer, total_steps, stop_signal);
  recording.begin_step(0);
  const PoolStart start = share_pool_start(topology, {});
  const bool resumed = start.kind == PoolStart::Kind::kResumed;
  // The base policy: prepare()'s broadcast of the actor's rank 0 weights, after the same warm-up
  // (resumed: the checkpoint's weights, no warm-up).
  std::int64_t step = take_the_actors_base(cfg, recording, world, model, train_data, tokenizer, !resumed);
  if (resumed) loader.set_state(start.data);  // the prompts the actor draws next
  const std::unique_ptr<RolloutEngine> pool_engine = make_pool_engine(cfg, model, tokenizer);
  RolloutEngine& engine = *pool_engine;
  const auto& pool = topology.rollout_ranks;
  const int replica = static_cast<int>(std::find(pool.begin(), pool.end(), topology.rank()) - pool.begin());
  std::int64_t version = start.param_version;  // the actor updates the weights held here have seen

  // Batch `batch` (the training step it is for): the loader's next prompts, as the actor draws
  // them, this rank's contiguous share generated with the step's seed for this replica.
  auto generate = [&](std::int64_t batch) {
    HS_PROBE_RANGE(timings, "gen", kPhase);
    std::vector<std::size_t> indices = loader.next_batch();
    const std::size_t share = indices.size() / pool.size();
    GenerationRequest request;
    request.params = rollout_cfg.sampling();
    request.max_response_length = cfg.data.max_response_length;
    for (std::size_t i = share * static_cast<std::size_t>(replica); i < share * static_cast<std::size_t>(replica + 1); ++i)
      request.prompts.push_back(train_data[indices[i]].prompt_ids);
    auto gen = at::detail::createCPUGenerator(
        detail::rank_stream_seed(cfg.hybridscope.seed, batch, detail::kRolloutStream, replica));
    const std::int64_t begin = probes::now_ns();
    const GenerationResult result = engine.generate(request, gen);
    const double seconds = static_cast<double>(probes::now_ns() - begin) * 1e-9;
    recording.record_kv("gen_peak", result.peak_pool, engine.cache_bytes());
    Share out;
    out.header = torch::tensor({static_cast<double>(version), seconds}, torch::kFloat64);
    out.rows = pack_rollouts(result.responses, result.log_probs, cfg.data.max_response_length);
    return out;
  };
  auto hand = [&](const Share& share) {
    HS_PROBE_RANGE(timings, "rollout_handoff", kPhase);
    hand_over(topology, &share, static_cast<std::size_t>(cfg.data.train_batch_size), rollout_cfg.n,
              cfg.data.max_response_length);
  };
  auto receive_weights = [&] {
    HS_PROBE_RANGE(timings, "sync_rollout_weights", kSwitch);
    sync_rollout_weights(topology, model, version, bucket_bytes, step, recorder);
  };

  // A resumed one_step_off run: the weights the batch after the checkpoint's step was generated
  // with (one update older than the checkpoint's), so that it is generated again as it was.
  if (start.rollout_version >= 0) receive_weights();
  std::optional<Share> ready;  // one_step_off: the batch of the next step, generated ahead
  if (mode == AsyncMode::kOneStepOff && step < total_steps) ready = generate(step + 1);
  recording.flush();
  int served = 0;
  while (step < total_steps) {
    // The actor ranks' step boundary (trainer.cpp, fit()): the same agreement, the same stops.
    recording.stop_if_requested(world, stop_signal.load(), step);  // fit()'s catch marks a failed write
    recording.begin_step(++step);
    if (mode == AsyncMode::kOneStepOff) {
      hand(*ready);  // batch `step`, generated while the actor trained on the one before
      if (syncs_weights_at(mode, step, total_steps)) receive_weights();
      if (step < total_steps) ready = generate(step + 1);
    } else {
      if (syncs_weights_at(mode, step, total_steps)) receive_weights();
      hand(generate(step));
    }
    recording.flush();
    ++served;
  }
  return served;
}

}  // namespace hs::trainer
