// random_streams.h — the seeds of the loop's random streams.
//
// Every random stream is derived from (hybridscope.seed, global step, stream, rank), so a run
// resumed from a checkpoint at step k draws exactly what the uninterrupted run drew at step k + 1,
// and rank 0's stream is the single-process one, so a one-rank run is unchanged.
#pragma once

#include <cstdint>

namespace hs::trainer::detail {

enum Stream : std::uint64_t { kRolloutStream = 1, kActorShuffleStream = 2, kInitStream = 3 };

/// splitmix64 of (seed, step, stream).
inline std::uint64_t stream_seed(std::uint64_t seed, std::int64_t step, std::uint64_t stream) {
  std::uint64_t z = seed + 0x9e3779b97f4a7c15ULL * (static_cast<std::uint64_t>(step) * 8 + stream + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/// A rank's own stream: rank 0's is the single-process stream.
inline std::uint64_t rank_stream_seed(std::uint64_t seed, std::int64_t step, std::uint64_t stream, int rank) {
  const std::uint64_t s = stream_seed(seed, step, stream);
  return rank == 0 ? s : stream_seed(s, rank, stream);
}

}  // namespace hs::trainer::detail
