// dist_child.cpp — one rank of the multi-process tests in process_group_test.cpp (started N times
// with RANK/WORLD_SIZE/MASTER_PORT; forking the multi-threaded test binary is unsafe).
//
//   hs_dist_child collectives DB [SHM_BYTES]
//                                  every collective with known inputs (SHM_BYTES: the group's
//                                  hybridscope.dist.shm_bytes, default its default; 0: all Gloo);
//                                  checks each result against the arithmetic, records into DB.rank<r>
//   hs_dist_child shm OUT          the shared-memory path of a one-host group (shm_collectives.h)
//                                  against Gloo's on the same data: sums, max, min, avg over
//                                  float32, bfloat16 and int64, all_gather; the same bits on every
//                                  rank; all_gather above the slots and reduce_scatter through the
//                                  mailboxes; exchanges through them, all pairs and one pair,
//                                  and a mismatched one; no segment left in /dev/shm; then the last
//                                  rank exits and rank 0 writes to OUT what its next all-reduce and
//                                  exchange threw and how long they took
//   hs_dist_child dp_update OUT    one PPO actor update on this rank's share of a fixed batch with
//                                  gradients all-reduced over dp; rank 0 also runs the
//                                  single-process update on the whole batch and writes the largest
//                                  parameter and loss differences to OUT
//   hs_dist_child sharded_training PP TP DP KV OUT
//                                  the PPO actor on mesh (PP, TP, DP) (Megatron order, KV key/value
//                                  heads) against the single-process trainer: forward logits,
//                                  compute_log_prob, one update_policy (1F1B over the stages); each
//                                  rank writes its worst differences to OUT.rank<r>
//   hs_dist_child reshard DB PP TP DP TG MODE [DIRECT_MIN_ELEMENTS]
//                                  train->rollout->train of reshard_fixtures.h's model over Gloo
//                                  (megatron layout): generation weights bit-for-bit equal to the
//                                  slices of the full weights, training shards restored bit-for-bit,
//                                  the executor's bytes equal the plan's; comm_ops into DB.rank<r>
//   hs_dist_child fsdp_update DB TP DP [model|layer|prefetch|prefetch_recompute]
//                                  one fsdp (ZeRO-3) actor update vs the single-process one
//                                  (dist_child_fsdp.cpp)
// Exits 0 when every check passed; otherwise prints what differed and exits 1.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include <unistd.h>

#include <fmt/format.h>
#include <torch/torch.h>

#include "hybridscope/probes/recorder.h"
#include "hybridscope/probes/run_probes.h"
#include "hybridscope/trainer/data/batch.h"
#include "hybridscope/trainer/rl/core_algos.h"
#include "hybridscope/trainer/dist/mesh_groups.h"
#include "hybridscope/trainer/model/training_shard.h"
#include "hybridscope/trainer/model/model.h"
#include "hybridscope/trainer/rl/pipeline.h"
#include "hybridscope/trainer/rl/ppo_workers.h"
#include "hybridscope/trainer/dist/process_group.h"
#include "hybridscope/trainer/hybrid/reshard_executor.h"
#include "hybrid/reshard_fixtures.h"
#include "dist/fsdp_fixtures.h"
#include "dist/sharded_training_fixtures.h"

namespace hs::trainer::test {
int run_fsdp_update(const std::string& db, int tp, int dp, FsdpUnits units);  // dist_child_fsdp.cpp
}

namespace {

using namespace hs::trainer;

int failures = 0;

void check(bool ok, const std::string& what) {
  if (!ok) {
    std::fprintf(stderr, "rank check failed: %s\n", what.c_str());
    ++failures;
  }
}

void check_equal(const torch::Tensor& got, const torch::Tensor& want, const std::string& what) {
  const bool ok = got.sizes() == want.sizes() && torch::equal(got, want);
  check(ok, what);
  if (!ok) std::cerr << "  got\n" << got << "\n  want\n" << want << "\n";
}

int run_collectives(const std::string& db, std::int64_t shm_bytes) {
  const DistEnv env = dist_env_from_environment();
  const int n = env.world_size;
  const int r = env.rank;
  hs::probes::Recorder recorder(db + ".rank" + std::to_string(r), r);
  recorder.begin_run({});
  hs::probes::RunProbes probes(&recorder);
  probes.set_step(7);
  ProcessGroupOptions options;
  options.timeout = std::chrono::seconds(60);
  options.shm_bytes = shm_bytes;
  C10dGroupFactory groups(env, options, &probes);
  auto world = groups.world();
  check(world->rank() == r && world->size() == n, "world rank/size");

  // all_reduce sum: 4 float32 of (r + 1) -> n(n+1)/2 each (16 B).
  auto t = torch::full({4}, static_cast<float>(r + 1));
  world->all_reduce(t, ReduceOp::kSum);
  check_equal(t, torch::full({4}, static_cast<float>(n * (n + 1) / 2)), "all_reduce sum");
  // max and avg over int64 / float32 of 2 elements (16 B, 8 B).
  auto m = torch::tensor({static_cast<std::int64_t>(r), static_cast<std::int64_t>(-r)});
  world->all_reduce(m, ReduceOp::kMax);
  check_equal(m, torch::tensor({static_cast<std::int64_t>(n - 1), std::int64_t{0}}), "all_reduce max");
  auto a = torch::full({2}, static_cast<float>(2 * r));
  world->all_reduce(a, ReduceOp::kAvg);
  check_equal(a, torch::full({2}, static_cast<float>(n - 1)), "all_reduce avg");

  // all_gather of (3,) float32: rank k contributes 10k + [0, 1, 2]; output (3n,) = 12n B.
  auto gathered = world->all_gather(torch::arange(3, torch::kFloat32) + 10.0f * static_cast<float>(r));
  std::vector<torch::Tensor> parts;
  for (int k = 0; k < n; ++k) parts.push_back(torch::arange(3, torch::kFloat32) + 10.0f * static_cast<float>(k));
  check_equal(gathered, torch::cat(parts), "all_gather");

  // reduce_scatter of (2n, 2) float32 (16n B): input[i] = r + i; this rank's rows 2r, 2r+1 summed.
  auto input = (torch::arange(2 * n, torch::kFloat32).unsqueeze(1) + static_cast<float>(r)).repeat({1, 2});
  auto scattered = world->reduce_scatter(input, ReduceOp::kSum);
  const float base = static_cast<float>(n * (n - 1) / 2);
  auto want_rows = torch::arange(2 * r, 2 * r + 2, torch::kFloat32) * static_cast<float>(n) + base;
  check_equal(scattered, want_rows.unsqueeze(1).repeat({1, 2}), "reduce_scatter");

  // broadcast of (5,) int32 (20 B) from the last rank.
  auto b = torch::full({5}, r, torch::kInt32);
  world->broadcast(b, n - 1);
  check_equal(b, torch::full({5}, n - 1, torch::kInt32), "broadcast");

  // send/recv around the ring, (6,) float32 = 24 B each way.
  if (n > 1) {
    auto out = torch::full({6}, static_cast<float>(100 + r));
    auto in = torch::zeros({6});
    const int next = (r + 1) % n;
    const int prev = (r + n - 1) % n;
    if (r % 2 == 0) {
      world->send(out, next);
      world->recv(in, prev);
    } else {
      world->recv(in, prev);
      world->send(out, next);
    }
    check_equal(in, torch::full({6}, static_cast<float>(100 + prev)), "recv from the previous rank");
  }

  // A sub-group of ranks {0, 1}: the others get nullptr; inside, sum of (r + 1) = 3.
  auto pair = groups.new_group({0, std::min(1, n - 1)}, "pair");
  if (r <= 1) {
    check(pair != nullptr && pair->size() == std::min(2, n), "pair group made for ranks 0 and 1");
    auto p = torch::full({1}, static_cast<double>(r + 1), torch::kFloat64);
    pair->all_reduce(p);
    check_equal(p, torch::full({1}, n > 1 ? 3.0 : 1.0, torch::kFloat64), "pair all_reduce");
  } else {
    check(pair == nullptr, "ranks outside the pair group get nullptr");
  }
  world->barrier();
  recorder.end_run(hs::probes::RunStatus::kCompleted);
  return failures == 0 ? 0 : 1;
}

// The shared-memory path (tensors of at most 4 KiB here) against Gloo (anything larger): the same
// data reduced both ways, the Gloo copy padded past the threshold. Floating sums may round
// differently in another order (rank order here, Gloo's ring there): float32 within 1e-6, bfloat16
// within a few of its ulps; max, min and integer sums exactly. Every rank must hold the same bits: rank 0's results are
// broadcast (over Gloo: larger than the threshold) and compared.
int run_shm(const std::string& out) {
  const DistEnv env = dist_env_from_environment();
  const int n = env.world_size;
  const int r = env.rank;
  ProcessGroupOptions options;
  options.timeout = std::chrono::seconds(60);
  options.shm_bytes = 4096;
  C10dGroupFactory groups(env, options);
  auto world = groups.world();
  torch::manual_seed(1234 + r);  // each rank its own data
  auto both_ways = [&](const torch::Tensor& x, ReduceOp op, const char* what) {
    torch::Tensor shm = x.clone();
    world->all_reduce(shm, op);
    torch::Tensor padded = torch::cat({x, torch::zeros({4096}, x.options())});
    world->all_reduce(padded, op);
    const torch::Tensor gloo = padded.narrow(0, 0, x.size(0));
    const bool exact = op == ReduceOp::kMax || op == ReduceOp::kMin || !at::isFloatingType(x.scalar_type());
    // bfloat16 rounds each partial sum to 8 bits: a few of its ulps at |sum| ~ 4.
    const bool bf16 = x.scalar_type() == torch::kBFloat16;
    const bool ok = exact ? torch::equal(shm, gloo)
                          : torch::allclose(shm.to(torch::kFloat64), gloo.to(torch::kFloat64), bf16 ? 2e-2 : 1e-6,
                                            bf16 ? 5e-2 : 1e-6);
    check(ok, fmt::format("{}: shared memory and Gloo agree", what));
    // The same bits everywhere: rank 0's result broadcast (as bytes, over Gloo) and compared.
    torch::Tensor bits = torch::cat({shm.view(torch::kUInt8).reshape({-1}), torch::zeros({8192}, torch::kUInt8)});
    torch::Tensor mine = bits.clone();
    world->broadcast(bits, 0);
    check(torch::equal(bits, mine), fmt::format("{}: every rank holds rank 0's bits", what));
  };
  const torch::Tensor f = torch::randn({1000});
  both_ways(f, ReduceOp::kSum, "float32 sum");
  both_ways(f, ReduceOp::kAvg, "float32 avg");
  both_ways(f, ReduceOp::kMax, "float32 max");
  both_ways(f, ReduceOp::kMin, "float32 min");
  both_ways(torch::randn({1500}).to(torch::kBFloat16), ReduceOp::kSum, "bfloat16 sum");
  both_ways(torch::randint(-1000, 1000, {500}, torch::kInt64), ReduceOp::kSum, "int64 sum");
  // all_gather of (4, 8) float32 (128 B per rank): rank k's rows in place k.
  const torch::Tensor part = torch::randn({4, 8});
  const torch::Tensor gathered = world->all_gather(part);
  const torch::Tensor gathered_gloo = world->all_gather(torch::cat({part, torch::zeros({64, 8})}, 0));
  for (int k = 0; k < n; ++k)
    check_equal(gathered.narrow(0, 4 * k, 4), gathered_gloo.narrow(0, 68 * k, 4), fmt::format("all_gather row {}", k));
  check(gathered.size(0) == 4 * n, "all_gather: (4n, 8)");
  // Many calls in a row (both buffers reused): each rank adds its rank + call index.
  for (int call = 0; call < 200; ++call) {
    torch::Tensor x = torch::full({16}, static_cast<float>(r + call));
    world->all_reduce(x, ReduceOp::kSum);
    if (!torch::equal(x, torch::full({16}, static_cast<float>(n * (n - 1) / 2 + n * call)))) {
      check(false, fmt::format("call {} of a run of all-reduces", call));
      break;
    }
  }
  // An all_gather above shm_bytes goes through the mailboxes: (300, 8) float32 per rank (9.6 KB,
  // three chunks), rank k's rows k·10000 + position, exact in float32.
  auto rows_of = [](int k) { return torch::arange(2400, torch::kFloat32).reshape({300, 8}) + 10000.0f * k; };
  const torch::Tensor big = world->all_gather(rows_of(r));
  std::vector<torch::Tensor> all_rows;
  for (int k = 0; k < n; ++k) all_rows.push_back(rows_of(k));
  check_equal(big, torch::cat(all_rows, 0), "all_gather through the mailboxes");
  // reduce_scatter through the mailboxes (any size), sum and max: rank k's input (n·700,) is
  // k + position·(k + 1), so chunk r's sum is Σk k + position·Σk (k + 1), its max the last rank's.
  auto contribution = [n](int k) {
    return torch::arange(700 * n, torch::kFloat64) * static_cast<double>(k + 1) + static_cast<double>(k);
  };
  const torch::Tensor positions = torch::arange(700 * r, 700 * (r + 1), torch::kFloat64);
  check_equal(world->reduce_scatter(contribution(r), ReduceOp::kSum),
              positions * static_cast<double>(n * (n + 1) / 2) + static_cast<double>(n * (n - 1) / 2),
              "reduce_scatter sum through the mailboxes");
  check_equal(world->reduce_scatter(contribution(r), ReduceOp::kMax), contribution(n - 1).narrow(0, 700 * r, 700),
              "reduce_scatter max through the mailboxes");
  // Exchanges through the mailboxes (4 KiB chunks at shm_bytes 4096): every rank sends each peer
  // three messages, a float32 one (under a chunk), an empty int64 one and a bfloat16 one of ~2.5
  // chunks, whose values say (call, sender, receiver, message); each receive is checked inside its
  // recv_done hook (filled by then) and again after the call; every hook runs once per op.
  auto message = [](int call, int from, int to, int k) {
    const std::int64_t sizes[] = {1000, 0, 5000};
    const auto dtypes = std::array{torch::kFloat32, torch::kInt64, torch::kBFloat16};
    // (value = call·1000 + from·100 + to·10 + k + position mod 7), exact in bfloat16 below 256.
    const double base = k == 2 ? (from * 16 + to * 4 + call % 4) : call * 1000 + from * 100 + to * 10 + k;
    return (torch::arange(sizes[k], torch::kFloat64).remainder(7) + base).to(dtypes[static_cast<std::size_t>(k)]);
  };
  for (int call = 0; call < 30; ++call) {
    // Every third call only ranks 0 and 1 exchange; the others skip it (an exchange is collective
    // over the ranks it names only).
    const bool pair_only = call % 3 == 2;
    if (pair_only && r > 1) continue;
    std::vector<P2POp> sends, recvs;
    for (int peer = 0; peer < n; ++peer) {
      if (peer == r || (pair_only && peer > 1)) continue;
      for (int k = 0; k < 3; ++k) {
        sends.push_back({message(call, r, peer, k), peer});
        recvs.push_back({torch::full_like(message(call, peer, r, k), -1), peer});
      }
    }
    std::vector<int> sent(sends.size()), received(recvs.size()), posted(sends.size() + recvs.size());
    ExchangeHooks hooks;
    hooks.send_posted = [&](std::size_t i) { ++posted[i]; };
    hooks.recv_posted = [&](std::size_t i) { ++posted[sends.size() + i]; };
    hooks.send_done = [&](std::size_t i) { ++sent[i]; };
    hooks.recv_done = [&](std::size_t i) {
      ++received[i];
      const int peer = recvs[i].peer;
      check(torch::equal(recvs[i].tensor, message(call, peer, r, static_cast<int>(i % 3))),
            fmt::format("exchange {}: message {} from rank {} filled when recv_done runs", call, i % 3, peer));
    };
    world->exchange(sends, recvs, hooks);
    for (std::size_t i = 0; i < recvs.size(); ++i)
      check(torch::equal(recvs[i].tensor, message(call, recvs[i].peer, r, static_cast<int>(i % 3))),
            fmt::format("exchange {}: message {} from rank {}", call, i % 3, recvs[i].peer));
    check(std::all_of(sent.begin(), sent.end(), [](int c) { return c == 1; }) &&
              std::all_of(received.begin(), received.end(), [](int c) { return c == 1; }) &&
              std::all_of(posted.begin(), posted.end(), [](int c) { return c == 1; }),
          fmt::format("exchange {}: each op posted once and done once", call));
  }
  world->barrier();
  // A receive that does not match the sender's send: 100 float32 sent, 200 expected. Rank 1 fails
  // on the first chunk, naming both ranks and both sizes (the 0 -> 1 mailbox is out of step after:
  // nothing below uses it).
  if (r == 0) world->exchange({{torch::ones({100}), 1}}, {});
  if (r == 1) {
    std::string error;
    try {
      torch::Tensor into = torch::empty({200});
      world->exchange({}, {{into, 0}});
    } catch (const DistError& e) {
      error = e.what();
    }
    check(error.find("exchange on group 'world'") != std::string::npos &&
              error.find("rank 0 sends 400 bytes to rank 1, whose receives from it add up to 800") != std::string::npos,
          "a mismatched exchange fails naming the sizes: " + error);
  }
  // The segment (rank 0 names it after its pid) was unlinked once every rank had mapped it.
  if (r == 0)
    for (const auto& entry : std::filesystem::directory_iterator("/dev/shm"))
      check(entry.path().filename().string().rfind(fmt::format("hybridscope-{}-", ::getpid()), 0) != 0,
            fmt::format("no segment left in /dev/shm: {}", entry.path().string()));
  world->barrier();
  // The last rank leaves; the others' next shared-memory all-reduce fails, naming it, long before
  // the 60 s timeout.
  if (r == n - 1) std::_Exit(failures == 0 ? 0 : 1);
  torch::Tensor x = torch::ones({4});
  const auto start = std::chrono::steady_clock::now();
  std::string error;
  try {
    world->all_reduce(x, ReduceOp::kSum);
  } catch (const DistError& e) {
    error = e.what();
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // An exchange with the rank that left fails the same way (a receive it will never fill).
  std::string exchange_error;
  if (r == 0) {
    try {
      torch::Tensor into = torch::empty({16});
      world->exchange({}, {{into, n - 1}});
    } catch (const DistError& e) {
      exchange_error = e.what();
    }
  }
  const double both = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (r == 0) {
    std::ofstream(out) << seconds << "\n" << error << "\n" << both << "\n" << exchange_error << "\n";
  }
  return failures == 0 ? 0 : 1;
}

// A fixed batch of 8 samples (2 prompts x 4 responses), identical on every rank.
RolloutBatch fixed_batch(int vocab) {
  auto gen = at::detail::createCPUGenerator(1234);
  const std::int64_t b = 8, p = 3, rlen = 5;
  std::vector<std::vector<std::int32_t>> prompts, responses;
  for (std::int64_t i = 0; i < b / 4; ++i) {
    std::vector<std::int32_t> prompt;
    for (std::int64_t k = 0; k < p - (i % 2); ++k)
      prompt.push_back(static_cast<std::int32_t>(torch::randint(3, vocab, {1}, gen).item<std::int64_t>()));
    prompts.push_back(prompt);
  }
  for (std::int64_t i = 0; i < b; ++i) {
    std::vector<std::int32_t> response;
    for (std::int64_t k = 0; k < 1 + (i * 3) % rlen; ++k)
      response.push_back(static_cast<std::int32_t>(torch::randint(3, vocab, {1}, gen).item<std::int64_t>()));
    responses.push_back(response);
  }
  RolloutBatch batch = make_rollout_batch(prompts, responses, 4, /*pad=*/0, /*eos=*/1);
  const auto shape = batch.responses.sizes();
  batch.old_log_probs = -torch::rand(shape, gen) - 1.0;
  batch.advantages = torch::randn(shape, gen);
  return batch;
}

int run_dp_update(const std::string& out_path) {
  torch::set_num_threads(1);
  const DistEnv env = dist_env_from_environment();
  ProcessGroupOptions options;
  options.timeout = std::chrono::seconds(60);
  C10dGroupFactory groups(env, options);
  ParallelContext dp_ctx;
  dp_ctx.world = groups.world();
  dp_ctx.dp = dp_ctx.world;

  ModelShape shape;
  shape.vocab_size = 16;
  shape.hidden_size = 16;
  shape.intermediate_size = 32;
  shape.num_hidden_layers = 1;
  shape.num_attention_heads = 2;
  shape.num_key_value_heads = 1;
  shape.max_position_embeddings = 32;
  ActorConfig cfg;
  cfg.ppo_mini_batch_size = 2;          // prompts: the whole batch is one mini-batch
  cfg.ppo_micro_batch_size_per_gpu = 1;  // several micro-batches per rank
  // AdamW's first step is lr * g / (|g| + eps): with a tiny eps that is lr * sign(g) and hides a
  // mis-weighted gradient; an eps far above |g| makes the update (lr / eps) * g, linear in g.
  cfg.optim.lr = 10.0;
  cfg.optim.eps = 1e3;
  cfg.optim.weight_decay = 0.0;
  cfg.grad_clip = 1e9;                   // the norm is reported, not applied: compares raw updates
  const char* mode = std::getenv("HS_LOSS_AGG");
  if (mode && std::string(mode) == "seq-mean-token-mean") cfg.loss_agg_mode = LossAggMode::kSeqMeanTokenMean;

  const RolloutBatch batch = fixed_batch(shape.vocab_size);
  const std::int64_t share = batch.size() / env.world_size;
  std::vector<std::int64_t> rows;
  for (std::int64_t i = env.rank * share; i < (env.rank + 1) * share; ++i) rows.push_back(i);

  torch::manual_seed(5);
  Transformer model(shape, HeadKind::kLm);
  const RolloutBatch local = batch.select(rows);
  // The policy loss of the whole batch at the start weights, assembled from this rank's
  // micro-batches with the trainer's global batch info (agg_loss) and averaged over dp.
  const GlobalBatchInfo info = global_batch_info(local.response_mask, *dp_ctx.dp, cfg.loss_scale_factor);
  auto loss = torch::zeros({1}, torch::kFloat64);
  {
    torch::NoGradGuard no_grad;
    for (const auto& micro : split_rows(local.size(), cfg.ppo_micro_batch_size_per_gpu)) {
      const RolloutBatch ub = local.select(micro);
      const auto log_prob = response_log_probs(model, ub, 1.0, false).first;
      const auto pg = compute_policy_loss(ub.old_log_probs, log_prob, ub.advantages, ub.response_mask, 0.2, 0.2, 3.0,
                                          cfg.loss_agg_mode, info);
      loss += pg.pg_loss.to(torch::kFloat64);
    }
  }
  dp_ctx.dp->all_reduce(loss, ReduceOp::kSum);
  loss /= dp_ctx.dp->size();  // gradients (and so losses) are averaged over dp
  PPOActor actor(model, cfg, 1.0, 4, 10, dp_ctx);
  actor.update_policy(local, 0, 0);

  if (env.rank == 0) {
    torch::manual_seed(5);
    Transformer reference(shape, HeadKind::kLm);
    double single_loss = 0;
    {
      torch::NoGradGuard no_grad;
      const auto log_prob = response_log_probs(reference, batch, 1.0, false).first;
      single_loss = compute_policy_loss(batch.old_log_probs, log_prob, batch.advantages, batch.response_mask, 0.2, 0.2,
                                        3.0, cfg.loss_agg_mode)
                        .pg_loss.item<double>();
    }
    PPOActor single(reference, cfg, 1.0, 4, 10);
    single.update_policy(batch, 0, 0);
    double max_param_diff = 0;
    auto got = model->named_parameters();
    for (const auto& item : reference->named_parameters()) {
      const double d = (got[item.key()] - item.value()).abs().max().item<double>();
      max_param_diff = std::max(max_param_diff, d);
    }
    std::ofstream(out_path) << fmt::format("{:.9g} {:.9g}\n", max_param_diff,
                                           std::abs(loss.item<double>() - single_loss));
  }
  groups.world()->barrier();
  return 0;
}

}  // namespace

at::Tensor slice_box(const at::Tensor& full, const Box& box) {
  at::Tensor v = full;
  for (std::size_t d = 0; d < box.ranges.size(); ++d)
    v = v.slice(static_cast<std::int64_t>(d), box.ranges[d].begin, box.ranges[d].end);
  return v.contiguous();
}

bool same_bits(const at::Tensor& a, const at::Tensor& b) {
  return a.sizes() == b.sizes() && a.scalar_type() == b.scalar_type() &&
         std::memcmp(a.contiguous().data_ptr(), b.contiguous().data_ptr(), a.nbytes()) == 0;
}

int run_reshard(char** argv) {
  const std::string db = argv[2];
  const MeshShape mesh{std::stoi(argv[3]), std::stoi(argv[4]), std::stoi(argv[5])};
  const int t_g = std::stoi(argv[6]);
  const DistEnv env = dist_env_from_environment();
  const int r = env.rank;
  auto plan = std::make_shared<const ReshardPlan>(
      plan_reshard(test::sharded_model(), mesh, DpSharding::kReplicated, t_g, from_string<ReshardMode>(argv[7]).value()));
  check(plan->training.world() == env.world_size, "world size = pp * tp * dp");
  hs::probes::Recorder recorder(db + ".rank" + std::to_string(r), r);
  recorder.begin_run({});
  ProcessGroupOptions options;
  options.timeout = std::chrono::seconds(60);
  const hs::probes::RunProbes probes(&recorder);
  C10dGroupFactory groups(env, options, &probes);
  ReshardExecutor executor(plan, r, groups, &probes, argv[8] ? std::stoll(argv[8]) : ReshardExecutor::kDirectMinElements);
  // The same full weights on every rank (same seed), each rank starting from its training shard.
  torch::manual_seed(11);
  std::vector<at::Tensor> full, training, before;
  for (const auto& p : plan->training.params) full.push_back(torch::randn(p.spec.shape, torch::kFloat32));
  for (std::size_t p = 0; p < full.size(); ++p) {
    const auto box = plan->training.box(p, r);
    training.push_back(box ? slice_box(full[p], *box) : at::Tensor());
    before.push_back(training.back().defined() ? training.back().clone() : at::Tensor());
  }
  const auto generation = executor.to_generation(training);
  for (std::size_t p = 0; p < full.size(); ++p)
    check(same_bits(generation[p], slice_box(full[p], *plan->generation.box(p, r))),
          "generation weights of " + plan->training.params[p].spec.name);
  const auto restored = executor.to_training(generation);
  for (std::size_t p = 0; p < full.size(); ++p)
    if (before[p].defined()) check(same_bits(restored[p], before[p]), "restored " + plan->training.params[p].spec.name);
  const auto& mine = plan->ranks[static_cast<std::size_t>(r)];
  check(executor.last_bytes().received == mine.bytes_received, "received bytes = plan");
  check(executor.last_bytes().sent == mine.bytes_sent, "sent bytes = plan");
  recorder.end_run(hs::probes::RunStatus::kCompleted);
  return failures == 0 ? 0 : 1;
}

double metric(const Metrics& metrics, const std::string& name) {
  for (const auto& [key, value] : metrics)
    if (key == name) return value;
  throw std::runtime_error("no metric " + name);
}

double max_abs(const torch::Tensor& t) { return t.abs().max().item<double>(); }

int run_sharded_training(char** argv) {
  torch::set_num_threads(1);
  const MeshShape mesh{std::stoi(argv[2]), std::stoi(argv[3]), std::stoi(argv[4])};
  const auto shape = test::sharded_training_shape(std::stoi(argv[5]));
  const std::string out_path = std::string(argv[6]);
  const DistEnv env = dist_env_from_environment();
  const int r = env.rank;
  ProcessGroupOptions options;
  options.timeout = std::chrono::seconds(60);
  C10dGroupFactory groups(env, options);
  const ParallelContext ctx = make_training_context(groups, mesh, r);
  const auto layout = training_layout(llama_parameters(shape), mesh, DpSharding::kReplicated);
  const ActorConfig cfg = test::sharded_training_actor();

  // The same full model on every rank (one seed); this rank's shard of it; and a copy that the
  // single-process trainer updates.
  torch::manual_seed(7);
  Transformer full(shape, HeadKind::kLm);
  Transformer shard(shape, HeadKind::kLm, ctx);
  copy_training_shard(*full, *shard, layout, r);
  Transformer single_model(shape, HeadKind::kLm);
  {
    torch::NoGradGuard no_grad;
    auto source = full->named_parameters();
    for (auto& item : single_model->named_parameters()) item.value().copy_(source[item.key()]);
  }
  // This rank's rows: its dp rank's share (the ranks of a tp group and of a pp group hold the same).
  const RolloutBatch batch = test::sharded_training_batch(shape.vocab_size);
  const std::int64_t share = batch.size() / mesh.dp;
  std::vector<std::int64_t> rows;
  for (std::int64_t i = ctx.dp->rank() * share; i < (ctx.dp->rank() + 1) * share; ++i) rows.push_back(i);
  const RolloutBatch local = batch.select(rows);

  // (a) Forward logits of the local rows, full vocabulary, on the last stage.
  torch::Tensor want_logits, want_log_probs;
  {
    torch::NoGradGuard no_grad;
    want_logits = full->forward(local.input_ids, local.attention_mask, local.position_ids);
    want_log_probs = response_log_probs(full, local, 1.0, false).first;
  }
  torch::Tensor logits;
  pipeline_forward(shard, {local}, [&](std::size_t, const torch::Tensor& output) {
    logits = output;
    return torch::Tensor();
  });
  const double logit_diff = shard->is_last_stage() ? max_abs(logits - want_logits) : 0.0;
  check(shard->is_last_stage() == logits.defined(), "logits on the last stage only");

  // (b) Old log-probs in micro-batches of 3 (3 + 1 or 3 + 3 + 2 rows), on every rank.
  PPOActor actor(shard, cfg, 1.0, 4, 10, ctx);
  const auto log_probs = actor.compute_log_prob(local, 3);
  const double log_prob_diff = max_abs(log_probs - want_log_probs);

  // (c) One update on the local rows against the single-process update on the whole batch.
  const Metrics metrics = actor.update_policy(local, 0, 0);
  PPOActor single(single_model, cfg, 1.0, 4, 10);
  const Metrics want = single.update_policy(batch, 0, 0);
  double param_diff = 0, update_scale = 0;
  {
    const auto after = single_model->named_parameters();
    const auto before = full->named_parameters();
    auto mine = shard->named_parameters();
    for (std::size_t p = 0; p < layout.params.size(); ++p) {
      const auto box = layout.box(p, r);
      if (!box) continue;
      const auto& name = layout.params[p].spec.name;
      const auto want_param = slice_box(after[name], *box);
      param_diff = std::max(param_diff, max_abs(mine[name] - want_param));
      update_scale = std::max(update_scale, max_abs(want_param - slice_box(before[name], *box)));
    }
  }
  // pg_loss is a mean over micro-batches; every dp rank has as many, so their mean is the whole's.
  auto pg_loss = torch::full({1}, metric(metrics, "actor/pg_loss"), torch::kFloat64);
  ctx.dp->all_reduce(pg_loss, ReduceOp::kAvg);
  const double pg_loss_diff = std::abs(pg_loss.item<double>() - metric(want, "actor/pg_loss"));
  const double grad_norm = metric(metrics, "actor/grad_norm");
  const double grad_norm_diff = std::abs(grad_norm - metric(want, "actor/grad_norm"));
  // Every metric the same on the ranks of a tp group and of a pp group (bitwise).
  double spread = 0;
  for (auto* group : {ctx.tp.get(), ctx.pp.get()}) {
    std::vector<double> values;
    for (const auto& [name, value] : metrics) values.push_back(value);
    auto hi = torch::tensor(values, torch::kFloat64), lo = hi.clone();
    group->all_reduce(hi, ReduceOp::kMax);
    group->all_reduce(lo, ReduceOp::kMin);
    spread = std::max(spread, max_abs(hi - lo));
  }
  std::ofstream(out_path + ".rank" + std::to_string(r))
      << fmt::format("{:.9g} {:.9g} {:.9g} {:.9g} {:.9g} {:.9g} {:.9g} {:.9g} {:.9g} {:.9g}\n", logit_diff,
                     max_abs(want_logits), log_prob_diff, param_diff, update_scale, pg_loss_diff, grad_norm_diff,
                     grad_norm, spread, static_cast<double>(metrics.size()));
  groups.world()->barrier();
  return failures == 0 ? 0 : 1;
}

int main(int argc, char** argv) {
  try {
    if ((argc == 3 || argc == 4) && std::string(argv[1]) == "collectives")
      return run_collectives(argv[2], argc == 4 ? std::stoll(argv[3]) : ProcessGroupOptions{}.shm_bytes);
    if (argc == 3 && std::string(argv[1]) == "shm") return run_shm(argv[2]);
    if (argc == 3 && std::string(argv[1]) == "dp_update") return run_dp_update(argv[2]);
    if ((argc == 8 || argc == 9) && std::string(argv[1]) == "reshard") return run_reshard(argv);
    if (argc == 7 && std::string(argv[1]) == "sharded_training") return run_sharded_training(argv);
    if ((argc == 5 || argc == 6) && std::string(argv[1]) == "fsdp_update") {
      using hs::trainer::test::FsdpUnits;
      const std::string units = argc == 6 ? argv[5] : "model";
      if (units != "model" && units != "layer" && units != "prefetch" && units != "prefetch_recompute")
        throw std::invalid_argument("fsdp_update UNITS must be model, layer, prefetch or prefetch_recompute, not " +
                                    units);
      return hs::trainer::test::run_fsdp_update(argv[2], std::stoi(argv[3]), std::stoi(argv[4]),
                                                units == "model"      ? FsdpUnits::kModel
                                                : units == "layer"    ? FsdpUnits::kLayer
                                                : units == "prefetch" ? FsdpUnits::kLayerPrefetch
                                                                      : FsdpUnits::kLayerPrefetchRecompute);
    }
    std::fprintf(stderr,
                 "usage: hs_dist_child collectives DB [SHM_BYTES] | shm OUT | dp_update OUT | reshard DB PP TP DP TG MODE [DIRECT_MIN_ELEMENTS] | "
                 "sharded_training PP TP DP KV OUT | fsdp_update DB TP DP [model|layer|prefetch|prefetch_recompute]\n");
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %s: %s\n", std::getenv("RANK") ? std::getenv("RANK") : "?", e.what());
    return 1;
  }
}
