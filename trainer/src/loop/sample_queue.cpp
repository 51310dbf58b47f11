// sample_queue.cpp — SampleQueue over a c10d::TCPStore client (see sample_queue.h).
#include "loop/sample_queue.h"

#include <stdexcept>
#include <string>

#include <fmt/format.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

namespace hs::trainer {

namespace {
constexpr const char* kPrefix = "hs/fully_async/";
constexpr const char* kPut = "put";
constexpr const char* kTaken = "taken";
constexpr const char* kSyncs = "sync_requests";
std::string sample_key(std::int64_t index) { return fmt::format("sample/{}", index); }
}  // namespace

struct SampleQueue::Impl {
  c10::intrusive_ptr<c10d::Store> store;
};

SampleQueue::SampleQueue(const DistEnv& env, std::chrono::milliseconds timeout) : impl_(std::make_unique<Impl>()) {
  c10d::TCPStoreOptions options;
  options.port = static_cast<std::uint16_t>(env.master_port);
  options.isServer = false;  // rank 0 (or the launcher's agent) serves it since the rendezvous
  options.waitWorkers = false;
  options.timeout = timeout;
  c10::intrusive_ptr<c10d::Store> store = c10::make_intrusive<c10d::TCPStore>(env.master_addr, options);
  if (!env.store_prefix.empty()) store = c10::make_intrusive<c10d::PrefixStore>(env.store_prefix, store);
  impl_->store = c10::make_intrusive<c10d::PrefixStore>(kPrefix, store);
}

SampleQueue::~SampleQueue() = default;

void SampleQueue::put(std::int64_t index, const std::vector<std::uint8_t>& bytes) {
  impl_->store->set(sample_key(index), bytes);
  impl_->store->add(kPut, 1);
}

std::vector<std::uint8_t> SampleQueue::take(std::int64_t index) {
  const std::string key = sample_key(index);
  std::vector<std::uint8_t> bytes;
  try {
    bytes = impl_->store->get(key);  // waits for the key
  } catch (const std::exception& e) {
    throw std::runtime_error(fmt::format(
        "fully_async: sample {} never reached the queue ({}): a rollout rank stopped or is slower than "
        "hybridscope.dist.timeout_s allows per prompt group — its log says which; raise hybridscope.dist.timeout_s "
        "if it is only slow", index, e.what()));
  }
  impl_->store->deleteKey(key);
  impl_->store->add(kTaken, 1);
  return bytes;
}

std::int64_t SampleQueue::depth() { return impl_->store->add(kPut, 0) - impl_->store->add(kTaken, 0); }

std::int64_t SampleQueue::taken() { return impl_->store->add(kTaken, 0); }

void SampleQueue::request_sync() { impl_->store->add(kSyncs, 1); }

std::int64_t SampleQueue::sync_requests() { return impl_->store->add(kSyncs, 0); }

}  // namespace hs::trainer
