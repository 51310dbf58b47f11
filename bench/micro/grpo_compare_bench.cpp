// grpo_compare_bench.cpp — hybridscope's GRPO step against a plain PyTorch GRPO step (issue 21,
// part 4b): the same LibTorch, threads, model and step shapes, interleaved in one run, real tokens/s
// of each phase and their ratio. docs/benchmarks.md has the command and the figures.
//
// hybridscope's side is the real trainer (PPOTrainer::train_step) on configs/demo_grpo.yaml with
// the shape's overrides (and the user's --set overrides after them); the plain side is
// bench/micro/grpo_plain_peer.py, started once as a subprocess that answers one step per line.
// Steps alternate hs, plain, plain, hs, hs, plain, ... (each pair swaps its order, so drift in the
// machine's speed cancels) after one warm-up step each. Without python or torch the benchmark
// says why and exits 0 (skipped), as Google Benchmark's SkipWithError does.
//
// Fairness: both sides generate with temperature 1 over the char tokenizer's 98 ids from a model
// initialised N(0, 0.02), and stop a response at EOS or max_response_length; responses of a random
// policy therefore have the same length distribution on both sides (nearly geometric with mean
// ~98 tokens, cut at the maximum), and the figures are per real (unpadded) token, counted by each
// side from its own batch. Not what this is: a comparison of vLLM or FSDP, or of GPU kernels.
#include <malloc.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "hybridscope/bench/run_environment.h"
#include "hybridscope/trainer/config/config.h"
#include "hybridscope/trainer/loop/trainer.h"
#include "hybridscope/trainer/model/model.h"

namespace {

using hs::trainer::Config;
using nlohmann::json;

/// One compared shape: the model and the step's batch.
struct StepShape {
  std::string name;
  std::string what;  // for the report
  int hidden, intermediate, layers, heads, kv_heads;
  int prompts, n, prompt_length, max_response_length;
};

// (a) and (b) are the shapes; (c) gives responses of very different lengths (1..256).
const std::vector<StepShape> kShapes = {
    {"a", "hidden 512, 4 layers, 8 prompts x 4, 64 + 64 tokens", 512, 1536, 4, 8, 4, 8, 4, 64, 64},
    {"b", "hidden 128 (the demo's model), 2 layers, 8 prompts x 4, 64 + 64 tokens", 128, 384, 2, 4, 2, 8, 4, 64, 64},
    {"c", "hidden 512, 4 layers, 8 prompts x 4, 64 + up to 256 tokens (lengths 1..256)", 512, 1536, 4, 8, 4, 8, 4,
     64, 256},
};

// The `hybridscope` command's heap settings (cli/main.cpp): LibTorch's large temporaries stay in
// the heap instead of being mmap'ed and unmapped on every op. Both sides run with them.
constexpr int kMmapThreshold = 32 * 1024 * 1024;
constexpr int kTrimThreshold = 256 * 1024 * 1024;

/// Why the comparison cannot run (no python, no torch): reported as a skip, not a failure.
class PeerUnavailable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// grpo_plain_peer.py as a child process: one JSON line in, one JSON line out.
class PlainPeer {
 public:
  PlainPeer(const std::string& python, const std::string& script) {
    int to_child[2], from_child[2];
    if (::pipe(to_child) != 0 || ::pipe(from_child) != 0) throw std::runtime_error("PlainPeer: pipe() failed");
    pid_ = ::fork();
    if (pid_ < 0) throw std::runtime_error("PlainPeer: fork() failed");
    if (pid_ == 0) {
      ::dup2(to_child[0], STDIN_FILENO);
      ::dup2(from_child[1], STDOUT_FILENO);
      ::close(to_child[1]);
      ::close(from_child[0]);
      // The same glibc heap settings as this process (main()), through glibc's environment tunables.
      ::setenv("MALLOC_MMAP_THRESHOLD_", std::to_string(kMmapThreshold).c_str(), 1);
      ::setenv("MALLOC_TRIM_THRESHOLD_", std::to_string(kTrimThreshold).c_str(), 1);
      ::execlp(python.c_str(), python.c_str(), script.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);  // exec failed: the parent reads EOF
    }
    ::close(to_child[0]);
    ::close(from_child[1]);
    to_ = ::fdopen(to_child[1], "w");
    from_ = ::fdopen(from_child[0], "r");
  }
  ~PlainPeer() {
    if (to_ != nullptr) {
      std::fputs("{\"cmd\": \"quit\"}\n", to_);
      std::fclose(to_);
    }
    if (from_ != nullptr) std::fclose(from_);
    int status = 0;
    if (pid_ > 0) ::waitpid(pid_, &status, 0);
  }
  PlainPeer(const PlainPeer&) = delete;
  PlainPeer& operator=(const PlainPeer&) = delete;

  /// Sends `command`, returns the reply; throws PeerUnavailable when the peer is gone or refuses.
  json call(const json& command) {
    const std::string line = command.dump() + "\n";
    if (std::fputs(line.c_str(), to_) < 0 || std::fflush(to_) != 0)
      throw PeerUnavailable("the plain peer is not running (python missing or exited)");
    std::string reply;
    for (int c = std::fgetc(from_); c != EOF && c != '\n'; c = std::fgetc(from_)) reply.push_back(static_cast<char>(c));
    if (reply.empty()) throw PeerUnavailable("the plain peer exited without a reply (python missing or crashed)");
    auto out = json::parse(reply);
    if (!out.value("ok", false)) throw PeerUnavailable("the plain peer refused: " + out.value("error", reply));
    return out;
  }

 private:
  pid_t pid_ = -1;
  FILE* to_ = nullptr;
  FILE* from_ = nullptr;
};

/// Prompts of exactly `length` tokens (bos + length - 1 printable characters) for the trainer's
/// dataset; the addition task's reward scores them 0, which changes no cost.
void write_prompts(const std::filesystem::path& path, int count, int length) {
  std::ofstream f(path);
  std::mt19937 rng(1);
  std::uniform_int_distribution<int> ch('a', 'z');
  for (int i = 0; i < count; ++i) {
    std::string text;
    for (int t = 0; t < length - 1; ++t) text.push_back(static_cast<char>(ch(rng)));
    f << json{{"data_source", "hybridscope/addition"},
              {"prompt", json::array({json{{"role", "user"}, {"content", text}}})},
              {"reward_model", json{{"style", "rule"}, {"ground_truth", "0"}}}}
             .dump()
      << "\n";
  }
}

/// The trainer's config for `shape`: demo_grpo.yaml, the shape's overrides, then `user` (--set).
Config hybridscope_config(const StepShape& s, const std::filesystem::path& dir, const std::vector<std::string>& user) {
  const auto prompts = (dir / "prompts.jsonl").string();
  std::vector<std::string> o = {
      "data.train_files=" + prompts,
      "data.val_files=" + prompts,
      fmt::format("data.max_prompt_length={}", s.prompt_length),
      fmt::format("data.max_response_length={}", s.max_response_length),
      fmt::format("data.train_batch_size={}", s.prompts),
      fmt::format("actor_rollout_ref.rollout.n={}", s.n),
      "actor_rollout_ref.rollout.temperature=1.0",
      "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=16",
      "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=16",
      "actor_rollout_ref.actor.ppo_mini_batch_size=4",
      "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8",
      "actor_rollout_ref.actor.use_kl_loss=true",
      "actor_rollout_ref.actor.kl_loss_type=low_var_kl",
      "actor_rollout_ref.actor.kl_loss_coef=0.001",
      "actor_rollout_ref.actor.optim.lr=1e-6",
      fmt::format("hybridscope.model.hidden_size={}", s.hidden),
      fmt::format("hybridscope.model.intermediate_size={}", s.intermediate),
      fmt::format("hybridscope.model.num_hidden_layers={}", s.layers),
      fmt::format("hybridscope.model.num_attention_heads={}", s.heads),
      fmt::format("hybridscope.model.num_key_value_heads={}", s.kv_heads),
      fmt::format("hybridscope.model.max_position_embeddings={}", s.prompt_length + s.max_response_length),
      "hybridscope.num_threads=2",
      "hybridscope.warmup.steps=0",
      "hybridscope.peak_flops=1e11",  // no GEMM measurement at start (MFU is not compared)
      "hybridscope.db=" + (dir / "hybridscope.sqlite").string(),
      "trainer.total_training_steps=100000",
      "trainer.test_freq=-1",
      "trainer.save_freq=-1",
      "trainer.val_before_train=false",
      "trainer.resume_mode=disable",
  };
  o.insert(o.end(), user.begin(), user.end());
  return hs::trainer::load_config(std::string(HS_SOURCE_DIR) + "/configs/demo_grpo.yaml", o);
}

/// The peer's init command, from the same parsed config (so a --set reaches both sides).
json peer_init(const Config& cfg, const StepShape& s, int vocab_size) {
  const auto& m = cfg.hybridscope.model;
  const auto& a = cfg.actor_rollout_ref.actor;
  return {{"cmd", "init"},
          {"vocab_size", vocab_size},
          {"hidden_size", m.hidden_size},
          {"intermediate_size", m.intermediate_size},
          {"num_hidden_layers", m.num_hidden_layers},
          {"num_attention_heads", m.num_attention_heads},
          {"num_key_value_heads", m.num_key_value_heads},
          {"max_position_embeddings", m.max_position_embeddings},
          {"rope_theta", m.rope_theta},
          {"rms_norm_eps", m.rms_norm_eps},
          {"prompts", cfg.data.train_batch_size},
          {"n", cfg.actor_rollout_ref.rollout.n},
          {"temperature", cfg.actor_rollout_ref.rollout.temperature},
          {"prompt_length", s.prompt_length},
          {"max_response_length", cfg.data.max_response_length},
          {"log_prob_micro_batch_size", cfg.actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu},
          {"ppo_mini_batch_size", a.ppo_mini_batch_size},
          {"ppo_micro_batch_size", a.ppo_micro_batch_size_per_gpu},
          {"clip_ratio", a.clip_ratio},
          {"kl_loss_coef", a.kl_loss_coef},
          {"grad_clip", a.grad_clip},
          {"lr", a.optim.lr},
          {"weight_decay", a.optim.weight_decay},
          {"num_threads", cfg.hybridscope.num_threads},
          {"seed", cfg.hybridscope.seed}};
}

// The compared phases: hybridscope's timing_s/<phase> name, the peer's <key>_s, and whether the
// phase's tokens are response tokens (gen) or prompt + response tokens (verl's convention).
struct Phase {
  const char* label;
  const char* hs_metric;
  const char* peer_key;
  bool response_tokens;
};
const Phase kPhases[] = {{"generation", "timing_s/gen", "gen_s", true},
                         {"old log-prob", "timing_s/old_log_prob", "old_log_prob_s", false},
                         {"ref log-prob", "timing_s/ref", "ref_s", false},
                         {"update", "timing_s/update_actor", "update_s", false},
                         {"whole step", "timing_s/step", "step_s", false}};

/// One side's step: seconds per phase and its real token counts.
struct StepSample {
  std::map<std::string, double> seconds;  // by Phase::label
  double response_tokens = 0, total_tokens = 0, max_response = 0, min_response = 0;
  double tokens_per_s(const Phase& p) const {
    return (p.response_tokens ? response_tokens : total_tokens) / seconds.at(p.label);
  }
};

double metric(const std::vector<std::pair<std::string, double>>& metrics, const std::string& name) {
  for (const auto& [n, v] : metrics)
    if (n == name) return v;
  throw std::runtime_error("hybridscope's step reported no " + name);
}

StepSample hybridscope_step(hs::trainer::PPOTrainer& trainer, const Config& cfg) {
  const auto m = trainer.train_step();
  StepSample s;
  for (const auto& p : kPhases) s.seconds[p.label] = metric(m, p.hs_metric);
  const double rows = static_cast<double>(cfg.data.train_batch_size) * cfg.actor_rollout_ref.rollout.n;
  s.response_tokens = metric(m, "response_length/mean") * rows;
  s.total_tokens = metric(m, "perf/total_num_tokens");
  s.max_response = metric(m, "response_length/max");
  s.min_response = metric(m, "response_length/min");
  return s;
}

StepSample plain_step(PlainPeer& peer) {
  const json r = peer.call({{"cmd", "step"}});
  StepSample s;
  for (const auto& p : kPhases) s.seconds[p.label] = r.at(p.peer_key).get<double>();
  s.response_tokens = r.at("response_tokens").get<double>();
  s.total_tokens = r.at("total_tokens").get<double>();
  s.max_response = r.at("max_response_length").get<double>();
  s.min_response = r.at("min_response_length").get<double>();
  return s;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n == 0 ? 0.0 : (n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]));
}

struct Options {
  std::vector<std::string> shapes{"a", "b", "c"};
  int steps = 5;
  int warmup = 1;
  std::string python;
  std::vector<std::string> overrides;
  std::string json_out;
};

/// Runs one shape; returns its JSON (the report's row) and prints its table.
json compare(const StepShape& shape, const Options& o, PlainPeer& peer) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / fmt::format("hs_grpo_compare_{}_{}", ::getpid(), shape.name);
  fs::create_directories(dir);
  write_prompts(dir / "prompts.jsonl", 64, shape.prompt_length);
  const Config cfg = hybridscope_config(shape, dir, o.overrides);
  constexpr int kCharVocab = 98;  // the demo config's char tokenizer (tokenizer.h)
  hs::trainer::ModelShape model_shape = cfg.hybridscope.model;
  model_shape.vocab_size = kCharVocab;
  const std::int64_t hs_params = hs::trainer::Transformer(model_shape, hs::trainer::HeadKind::kLm)->num_parameters();
  const json init = peer.call(peer_init(cfg, shape, kCharVocab));
  if (init.at("parameters").get<std::int64_t>() != hs_params)
    throw std::runtime_error(fmt::format("shape {}: the plain model has {} parameters, hybridscope's {}", shape.name,
                                         init.at("parameters").get<std::int64_t>(), hs_params));

  const auto environment = hs::bench::current_environment({});
  hs::trainer::TrainerOptions options;
  options.show_progress = false;
  hs::trainer::PPOTrainer trainer(cfg, options);
  torch::set_num_threads(cfg.hybridscope.num_threads);
  for (int i = 0; i < o.warmup; ++i) {
    hybridscope_step(trainer, cfg);
    plain_step(peer);
  }
  std::vector<StepSample> hs, plain;
  for (int i = 0; i < o.steps; ++i) {
    const bool hs_first = i % 2 == 0;
    if (hs_first) hs.push_back(hybridscope_step(trainer, cfg));
    plain.push_back(plain_step(peer));
    if (!hs_first) hs.push_back(hybridscope_step(trainer, cfg));
  }

  // The OpenMP wait policy moves a tiny model's step by 2x (every parallel region wakes a sleeping
  // thread under PASSIVE), and the load average says how quiet the machine was: both are printed.
  const std::string thread_env = environment.thread_settings.empty()
                                     ? "no OMP_/GOMP_ variables (OpenMP's default: spin, then sleep)"
                                     : environment.thread_settings;
  const double load_after = hs::bench::load_average();
  fmt::print("\nshape {}: {}\n  {} interleaved steps per side after {} warm-up; torch {}, {} threads; {} parameters\n"
             "  {}; load average {:.2f} before, {:.2f} after\n",
             shape.name, shape.what, o.steps, o.warmup, init.at("torch").get<std::string>(),
             init.at("threads").get<int>(), hs_params, thread_env, environment.load_avg_before, load_after);
  fmt::print("  {:<14} {:>18} {:>12} {:>8} {:>10} {:>10}\n", "phase", "hybridscope tok/s", "plain tok/s", "ratio",
             "hs ms", "plain ms");
  json row = {{"shape", shape.name},        {"what", shape.what},
              {"steps", o.steps},            {"parameters", hs_params},
              {"thread_settings", environment.thread_settings},
              {"load_before", environment.load_avg_before}, {"load_after", load_after}};
  for (const auto& p : kPhases) {
    std::vector<double> a, b, a_ms, b_ms;
    for (const auto& s : hs) {
      a.push_back(s.tokens_per_s(p));
      a_ms.push_back(s.seconds.at(p.label) * 1e3);
    }
    for (const auto& s : plain) {
      b.push_back(s.tokens_per_s(p));
      b_ms.push_back(s.seconds.at(p.label) * 1e3);
    }
    const double ratio = median(a) / median(b);
    fmt::print("  {:<14} {:>18.0f} {:>12.0f} {:>7.2f}x {:>10.1f} {:>10.1f}\n", p.label, median(a), median(b), ratio,
               median(a_ms), median(b_ms));
    row["phases"][p.label] = {{"hybridscope_tokens_per_s", median(a)}, {"plain_tokens_per_s", median(b)},
                              {"ratio", ratio}, {"hybridscope_ms", median(a_ms)}, {"plain_ms", median(b_ms)}};
  }
  auto lengths = [](const std::vector<StepSample>& v) {
    std::vector<double> mean, lo, hi;
    for (const auto& s : v) {
      mean.push_back(s.response_tokens);
      lo.push_back(s.min_response);
      hi.push_back(s.max_response);
    }
    return json{{"median_response_tokens", median(mean)},
                {"min_response_length", *std::min_element(lo.begin(), lo.end())},
                {"max_response_length", *std::max_element(hi.begin(), hi.end())}};
  };
  row["hybridscope_lengths"] = lengths(hs);
  row["plain_lengths"] = lengths(plain);
  fmt::print("  response tokens per step (median): hybridscope {:.0f}, plain {:.0f}; lengths {}..{} and {}..{}\n",
             row["hybridscope_lengths"]["median_response_tokens"].get<double>(),
             row["plain_lengths"]["median_response_tokens"].get<double>(),
             row["hybridscope_lengths"]["min_response_length"].get<double>(),
             row["hybridscope_lengths"]["max_response_length"].get<double>(),
             row["plain_lengths"]["min_response_length"].get<double>(),
             row["plain_lengths"]["max_response_length"].get<double>());
  std::fflush(stdout);
  return row;
}

std::string default_python() {
  if (const char* env = std::getenv("HS_PYTHON")) return env;
  return HS_PEER_PYTHON;
}

int run(const Options& o) {
  std::vector<StepShape> chosen;
  for (const auto& name : o.shapes) {
    const auto it = std::find_if(kShapes.begin(), kShapes.end(), [&](const StepShape& s) { return s.name == name; });
    if (it == kShapes.end()) throw std::invalid_argument("--shapes: unknown shape '" + name + "' (a, b or c)");
    chosen.push_back(*it);
  }
  PlainPeer peer(o.python, std::string(HS_SOURCE_DIR) + "/bench/micro/grpo_plain_peer.py");
  json report = json::array();
  for (const auto& shape : chosen) report.push_back(compare(shape, o, peer));
  if (!o.json_out.empty()) {
    std::ofstream(o.json_out) << report.dump(2) << "\n";
    fmt::print("\nwrote {}\n", o.json_out);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  mallopt(M_MMAP_THRESHOLD, kMmapThreshold);
  mallopt(M_TRIM_THRESHOLD, kTrimThreshold);
  std::signal(SIGPIPE, SIG_IGN);  // a peer that exited is an error reply, not a killed benchmark
  Options o;
  o.python = default_python();
  CLI::App app{"hybridscope's GRPO step against a plain PyTorch GRPO step, interleaved (docs/benchmarks.md)",
               "hs_grpo_compare_bench"};
  app.add_option("--shapes", o.shapes, "Shapes to compare: a, b, c (default all)")->delimiter(',');
  app.add_option("--steps", o.steps, "Interleaved steps per side and shape (default 5)")->check(CLI::Range(1, 1000));
  app.add_option("--warmup", o.warmup, "Warm-up steps per side before them (default 1)")->check(CLI::Range(0, 100));
  app.add_option("--python", o.python, "Python with torch for the plain peer (default $HS_PYTHON, else the build's)");
  app.add_option("--set", o.overrides,
                 "key=value config override for hybridscope's side, after the shape's (repeatable), e.g. "
                 "actor_rollout_ref.model.use_remove_padding=true");
  app.add_option("--json", o.json_out, "Also write the medians as JSON here");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    return run(o);
  } catch (const PeerUnavailable& e) {
    fmt::print("SKIPPED: {} (python: {}); install torch there or pass --python\n", e.what(), o.python);
    return 0;
  } catch (const std::exception& e) {
    fmt::print(stderr, "hs_grpo_compare_bench: {}\n", e.what());
    return 1;
  }
}
