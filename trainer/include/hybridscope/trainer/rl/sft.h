// sft.h — supervised warm-up: produces the base policy an RL run starts from by teaching the
// model the task's answer format ("#### <answer>" then EOS) on the training prompts.
// Cross-entropy on response tokens only; AdamW at hybridscope.warmup.lr.
#pragma once

#include <cstdint>
#include <functional>

#include "hybridscope/trainer/config/config.h"
#include "hybridscope/trainer/data/dataset.h"
#include "hybridscope/trainer/model/model.h"
#include "hybridscope/trainer/data/tokenizer.h"

namespace hs::trainer {

/// Called after each warm-up step with (step, total steps, loss).
using WarmupProgress = std::function<void(int, int, double)>;

/// Trains `model` for warmup.steps steps of warmup.batch_size examples drawn with `seed`.
/// Returns the mean loss of the last 10 steps.
double supervised_warmup(Transformer& model, const RLDataset& data, const Tokenizer& tokenizer,
                         const WarmupConfig& warmup, std::uint64_t seed, const WarmupProgress& progress = {});

/// The target response of an example in GSM8K's convention: "#### <ground_truth>".
std::string target_response(const Example& example);

}  // namespace hs::trainer
