// head_log_probs.cpp — TransformerImpl::token_log_probs: the LM head, log p(label) and the entropy
// over chunks of tokens, so that the (tokens, V) float32 logits of a whole micro-batch never exist.
//
// At a 151,936-row vocabulary one token's float32 logits take 0.6 MB: a micro-batch of 8 sequences
// of 1,280 tokens holds 6.2 GB of them, and a log-prob pass over a whole 256-sequence batch held
// 37 GiB (the out-of-memory of issue 33). Here the head is applied to at most
// kLogitsChunkBytes / (4 V) tokens at a time. Under autograd a custom function keeps only the
// hidden states and each token's logsumexp and entropy; its backward computes each chunk's logits
// again (verl's FusedLinearForPPO, verl/utils/experimental/torch_functional.py, does the same).
//
// Math per token, z = h W^T / T (T the sampling temperature), lse = logsumexp(z), p = softmax(z):
//   log p(y) = z_y − lse,   H = lse − Σ p z
//   ∂ log p(y) / ∂z = onehot(y) − p,   ∂H / ∂z = −p ⊙ (log p + H)
// and ∂/∂(h W^T) = ∂/∂z / T. Products run in the model's compute dtype (bf16 over float32 weights
// as autocast would), logits and their softmax in float32 (float64 for a float64 model).
#include <torch/torch.h>

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "model/model_layers.h"
#include "torch_compat.h"

namespace hs::trainer {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The dtype logits and their softmax are computed in: float32 for 16-bit products.
torch::Dtype accumulate_dtype(torch::Dtype compute) {
  return compute == torch::kDouble ? torch::kDouble : torch::kFloat;
}

std::int64_t chunk_tokens(std::int64_t vocab, std::int64_t chunk_bytes) {
  return std::max<std::int64_t>(1, chunk_bytes / (4 * std::max<std::int64_t>(vocab, 1)));
}

// z = h W^T / T for one chunk, (n, V) in the accumulate dtype. `w` is already in the compute dtype.
torch::Tensor chunk_logits(const torch::Tensor& h, const torch::Tensor& w, torch::Dtype compute, double temperature,
                           CpuMatmul matmul) {
  auto z = detail::linear(h.to(compute), w, {}, matmul).to(accumulate_dtype(compute));
  if (temperature > 0 && temperature != 1.0) z.div_(temperature);  // z is this call's own tensor
  return z;
}

struct ChunkedLogProbs : public torch::autograd::Function<ChunkedLogProbs> {
  // hidden (N, C), weight (V, C), labels (N) int64 -> {log_probs (N), entropy (N)}. Without
  // with_entropy the entropy is zeros and its softmax is never formed (the log-prob passes).
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& hidden, const torch::Tensor& weight,
                               const torch::Tensor& labels, double temperature, std::int64_t compute_dtype,
                               std::int64_t matmul, std::int64_t step, bool with_entropy) {
    const auto compute = static_cast<torch::Dtype>(compute_dtype);
    const auto acc = accumulate_dtype(compute);
    const auto w = weight.to(compute);
    const std::int64_t n = hidden.size(0);
    auto log_probs = torch::empty({n}, hidden.options().dtype(acc));
    auto entropy = with_entropy ? torch::empty({n}, hidden.options().dtype(acc))
                                : torch::zeros({n}, hidden.options().dtype(acc));
    auto lse = torch::empty({n}, hidden.options().dtype(acc));
    for (std::int64_t s = 0; s < n; s += step) {
      const std::int64_t e = std::min(n, s + step);
      const auto z = chunk_logits(hidden.slice(0, s, e), w, compute, temperature, static_cast<CpuMatmul>(matmul));
      const auto chunk_lse = torch::logsumexp(z, -1);
      lse.slice(0, s, e).copy_(chunk_lse);
      log_probs.slice(0, s, e).copy_(z.gather(-1, labels.slice(0, s, e).unsqueeze(-1)).squeeze(-1) - chunk_lse);
      // H = lse − Σ p z, with p ⊙ z formed in p's own storage: two (n, V) tensors alive, not three.
      if (with_entropy) entropy.slice(0, s, e).copy_(chunk_lse - torch::softmax(z, -1).mul_(z).sum(-1));
    }
    ctx->save_for_backward({hidden, weight, labels, lse, entropy});
    ctx->saved_data["temperature"] = temperature;
    ctx->saved_data["compute"] = compute_dtype;
    ctx->saved_data["matmul"] = matmul;
    ctx->saved_data["step"] = step;
    return {log_probs, entropy};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto& hidden = saved[0];
    const auto& weight = saved[1];
    const auto& labels = saved[2];
    const auto& lse = saved[3];
    const auto& entropy = saved[4];
    const double temperature = ctx->saved_data["temperature"].toDouble();
    const auto compute = static_cast<torch::Dtype>(ctx->saved_data["compute"].toInt());
    const auto matmul = static_cast<CpuMatmul>(ctx->saved_data["matmul"].toInt());
    const auto acc = accumulate_dtype(compute);
    const double scale = temperature > 0 && temperature != 1.0 ? 1.0 / temperature : 1.0;
    const auto zeros = torch::zeros({hidden.size(0)}, hidden.options().dtype(acc));
    const auto g_lp = grads[0].defined() ? grads[0].to(acc) : zeros;
    const auto g_h = grads[1].defined() ? grads[1].to(acc) : zeros;

    const auto w = weight.to(compute);
    auto grad_hidden = torch::empty_like(hidden);
    auto grad_weight = torch::zeros(weight.sizes(), weight.options().dtype(acc));
    const std::int64_t n = hidden.size(0);
    const std::int64_t step = ctx->saved_data["step"].toInt();
    for (std::int64_t s = 0; s < n; s += step) {
      const std::int64_t e = std::min(n, s + step);
      const auto h = hidden.slice(0, s, e).to(compute);
      // dz = g_lp (onehot − p) − g_H p (log p + H), formed in place in the logits' own storage, so
      // that two (n, V) tensors are alive at once (log p and p).
      auto dz = chunk_logits(h, w, compute, temperature, matmul);  // z
      dz.sub_(lse.slice(0, s, e).unsqueeze(-1));                    // log p
      auto p = dz.exp();
      const auto glp = g_lp.slice(0, s, e).unsqueeze(-1);
      const auto gh = g_h.slice(0, s, e).unsqueeze(-1);
      dz.add_(entropy.slice(0, s, e).unsqueeze(-1)).mul_(gh).add_(glp).mul_(p).neg_();
      p.reset();
      dz.scatter_add_(-1, labels.slice(0, s, e).unsqueeze(-1), glp);
      if (scale != 1.0) dz.mul_(scale);
      const auto d = dz.to(compute);  // (n, V): ∂/∂(h W^T)
      grad_hidden.slice(0, s, e).copy_(torch::mm(d, w));
      grad_weight.add_(torch::mm(d.t(), h));
    }
    return {grad_hidden, grad_weight.to(weight.scalar_type()), torch::Tensor(), torch::Tensor(), torch::Tensor(),
            torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor TransformerImpl::head_weight() const {
  return shape_.tie_word_embeddings ? parts_->model->embed_tokens->weight : parts_->lm_head->weight;
}

std::pair<torch::Tensor, torch::Tensor> TransformerImpl::token_log_probs(const torch::Tensor& hidden,
                                                                         const torch::Tensor& labels,
                                                                         double temperature, bool with_entropy,
                                                                         std::int64_t chunk_bytes) {
  TORCH_CHECK(head_ == HeadKind::kLm && is_last_stage(),
              "token_log_probs: needs the LM head, on the last pipeline stage");
  TORCH_CHECK(hidden.dim() == 2 && hidden.size(1) == shape_.hidden_size && labels.dim() == 1 &&
                  labels.size(0) == hidden.size(0),
              "token_log_probs: hidden (N, C = ", shape_.hidden_size, ") and labels (N), got ", hidden.sizes(),
              " and ", labels.sizes());
  const auto compute = compute_dtype();
  const auto ids = labels.to(torch::kLong);
  if (shape_.tie_word_embeddings || parallel_.tp->size() == 1) {
    auto out = ChunkedLogProbs::apply(hidden, head_weight(), ids, temperature, static_cast<std::int64_t>(compute),
                                      static_cast<std::int64_t>(compute_.cpu_matmul),
                                      chunk_tokens(shape_.vocab_size, chunk_bytes), with_entropy);
    return {out[0], with_entropy ? out[1] : torch::Tensor()};
  }
  // A vocabulary split over tp: each chunk through the head's own all-gather (and its backward),
  // so chunks keep their logits for the backward; still no more than a micro-batch's tokens.
  const auto acc = accumulate_dtype(compute);
  const std::int64_t n = hidden.size(0);
  const std::int64_t step = chunk_tokens(shape_.vocab_size, chunk_bytes);
  std::vector<torch::Tensor> lps, ents;
  for (std::int64_t s = 0; s < n; s += step) {
    const std::int64_t e = std::min(n, s + step);
    torch::Tensor z;
    {
      const bool autocast = compute != anchor_.scalar_type();
      std::optional<compat::AutocastGuard> guard;
      if (autocast) guard.emplace(anchor_.device().type(), compute);
      z = parts_->lm_head(hidden.slice(0, s, e)).to(acc);
    }
    if (temperature > 0 && temperature != 1.0) z = z / temperature;
    const auto lse = torch::logsumexp(z, -1);
    lps.push_back(z.gather(-1, ids.slice(0, s, e).unsqueeze(-1)).squeeze(-1) - lse);
    if (with_entropy) ents.push_back(lse - (torch::softmax(z, -1) * z).sum(-1));
  }
  return {torch::cat(lps), with_entropy ? torch::cat(ents) : torch::Tensor()};
}

}  // namespace hs::trainer
