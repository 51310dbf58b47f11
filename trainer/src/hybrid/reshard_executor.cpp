// reshard_executor.cpp — packs, exchanges and assembles the pieces of a reshard plan (see
// reshard_executor.h).
#include "hybridscope/trainer/hybrid/reshard_executor.h"

#include <numeric>
#include <stdexcept>

#include <torch/torch.h>

#include "hybridscope/probes/clock.h"
#include "hybridscope/trainer/dist/probed_communicator.h"
#include "model/model_layers.h"

namespace hs::trainer {

namespace {

// The part `piece` (global indices) of a tensor that holds box `held` (a view).
at::Tensor view_of(const at::Tensor& tensor, const Box& held, const Box& piece) {
  at::Tensor v = tensor;
  for (std::size_t d = 0; d < piece.ranges.size(); ++d) {
    const std::int64_t begin = piece.ranges[d].begin - held.ranges[d].begin;
    v = v.slice(static_cast<std::int64_t>(d), begin, begin + piece.ranges[d].size());
  }
  return v;
}

std::vector<std::int64_t> shape_of(const Box& b) { return b.shape(); }

// Whether `piece` moves from `sender` to `receiver` as a message of its own, straight out of the
// sender's training tensor into the receiver's assembled tensor (no pack, no unpack). Both ranks
// decide it from the plan alone, so they agree on the messages between them.
bool piece_moves_directly(const ReshardPlan& plan, const Piece& piece, int sender, int receiver,
                          std::int64_t min_elements) {
  const auto held = plan.training.box(piece.param, sender);
  const auto& assembled = plan.ranks[static_cast<std::size_t>(receiver)].assembled[piece.param];
  return held && assembled && hs::trainer::moves_directly(*held, *assembled, piece.box, min_elements);
}

// Splits every transfer into its messages, in the order both sides post them — each direct
// piece, then the packed buffer of the rest (when there is any) — and lists each transfer's packed
// pieces (indices into its pieces).
void split_transfers(const ReshardPlan& plan, const std::vector<Transfer>& transfers, int rank, bool sending,
                     std::int64_t min_elements, std::vector<ReshardExecutor::Message>& messages,
                     std::vector<std::vector<std::size_t>>& packed) {
  messages.clear();
  packed.assign(transfers.size(), {});
  for (std::size_t t = 0; t < transfers.size(); ++t) {
    const int sender = sending ? rank : transfers[t].peer;
    const int receiver = sending ? transfers[t].peer : rank;
    for (std::size_t i = 0; i < transfers[t].pieces.size(); ++i) {
      if (piece_moves_directly(plan, transfers[t].pieces[i], sender, receiver, min_elements))
        messages.push_back({t, static_cast<int>(i)});
      else
        packed[t].push_back(i);
    }
    if (!packed[t].empty()) messages.push_back({t, ReshardExecutor::Message::kPacked});
  }
}

// One flat buffer per transfer for its packed pieces, (elements,): contiguous views of one
// allocation; empty for a transfer whose pieces all move directly.
std::vector<at::Tensor> flat_buffers(const std::vector<Transfer>& transfers,
                                     const std::vector<std::vector<std::size_t>>& packed,
                                     const at::TensorOptions& options) {
  std::vector<std::int64_t> counts;
  std::int64_t total = 0;
  for (std::size_t t = 0; t < transfers.size(); ++t) {
    std::int64_t count = 0;
    for (const std::size_t i : packed[t]) count += transfers[t].pieces[i].box.numel();
    counts.push_back(count);
    total += count;
  }
  const at::Tensor arena = at::empty({total}, options);
  std::vector<at::Tensor> out;
  std::int64_t offset = 0;
  for (const std::int64_t count : counts) {
    out.push_back(arena.slice(0, offset, offset + count));
    offset += count;
  }
  return out;
}

}  // namespace

std::vector<ParamSpec> parameter_specs(const TransformerImpl& model) {
  const auto dims = detail::tensor_parallel_dims(model);
  const std::int64_t tp = model.parallel().tp->size();
  std::vector<ParamSpec> out;
  for (const auto& item : model.named_parameters()) {
    ParamSpec s;
    s.name = item.key();
    s.shape = item.value().sizes().vec();
    s.element_size = static_cast<int>(item.value().element_size());
    if (auto it = dims.find(s.name); it != dims.end()) {
      s.tp_dim = it->second;
      s.shape[static_cast<std::size_t>(it->second)] *= tp;
      if (s.name.find(".self_attn.") != std::string::npos) s.tp_unit = model.shape().head_dim();
    }
    const std::string layers = "model.layers.";
    if (s.name.rfind(layers, 0) == 0) {
      s.layer = std::stoi(s.name.substr(layers.size()));
    } else if (s.name.rfind("model.embed_tokens.", 0) == 0) {
      s.layer = ParamSpec::kBeforeLayers;
    } else {
      s.layer = ParamSpec::kAfterLayers;  // model.norm, lm_head, score
    }
    out.push_back(std::move(s));
  }
  return out;
}

ReshardExecutor::ReshardExecutor(std::shared_ptr<const ReshardPlan> plan, int rank, GroupFactory& groups,
                                 const probes::RunProbes* probes, std::int64_t direct_min_elements)
    : plan_(std::move(plan)), rank_(rank) {
  if (!plan_) throw std::invalid_argument("ReshardExecutor: the plan is null");
  const int world = plan_->training.world();
  if (rank < 0 || rank >= world) {
    throw std::invalid_argument("ReshardExecutor: rank " + std::to_string(rank) + " outside the plan's world of " +
                                std::to_string(world));
  }
  std::vector<int> all(static_cast<std::size_t>(world));
  std::iota(all.begin(), all.end(), 0);
  auto group = world == 1 ? std::make_shared<SingleRankCommunicator>("reshard") : groups.new_group(all, "reshard");
  if (!group || group->size() != world) {
    throw std::runtime_error("ReshardExecutor: the GroupFactory's world has another size than the plan (" +
                             std::to_string(world) + " ranks)");
  }
  // A factory that probes its groups itself (C10dGroupFactory with probes) already records
  // every transfer: wrapping again would count each byte twice.
  if (dynamic_cast<ProbedCommunicator*>(group.get()) != nullptr) {
    comm_ = std::move(group);
  } else {
    comm_ = std::make_shared<ProbedCommunicator>(std::move(group), probes ? *probes : probes::RunProbes::off());
  }
  const RankPlan& mine = plan_->ranks[static_cast<std::size_t>(rank_)];
  split_transfers(*plan_, mine.sends, rank_, true, direct_min_elements, send_messages_, send_packed_);
  split_transfers(*plan_, mine.recvs, rank_, false, direct_min_elements, recv_messages_, recv_packed_);
}

std::vector<at::Tensor> ReshardExecutor::to_generation(const std::vector<at::Tensor>& training,
                                                       std::optional<at::ScalarType> wire_dtype) {
  const std::int64_t started = probes::now_ns();
  const ReshardPlan& plan = *plan_;
  const RankPlan& mine = plan.ranks[static_cast<std::size_t>(rank_)];
  const std::size_t n = plan.training.params.size();
  TORCH_CHECK(training.size() == n, "ReshardExecutor::to_generation: ", training.size(),
              " tensors for a plan of ", n, " parameters");
  at::TensorOptions options;
  bool have_options = false;
  std::vector<Box> held(n);
  for (std::size_t p = 0; p < n; ++p) {
    const auto box = plan.training.box(p, rank_);
    TORCH_CHECK(box.has_value() == training[p].defined(), "ReshardExecutor: rank ", rank_,
                box ? " holds " : " does not hold ", plan.training.params[p].spec.name,
                " in the training layout, but its tensor is ", training[p].defined() ? "defined" : "undefined");
    if (!box) continue;
    TORCH_CHECK(training[p].sizes().vec() == box->shape(), "ReshardExecutor: ", plan.training.params[p].spec.name,
                " on rank ", rank_, " has shape ", training[p].sizes(), ", the training layout says ", box->shape());
    if (!have_options) options = training[p].options(), have_options = true;
    TORCH_CHECK(training[p].scalar_type() == options.dtype().toScalarType() && training[p].device() == options.device(),
                "ReshardExecutor: every parameter must share one dtype and device (", plan.training.params[p].spec.name,
                " differs)");
    held[p] = *box;
  }
  // The buffers and the generation shards are in the wire dtype: packing and local copies cast.
  rounded_ = have_options && wire_dtype && *wire_dtype != options.dtype().toScalarType();
  if (wire_dtype) options = options.dtype(*wire_dtype);
  // Assemble into fresh tensors of the assembled boxes, except where the rank already holds
  // exactly that box (hybrid with t_g = t, or a replicated parameter): there the training tensor
  // is the generation tensor, no copy (unless it must be cast).
  std::vector<at::Tensor> assembled(n);
  std::vector<bool> aliased(n, false);
  for (std::size_t p = 0; p < n; ++p) {
    if (!mine.assembled[p]) continue;
    aliased[p] = training[p].defined() && held[p] == *mine.assembled[p] && training[p].is_contiguous() && !rounded_;
    assembled[p] = aliased[p] ? training[p] : at::empty(shape_of(*mine.assembled[p]), options);
  }
  for (const Piece& piece : mine.local) {
    if (aliased[piece.param]) continue;
    view_of(assembled[piece.param], *mine.assembled[piece.param], piece.box)
        .copy_(view_of(training[piece.param], held[piece.param], piece.box));
  }
  // The per-peer buffers, once per executor (again only if the dtype or device changes).
  if (send_buffers_.size() != mine.sends.size() || recv_buffers_.size() != mine.recvs.size() ||
      (!send_buffers_.empty() && (send_buffers_[0].scalar_type() != options.dtype().toScalarType() ||
                                  send_buffers_[0].device() != options.device())) ||
      (!recv_buffers_.empty() && (recv_buffers_[0].scalar_type() != options.dtype().toScalarType() ||
                                  recv_buffers_[0].device() != options.device()))) {
    send_buffers_ = flat_buffers(mine.sends, send_packed_, options);
    recv_buffers_ = flat_buffers(mine.recvs, recv_packed_, options);
  }
  // The send of each message: a direct piece is a view of the training tensor (a copy only when
  // it must be cast or is not contiguous); the packed pieces are copied into the peer's buffer,
  // casting to the wire dtype.
  std::vector<P2POp> sends, recvs;
  for (const Message& m : send_messages_) {
    const Transfer& t = mine.sends[m.transfer];
    if (m.piece != Message::kPacked) {
      const Piece& piece = t.pieces[static_cast<std::size_t>(m.piece)];
      at::Tensor v = view_of(training[piece.param], held[piece.param], piece.box);
      if (rounded_) v = v.to(options.dtype().toScalarType());
      sends.push_back({v.contiguous(), t.peer});
      continue;
    }
    std::int64_t offset = 0;
    for (const std::size_t i : send_packed_[m.transfer]) {
      const Piece& piece = t.pieces[i];
      const std::int64_t count = piece.box.numel();
      send_buffers_[m.transfer].slice(0, offset, offset + count).view(shape_of(piece.box))
          .copy_(view_of(training[piece.param], held[piece.param], piece.box));
      offset += count;
    }
    sends.push_back({send_buffers_[m.transfer], t.peer});
  }
  // A direct piece is received straight into its place in the assembled tensor.
  for (const Message& m : recv_messages_) {
    const Transfer& t = mine.recvs[m.transfer];
    if (m.piece == Message::kPacked) {
      recvs.push_back({recv_buffers_[m.transfer], t.peer});
      continue;
    }
    const Piece& piece = t.pieces[static_cast<std::size_t>(m.piece)];
    at::Tensor place = view_of(assembled[piece.param], *mine.assembled[piece.param], piece.box);
    TORCH_CHECK(place.is_contiguous(), "ReshardExecutor: ", plan.training.params[piece.param].spec.name,
                "'s piece from rank ", t.peer, " is not contiguous in rank ", rank_, "'s assembled tensor");
    recvs.push_back({place, t.peer});
  }
  const std::int64_t posted = probes::now_ns();
  times_.pack_ns = posted - started;
  // Every message in one exchange; each packed buffer is unpacked as soon as it is complete.
  std::int64_t unpack_inside = 0;
  ExchangeHooks hooks;
  hooks.recv_done = [&](std::size_t i) {
    const Message& m = recv_messages_[i];
    if (m.piece != Message::kPacked) return;
    const std::int64_t begin = probes::now_ns();
    const Transfer& t = mine.recvs[m.transfer];
    std::int64_t offset = 0;
    for (const std::size_t i : recv_packed_[m.transfer]) {
      const Piece& piece = t.pieces[i];
      const std::int64_t count = piece.box.numel();
      view_of(assembled[piece.param], *mine.assembled[piece.param], piece.box)
          .copy_(recv_buffers_[m.transfer].slice(0, offset, offset + count).view(shape_of(piece.box)));
      offset += count;
    }
    unpack_inside += probes::now_ns() - begin;
  };
  comm_->exchange(sends, recvs, hooks);
  const std::int64_t exchanged = probes::now_ns();
  times_.wire_ns = exchanged - posted - unpack_inside;
  bytes_ = {mine.bytes_sent, mine.bytes_received, mine.bytes_local};
  // The generation shards (vanilla/naive: sliced out of the full tensors), and what must be kept.
  std::vector<at::Tensor> generation(n);
  kept_.assign(n, at::Tensor());
  for (std::size_t p = 0; p < n; ++p) {
    const auto gen = plan.generation.box(p, rank_);
    generation[p] = *mine.assembled[p] == *gen ? assembled[p]
                                               : view_of(assembled[p], *mine.assembled[p], *gen).contiguous();
    if (training[p].defined() && !contains(*gen, held[p])) kept_[p] = training[p];
  }
  const std::int64_t sliced = probes::now_ns();
  times_.unpack_ns = unpack_inside + (sliced - exchanged);
  comm_->barrier();
  times_.wait_ns = probes::now_ns() - sliced;
  return generation;
}

std::vector<at::Tensor> ReshardExecutor::to_training(const std::vector<at::Tensor>& generation) {
  if (rounded_)
    throw std::logic_error("ReshardExecutor::to_training: the generation shards were cast to another dtype; the "
                           "training tensors hold the weights (nothing to restore)");
  const ReshardPlan& plan = *plan_;
  const std::size_t n = plan.training.params.size();
  TORCH_CHECK(generation.size() == n, "ReshardExecutor::to_training: ", generation.size(),
              " tensors for a plan of ", n, " parameters");
  std::vector<at::Tensor> training(n);
  for (std::size_t p = 0; p < n; ++p) {
    const auto box = plan.training.box(p, rank_);
    if (!box) continue;
    if (kept_.size() == n && kept_[p].defined()) {
      training[p] = kept_[p];
      continue;
    }
    const auto gen = plan.generation.box(p, rank_);
    TORCH_CHECK(contains(*gen, *box), "ReshardExecutor::to_training before to_generation: rank ", rank_,
                "'s training shard of ", plan.training.params[p].spec.name, " is not inside its generation shard");
    training[p] = view_of(generation[p], *gen, *box).contiguous();
  }
  kept_.clear();
  return training;
}

}  // namespace hs::trainer
