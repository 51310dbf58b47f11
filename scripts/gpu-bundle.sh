#!/usr/bin/env bash
# gpu-bundle.sh — packs what scripts/gpu-proof.sh runs on a lent GPU machine into .gpu-bundle/
# (git-ignored; name it in the device tool's `carry`).
#
# Why a bundle: the lent machine (one H100/H200, PyTorch 2.11 + CUDA 13 in its python3) has no
# network and none of the Debian -dev packages the build needs (yaml-cpp, SQLite, GoogleTest,
# Google Benchmark, ...), so it cannot build hybridscope. This machine builds against the PyPI wheel
# torch==2.11.0+cu130 — the same LibTorch, a CUDA build, so every CUDA path is compiled in — and the
# bundle carries the binaries plus the few shared libraries that are not part of LibTorch or the
# C runtime. On the GPU machine the binaries load that machine's LibTorch (LD_LIBRARY_PATH).
#
# Usage: scripts/gpu-bundle.sh [build-dir]   (default build/release; builds the targets first)
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build/release}"
bundle="$root/.gpu-bundle"
targets=(hybridscope hs_trainer_tests hs_dist_child hs_probes_tests hs_probe_crash_child hs_reports_tests
         hs_gpu_bench hs_micro_bench)

log() { printf '[gpu-bundle] %s\n' "$*"; }

[ -f "$build/build.ninja" ] || { log "no build in $build: run 'make build' first"; exit 1; }
grep -q 'hs_cupti_tests' "$build/build.ninja" && targets+=(hs_cupti_tests) || log "warning: hs_cupti is not built here (no CUPTI): the GPU run will record no kernels"
log "building ${targets[*]}"
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"

rm -rf "$bundle"
mkdir -p "$bundle/build/release/cli" "$bundle/build/release/tests" "$bundle/build/release/bench" "$bundle/lib"
cp "$build/cli/hybridscope" "$bundle/build/release/cli/"
for t in hs_trainer_tests hs_dist_child hs_probes_tests hs_probe_crash_child hs_reports_tests hs_cupti_tests; do
  if [ -x "$build/tests/$t" ]; then cp "$build/tests/$t" "$bundle/build/release/tests/"; fi
done
cp "$build/tests/libhs_nvtx_injection.so" "$bundle/build/release/tests/" 2>/dev/null || true
for b in hs_gpu_bench hs_micro_bench; do cp "$build/bench/$b" "$bundle/build/release/bench/"; done

# Shared libraries the binaries need beyond LibTorch (its venv) and the C/C++ runtime.
for f in "$bundle"/build/release/*/*; do
  ldd "$f" 2>/dev/null | awk '/=> \// {print $3}'
done | sort -u | grep -v -e '/venv/' -e '/libc\.so' -e '/libm\.so' -e '/libstdc++' -e '/libgcc_s' -e '/libpthread' \
  -e '/librt\.so' -e '/libdl\.so' -e '/libutil\.so' -e '/ld-linux' | while read -r lib; do
  cp -L "$lib" "$bundle/lib/"
done

# The paths the tests were compiled with (HS_SOURCE_DIR, HS_BINARY_DIR): gpu-proof.sh makes them
# resolve to the copy of the repository on the GPU machine.
{
  echo "SOURCE=$(grep -m1 '^CMAKE_HOME_DIRECTORY' "$build/CMakeCache.txt" | cut -d= -f2)"
  echo "BUILD=$(cd "$build" && pwd)"
  torch_py="$(grep -m1 '^HS_PYTHON' "$build/CMakeCache.txt" | cut -d= -f2)"
  echo "TORCH=$("${torch_py:-python3}" -c 'import torch; print(torch.__version__)' 2>/dev/null || echo unknown)"
} > "$bundle/paths.txt"
git -C "$root" rev-parse HEAD > "$bundle/commit.txt"

du -sh "$bundle" | awk '{print "[gpu-bundle] " $1 " in .gpu-bundle (the device tool carries at most 64 MiB with the tree)"}'
cat "$bundle/paths.txt" | sed 's/^/[gpu-bundle] /'
ls "$bundle/lib" | sed 's/^/[gpu-bundle] lib: /'
