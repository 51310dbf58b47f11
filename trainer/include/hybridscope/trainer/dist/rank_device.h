// rank_device.h — the device a rank computes on: trainer.device for its local rank (one CUDA
// device per rank of a node), taken as the process's current device before its process groups are
// made (NCCL and the caching allocator's statistics are per device). What a device can do (the
// peak table, a module's device): model/device.h.
#pragma once

#include <c10/core/Device.h>

#include "hybridscope/trainer/config/config.h"

namespace hs::trainer {

/// The device trainer.device names for the rank with `local_rank`: the CPU, or CUDA device
/// local_rank % (visible devices), made this process's current device (NCCL groups and the
/// caching allocator's statistics use it). Throws ConfigError naming trainer.device when CUDA is
/// asked for and this process has no CUDA device.
/// expandable_segments (hybridscope.expandable_segments): set on the CUDA caching allocator before
/// the device is taken.
c10::Device trainer_device(DeviceKind device, int local_rank, bool expandable_segments = false);

/// The memory probe's device number (memory_probe.h): -1 for the CPU, the index on CUDA.
int memory_device_index(const c10::Device& device);

}  // namespace hs::trainer
