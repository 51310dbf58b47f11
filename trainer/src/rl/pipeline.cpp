// pipeline.cpp — the 1F1B schedule and the stage-to-stage forward of a staged Transformer (see
// pipeline.h).
#include "hybridscope/trainer/rl/pipeline.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>

#include <c10/core/DeviceGuard.h>
#include <torch/torch.h>

#include "hybridscope/probes/range.h"
#include "hybridscope/trainer/model/device.h"
#include "hybridscope/trainer/rl/ppo_workers.h"

namespace hs::trainer {

namespace {

// Sends to one peer, in posting order, on a thread of its own: the schedule goes on computing
// while the peer has not yet posted the matching recv. flush() waits until every posted tensor
// was sent and rethrows a send's error.
class AsyncSender {
 public:
  AsyncSender(Communicator& comm, int peer) : comm_(comm), peer_(peer), thread_([this] { run(); }) {}
  AsyncSender(const AsyncSender&) = delete;
  AsyncSender& operator=(const AsyncSender&) = delete;
  ~AsyncSender() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  void post(torch::Tensor tensor) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      queue_.push_back(std::move(tensor));
    }
    cv_.notify_all();
  }

  void flush() {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return (queue_.empty() && !busy_) || error_; });
    if (error_) std::rethrow_exception(error_);
  }

 private:
  void run() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (true) {
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stop_ and nothing left
      auto tensor = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
      lock.unlock();
      try {
        // A new thread's current CUDA device is 0; NCCL sends on the current device's stream.
        c10::OptionalDeviceGuard device;
        if (tensor.is_cuda()) device.reset_device(tensor.device());
        comm_.send(tensor, peer_);
      } catch (...) {
        lock.lock();
        error_ = std::current_exception();
        queue_.clear();
        busy_ = false;
        cv_.notify_all();
        return;
      }
      lock.lock();
      busy_ = false;
      cv_.notify_all();
    }
  }

  Communicator& comm_;
  int peer_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<torch::Tensor> queue_;
  bool busy_ = false;
  bool stop_ = false;
  std::exception_ptr error_;
  std::thread thread_;  // last: starts after the members it uses
};

// The pp neighbours of this stage and the shapes of what passes between them.
struct StageLinks {
  Communicator& pp;
  int stage, stages;
  torch::TensorOptions activation;  // the model's dtype and device
  std::int64_t hidden;
  std::optional<AsyncSender> to_next, to_prev;

  explicit StageLinks(Transformer& model)
      : pp(*model->parallel().pp), stage(pp.rank()), stages(pp.size()), hidden(model->shape().hidden_size) {
    const auto params = model->parameters();
    TORCH_CHECK(!params.empty(), "pipeline: stage ", stage, " holds no parameters");
    activation = params.front().options().requires_grad(false);
    if (stage + 1 < stages) to_next.emplace(pp, stage + 1);
    if (stage > 0) to_prev.emplace(pp, stage - 1);
  }
  bool first() const { return stage == 0; }
  bool last() const { return stage == stages - 1; }
  // (B, T, C) activations of micro-batch `ub` from the previous stage.
  torch::Tensor recv_activation(const RolloutBatch& ub) {
    auto t = torch::empty({ub.input_ids.size(0), ub.input_ids.size(1), hidden}, activation);
    pp.recv(t, stage - 1);
    return t;
  }
  torch::Tensor recv_gradient(const torch::Tensor& output) {
    auto t = torch::empty_like(output, activation);
    pp.recv(t, stage + 1);
    return t;
  }
  void flush() {
    if (to_next) to_next->flush();
    if (to_prev) to_prev->flush();
  }
};

// Stage input of micro-batch `ub`: its token ids on the first stage, the previous stage's
// activations otherwise.
torch::Tensor stage_input(StageLinks& links, const RolloutBatch& ub) {
  return links.first() ? ub.input_ids : links.recv_activation(ub);
}

}  // namespace

std::vector<PipelineOp> one_f_one_b_order(int stages, int stage, int micro_batches) {
  if (stages < 1 || stage < 0 || stage >= stages || micro_batches < 0) {
    throw std::invalid_argument("one_f_one_b_order: stage " + std::to_string(stage) + " of " +
                                std::to_string(stages) + " with " + std::to_string(micro_batches) +
                                " micro-batches is not a pipeline position");
  }
  const int warmup = std::min(stages - stage - 1, micro_batches);
  std::vector<PipelineOp> ops;
  for (int m = 0; m < warmup; ++m) ops.push_back({PipelineOp::Kind::kForward, m});
  for (int i = 0; i < micro_batches - warmup; ++i) {
    ops.push_back({PipelineOp::Kind::kForward, warmup + i});
    ops.push_back({PipelineOp::Kind::kBackward, i});
  }
  for (int m = micro_batches - warmup; m < micro_batches; ++m) ops.push_back({PipelineOp::Kind::kBackward, m});
  return ops;
}

void pipeline_forward(Transformer& model, const std::vector<RolloutBatch>& micro_batches,
                      const StageOutputFn& on_output, LmOutput lm_output) {
  torch::NoGradGuard no_grad;
  if (model->parallel().pp->size() == 1) {
    for (std::size_t m = 0; m < micro_batches.size(); ++m) {
      const auto& ub = micro_batches[m];
      on_output(m, model->forward(ub.input_ids, ub.attention_mask, ub.position_ids, lm_output));
    }
    return;
  }
  StageLinks links(model);
  for (std::size_t m = 0; m < micro_batches.size(); ++m) {
    const auto& ub = micro_batches[m];
    auto output = model->forward(stage_input(links, ub), ub.attention_mask, ub.position_ids, lm_output);
    if (links.last()) {
      on_output(m, output);
    } else {
      links.to_next->post(output.contiguous());
    }
  }
  links.flush();
}

void pipeline_forward_backward(Transformer& model, const std::vector<RolloutBatch>& micro_batches,
                               const StageOutputFn& loss_of, std::vector<PipelineOp>* trace, LmOutput lm_output) {
  const int count = static_cast<int>(micro_batches.size());
  if (model->parallel().pp->size() == 1) {
    // One stage: forward and backward per micro-batch, the order one_f_one_b_order(1, 0, m) gives.
    for (int m = 0; m < count; ++m) {
      const auto& ub = micro_batches[static_cast<std::size_t>(m)];
      if (trace) trace->push_back({PipelineOp::Kind::kForward, m});
      torch::Tensor loss;
      {
        HS_PROBE_TRACE_RANGE_ARGS(probes::thread_timings(), "micro_batch/forward", kPhase, ub.size(),
                                  ub.input_ids.size(1));
        loss = loss_of(static_cast<std::size_t>(m),
                       model->forward(ub.input_ids, ub.attention_mask, ub.position_ids, lm_output));
      }
      {
        HS_PROBE_TRACE_RANGE_ARGS(probes::thread_timings(), "micro_batch/backward", kPhase, ub.size(),
                                  ub.input_ids.size(1));
        loss.backward();
      }
      if (trace) trace->push_back({PipelineOp::Kind::kBackward, m});
    }
    return;
  }
  StageLinks links(model);
  // What a forward keeps for its backward: the stage input (a leaf whose gradient goes to the
  // previous stage) and the stage output (its loss on the last stage).
  struct InFlight {
    torch::Tensor input, output;
  };
  std::vector<InFlight> in_flight(static_cast<std::size_t>(count));
  for (const auto& op : one_f_one_b_order(links.stages, links.stage, count)) {
    const auto m = static_cast<std::size_t>(op.micro);
    const auto& ub = micro_batches[m];
    auto& state = in_flight[m];
    if (op.kind == PipelineOp::Kind::kForward) {
      HS_PROBE_TRACE_RANGE_ARGS(probes::thread_timings(), "micro_batch/forward", kPhase, ub.size(),
                                ub.input_ids.size(1));
      state.input = stage_input(links, ub);
      if (!links.first()) state.input.requires_grad_(true);
      auto output = model->forward(state.input, ub.attention_mask, ub.position_ids, lm_output);
      if (links.last()) {
        state.output = loss_of(m, output);
      } else {
        links.to_next->post(output.detach().contiguous());
        state.output = std::move(output);
      }
    } else {
      HS_PROBE_TRACE_RANGE_ARGS(probes::thread_timings(), "micro_batch/backward", kPhase, ub.size(),
                                ub.input_ids.size(1));
      if (links.last()) {
        state.output.backward();
      } else {
        auto grad = links.recv_gradient(state.output);
        torch::autograd::backward({state.output}, {grad});
      }
      if (!links.first()) links.to_prev->post(state.input.grad().contiguous());
      state = InFlight{};  // frees the activations of this micro-batch
    }
    if (trace) trace->push_back(op);
  }
  links.flush();
}

torch::Tensor micro_batched_log_probs(Transformer& model, const RolloutBatch& batch, std::int64_t micro,
                                      double temperature) {
  torch::NoGradGuard no_grad;
  // Each micro-batch on the model's device; the log-probs come back to the batch's (device.h).
  const auto device = module_device(*model);
  std::vector<RolloutBatch> micro_batches;
  for (const auto& rows : split_rows(batch.size(), micro)) micro_batches.push_back(batch.select(rows).to(device));
  std::vector<torch::Tensor> parts(micro_batches.size());
  pipeline_forward(
      model, micro_batches,
      [&](std::size_t m, const torch::Tensor& hidden) {
        parts[m] = response_log_probs_of_hidden(model, hidden, micro_batches[m], temperature, false).first;
        return torch::Tensor();
      },
      LmOutput::kHidden);
  auto& pp = *model->parallel().pp;
  if (pp.size() == 1) return torch::cat(parts, 0).to(batch.responses.device());
  const int root = pp.size() - 1;
  torch::Tensor out;
  if (pp.rank() == root) {
    out = torch::cat(parts, 0).contiguous();
  } else {
    out = torch::empty({batch.size(), batch.response_length()},
                       model->parameters().front().options().requires_grad(false));
  }
  pp.broadcast(out, root);
  return out.to(batch.responses.device());
}

void broadcast_metrics(Metrics& metrics, Communicator& group, int root) {
  if (group.size() == 1) return;
  // Names as one '\n'-joined byte string, values as float64: sizes first so every rank can
  // allocate the receive buffers.
  std::string names;
  for (const auto& [name, value] : metrics) names += name + '\n';
  auto sizes = torch::tensor({static_cast<std::int64_t>(names.size()), static_cast<std::int64_t>(metrics.size())});
  group.broadcast(sizes, root);
  auto name_bytes = torch::zeros({sizes[0].item<std::int64_t>()}, torch::kUInt8);
  auto values = torch::zeros({sizes[1].item<std::int64_t>()}, torch::kFloat64);
  if (group.rank() == root) {
    std::copy(names.begin(), names.end(), name_bytes.data_ptr<std::uint8_t>());
    for (std::size_t i = 0; i < metrics.size(); ++i) values[static_cast<std::int64_t>(i)] = metrics[i].second;
  }
  group.broadcast(name_bytes, root);
  group.broadcast(values, root);
  if (group.rank() == root) return;
  const auto* bytes = name_bytes.data_ptr<std::uint8_t>();
  const std::string joined(bytes, bytes + name_bytes.numel());
  metrics.clear();
  std::size_t start = 0;
  const auto* v = values.data_ptr<double>();
  for (std::int64_t i = 0; i < values.numel(); ++i) {
    const auto end = joined.find('\n', start);
    metrics.emplace_back(joined.substr(start, end - start), v[i]);
    start = end + 1;
  }
}

}  // namespace hs::trainer
