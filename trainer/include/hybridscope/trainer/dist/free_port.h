// free_port.h — a TCP port for a rendezvous on this host: the one helper the local launcher
// (`hybridscope launch`), hs_comm_bench and the multi-process tests use to pick MASTER_PORT.
#pragma once

namespace hs::trainer {

/// A port the kernel just handed out on loopback, closed again before rank 0's TCPStore binds
/// it (a small race, as torchrun's --master-port=0 has). Throws std::runtime_error with the
/// system's reason when no socket can be bound.
int free_loopback_port();

}  // namespace hs::trainer
