// packed_attention.cpp — use_remove_padding: a padded (B, T) batch's real tokens packed into one
// (1, N) sequence, causal attention within each packed sequence, and the outputs scattered back.
//
// verl packs with flash-attn's unpad_input / pad_input and attends with flash_attn_varlen_func
// (cu_seqlens). This is the same computation for LibTorch on CPU: the projections, MLP, norms and
// head run over the N real tokens only, and attention runs once per sequence with its own causal
// mask, so nothing is computed over padding. A single (1, N, N) block-diagonal mask was the other
// candidate; it computes N^2 scores where the sequences need sum n^2 (docs/benchmarks.md,
// "use_remove_padding", has both measured).
#include <torch/torch.h>

#include <limits>
#include <map>

#include "model/model_layers.h"

namespace hs::trainer::detail {

PackedRows pack_rows(const torch::Tensor& attention_mask) {
  TORCH_CHECK(attention_mask.dim() == 2, "pack_rows: attention_mask must be (B, T), got ", attention_mask.sizes());
  PackedRows rows;
  rows.batch = attention_mask.size(0);
  rows.tokens = attention_mask.size(1);
  const auto real = attention_mask.to(torch::kBool);
  rows.index = real.reshape({-1}).nonzero().squeeze(1);  // (N) row-major
  const auto lengths = real.sum(-1).to(torch::kInt64).cpu().contiguous();
  const auto* len = lengths.data_ptr<std::int64_t>();
  for (std::int64_t b = 0; b < rows.batch; ++b)
    if (len[b] > 0) rows.lengths.push_back(len[b]);
  return rows;
}

torch::Tensor pack(const torch::Tensor& x, const PackedRows& rows) {
  TORCH_CHECK(x.dim() >= 2 && x.size(0) == rows.batch && x.size(1) == rows.tokens, "pack: expected (B, T, ...) = (",
              rows.batch, ", ", rows.tokens, ", ...), got ", x.sizes());
  return x.flatten(0, 1).index_select(0, rows.index).unsqueeze(0);  // (1, N, ...)
}

torch::Tensor unpack(const torch::Tensor& y, const PackedRows& rows) {
  TORCH_CHECK(y.dim() >= 2 && y.size(0) == 1 && y.size(1) == rows.index.numel(), "unpack: expected (1, N = ",
              rows.index.numel(), ", ...), got ", y.sizes());
  auto packed = y.squeeze(0);  // (N, ...)
  std::vector<std::int64_t> padded_shape{rows.batch * rows.tokens};
  padded_shape.insert(padded_shape.end(), packed.sizes().begin() + 1, packed.sizes().end());
  auto out = torch::zeros(padded_shape, packed.options()).index_copy(0, rows.index, packed);  // (B * T, ...)
  padded_shape[0] = rows.tokens;
  padded_shape.insert(padded_shape.begin(), rows.batch);
  return out.view(padded_shape);  // (B, T, ...)
}

std::vector<torch::Tensor> causal_segment_masks(const std::vector<std::int64_t>& lengths, std::int64_t G,
                                                const torch::TensorOptions& options) {
  std::map<std::int64_t, torch::Tensor> by_length;
  std::vector<torch::Tensor> masks;
  masks.reserve(lengths.size());
  for (const auto n : lengths) {
    auto& mask = by_length[n];
    if (!mask.defined()) {
      // (G * n, n): the G query heads of a KV head stacked as rows, as AttentionImpl lays them out.
      mask = torch::full({n, n}, -std::numeric_limits<double>::infinity(), options).triu(1).repeat({G, 1});
    }
    masks.push_back(mask);
  }
  return masks;
}

torch::Tensor packed_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                               const AttentionBatch& batch, double scale) {
  const auto H = q.size(2), KV = k.size(2), D = q.size(3), G = H / KV;
  TORCH_CHECK(q.size(0) == 1 && batch.segment_masks.size() == batch.segments.size(),
              "packed_attention: a packed batch is (1, N) with one mask per sequence");
  const auto q0 = q.select(0, 0), k0 = k.select(0, 0), v0 = v.select(0, 0);  // (N, heads, D)
  std::vector<torch::Tensor> outs;
  outs.reserve(batch.segments.size());
  std::int64_t start = 0;
  for (std::size_t s = 0; s < batch.segments.size(); ++s) {
    const auto n = batch.segments[s];
    auto qs = q0.narrow(0, start, n).view({n, KV, G, D}).permute({1, 2, 0, 3}).reshape({KV, G * n, D});
    auto ks = k0.narrow(0, start, n).transpose(0, 1);  // (KV, n, D)
    auto vs = v0.narrow(0, start, n).transpose(0, 1);  // (KV, n, D)
    auto scores = torch::baddbmm(batch.segment_masks[s], qs, ks.transpose(1, 2), 1.0, scale);  // (KV, G*n, n)
    // At least float32, as AttentionImpl's padded path (HF's eager attention).
    auto probs = torch::softmax(scores, -1, at::promote_types(scores.scalar_type(), torch::kFloat))
                     .to(scores.scalar_type());
    outs.push_back(torch::bmm(probs, vs).view({KV, G, n, D}).permute({2, 0, 1, 3}).reshape({n, H * D}));
    start += n;
  }
  TORCH_CHECK(start == q.size(1), "packed_attention: the sequences cover ", start, " of ", q.size(1), " tokens");
  return torch::cat(outs, 0).unsqueeze(0);  // (1, N, H * D)
}

}  // namespace hs::trainer::detail
