// parallel.cpp — the one-rank world and the default batched exchange (see parallel.h).
#include "hybridscope/trainer/dist/parallel.h"

#include <stdexcept>

namespace hs::trainer {

void exchange_in_pair_order(Communicator& comm, const std::vector<P2POp>& sends, const std::vector<P2POp>& recvs,
                            const ExchangeHooks& hooks) {
  const int self = comm.rank();
  for (const auto* ops : {&sends, &recvs}) {
    for (const P2POp& op : *ops) {
      if (op.peer < 0 || op.peer >= comm.size() || op.peer == self)
        throw std::invalid_argument("exchange on group '" + comm.name() + "': peer " + std::to_string(op.peer) +
                                    " is not another rank of the group (rank " + std::to_string(self) + " of " +
                                    std::to_string(comm.size()) + ")");
    }
  }
  auto send_to = [&](int peer) {
    for (std::size_t i = 0; i < sends.size(); ++i) {
      if (sends[i].peer != peer) continue;
      if (hooks.send_posted) hooks.send_posted(i);
      comm.send(sends[i].tensor, peer);
      if (hooks.send_done) hooks.send_done(i);
    }
  };
  auto receive_from = [&](int peer) {
    for (std::size_t i = 0; i < recvs.size(); ++i) {
      if (recvs[i].peer != peer) continue;
      if (hooks.recv_posted) hooks.recv_posted(i);
      at::Tensor into = recvs[i].tensor;  // shares the caller's storage
      comm.recv(into, peer);
      if (hooks.recv_done) hooks.recv_done(i);
    }
  };
  // This rank's pairs in the global order: peers ascending; towards a higher peer it is `a`
  // (sends first), towards a lower one `b` (receives first).
  for (int peer = 0; peer < comm.size(); ++peer) {
    if (peer == self) continue;
    if (self < peer) {
      send_to(peer);
      receive_from(peer);
    } else {
      receive_from(peer);
      send_to(peer);
    }
  }
}

void Communicator::exchange(const std::vector<P2POp>& sends, const std::vector<P2POp>& recvs,
                            const ExchangeHooks& hooks) {
  exchange_in_pair_order(*this, sends, recvs, hooks);
}

void SingleRankCommunicator::no_peer(int peer) {
  throw std::logic_error("send/recv with peer " + std::to_string(peer) +
                         " in a one-rank group: there is no other rank to talk to");
}

std::shared_ptr<Communicator> SingleRankGroupFactory::new_group(const std::vector<int>& ranks, const std::string& name) {
  if (ranks != std::vector<int>{0})
    throw std::logic_error("SingleRankGroupFactory: group '" + name + "' must be {0} in a one-rank world");
  return std::make_shared<SingleRankCommunicator>(name);
}

}  // namespace hs::trainer
