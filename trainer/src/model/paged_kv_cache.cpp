// paged_kv_cache.cpp — see paged_kv_cache.h.
#include "hybridscope/trainer/model/paged_kv_cache.h"

#include <torch/torch.h>

namespace hs::trainer {

PagedKvCache::PagedKvCache(const ModelShape& shape, std::int64_t num_blocks,
                           std::int64_t block_size, torch::Dtype dtype, torch::Device device)
    : num_blocks_(num_blocks), block_size_(block_size) {
  TORCH_CHECK(num_blocks > 0 && block_size > 0, "PagedKvCache: num_blocks and block_size must be positive");
  // Zero-filled, not empty: masked-out slots are still multiplied by probability 0, and 0 * NaN
  // from uninitialised memory would poison the attention output.
  auto options = torch::TensorOptions().dtype(dtype).device(device);
  for (int layer = 0; layer < shape.num_hidden_layers; ++layer) {
    k_.push_back(torch::zeros({num_blocks * block_size, shape.num_key_value_heads, shape.head_dim()}, options));
    v_.push_back(torch::zeros({num_blocks * block_size, shape.num_key_value_heads, shape.head_dim()}, options));
  }
}

void PagedKvCache::copy_block(std::int64_t from, std::int64_t to) {
  for (std::size_t layer = 0; layer < k_.size(); ++layer) {
    k_[layer].narrow(0, to * block_size_, block_size_).copy_(k_[layer].narrow(0, from * block_size_, block_size_));
    v_[layer].narrow(0, to * block_size_, block_size_).copy_(v_[layer].narrow(0, from * block_size_, block_size_));
  }
}

void PagedKvCache::copy_blocks(const std::vector<std::int64_t>& from,
                               const std::vector<std::int64_t>& to) {
  TORCH_CHECK(from.size() == to.size(), "copy_blocks: ", from.size(), " sources, ", to.size(), " destinations");
  if (from.empty() || k_.empty()) return;
  if (from.size() == 1) return copy_block(from[0], to[0]);
  const auto n = static_cast<std::int64_t>(from.size());
  auto options = torch::TensorOptions().dtype(torch::kLong);
  auto offsets = torch::arange(block_size_, options);
  auto blocks_from = torch::from_blob(const_cast<std::int64_t*>(from.data()), {n, 1}, options);
  auto blocks_to = torch::from_blob(const_cast<std::int64_t*>(to.data()), {n, 1}, options);
  auto device = k_.front().device();
  auto src = (blocks_from * block_size_ + offsets).reshape({-1}).to(device);  // (n * block_size)
  auto dst = (blocks_to * block_size_ + offsets).reshape({-1}).to(device);
  for (std::size_t layer = 0; layer < k_.size(); ++layer) {
    k_[layer].index_copy_(0, dst, k_[layer].index_select(0, src));
    v_[layer].index_copy_(0, dst, v_[layer].index_select(0, src));
  }
}

std::int64_t PagedKvCache::bytes_per_block(const ModelShape& shape, std::int64_t block_size, torch::Dtype dtype) {
  return 2 * static_cast<std::int64_t>(shape.num_hidden_layers) * block_size * shape.num_key_value_heads *
         shape.head_dim() * static_cast<std::int64_t>(c10::elementSize(dtype));
}

std::int64_t PagedKvCache::bytes() const {
  std::int64_t total = 0;
  for (const auto& t : k_) total += static_cast<std::int64_t>(t.nbytes());
  for (const auto& t : v_) total += static_cast<std::int64_t>(t.nbytes());
  return total;
}

}  // namespace hs::trainer
