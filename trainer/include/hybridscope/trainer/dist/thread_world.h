// thread_world.h — in-process ranks: a Communicator and a GroupFactory over threads of one process
// (no sockets), so layouts, tensor parallelism and resharding can be tested and benchmarked with
// exact data movement and the real probe (tests/trainer and bench/micro/reshard_bench.cpp). Not a
// c10d replacement: every collective is an exchange of whole tensors under one mutex; send is
// buffered (never blocks).
#pragma once

#include <torch/torch.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "hybridscope/trainer/dist/parallel.h"

namespace hs::trainer {

// The ranks of one group meet here; every collective is an exchange of one tensor per rank, every
// send a message in the (from, to) mailbox.
class ThreadGroup {
 public:
  explicit ThreadGroup(int size) : size_(size), deposits_(static_cast<std::size_t>(size)) {}
  int size() const { return size_; }
  std::vector<torch::Tensor> exchange(int rank, torch::Tensor t) {
    std::unique_lock<std::mutex> lock(mutex_);
    const auto generation = generation_;
    deposits_[static_cast<std::size_t>(rank)] = std::move(t);
    if (++arrived_ == size_) {
      result_ = deposits_;
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
    } else if (!cv_.wait_for(lock, std::chrono::seconds(60), [&] { return generation_ != generation; })) {
      throw std::runtime_error("ThreadGroup: a rank never arrived");
    }
    return result_;
  }
  void post(int from, int to, torch::Tensor t) {
    std::lock_guard<std::mutex> lock(mutex_);
    mailboxes_[{from, to}].push_back(std::move(t));
    cv_.notify_all();
  }
  torch::Tensor take(int from, int to) {
    std::unique_lock<std::mutex> lock(mutex_);
    auto& box = mailboxes_[{from, to}];
    if (!cv_.wait_for(lock, std::chrono::seconds(60), [&] { return !box.empty(); })) {
      throw std::runtime_error("ThreadGroup: rank " + std::to_string(to) + " waited 60 s for a message from " +
                               std::to_string(from));
    }
    auto t = std::move(box.front());
    box.pop_front();
    return t;
  }

 private:
  int size_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<torch::Tensor> deposits_, result_;
  int arrived_ = 0;
  std::uint64_t generation_ = 0;
  std::map<std::pair<int, int>, std::deque<torch::Tensor>> mailboxes_;
};

class ThreadCommunicator final : public Communicator {
 public:
  ThreadCommunicator(int rank, std::shared_ptr<ThreadGroup> group, std::string name)
      : rank_(rank), group_(std::move(group)), name_(std::move(name)) {}
  int rank() const override { return rank_; }
  int size() const override { return group_->size(); }
  std::string name() const override { return name_; }
  void all_reduce(at::Tensor& tensor, ReduceOp op) override {
    auto all = group_->exchange(rank_, tensor.clone());
    auto r = all[0].clone();
    for (std::size_t i = 1; i < all.size(); ++i) {
      if (op == ReduceOp::kMax) r = torch::maximum(r, all[i]);
      else if (op == ReduceOp::kMin) r = torch::minimum(r, all[i]);
      else r += all[i];
    }
    if (op == ReduceOp::kAvg) r /= static_cast<double>(all.size());
    tensor.copy_(r);
  }
  at::Tensor all_gather(const at::Tensor& input) override {
    return torch::cat(group_->exchange(rank_, input.contiguous()), 0);
  }
  at::Tensor reduce_scatter(const at::Tensor& input, ReduceOp op) override {
    auto full = input.clone();
    all_reduce(full, op);
    return full.chunk(size(), 0)[static_cast<std::size_t>(rank_)].contiguous();
  }
  void broadcast(at::Tensor& tensor, int root) override {
    auto all = group_->exchange(rank_, tensor.clone());
    tensor.copy_(all[static_cast<std::size_t>(root)]);
  }
  void send(const at::Tensor& tensor, int peer) override { group_->post(rank_, peer, tensor.clone()); }
  void recv(at::Tensor& tensor, int peer) override {
    auto t = group_->take(peer, rank_);
    if (t.sizes() != tensor.sizes() || t.scalar_type() != tensor.scalar_type()) {
      throw std::runtime_error("ThreadCommunicator::recv: rank " + std::to_string(peer) + " sent a tensor of another shape or dtype");
    }
    tensor.copy_(t);
  }
  void barrier() override { group_->exchange(rank_, torch::Tensor()); }

 private:
  int rank_;
  std::shared_ptr<ThreadGroup> group_;
  std::string name_;
};

// The groups of one thread world, shared by its ranks: the k-th new_group call of every rank
// names the same group (c10d's rule that every rank creates every group in the same order).
class ThreadWorld {
 public:
  explicit ThreadWorld(int size) : size_(size), world_(std::make_shared<ThreadGroup>(size)) {}
  int size() const { return size_; }
  const std::shared_ptr<ThreadGroup>& world_group() const { return world_; }
  std::shared_ptr<ThreadGroup> group(std::size_t index, const std::vector<int>& ranks) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (groups_.size() <= index) groups_.resize(index + 1);
    auto& g = groups_[index];
    if (!g.second) {
      g = {ranks, std::make_shared<ThreadGroup>(static_cast<int>(ranks.size()))};
    } else if (g.first != ranks) {
      throw std::logic_error("ThreadWorld: ranks created group " + std::to_string(index) + " with different members");
    }
    return g.second;
  }

 private:
  int size_;
  std::shared_ptr<ThreadGroup> world_;
  std::mutex mutex_;
  std::vector<std::pair<std::vector<int>, std::shared_ptr<ThreadGroup>>> groups_;
};

class ThreadGroupFactory final : public GroupFactory {
 public:
  ThreadGroupFactory(int rank, std::shared_ptr<ThreadWorld> world) : rank_(rank), world_(std::move(world)) {}
  std::shared_ptr<Communicator> world() override {
    return std::make_shared<ThreadCommunicator>(rank_, world_->world_group(), "world");
  }
  std::shared_ptr<Communicator> new_group(const std::vector<int>& ranks, const std::string& name) override {
    auto group = world_->group(created_++, ranks);
    for (std::size_t i = 0; i < ranks.size(); ++i) {
      if (ranks[i] == rank_) return std::make_shared<ThreadCommunicator>(static_cast<int>(i), group, name);
    }
    return nullptr;
  }

 private:
  int rank_;
  std::shared_ptr<ThreadWorld> world_;
  std::size_t created_ = 0;
};

// Runs fn(rank, factory) on `size` threads (one torch thread each) and rethrows the first error.
inline void run_thread_ranks(int size, const std::function<void(int, GroupFactory&)>& fn) {
  auto world = std::make_shared<ThreadWorld>(size);
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(size));
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      try {
        torch::set_num_threads(1);
        ThreadGroupFactory factory(r, world);
        fn(r, factory);
      } catch (...) {
        errors[static_cast<std::size_t>(r)] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

}  // namespace hs::trainer
