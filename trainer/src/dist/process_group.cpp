// process_group.cpp — c10d communicators, the TCPStore rendezvous and the group factory (see
// process_group.h).
//
// Which c10d entry points are used, and why that is safe with the PyPI wheel: the wheel ships
// ProcessGroupGloo.hpp but not the Gloo headers it includes; Debian's libgloo-dev provides them
// (an older Gloo than the one built into the wheel). Only torch's exported functions are called
// (TCPStore, PrefixStore, ProcessGroupGloo's constructor, Options::create, createDevice*, the
// Backend virtuals) and the one class instantiated here, ProcessGroupGloo, holds Gloo objects only
// behind std::shared_ptr/std::unique_ptr, so its size does not depend on the Gloo headers'
// version. The multi-process tests (tests/trainer/dist/process_group_test.cpp) check every op.
#include "hybridscope/trainer/dist/process_group.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <functional>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <optional>
#include <stdexcept>
#include <utility>
#include <string_view>

#include <fmt/format.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/torch.h>

#include "hybridscope/probes/clock.h"
#include "hybridscope/trainer/dist/pending_collective.h"
#include "hybridscope/trainer/dist/probed_communicator.h"
#include "dist/nccl_backend.h"
#include "dist/shm_collectives.h"

namespace hs::trainer {

namespace {

std::vector<int64_t> prepend(int64_t first, std::vector<int64_t> rest) {
  rest.insert(rest.begin(), first);
  return rest;
}

c10d::ReduceOp to_c10d(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return c10d::ReduceOp(c10d::ReduceOp::SUM);
    case ReduceOp::kMax: return c10d::ReduceOp(c10d::ReduceOp::MAX);
    case ReduceOp::kMin: return c10d::ReduceOp(c10d::ReduceOp::MIN);
    case ReduceOp::kAvg: return c10d::ReduceOp(c10d::ReduceOp::SUM);  // divided after (where no native AVG)
  }
  return c10d::ReduceOp(c10d::ReduceOp::SUM);
}

/// One c10d backend (Gloo or NCCL) as a Communicator. Every call waits for its work.
/// Ops the backend lacks are built from ones it has, moving the bytes the probe's row implies:
///   kAvg: NCCL's AVG on floating tensors; otherwise SUM then divide by size (the same bytes);
///   reduce_scatter without _reduce_scatter_base (Gloo): an all-to-all of the input's n row
///   chunks (chunk k to rank k), then the sum of the n chunks received — (n−1)/n × input in and
///   out per rank, a ring reduce-scatter's volume (an all_reduce + slice would move twice that).
/// NCCL moves CUDA tensors only: with `staging` set (the NCCL groups: this process's CUDA device),
/// a CPU tensor (a flag, a count, metrics, packed responses) goes through that device and back;
/// device tensors (weights, gradients, activations) are moved in place.
/// all_gather_async / reduce_scatter_async (pending_collective.h) post the same c10d ops and
/// return at once: Gloo runs them on its worker threads while the caller computes. A CPU tensor on
/// an NCCL group (staged) runs synchronously.
class C10dCommunicator final : public Communicator, public AsyncCollectives {
 public:
  // `shm_store` (the group's store prefix) and `shm_bytes` > 0: a Gloo group whose ranks share one
  // host moves its CPU all-reduces and all-gathers of up to shm_bytes, its barriers and its
  // exchanges through shared memory (shm_collectives.h); nullptr or 0: Gloo for all. The segment
  // is made here, while every rank of the group is constructing it (an exchange names only some
  // ranks: it could not make it); where a rank cannot map it, every rank says so and keeps Gloo.
  C10dCommunicator(c10::intrusive_ptr<c10d::Backend> backend, std::string name, std::string members,
                   std::chrono::milliseconds timeout, std::optional<at::Device> staging = std::nullopt,
                   c10::intrusive_ptr<c10d::Store> shm_store = {}, std::int64_t shm_bytes = 0)
      : backend_(std::move(backend)),
        name_(std::move(name)),
        members_(std::move(members)),
        timeout_(timeout),
        staging_(staging),
        shm_bytes_(shm_store && !staging_ && backend_->getSize() > 1 ? shm_bytes : 0) {
    if (shm_bytes_ <= 0) return;
    std::string why;
    try {
      shm_ = detail::ShmCollectives::create(*shm_store, rank(), size(), shm_bytes_, timeout_, why);
    } catch (const std::exception& e) {
      fail("setting up shared memory", e.what());
    }
    if (!shm_)
      std::fprintf(stderr, "dist: group '%s' keeps Gloo for its small collectives and exchanges (no shared memory: %s)\n",
                   name_.c_str(), why.c_str());
  }

  int rank() const override { return backend_->getRank(); }
  int size() const override { return backend_->getSize(); }
  std::string name() const override { return name_; }

  void all_reduce(at::Tensor& tensor, ReduceOp op) override {
    TORCH_CHECK(tensor.is_contiguous(), "all_reduce on group '", name_, "' needs a contiguous tensor");
    if (detail::ShmCollectives* shm = shm_for(tensor)) return shm_call("all_reduce", [&] { shm->all_reduce(tensor, op); });
    std::vector<at::Tensor> tensors{staged(tensor)};
    c10d::AllreduceOptions opts;
    const bool avg_here = op == ReduceOp::kAvg && native_avg_ && at::isFloatingType(tensor.scalar_type());
    opts.reduceOp = avg_here ? c10d::ReduceOp(c10d::ReduceOp::AVG) : to_c10d(op);
    opts.timeout = timeout_;
    wait(backend_->allreduce(tensors, opts), "all_reduce");
    unstage(tensors[0], tensor);
    if (op == ReduceOp::kAvg && !avg_here) tensor.div_(size());
  }

  // On one host with shared memory: up to shm_bytes through the slots, larger ones through the
  // mailboxes (every rank's input to every peer, as an exchange).
  at::Tensor all_gather(const at::Tensor& input) override {
    if (detail::ShmCollectives* shm = shm_for(input)) {
      at::Tensor out;
      shm_call("all_gather", [&] { out = shm->all_gather(input.contiguous()); });
      return out;
    }
    if (shm_ && input.is_cpu()) return all_gather_through_mailboxes(input);
    return post_all_gather(input)->wait();
  }

  // On one host with shared memory: through the mailboxes, any size (chunk k to rank k, then each
  // rank reduces its chunk's n contributions in rank order).
  at::Tensor reduce_scatter(const at::Tensor& input, ReduceOp op) override {
    if (shm_ && input.is_cpu()) return reduce_scatter_through_mailboxes(input, op);
    return post_reduce_scatter(input, op)->wait();
  }

  // Run at once (the result is ready when the post returns): NCCL with CPU tensors, which go
  // through the staging device; and a one-host group with shared memory, whose transfer is the
  // calling thread's copying either way (the mailboxes have no thread of their own to overlap it
  // with: on a CPU rank Gloo's would take a core from the compute they overlap) and is far
  // faster than Gloo's (hs_comm_bench: a 2-rank all-gather of 16 MiB 2 ms against 12 ms).
  std::unique_ptr<PendingCollective> all_gather_async(const at::Tensor& input) override {
    if ((staging_ || shm_) && input.is_cpu())
      return std::make_unique<CompletedCollective>(all_gather(input), probes::now_ns());
    return post_all_gather(input);
  }

  std::unique_ptr<PendingCollective> reduce_scatter_async(const at::Tensor& input, ReduceOp op) override {
    if ((staging_ || shm_) && input.is_cpu())
      return std::make_unique<CompletedCollective>(reduce_scatter(input, op), probes::now_ns());
    return post_reduce_scatter(input, op);
  }

  void broadcast(at::Tensor& tensor, int root) override {
    TORCH_CHECK(tensor.is_contiguous(), "broadcast on group '", name_, "' needs a contiguous tensor");
    std::vector<at::Tensor> tensors{staged(tensor)};
    c10d::BroadcastOptions opts;
    opts.rootRank = root;
    opts.timeout = timeout_;
    wait(backend_->broadcast(tensors, opts), "broadcast");
    unstage(tensors[0], tensor);
  }

  void send(const at::Tensor& tensor, int peer) override {
    std::vector<at::Tensor> tensors{staged(tensor.contiguous())};
    wait(backend_->send(tensors, peer, 0), "send");
  }

  void recv(at::Tensor& tensor, int peer) override {
    TORCH_CHECK(tensor.is_contiguous(), "recv on group '", name_, "' needs a contiguous tensor");
    std::vector<at::Tensor> tensors{staged(tensor)};
    wait(backend_->recv(tensors, peer, 0), "recv");
    unstage(tensors[0], tensor);
  }

  // Gloo on one host with shared memory: through the group's mailboxes (exchange_through_shm).
  // Gloo otherwise: every receive and every send posted at once (Gloo's send and recv return as soon as the
  // message is handed to its transport, which moves all pairs' bytes concurrently), then the
  // receives waited in list order — each handed to recv_done as it completes, so the caller
  // unpacks one while the next is still arriving — and the sends last. Deadlock-free by
  // construction: no rank waits for anything before it has posted all it will ever post.
  // NCCL: one coalesced group of every receive and send (ncclGroupStart/End through c10d's
  // startCoalescing/endCoalescing, what torch.distributed.batch_isend_irecv does): NCCL schedules
  // the group's p2p ops together, so ordering inside it cannot deadlock; CPU tensors go through
  // the staging device. The hooks' *_done run after the group completes.
  // Any other backend: the pair order of the default.
  void exchange(const std::vector<P2POp>& sends, const std::vector<P2POp>& recvs,
                const ExchangeHooks& hooks) override {
    if (backend_->getBackendName() == "nccl") return exchange_coalesced(sends, recvs, hooks);
    if (staging_ || backend_->getBackendName() != "gloo") return exchange_in_pair_order(*this, sends, recvs, hooks);
    // Refused before anything is posted, as the default refuses them. A failure names the op
    // ("recv", "send") as recv and send do, so that the DistError reads the same.
    check_exchange(sends, recvs);
    if (shm_) return exchange_through_shm(sends, recvs, hooks);
    std::vector<std::vector<at::Tensor>> recv_tensors(recvs.size()), send_tensors(sends.size());
    std::vector<c10::intrusive_ptr<c10d::Work>> recv_work(recvs.size()), send_work(sends.size());
    for (std::size_t i = 0; i < recvs.size(); ++i) {
      recv_tensors[i] = {recvs[i].tensor};
      if (hooks.recv_posted) hooks.recv_posted(i);
      recv_work[i] = post([&] { return backend_->recv(recv_tensors[i], recvs[i].peer, 0); }, "recv");
    }
    for (std::size_t i = 0; i < sends.size(); ++i) {
      send_tensors[i] = {sends[i].tensor};
      if (hooks.send_posted) hooks.send_posted(i);
      send_work[i] = post([&] { return backend_->send(send_tensors[i], sends[i].peer, 0); }, "send");
    }
    for (std::size_t i = 0; i < recvs.size(); ++i) {
      wait(recv_work[i], "recv");
      if (hooks.recv_done) hooks.recv_done(i);
    }
    for (std::size_t i = 0; i < sends.size(); ++i) {
      wait(send_work[i], "send");
      if (hooks.send_done) hooks.send_done(i);
    }
  }

  void check_exchange(const std::vector<P2POp>& sends, const std::vector<P2POp>& recvs) const {
    auto check = [&](const P2POp& op, const char* what) {
      if (op.peer < 0 || op.peer >= size() || op.peer == rank())
        throw std::invalid_argument(fmt::format("exchange on group '{}': peer {} is not another rank of the group "
                                                "(rank {} of {})", name_, op.peer, rank(), size()));
      if (!op.tensor.is_contiguous())
        throw std::invalid_argument(fmt::format("exchange on group '{}' needs contiguous tensors (a {} with peer {})",
                                                name_, what, op.peer));
    };
    for (const P2POp& op : sends) check(op, "send");
    for (const P2POp& op : recvs) check(op, "recv");
  }

  // A one-host group's exchange through its mailboxes (shm_collectives.h). Whether a group takes
  // this path depends on the group alone, never on the tensors, so both ends of every message
  // agree; a tensor off the CPU (a Gloo group given device tensors) goes through a CPU copy.
  void exchange_through_shm(const std::vector<P2POp>& sends, const std::vector<P2POp>& recvs,
                            const ExchangeHooks& hooks) {
    std::vector<P2POp> cpu_sends = sends, cpu_recvs = recvs;
    for (P2POp& op : cpu_sends)
      if (!op.tensor.is_cpu()) op.tensor = op.tensor.cpu();
    for (P2POp& op : cpu_recvs)
      if (!op.tensor.is_cpu()) op.tensor = at::empty(op.tensor.sizes(), op.tensor.options().device(at::kCPU));
    ExchangeHooks staged_hooks = hooks;
    staged_hooks.recv_done = [&](std::size_t i) {
      if (!recvs[i].tensor.is_same(cpu_recvs[i].tensor)) {
        at::Tensor into = recvs[i].tensor;  // shares the caller's storage
        into.copy_(cpu_recvs[i].tensor);
      }
      if (hooks.recv_done) hooks.recv_done(i);
    };
    shm_call("exchange", [&] { shm_->exchange(cpu_sends, cpu_recvs, staged_hooks); });
  }

  // (size·d0, ...) in rank order, as post_all_gather's: this rank's input copied into place, every
  // peer's received into its rows.
  at::Tensor all_gather_through_mailboxes(const at::Tensor& input) {
    const at::Tensor in = input.dim() == 0 ? input.reshape({1}) : input.contiguous();
    std::vector<int64_t> shape = in.sizes().vec();
    const int64_t rows = shape[0];
    shape[0] *= size();
    at::Tensor out = at::empty(shape, in.options());
    out.narrow(0, rank() * rows, rows).copy_(in);
    std::vector<P2POp> sends, recvs;
    for (int peer = 0; peer < size(); ++peer) {
      if (peer == rank()) continue;
      sends.push_back({in, peer});
      recvs.push_back({out.narrow(0, peer * rows, rows), peer});
    }
    shm_call("all_gather", [&] { shm_->exchange(sends, recvs, {}); });
    return out;
  }

  // (d0 / size, ...): chunk k of every rank's input to rank k; this rank's chunk is the reduction
  // of the n contributions in rank order (its own in place: no copy).
  at::Tensor reduce_scatter_through_mailboxes(const at::Tensor& input, ReduceOp op) {
    TORCH_CHECK(input.dim() >= 1 && input.size(0) % size() == 0, "reduce_scatter on group '", name_,
                "': dim 0 (", input.dim() ? input.size(0) : 0, ") must be divisible by the group size ", size());
    const at::Tensor in = input.contiguous();
    const int64_t rows = in.size(0) / size();
    std::vector<int64_t> chunk_shape = in.sizes().vec();
    chunk_shape[0] = rows;
    std::vector<at::Tensor> from(static_cast<std::size_t>(size()));  // rank r's contribution to this chunk
    std::vector<P2POp> sends, recvs;
    for (int peer = 0; peer < size(); ++peer) {
      if (peer == rank()) {
        from[static_cast<std::size_t>(peer)] = in.narrow(0, rank() * rows, rows);
        continue;
      }
      sends.push_back({in.narrow(0, peer * rows, rows), peer});
      from[static_cast<std::size_t>(peer)] = at::empty(chunk_shape, in.options());
      recvs.push_back({from[static_cast<std::size_t>(peer)], peer});
    }
    shm_call("reduce_scatter", [&] { shm_->exchange(sends, recvs, {}); });
    at::Tensor out = from[0].clone();
    for (std::size_t r = 1; r < from.size(); ++r) detail::reduce_into(out, from[r], op);
    if (op == ReduceOp::kAvg) out.div_(size());
    return out;
  }

  void exchange_coalesced(const std::vector<P2POp>& sends, const std::vector<P2POp>& recvs,
                          const ExchangeHooks& hooks) {
    check_exchange(sends, recvs);
    std::vector<std::vector<at::Tensor>> recv_tensors(recvs.size()), send_tensors(sends.size());
    backend_->startCoalescing();
    for (std::size_t i = 0; i < recvs.size(); ++i) {
      recv_tensors[i] = {staged(recvs[i].tensor)};
      if (hooks.recv_posted) hooks.recv_posted(i);
      post([&] { return backend_->recv(recv_tensors[i], recvs[i].peer, 0); }, "recv");
    }
    for (std::size_t i = 0; i < sends.size(); ++i) {
      send_tensors[i] = {staged(sends[i].tensor)};
      if (hooks.send_posted) hooks.send_posted(i);
      post([&] { return backend_->send(send_tensors[i], sends[i].peer, 0); }, "send");
    }
    wait(post([&] { return backend_->endCoalescing(); }, "exchange"), "exchange");
    for (std::size_t i = 0; i < recvs.size(); ++i) {
      at::Tensor into = recvs[i].tensor;  // shares the caller's storage
      unstage(recv_tensors[i][0], into);
      if (hooks.recv_done) hooks.recv_done(i);
    }
    for (std::size_t i = 0; i < sends.size(); ++i)
      if (hooks.send_done) hooks.send_done(i);
  }

  void barrier() override {
    if (detail::ShmCollectives* shm = shm_for(at::Tensor())) return shm_call("barrier", [&] { shm->barrier(); });
    c10d::BarrierOptions opts;
    opts.timeout = timeout_;
    // NCCL: name this process's device, or ProcessGroupNCCL guesses it from the rank (and warns).
    if (staging_) opts.device_ids = {staging_->index()};
    wait(backend_->barrier(opts), "barrier");
  }

 private:
  // The shared-memory path for a blocking all-reduce or all-gather of `t` (undefined: a barrier),
  // or nullptr (Gloo): the same answer on every rank (the same sizes on every rank).
  detail::ShmCollectives* shm_for(const at::Tensor& t) const {
    if (!shm_) return nullptr;
    if (t.defined() && (!t.is_cpu() || t.nbytes() > static_cast<std::size_t>(shm_bytes_))) return nullptr;
    return shm_.get();
  }

  // A shared-memory call, its failure (a peer gone or late) reported as Gloo's are.
  template <typename Call>
  void shm_call(const char* op, Call&& call) const {
    try {
      call();
    } catch (const c10::Error& e) {
      fail(op, e.what_without_backtrace());
    } catch (const std::runtime_error& e) {
      fail(op, e.what());
    }
  }

  // A posted c10d work: wait() waits it as the blocking calls do and finishes the result; the
  // completion time comes from the work's future (a callback on the backend's thread).
  // One all_gather posted to the backend (the synchronous form waits on it at once): the result,
  // (size·d0, ...) (a 0-d input gathers as (size,)), on the input's device at wait().
  std::unique_ptr<PendingCollective> post_all_gather(const at::Tensor& input) const {
    const at::Tensor in = staged(input.contiguous());
    std::vector<int64_t> shape = in.sizes().vec();
    if (shape.empty()) shape.push_back(1);
    shape[0] *= size();
    at::Tensor out = at::empty(shape, in.options());
    at::Tensor flat_in = in.dim() == 0 ? in.reshape({1}) : in;
    c10d::AllgatherOptions opts;
    opts.timeout = timeout_;
    auto work = post([&] { return backend_->_allgather_base(out, flat_in, opts); }, "all_gather");
    return std::make_unique<Pending>(this, std::move(work), "all_gather",
                                     [in, out, device = input.device()] { return out.to(device); });
  }

  // One reduce_scatter posted: _reduce_scatter_base where the backend has it (LibTorch's Gloo
  // clones, all-reduces and copies out the chunk), else an all-to-all whose chunks are reduced at
  // wait(). The result (d0 / size, ...) on the input's device.
  std::unique_ptr<PendingCollective> post_reduce_scatter(const at::Tensor& input, ReduceOp op) {
    TORCH_CHECK(input.dim() >= 1 && input.size(0) % size() == 0, "reduce_scatter on group '", name_,
                "': dim 0 (", input.dim() ? input.size(0) : 0, ") must be divisible by the group size ", size());
    at::Tensor in = staged(input.contiguous());
    std::vector<int64_t> shape = in.sizes().vec();
    shape[0] /= size();
    const int n = size();
    const auto device = input.device();
    if (!reduce_scatter_unsupported_) {
      at::Tensor out = at::empty(shape, in.options());
      c10d::ReduceScatterOptions opts;
      const bool avg_here = op == ReduceOp::kAvg && native_avg_ && at::isFloatingType(in.scalar_type());
      opts.reduceOp = avg_here ? c10d::ReduceOp(c10d::ReduceOp::AVG) : to_c10d(op);
      opts.timeout = timeout_;
      try {
        auto work = backend_->_reduce_scatter_base(out, in, opts);
        return std::make_unique<Pending>(this, std::move(work), "reduce_scatter", [in, out, op, n, device, avg_here] {
          return (op == ReduceOp::kAvg && !avg_here ? out.div_(n) : out).to(device);
        });
      } catch (const c10::NotImplementedError&) {
        // Raised before any data moves, identically on every rank: fall back from now on.
        reduce_scatter_unsupported_ = true;
      }
    }
    // (n, ...) chunks: row k of `received` is rank k's chunk for this rank.
    at::Tensor received = at::empty_like(in);
    std::vector<int64_t> equal_splits;  // empty: n equal chunks along dim 0
    c10d::AllToAllOptions opts;
    opts.timeout = timeout_;
    auto work = post([&] { return backend_->alltoall_base(received, in, equal_splits, equal_splits, opts); },
                     "reduce_scatter (all_to_all)");
    return std::make_unique<Pending>(this, std::move(work), "reduce_scatter (all_to_all)",
                                     [in, received, shape, op, n, device] {
                                       const auto chunks = received.view(prepend(n, shape));
                                       at::Tensor out;
                                       switch (op) {
                                         case ReduceOp::kSum: out = chunks.sum(0); break;
                                         case ReduceOp::kAvg: out = chunks.sum(0).div_(n); break;
                                         case ReduceOp::kMax: out = std::get<0>(chunks.max(0)); break;
                                         case ReduceOp::kMin: out = std::get<0>(chunks.min(0)); break;
                                       }
                                       return out.to(device);
                                     });
  }

  class Pending final : public PendingCollective {
   public:
    Pending(const C10dCommunicator* comm, c10::intrusive_ptr<c10d::Work> work, const char* op,
            std::function<at::Tensor()> finish)
        : comm_(comm), work_(std::move(work)), op_(op), finish_(std::move(finish)),
          completed_(std::make_shared<std::atomic<std::int64_t>>(0)) {
      try {
        work_->getFuture()->addCallback([done = completed_](c10::ivalue::Future&) { done->store(probes::now_ns()); });
      } catch (const std::exception&) {
        // A backend without futures: completion is taken at wait()'s return.
      }
    }
    ~Pending() override {
      if (done_) return;
      try {
        work_->wait(comm_->timeout_);
      } catch (const std::exception&) {
        // Already failing (an exception unwinds past this collective); the peers time out.
      }
    }
    at::Tensor wait() override {
      if (!done_) {
        comm_->wait(work_, op_);
        result_ = finish_();
        done_ = true;
        const std::int64_t now = probes::now_ns();
        const std::int64_t seen = completed_->load();
        end_ns_ = seen > 0 && seen <= now ? seen : now;
      }
      return result_;
    }
    std::int64_t completed_ns() const override { return end_ns_; }

   private:
    const C10dCommunicator* comm_;
    c10::intrusive_ptr<c10d::Work> work_;
    const char* op_;
    std::function<at::Tensor()> finish_;
    std::shared_ptr<std::atomic<std::int64_t>> completed_;
    at::Tensor result_;
    std::int64_t end_ns_ = 0;
    bool done_ = false;
  };

  // `t` where the backend moves it: on the staging device when it is a CPU tensor and the backend
  // is NCCL; otherwise `t` itself.
  at::Tensor staged(const at::Tensor& t) const { return staging_ && t.is_cpu() ? t.to(*staging_) : t; }
  // The result of an in-place op back into the caller's tensor when it went through staging.
  static void unstage(const at::Tensor& moved, at::Tensor& tensor) {
    if (!moved.is_same(tensor)) tensor.copy_(moved);
  }

  // A backend call that posts an op, with its failure (a broken pair) reported as wait's are.
  template <typename Post>
  c10::intrusive_ptr<c10d::Work> post(Post&& post_op, const char* op) const {
    try {
      return post_op();
    } catch (const c10::Error& e) {
      fail(op, e.what_without_backtrace());
    } catch (const std::exception& e) {
      fail(op, e.what());
    }
  }

  void wait(const c10::intrusive_ptr<c10d::Work>& work, const char* op) const {
    try {
      work->wait(timeout_);
    } catch (const c10::Error& e) {  // without the C++ backtrace c10 appends to what()
      fail(op, e.what_without_backtrace());
    } catch (const std::exception& e) {
      fail(op, e.what());
    }
  }

  [[noreturn]] void fail(const char* op, const char* why) const {
    throw DistError(fmt::format("{} on group '{}' (rank {} of {}; its ranks: {}) failed: {} — a peer rank died, "
                                "stopped or became unreachable, or did not join within hybridscope.dist.timeout_s={}",
                                op, name_, rank(), size(), members_, why, timeout_.count() / 1000.0));
  }

  c10::intrusive_ptr<c10d::Backend> backend_;
  // NCCL averages natively (ncclAvg, a pre-multiplied sum: one kernel, and on a one-rank
  // communicator NCCL's own oneRankReduce rather than nothing); Gloo has no AVG.
  bool native_avg_ = backend_->getBackendName() == "nccl";
  std::string name_;
  std::string members_;  // "0 (host-a), 1 (host-b)": the world ranks a failure may be waiting on
  std::chrono::milliseconds timeout_;
  std::optional<at::Device> staging_;
  bool reduce_scatter_unsupported_ = false;
  std::int64_t shm_bytes_;
  std::unique_ptr<detail::ShmCollectives> shm_;
};

std::string host_name() {
  char buf[256] = {};
  return ::gethostname(buf, sizeof(buf) - 1) == 0 ? std::string(buf) : std::string("unknown");
}

bool is_loopback(const std::string& addr) {
  return addr == "localhost" || addr.rfind("127.", 0) == 0 || addr == "::1";
}

struct AddrInfo {
  addrinfo* list = nullptr;
  AddrInfo(const std::string& host, int port, int socktype) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = socktype;
    hints.ai_flags = AI_NUMERICSERV;
    if (const int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &list); rc != 0)
      throw DistError(fmt::format("MASTER_ADDR={}: cannot resolve it: {}", host, ::gai_strerror(rc)));
  }
  ~AddrInfo() { ::freeaddrinfo(list); }
  AddrInfo(const AddrInfo&) = delete;
  AddrInfo& operator=(const AddrInfo&) = delete;
};

// Rank 0's store socket, listening on MASTER_ADDR:MASTER_PORT only: c10d's TCPStore on its own
// listens on every interface of the host, which on a shared network exposes an unauthenticated
// store (docs/launching.md). Handed to the store as TCPStoreOptions::masterListenFd.
int listen_on_master_address(const DistEnv& env) {
  const AddrInfo found(env.master_addr, env.master_port, SOCK_STREAM);
  std::string why = "no address";
  for (const addrinfo* ai = found.list; ai; ai = ai->ai_next) {
    const int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      why = std::strerror(errno);
      continue;
    }
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && ::listen(fd, 1024) == 0) return fd;
    why = std::strerror(errno);
    ::close(fd);
  }
  throw DistError(fmt::format(
      "rendezvous failed: rank 0 cannot serve the TCPStore on {}:{}: {} — MASTER_ADDR must be an address of rank 0's "
      "host (the store listens on that address only) and MASTER_PORT a free port",
      env.master_addr, env.master_port, why));
}

// This host's address on the route to MASTER_ADDR (a connected UDP socket sends nothing): the
// address Gloo's pairs listen on, so that ranks on other hosts reach it. A host name that resolves
// elsewhere (Gloo's default device) breaks in network namespaces and on multi-homed hosts.
std::string local_address_towards(const DistEnv& env) {
  const AddrInfo found(env.master_addr, env.master_port, SOCK_DGRAM);
  for (const addrinfo* ai = found.list; ai; ai = ai->ai_next) {
    const int fd = ::socket(ai->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    sockaddr_storage local{};
    socklen_t len = sizeof(local);
    const bool ok = ::connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
                    ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0;
    ::close(fd);
    if (!ok) continue;
    char text[INET6_ADDRSTRLEN] = {};
    const void* raw = local.ss_family == AF_INET6
                          ? static_cast<const void*>(&reinterpret_cast<const sockaddr_in6*>(&local)->sin6_addr)
                          : static_cast<const void*>(&reinterpret_cast<const sockaddr_in*>(&local)->sin_addr);
    if (::inet_ntop(local.ss_family, raw, text, sizeof(text))) return text;
  }
  throw DistError(fmt::format("no route from this host to MASTER_ADDR={}: set MASTER_ADDR to an address of rank 0's "
                              "host that this one reaches, or GLOO_SOCKET_IFNAME to the interface to use",
                              env.master_addr));
}

std::string boot_id() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id.empty() ? host_name() : id;
}

// The probes' one clock without its shift (clock.h: CLOCK_MONOTONIC's time, read through the
// calibrated TSC where there is one): the offset is then between the timelines the ranks record on.
std::int64_t monotonic_ns() { return probes::now_ns() - probes::clock_shift_ns(); }

// Cristian's algorithm against rank 0, one rank at a time: rank r sends its clock, rank 0 answers
// with its own; of kRounds exchanges the shortest round trip bounds the error best.
ClockSync sync_with_rank0(Communicator& world, bool same_host) {
  constexpr int kRounds = 16;
  ClockSync out;
  out.same_host = same_host;
  at::Tensor stamp = at::zeros({1}, at::kLong);
  std::int64_t best_round_trip = std::numeric_limits<std::int64_t>::max();
  for (int r = 1; r < world.size(); ++r) {
    if (world.rank() != 0 && world.rank() != r) continue;
    for (int i = 0; i < kRounds; ++i) {
      if (world.rank() == 0) {
        world.recv(stamp, r);
        stamp.fill_(monotonic_ns());
        world.send(stamp, r);
        continue;
      }
      const std::int64_t sent = monotonic_ns();
      stamp.fill_(sent);
      world.send(stamp, 0);
      world.recv(stamp, 0);
      const std::int64_t received = monotonic_ns();
      if (received - sent < best_round_trip) {
        best_round_trip = received - sent;
        out.offset_ns = stamp.item<std::int64_t>() - (sent + (received - sent) / 2);
        out.error_ns = (best_round_trip + 1) / 2;
      }
    }
  }
  return out;
}

// The interface Gloo's pairs use: GLOO_SOCKET_IFNAME (PyTorch's variable; the first of a list)
// when set, loopback for a one-host run, else the address on the route to rank 0's host.
auto gloo_device(const DistEnv& env) {
  if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname && *ifname) {
    const std::string first = std::string(ifname).substr(0, std::string(ifname).find(','));
    return c10d::ProcessGroupGloo::createDeviceForInterface(first);
  }
  if (is_loopback(env.master_addr)) return c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1");
  return c10d::ProcessGroupGloo::createDeviceForHostname(local_address_towards(env));
}

}  // namespace

struct C10dGroupFactory::Impl {
  DistEnv env;
  ProcessGroupOptions options;
  const probes::RunProbes* probes;
  c10::intrusive_ptr<c10d::Store> store;
  int groups_made = 0;
  std::shared_ptr<Communicator> world;
  std::shared_ptr<::gloo::transport::Device> device;  // Gloo's, made with the world group
  std::vector<std::string> hosts;                     // every world rank's host, from the rendezvous
  ClockSync clock;                                    // this rank's estimate of rank 0's clock
  std::vector<int> world_ranks;                       // a sub-world's rank i is world rank world_ranks[i]

  int world_rank(int r) const { return world_ranks.empty() ? r : world_ranks[static_cast<std::size_t>(r)]; }
  std::string host_of(int r) const {
    const int w = world_rank(r);
    return static_cast<std::size_t>(w) < hosts.size() ? hosts[static_cast<std::size_t>(w)] : "?";
  }

  // "0 (host-a), 1 (host-b)" for a group of `ranks` (this factory's ranks) in world ranks.
  std::string members(const std::vector<int>& ranks) const {
    std::string out;
    for (const int r : ranks) out += fmt::format("{}{} ({})", out.empty() ? "" : ", ", world_rank(r), host_of(r));
    return out;
  }

  std::shared_ptr<Communicator> make(const std::vector<int>& ranks, const std::string& name) {
    const int index = groups_made++;
    auto member = std::find(ranks.begin(), ranks.end(), env.rank);
    if (member == ranks.end()) return nullptr;
    const int group_rank = static_cast<int>(member - ranks.begin());
    const int group_size = static_cast<int>(ranks.size());
    auto prefixed = c10::make_intrusive<c10d::PrefixStore>(fmt::format("group/{}/", index), store);
    c10::intrusive_ptr<c10d::Backend> backend;
    std::optional<at::Device> staging;
    if (options.backend == DistBackend::kNccl) {
      backend = detail::make_nccl_backend(prefixed, group_rank, group_size, options.timeout);
      // The process's current CUDA device (trainer_device set it, rank_device.h): NCCL's device.
      staging = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->getDevice();
    } else {
      auto opts = c10d::ProcessGroupGloo::Options::create(options.timeout);
      if (!device) device = gloo_device(env);  // one per world: every group's pairs on one interface
      opts->devices.push_back(device);
      opts->threads = 1;  // one op at a time per group: every call waits for its work
      try {
        backend = c10::make_intrusive<c10d::ProcessGroupGloo>(prefixed, group_rank, group_size, opts);
      } catch (const std::exception& e) {
        throw DistError(fmt::format("forming Gloo group '{}' ({} ranks) failed: {} — every rank of the group must "
                                    "create it within hybridscope.dist.timeout_s={}",
                                    name, group_size, e.what(), options.timeout.count() / 1000.0));
      }
    }
    // Shared memory for the small collectives of a Gloo group on one host (the same host entry —
    // name, and address where the ranks span hosts — for every member).
    bool one_host = true;
    for (const int r : ranks) one_host = one_host && host_of(r) == host_of(ranks.front());
    const bool shm = options.backend == DistBackend::kGloo && one_host && options.shm_bytes > 0;
    std::shared_ptr<Communicator> comm = std::make_shared<C10dCommunicator>(
        backend, name, members(ranks), options.timeout, staging, shm ? prefixed : nullptr, options.shm_bytes);
    if (probes) comm = std::make_shared<ProbedCommunicator>(comm, *probes);
    return comm;
  }
};

C10dGroupFactory::C10dGroupFactory(const DistEnv& env, ProcessGroupOptions options, const probes::RunProbes* probes)
    : impl_(std::make_unique<Impl>()) {
  auto& s = *impl_;
  s.env = env;
  s.options = options;
  s.probes = probes;
  if (env.world_size < 1 || env.rank < 0 || env.rank >= env.world_size)
    throw DistError(fmt::format("rank {} of a world of {}: need 0 <= rank < world_size", env.rank, env.world_size));
  c10d::TCPStoreOptions store_opts;
  store_opts.port = static_cast<std::uint16_t>(env.master_port);
  store_opts.isServer = env.rank == 0 && !env.store_served_by_launcher;
  if (store_opts.isServer) store_opts.masterListenFd = listen_on_master_address(env);
  store_opts.numWorkers = static_cast<std::size_t>(env.world_size);
  store_opts.waitWorkers = true;
  store_opts.timeout = options.timeout;
  try {
    s.store = c10::make_intrusive<c10d::TCPStore>(env.master_addr, store_opts);
    if (!env.store_prefix.empty()) s.store = c10::make_intrusive<c10d::PrefixStore>(env.store_prefix, s.store);
  } catch (const std::exception& e) {
    throw DistError(fmt::format(
        "rendezvous failed: rank {} of {} could not {} the TCPStore at {}:{} within {} s: {} — check MASTER_ADDR/"
        "MASTER_PORT (a port in use? another run?) and that every rank starts",
        env.rank, env.world_size, env.rank == 0 ? "serve" : "reach", env.master_addr, env.master_port,
        options.timeout.count() / 1000.0, e.what()));
  }
  // Every rank's host (name and the address its pairs use), so that a failed collective names
  // where its peers run; read while the store is known to be reachable.
  try {
    const std::string self = fmt::format("{}{}", host_name(), is_loopback(env.master_addr) || env.world_size == 1
                                                                  ? ""
                                                                  : " " + local_address_towards(env));
    s.store->set(fmt::format("hs/host/{}", env.rank), std::vector<std::uint8_t>(self.begin(), self.end()));
    const std::string boot = boot_id();
    s.store->set(fmt::format("hs/boot/{}", env.rank), std::vector<std::uint8_t>(boot.begin(), boot.end()));
    for (int r = 0; r < env.world_size; ++r) {
      const auto bytes = s.store->get(fmt::format("hs/host/{}", r));
      s.hosts.emplace_back(bytes.begin(), bytes.end());
    }
    const auto rank0_boot = s.store->get("hs/boot/0");
    s.clock.same_host = std::string(rank0_boot.begin(), rank0_boot.end()) == boot;
  } catch (const DistError&) {
    throw;
  } catch (const std::exception& e) {
    throw DistError(fmt::format("rendezvous failed: rank {} of {} did not hear from every rank within {} s: {}",
                                env.rank, env.world_size, options.timeout.count() / 1000.0, e.what()));
  }
  std::vector<int> all(static_cast<std::size_t>(env.world_size));
  for (int r = 0; r < env.world_size; ++r) all[static_cast<std::size_t>(r)] = r;
  const probes::RunProbes* probes_given = std::exchange(s.probes, nullptr);  // the clock exchange is not the run's
  s.world = s.make(all, "world");
  s.clock = sync_with_rank0(*s.world, s.clock.same_host);
  s.probes = probes_given;
  if (s.probes) s.world = std::make_shared<ProbedCommunicator>(s.world, *s.probes);
}

const ClockSync& C10dGroupFactory::clock_sync() const { return impl_->clock; }

const std::vector<std::string>& C10dGroupFactory::hosts() const { return impl_->hosts; }

C10dGroupFactory::~C10dGroupFactory() = default;

std::shared_ptr<Communicator> C10dGroupFactory::world() { return impl_->world; }

std::shared_ptr<Communicator> C10dGroupFactory::new_group(const std::vector<int>& ranks, const std::string& name) {
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i] < 0 || ranks[i] >= impl_->env.world_size || (i > 0 && ranks[i] <= ranks[i - 1]))
      throw DistError(fmt::format("new_group('{}'): ranks must be ascending world ranks in [0, {})", name,
                                  impl_->env.world_size));
  }
  if (ranks.empty()) throw DistError(fmt::format("new_group('{}'): a group needs at least one rank", name));
  return impl_->make(ranks, name);
}

const DistEnv& C10dGroupFactory::env() const { return impl_->env; }

C10dGroupFactory::C10dGroupFactory(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

std::unique_ptr<C10dGroupFactory> C10dGroupFactory::sub_world(const std::vector<int>& ranks, const std::string& name) {
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i] < 0 || ranks[i] >= impl_->env.world_size || (i > 0 && ranks[i] <= ranks[i - 1]))
      throw DistError(fmt::format("sub_world('{}'): ranks must be ascending world ranks in [0, {})", name,
                                  impl_->env.world_size));
  }
  const auto member = std::find(ranks.begin(), ranks.end(), impl_->env.rank);
  if (member == ranks.end()) return nullptr;
  auto impl = std::make_unique<Impl>();
  impl->env = impl_->env;
  impl->env.rank = static_cast<int>(member - ranks.begin());
  impl->env.world_size = static_cast<int>(ranks.size());
  impl->options = impl_->options;
  impl->probes = impl_->probes;
  impl->device = impl_->device;
  impl->hosts = impl_->hosts;
  for (const int r : ranks)
    impl->world_ranks.push_back(impl_->world_ranks.empty() ? r : impl_->world_ranks[static_cast<std::size_t>(r)]);
  impl->store = c10::make_intrusive<c10d::PrefixStore>(fmt::format("pool/{}/", name), impl_->store);
  std::vector<int> all(ranks.size());
  for (std::size_t r = 0; r < all.size(); ++r) all[r] = static_cast<int>(r);
  impl->world = impl->make(all, name);
  return std::unique_ptr<C10dGroupFactory>(new C10dGroupFactory(std::move(impl)));
}

void C10dGroupFactory::set_probes(const probes::RunProbes* probes) {
  impl_->probes = probes;
}

}  // namespace hs::trainer
