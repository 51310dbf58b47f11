// packed_attention.cpp — use_remove_padding: a padded (B, T) batch's real tokens packed into one
// (1, N) sequence, causal attention within each packed sequence, and the outputs scattered back.
//
// verl packs with flash-attn's unpad_input / pad_input and attends with flash_attn_varlen_func
// (cu_seqlens). This is the same computation for LibTorch on CPU: the projections, MLP, norms and
// head run over the N real tokens only, and attention runs over chunks of consecutive whole
// sequences, each chunk with a block-diagonal causal mask built once per forward, so no score
// involves padding. One attention per sequence issues ~25 ops per sequence and layer, which on
// short sequences costs more than the padding it saves (the demo step's update was 24 % slower);
// one (1, N, N) mask computes N^2 scores where the sequences need sum n^2. Chunks of up to
// kAttentionChunkTokens bound both (docs/benchmarks.md, "use_remove_padding").
#include <torch/torch.h>

#include <limits>

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

AttentionChunks attention_chunks(const std::vector<std::int64_t>& lengths, std::int64_t G, std::int64_t budget,
                                 const torch::TensorOptions& options) {
  AttentionChunks chunks;
  std::vector<std::int64_t> members;  // the sequence lengths of the chunk being filled
  auto close = [&] {
    if (members.empty()) return;
    // Token i sees token j when j <= i within the same sequence: sequence ids per token, causal.
    const auto ids = torch::repeat_interleave(
        torch::arange(static_cast<std::int64_t>(members.size()), torch::kLong),
        torch::tensor(members, torch::kLong));  // (c)
    const auto c = ids.numel();
    const auto visible = ids.view({c, 1}).eq(ids.view({1, c})).logical_and_(torch::ones({c, c}, torch::kBool).tril());
    // (G * c, c): the G query heads of a KV head stacked as rows, as AttentionImpl lays them out.
    auto mask = torch::zeros({c, c}, options.device(torch::kCPU))
                    .masked_fill_(visible.logical_not(), -std::numeric_limits<double>::infinity())
                    .repeat({G, 1});
    chunks.lengths.push_back(c);
    chunks.masks.push_back(mask.to(options.device()));
    members.clear();
  };
  std::int64_t filled = 0;
  for (const auto n : lengths) {
    if (filled > 0 && filled + n > budget) {
      close();
      filled = 0;
    }
    members.push_back(n);
    filled += n;
  }
  close();
  return chunks;
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
    auto scores = torch::add(batch.segment_masks[s], bmm(qs, ks.transpose(1, 2), batch.matmul), scale);  // (KV, G*n, n)
    // At least float32, as AttentionImpl's padded path (HF's eager attention).
    auto probs = torch::softmax(scores, -1, at::promote_types(scores.scalar_type(), torch::kFloat))
                     .to(scores.scalar_type());
    outs.push_back(bmm(probs, vs, batch.matmul).view({KV, G, n, D}).permute({2, 0, 1, 3}).reshape({n, H * D}));
    start += n;
  }
  TORCH_CHECK(start == q.size(1), "packed_attention: the sequences cover ", start, " of ", q.size(1), " tokens");
  return torch::cat(outs, 0).unsqueeze(0);  // (1, N, H * D)
}

torch::Tensor flash_varlen_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                     const AttentionBatch& batch, double scale) {
  TORCH_CHECK(q.is_cuda() && batch.cu_seqlens.defined(),
              "hybridscope.attention = flash: FlashAttention-2 is a CUDA kernel; the packed batch is on ", q.device());
  const auto N = q.size(1), H = q.size(2), D = q.size(3);
  // 16-bit inputs: the compute dtype under bf16 autocast; a wider q/k/v (rotary in float32) is narrowed.
  const auto dtype = c10::isReducedFloatingType(q.scalar_type()) ? q.scalar_type() : torch::kBFloat16;
  auto q0 = q.select(0, 0).to(dtype).contiguous();  // (N, H, D)
  auto k0 = k.select(0, 0).to(dtype).contiguous();  // (N, KV, D): GQA is the kernel's own (H % KV == 0)
  auto v0 = v.select(0, 0).to(dtype).contiguous();
  auto out = std::get<0>(at::_flash_attention_forward(q0, k0, v0, batch.cu_seqlens, batch.cu_seqlens, batch.max_seqlen,
                                                      batch.max_seqlen, /*dropout_p=*/0.0, /*is_causal=*/true,
                                                      /*return_debug_mask=*/false, scale));
  return out.view({1, N, H * D});
}

}  // namespace hs::trainer::detail
