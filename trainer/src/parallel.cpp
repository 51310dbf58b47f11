// parallel.cpp — the one-rank world (see parallel.h).
#include "hybridscope/trainer/parallel.h"

#include <stdexcept>

namespace hs::trainer {

void SingleRankCommunicator::no_peer(int peer) {
  throw std::logic_error("send/recv with peer " + std::to_string(peer) +
                         " in a one-rank group: there is no other rank to talk to");
}

}  // namespace hs::trainer
