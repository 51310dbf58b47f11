// probed_communicator.h — the communication probe: a Communicator that forwards every collective
// to the one it wraps and records it (op, group, group size, bytes, dtype, start/end) into the
// run database's `comm_ops` table, where the recorder adds nccl-tests' algbw and busbw.
//
// Bytes follow nccl-tests' convention (the larger of input and output buffer per rank):
//   all_reduce, broadcast: the tensor; all_gather: size × input; reduce_scatter: the input;
//   send, recv: the tensor; barrier: 0.
// Times are probes::now_ns() around the forwarded call, so they measure what the wrapped call
// waits for: complete for Gloo and the single-rank identity; for an asynchronous NCCL backend
// they are enqueue times unless the wrapped communicator synchronizes. The GPU-side duration
// comes from CUPTI: each collective is announced to the range observer (range_observer.h) as
// "comm/<op>" at depth kCollectiveDepth with the row's start_ns, so the collector maps the NCCL
// kernels it launches to it (correlation_ranges; the query is in docs/schema.md).
//
// A batched exchange (Communicator::exchange) is recorded as one row per message.
//
// An asynchronous collective (pending_collective.h: fsdp's prefetched gathers and overlapped
// reduce-scatters) is recorded when it is waited for, as one row from its issue to the moment the
// backend completed it — the transfer — with the return of the call that posted it (posted_ns)
// and the caller's wait for it (wait_start_ns, wait_end_ns) in the row (NULL for a synchronous
// row: its caller blocked throughout); it is announced to
// the range observer while it is posted (when NCCL launches its kernels), with the row's start_ns.
//
// What this is not: a communicator of its own (it never moves data) or a CUPTI NCCL-kernel probe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include <c10/core/ScalarType.h>

#include "hybridscope/probes/recorder.h"
#include "hybridscope/probes/run_probes.h"
#include "hybridscope/trainer/dist/parallel.h"
#include "hybridscope/trainer/dist/pending_collective.h"

namespace hs::trainer {

/// Per collective of the newest run (comm_ops order): op, the number of GPU kernels CUPTI
/// correlated to it, and their summed GPU time in ns (NULL without CUPTI or kernels): the
/// GPU-side duration of each collective. docs/schema.md shows the same query.
inline constexpr const char* kCollectiveGpuTimeSql = R"sql(
SELECT o.value AS op, COUNT(k.correlation_id) AS kernels, SUM(k.end_ns - k.start_ns) AS gpu_ns
FROM comm_ops c JOIN strings o ON o.id = c.op_id
LEFT JOIN strings rn ON rn.value = 'comm/' || o.value
LEFT JOIN correlation_ranges cr ON cr.run_id = c.run_id AND cr.rank = c.rank AND cr.depth = -1
     AND cr.start_ns = c.start_ns AND cr.name_id = rn.id
LEFT JOIN external_correlations e ON e.run_id = cr.run_id AND e.rank = cr.rank AND e.external_id = cr.external_id
LEFT JOIN kernels k ON k.run_id = e.run_id AND k.rank = e.rank AND k.correlation_id = e.correlation_id
WHERE c.run_id = (SELECT MAX(id) FROM runs)
GROUP BY c.rowid ORDER BY c.start_ns, c.rowid
)sql";

/// The dtype name recorded for `type` ("float32", "bfloat16", ...; "other" for the rest). A
/// string literal, as probes::CommRecord requires.
const char* comm_dtype_name(c10::ScalarType type) noexcept;

/// Bytes one rank received in one comm_ops row, from the row's nccl-tests `bytes` and group size
/// n: all_gather (n-1)/n * bytes (the output less the rank's own input); reduce_scatter
/// (n-1)/n * bytes and all_reduce 2(n-1)/n * bytes (ring algorithms, nccl-tests' bus-bandwidth
/// factors); recv bytes; send and barrier 0; broadcast bytes (as for a non-root rank: the row does
/// not name the root, which receives nothing). Throws std::invalid_argument for other ops.
std::int64_t received_bytes(std::string_view op, std::int64_t bytes, int group_size);

class ProbedCommunicator final : public Communicator, public AsyncCollectives {
 public:
  /// The depth a collective is announced at to the range observer (not a range of `ranges`).
  static constexpr int kCollectiveDepth = -1;

  /// `inner` must be non-null. Records through `probes` (which must outlive this object), each
  /// collective under the step `probes` holds then; off (RunProbes::off()): every call only
  /// forwards.
  ProbedCommunicator(std::shared_ptr<Communicator> inner, const probes::RunProbes& probes);

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  std::string name() const override { return inner_->name(); }
  void all_reduce(at::Tensor& tensor, ReduceOp op = ReduceOp::kSum) override;
  at::Tensor all_gather(const at::Tensor& input) override;
  at::Tensor reduce_scatter(const at::Tensor& input, ReduceOp op = ReduceOp::kSum) override;
  void broadcast(at::Tensor& tensor, int root) override;
  void send(const at::Tensor& tensor, int peer) override;
  void recv(at::Tensor& tensor, int peer) override;
  void barrier() override;
  /// Forwards to the wrapped exchange and records one `send` or `recv` row per message: start at
  /// its post, end when the exchange saw it complete (the hooks of ExchangeHooks). Messages run
  /// concurrently, so these rows may overlap; their bytes are exact. The exchange is announced to
  /// the range observer once, as "comm/exchange" with the exchange's start.
  void exchange(const std::vector<P2POp>& sends, const std::vector<P2POp>& recvs,
                const ExchangeHooks& hooks = {}) override;

  /// The wrapped communicator's asynchronous collective (its stand-in when it has none), recorded
  /// at wait() from issue to completion.
  std::unique_ptr<PendingCollective> all_gather_async(const at::Tensor& input) override;
  std::unique_ptr<PendingCollective> reduce_scatter_async(const at::Tensor& input, ReduceOp op) override;

  const std::shared_ptr<Communicator>& inner() const { return inner_; }

 private:
  class ProbedPending;
  // A synchronous collective's row: from start_ns to now, under the current step.
  void record(const char* op, std::int64_t bytes, const char* dtype, std::int64_t start_ns) const noexcept;

  std::shared_ptr<Communicator> inner_;
  const probes::RunProbes* probes_;
  probes::Recorder* recorder_;  // probes_->recorder(): null when off
  const char* group_;  // the inner group's name, interned for the process lifetime
  int group_size_;
};

}  // namespace hs::trainer
