// reference_server.cpp — the split reference's transfers: the actor's side and the server loop.
#include "hybridscope/trainer/loop/reference_server.h"

#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include "hybridscope/trainer/data/text_setup.h"
#include "hybridscope/trainer/dist/topology.h"
#include "hybridscope/trainer/loop/run_recording.h"
#include "hybridscope/trainer/rl/ppo_workers.h"
#include "hybridscope/trainer/rl/sft.h"

namespace hs::trainer {

torch::Tensor remote_ref_log_probs(const Topology& topology, const RolloutBatch& batch) {
  const MeshCoord coord = megatron_coord(topology.mesh, topology.actor_rank);
  const std::int64_t rows = batch.size(), R = batch.response_length();
  Communicator& world = *topology.global_world;
  torch::Tensor out;
  if (coord.tp == 0 && coord.pp == 0) {
    const auto& ref_ranks = topology.ref_ranks;
    const auto refs = static_cast<std::int64_t>(ref_ranks.size());
    auto first_row = [&](std::int64_t k) { return rows * k / refs; };
    for (std::int64_t k = 0; k < refs; ++k) {
      const std::int64_t b = first_row(k), e = first_row(k + 1);
      const int peer = ref_ranks[static_cast<std::size_t>(k)];
      auto header = torch::tensor({e - b, batch.input_ids.size(1), batch.prompt_length()}, torch::kInt64);
      world.send(header, peer);
      if (e == b) continue;
      world.send(batch.input_ids.slice(0, b, e).to(torch::kInt64).contiguous(), peer);
      world.send(batch.attention_mask.slice(0, b, e).to(torch::kInt64).contiguous(), peer);
      world.send(batch.position_ids.slice(0, b, e).to(torch::kInt64).contiguous(), peer);
    }
    std::vector<torch::Tensor> parts;
    for (std::int64_t k = 0; k < refs; ++k) {
      const std::int64_t b = first_row(k), e = first_row(k + 1);
      if (e == b) continue;
      auto part = torch::empty({e - b, R}, torch::kFloat32);
      world.recv(part, ref_ranks[static_cast<std::size_t>(k)]);
      parts.push_back(part);
    }
    out = torch::cat(parts, 0);
  } else {
    out = torch::empty({rows, R}, torch::kFloat32);
  }
  if (topology.replica_group) topology.replica_group->broadcast(out, 0);
  return out;
}

std::int64_t take_the_actors_base(const Config& cfg, RunRecording& recording, Communicator& world, Transformer& model,
                                  const RLDataset& train_data, const Tokenizer& tokenizer, bool warm_up) {
  if (warm_up && cfg.actor_rollout_ref.model.path.empty() && cfg.hybridscope.warmup.steps > 0) {
    HS_PROBE_RANGE(recording.timings(), "warmup", kSetup);
    // The warm-up files through the same chat template as the actor's (text_setup.h).
    const TextSetup text = cfg.hybridscope.warmup.files.empty() ? TextSetup{} : make_text_setup(cfg);
    const RLDataset warmup_data =
        cfg.hybridscope.warmup.files.empty()
            ? train_data
            : RLDataset::load(cfg.hybridscope.warmup.files, tokenizer, cfg.data,
                              text.chat_template ? &*text.chat_template : nullptr);
    supervised_warmup(model, warmup_data, tokenizer, cfg.hybridscope.warmup, cfg.hybridscope.seed,
                      [](int, int, double) {});
  }
  broadcast_parameters(world, *model);
  model->eval();
  for (auto& p : model->parameters()) p.set_requires_grad(false);
  auto start = torch::zeros({1}, torch::kInt64);  // the step the actor starts from
  world.broadcast(start, 0);
  const std::int64_t step = start.item<std::int64_t>();
  recording.set_step(step);
  return step;
}

int serve_reference(const Config& cfg, Topology& topology, RunRecording& recording, Transformer& ref_model,
                    const RLDataset& train_data, const Tokenizer& tokenizer, std::int64_t total_steps,
                    const std::atomic<int>& stop_signal) {
  const auto& cfg_ref = cfg.actor_rollout_ref;
  Communicator& world = *topology.global_world;
  probes::StepTimings& timings = recording.timings();
  recording.begin_step(0);
  // The base policy: the same warm-up as the actor's, then the actor's rank 0 weights, as the
  // colocated reference.
  std::int64_t step = take_the_actors_base(cfg, recording, world, ref_model, train_data, tokenizer);
  recording.flush();
  int served = 0;
  while (step < total_steps) {
    // The actor ranks' step boundary (trainer.cpp, fit()): the same agreement, the same stops.
    recording.stop_if_requested(world, stop_signal.load(), step);  // fit()'s catch marks a failed write
    recording.begin_step(++step);
    {
      HS_PROBE_RANGE(timings, "ref", kPhase);
      torch::NoGradGuard no_grad;
      const MeshShape& mesh = topology.mesh;
      for (int j = 0; j < mesh.dp; ++j) {
        const int lead = topology.actor_ranks[static_cast<std::size_t>(megatron_rank(mesh, {0, 0, j}))];
        auto header = torch::empty({3}, torch::kInt64);
        world.recv(header, lead);
        const std::int64_t rows = header[0].item<std::int64_t>(), tokens = header[1].item<std::int64_t>(),
                           prompt = header[2].item<std::int64_t>();
        if (rows == 0) continue;
        RolloutBatch batch;
        batch.input_ids = torch::empty({rows, tokens}, torch::kInt64);
        batch.attention_mask = torch::empty({rows, tokens}, torch::kInt64);
        batch.position_ids = torch::empty({rows, tokens}, torch::kInt64);
        world.recv(batch.input_ids, lead);
        world.recv(batch.attention_mask, lead);
        world.recv(batch.position_ids, lead);
        batch.prompts = batch.input_ids.slice(1, 0, prompt);
        batch.responses = batch.input_ids.slice(1, prompt);
        std::vector<torch::Tensor> parts;
        for (const auto& sel : split_rows(rows, cfg_ref.log_prob_micro_batch(cfg_ref.ref.log_prob_micro_batch_size_per_gpu)))
          parts.push_back(
              response_log_probs(ref_model, batch.select(sel).to(topology.device), cfg_ref.rollout.temperature, false)
                  .first.to(torch::kCPU));
        world.send(torch::cat(parts, 0).to(torch::kFloat32).contiguous(), lead);
      }
    }
    recording.flush();
    ++served;
  }
  return served;
}

}  // namespace hs::trainer
