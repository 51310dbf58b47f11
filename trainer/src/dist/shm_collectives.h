// shm_collectives.h — a process group's small CPU collectives, its barrier and its batched
// point-to-point exchanges through one shared-memory segment, for a group whose ranks all run on
// one host (process_group.cpp uses it in front of Gloo).
//
// Why: a Gloo collective hands its work to a worker thread and its bytes to a transport thread,
// and wakes the caller when done: three sleeping threads to wake per call. On a kernel that does
// not preempt a running task when another wakes (preempt=none with lazy rescheduling, HZ=250: this
// project's 2-core VM), a woken thread queued behind a busy one waits for the next scheduler tick.
// A 2-rank all-reduce of 256 KiB after ~4 ms of compute took 2-4 ms on the mean (0.34 ms at
// best), and tensor-parallel generation on CPU spent a third of its time in them. Here nothing
// sleeps: every rank copies its tensor into its own slot, raises its sequence number and spins
// (yielding the core) until every peer has raised theirs, then reduces or concatenates the slots
// itself, as vLLM's CPU communicator does for tensor-parallel all-reduces (its shm manager).
//
// The segment: per rank a 64-byte header (its sequence number and pid), then two buffers of
// `slot_bytes` per rank, then the exchange's mailboxes (below). Call k writes buffer k mod 2; a
// rank reaches call k only after every rank has posted call k-1, which each does after it has
// read call k-2's buffers, so no buffer is overwritten while read. Every rank reduces the slots in rank order: all ranks get the same bits.
//
// An exchange (Communicator::exchange: the reshard executor's weight switch) goes through
// mailboxes, one per ordered pair of ranks after the slots: two chunk buffers and two counters
// (chunks written, chunks read) on cache lines of their own. A rank's sends to one peer are one
// stream of bytes (its send tensors to that peer, in list order), cut into chunks; the sender
// fills a buffer whenever fewer than two of its chunks are unread, the receiver copies a chunk out
// as soon as it is written. Every rank drives all its streams from one loop that never waits on a
// single peer, so no order of posting can deadlock, and only the ranks an exchange names take
// part (the collectives' sequence numbers are not touched). Each chunk carries its stream's total,
// so a receiver whose receives do not add up to the sender's sends fails at once, naming both.
//
// A peer that exits (its pid gone or a zombie) or never arrives within the timeout fails the call
// with a std::runtime_error naming the rank; the communicator reports it as it reports Gloo's.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "hybridscope/trainer/dist/parallel.h"

namespace c10d {
class Store;
}

namespace hs::trainer::detail {

/// acc = acc op next, elementwise (kAvg sums: the caller divides by the count once, after the last).
/// The one reduction of the shared-memory collectives: all_reduce over the slots, reduce_scatter
/// over the mailboxes (process_group.cpp), both in rank order, so every rank gets the same bits.
void reduce_into(at::Tensor& acc, const at::Tensor& next, ReduceOp op);

class ShmCollectives {
 public:
  /// Collective over the group: every rank calls it at the same point of its program. Rank 0
  /// makes the segment and names it in `store` (the group's own prefix); every rank maps it and
  /// says whether it could; rank 0 then unlinks the name (the mappings keep the memory, a crash
  /// leaves nothing behind in /dev/shm). nullptr on every rank when any rank could not (no
  /// /dev/shm, too little space in it, another user): `why` says what, and the group keeps Gloo.
  static std::unique_ptr<ShmCollectives> create(c10d::Store& store, int rank, int size, std::int64_t slot_bytes,
                                                std::chrono::milliseconds timeout, std::string& why);
  ~ShmCollectives();
  ShmCollectives(const ShmCollectives&) = delete;
  ShmCollectives& operator=(const ShmCollectives&) = delete;

  std::int64_t slot_bytes() const noexcept { return slot_bytes_; }

  /// In place, as c10d's all-reduce: a contiguous CPU tensor of at most slot_bytes(). kAvg is the
  /// sum divided by the group size afterwards (as on Gloo).
  void all_reduce(at::Tensor& tensor, ReduceOp op);
  /// (size·d0, ...) in rank order (a 0-d input gathers as (size,)); the input contiguous, on the
  /// CPU, at most slot_bytes(), the same shape on every rank.
  at::Tensor all_gather(const at::Tensor& input);
  /// Returns once every rank of the group has called it.
  void barrier();
  /// Communicator::exchange's contract (parallel.h) between the ranks it names: contiguous CPU
  /// tensors, peers other ranks of the group; the hooks run on this thread, `*_done(i)` as soon as
  /// op i's last byte is in its mailbox (a send: the tensor may be reused) or out of it (a
  /// receive: the tensor is filled). Any size: streams longer than a chunk take several.
  void exchange(const std::vector<P2POp>& sends, const std::vector<P2POp>& recvs, const ExchangeHooks& hooks);
  /// The bytes of one mailbox chunk (its 64-byte header included): slot_bytes / (2 (size − 1)),
  /// at least 4 KiB, so that the mailboxes add about one slot per rank to the segment.
  std::int64_t chunk_bytes() const noexcept { return chunk_bytes_; }

 private:
  ShmCollectives(void* base, std::size_t mapped, int rank, int size, std::int64_t slot_bytes,
                 std::chrono::milliseconds timeout);
  // Copies `bytes` from `data` into this rank's slot of the next call, posts it and waits for
  // every peer's: the call's buffer index (0 or 1).
  int post_and_wait(const void* data, std::size_t bytes, const char* op);
  char* slot(int buffer, int rank) const noexcept;
  struct Mailbox;
  std::size_t pair_index(int from, int to) const noexcept;  // of the ordered pair (from, to), from != to
  char* mailboxes() const noexcept;                          // where the mailboxes begin in the segment
  Mailbox& mailbox(int from, int to) const noexcept;
  char* chunk(int from, int to, std::uint64_t index) const noexcept;
  // Fails the call when `peer` has exited ("… exited <exited_when>"), or when the timeout has passed
  // since `since` ("… <late> in time").
  void check_peer(int peer, std::chrono::steady_clock::time_point since, const std::string& exited_when,
                  const std::string& late) const;

  void* base_;
  std::size_t mapped_;
  int rank_;
  int size_;
  std::int64_t slot_bytes_;
  std::int64_t chunk_bytes_;
  std::chrono::milliseconds timeout_;
  std::mutex mutex_;  // one call at a time (the sequence numbers are per group, not per thread)
  std::mutex exchange_mutex_;  // one exchange at a time (its streams would interleave)
  std::uint64_t calls_ = 0;
};

}  // namespace hs::trainer::detail
