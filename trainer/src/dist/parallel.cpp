// parallel.cpp — the one-rank world (see parallel.h).
#include "hybridscope/trainer/dist/parallel.h"

#include <stdexcept>

namespace hs::trainer {

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
