// hybrid_actor.h — the actor in its two layouts (HybridFlow's 3D-HybridEngine) on one rank.
//
// Owns what the actor is made of: its modules in the training layout (this rank's shard when tp,
// pp or fsdp shard it) and, while setting up, the whole model they come from; the training,
// module and generation layouts (layout.h); the rollout model the generation layout fills when it
// differs from the training one (or when the parameters are offloaded), with the reshard plan and
// executor that fill it; the PPO actor worker (optimizer included); the rollout engine and its KV
// block pool; and the switch between the layouts with its offload. Not here: the process groups
// (topology.h), generation and scoring (rollout_phase.h), the other roles.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "hybridscope/trainer/config/config.h"
#include "hybridscope/trainer/hybrid/hybrid_switch.h"
#include "hybridscope/trainer/dist/layout.h"
#include "hybridscope/trainer/model/model.h"
#include "hybridscope/trainer/rl/ppo_workers.h"
#include "hybridscope/trainer/rollout/rollout.h"

namespace hs::probes {
class RunProbes;
}

namespace hs::trainer {

class ReshardExecutor;
class Tokenizer;
struct Topology;

struct HybridActor {
  /// Builds the actor from `full` (the whole model, on the device) on an actor rank of `topology`;
  /// `probes` (kept) records the switches. Keeps `full` while the actor holds a shard, until
  /// take_shard(). `full` may instead be this rank's module already (a tp/pp slice read from
  /// actor_rollout_ref.model.path by load_pretrained over topology.parallel): then it becomes the
  /// actor's modules and there is no whole model to keep (in_layout()).
  HybridActor(const Config& cfg, Topology& topology, Transformer full, const Tokenizer& tokenizer,
              std::int64_t total_steps, const probes::RunProbes& probes);
  /// The actor was built from its own slices: no rank ever held the whole model.
  bool in_layout() const { return in_layout_; }

  /// After the warm-up or a resume changed the whole model: this rank's shard of it into the
  /// actor's modules (and the fsdp optimizer's row blocks). Nothing when the actor is whole.
  void take_shard();
  /// From here on each rank holds only its shard.
  void release_full();
  /// The model generation runs on: the rollout model, or the actor itself in the training layout.
  Transformer& generator() { return rollout_model ? rollout_model : model; }
  /// The whole model while setting up (warm-up and checkpoints train it on every rank alike), else
  /// the actor's own modules.
  Transformer& whole() { return full ? full : model; }

  Transformer model{nullptr};          // the actor's modules, in the training layout

  /// The unsharded actor while setting up, when the actor holds a shard; released by take_shard().
  Transformer full{nullptr};
  /// Generates when the generation layout differs from the training one (filled by resharding).
  Transformer rollout_model{nullptr};
  LayoutSet training_layout;    // the actor's parameters on the training mesh (fsdp: dp row blocks)
  /// The tp/pp layout the actor's and reference's modules are built in (replicated over dp; with
  /// fsdp the optimizer's ZeroShards keeps the dp row blocks of it).
  LayoutSet module_layout;
  LayoutSet generation_layout;  // the rollout layout (rollout tp, HybridFlow's grouping)
  int replica = 0;              // this rank's generation replica
  int replicas = 1;             // d_g
  bool replica_lead = true;     // generation tp rank 0: speaks for its replica's results
  std::unique_ptr<PPOActor> worker;
  std::unique_ptr<RolloutEngine> rollout;
  std::unique_ptr<HybridSwitch> hybrid_switch;

 private:
  bool in_layout_ = false;
  /// This rank's module-layout slices of `full`'s parameters (for ZeroShards::load_full_state_dict).
  std::vector<std::pair<std::string, torch::Tensor>> module_slices() const;
  /// The rollout model and the executor of the reshard plan that fills it, when any rank generates
  /// with other weights than it trains with (or the parameters are offloaded); else nullptr.
  std::shared_ptr<ReshardExecutor> make_resharder(const Config& cfg, Topology& topology,
                                                  const TransformerImpl& whole_model,
                                                  const std::vector<ParamSpec>& specs);

  int actor_rank_;
};

}  // namespace hs::trainer
