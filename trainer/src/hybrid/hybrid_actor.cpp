// hybrid_actor.cpp — the actor's layouts, modules, rollout model, reshard and switch on one rank.
#include "hybridscope/trainer/hybrid/hybrid_actor.h"

#include <optional>
#include <stdexcept>

#include "hybridscope/probes/run_probes.h"
#include "hybridscope/trainer/dist/topology.h"
#include "hybridscope/trainer/dist/mesh_groups.h"
#include "hybridscope/trainer/model/training_shard.h"
#include "hybridscope/trainer/hybrid/reshard_planner.h"
#include "hybridscope/trainer/hybrid/reshard_executor.h"
#include "hybridscope/trainer/data/tokenizer.h"
#include "hybridscope/trainer/dist/zero.h"

namespace hs::trainer {

HybridActor::HybridActor(const Config& cfg, Topology& topology, Transformer whole_model, const Tokenizer& tokenizer,
                         std::int64_t total_steps, const probes::RunProbes& probes)
    : actor_rank_(topology.actor_rank) {
  // A model built over this rank's tp/pp groups is already its module (a pipeline stage holds only
  // its layers, so the specs come from the shape, which names every parameter alike).
  in_layout_ = whole_model->parallel().tp->size() > 1 || whole_model->parallel().pp->size() > 1;
  const auto specs = in_layout_ ? llama_parameters(whole_model->shape()) : parameter_specs(*whole_model);
  training_layout = hs::trainer::training_layout(specs, topology.mesh, topology.dp_sharding);
  module_layout = hs::trainer::training_layout(specs, topology.mesh, DpSharding::kReplicated);
  generation_layout = hs::trainer::generation_layout(training_layout, topology.rollout_tp, cfg.hybridscope.reshard.mode);
  const MeshCoord gen_coord = generation_layout.coords[static_cast<std::size_t>(actor_rank_)];
  replica = gen_coord.dp;
  replicas = generation_layout.mesh.dp;
  replica_lead = gen_coord.tp == 0;
  if (in_layout_) {
    model = whole_model;
  } else if (topology.sharded()) {
    full = whole_model;
    model = Transformer(whole_model->shape(), HeadKind::kLm, topology.parallel);
    model->to(topology.device);
    copy_training_shard(*whole_model, *model, module_layout, actor_rank_);  // before ZeroShards takes it
  } else {
    model = whole_model;
  }
  const auto& arr = cfg.actor_rollout_ref;
  worker = std::make_unique<PPOActor>(model, arr.actor, arr.rollout.temperature, arr.rollout.n, total_steps,
                                      topology.parallel);

  const auto& rollout_cfg = arr.rollout;
  const int max_seq_len = cfg.data.max_prompt_length + cfg.data.max_response_length;
  auto resharder = make_resharder(cfg, topology, *whole_model, specs);
  rollout = std::make_unique<RolloutEngine>(generator(), tokenizer.eos_token_id(), tokenizer.pad_token_id(),
                                            cfg.hybridscope.kv_block_size, cfg.hybridscope.kv_num_blocks,
                                            rollout_cfg.max_num_seqs, max_seq_len, rollout_cfg.gpu_memory_utilization);
  // A model vocabulary larger than the tokenizer's (hybridscope.model.vocab_size, a benchmark
  // shape) pays for its full LM head but never samples an id the tokenizer cannot decode.
  rollout->limit_sampling_to(tokenizer.vocab_size());
  rollout->set_stop_token_ids(tokenizer.stop_token_ids());
  rollout->set_decode(decode_options(cfg.hybridscope.decode));
  hybrid_switch = std::make_unique<HybridSwitch>(model, *rollout, rollout_cfg.free_cache_engine, probes,
                                                 topology.memory_device);
  if (resharder) {
    // The generation shards arrive in plan order; the rollout model takes them by name.
    std::vector<at::Tensor> targets;
    auto rollout_params = rollout_model->named_parameters();
    for (const auto& p : resharder->plan().generation.params) {
      auto* t = rollout_params.find(p.spec.name);
      if (t == nullptr) throw std::logic_error("the rollout model has no parameter " + p.spec.name);
      targets.push_back(*t);
    }
    ZeroShards* zero = worker->optimizer().zero_shards();
    hybrid_switch->set_resharder(
        resharder,
        [targets](const std::vector<at::Tensor>& generation) {
          torch::NoGradGuard no_grad;
          for (std::size_t p = 0; p < targets.size(); ++p) {
            auto target = targets[p];
            if (!generation[p].is_same(target)) target.copy_(generation[p]);
          }
        },
        zero ? zero->named_shards() : std::vector<std::pair<std::string, torch::Tensor>>{},
        cfg.hybridscope.precision == Precision::kBf16 ? std::optional<at::ScalarType>(torch::kBFloat16) : std::nullopt);
  }
  const auto offload = arr.actor.fsdp_config;
  if (offload.param_offload || offload.optimizer_offload) {
    hybrid_switch->set_offload([actor = worker.get(), offload] {
      std::vector<at::Tensor> tensors;
      Optimizer& optimizer = actor->optimizer();
      if (offload.param_offload) {
        optimizer.zero_grad();  // the update is done: its gradients are freed, not moved
        tensors = optimizer.parameters();
      }
      if (offload.optimizer_offload) {
        for (auto& t : optimizer.state_tensors()) tensors.push_back(t);
      }
      return tensors;
    });
  }
}

void HybridActor::take_shard() {
  if (!full) return;
  if (ZeroShards* zero = worker->optimizer().zero_shards()) {
    zero->load_full_state_dict(module_slices());
  } else {
    copy_training_shard(*full, *model, module_layout, actor_rank_);
  }
}

void HybridActor::release_full() { full = nullptr; }

std::vector<std::pair<std::string, torch::Tensor>> HybridActor::module_slices() const {
  const auto source = full->named_parameters();
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (std::size_t p = 0; p < module_layout.params.size(); ++p) {
    const auto box = module_layout.box(p, actor_rank_);
    const auto* tensor = source.find(module_layout.params[p].spec.name);
    if (!box || tensor == nullptr) continue;
    out.emplace_back(module_layout.params[p].spec.name, box_view(tensor->detach(), *box).contiguous());
  }
  return out;
}

std::shared_ptr<ReshardExecutor> HybridActor::make_resharder(const Config& cfg, Topology& topology,
                                                             const TransformerImpl& whole_model,
                                                             const std::vector<ParamSpec>& specs) {
  // Does any rank generate with other weights than it trains with? Then the actor is resharded
  // into a rollout model at every train->rollout switch (3D-HybridEngine).
  bool differs = false;
  for (std::size_t p = 0; p < training_layout.params.size(); ++p)
    differs = differs || !(training_layout.box(p, actor_rank_) == generation_layout.box(p, actor_rank_));
  auto reshard_flag = torch::full({1}, differs ? 1 : 0, torch::kInt64);
  topology.parallel.world->all_reduce(reshard_flag, ReduceOp::kMax);
  // Offloaded parameters cannot generate: the rollout then holds its own copy even in the training
  // layout (the reshard plan is a local copy), as verl's rollout engine holds its own weights.
  const auto& offload = cfg.actor_rollout_ref.actor.fsdp_config;
  if (reshard_flag.item<std::int64_t>() == 0 && !offload.param_offload) return nullptr;
  const ReshardMode mode = cfg.hybridscope.reshard.mode;
  const int rollout_tp = topology.rollout_tp;
  GroupFactory& groups = topology.rollout_groups();
  rollout_model = Transformer(whole_model.shape(), HeadKind::kLm, make_generation_context(groups, generation_layout, actor_rank_));
  rollout_model->to(topology.device);
  // bf16 precision: the rollout weights are bf16 copies of the fp32 master weights (each reshard
  // casts), so decoding reads half the bytes; the KV cache follows (compute_dtype).
  const bool bf16 = cfg.hybridscope.precision == Precision::kBf16;
  if (bf16) rollout_model->to(torch::kBFloat16);
  // bf16: the weights move as bf16 (cast while packed), so the plan counts 2-byte elements.
  auto wire_specs = specs;
  if (bf16)
    for (auto& spec : wire_specs) spec.element_size = 2;
  const LayoutSet wire_training = bf16 ? hs::trainer::training_layout(wire_specs, topology.mesh, topology.dp_sharding)
                                       : training_layout;
  auto plan = std::make_shared<const ReshardPlan>(
      plan_reshard(wire_training, hs::trainer::generation_layout(wire_training, rollout_tp, mode), mode));
  return std::make_shared<ReshardExecutor>(plan, actor_rank_, groups);
}

}  // namespace hs::trainer
