// measured_cells.cpp — matrix cells as StepInputs and median phase times (see measured_cells.h).
#include "hybridscope/bench/sim/measured_cells.h"

#include "hybridscope/trainer/data/tokenizer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "hybridscope/reports/bench_summary.h"
#include "hybridscope/reports/role_idle.h"
#include "hybridscope/reports/run_database.h"

namespace hs::bench::sim {

namespace {

double number(const ConfigLookup& config, const std::string& key) {
  const auto v = config(key);
  if (!v) throw SimError(fmt::format("measured cell: config key {} is missing from the run", key));
  try {
    std::size_t used = 0;
    const double x = std::stod(*v, &used);
    if (used == v->size()) return x;
  } catch (const std::exception&) {
  }
  throw SimError(fmt::format("measured cell: config key {} = '{}' is not a number", key, *v));
}

bool flag(const ConfigLookup& config, const std::string& key) {
  const auto v = config(key);
  return v && (*v == "true" || *v == "True" || *v == "1");
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

}  // namespace

StepInputs step_inputs_from_config(const ConfigLookup& config, int ranks, const RecordedShape& recorded) {
  StepInputs in;
  auto& m = in.model;
  m.hidden_size = number(config, "hybridscope.model.hidden_size");
  m.intermediate_size = number(config, "hybridscope.model.intermediate_size");
  m.num_hidden_layers = number(config, "hybridscope.model.num_hidden_layers");
  m.num_attention_heads = number(config, "hybridscope.model.num_attention_heads");
  m.num_key_value_heads = number(config, "hybridscope.model.num_key_value_heads");
  m.head_dim = m.hidden_size / m.num_attention_heads;
  const std::string precision = config("hybridscope.precision").value_or("fp32");
  const double bytes = precision == "fp32" ? 4.0 : 2.0;
  in.dtype = precision;
  in.weight_bytes_per_param = in.grad_bytes_per_param = in.kv_bytes_per_element = bytes;
  m.vocab_size = number(config, "hybridscope.model.vocab_size");
  if (m.vocab_size <= 0) {  // 0: the tokenizer's vocabulary, as the trainer takes it (trainer.cpp)
    const std::string name = config("hybridscope.tokenizer").value_or("char");
    const auto kind = trainer::from_string<trainer::TokenizerKind>(name);
    if (!kind) throw SimError(fmt::format("measured cell: hybridscope.tokenizer = {}: not a tokenizer", name));
    // auto is the char tokenizer unless the run named a tokenizer or model directory.
    const bool char_tokenizer = *kind == trainer::TokenizerKind::kChar ||
                                (*kind == trainer::TokenizerKind::kAuto && config("data.tokenizer").value_or("").empty() &&
                                 config("actor_rollout_ref.model.path").value_or("").empty());
    if (!char_tokenizer) {
      throw SimError(fmt::format("measured cell: hybridscope.tokenizer = {} with a tokenizer directory and "
                                 "hybridscope.model.vocab_size 0: the vocabulary is not in the run's config",
                                 name));
    }
    m.vocab_size = trainer::make_tokenizer(trainer::TokenizerKind::kChar)->vocab_size();
  }
  // The parameters the run recorded (norms included), else the dense count.
  if (recorded.actor_param_bytes > 0) in.parameter_count = recorded.actor_param_bytes / bytes;
  in.prompts = static_cast<int>(number(config, "data.train_batch_size"));
  in.samples_per_prompt = static_cast<int>(number(config, "actor_rollout_ref.rollout.n"));
  in.prompt_length = recorded.prompt_length;
  in.response_length = std::max(1.0, recorded.response_length);
  if (config("data.max_response_length")) in.response_length_max = number(config, "data.max_response_length");

  const std::string strategy = config("actor_rollout_ref.actor.strategy").value_or("fsdp");
  if (strategy == "megatron") {
    in.train.tp = static_cast<int>(number(config, "actor_rollout_ref.actor.megatron.tensor_model_parallel_size"));
    in.train.pp = static_cast<int>(number(config, "actor_rollout_ref.actor.megatron.pipeline_model_parallel_size"));
    in.grad_sync = GradSync::kDataParallel;
  } else {
    in.grad_sync = GradSync::kFsdp;
  }
  // A split rollout pool (hybridscope.placement.rollout): those ranks only generate, the others
  // train; hybridscope.async_mode says how the two overlap.
  in.rollout_ranks = static_cast<int>(reports::parse_rank_list(config("hybridscope.placement.rollout").value_or("[]")).size());
  const std::string async_name = config("hybridscope.async_mode").value_or("sync");
  const auto async_mode = trainer::from_string<trainer::AsyncMode>(async_name);
  if (!async_mode)
    throw SimError(fmt::format("measured cell: hybridscope.async_mode = {}: not an async mode", async_name));
  in.async_mode = *async_mode;
  const int actor_ranks = ranks - in.rollout_ranks;
  if (actor_ranks < 1)
    throw SimError(fmt::format("measured cell: hybridscope.placement.rollout holds {} of the {} ranks: no rank "
                               "is left to train",
                               in.rollout_ranks, ranks));
  if (actor_ranks % (in.train.tp * in.train.pp) != 0)
    throw SimError(fmt::format("measured cell: {} ranks do not divide into tp {} · pp {}", actor_ranks, in.train.tp,
                               in.train.pp));
  in.train.dp = actor_ranks / (in.train.tp * in.train.pp);
  // The sync sends the actor's parameters as it holds them: fp32 (rollout_server.cpp, weight_buckets).
  in.sync_bytes_per_param = 4.0;
  if (config("actor_rollout_ref.rollout.update_weights_bucket_megabytes"))
    in.sync_bucket_bytes = number(config, "actor_rollout_ref.rollout.update_weights_bucket_megabytes") * (1 << 20);
  if (config("data.max_response_length"))
    in.max_response_length = static_cast<int>(number(config, "data.max_response_length"));
  // verl's fully-async keys, where the run has them.
  if (config("async_training.trigger_parameter_sync_step"))
    in.trigger_parameter_sync_step = static_cast<int>(number(config, "async_training.trigger_parameter_sync_step"));
  if (config("async_training.staleness_threshold"))
    in.staleness_threshold = number(config, "async_training.staleness_threshold");
  in.rollout_tp = static_cast<int>(number(config, "actor_rollout_ref.rollout.tensor_model_parallel_size"));
  if (config("actor_rollout_ref.rollout.max_num_seqs"))
    in.max_num_seqs = static_cast<int>(number(config, "actor_rollout_ref.rollout.max_num_seqs"));
  // The KV pool the switch allocates: hybridscope.kv_num_blocks blocks, or (-1) the worst case of
  // max_num_seqs sequences at full length (rollout.cpp's worst_case_blocks; on CUDA also capped by
  // gpu_memory_utilization, which a config alone cannot say: the worst case is the model's).
  if (config("hybridscope.kv_block_size") && in.max_num_seqs > 0) {
    const double block = number(config, "hybridscope.kv_block_size");
    const double blocks_set = config("hybridscope.kv_num_blocks") ? number(config, "hybridscope.kv_num_blocks") : -1;
    const double length = (config("data.max_prompt_length") ? number(config, "data.max_prompt_length") : 0) +
                          (config("data.max_response_length") ? number(config, "data.max_response_length") : 0);
    const double blocks = blocks_set > 0 ? blocks_set : std::ceil(length / block) * in.max_num_seqs;
    if (block > 0 && (blocks_set > 0 || length > 0)) in.kv_pool_tokens = blocks * block;
  }

  in.ppo_mini_batch_size = static_cast<int>(number(config, "actor_rollout_ref.actor.ppo_mini_batch_size"));
  in.ppo_micro_batch_size_per_gpu =
      static_cast<int>(number(config, "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu"));
  in.ppo_epochs = static_cast<int>(number(config, "actor_rollout_ref.actor.ppo_epochs"));
  in.reference_policy =
      flag(config, "actor_rollout_ref.actor.use_kl_loss") || flag(config, "algorithm.use_kl_in_reward");
  // hybridscope's trainer, not verl's FSDP: ZeroShards gathers the whole actor once per log-prob
  // pass and per optimizer step (trainer/src/dist/zero.cpp, rl/ppo_workers.cpp), and the
  // reference model is replicated.
  in.fsdp_gathers = flag(config, "actor_rollout_ref.actor.fsdp_config.per_layer") ? FsdpGathers::kPerLayer
                                                                                  : FsdpGathers::kPerOptimizerStep;
  // The weight switch: the planner's plan in the wire dtype (hybrid_actor.cpp: bf16 moves 2 bytes).
  const std::string mode = config("hybridscope.reshard.mode").value_or("hybrid");
  const auto reshard = trainer::from_string<trainer::ReshardMode>(mode);
  if (!reshard) throw SimError(fmt::format("measured cell: hybridscope.reshard.mode = {}: not a reshard mode", mode));
  in.reshard_mode = *reshard;
  in.tie_word_embeddings = flag(config, "hybridscope.model.tie_word_embeddings");
  in.switch_bytes_per_param = bytes;
  in.master_bytes_per_param = 4.0;
  in.gradient_checkpointing = flag(config, "actor_rollout_ref.model.enable_gradient_checkpointing");
  in.critic = config("algorithm.adv_estimator").value_or("grpo") == "gae";
  in.reward_model = flag(config, "reward_model.enable");
  in.optimizer_offload = flag(config, "actor_rollout_ref.actor.fsdp_config.optimizer_offload");
  in.reference_sharded = false;
  const std::string lp_key = "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu";  // -1 / absent: whole batch
  in.log_prob_micro_batch_size_per_gpu = config(lp_key) ? std::max(0, static_cast<int>(number(config, lp_key))) : 0;
  resolve_batches(in);
  return in;
}

std::vector<MeasuredCell> read_measured_cells(const reports::RunDatabase& db, std::int64_t matrix_id) {
  if (matrix_id == 0) {
    const auto matrices = db.matrices();
    if (matrices.empty()) throw SimError(fmt::format("{}: no benchmark matrix in this file", db.path()));
    matrix_id = matrices.back().id;
  }
  const reports::MatrixSummary summary = reports::summarize_matrix(db, matrix_id);
  const int warmup = summary.matrix.warmup_steps;
  std::vector<MeasuredCell> out;
  for (const auto& cs : summary.cells) {
    std::vector<const reports::RunMetrics*> runs;
    for (const auto& r : cs.runs)
      if (r.values.count("step_s")) runs.push_back(&r);
    if (runs.empty()) continue;
    MeasuredCell cell;
    cell.cell_index = cs.cell.cell_index;
    for (const auto& level : cs.cell.levels) cell.name += (cell.name.empty() ? "" : " ") + level;  // "4 hybrid"
    if (cell.name.empty()) cell.name = cs.cell.name;
    cell.ranks = cs.cell.ranks;
    cell.repetitions = static_cast<int>(runs.size());

    // Phase seconds per run (share × step_s = the mean of timing_s/<phase> over measured steps).
    std::map<std::string, std::vector<double>> per_phase;
    for (const auto* r : runs) {
      const double step = r->values.at("step_s");
      per_phase["step"].push_back(step);
      for (const auto& [key, v] : r->values)
        if (key.rfind("share/", 0) == 0) per_phase[key.substr(6)].push_back(v * step);
    }
    // A split pool's generation (timing_s/generate_async: the pool's, which the actor's `gen` wait
    // hides) and weight sync, which bench_summary's phase shares leave out: their means over the
    // run's measured steps (a step without a sync counts as 0).
    for (const auto* r : runs) {
      std::map<std::string, std::pair<double, int>> sums;
      std::set<std::int64_t> steps;
      for (const auto& m : db.step_metrics(r->run_id)) {
        if (m.step <= warmup) continue;
        if (m.name == "timing_s/step") steps.insert(m.step);
        if (m.name == "timing_s/generate_async" || m.name == "timing_s/sync_rollout_weights") {
          sums[m.name.substr(9)].first += m.value;
          sums[m.name.substr(9)].second += 1;
        }
      }
      for (const auto& [phase, sum] : sums)
        if (!steps.empty()) per_phase[phase].push_back(sum.first / static_cast<double>(steps.size()));
    }
    // The switch's KV-pool allocation (its kv_allocate component, train->rollout): the mean over
    // the run's measured steps and its ranks, which each allocate their own share.
    for (const auto* r : runs) {
      double sum = 0;
      int n = 0;
      for (const auto& s : db.switches(r->run_id)) {
        if (s.step <= warmup || s.direction != "train_to_rollout") continue;
        for (const auto& [name, ns] : s.components)
          if (name == "kv_allocate") sum += static_cast<double>(ns) * 1e-9, ++n;
      }
      if (n > 0) per_phase["switch/kv_allocate"].push_back(sum / n);
    }
    for (auto& [phase, values] : per_phase) cell.phase_s[phase] = median(std::move(values));

    // Lengths and parameter bytes: means over the first completed run's measured steps.
    const std::int64_t run_id = runs.front()->run_id;
    std::map<std::string, std::pair<double, int>> sums;
    for (const auto& m : db.step_metrics(run_id)) {
      if (m.step <= warmup) continue;
      auto& s = sums[m.name];
      s.first += m.value;
      s.second += 1;
    }
    auto mean = [&](const char* key) {
      const auto it = sums.find(key);
      return it == sums.end() || it->second.second == 0 ? 0.0 : it->second.first / it->second.second;
    };
    const RecordedShape recorded{mean("prompt_length/mean"), mean("response_length/mean"),
                                 mean("perf/actor_param_bytes")};
    cell.inputs = step_inputs_from_config(
        [&](const std::string& key) { return db.config_value(run_id, key); }, cell.ranks, recorded);
    cell.inputs.processes_per_node = cell.ranks;  // a matrix runs every rank on this one host
    out.push_back(std::move(cell));
  }
  if (out.empty()) throw SimError(fmt::format("{}: matrix {} has no completed run", db.path(), matrix_id));
  return out;
}

}  // namespace hs::bench::sim
