// sample_queue.h — the fully_async message queue between the rollout ranks and the actor's rank 0
// (verl's MessageQueue, fully_async_policy/message_queue.py), kept in the run's rendezvous store.
//
// The rollouter and the trainer never wait for each other in a collective, so a sample cannot
// travel by one: the rollout rank puts prompt group k (its bytes) under its own key of c10d's
// TCPStore — the store rank 0 serves for the rendezvous (process_group.h), reached over a client
// connection of this object's own — and the trainer takes the keys in order, each wait bounded
// by hybridscope.dist.timeout_s. Two counters give the depth (put minus taken); a third counts the
// weight syncs the trainer asked for, which the rollouter polls. The weights themselves go by the
// probed broadcast of sync_rollout_weights (rollout_server.h), not through here.
//
// Deliberately free of c10d headers: the store lives in sample_queue.cpp.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "hybridscope/trainer/dist/dist_env.h"

namespace hs::trainer {

class SampleQueue {
 public:
  /// A client of the store `env` names (MASTER_ADDR:MASTER_PORT, the launcher's prefix), every
  /// wait failing after `timeout`.
  SampleQueue(const DistEnv& env, std::chrono::milliseconds timeout);
  ~SampleQueue();
  SampleQueue(const SampleQueue&) = delete;
  SampleQueue& operator=(const SampleQueue&) = delete;

  /// Rollouter: sample `index` (its stream position), then one more in the queue.
  void put(std::int64_t index, const std::vector<std::uint8_t>& bytes);
  /// Trainer: waits for sample `index`, removes it from the store and the queue.
  std::vector<std::uint8_t> take(std::int64_t index);
  /// Samples put and not yet taken; samples taken so far.
  std::int64_t depth();
  std::int64_t taken();
  /// Trainer: asks the rollouter for one more weight sync. Rollouter: the syncs asked for so far.
  void request_sync();
  std::int64_t sync_requests();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hs::trainer
