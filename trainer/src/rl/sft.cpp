#include "hybridscope/trainer/rl/sft.h"

#include <algorithm>
#include <deque>
#include <numeric>

#include <torch/torch.h>

#include "hybridscope/trainer/data/batch.h"
#include "hybridscope/trainer/rl/core_algos.h"
#include "hybridscope/trainer/model/device.h"
#include "hybridscope/trainer/rl/ppo_workers.h"

namespace hs::trainer {

std::string target_response(const Example& example) { return "#### " + example.ground_truth; }

double supervised_warmup(Transformer& model, const RLDataset& data, const Tokenizer& tokenizer,
                         const WarmupConfig& warmup, std::uint64_t seed, const WarmupProgress& progress) {
  if (warmup.steps <= 0 || data.size() == 0) return 0.0;
  OptimConfig optim;
  optim.lr = warmup.lr;
  optim.weight_decay = 0.0;
  optim.betas = {0.9, 0.95};
  optim.lr_warmup_steps = std::max(1, warmup.steps / 20);
  optim.warmup_style = WarmupStyle::kCosine;
  optim.min_lr_ratio = 0.1;
  Optimizer optimizer(*model, optim, 1.0, warmup.steps, ParallelContext{});
  auto gen = at::detail::createCPUGenerator(seed ^ 0x5f7ULL);
  model->train();
  const auto device = module_device(*model);  // the batch goes where the model is
  std::deque<double> recent;
  for (int step = 0; step < warmup.steps; ++step) {
    optimizer.set_schedule_step(step);
    const auto picks = torch::randint(static_cast<std::int64_t>(data.size()), {warmup.batch_size}, gen, torch::kInt64);
    std::vector<std::vector<std::int32_t>> prompts, responses;
    for (std::int64_t i = 0; i < warmup.batch_size; ++i) {
      const Example& ex = data[static_cast<std::size_t>(picks[i].item<std::int64_t>())];
      prompts.push_back(ex.prompt_ids);
      auto response = tokenizer.encode(target_response(ex));
      response.push_back(tokenizer.eos_token_id());
      responses.push_back(std::move(response));
    }
    const RolloutBatch batch = make_rollout_batch(prompts, responses, 1, tokenizer.pad_token_id(),
                                                  tokenizer.eos_token_id())
                                   .to(device);
    optimizer.zero_grad();
    auto log_probs = response_log_probs(model, batch, 1.0, false).first;  // (B, R)
    auto loss = -masked_mean(log_probs, batch.response_mask);
    loss.backward();
    optimizer.step();
    const double value = loss.item<double>();
    recent.push_back(value);
    if (recent.size() > 10) recent.pop_front();
    if (progress) progress(step + 1, warmup.steps, value);
  }
  model->eval();
  return std::accumulate(recent.begin(), recent.end(), 0.0) / static_cast<double>(recent.size());
}

}  // namespace hs::trainer
