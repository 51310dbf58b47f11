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
# Only what the proof runs goes in (the CLI, the CUDA tests with the rank child, the CUPTI
# tests, the GPU benchmarks: the CPU suites run in CI), stripped and packed into one xz tarball that
# gpu-proof.sh unpacks. The device tool carries at most 64 MiB with the working tree (~19 MB), so
# the bundle must stay under HS_BUNDLE_MAX_MIB (default 44): this script refuses a larger one.
#
# Usage: scripts/gpu-bundle.sh [build-dir]   (default build/release; builds the targets first)
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build/release}"
bundle="$root/.gpu-bundle"
max_mib="${HS_BUNDLE_MAX_MIB:-44}"
targets=(hybridscope hs_cuda_tests hs_dist_child hs_gpu_bench)

log() { printf '[gpu-bundle] %s\n' "$*"; }

[ -f "$build/build.ninja" ] || { log "no build in $build: run 'make build' first"; exit 1; }
grep -q 'hs_cupti_tests' "$build/build.ninja" && targets+=(hs_cupti_tests) || log "warning: hs_cupti is not built here (no CUPTI): the GPU run will record no kernels"
log "building ${targets[*]}"
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"

stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/build/release/cli" "$stage/build/release/tests" "$stage/build/release/bench" "$stage/lib"
cp "$build/cli/hybridscope" "$stage/build/release/cli/"
for t in hs_cuda_tests hs_dist_child hs_cupti_tests; do
  if [ -x "$build/tests/$t" ]; then cp "$build/tests/$t" "$stage/build/release/tests/"; fi
done
cp "$build/tests/libhs_nvtx_injection.so" "$stage/build/release/tests/" 2>/dev/null || true
cp "$build/bench/hs_gpu_bench" "$stage/build/release/bench/"

# Shared libraries the binaries need beyond LibTorch (its venv) and the C/C++ runtime.
for f in "$stage"/build/release/*/*; do
  ldd "$f" 2>/dev/null | awk '/=> \// {print $3}'
done | sort -u | grep -v -e '/venv/' -e '/libc\.so' -e '/libm\.so' -e '/libstdc++' -e '/libgcc_s' -e '/libpthread' \
  -e '/librt\.so' -e '/libdl\.so' -e '/libutil\.so' -e '/ld-linux' | while read -r lib; do
  cp -L "$lib" "$stage/lib/"
done
# Symbols are the bulk of a LibTorch test binary; the proof needs none (cuda-gdb's backtraces
# still name the exported functions).
find "$stage" -type f \( -perm -u+x -o -name '*.so*' \) -exec strip --strip-unneeded {} + 2>/dev/null || true

rm -rf "$bundle"
mkdir -p "$bundle"
log "packing $(du -sh "$stage" | cut -f1) (stripped) with xz"
tar -C "$stage" -cf - build lib | xz -T0 -6 > "$bundle/bundle.tar.xz"

# The paths the tests were compiled with (HS_SOURCE_DIR, HS_BINARY_DIR): gpu-proof.sh makes them
# resolve to the copy of the repository on the GPU machine.
{
  echo "SOURCE=$(grep -m1 '^CMAKE_HOME_DIRECTORY' "$build/CMakeCache.txt" | cut -d= -f2)"
  echo "BUILD=$(cd "$build" && pwd)"
  torch_py="$(grep -m1 '^HS_PYTHON' "$build/CMakeCache.txt" | cut -d= -f2)"
  echo "TORCH=$("${torch_py:-python3}" -c 'import torch; print(torch.__version__)' 2>/dev/null || echo unknown)"
} > "$bundle/paths.txt"
git -C "$root" rev-parse HEAD > "$bundle/commit.txt"
git -C "$root" status --porcelain --untracked-files=no | grep -q . && echo "+uncommitted changes" >> "$bundle/commit.txt"

size_mib=$(( $(du -sb "$bundle" | cut -f1) / 1048576 ))
log "$(du -sh "$bundle" | cut -f1) in .gpu-bundle (limit ${max_mib} MiB: the device tool carries 64 MiB with the tree)"
sed 's/^/[gpu-bundle] /' "$bundle/paths.txt"
if [ "$size_mib" -gt "$max_mib" ]; then
  log "error: the bundle is ${size_mib} MiB, over ${max_mib} MiB; leave a target out or raise HS_BUNDLE_MAX_MIB knowingly"
  exit 1
fi
