#!/usr/bin/env bash
# fuzz.sh — builds the libFuzzer harnesses (tests/fuzz/) with clang, AddressSanitizer and
# UndefinedBehaviorSanitizer, and runs each for a set time on its seed corpus.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET ...]     (default 60 s, every target)
#
# Build: build/fuzz (-DHS_FUZZ=ON -DHS_BUILD_TRAINER=OFF, clang++). Corpora grow in
# build/fuzz/corpus/<target>/ (seeded from tests/fuzz/seeds/ and the repository's own files);
# a crash is written to build/fuzz/crashes/<target>/ and the script exits 1 after the last target.
# Prints one line per target: CPU seconds, executions, crashes. Needs clang and libclang-rt-dev
# (Debian), the tokenizer goldens for fuzz_tokenizer_encode (`ctest -R tokenizer_goldens` in
# build/release, or HS_FUZZ_TOKENIZER_JSON=path/to/tokenizer.json).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
shift || true
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(fuzz_config fuzz_hf_config fuzz_tokenizer_json fuzz_tokenizer_encode fuzz_tiktoken fuzz_jsonl
                                    fuzz_run_database fuzz_safetensors_header)
build=build/fuzz
flags="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g -O1"
if [ ! -f "$build/build.ninja" ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
    -DCMAKE_CXX_FLAGS="$flags" -DHS_FUZZ=ON -DHS_BUILD_TRAINER=OFF -DHS_BUILD_TESTS=OFF -DHS_BUILD_BENCH=OFF \
    -DHS_WITH_CUPTI=OFF -DHS_WITH_NVTX=OFF > "$build.configure.log" || { cat "$build.configure.log"; exit 1; }
fi
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"

seed() {  # seed <target> <files...>: copy seeds into the corpus
  local dir="$build/corpus/$1"; shift
  mkdir -p "$dir"
  for f in "$@"; do [ -f "$f" ] && cp -n "$f" "$dir/" 2>/dev/null || true; done
}
seed fuzz_config tests/fuzz/seeds/config/* configs/*.yaml configs/sim/*.yaml
seed fuzz_hf_config tests/fuzz/seeds/hf_config/*
seed fuzz_tokenizer_json tests/fuzz/seeds/tokenizer_json/*
seed fuzz_tokenizer_encode datasets/gsm8k/test-8.jsonl tests/trainer/data/chat_templates/*.jinja README.md
seed fuzz_jsonl datasets/gsm8k/test-8.jsonl datasets/addition/val.jsonl
seed fuzz_run_database $(find tests/fuzz/seeds -name '*.sqlite' 2>/dev/null)
seed fuzz_safetensors_header tests/fuzz/seeds/safetensors/*
seed fuzz_tiktoken tests/fuzz/seeds/tiktoken/*

export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
: "${HS_FUZZ_TOKENIZER_JSON:=build/release/tokenizer_goldens/qwen2/tokenizer.json}"
export HS_FUZZ_TOKENIZER_JSON
failed=0
printf '%-24s %10s %12s %8s\n' target cpu_s executions crashes
for t in "${targets[@]}"; do
  mkdir -p "$build/crashes/$t"
  log="$build/$t.log"
  set +e
  "$build/tests/fuzz/$t" "$build/corpus/$t" -max_total_time="$seconds" -print_final_stats=1 -timeout=20 \
    -rss_limit_mb=4096 -artifact_prefix="$build/crashes/$t/" > "$log" 2>&1
  rc=$?
  set -e
  execs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | awk '{print $2}' | tail -1 || true)
  cpu=$(grep -o 'Done [0-9]* runs in [0-9]* second' "$log" | awk '{print $5}' | tail -1 || true)
  crashes=$(find "$build/crashes/$t" -type f | wc -l)
  printf '%-24s %10s %12s %8s\n' "$t" "${cpu:-$seconds}" "${execs:-?}" "$crashes"
  if [ $rc -ne 0 ] || [ "$crashes" -gt 0 ]; then failed=1; echo "  see $log and $build/crashes/$t/"; fi
done
exit $failed
