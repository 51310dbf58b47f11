// rollout_phase.cpp — generation over the replicas, the training share, the batch, the scores.
#include "hybridscope/trainer/loop/rollout_phase.h"

#include <algorithm>

#include <fmt/format.h>

#include "hybridscope/trainer/dist/topology.h"
#include "hybridscope/trainer/hybrid/hybrid_actor.h"
#include "hybridscope/trainer/loop/run_recording.h"
#include "hybridscope/trainer/rl/ppo_workers.h"
#include "hybridscope/trainer/rl/reward.h"
#include "hybridscope/trainer/data/tokenizer.h"
#include "loop/random_streams.h"

namespace hs::trainer {

RolloutPhase::RolloutPhase(const Config& cfg, const Topology& topology, HybridActor& actor, const Tokenizer& tokenizer,
                           Transformer reward_model, RunRecording& recording)
    : cfg_(cfg),
      topology_(topology),
      actor_(actor),
      tokenizer_(tokenizer),
      reward_model_(std::move(reward_model)),
      recording_(recording) {}

Rollouts RolloutPhase::generate_all(const std::vector<const Example*>& examples, const SamplingParams& params,
                                    const std::function<std::uint64_t(int)>& seed_of) {
  // This replica's contiguous share of the prompts; the ranks of a generation tp group generate
  // the same prompts with the same generator (their logits are all-gathered, so they agree).
  const int replicas = actor_.replicas, replica = actor_.replica;
  const std::size_t share = examples.size() / static_cast<std::size_t>(replicas);
  GenerationRequest request;
  request.params = params;
  request.max_response_length = cfg_.data.max_response_length;
  for (std::size_t i = share * static_cast<std::size_t>(replica); i < share * static_cast<std::size_t>(replica + 1); ++i)
    request.prompts.push_back(examples[i]->prompt_ids);
  auto gen = at::detail::createCPUGenerator(seed_of(replica));
  actor_.generator()->eval();
  GenerationResult result = actor_.rollout->generate(request, gen);
  recording_.record_kv("gen_peak", result.peak_pool, actor_.rollout->cache_bytes());
  const MeshShape& mesh = topology_.mesh;
  if (mesh.world() == 1) return {std::move(result.responses), std::move(result.log_probs)};

  // Responses back for training in one collective (pack_rollouts).
  const auto packed = pack_rollouts(result.responses, result.log_probs, cfg_.data.max_response_length);
  const auto rows = packed.size(0);
  if (gathers_share_only()) {
    // HybridFlow: gathered inside the micro-DP group, whose replicas generated this rank's training
    // share, in order; the other prompts' responses stay empty (training_prompts does not take them).
    const auto gathered = topology_.micro_dp_group->all_gather(packed).contiguous();  // (group * rows, width)
    const auto share_rows = static_cast<std::int64_t>(examples.size() / static_cast<std::size_t>(mesh.dp)) *
                            static_cast<std::int64_t>(params.n);
    TORCH_CHECK(gathered.size(0) == share_rows, "micro-DP gather: ", gathered.size(0), " rows for a training share of ",
                share_rows);
    Rollouts all;
    all.responses.resize(examples.size() * static_cast<std::size_t>(params.n));
    all.log_probs.resize(all.responses.size());
    unpack_rollouts(gathered, 0, share_rows, all, static_cast<std::size_t>(topology_.dp_rank() * share_rows));
    return all;
  }
  // Otherwise (vanilla, naive, t_g > t, balance_batch) one all-gather over the actor's world; each
  // replica's rows are taken from its generation tp rank 0.
  const auto gathered = topology_.parallel.world->all_gather(packed).contiguous();  // (world * rows, width)
  std::vector<int> speaker(static_cast<std::size_t>(replicas), -1);  // replica -> its generation tp rank 0
  for (int r = 0; r < mesh.world(); ++r) {
    const MeshCoord c = actor_.generation_layout.coords[static_cast<std::size_t>(r)];
    if (c.tp == 0) speaker[static_cast<std::size_t>(c.dp)] = r;
  }
  Rollouts all;
  all.responses.resize(static_cast<std::size_t>(rows * replicas));
  all.log_probs.resize(all.responses.size());
  for (int q = 0; q < replicas; ++q)
    unpack_rollouts(gathered, speaker[static_cast<std::size_t>(q)] * rows, rows, all, static_cast<std::size_t>(q * rows));
  return all;
}

torch::Tensor pack_rollouts(const std::vector<std::vector<std::int32_t>>& responses,
                            const std::vector<std::vector<float>>& log_probs, int max_response_length) {
  const auto rows = static_cast<std::int64_t>(responses.size());
  const std::int64_t max_len = max_response_length;
  auto packed = torch::zeros({rows, 1 + 2 * max_len}, torch::kFloat32);
  auto packed_a = packed.accessor<float, 2>();
  for (std::int64_t r = 0; r < rows; ++r) {
    const auto& tokens = responses[static_cast<std::size_t>(r)];
    const auto& lps = log_probs[static_cast<std::size_t>(r)];
    TORCH_CHECK(static_cast<std::int64_t>(tokens.size()) <= max_len, "pack_rollouts: a response of ", tokens.size(),
                " tokens is longer than max_response_length ", max_len);
    packed_a[r][0] = static_cast<float>(tokens.size());
    for (std::size_t t = 0; t < tokens.size(); ++t) {
      TORCH_CHECK(tokens[t] >= 0 && tokens[t] < (1 << 24), "pack_rollouts: token id ", tokens[t],
                  " does not fit the float32 packing (ids below 2^24)");
      packed_a[r][static_cast<std::int64_t>(t) + 1] = static_cast<float>(tokens[t]);
      packed_a[r][static_cast<std::int64_t>(t) + 1 + max_len] = lps[t];
    }
  }
  return packed;
}

void unpack_rollouts(const torch::Tensor& packed, std::int64_t first, std::int64_t count, Rollouts& out,
                     std::size_t at) {
  const auto a = packed.accessor<float, 2>();
  const std::int64_t max_len = (packed.size(1) - 1) / 2;
  for (std::int64_t row = first; row < first + count; ++row, ++at) {
    std::vector<std::int32_t> tokens(static_cast<std::size_t>(a[row][0]));
    std::vector<float> lps(tokens.size());
    for (std::size_t t = 0; t < tokens.size(); ++t) {
      tokens[t] = static_cast<std::int32_t>(a[row][static_cast<std::int64_t>(t) + 1]);
      lps[t] = a[row][static_cast<std::int64_t>(t) + 1 + max_len];
    }
    out.responses[at] = std::move(tokens);
    out.log_probs[at] = std::move(lps);
  }
}

bool RolloutPhase::gathers_share_only() const {
  // Dynamic sampling filters groups on every rank alike, so every rank needs every response.
  return topology_.mesh.world() > 1 && topology_.micro_dp_group && !cfg_.trainer.balance_batch &&
         !cfg_.algorithm.filter_groups.enable;
}

std::vector<std::vector<std::size_t>> RolloutPhase::dp_partitions(const std::vector<const Example*>& examples,
                                                                  const std::vector<std::vector<std::int32_t>>& responses,
                                                                  int n) const {
  const auto parts = static_cast<std::size_t>(topology_.mesh.dp);
  if (!cfg_.trainer.balance_batch || parts == 1) {
    const std::size_t share = examples.size() / parts;
    std::vector<std::vector<std::size_t>> out(parts);
    for (std::size_t d = 0; d < parts; ++d)
      for (std::size_t i = share * d; i < share * (d + 1); ++i) out[d].push_back(i);
    return out;
  }
  // Balanced partition of whole prompt groups (verl's balance_batch keeps equal sequence counts
  // per dp rank and balances their token totals). Every rank computes the same partition from the
  // same responses.
  std::vector<std::int64_t> tokens(examples.size(), 0);  // per prompt group
  for (std::size_t i = 0; i < examples.size(); ++i)
    for (int j = 0; j < n; ++j)
      tokens[i] += static_cast<std::int64_t>(examples[i]->prompt_ids.size() +
                                             responses[i * static_cast<std::size_t>(n) + static_cast<std::size_t>(j)].size());
  return balanced_equal_partitions(tokens, topology_.mesh.dp);
}

std::vector<std::size_t> RolloutPhase::training_prompts(const std::vector<const Example*>& examples,
                                                        const std::vector<std::vector<std::int32_t>>& responses,
                                                        int n) const {
  return dp_partitions(examples, responses, n)[static_cast<std::size_t>(topology_.dp_rank())];
}

Metrics RolloutPhase::seqlen_balance(const std::vector<const Example*>& examples,
                                     const std::vector<std::vector<std::int32_t>>& responses, int n) const {
  const auto prompts = dp_partitions(examples, responses, n);
  const auto per_prompt = static_cast<std::size_t>(n);
  const int eos = tokenizer_.eos_token_id();
  // Prompt + response tokens through the first EOS: what make_rollout_batch's attention_mask covers.
  auto seqlen = [&](std::size_t i, std::size_t j) {
    const auto& response = responses[i * per_prompt + j];
    const auto end = std::find(response.begin(), response.end(), eos);
    const auto masked = static_cast<std::int64_t>(end - response.begin()) + (end == response.end() ? 0 : 1);
    return static_cast<std::int64_t>(examples[i]->prompt_ids.size()) + masked;
  };
  std::vector<std::int64_t> seqlens(examples.size() * per_prompt, 0);
  std::vector<std::vector<std::size_t>> sequences(prompts.size());
  const bool share_only = gathers_share_only();
  const auto own = static_cast<std::size_t>(topology_.dp_rank());
  for (std::size_t d = 0; d < prompts.size(); ++d) {
    for (const std::size_t i : prompts[d]) {
      for (std::size_t j = 0; j < per_prompt; ++j) {
        sequences[d].push_back(i * per_prompt + j);
        if (!share_only || d == own) seqlens[i * per_prompt + j] = seqlen(i, j);
      }
    }
  }
  if (share_only) {
    // Each rank knows its own dp share; the ranks of one dp share agree, the rest hold zeros.
    auto lengths = torch::from_blob(seqlens.data(), {static_cast<std::int64_t>(seqlens.size())}, torch::kInt64).clone();
    topology_.parallel.world->all_reduce(lengths, ReduceOp::kMax);
    std::copy_n(lengths.data_ptr<std::int64_t>(), seqlens.size(), seqlens.begin());
  }
  return seqlen_balance_metrics(seqlens, sequences);
}

RolloutBatch RolloutPhase::make_batch(const std::vector<const Example*>& examples,
                                      const std::vector<std::size_t>& prompts,
                                      const std::vector<std::vector<std::int32_t>>& responses, int n,
                                      const std::vector<std::vector<float>>* log_probs) const {
  std::vector<std::vector<std::int32_t>> prompt_ids, response_ids;
  std::vector<const std::vector<float>*> response_lps;
  for (const std::size_t i : prompts) {
    prompt_ids.push_back(examples[i]->prompt_ids);
    for (int j = 0; j < n; ++j) {
      const std::size_t row = i * static_cast<std::size_t>(n) + static_cast<std::size_t>(j);
      response_ids.push_back(responses[row]);
      if (log_probs) response_lps.push_back(&(*log_probs)[row]);
    }
  }
  RolloutBatch batch =
      make_rollout_batch(prompt_ids, response_ids, n, tokenizer_.pad_token_id(), tokenizer_.eos_token_id());
  if (log_probs) {
    // (B, R) float32, 0 past each response (the response mask's padding).
    batch.rollout_log_probs = torch::zeros({batch.size(), batch.response_length()}, torch::kFloat32);
    auto a = batch.rollout_log_probs.accessor<float, 2>();
    for (std::size_t b = 0; b < response_lps.size(); ++b)
      for (std::size_t t = 0; t < response_lps[b]->size(); ++t)
        a[static_cast<std::int64_t>(b)][static_cast<std::int64_t>(t)] = (*response_lps[b])[t];
  }
  for (const std::size_t i : prompts) {
    for (int j = 0; j < n; ++j) {
      batch.ground_truth.push_back(examples[i]->ground_truth);
      batch.data_source.push_back(examples[i]->data_source);
    }
  }
  return batch;
}

torch::Tensor RolloutPhase::score(const RolloutBatch& batch, bool shape_overlong) {
  // token_level_scores: the sequence's score at its last response token (verl's reward managers).
  auto scores = torch::zeros({batch.size(), batch.response_length()}, torch::kFloat32);
  auto scores_a = scores.accessor<float, 2>();
  const auto lengths = batch.response_mask.sum(-1).to(torch::kInt64).contiguous();
  const auto* length = lengths.data_ptr<std::int64_t>();
  if (reward_model_) {
    torch::NoGradGuard no_grad;
    const auto values = response_values(reward_model_, batch.to(topology_.device))
                            .to(torch::kCPU, torch::kFloat32)
                            .contiguous();  // (B, R)
    const auto values_a = values.accessor<float, 2>();
    for (std::int64_t b = 0; b < batch.size(); ++b) {
      const auto last = std::max<std::int64_t>(0, length[b] - 1);
      scores_a[b][last] = values_a[b][last];
    }
    return scores;
  }
  const auto responses = batch.responses.contiguous();
  const auto responses_a = responses.accessor<std::int64_t, 2>();
  std::vector<std::int32_t> ids;
  for (std::int64_t b = 0; b < batch.size(); ++b) {
    ids.clear();
    for (std::int64_t t = 0; t < length[b]; ++t) ids.push_back(static_cast<std::int32_t>(responses_a[b][t]));
    const std::string text = tokenizer_.decode(ids, true);
    const auto i = static_cast<std::size_t>(b);
    double value = compute_score(cfg_.reward_model.rule, batch.data_source[i], text, batch.ground_truth[i]);
    if (shape_overlong) value += overlong_penalty(cfg_.reward_model.overlong_buffer, length[b], cfg_.data.max_response_length);
    scores_a[b][std::max<std::int64_t>(0, length[b] - 1)] = static_cast<float>(value);
  }
  return scores;
}

double overlong_penalty(const OverlongBufferConfig& buffer, std::int64_t response_length, int max_response_length) {
  if (!buffer.enable) return 0.0;
  const double expected = static_cast<double>(max_response_length - buffer.len);
  const double exceed = static_cast<double>(response_length) - expected;
  return std::min(-exceed / buffer.len * buffer.penalty_factor, 0.0);
}

double RolloutPhase::validate(const RLDataset& data, std::int64_t step, std::map<std::string, double>* per_source) {
  // Each generation replica scores its contiguous share of the validation prompts (its ranks
  // generate together; the replica's tp rank 0 counts); sums and counts per data source (the same
  // sorted list on every rank) are added over the world.
  torch::NoGradGuard no_grad;
  HybridSwitch& hybrid_switch = *actor_.hybrid_switch;
  const bool reshard = static_cast<bool>(actor_.rollout_model);
  if (reshard) hybrid_switch.to_rollout(step);  // the rollout model gets the current weights
  SamplingParams params = cfg_.actor_rollout_ref.rollout.val_kwargs;
  params.n = 1;
  const auto replicas = static_cast<std::size_t>(actor_.replicas);
  const std::size_t total_rows = data.size();
  const std::size_t share = (total_rows + replicas - 1) / replicas;
  const std::size_t first = std::min(total_rows, share * static_cast<std::size_t>(actor_.replica));
  const std::size_t last = std::min(total_rows, first + share);
  const std::size_t chunk = cfg_.data.val_batch_size > 0 ? static_cast<std::size_t>(cfg_.data.val_batch_size)
                                                         : std::max<std::size_t>(1, last - first);
  std::map<std::string, std::size_t> source_index;
  for (std::size_t i = 0; i < total_rows; ++i) source_index.emplace(data[i].data_source, 0);
  std::size_t next = 0;
  for (auto& [source, index] : source_index) index = next++;
  auto sums = torch::zeros({2, static_cast<std::int64_t>(source_index.size()) + 1}, torch::kFloat64);  // (sum, count)
  auto sums_a = sums.accessor<double, 2>();
  const auto all = static_cast<std::int64_t>(source_index.size());
  for (std::size_t start = first; start < last; start += chunk) {
    std::vector<const Example*> examples;
    for (std::size_t i = start; i < std::min(last, start + chunk); ++i) examples.push_back(&data[i]);
    GenerationRequest request;
    request.params = params;
    request.max_response_length = cfg_.data.max_response_length;
    for (const auto* ex : examples) request.prompts.push_back(ex->prompt_ids);
    auto gen = at::detail::createCPUGenerator(detail::stream_seed(cfg_.hybridscope.seed, -1, detail::kRolloutStream));
    const GenerationResult result = actor_.rollout->generate(request, gen);
    if (!actor_.replica_lead) continue;
    std::vector<std::size_t> rows(examples.size());
    for (std::size_t i = 0; i < rows.size(); ++i) rows[i] = i;
    const RolloutBatch batch = make_batch(examples, rows, result.responses, 1);
    const auto scores = score(batch, /*shape_overlong=*/false).sum(-1);  // val/mean@1: the rule score
    // trainer.log_val_generations: the first samples of the first replica's first chunk, decoded.
    const auto logged = static_cast<std::size_t>(std::max(0, cfg_.trainer.log_val_generations));
    if (actor_.replica == 0 && start == first && logged > 0) {
      for (std::size_t i = 0; i < std::min(logged, examples.size()); ++i) {
        fmt::print("[validation step {} sample {}] score {:.3f}, ground truth {}\n[prompt]\n{}\n[response]\n{}\n", step, i,
                   scores[static_cast<std::int64_t>(i)].item<double>(), examples[i]->ground_truth, examples[i]->prompt,
                   tokenizer_.decode(result.responses[i], /*skip_special_tokens=*/false));
      }
    }
    for (std::int64_t b = 0; b < batch.size(); ++b) {
      const double v = scores[b].item<double>();
      const auto k = static_cast<std::int64_t>(source_index.at(batch.data_source[static_cast<std::size_t>(b)]));
      sums_a[0][k] += v;
      sums_a[1][k] += 1;
      sums_a[0][all] += v;
      sums_a[1][all] += 1;
    }
  }
  if (reshard) hybrid_switch.to_train(step);
  topology_.parallel.world->all_reduce(sums, ReduceOp::kSum);
  if (per_source)
    for (const auto& [source, k] : source_index)
      if (sums_a[1][static_cast<std::int64_t>(k)] > 0)
        (*per_source)[source] = sums_a[0][static_cast<std::int64_t>(k)] / sums_a[1][static_cast<std::int64_t>(k)];
  return sums_a[1][all] > 0 ? sums_a[0][all] / sums_a[1][all] : 0.0;
}

}  // namespace hs::trainer
