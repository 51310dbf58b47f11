// tokenizer_bench.cpp — BpeTokenizer::encode speed on a large text: tokens/s and bytes/s on one
// thread, to set beside HF `tokenizers`' single-thread figure on the same text and tokenizer
// (micro/tokenizer_bench_peer.py writes both the text and that figure; docs/tokenizers.md).
// Goal (issue 20): at least HF tokenizers' single-thread speed.
// Run:
//   python bench/micro/tokenizer_bench_peer.py --tokenizer-dir <dir with tokenizer.json> --text-out t.txt
//   HS_TOKENIZER_DIR=<that dir> HS_TOKENIZER_TEXT=t.txt ./build/bench/hs_tokenizer_bench
// (ctest's tokenizer fixture leaves a real Qwen tokenizer in <build>/tokenizer_goldens/qwen2.)
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "hybridscope/trainer/data/bpe_tokenizer.h"

namespace {

using hs::trainer::BpeTokenizer;

struct Inputs {
  std::unique_ptr<BpeTokenizer> tokenizer;
  std::string text;
  std::vector<std::string_view> documents;  // text cut after each blank line, as the peer script cuts it
  std::string error;  // why the inputs are missing or wrong, for SkipWithError
};

/// Checks encode(text) against HF's ids (<text>.ids, int32 little-endian, from the peer script):
/// a fast wrong tokenizer is not a result.
std::string check_against_peer(const Inputs& r, const std::string& ids_path) {
  std::ifstream f(ids_path, std::ios::binary);
  if (!f) return "";  // no peer ids: measure anyway (the tests check correctness)
  std::vector<std::int32_t> expected;
  std::int32_t id = 0;
  while (f.read(reinterpret_cast<char*>(&id), sizeof(id))) expected.push_back(id);
  const auto got = r.tokenizer->encode(r.text);
  if (got == expected) return "";
  std::size_t i = 0;
  while (i < got.size() && i < expected.size() && got[i] == expected[i]) ++i;
  return "ids differ from HF's (" + ids_path + ") at position " + std::to_string(i);
}

const Inputs& inputs() {
  static const Inputs in = [] {
    Inputs r;
    const char* dir = std::getenv("HS_TOKENIZER_DIR");
    const char* text = std::getenv("HS_TOKENIZER_TEXT");
    if (dir == nullptr || text == nullptr) {
      r.error = "set HS_TOKENIZER_DIR (a directory with tokenizer.json) and HS_TOKENIZER_TEXT (a UTF-8 text; "
                "bench/micro/tokenizer_bench_peer.py writes one)";
      return r;
    }
    try {
      r.tokenizer = std::make_unique<BpeTokenizer>(BpeTokenizer::from_tokenizer_json(std::string(dir) + "/tokenizer.json"));
    } catch (const std::exception& e) {
      r.error = e.what();
      return r;
    }
    std::ifstream f(text, std::ios::binary);
    std::ostringstream s;
    s << f.rdbuf();
    r.text = s.str();
    if (r.text.empty()) {
      r.error = std::string("empty or unreadable text file ") + text;
      return r;
    }
    const std::string_view all = r.text;
    for (std::size_t start = 0; start < all.size();) {
      const std::size_t blank = all.find("\n\n", start);
      const std::size_t end = blank == std::string_view::npos ? all.size() : blank + 2;
      r.documents.push_back(all.substr(start, end - start));
      start = end;
    }
    r.error = check_against_peer(r, std::string(text) + ".ids");
    return r;
  }();
  return in;
}

// The inputs, or nullptr after marking the benchmark skipped with why they are missing.
const Inputs* ready(benchmark::State& state) {
  const Inputs& in = inputs();
  if (!in.error.empty()) {
    state.SkipWithError(in.error.c_str());
    return nullptr;
  }
  return &in;
}

// tokens_per_s (and bytes/s when `bytes` > 0) over every iteration, `tokens` per iteration.
void report_rate(benchmark::State& state, std::size_t tokens, std::size_t bytes) {
  const auto iterations = static_cast<double>(state.iterations());
  if (bytes > 0) state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes));
  state.counters["tokens_per_s"] = benchmark::Counter(static_cast<double>(tokens) * iterations, benchmark::Counter::kIsRate);
}

// The whole text in one encode call. Warm: the pre-token cache is filled after the first
// iteration, as HF's is after its warm-up run. Cold: the cache is emptied before each run, so every
// pre-token is merged once more.
void encode_whole(benchmark::State& state, bool cold) {
  const Inputs* in = ready(state);
  if (in == nullptr) return;
  std::size_t tokens = 0;
  for (auto _ : state) {
    if (cold) {
      state.PauseTiming();
      in->tokenizer->clear_cache();
      state.ResumeTiming();
    }
    const auto ids = in->tokenizer->encode(in->text);
    tokens = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.counters["tokens"] = static_cast<double>(tokens);
  report_rate(state, tokens, in->text.size());
}

void BM_BpeEncode(benchmark::State& state) { encode_whole(state, false); }
BENCHMARK(BM_BpeEncode)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(3.0);

void BM_BpeEncodeColdCache(benchmark::State& state) { encode_whole(state, true); }
BENCHMARK(BM_BpeEncodeColdCache)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(3.0);

// The same text as prompt-sized documents, one encode call each (HF: encode_batch on one thread).
void BM_BpeEncodeDocuments(benchmark::State& state) {
  const Inputs* in = ready(state);
  if (in == nullptr) return;
  std::size_t tokens = 0;
  for (auto _ : state) {
    tokens = 0;
    for (const std::string_view doc : in->documents) {
      const auto ids = in->tokenizer->encode(doc);
      tokens += ids.size();
      benchmark::DoNotOptimize(ids.data());
    }
  }
  state.counters["documents"] = static_cast<double>(in->documents.size());
  report_rate(state, tokens, in->text.size());
}
BENCHMARK(BM_BpeEncodeDocuments)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(3.0);

void BM_BpeDecode(benchmark::State& state) {
  const Inputs* in = ready(state);
  if (in == nullptr) return;
  const auto ids = in->tokenizer->encode(in->text);
  for (auto _ : state) {
    const std::string text = in->tokenizer->decode(ids, false);
    benchmark::DoNotOptimize(text.data());
  }
  report_rate(state, ids.size(), 0);
}
BENCHMARK(BM_BpeDecode)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
