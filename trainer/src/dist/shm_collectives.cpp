// shm_collectives.cpp — see shm_collectives.h.
#include "dist/shm_collectives.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/torch.h>


namespace hs::trainer::detail {

namespace {

// One rank's header, a cache line of its own: its sequence number (the last call it posted) and
// its pid (to tell a dead peer from a slow one).
struct alignas(64) RankHeader {
  std::atomic<std::uint64_t> seq;
  std::int32_t pid;
};
static_assert(std::atomic<std::uint64_t>::is_always_lock_free, "shared-memory flags need lock-free 64-bit atomics");

constexpr std::size_t kAlign = 64;

std::size_t round_up(std::size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// A counter of a mailbox, on a cache line of its own (one side writes it, the other polls it).
struct alignas(64) Counter {
  std::atomic<std::uint64_t> value;
};

// The head of each mailbox chunk: the whole stream's bytes (for the receiver's check) and this
// chunk's.
struct alignas(64) ChunkHeader {
  std::int64_t stream_bytes;
  std::int64_t bytes;
};

constexpr std::int64_t kMinChunkBytes = 4096;

std::int64_t chunk_bytes_for(int size, std::int64_t slot_bytes) {
  if (size < 2) return kMinChunkBytes;
  const std::int64_t share = slot_bytes / (2 * (size - 1)) / static_cast<std::int64_t>(kAlign) *
                             static_cast<std::int64_t>(kAlign);
  return std::max(kMinChunkBytes, share);
}

std::size_t pairs(int size) { return static_cast<std::size_t>(size) * static_cast<std::size_t>(size - 1); }

// The segment: the ranks' headers, their slots, then the mailboxes (from this offset on).
std::size_t mailboxes_offset(int size, std::int64_t slot_bytes) {
  return static_cast<std::size_t>(size) * sizeof(RankHeader) +
         2 * static_cast<std::size_t>(size) * round_up(static_cast<std::size_t>(slot_bytes));
}

std::size_t segment_bytes(int size, std::int64_t slot_bytes) {
  return mailboxes_offset(size, slot_bytes) +
         pairs(size) * (2 * sizeof(Counter) + 2 * static_cast<std::size_t>(chunk_bytes_for(size, slot_bytes)));
}

std::vector<std::uint8_t> bytes_of(const std::string& s) { return {s.begin(), s.end()}; }
std::string string_of(const std::vector<std::uint8_t>& b) { return {b.begin(), b.end()}; }

// A process that has exited: gone, or a zombie its parent has not reaped yet.
bool exited(pid_t pid) {
  if (::kill(pid, 0) != 0) return errno == ESRCH;
  std::ifstream stat(fmt::format("/proc/{}/stat", pid));
  std::string line;
  if (!std::getline(stat, line)) return false;
  const auto close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && (line[close + 2] == 'Z' || line[close + 2] == 'X');
}

// Rank 0's segment: made, sized and backed (posix_fallocate: a full /dev/shm fails here, not as a
// SIGBUS at the first write), mapped. The name is left for the others to open.
void* make_segment(const std::string& name, std::size_t bytes, std::string& why) {
  const int fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) {
    why = fmt::format("shm_open({}): {}", name, std::strerror(errno));
    return nullptr;
  }
  void* base = MAP_FAILED;
  if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    why = fmt::format("ftruncate({}, {} bytes): {}", name, bytes, std::strerror(errno));
  } else if (const int rc = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes)); rc != 0) {
    why = fmt::format("reserving {} bytes in /dev/shm for {}: {}", bytes, name, std::strerror(rc));
  } else {
    base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) why = fmt::format("mmap({}): {}", name, std::strerror(errno));
  }
  ::close(fd);
  if (base == MAP_FAILED) {
    ::shm_unlink(name.c_str());
    return nullptr;
  }
  return base;
}

void* open_segment(const std::string& name, std::size_t bytes, std::string& why) {
  const int fd = ::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) {
    why = fmt::format("shm_open({}): {}", name, std::strerror(errno));
    return nullptr;
  }
  void* base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) why = fmt::format("mmap({}): {}", name, std::strerror(errno));
  ::close(fd);
  return base == MAP_FAILED ? nullptr : base;
}

}  // namespace

std::unique_ptr<ShmCollectives> ShmCollectives::create(c10d::Store& store, int rank, int size, std::int64_t slot_bytes,
                                                       std::chrono::milliseconds timeout, std::string& why) {
  const std::size_t bytes = segment_bytes(size, slot_bytes);
  void* base = nullptr;
  std::string name;
  if (rank == 0) {
    std::random_device entropy;
    name = fmt::format("/hybridscope-{}-{:08x}", ::getpid(), entropy());
    base = make_segment(name, bytes, why);
    store.set("shm/name", bytes_of(base ? name : std::string()));
  } else {
    name = string_of(store.get("shm/name"));
    if (name.empty())
      why = "rank 0 could not make the segment";
    else
      base = open_segment(name, bytes, why);
  }
  if (base) {
    auto* header = static_cast<RankHeader*>(base);
    header[rank].pid = static_cast<std::int32_t>(::getpid());
  }
  store.set(fmt::format("shm/ok/{}", rank), bytes_of(base ? "1" : why));
  bool all = base != nullptr;
  for (int r = 0; r < size; ++r) {
    const std::string answer = string_of(store.get(fmt::format("shm/ok/{}", r)));
    if (answer != "1") {
      if (all || why.empty()) why = fmt::format("rank {}: {}", r, answer);
      all = false;
    }
  }
  // Every rank has opened the segment (or given up): the name is no longer needed.
  if (rank == 0 && !name.empty()) ::shm_unlink(name.c_str());
  if (!all) {
    if (base) ::munmap(base, bytes);
    return nullptr;
  }
  return std::unique_ptr<ShmCollectives>(
      new ShmCollectives(base, bytes, rank, size, slot_bytes, timeout));
}

ShmCollectives::ShmCollectives(void* base, std::size_t mapped, int rank, int size, std::int64_t slot_bytes,
                               std::chrono::milliseconds timeout)
    : base_(base),
      mapped_(mapped),
      rank_(rank),
      size_(size),
      slot_bytes_(slot_bytes),
      chunk_bytes_(chunk_bytes_for(size, slot_bytes)),
      timeout_(timeout) {}

ShmCollectives::~ShmCollectives() { ::munmap(base_, mapped_); }

char* ShmCollectives::slot(int buffer, int rank) const noexcept {
  const std::size_t offset = static_cast<std::size_t>(size_) * sizeof(RankHeader) +
                             (static_cast<std::size_t>(buffer) * static_cast<std::size_t>(size_) +
                              static_cast<std::size_t>(rank)) *
                                 round_up(static_cast<std::size_t>(slot_bytes_));
  return static_cast<char*>(base_) + offset;
}

struct ShmCollectives::Mailbox {
  Counter written;  // chunks the sender has filled, ever
  Counter read;     // chunks the receiver has copied out, ever
};
static_assert(sizeof(Counter) == kAlign && sizeof(ChunkHeader) == kAlign, "mailbox lines are one cache line each");

// The mailboxes follow the slots: every ordered pair's counters, then every pair's two chunks.
std::size_t ShmCollectives::pair_index(int from, int to) const noexcept {
  return static_cast<std::size_t>(from) * static_cast<std::size_t>(size_ - 1) +
         static_cast<std::size_t>(to < from ? to : to - 1);
}

char* ShmCollectives::mailboxes() const noexcept {
  return static_cast<char*>(base_) + mailboxes_offset(size_, slot_bytes_);
}

ShmCollectives::Mailbox& ShmCollectives::mailbox(int from, int to) const noexcept {
  return reinterpret_cast<Mailbox*>(mailboxes())[pair_index(from, to)];
}

char* ShmCollectives::chunk(int from, int to, std::uint64_t index) const noexcept {
  return mailboxes() + pairs(size_) * sizeof(Mailbox) +
         (pair_index(from, to) * 2 + static_cast<std::size_t>(index & 1)) * static_cast<std::size_t>(chunk_bytes_);
}

void ShmCollectives::check_peer(int peer, std::chrono::steady_clock::time_point since, const std::string& exited_when,
                                const std::string& late) const {
  const pid_t pid = static_cast<RankHeader*>(base_)[peer].pid;
  if (exited(pid))
    throw std::runtime_error(fmt::format("shared memory: rank {} (pid {}) exited {}", peer, pid, exited_when));
  if (std::chrono::steady_clock::now() - since > timeout_)
    throw std::runtime_error(fmt::format("shared memory: rank {} (pid {}) {} in time", peer, pid, late));
}

void reduce_into(at::Tensor& acc, const at::Tensor& next, ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg: acc.add_(next); break;  // the caller divides once, after the last
    case ReduceOp::kMax: at::maximum_out(acc, acc, next); break;
    case ReduceOp::kMin: at::minimum_out(acc, acc, next); break;
  }
}

int ShmCollectives::post_and_wait(const void* data, std::size_t bytes, const char* op) {
  const std::uint64_t call = ++calls_;
  const int buffer = static_cast<int>(call & 1);
  auto* header = static_cast<RankHeader*>(base_);
  if (bytes > 0) std::memcpy(slot(buffer, rank_), data, bytes);
  header[rank_].seq.store(call, std::memory_order_release);
  const auto start = std::chrono::steady_clock::now();
  for (int peer = 0; peer < size_; ++peer) {
    std::uint32_t spins = 0;
    while (header[peer].seq.load(std::memory_order_acquire) < call) {
      // Yield rather than spin hard: where ranks share cores, the peer waited for may be the next
      // one to run here. Every 4096 rounds (a few ms): is the peer still alive, is time up?
      ::sched_yield();
      if ((++spins & 4095) != 0) continue;
      check_peer(peer, start, fmt::format("before joining call {}", call), fmt::format("did not join call {}", call));
    }
  }
  return buffer;
}

void ShmCollectives::all_reduce(at::Tensor& tensor, ReduceOp op) {
  const std::lock_guard<std::mutex> lock(mutex_);
  TORCH_CHECK(tensor.is_cpu() && tensor.is_contiguous() && tensor.nbytes() <= static_cast<std::size_t>(slot_bytes_),
              "shared-memory all_reduce: a contiguous CPU tensor of at most ", slot_bytes_, " bytes");
  const int buffer = post_and_wait(tensor.data_ptr(), tensor.nbytes(), "all_reduce");
  auto view = [&](int r) { return at::from_blob(slot(buffer, r), tensor.sizes(), tensor.options()); };
  tensor.copy_(view(0));
  for (int r = 1; r < size_; ++r) reduce_into(tensor, view(r), op);
  if (op == ReduceOp::kAvg) tensor.div_(size_);
}

at::Tensor ShmCollectives::all_gather(const at::Tensor& input) {
  const std::lock_guard<std::mutex> lock(mutex_);
  TORCH_CHECK(input.is_cpu() && input.is_contiguous() && input.nbytes() <= static_cast<std::size_t>(slot_bytes_),
              "shared-memory all_gather: a contiguous CPU tensor of at most ", slot_bytes_, " bytes");
  const int buffer = post_and_wait(input.data_ptr(), input.nbytes(), "all_gather");
  std::vector<int64_t> shape = input.sizes().vec();
  if (shape.empty()) shape.push_back(1);
  std::vector<int64_t> one = shape;
  shape[0] *= size_;
  at::Tensor out = at::empty(shape, input.options());
  for (int r = 0; r < size_; ++r)
    out.narrow(0, r * one[0], one[0]).copy_(at::from_blob(slot(buffer, r), one, input.options()));
  return out;
}

void ShmCollectives::barrier() {
  const std::lock_guard<std::mutex> lock(mutex_);
  post_and_wait(nullptr, 0, "barrier");
}

namespace {

// One direction of an exchange with one peer: the ops' tensors in list order as one byte stream.
struct Stream {
  int peer = -1;
  std::vector<std::size_t> ops;  // indices into the sends (or the receives)
  std::int64_t total = 0;        // bytes of the stream
  std::int64_t moved = 0;        // bytes through the mailbox so far
  std::uint64_t chunks = 0;      // chunks through the mailbox so far
  std::size_t op = 0;            // the op the next byte belongs to (index into `ops`)
  std::int64_t op_offset = 0;    // bytes of that op already moved
  bool finished() const { return chunks > 0 && moved == total; }
};

std::vector<Stream> streams_of(const std::vector<P2POp>& ops) {
  std::vector<Stream> streams;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    auto it = std::find_if(streams.begin(), streams.end(), [&](const Stream& s) { return s.peer == ops[i].peer; });
    if (it == streams.end()) {
      it = streams.insert(streams.end(), Stream());
      it->peer = ops[i].peer;
    }
    it->ops.push_back(i);
    it->total += static_cast<std::int64_t>(ops[i].tensor.nbytes());
  }
  return streams;
}

// Moves the next `bytes` of `s` between `buffer` and its ops' tensors (to_buffer: a send's fill,
// else a receive's copy out) and appends to `completed` every op now complete (zero-byte ops
// included as they are reached).
void move_bytes(Stream& s, const std::vector<P2POp>& ops, char* buffer, std::int64_t bytes, bool to_buffer,
                std::vector<std::size_t>& completed) {
  std::int64_t at = 0;
  auto finish_empty = [&] {
    while (s.op < s.ops.size() && s.op_offset == static_cast<std::int64_t>(ops[s.ops[s.op]].tensor.nbytes())) {
      completed.push_back(s.ops[s.op]);
      ++s.op;
      s.op_offset = 0;
    }
  };
  finish_empty();
  while (at < bytes) {
    const at::Tensor& t = ops[s.ops[s.op]].tensor;
    const std::int64_t count = std::min(bytes - at, static_cast<std::int64_t>(t.nbytes()) - s.op_offset);
    char* data = static_cast<char*>(t.data_ptr()) + s.op_offset;
    if (to_buffer)
      std::memcpy(buffer + at, data, static_cast<std::size_t>(count));
    else
      std::memcpy(data, buffer + at, static_cast<std::size_t>(count));
    at += count;
    s.op_offset += count;
    finish_empty();
  }
  s.moved += bytes;
  ++s.chunks;
}

}  // namespace

void ShmCollectives::exchange(const std::vector<P2POp>& sends, const std::vector<P2POp>& recvs,
                              const ExchangeHooks& hooks) {
  const std::lock_guard<std::mutex> lock(exchange_mutex_);
  for (const auto* list : {&sends, &recvs})
    for (const P2POp& op : *list)
      TORCH_CHECK(op.tensor.is_cpu() && op.tensor.is_contiguous() && op.peer >= 0 && op.peer < size_ &&
                      op.peer != rank_,
                  "shared-memory exchange: contiguous CPU tensors and peers other ranks of the group");
  std::vector<Stream> out = streams_of(sends), in = streams_of(recvs);
  for (std::size_t i = 0; i < recvs.size(); ++i)
    if (hooks.recv_posted) hooks.recv_posted(i);
  for (std::size_t i = 0; i < sends.size(); ++i)
    if (hooks.send_posted) hooks.send_posted(i);
  const std::int64_t payload = chunk_bytes_ - static_cast<std::int64_t>(sizeof(ChunkHeader));
  std::vector<std::size_t> completed;
  auto last_progress = std::chrono::steady_clock::now();
  std::uint32_t idle = 0;
  for (;;) {
    bool moved = false, open = false;
    for (Stream& s : out) {
      if (s.finished()) continue;
      open = true;
      Mailbox& box = mailbox(rank_, s.peer);
      const std::uint64_t written = box.written.value.load(std::memory_order_relaxed);  // only this rank writes it
      if (written - box.read.value.load(std::memory_order_acquire) >= 2) continue;  // both buffers unread
      char* buffer = chunk(rank_, s.peer, written);
      auto* head = reinterpret_cast<ChunkHeader*>(buffer);
      const std::int64_t bytes = std::min(payload, s.total - s.moved);
      head->stream_bytes = s.total;
      head->bytes = bytes;
      completed.clear();
      move_bytes(s, sends, buffer + sizeof(ChunkHeader), bytes, true, completed);
      box.written.value.store(written + 1, std::memory_order_release);
      for (const std::size_t i : completed)
        if (hooks.send_done) hooks.send_done(i);
      moved = true;
    }
    for (Stream& s : in) {
      if (s.finished()) continue;
      open = true;
      Mailbox& box = mailbox(s.peer, rank_);
      const std::uint64_t read = box.read.value.load(std::memory_order_relaxed);  // only this rank writes it
      if (box.written.value.load(std::memory_order_acquire) <= read) continue;
      char* buffer = chunk(s.peer, rank_, read);
      const auto* head = reinterpret_cast<const ChunkHeader*>(buffer);
      if (head->stream_bytes != s.total || head->bytes < 0 || head->bytes > payload ||
          head->bytes > s.total - s.moved)
        throw std::runtime_error(fmt::format(
            "shared memory: rank {} sends {} bytes to rank {}, whose receives from it add up to {} (an exchange's "
            "receives from a peer must match that peer's sends to it, in order and size)",
            s.peer, head->stream_bytes, rank_, s.total));
      completed.clear();
      move_bytes(s, recvs, buffer + sizeof(ChunkHeader), head->bytes, false, completed);
      box.read.value.store(read + 1, std::memory_order_release);
      for (const std::size_t i : completed)
        if (hooks.recv_done) hooks.recv_done(i);
      moved = true;
    }
    if (!open) return;
    if (moved) {
      last_progress = std::chrono::steady_clock::now();
      idle = 0;
      continue;
    }
    // Nothing could move: a peer has not written yet, or has not read. Yield the core (the peer
    // may be the next to run here); every 4096 rounds, is every peer still there, is time up?
    ::sched_yield();
    if ((++idle & 4095) != 0) continue;
    for (const auto* streams : {&out, &in})
      for (const Stream& s : *streams)
        if (!s.finished()) check_peer(s.peer, last_progress, "during an exchange", "moved nothing of an exchange");
  }
}

}  // namespace hs::trainer::detail
