// paged_kv_cache.h — the K and V of every decoder layer in fixed-size blocks, addressed by flat
// slot index: what the model's cached attention (model.h, ForwardCache) reads and writes. Which
// block each token goes to is the rollout's business (kv_block_pool.h, rollout.h), not this one's.
#pragma once

#include <cstdint>
#include <vector>

#include <torch/types.h>

#include "hybridscope/trainer/config/config.h"

namespace hs::trainer {

/// K/V storage for every layer of a model, addressed by flat slot index.
class PagedKvCache {
 public:
  PagedKvCache(const ModelShape& shape, std::int64_t num_blocks, std::int64_t block_size,
               torch::Dtype dtype, torch::Device device);
  /// (num_blocks * block_size, kv_heads, head_dim) views of layer `layer`'s K and V.
  torch::Tensor& keys(int layer) { return k_.at(layer); }
  torch::Tensor& values(int layer) { return v_.at(layer); }
  void copy_block(std::int64_t from, std::int64_t to);
  /// copy_block for many pairs at once (one gather/scatter per layer); sources and destinations
  /// must be disjoint.
  void copy_blocks(const std::vector<std::int64_t>& from, const std::vector<std::int64_t>& to);
  std::int64_t block_size() const { return block_size_; }
  std::int64_t num_blocks() const { return num_blocks_; }
  std::int64_t bytes() const;
  /// Bytes one block takes over every layer, K and V, for `shape`'s KV heads in `dtype`.
  static std::int64_t bytes_per_block(const ModelShape& shape, std::int64_t block_size, torch::Dtype dtype);

 private:
  std::int64_t num_blocks_;
  std::int64_t block_size_;
  std::vector<torch::Tensor> k_, v_;
};

}  // namespace hs::trainer
