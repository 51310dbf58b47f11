// shm_collectives.cpp — see shm_collectives.h.
#include "dist/shm_collectives.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

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

std::size_t segment_bytes(int size, std::int64_t slot_bytes) {
  return static_cast<std::size_t>(size) * sizeof(RankHeader) +
         2 * static_cast<std::size_t>(size) * round_up(static_cast<std::size_t>(slot_bytes));
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
      timeout_(timeout) {}

ShmCollectives::~ShmCollectives() { ::munmap(base_, mapped_); }

char* ShmCollectives::slot(int buffer, int rank) const noexcept {
  const std::size_t offset = static_cast<std::size_t>(size_) * sizeof(RankHeader) +
                             (static_cast<std::size_t>(buffer) * static_cast<std::size_t>(size_) +
                              static_cast<std::size_t>(rank)) *
                                 round_up(static_cast<std::size_t>(slot_bytes_));
  return static_cast<char*>(base_) + offset;
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
      const pid_t pid = header[peer].pid;
      if (exited(pid))
        throw std::runtime_error(fmt::format("shared memory: rank {} (pid {}) exited before joining call {}", peer, pid,
                                             call));
      if (std::chrono::steady_clock::now() - start > timeout_)
        throw std::runtime_error(fmt::format("shared memory: rank {} (pid {}) did not join call {} in time", peer,
                                             pid, call));
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
  for (int r = 1; r < size_; ++r) {
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg: tensor.add_(view(r)); break;
      case ReduceOp::kMax: at::maximum_out(tensor, tensor, view(r)); break;
      case ReduceOp::kMin: at::minimum_out(tensor, tensor, view(r)); break;
    }
  }
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

}  // namespace hs::trainer::detail
