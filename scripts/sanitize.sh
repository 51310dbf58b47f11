#!/usr/bin/env bash
# sanitize.sh — the LibTorch-free libraries' test suites under the sanitizers:
#   asan:  AddressSanitizer + UndefinedBehaviorSanitizer (gcc) over every standalone suite
#          (probes, reports, the simulator, the tokenizers and config core): build/asan
#   tsan:  ThreadSanitizer over the whole probes suite (the recorder's per-thread queues, its
#          writer thread, rank files and merge): build/tsan
#
#   scripts/sanitize.sh [asan|tsan|all]      (default all)
#
# Exit status 0 only when every suite passes with no sanitizer report. The trainer's suites need
# LibTorch, whose prebuilt wheel is not instrumented, so they are not run here (docs/reliability.md).
set -euo pipefail
cd "$(dirname "$0")/.."
which="${1:-all}"
common=(-G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHS_BUILD_TRAINER=OFF -DHS_BUILD_BENCH=OFF -DHS_WITH_CUPTI=OFF)
status=0
run() {  # run <dir> <flags> <ctest regex or ''> [build targets...]
  local dir=$1 flags=$2 regex=$3
  shift 3
  cmake -S . -B "$dir" "${common[@]}" -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="$flags" > "$dir.configure.log" 2>&1 ||
    { cat "$dir.configure.log"; return 1; }
  cmake --build "$dir" -j "$(nproc)" ${1:+--target "$@"}
  (cd "$dir" && ctest --output-on-failure -j "$(nproc)" ${regex:+-R "$regex"}) || status=1
}
if [ "$which" = asan ] || [ "$which" = all ]; then
  export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1" UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
  export QT_QPA_PLATFORM=offscreen
  run build/asan "-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g" ""
fi
if [ "$which" = tsan ] || [ "$which" = all ]; then
  export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1"
  cmake -S . -B build/tsan "${common[@]}" -DCMAKE_CXX_FLAGS="-fsanitize=thread -g" \
    -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=thread" > build/tsan.configure.log 2>&1 || { cat build/tsan.configure.log; exit 1; }
  cmake --build build/tsan -j "$(nproc)" --target hs_probes_tests hs_probe_crash_child
  build/tsan/tests/hs_probes_tests || status=1  # the whole probes suite (its tests need no fixture)
fi
exit $status
