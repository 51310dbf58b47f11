// layout.cpp — meshes, boxes and the training / generation layout builders (see layout.h).
#include "hybridscope/trainer/dist/layout.h"

#include <algorithm>

namespace hs::trainer {

namespace {

std::string str(std::int64_t v) { return std::to_string(v); }

// [part * n/parts, (part+1) * n/parts) of a dim of size n that `parts` divides.
Range split_range(Range whole, int parts, int part) {
  const std::int64_t step = whole.size() / parts;
  return {whole.begin + step * part, whole.begin + step * (part + 1)};
}

// fsdp's row blocks (ZeroShards, zero.h): ceil(n / parts) rows each, the last block shorter when
// parts does not divide n — PyTorch FSDP's padded flat shards, without the padding.
Range block_range(Range whole, int parts, int part) {
  const std::int64_t block = (whole.size() + parts - 1) / parts;
  const std::int64_t begin = std::min(whole.size(), block * part);
  return {whole.begin + begin, whole.begin + std::min(whole.size(), begin + block)};
}

void require_divisible(const ParamSpec& p, int dim, std::int64_t size, int parts, const std::string& over,
                       const std::string& fix, std::int64_t unit = 1) {
  if (size % (parts * unit) != 0) {
    throw LayoutError("cannot lay out " + p.name + ": dim " + std::to_string(dim) + " (size " + str(size) +
                      (unit > 1 ? ", " + str(size / unit) + " heads of " + str(unit) : std::string()) +
                      ") is not divisible by " + over + " = " + std::to_string(parts) + " — " + fix);
  }
}

}  // namespace

MeshCoord megatron_coord(const MeshShape& mesh, int rank) {
  if (rank < 0 || rank >= mesh.world()) {
    throw LayoutError("rank " + std::to_string(rank) + " is outside a mesh of " + std::to_string(mesh.world()) + " ranks");
  }
  return {rank / (mesh.tp * mesh.dp), rank % mesh.tp, (rank / mesh.tp) % mesh.dp};
}

int megatron_rank(const MeshShape& mesh, const MeshCoord& c) { return c.tp + mesh.tp * (c.dp + mesh.dp * c.pp); }

std::int64_t Box::numel() const {
  std::int64_t n = 1;
  for (const auto& r : ranges) n *= r.size();
  return n;
}

std::vector<std::int64_t> Box::shape() const {
  std::vector<std::int64_t> s;
  s.reserve(ranges.size());
  for (const auto& r : ranges) s.push_back(r.size());
  return s;
}

bool Box::operator<(const Box& other) const {
  return std::lexicographical_compare(ranges.begin(), ranges.end(), other.ranges.begin(), other.ranges.end(),
                                      [](const Range& a, const Range& b) {
                                        return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
                                      });
}

Box full_box(const std::vector<std::int64_t>& shape) {
  Box b;
  for (auto n : shape) b.ranges.push_back({0, n});
  return b;
}

std::int64_t overlap_numel(const Box& a, const Box& b) {
  std::int64_t n = 1;
  for (std::size_t d = 0; d < a.ranges.size(); ++d) {
    const std::int64_t size =
        std::min(a.ranges[d].end, b.ranges[d].end) - std::max(a.ranges[d].begin, b.ranges[d].begin);
    if (size <= 0) return 0;
    n *= size;
  }
  return n;
}

std::optional<Box> intersect(const Box& a, const Box& b) {
  if (overlap_numel(a, b) == 0) return std::nullopt;  // no allocation for the (many) disjoint pairs
  Box out;
  for (std::size_t d = 0; d < a.ranges.size(); ++d) {
    const Range r{std::max(a.ranges[d].begin, b.ranges[d].begin), std::min(a.ranges[d].end, b.ranges[d].end)};
    if (r.size() <= 0) return std::nullopt;
    out.ranges.push_back(r);
  }
  return out;
}

bool contains(const Box& outer, const Box& inner) {
  for (std::size_t d = 0; d < outer.ranges.size(); ++d) {
    if (inner.ranges[d].begin < outer.ranges[d].begin || inner.ranges[d].end > outer.ranges[d].end) return false;
  }
  return true;
}

std::int64_t ParamSpec::bytes() const {
  std::int64_t n = element_size;
  for (auto s : shape) n *= s;
  return n;
}

std::vector<ParamSpec> llama_parameters(const ModelShape& s, int element_size) {
  const std::int64_t C = s.hidden_size, F = s.intermediate_size, V = s.vocab_size;
  const std::int64_t D = s.head_dim(), H = s.num_attention_heads, KV = s.num_key_value_heads;
  std::vector<ParamSpec> out;
  auto add = [&](std::string name, std::vector<std::int64_t> shape, int tp_dim, int layer, std::int64_t unit = 1) {
    out.push_back({std::move(name), std::move(shape), element_size, tp_dim, layer, unit});
  };
  add("model.embed_tokens.weight", {V, C}, -1, ParamSpec::kBeforeLayers);
  for (int l = 0; l < s.num_hidden_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    add(p + "input_layernorm.weight", {C}, -1, l);
    add(p + "self_attn.q_proj.weight", {H * D, C}, 0, l, D);
    if (s.qkv_bias()) add(p + "self_attn.q_proj.bias", {H * D}, 0, l, D);
    add(p + "self_attn.k_proj.weight", {KV * D, C}, 0, l, D);
    if (s.qkv_bias()) add(p + "self_attn.k_proj.bias", {KV * D}, 0, l, D);
    add(p + "self_attn.v_proj.weight", {KV * D, C}, 0, l, D);
    if (s.qkv_bias()) add(p + "self_attn.v_proj.bias", {KV * D}, 0, l, D);
    add(p + "self_attn.o_proj.weight", {C, H * D}, 1, l, D);
    if (s.qk_norm()) {
      add(p + "self_attn.q_norm.weight", {D}, -1, l);
      add(p + "self_attn.k_norm.weight", {D}, -1, l);
    }
    add(p + "post_attention_layernorm.weight", {C}, -1, l);
    add(p + "mlp.gate_proj.weight", {F, C}, 0, l);
    add(p + "mlp.up_proj.weight", {F, C}, 0, l);
    add(p + "mlp.down_proj.weight", {C, F}, 1, l);
  }
  add("model.norm.weight", {C}, -1, ParamSpec::kAfterLayers);
  if (!s.tie_word_embeddings) add("lm_head.weight", {V, C}, 0, ParamSpec::kAfterLayers);
  return out;
}

std::optional<Box> LayoutSet::box(std::size_t param, int rank) const {
  const ParamLayout& p = params.at(param);
  const MeshCoord& c = coords.at(static_cast<std::size_t>(rank));
  if (c.pp != p.stage) return std::nullopt;
  Box b = full_box(p.spec.shape);
  if (p.tp_dim >= 0) b.ranges[p.tp_dim] = split_range(b.ranges[p.tp_dim], mesh.tp, c.tp);
  if (p.dp_dim >= 0) b.ranges[p.dp_dim] = block_range(b.ranges[p.dp_dim], mesh.dp, c.dp);
  return b;
}

std::int64_t LayoutSet::model_bytes() const {
  std::int64_t n = 0;
  for (const auto& p : params) n += p.spec.bytes();
  return n;
}

std::int64_t LayoutSet::rank_bytes(int rank) const {
  std::int64_t n = 0;
  for (std::size_t i = 0; i < params.size(); ++i) {
    if (auto b = box(i, rank)) n += b->numel() * params[i].spec.element_size;
  }
  return n;
}

DpSharding dp_sharding_for_strategy(ActorStrategy strategy) {
  return strategy == ActorStrategy::kMegatron ? DpSharding::kReplicated : DpSharding::kSharded;
}

LayoutSet training_layout(const std::vector<ParamSpec>& params, const MeshShape& mesh, DpSharding dp) {
  if (mesh.pp < 1 || mesh.tp < 1 || mesh.dp < 1) throw LayoutError("mesh sizes pp, tp, dp must be >= 1");
  int layers = 0;
  for (const auto& p : params) {
    if (p.layer != ParamSpec::kBeforeLayers && p.layer != ParamSpec::kAfterLayers) layers = std::max(layers, p.layer + 1);
  }
  if (layers % mesh.pp != 0) {
    throw LayoutError("cannot split " + std::to_string(layers) + " decoder layers into " + std::to_string(mesh.pp) +
                      " pipeline stages — choose actor_rollout_ref.actor.megatron.pipeline_model_parallel_size "
                      "dividing hybridscope.model.num_hidden_layers");
  }
  const int per_stage = std::max(1, layers / mesh.pp);
  LayoutSet out;
  out.description = "training pp=" + std::to_string(mesh.pp) + " tp=" + std::to_string(mesh.tp) + " dp=" +
                    std::to_string(mesh.dp) + (dp == DpSharding::kReplicated ? " megatron" : " fsdp");
  out.mesh = mesh;
  for (int r = 0; r < mesh.world(); ++r) out.coords.push_back(megatron_coord(mesh, r));
  for (const auto& p : params) {
    ParamLayout l;
    l.spec = p;
    l.stage = p.layer == ParamSpec::kBeforeLayers ? 0
              : p.layer == ParamSpec::kAfterLayers ? mesh.pp - 1
                                                   : p.layer / per_stage;
    l.tp_dim = mesh.tp > 1 ? p.tp_dim : -1;
    if (l.tp_dim >= 0) {
      require_divisible(p, l.tp_dim, p.shape[l.tp_dim], mesh.tp, "the training tp size",
                        "choose actor_rollout_ref.actor.megatron.tensor_model_parallel_size dividing it", p.tp_unit);
    }
    if (dp == DpSharding::kSharded && mesh.dp > 1) {
      l.dp_dim = 0;
      const std::int64_t rows = l.tp_dim == 0 ? p.shape[0] / mesh.tp : p.shape[0];
      if ((rows + mesh.dp - 1) / mesh.dp * (mesh.dp - 1) >= rows) {
        throw LayoutError("cannot lay out " + p.name + ": its " + str(rows) + " rows per tp shard leave some of the " +
                          std::to_string(mesh.dp) + " fsdp ranks an empty row block — use fewer data-parallel ranks "
                          "or actor.strategy=megatron");
      }
    }
    out.params.push_back(std::move(l));
  }
  return out;
}

LayoutSet generation_layout(const LayoutSet& training, int t_g, ReshardMode mode) {
  const MeshShape& tm = training.mesh;
  const int world = tm.world();
  if (t_g < 1 || world % t_g != 0) {
    throw LayoutError("actor_rollout_ref.rollout.tensor_model_parallel_size = " + std::to_string(t_g) +
                      " must divide the world size " + std::to_string(world));
  }
  if (mode == ReshardMode::kHybrid && tm.tp % t_g != 0 && t_g % tm.tp != 0) {
    throw LayoutError("hybrid resharding needs the rollout tp (" + std::to_string(t_g) + ") and the training tp (" +
                      std::to_string(tm.tp) +
                      ") to divide one another so that shards nest — change "
                      "actor_rollout_ref.rollout.tensor_model_parallel_size or use hybridscope.reshard.mode=vanilla");
  }
  if (mode == ReshardMode::kHybrid && t_g > tm.tp && (tm.pp * tm.dp) % (t_g / tm.tp) != 0) {
    throw LayoutError("hybrid resharding with rollout tp " + std::to_string(t_g) + " > training tp " +
                      std::to_string(tm.tp) + " needs pp*dp (" + std::to_string(tm.pp * tm.dp) +
                      ") divisible by their ratio — use hybridscope.reshard.mode=vanilla");
  }
  LayoutSet out;
  out.description = "generation tp=" + std::to_string(t_g) + " replicas=" + std::to_string(world / t_g) + " (" +
                    to_string(mode) + " grouping)";
  out.mesh = {1, t_g, world / t_g};
  for (int r = 0; r < world; ++r) {
    if (mode == ReshardMode::kHybrid && t_g <= tm.tp) {
      const MeshCoord c = training.coords[static_cast<std::size_t>(r)];
      const int stride = tm.tp / t_g;  // training tp ranks per generation shard
      out.coords.push_back({0, c.tp / stride, c.tp % stride + stride * (c.pp + tm.pp * c.dp)});
    } else if (mode == ReshardMode::kHybrid) {
      // t_g = k·t: each generation shard lies inside a training tp shard. The p·d ranks that share
      // training tp rank i take its k generation blocks, in order of m = pp + p·dp, so that with
      // fsdp (row blocks in dp order) a rank's rows fall in its own generation block when the
      // split dim is dim 0.
      const MeshCoord c = training.coords[static_cast<std::size_t>(r)];
      const int k = t_g / tm.tp, per_block = tm.pp * tm.dp / k, m = c.pp + tm.pp * c.dp;
      out.coords.push_back({0, c.tp * k + m / per_block, m % per_block});
    } else {
      out.coords.push_back({0, r % t_g, r / t_g});
    }
  }
  for (const auto& t : training.params) {
    ParamLayout l;
    l.spec = t.spec;
    l.tp_dim = t_g > 1 ? t.spec.tp_dim : -1;
    if (l.tp_dim >= 0) {
      require_divisible(t.spec, l.tp_dim, t.spec.shape[l.tp_dim], t_g, "the rollout tp size",
                        "choose actor_rollout_ref.rollout.tensor_model_parallel_size dividing it", t.spec.tp_unit);
    }
    out.params.push_back(std::move(l));
  }
  return out;
}

}  // namespace hs::trainer
