// probed_communicator.cpp — forwards each collective and records it (see probed_communicator.h).
#include "hybridscope/trainer/dist/probed_communicator.h"

#include <mutex>
#include <stdexcept>
#include <unordered_set>
#include <vector>

#include <ATen/core/Tensor.h>

#include "hybridscope/probes/clock.h"
#include "hybridscope/probes/range_observer.h"

namespace hs::trainer {

namespace {

// Group names as process-lifetime C strings: a CommRecord waits in the recorder's queue by
// pointer, possibly after the communicator that made it is gone. Groups are few (world, tp, dp,
// pp per layout), so the set stays tiny; unordered_set nodes never move.
const char* intern_group_name(const std::string& name) {
  static std::mutex mutex;
  static std::unordered_set<std::string>* names = new std::unordered_set<std::string>();  // never freed
  std::lock_guard<std::mutex> lock(mutex);
  return names->insert(name).first->c_str();
}

std::int64_t nbytes(const at::Tensor& t) { return static_cast<std::int64_t>(t.numel()) * t.element_size(); }

// The collective as an observed range (range_observer.h), so that the CUPTI collector ties the
// kernels it launches (NCCL's) to it: correlation_ranges gets (name "comm/<op>", depth
// kCollectiveDepth, start_ns = the comm_ops row's start_ns), which gives each collective its
// GPU-side duration (docs/schema.md). Without an observer: one atomic load.
class ObservedCollective {
 public:
  ObservedCollective(const char* range_name, std::int64_t start_ns) noexcept : observer_(probes::range_observer()) {
    if (observer_) observer_->push(observer_->context, range_name, ProbedCommunicator::kCollectiveDepth, start_ns);
  }
  ~ObservedCollective() {
    if (observer_) observer_->pop(observer_->context);
  }
  ObservedCollective(const ObservedCollective&) = delete;
  ObservedCollective& operator=(const ObservedCollective&) = delete;

 private:
  const probes::RangeObserver* observer_;
};

}  // namespace

const char* comm_dtype_name(c10::ScalarType type) noexcept {
  switch (type) {
    case c10::ScalarType::Float: return "float32";
    case c10::ScalarType::BFloat16: return "bfloat16";
    case c10::ScalarType::Half: return "float16";
    case c10::ScalarType::Double: return "float64";
    case c10::ScalarType::Long: return "int64";
    case c10::ScalarType::Int: return "int32";
    case c10::ScalarType::Short: return "int16";
    case c10::ScalarType::Char: return "int8";
    case c10::ScalarType::Byte: return "uint8";
    case c10::ScalarType::Bool: return "bool";
    default: return "other";
  }
}

std::int64_t received_bytes(std::string_view op, std::int64_t bytes, int group_size) {
  const std::int64_t n = group_size;
  if (op == "all_gather" || op == "reduce_scatter") return bytes * (n - 1) / n;
  if (op == "all_reduce") return 2 * bytes * (n - 1) / n;
  if (op == "recv" || op == "broadcast") return bytes;
  if (op == "send" || op == "barrier") return 0;
  throw std::invalid_argument("received_bytes: unknown comm op '" + std::string(op) + "'");
}

ProbedCommunicator::ProbedCommunicator(std::shared_ptr<Communicator> inner, const probes::RunProbes& probes)
    : inner_(std::move(inner)), probes_(&probes), recorder_(probes.recorder()) {
  if (!inner_) throw std::invalid_argument("ProbedCommunicator: the wrapped communicator is null");
  group_ = intern_group_name(inner_->name());
  group_size_ = inner_->size();
}

void ProbedCommunicator::record(const char* op, std::int64_t bytes, const char* dtype,
                                std::int64_t start_ns) const noexcept {
  recorder_->record_comm({op, group_, group_size_, bytes, dtype, start_ns, probes::now_ns(), probes_->step()});
}

// The wrapped collective in flight; its row is written once, at wait(), under the step of its issue.
class ProbedCommunicator::ProbedPending final : public PendingCollective {
 public:
  // Made once the wrapped collective is posted: `start_ns` before the post, now its return.
  ProbedPending(const ProbedCommunicator* probe, std::unique_ptr<PendingCollective> inner, const char* op,
                std::int64_t bytes, const char* dtype, std::int64_t start_ns)
      : probe_(probe), inner_(std::move(inner)), op_(op), bytes_(bytes), dtype_(dtype), start_ns_(start_ns),
        posted_ns_(probes::now_ns()), step_(probe->probes_->step()) {}
  at::Tensor wait() override {
    const std::int64_t wait_start = probes::now_ns();
    at::Tensor out = inner_->wait();
    if (!recorded_) {
      probes::CommRecord row{op_, probe_->group_, probe_->group_size_, bytes_, dtype_, start_ns_,
                             inner_->completed_ns(), step_};
      // The caller was blocked on it while posting it and while waiting: what the reports cut out
      // of its compute.
      row.posted_ns = posted_ns_;
      row.wait_start_ns = wait_start;
      row.wait_end_ns = probes::now_ns();
      probe_->recorder_->record_comm(row);
    }
    recorded_ = true;
    return out;
  }
  std::int64_t completed_ns() const override { return inner_->completed_ns(); }

 private:
  const ProbedCommunicator* probe_;
  std::unique_ptr<PendingCollective> inner_;
  const char* op_;
  std::int64_t bytes_;
  const char* dtype_;
  std::int64_t start_ns_, posted_ns_, step_;
  bool recorded_ = false;
};

std::unique_ptr<PendingCollective> ProbedCommunicator::all_gather_async(const at::Tensor& input) {
  auto* async = dynamic_cast<AsyncCollectives*>(inner_.get());
  if (async == nullptr) return std::make_unique<CompletedCollective>(all_gather(input), probes::now_ns());
  if (!recorder_) return async->all_gather_async(input);
  const std::int64_t start = probes::now_ns();
  const ObservedCollective observed("comm/all_gather", start);  // the kernels the post launches
  return std::make_unique<ProbedPending>(this, async->all_gather_async(input), "all_gather",
                                         nbytes(input) * group_size_, comm_dtype_name(input.scalar_type()), start);
}

std::unique_ptr<PendingCollective> ProbedCommunicator::reduce_scatter_async(const at::Tensor& input, ReduceOp op) {
  auto* async = dynamic_cast<AsyncCollectives*>(inner_.get());
  if (async == nullptr) return std::make_unique<CompletedCollective>(reduce_scatter(input, op), probes::now_ns());
  if (!recorder_) return async->reduce_scatter_async(input, op);
  const std::int64_t start = probes::now_ns();
  const ObservedCollective observed("comm/reduce_scatter", start);  // the kernels the post launches
  return std::make_unique<ProbedPending>(this, async->reduce_scatter_async(input, op), "reduce_scatter",
                                         nbytes(input), comm_dtype_name(input.scalar_type()), start);
}

void ProbedCommunicator::all_reduce(at::Tensor& tensor, ReduceOp op) {
  if (!recorder_) return inner_->all_reduce(tensor, op);
  const std::int64_t bytes = nbytes(tensor);
  const char* dtype = comm_dtype_name(tensor.scalar_type());
  const std::int64_t start = probes::now_ns();
  const ObservedCollective observed("comm/all_reduce", start);  // popped after the record
  inner_->all_reduce(tensor, op);
  record("all_reduce", bytes, dtype, start);
}

at::Tensor ProbedCommunicator::all_gather(const at::Tensor& input) {
  if (!recorder_) return inner_->all_gather(input);
  const std::int64_t bytes = nbytes(input) * group_size_;  // the output buffer
  const char* dtype = comm_dtype_name(input.scalar_type());
  const std::int64_t start = probes::now_ns();
  const ObservedCollective observed("comm/all_gather", start);  // popped after the record
  at::Tensor out = inner_->all_gather(input);
  record("all_gather", bytes, dtype, start);
  return out;
}

at::Tensor ProbedCommunicator::reduce_scatter(const at::Tensor& input, ReduceOp op) {
  if (!recorder_) return inner_->reduce_scatter(input, op);
  const std::int64_t bytes = nbytes(input);  // the input buffer
  const char* dtype = comm_dtype_name(input.scalar_type());
  const std::int64_t start = probes::now_ns();
  const ObservedCollective observed("comm/reduce_scatter", start);  // popped after the record
  at::Tensor out = inner_->reduce_scatter(input, op);
  record("reduce_scatter", bytes, dtype, start);
  return out;
}

void ProbedCommunicator::broadcast(at::Tensor& tensor, int root) {
  if (!recorder_) return inner_->broadcast(tensor, root);
  const std::int64_t bytes = nbytes(tensor);
  const char* dtype = comm_dtype_name(tensor.scalar_type());
  const std::int64_t start = probes::now_ns();
  const ObservedCollective observed("comm/broadcast", start);  // popped after the record
  inner_->broadcast(tensor, root);
  record("broadcast", bytes, dtype, start);
}

void ProbedCommunicator::send(const at::Tensor& tensor, int peer) {
  if (!recorder_) return inner_->send(tensor, peer);
  const std::int64_t bytes = nbytes(tensor);
  const char* dtype = comm_dtype_name(tensor.scalar_type());
  const std::int64_t start = probes::now_ns();
  const ObservedCollective observed("comm/send", start);  // popped after the record
  inner_->send(tensor, peer);
  record("send", bytes, dtype, start);
}

void ProbedCommunicator::recv(at::Tensor& tensor, int peer) {
  if (!recorder_) return inner_->recv(tensor, peer);
  const std::int64_t bytes = nbytes(tensor);
  const char* dtype = comm_dtype_name(tensor.scalar_type());
  const std::int64_t start = probes::now_ns();
  const ObservedCollective observed("comm/recv", start);  // popped after the record
  inner_->recv(tensor, peer);
  record("recv", bytes, dtype, start);
}

void ProbedCommunicator::barrier() {
  if (!recorder_) return inner_->barrier();
  const std::int64_t start = probes::now_ns();
  const ObservedCollective observed("comm/barrier", start);  // popped after the record
  inner_->barrier();
  record("barrier", 0, "", start);
}

void ProbedCommunicator::exchange(const std::vector<P2POp>& sends, const std::vector<P2POp>& recvs,
                                  const ExchangeHooks& hooks) {
  if (!recorder_) return inner_->exchange(sends, recvs, hooks);
  // Each message's row: from its post to the moment the exchange saw it complete; a receive's
  // row ends before the caller's recv_done (its unpacking) runs.
  std::vector<std::int64_t> send_start(sends.size(), 0), recv_start(recvs.size(), 0);
  ExchangeHooks probed;
  probed.send_posted = [&](std::size_t i) {
    send_start[i] = probes::now_ns();
    if (hooks.send_posted) hooks.send_posted(i);
  };
  probed.send_done = [&](std::size_t i) {
    record("send", nbytes(sends[i].tensor), comm_dtype_name(sends[i].tensor.scalar_type()), send_start[i]);
    if (hooks.send_done) hooks.send_done(i);
  };
  probed.recv_posted = [&](std::size_t i) {
    recv_start[i] = probes::now_ns();
    if (hooks.recv_posted) hooks.recv_posted(i);
  };
  probed.recv_done = [&](std::size_t i) {
    record("recv", nbytes(recvs[i].tensor), comm_dtype_name(recvs[i].tensor.scalar_type()), recv_start[i]);
    if (hooks.recv_done) hooks.recv_done(i);
  };
  const ObservedCollective observed("comm/exchange", probes::now_ns());
  inner_->exchange(sends, recvs, probed);
}

}  // namespace hs::trainer
