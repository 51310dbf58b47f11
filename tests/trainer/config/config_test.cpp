// config_test.cpp — the configuration loader: defaults, YAML files, overrides, interpolation,
// to_yaml round trip, every error message and every validate() rule, and docs/config.md.

#include "hybridscope/trainer/config/config.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <fstream>
#include <functional>
#include <limits>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace hs::trainer {
namespace {

/// The struct's own defaults, before any loading.
const Config& default_config() {
  static const Config config;
  return config;
}

testing::AssertionResult Contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return testing::AssertionSuccess();
  return testing::AssertionFailure() << "\n  message: " << text << "\n  lacks:   " << part;
}

/// The ConfigError message `f` throws; a test failure when it throws nothing.
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a ConfigError";
  return {};
}

std::string override_error(const std::vector<std::string>& overrides) {
  return error_of([&] { parse_config("", overrides); });
}

std::string file_error(const std::string& yaml) {
  return error_of([&] { parse_config(yaml, {}, "cfg.yaml"); });
}

/// Every leaf of a YAML map as "a.b.c" -> node.
void flatten(const YAML::Node& node, const std::string& prefix,
             std::vector<std::pair<std::string, YAML::Node>>& out) {
  for (const auto& entry : node) {
    const std::string path = prefix.empty() ? entry.first.Scalar() : prefix + "." + entry.first.Scalar();
    if (entry.second.IsMap()) {
      flatten(entry.second, path, out);
    } else {
      out.emplace_back(path, entry.second);
    }
  }
}

std::vector<std::pair<std::string, YAML::Node>> leaves_of(const std::string& yaml) {
  std::vector<std::pair<std::string, YAML::Node>> out;
  flatten(YAML::Load(yaml), "", out);
  return out;
}

std::string read_file(const std::string& path) {
  std::ifstream file(path);
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

// ---------------------------------------------------------------------------------------------
// Defaults and spellings

TEST(ConfigDefaults, MatchVerlAndResolveTheCheckpointDirectory) {
  const Config c = load_config("");
  EXPECT_EQ(c.data.max_prompt_length, 512);
  EXPECT_EQ(c.data.max_response_length, 512);
  EXPECT_EQ(c.data.train_batch_size, 1024);
  EXPECT_EQ(c.data.truncation, Truncation::kError);
  EXPECT_EQ(c.actor_rollout_ref.actor.ppo_mini_batch_size, 256);
  EXPECT_DOUBLE_EQ(c.actor_rollout_ref.actor.clip_ratio, 0.2);
  EXPECT_DOUBLE_EQ(c.actor_rollout_ref.actor.clip_ratio_c, 3.0);
  EXPECT_EQ(c.actor_rollout_ref.actor.kl_loss_type, KlPenalty::kLowVarKl);
  EXPECT_DOUBLE_EQ(c.actor_rollout_ref.actor.optim.lr, 1e-6);
  EXPECT_EQ(c.actor_rollout_ref.actor.optim.betas, (std::array<double, 2>{0.9, 0.999}));
  EXPECT_DOUBLE_EQ(c.critic.optim.lr, 1e-5);
  EXPECT_EQ(c.critic.ppo_max_token_len_per_gpu, 32768);
  EXPECT_EQ(c.actor_rollout_ref.rollout.n, 1);
  EXPECT_FALSE(c.actor_rollout_ref.rollout.val_kwargs.do_sample);
  EXPECT_EQ(c.algorithm.adv_estimator, AdvEstimator::kGae);
  EXPECT_EQ(c.algorithm.kl_penalty, KlPenalty::kKl);
  EXPECT_EQ(c.algorithm.kl_ctrl.type, KlCtrlType::kFixed);
  EXPECT_EQ(c.algorithm.kl_ctrl.horizon, 10000);
  EXPECT_EQ(c.reward_model.custom_reward_function.name, "compute_score");
  EXPECT_EQ(c.trainer.logger, std::vector<std::string>{"console"});
  EXPECT_EQ(c.trainer.default_local_dir, "checkpoints/hybridscope/run");
}

TEST(ConfigDefaults, DefaultStructIsValid) { EXPECT_NO_THROW(validate(default_config())); }

TEST(ConfigEnums, ToStringUsesVerlSpellings) {
  EXPECT_STREQ(to_string(AdvEstimator::kGae), "gae");
  EXPECT_STREQ(to_string(AdvEstimator::kGrpo), "grpo");
  EXPECT_STREQ(to_string(AdvEstimator::kRloo), "rloo");
  EXPECT_STREQ(to_string(AdvEstimator::kReinforcePlusPlus), "reinforce_plus_plus");
  EXPECT_STREQ(to_string(AdvEstimator::kReinforcePlusPlusBaseline), "reinforce_plus_plus_baseline");
  EXPECT_STREQ(to_string(AdvEstimator::kRemax), "remax");
  EXPECT_STREQ(to_string(LossAggMode::kTokenMean), "token-mean");
  EXPECT_STREQ(to_string(LossAggMode::kSeqMeanTokenSum), "seq-mean-token-sum");
  EXPECT_STREQ(to_string(LossAggMode::kSeqMeanTokenMean), "seq-mean-token-mean");
  EXPECT_STREQ(to_string(LossAggMode::kSeqMeanTokenSumNorm), "seq-mean-token-sum-norm");
  EXPECT_STREQ(to_string(KlPenalty::kKl), "kl");
  EXPECT_STREQ(to_string(KlPenalty::kAbs), "abs");
  EXPECT_STREQ(to_string(KlPenalty::kMse), "mse");
  EXPECT_STREQ(to_string(KlPenalty::kLowVarKl), "low_var_kl");
  EXPECT_STREQ(to_string(KlCtrlType::kFixed), "fixed");
  EXPECT_STREQ(to_string(KlCtrlType::kAdaptive), "adaptive");
  EXPECT_STREQ(to_string(Truncation::kError), "error");
  EXPECT_STREQ(to_string(Truncation::kLeft), "left");
  EXPECT_STREQ(to_string(Truncation::kRight), "right");
}

TEST(ConfigEnums, KlPenaltyAcceptsEveryVerlAlias) {
  const std::vector<std::pair<std::string, KlPenalty>> cases = {
      {"kl", KlPenalty::kKl},   {"k1", KlPenalty::kKl},         {"abs", KlPenalty::kAbs},
      {"mse", KlPenalty::kMse}, {"k2", KlPenalty::kMse},        {"low_var_kl", KlPenalty::kLowVarKl},
      {"k3", KlPenalty::kLowVarKl}};
  for (const auto& [spelling, expected] : cases) {
    const Config c = parse_config("", {"algorithm.kl_penalty=" + spelling,
                                       "actor_rollout_ref.actor.kl_loss_type=" + spelling});
    EXPECT_EQ(c.algorithm.kl_penalty, expected) << spelling;
    EXPECT_EQ(c.actor_rollout_ref.actor.kl_loss_type, expected) << spelling;
  }
}

// ---------------------------------------------------------------------------------------------
// Files and overrides

constexpr const char* kExampleYaml = R"(
data:
  train_files: data/gsm8k/train.jsonl
  max_prompt_length: 48
  max_response_length: 16
  train_batch_size: 32
  truncation: left
  shuffle: false
actor_rollout_ref:
  hybrid_engine: true
  actor:
    ppo_mini_batch_size: 16
    ppo_micro_batch_size_per_gpu: 8
    clip_ratio_high: 0.28
    loss_agg_mode: seq-mean-token-mean
    use_kl_loss: true
    kl_loss_type: k3
    optim:
      lr: 1.0e-5
      betas: [0.9, 0.95]
  rollout:
    n: 4
    temperature: 0.7
    val_kwargs:
      temperature: 0.0
      n: 1
algorithm:
  adv_estimator: grpo
  norm_adv_by_std_in_grpo: false
  kl_ctrl:
    type: adaptive
trainer:
  project_name: gsm8k
  logger: [console]
  val_before_train: no
hybridscope:
  seed: 18446744073709551615
  model:
    hidden_size: 64
    num_attention_heads: 4
    num_key_value_heads: 1
    max_position_embeddings: 64
    tie_word_embeddings: true
)";

TEST(ConfigParse, ReadsEveryValueKindFromNestedMaps) {
  const Config c = parse_config(kExampleYaml);
  EXPECT_EQ(c.data.train_files, "data/gsm8k/train.jsonl");
  EXPECT_EQ(c.data.max_prompt_length, 48);
  EXPECT_EQ(c.data.train_batch_size, 32);
  EXPECT_EQ(c.data.truncation, Truncation::kLeft);
  EXPECT_FALSE(c.data.shuffle);
  EXPECT_EQ(c.actor_rollout_ref.actor.ppo_mini_batch_size, 16);
  EXPECT_EQ(c.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu, 8);
  EXPECT_DOUBLE_EQ(c.actor_rollout_ref.actor.effective_clip_high(), 0.28);
  EXPECT_DOUBLE_EQ(c.actor_rollout_ref.actor.effective_clip_low(), 0.2);
  EXPECT_EQ(c.actor_rollout_ref.actor.loss_agg_mode, LossAggMode::kSeqMeanTokenMean);
  EXPECT_TRUE(c.actor_rollout_ref.actor.use_kl_loss);
  EXPECT_EQ(c.actor_rollout_ref.actor.kl_loss_type, KlPenalty::kLowVarKl);
  EXPECT_DOUBLE_EQ(c.actor_rollout_ref.actor.optim.lr, 1e-5);
  EXPECT_EQ(c.actor_rollout_ref.actor.optim.betas, (std::array<double, 2>{0.9, 0.95}));
  EXPECT_EQ(c.actor_rollout_ref.rollout.n, 4);
  EXPECT_DOUBLE_EQ(c.actor_rollout_ref.rollout.temperature, 0.7);
  EXPECT_DOUBLE_EQ(c.actor_rollout_ref.rollout.val_kwargs.temperature, 0.0);
  EXPECT_EQ(c.algorithm.adv_estimator, AdvEstimator::kGrpo);
  EXPECT_FALSE(c.algorithm.norm_adv_by_std_in_grpo);
  EXPECT_EQ(c.algorithm.kl_ctrl.type, KlCtrlType::kAdaptive);
  EXPECT_EQ(c.trainer.logger, (std::vector<std::string>{"console"}));
  EXPECT_FALSE(c.trainer.val_before_train);
  EXPECT_EQ(c.trainer.default_local_dir, "checkpoints/gsm8k/run");
  EXPECT_EQ(c.hybridscope.seed, std::numeric_limits<std::uint64_t>::max());
  EXPECT_EQ(c.hybridscope.model.num_key_value_heads, 1);
  EXPECT_TRUE(c.hybridscope.model.tie_word_embeddings);
  EXPECT_TRUE(c.use_reference());
  EXPECT_FALSE(c.use_critic());
  // Untouched keys keep their defaults.
  EXPECT_EQ(c.data.val_files, default_config().data.val_files);
  EXPECT_EQ(c.hybridscope.model.hidden_size, 64);
  EXPECT_EQ(c.hybridscope.model.num_hidden_layers, default_config().hybridscope.model.num_hidden_layers);
}

TEST(ConfigParse, LoadConfigReadsAFileAndNamesItInErrors) {
  const std::string path = testing::TempDir() + "config_test_example.yaml";
  std::ofstream(path) << kExampleYaml;
  const Config c = load_config(path, {"actor_rollout_ref.rollout.n=8"});
  EXPECT_EQ(c.data.train_batch_size, 32);
  EXPECT_EQ(c.actor_rollout_ref.rollout.n, 8);

  const std::string bad = testing::TempDir() + "config_test_bad.yaml";
  std::ofstream(bad) << "data:\n  train_batch_size: 8\n  max_promt_length: 4\n";
  const std::string message = error_of([&] { load_config(bad); });
  EXPECT_TRUE(Contains(message, bad + ":3:3: unknown key data.max_promt_length — did you mean data.max_prompt_length?"));
}

TEST(ConfigParse, MissingFileSaysWhichPath) {
  const std::string message = error_of([] { load_config("/nonexistent/hs.yaml"); });
  EXPECT_TRUE(Contains(message, "cannot open config file '/nonexistent/hs.yaml'"));
}

TEST(ConfigParse, InvalidYamlNamesSourceAndLine) {
  const std::string message = file_error("data:\n  train_batch_size: [1, 2\n");
  EXPECT_TRUE(Contains(message, "cfg.yaml:"));
  EXPECT_TRUE(Contains(message, "invalid YAML"));
}

TEST(ConfigParse, TopLevelMustBeAMap) {
  EXPECT_TRUE(Contains(file_error("- data\n- trainer\n"), "the top level must be a map of sections (data, actor_rollout_ref"));
}

TEST(ConfigParse, NullKeepsTheDefaultAsVerlFilesSpellUnset) {
  const Config c = parse_config(
      "actor_rollout_ref:\n  actor:\n    ppo_micro_batch_size_per_gpu: null\n    clip_ratio_low: ~\n"
      "critic:\nreward_model:\n  custom_reward_function:\n    path:\n",
      {"data.seed=5", "data.seed=null"});
  EXPECT_EQ(c.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu, -1);
  EXPECT_DOUBLE_EQ(c.actor_rollout_ref.actor.clip_ratio_low, -1);
  EXPECT_EQ(c.reward_model.custom_reward_function.path, "");
  EXPECT_EQ(c.data.seed, default_config().data.seed);
}

TEST(ConfigParse, DottedKeysInAFileMeanTheSameAsNesting) {
  const Config c = parse_config("actor_rollout_ref.rollout.n: 3\nactor_rollout_ref:\n  rollout.top_k: 5\n");
  EXPECT_EQ(c.actor_rollout_ref.rollout.n, 3);
  EXPECT_EQ(c.actor_rollout_ref.rollout.top_k, 5);
}

TEST(ConfigOverrides, ApplyInOrderAfterTheFile) {
  const Config c = parse_config("actor_rollout_ref:\n  rollout:\n    n: 2\n",
                                {"actor_rollout_ref.rollout.n=3", "actor_rollout_ref.rollout.n=4"});
  EXPECT_EQ(c.actor_rollout_ref.rollout.n, 4);
  const Config file_only = parse_config("actor_rollout_ref:\n  rollout:\n    n: 2\n");
  EXPECT_EQ(file_only.actor_rollout_ref.rollout.n, 2);
}

TEST(ConfigOverrides, ParseValuesAsYamlIncludingFlowLists) {
  const Config c = parse_config("", {"actor_rollout_ref.actor.optim.betas=[0.9,0.95]",
                                     "trainer.logger=[console]",
                                     "trainer.experiment_name='a b'",
                                     "critic.optim.lr=3e-4",
                                     "data.shuffle=False"});
  EXPECT_EQ(c.actor_rollout_ref.actor.optim.betas, (std::array<double, 2>{0.9, 0.95}));
  EXPECT_EQ(c.trainer.logger, (std::vector<std::string>{"console"}));
  EXPECT_EQ(c.trainer.experiment_name, "a b");
  EXPECT_DOUBLE_EQ(c.critic.optim.lr, 3e-4);
  EXPECT_FALSE(c.data.shuffle);
}

TEST(ConfigOverrides, PlusPrefixMeansTheSameForKnownKeys) {
  const Config c = parse_config("", {"+actor_rollout_ref.rollout.n=3", "++data.seed=9"});
  EXPECT_EQ(c.actor_rollout_ref.rollout.n, 3);
  EXPECT_EQ(c.data.seed, 9);
}

TEST(ConfigOverrides, AFlowMapSetsKeysOfASection) {
  const Config c = parse_config("", {"actor_rollout_ref.rollout.val_kwargs={temperature: 0.5, top_k: 5}"});
  EXPECT_DOUBLE_EQ(c.actor_rollout_ref.rollout.val_kwargs.temperature, 0.5);
  EXPECT_EQ(c.actor_rollout_ref.rollout.val_kwargs.top_k, 5);
  EXPECT_DOUBLE_EQ(c.actor_rollout_ref.rollout.val_kwargs.top_p, 1.0);
}

TEST(ConfigOverrides, EmptyValueIsTheEmptyString) {
  const Config c = parse_config("", {"hybridscope.tokenizer=char", "actor_rollout_ref.model.path=x", "actor_rollout_ref.model.path="});
  EXPECT_EQ(c.actor_rollout_ref.model.path, "");
  EXPECT_TRUE(Contains(override_error({"data.train_batch_size="}), "data.train_batch_size: expected an integer, got ''"));
}

TEST(ConfigOverrides, WithoutEqualsSignIsAnError) {
  const std::string message = override_error({"actor_rollout_ref.rollout.n"});
  EXPECT_TRUE(Contains(message, "override 'actor_rollout_ref.rollout.n' has no '='"));
  EXPECT_TRUE(Contains(message, "key=value"));
  EXPECT_TRUE(Contains(override_error({"=3"}), "has an empty key"));
  EXPECT_TRUE(Contains(override_error({"~data.seed"}), "keys cannot be deleted"));
}

// ---------------------------------------------------------------------------------------------
// Interpolation

TEST(ConfigInterpolation, ResolvesAfterOverridesWhateverTheirOrder) {
  const Config c = parse_config("trainer:\n  project_name: from_file\n",
                                {"trainer.experiment_name=e1", "trainer.project_name=p1"});
  EXPECT_EQ(c.trainer.default_local_dir, "checkpoints/p1/e1");
}

TEST(ConfigInterpolation, ReferencesNonStringKeysAndChains) {
  // Unvalidated: the only list of strings, trainer.logger, runs with console alone.
  const Config c = parse_config_unvalidated(
      "hybridscope:\n  db: out/${trainer.default_local_dir}/bs${data.train_batch_size}-${algorithm.adv_estimator}.sqlite\n"
      "trainer:\n  logger: [console, '${trainer.project_name}']\n");
  EXPECT_EQ(c.hybridscope.db, "out/checkpoints/hybridscope/run/bs1024-gae.sqlite");
  EXPECT_EQ(c.trainer.logger, (std::vector<std::string>{"console", "hybridscope"}));
}

TEST(ConfigInterpolation, BackslashEscapesALiteral) {
  const Config c = parse_config("", {R"(trainer.experiment_name=a\${b}c)"});
  EXPECT_EQ(c.trainer.experiment_name, "a${b}c");
  EXPECT_EQ(c.trainer.default_local_dir, "checkpoints/hybridscope/a${b}c");
}

TEST(ConfigInterpolation, CycleIsAnError) {
  const std::string message = override_error(
      {"trainer.project_name=${trainer.experiment_name}", "trainer.experiment_name=${trainer.project_name}"});
  EXPECT_TRUE(Contains(message, "interpolation cycle: trainer.project_name -> trainer.experiment_name -> trainer.project_name"));
}

TEST(ConfigInterpolation, UnknownReferenceSuggestsTheKey) {
  const std::string message = override_error({"hybridscope.db=${trainer.projct_name}.sqlite"});
  EXPECT_TRUE(Contains(message, "hybridscope.db: ${trainer.projct_name} refers to an unknown key — did you mean ${trainer.project_name}?"));
}

TEST(ConfigInterpolation, UnterminatedAndListReferencesAreErrors) {
  EXPECT_TRUE(Contains(override_error({"hybridscope.db=${trainer.project_name"}), "hybridscope.db: unterminated '${'"));
  EXPECT_TRUE(Contains(override_error({"hybridscope.db=${trainer.logger}"}), "${trainer.logger} is a list"));
}

// ---------------------------------------------------------------------------------------------
// to_yaml

TEST(ConfigToYaml, RoundTripsToIdenticalText) {
  const Config c = parse_config(kExampleYaml, {"actor_rollout_ref.actor.optim.lr=3.0000000000000004e-06",
                                               "hybridscope.peak_flops=989e12", "data.val_batch_size=7"});
  const std::string first = to_yaml(c);
  const std::string second = to_yaml(parse_config(first));
  EXPECT_EQ(first, second);
  EXPECT_NE(first, to_yaml(default_config()));  // the non-default values were written
  EXPECT_DOUBLE_EQ(parse_config(first).hybridscope.peak_flops, 989e12);
  EXPECT_EQ(parse_config(first).actor_rollout_ref.actor.optim.lr, 3.0000000000000004e-06);  // exact
}

TEST(ConfigToYaml, KeepsAwkwardStringsExactly) {
  Config c;
  c.trainer.experiment_name = "true";
  c.trainer.project_name = "";
  c.data.val_files = "a: b # not a comment";
  c.hybridscope.db = R"(literal ${x} and \${y} and "quotes")";
  c.trainer.logger = {"console", "null", "", "~"};
  c.data.prompt_key = "123";
  const Config back = parse_config_unvalidated(to_yaml(c));  // the loggers are refused by validate()
  EXPECT_EQ(back.trainer.experiment_name, c.trainer.experiment_name);
  EXPECT_EQ(back.trainer.project_name, c.trainer.project_name);
  EXPECT_EQ(back.data.val_files, c.data.val_files);
  EXPECT_EQ(back.hybridscope.db, c.hybridscope.db);
  EXPECT_EQ(back.trainer.logger, c.trainer.logger);
  EXPECT_EQ(back.data.prompt_key, c.data.prompt_key);
  // An unresolved template survives as text: to_yaml writes values, never re-interpolated.
  EXPECT_EQ(back.trainer.default_local_dir, default_config().trainer.default_local_dir);
}

TEST(ConfigToYaml, WritesNestedMapsWithEveryKey) {
  const Config c = parse_config(kExampleYaml);
  const YAML::Node root = YAML::Load(to_yaml(c));
  EXPECT_EQ(root["actor_rollout_ref"]["rollout"]["val_kwargs"]["n"].as<int>(), 1);
  EXPECT_EQ(root["actor_rollout_ref"]["actor"]["kl_loss_type"].as<std::string>(), "low_var_kl");
  EXPECT_EQ(root["actor_rollout_ref"]["actor"]["optim"]["betas"].size(), 2u);
  EXPECT_EQ(root["hybridscope"]["model"]["num_key_value_heads"].as<int>(), 1);
  EXPECT_EQ(root["trainer"]["default_local_dir"].as<std::string>(), "checkpoints/gsm8k/run");
  std::vector<std::string> top;
  for (const auto& entry : root) top.push_back(entry.first.Scalar());
  EXPECT_EQ(top, (std::vector<std::string>{"data", "actor_rollout_ref", "critic", "reward_model",
                                           "algorithm", "trainer", "async_training", "hybridscope"}));
  std::set<std::string> paths;
  for (const auto& [path, node] : leaves_of(to_yaml(c))) EXPECT_TRUE(paths.insert(path).second) << path;
  EXPECT_GT(paths.size(), 120u);
}

TEST(ConfigToYaml, EveryWrittenKeyIsAcceptedAsAnOverride) {
  for (const auto& [path, node] : leaves_of(to_yaml(default_config()))) {
    YAML::Emitter value;
    value << YAML::Flow << node;
    const std::string text = path + "=" + value.c_str();
    EXPECT_NO_THROW(parse_config("", {text})) << text;
  }
}

// ---------------------------------------------------------------------------------------------
// Unknown keys, wrong types, bad enum values

TEST(ConfigErrors, UnknownKeySuggestsTheClosestKeyAndNamesTheOverride) {
  const std::string message = override_error({"actor_rollout_ref.rollout.tesnor_model_parallel_size=2"});
  EXPECT_TRUE(Contains(message, "override 'actor_rollout_ref.rollout.tesnor_model_parallel_size=2'"));
  EXPECT_TRUE(Contains(message, "unknown key actor_rollout_ref.rollout.tesnor_model_parallel_size — "
                                "did you mean actor_rollout_ref.rollout.tensor_model_parallel_size?"));
}

TEST(ConfigErrors, KeyInTheWrongSectionIsFoundByItsLastSegment) {
  // Two sections hold the name (the rollout layout and the Megatron training layout): both named.
  EXPECT_TRUE(Contains(override_error({"actor_rollout_ref.tensor_model_parallel_size=2"}),
                       "did you mean actor_rollout_ref.rollout.tensor_model_parallel_size or "
                       "actor_rollout_ref.actor.megatron.tensor_model_parallel_size?"));
  EXPECT_TRUE(Contains(override_error({"trainer.adv_estimator=grpo"}), "did you mean algorithm.adv_estimator?"));
}

TEST(ConfigErrors, ShortenedNameInTheSameSectionIsFound) {
  EXPECT_TRUE(Contains(override_error({"actor_rollout_ref.actor.kl_coef=0.1"}), "did you mean actor_rollout_ref.actor.kl_loss_coef?"));
  EXPECT_TRUE(Contains(override_error({"actor_rollout_ref.rollout.val_kwargs.temp=0"}),
                       "did you mean actor_rollout_ref.rollout.val_kwargs.temperature?"));
}

TEST(ConfigErrors, EquallyGoodSuggestionsAreAllNamed) {
  const std::string message = override_error({"trainer.lr=0.1"});
  EXPECT_TRUE(Contains(message, "unknown key trainer.lr — did you mean "));
  EXPECT_TRUE(Contains(message, "actor_rollout_ref.actor.optim.lr"));
  EXPECT_TRUE(Contains(message, "critic.optim.lr"));
  EXPECT_TRUE(Contains(message, "hybridscope.warmup.lr"));
  // A typo beats the same name in another section.
  EXPECT_TRUE(Contains(override_error({"actor_rollout_ref.rolout.n=2"}), "did you mean actor_rollout_ref.rollout.n?"));
}

TEST(ConfigErrors, UnknownSectionInAFileSuggestsTheSectionWithLine) {
  EXPECT_TRUE(Contains(file_error("actor_rollout_ref:\n  rolout:\n    n: 2\n"),
                       "cfg.yaml:2:3: unknown section actor_rollout_ref.rolout — did you mean actor_rollout_ref.rollout?"));
  EXPECT_TRUE(Contains(file_error("algoritm:\n  gamma: 0.9\n"),
                       "cfg.yaml:1:1: unknown section algoritm — did you mean algorithm?"));
}

TEST(ConfigErrors, UnknownKeyWithoutNeighbourListsTheSection) {
  const std::string message = override_error({"data.zzzzzzzzzzzz=1"});
  EXPECT_TRUE(Contains(message, "unknown key data.zzzzzzzzzzzz — data has: train_files, val_files, prompt_key"));
  EXPECT_TRUE(Contains(message, "docs/config.md"));
  EXPECT_TRUE(Contains(override_error({"+data.zzzzzzzzzzzz=1"}), "'+' cannot add keys"));
}

TEST(ConfigErrors, WrongTypeNamesKeyExpectedTypeAndValue) {
  EXPECT_TRUE(Contains(override_error({"data.train_batch_size=abc"}), "data.train_batch_size: expected an integer, got 'abc'"));
  EXPECT_TRUE(Contains(override_error({"data.train_batch_size=1.5"}), "data.train_batch_size: expected an integer, got '1.5'"));
  EXPECT_TRUE(Contains(override_error({"data.train_batch_size=99999999999"}), "expected an integer, got '99999999999'"));
  EXPECT_TRUE(Contains(override_error({"data.train_batch_size=[1, 2]"}), "data.train_batch_size: expected an integer, got [1, 2]"));
  EXPECT_TRUE(Contains(override_error({"data.shuffle=maybe"}), "data.shuffle: expected a boolean (true or false), got 'maybe'"));
  EXPECT_TRUE(Contains(override_error({"actor_rollout_ref.actor.clip_ratio=wide"}), "actor_rollout_ref.actor.clip_ratio: expected a number, got 'wide'"));
  EXPECT_TRUE(Contains(override_error({"hybridscope.seed=-1"}), "hybridscope.seed: expected a non-negative integer, got '-1'"));
  EXPECT_TRUE(Contains(override_error({"actor_rollout_ref.actor.optim.betas=[0.9]"}),
                       "actor_rollout_ref.actor.optim.betas: expected a list of two numbers such as [0.9, 0.999], got [0.9]"));
  EXPECT_TRUE(Contains(override_error({"trainer.logger=console"}), "trainer.logger: expected a list of strings such as [console], got 'console'"));
  EXPECT_TRUE(Contains(override_error({"data.train_files={a: 1}"}), "data.train_files: expected a string, got a map"));
  EXPECT_TRUE(Contains(file_error("data:\n  max_prompt_length: many\n"), "cfg.yaml:2:3: data.max_prompt_length: expected an integer, got 'many'"));
}

// The keys that were strings parsed again where they were used are typed at load time: a bad
// value is the loader's error, with the valid spellings and the nearest one.
TEST(ConfigErrors, EnumKeysListTheValuesAndSuggestTheNearest) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"actor_rollout_ref.actor.strategy=fdsp", "actor_rollout_ref.actor.strategy: expected one of fsdp, megatron, got 'fdsp' — did you mean fsdp?"},
      {"hybridscope.reshard.mode=hybird", "hybridscope.reshard.mode: expected one of hybrid, vanilla, naive, got 'hybird' — did you mean hybrid?"},
      {"hybridscope.precision=bf61", "hybridscope.precision: expected one of fp32, bf16, got 'bf61' — did you mean bf16?"},
      {"hybridscope.attention=eagre", "hybridscope.attention: expected one of auto, sdpa, eager, flash, got 'eagre' — did you mean eager?"},
      {"hybridscope.dist.backend=ncl", "hybridscope.dist.backend: expected one of auto, gloo, nccl, got 'ncl' — did you mean nccl?"},
      {"trainer.resume_mode=disabled", "trainer.resume_mode: expected one of auto, disable, got 'disabled' — did you mean disable?"},
      {"trainer.device=cdua", "trainer.device: expected one of cpu, cuda, got 'cdua' — did you mean cuda?"},
      {"actor_rollout_ref.actor.optim.warmup_style=cosin", "actor_rollout_ref.actor.optim.warmup_style: expected one of constant, cosine, got 'cosin' — did you mean cosine?"},
      {"critic.optim.warmup_style=linear", "critic.optim.warmup_style: expected one of constant, cosine, got 'linear'"},
      {"reward_model.rule=gms8k", "reward_model.rule: expected one of gsm8k, got 'gms8k' — did you mean gsm8k?"},
      {"hybridscope.tokenizer=gpt2-bpe", "hybridscope.tokenizer: expected one of auto, char, hf, got 'gpt2-bpe'"},
      {"hybridscope.recorder.on_write_error=stopp", "hybridscope.recorder.on_write_error: expected one of continue, stop, got 'stopp' — did you mean stop?"},
      {"hybridscope.placement.ref=[2, x]", "hybridscope.placement.ref: expected a list of integers such as [0, 1], got [2, x]"},
  };
  for (const auto& [override_text, expected] : cases) {
    EXPECT_EQ(override_error({override_text}), "override '" + override_text + "': " + expected);
  }
  // Far from every spelling: no suggestion, the list says what is valid.
  EXPECT_EQ(override_error({"actor_rollout_ref.actor.strategy=deepspeed"}),
            "override 'actor_rollout_ref.actor.strategy=deepspeed': actor_rollout_ref.actor.strategy: expected one of "
            "fsdp, megatron, got 'deepspeed'");
}

TEST(ConfigTypes, EnumKeysAndRanksParseToTypedValuesAndBack) {
  const Config c = parse_config(
      "", {"actor_rollout_ref.actor.strategy=megatron", "hybridscope.reshard.mode=naive", "hybridscope.precision=bf16",
           "hybridscope.attention=eager", "trainer.resume_mode=disable", "actor_rollout_ref.actor.optim.warmup_style=cosine",
           "trainer.n_gpus_per_node=4", "algorithm.adv_estimator=grpo", "actor_rollout_ref.rollout.n=2",
           "actor_rollout_ref.actor.use_kl_loss=true", "data.train_batch_size=8", "actor_rollout_ref.actor.ppo_mini_batch_size=4",
           "hybridscope.placement.ref=[3, 2]", "hybridscope.recorder.on_write_error=stop"});
  EXPECT_EQ(c.actor_rollout_ref.actor.strategy, ActorStrategy::kMegatron);
  EXPECT_EQ(c.hybridscope.recorder.on_write_error, OnWriteError::kStop);
  const Config defaults;
  EXPECT_EQ(defaults.hybridscope.recorder.on_write_error, OnWriteError::kContinue);
  EXPECT_EQ(c.hybridscope.reshard.mode, ReshardMode::kNaive);
  EXPECT_EQ(c.hybridscope.precision, Precision::kBf16);
  EXPECT_EQ(c.hybridscope.attention, AttentionKernel::kEager);
  EXPECT_EQ(c.trainer.resume_mode, ResumeMode::kDisable);
  EXPECT_EQ(c.actor_rollout_ref.actor.optim.warmup_style, WarmupStyle::kCosine);
  EXPECT_EQ(c.hybridscope.placement.ref, (std::vector<int>{3, 2}));
  EXPECT_EQ(c.world_size(), 4);
  const Placement placement = resolved_placement(c);
  EXPECT_EQ(placement.actor, (std::vector<int>{0, 1}));  // the ranks the reference leaves
  EXPECT_EQ(placement.ref, (std::vector<int>{2, 3}));    // ascending
  // Written back as YAML and read again: the same typed values.
  const Config again = parse_config(to_yaml(c));
  EXPECT_EQ(to_yaml(again), to_yaml(c));
  EXPECT_EQ(again.hybridscope.placement.ref, (std::vector<int>{3, 2}));
  EXPECT_EQ(again.hybridscope.recorder.on_write_error, OnWriteError::kStop);
  EXPECT_EQ(from_string<ReshardMode>("vanilla"), ReshardMode::kVanilla);
  EXPECT_EQ(from_string<ReshardMode>("hybird"), std::nullopt);
  EXPECT_EQ(spellings<ActorStrategy>(), (std::vector<std::string>{"fsdp", "megatron"}));
}

TEST(ConfigErrors, SectionGivenAValueSaysToSetItsKeys) {
  EXPECT_TRUE(Contains(override_error({"actor_rollout_ref.actor.optim=1e-5"}),
                       "actor_rollout_ref.actor.optim is a section (lr, weight_decay, betas"));
}

TEST(ConfigErrors, BadEnumListsTheValidSpellings) {
  EXPECT_TRUE(Contains(override_error({"algorithm.adv_estimator=gpro"}),
                       "algorithm.adv_estimator: expected one of gae, grpo, rloo, reinforce_plus_plus, "
                       "reinforce_plus_plus_baseline, remax, opo, grpo_passk, gpg, got 'gpro' — did you mean grpo?"));
  EXPECT_TRUE(Contains(override_error({"data.truncation=middle"}), "data.truncation: expected one of error, left, right, got 'middle'"));
  EXPECT_TRUE(Contains(override_error({"algorithm.kl_penalty=k4"}), "expected one of kl, k1, abs, mse, k2, low_var_kl, k3, got 'k4'"));
  EXPECT_TRUE(Contains(override_error({"actor_rollout_ref.actor.loss_agg_mode=token_mean"}), "did you mean token-mean?"));
  EXPECT_TRUE(Contains(override_error({"algorithm.kl_ctrl.type=pid"}), "algorithm.kl_ctrl.type: expected one of fixed, adaptive"));
}

// ---------------------------------------------------------------------------------------------
// validate(): every rule, with the keys and values it must name

struct RuleCase {
  const char* name;
  std::vector<std::string> overrides;
  std::vector<std::string> expected;  // substrings of the message
};

class ConfigValidate : public testing::TestWithParam<RuleCase> {};

TEST_P(ConfigValidate, RejectsWithKeysAndValues) {
  const std::string message = override_error(GetParam().overrides);
  EXPECT_TRUE(Contains(message, "invalid configuration"));
  for (const auto& part : GetParam().expected) EXPECT_TRUE(Contains(message, part));
}

const std::vector<RuleCase> kRuleCases = {
    {"PipelineStagesDivideLayers", {"actor_rollout_ref.actor.megatron.pipeline_model_parallel_size=3"},
     {"actor_rollout_ref.actor.megatron.pipeline_model_parallel_size = 3 does not divide "
      "hybridscope.model.num_hidden_layers = 2"}},
    {"TrainingTpSplitsHeads", {"actor_rollout_ref.actor.megatron.tensor_model_parallel_size=4"},
     {"actor_rollout_ref.actor.megatron.tensor_model_parallel_size = 4 must divide "
      "hybridscope.model.num_key_value_heads (2)"}},
    {"RolloutTpSplitsHeads", {"actor_rollout_ref.rollout.tensor_model_parallel_size=3"},
     {"actor_rollout_ref.rollout.tensor_model_parallel_size = 3 must divide"}},
    {"HybridTpsNest",
     {"hybridscope.model.num_key_value_heads=4", "hybridscope.model.intermediate_size=384",
      "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2", "actor_rollout_ref.rollout.tensor_model_parallel_size=3",
      "hybridscope.model.num_attention_heads=12", "hybridscope.model.hidden_size=192"},
     {"hybridscope.reshard.mode = hybrid needs actor_rollout_ref.rollout.tensor_model_parallel_size (3)"}},
    {"TrainingTpPositive", {"actor_rollout_ref.actor.megatron.tensor_model_parallel_size=0"},
     {"actor_rollout_ref.actor.megatron.tensor_model_parallel_size = 0: must be >= 1"}},
    {"HeadsDivideHidden", {"hybridscope.model.hidden_size=130"},
     {"hybridscope.model.hidden_size (130) is not divisible by hybridscope.model.num_attention_heads (4)"}},
    {"KvHeadsDivideHeads", {"hybridscope.model.num_key_value_heads=3"},
     {"hybridscope.model.num_attention_heads (4) is not divisible by hybridscope.model.num_key_value_heads (3)"}},
    {"HeadDimEven", {"hybridscope.model.hidden_size=12"},
     {"head_dim = hybridscope.model.hidden_size (12) / hybridscope.model.num_attention_heads (4) = 3 is odd"}},
    {"HeadsPositive", {"hybridscope.model.num_attention_heads=0"},
     {"num_attention_heads (0)", "must all be >= 1"}},
    {"ModelSizesPositive", {"hybridscope.model.num_hidden_layers=0", "hybridscope.model.rms_norm_eps=0"},
     {"hybridscope.model.num_hidden_layers = 0: must be >= 1", "hybridscope.model.rms_norm_eps = 0: must be > 0"}},
    {"TrainBatchDividesByActorMini", {"data.train_batch_size=1000"},
     {"data.train_batch_size (1000) is not divisible by actor_rollout_ref.actor.ppo_mini_batch_size (256)",
      "data.train_batch_size (1000) is not divisible by critic.ppo_mini_batch_size (256)"}},
    {"TrainBatchDividesByCriticMini", {"critic.ppo_mini_batch_size=300"},
     {"data.train_batch_size (1024) is not divisible by critic.ppo_mini_batch_size (300)"}},
    {"ActorMicroDividesMiniTimesN", {"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=6"},
     {"actor_rollout_ref.actor.ppo_mini_batch_size (256) x actor_rollout_ref.rollout.n (1) = 256 samples is not "
      "divisible by actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu (6)"}},
    {"CriticMicroDividesMiniTimesN", {"critic.ppo_micro_batch_size_per_gpu=3", "actor_rollout_ref.rollout.n=2"},
     {"critic.ppo_mini_batch_size (256) x actor_rollout_ref.rollout.n (2) = 512 samples is not divisible by "
      "critic.ppo_micro_batch_size_per_gpu (3)"}},
    {"MicroZero", {"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=0"},
     {"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu = 0: must be -1 (whole mini-batch) or >= 1"}},
    {"MiniZero", {"actor_rollout_ref.actor.ppo_mini_batch_size=0"},
     {"actor_rollout_ref.actor.ppo_mini_batch_size = 0: must be >= 1"}},
    {"PpoEpochs", {"actor_rollout_ref.actor.ppo_epochs=0"}, {"actor_rollout_ref.actor.ppo_epochs = 0: must be >= 1"}},
    {"TrainBatchPositive", {"data.train_batch_size=0"}, {"data.train_batch_size = 0: must be >= 1"}},
    {"RolloutNPositive", {"actor_rollout_ref.rollout.n=0"}, {"actor_rollout_ref.rollout.n = 0: must be >= 1"}},
    {"GrpoNeedsGroups", {"algorithm.adv_estimator=grpo"},
     {"algorithm.adv_estimator = grpo", "actor_rollout_ref.rollout.n = 1", "set actor_rollout_ref.rollout.n >= 2"}},
    {"RlooNeedsGroups", {"algorithm.adv_estimator=rloo"}, {"algorithm.adv_estimator = rloo", "actor_rollout_ref.rollout.n = 1"}},
    {"RppBaselineNeedsGroups", {"algorithm.adv_estimator=reinforce_plus_plus_baseline"},
     {"algorithm.adv_estimator = reinforce_plus_plus_baseline", "actor_rollout_ref.rollout.n = 1"}},
    {"DualClipAboveOne", {"actor_rollout_ref.actor.clip_ratio_c=1.0"},
     {"actor_rollout_ref.actor.clip_ratio_c = 1: the dual-clip constant must be > 1"}},
    {"ClipRatioNegative", {"actor_rollout_ref.actor.clip_ratio=-0.1"}, {"actor_rollout_ref.actor.clip_ratio = -0.1: must be >= 0"}},
    {"ClipLowNegative", {"actor_rollout_ref.actor.clip_ratio_low=-0.5"},
     {"actor_rollout_ref.actor.clip_ratio_low = -0.5: must be -1 (use clip_ratio) or >= 0"}},
    {"ClipHighNegative", {"actor_rollout_ref.actor.clip_ratio_high=-2"},
     {"actor_rollout_ref.actor.clip_ratio_high = -2: must be -1 (use clip_ratio) or >= 0"}},
    {"LengthsFitPositions", {"data.max_prompt_length=1000"},
     {"data.max_prompt_length (1000) + data.max_response_length (512) = 1512 exceeds "
      "hybridscope.model.max_position_embeddings (1024)"}},
    {"TemperatureNonNegative", {"actor_rollout_ref.rollout.temperature=-1"},
     {"actor_rollout_ref.rollout.temperature = -1: must be >= 0"}},
    {"TopPZero", {"actor_rollout_ref.rollout.top_p=0"}, {"actor_rollout_ref.rollout.top_p = 0: must be in (0, 1]"}},
    {"TopPAboveOne", {"actor_rollout_ref.rollout.top_p=1.5"}, {"actor_rollout_ref.rollout.top_p = 1.5: must be in (0, 1]"}},
    {"TopKZero", {"actor_rollout_ref.rollout.top_k=0"}, {"actor_rollout_ref.rollout.top_k = 0: must be -1 (off) or >= 1"}},
    {"ValKwargs", {"actor_rollout_ref.rollout.val_kwargs.top_p=0", "actor_rollout_ref.rollout.val_kwargs.n=0"},
     {"actor_rollout_ref.rollout.val_kwargs.top_p = 0", "actor_rollout_ref.rollout.val_kwargs.n = 0"}},
    {"ActorLr", {"actor_rollout_ref.actor.optim.lr=-1e-6"}, {"actor_rollout_ref.actor.optim.lr = -1e-06: must be >= 0"}},
    {"CriticLr", {"critic.optim.lr=-1"}, {"critic.optim.lr = -1: must be >= 0"}},
    {"Betas", {"actor_rollout_ref.actor.optim.betas=[0.9, 1.0]"}, {"actor_rollout_ref.actor.optim.betas = [0.9, 1]: each beta must be in [0, 1)"}},
    {"TotalEpochs", {"trainer.total_epochs=0"}, {"trainer.total_epochs = 0: must be >= 1"}},
    {"Ranks", {"trainer.nnodes=0", "trainer.n_gpus_per_node=0"},
     {"trainer.nnodes = 0: must be >= 1", "trainer.n_gpus_per_node = 0: must be >= 1"}},
    {"SaveFreqZero", {"trainer.save_freq=0"}, {"trainer.save_freq = 0: must be -1 (unset) or >= 1"}},
    {"KvBlockSize", {"hybridscope.kv_block_size=0"}, {"hybridscope.kv_block_size = 0: must be >= 1"}},
    {"NumThreads", {"hybridscope.num_threads=0"}, {"hybridscope.num_threads = 0: must be >= 1"}},
    {"WarmupSteps", {"hybridscope.warmup.steps=-1"}, {"hybridscope.warmup.steps = -1: must be >= 0"}},
    {"TensorParallel", {"actor_rollout_ref.rollout.tensor_model_parallel_size=0"},
     {"actor_rollout_ref.rollout.tensor_model_parallel_size = 0: must be >= 1"}},
    {"GpuMemory", {"actor_rollout_ref.rollout.gpu_memory_utilization=0"},
     {"actor_rollout_ref.rollout.gpu_memory_utilization = 0: must be in (0, 1]"}},
    {"Gamma", {"algorithm.gamma=1.5"}, {"algorithm.gamma = 1.5: must be in [0, 1]"}},
    {"AdaptiveKlTarget", {"algorithm.kl_ctrl.type=adaptive", "algorithm.kl_ctrl.target_kl=0"},
     {"algorithm.kl_ctrl.target_kl = 0: the adaptive controller (algorithm.kl_ctrl.type = adaptive) needs a target > 0"}},
    {"AllProblemsAtOnce", {"hybridscope.num_threads=0", "trainer.total_epochs=0"},
     {"invalid configuration (2 problems):", "hybridscope.num_threads = 0", "trainer.total_epochs = 0"}},
};

INSTANTIATE_TEST_SUITE_P(Rules, ConfigValidate, testing::ValuesIn(kRuleCases),
                         [](const testing::TestParamInfo<RuleCase>& info) { return info.param.name; });

TEST(ConfigValidateScope, RulesApplyOnlyWhereTheyMatter) {
  // No critic outside GAE, so its batch sizes are not checked.
  EXPECT_NO_THROW(parse_config("", {"algorithm.adv_estimator=grpo", "actor_rollout_ref.rollout.n=2",
                                    "critic.ppo_mini_batch_size=300"}));
  // The micro-batch divides mini x n (6 divides 256 x 3), and is ignored with dynamic batch sizes.
  EXPECT_NO_THROW(parse_config("", {"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=6",
                                    "critic.ppo_micro_batch_size_per_gpu=6", "actor_rollout_ref.rollout.n=3"}));
  EXPECT_NO_THROW(parse_config("", {"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=6",
                                    "actor_rollout_ref.actor.use_dynamic_bsz=true"}));
  // A model directory brings its own max_position_embeddings.
  EXPECT_NO_THROW(parse_config("", {"data.max_prompt_length=1000", "actor_rollout_ref.model.path=models/qwen"}));
  // Estimators without groups run with n = 1.
  for (const char* estimator : {"gae", "remax", "reinforce_plus_plus"}) {
    EXPECT_NO_THROW(parse_config("", {std::string{"algorithm.adv_estimator="} + estimator})) << estimator;
  }
}

TEST(ConfigValidateScope, ValidateChecksAStructBuiltInCode) {
  Config c;
  c.hybridscope.num_threads = 0;
  EXPECT_TRUE(Contains(error_of([&] { validate(c); }), "hybridscope.num_threads = 0: must be >= 1"));
}

// ---------------------------------------------------------------------------------------------
// docs/config.md

TEST(ConfigValidate, DistributedKeys) {
  Config c = default_config();
  c.hybridscope.dist.backend = DistBackendChoice::kNccl;
  EXPECT_TRUE(Contains(error_of([&] { validate(c); }), "nccl moves CUDA tensors only"));
  c = default_config();
  c.hybridscope.dist.timeout_s = 0;
  EXPECT_TRUE(Contains(error_of([&] { validate(c); }), "hybridscope.dist.timeout_s = 0"));
  c = default_config();
  c.trainer.n_gpus_per_node = 4;
  c.data.train_batch_size = 6;
  c.actor_rollout_ref.actor.ppo_mini_batch_size = 6;
  EXPECT_TRUE(Contains(error_of([&] { validate(c); }), "data.train_batch_size (6) is not divisible by the 4 data-parallel ranks"));
  c.actor_rollout_ref.actor.megatron.tensor_model_parallel_size = 3;
  EXPECT_TRUE(Contains(error_of([&] { validate(c); }), "is not divisible by actor_rollout_ref.actor.megatron"));
}

// An allocator setting for a device the run does not use is refused, not ignored.
TEST(ConfigValidate, ExpandableSegmentsNeedACudaRun) {
  Config c = default_config();
  c.hybridscope.expandable_segments = true;
  EXPECT_TRUE(Contains(error_of([&] { validate(c); }), "hybridscope.expandable_segments = true configures the CUDA"));
  EXPECT_TRUE(parse_config("", {"trainer.device=cuda", "hybridscope.expandable_segments=true"})
                  .hybridscope.expandable_segments);
}

// verl's example scripts name vllm and wandb: accepted, and each substitution is said, not hidden.
TEST(ConfigSubstitutions, VerlScriptValuesAreAcceptedAndSaid) {
  Config plain;
  EXPECT_TRUE(substitutions(plain).empty());
  const Config verl = parse_config("", {"actor_rollout_ref.rollout.name=vllm", "trainer.logger=[console, wandb]"});
  const auto lines = substitutions(verl);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_NE(lines[0].find("rollout.name=vllm: generating with hybridscope's built-in paged-KV engine"), std::string::npos)
      << lines[0];
  EXPECT_NE(lines[1].find("trainer.logger 'wandb': not linked into hybridscope"), std::string::npos) << lines[1];
  // auto: the char tokenizer unless a tokenizer or a model directory with tokenizer.json is named.
  EXPECT_EQ(resolved_tokenizer(plain), TokenizerKind::kChar);
  EXPECT_EQ(resolved_tokenizer(parse_config("", {"data.tokenizer=/some/dir"})), TokenizerKind::kHf);
  EXPECT_EQ(resolved_tokenizer(parse_config("", {"hybridscope.tokenizer=char", "data.tokenizer=/some/dir"})),
            TokenizerKind::kChar);
}

TEST(ConfigDocs, CarryTheGeneratedKeyReference) {
  const std::string docs = read_file(std::string{HS_SOURCE_DIR} + "/docs/config.md");
  ASSERT_FALSE(docs.empty()) << "docs/config.md is missing";
  const std::string reference = config_reference_markdown();
  if (docs.find(reference) == std::string::npos) {
    const std::string fresh = std::string{HS_BINARY_DIR} + "/config-reference.md";
    std::ofstream(fresh) << reference;
    ADD_FAILURE() << "docs/config.md is out of date with the key table: replace the tables between "
                     "<!-- keys:begin --> and <!-- keys:end --> with " << fresh;
  }
}

TEST(ConfigDocs, MentionEveryKeyThatToYamlWrites) {
  const std::string docs = read_file(std::string{HS_SOURCE_DIR} + "/docs/config.md");
  const auto begin = docs.find("<!-- keys:begin -->");
  const auto end = docs.find("<!-- keys:end -->");
  ASSERT_NE(begin, std::string::npos);
  ASSERT_NE(end, std::string::npos);
  const std::string tables = docs.substr(begin, end - begin);
  std::size_t count = 0;
  for (const auto& [path, node] : leaves_of(to_yaml(default_config()))) {
    EXPECT_TRUE(Contains(tables, "| `" + path + "` |")) << "docs/config.md has no row for " << path;
    ++count;
  }
  std::size_t rows = 0;  // one row per key, no stale rows
  for (auto at = tables.find("\n| `"); at != std::string::npos; at = tables.find("\n| `", at + 1)) ++rows;
  EXPECT_EQ(rows, count);
}

}  // namespace
}  // namespace hs::trainer
