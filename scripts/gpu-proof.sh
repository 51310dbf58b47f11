#!/usr/bin/env bash
# gpu-proof.sh — everything issue 5 must show, in one call on a lent GPU machine (docs/benchmarks.md,
# "On a GPU"). Run from the repository root there, with the bundle scripts/gpu-bundle.sh made on
# the CPU machine carried along (.gpu-bundle). Writes at most 8 files into $OUT (default out/gpu)
# and prints a summary table last.
#
#   1. the test suites (the CUDA tests run instead of skipping)
#   2. the demo GRPO run on cuda in bf16 with CUPTI: kernels/memcpy/runtime records, the check that
#      every kernel was launched inside the range it is correlated with, fragmentation ratios from the
#      caching allocator, the switches broken into components
#   3. the same run with the probes (and CUPTI) off: probe overhead = step time on / off
#   4. the demo with param and optimizer offload: the switch with offload/onload and a KV pool sized
#      by rollout.gpu_memory_utilization (checks appended to checks.txt)
#   5. cell 1 of bench/matrices/gpu-shapes.yaml (Qwen2.5-0.5B shape, random weights), 3 steps:
#      a real-sized GRPO step's phases, MFU and memory (log appended to demo.log)
#   6. hs_gpu_bench: decode step vs the HBM roofline, a training step's MFU
#
# Environment: OUT (output folder), HS_PROOF_STEPS (trainer steps, default 20), HS_PROOF_SKIP
# (space-separated parts to skip: tests demo overhead offload matrix bench).
set -uo pipefail

repo="$(pwd)"
out="${OUT:-$repo/out/gpu}"
steps="${HS_PROOF_STEPS:-20}"
skip=" ${HS_PROOF_SKIP:-} "
mkdir -p "$out"
summary="$out/summary.txt"
: > "$summary"
say() { printf '%s\n' "$*" | tee -a "$summary"; }
part() { [[ "$skip" != *" $1 "* ]]; }

# --- layout: the binaries and the paths they were built with ------------------------------------
[ -d .gpu-bundle ] || { echo "gpu-proof: no .gpu-bundle here: run scripts/gpu-bundle.sh on the build machine and carry .gpu-bundle"; exit 2; }
src="$(grep '^SOURCE=' .gpu-bundle/paths.txt | cut -d= -f2)"
bld="$(grep '^BUILD=' .gpu-bundle/paths.txt | cut -d= -f2)"
if [ "$(realpath "$src" 2>/dev/null)" != "$(realpath "$repo")" ]; then
  [ -e "$src" ] && { echo "gpu-proof: $src exists and is not this repository; run from there"; exit 2; }
  mkdir -p "$(dirname "$src")" && ln -s "$repo" "$src"
fi
mkdir -p "$(dirname "$bld")"
[ -e "$bld" ] || ln -s "$repo/.gpu-bundle/build/release" "$bld"
bin="$bld"

# --- LibTorch and CUDA libraries of this machine's PyTorch --------------------------------------
py="${HS_PYTHON:-python3}"
torch_lib="$("$py" -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')"
nvidia_libs="$("$py" -c 'import glob, os, site; print(":".join(sorted(glob.glob(os.path.join(site.getsitepackages()[0], "nvidia", "*", "lib")))))')"
export LD_LIBRARY_PATH="$repo/.gpu-bundle/lib:$torch_lib:$nvidia_libs:${LD_LIBRARY_PATH:-}"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-8}"

say "# hybridscope GPU proof — $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(cat .gpu-bundle/commit.txt)"
say "device: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | head -1)"
say "torch here: $("$py" -c 'import torch; print(torch.__version__, "cuda", torch.version.cuda)'); built against $(grep '^TORCH=' .gpu-bundle/paths.txt | cut -d= -f2)"
missing="$(ldd "$bin/cli/hybridscope" | grep 'not found')"
[ -n "$missing" ] && { say "missing libraries: $missing"; exit 3; }

# --- 1. tests ------------------------------------------------------------------------------------
if part tests; then
  : > "$out/tests.log"
  for t in hs_probes_tests hs_reports_tests hs_cupti_tests hs_trainer_tests; do
    [ -x "$bin/tests/$t" ] || continue
    start=$(date +%s)
    (cd "$bin/tests" && ./"$t" --gtest_brief=1 >> "$out/tests.log" 2>&1)
    rc=$?
    say "tests: $t rc=$rc ($(( $(date +%s) - start )) s): $(grep -c '^\[  FAILED  \]' "$out/tests.log") FAILED lines so far, $(grep -c 'SKIPPED' "$out/tests.log") skipped"
  done
fi

# --- 2./3. the demo on cuda, probes on and off ---------------------------------------------------
run_demo() {  # $1 db, $2 probes true|false, rest: extra overrides
  local db="$1" probes="$2"
  shift 2
  "$bin/cli/hybridscope" train --config configs/demo_grpo.yaml --no-progress --db "$db" \
    trainer.device=cuda hybridscope.precision=bf16 hybridscope.probes.enable="$probes" \
    trainer.total_training_steps="$steps" trainer.test_freq=-1 trainer.save_freq=-1 trainer.resume_mode=disable \
    trainer.default_local_dir="/tmp/hs-gpu-ckpt-$probes" "$@"
}
if part demo; then
  rm -f /tmp/hs-gpu-demo.sqlite
  start=$(date +%s)
  run_demo /tmp/hs-gpu-demo.sqlite true > "$out/demo.log" 2>&1
  say "demo (cuda, bf16, CUPTI, $steps steps): rc=$? in $(( $(date +%s) - start )) s; $(grep -m1 'after' "$out/demo.log" | tr -s ' ')"
  "$py" scripts/gpu-checks.py /tmp/hs-gpu-demo.sqlite | tee "$out/checks.txt" | tee -a "$summary"
  gzip -c /tmp/hs-gpu-demo.sqlite > "$out/demo.sqlite.gz"
fi
if part overhead; then
  rm -f /tmp/hs-gpu-off.sqlite /tmp/hs-gpu-on.sqlite
  run_demo /tmp/hs-gpu-off.sqlite false hybridscope.warmup.steps=0 trainer.val_before_train=false > /dev/null 2>&1
  run_demo /tmp/hs-gpu-on.sqlite true hybridscope.warmup.steps=0 trainer.val_before_train=false > /dev/null 2>&1
  "$py" - /tmp/hs-gpu-on.sqlite /tmp/hs-gpu-off.sqlite <<'PY' | tee -a "$summary"
import sqlite3, statistics, sys
def step_times(path):
    db = sqlite3.connect(path)
    rows = db.execute("SELECT m.step, m.value FROM step_metrics m JOIN strings s ON s.id = m.name_id "
                      "WHERE s.value = 'perf/time_per_step' AND m.step > 2 ORDER BY m.step").fetchall()
    return [v for _, v in rows]
on, off = step_times(sys.argv[1]), step_times(sys.argv[2])
if on and off:
    m_on, m_off = statistics.median(on), statistics.median(off)
    print(f"probe overhead (probes + CUPTI on vs off, median step time over steps 3..): "
          f"{m_on*1e3:.1f} ms vs {m_off*1e3:.1f} ms = {100*(m_on/m_off-1):+.2f} % (goal <= 3 %)")
else:
    print("probe overhead: no step times recorded")
PY
fi

# --- 4. offloading: the switch's offload/onload components and the KV pool on the device ------
if part offload; then
  rm -f /tmp/hs-gpu-offload.sqlite
  run_demo /tmp/hs-gpu-offload.sqlite true hybridscope.warmup.steps=0 trainer.val_before_train=false \
    trainer.total_training_steps=5 actor_rollout_ref.actor.fsdp_config.param_offload=true \
    actor_rollout_ref.actor.fsdp_config.optimizer_offload=true > /tmp/hs-gpu-offload.log 2>&1
  say "offload demo (param + optimizer offload, 5 steps): rc=$?"
  { echo; echo "# offload run"; "$py" scripts/gpu-checks.py /tmp/hs-gpu-offload.sqlite; } | tee -a "$out/checks.txt" | grep -iE 'switch|offload|onload|kv_' | tee -a "$summary"
fi

# --- 5. one cell of the GPU matrix: the Qwen2.5-0.5B shape ----------------------------------------
if part matrix; then
  cell="$("$bin/cli/hybridscope" matrix plan bench/matrices/gpu-shapes.yaml --commands | grep -A1 '^# cell 1 ' | tail -1)"
  cell="${cell/#hybridscope /$bin/cli/hybridscope }"
  start=$(date +%s)
  { echo; echo "# matrix cell 1: $cell"; eval "$cell trainer.total_training_steps=3"; } >> "$out/demo.log" 2>&1
  say "matrix cell 1 (qwen2.5-0.5b shape, 3 steps): rc=$? in $(( $(date +%s) - start )) s"
  "$py" - out/matrix/gpu-shapes/cell1.sqlite <<'PY' | tee -a "$summary"
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
names = ("perf/time_per_step", "timing_s/gen", "timing_s/update_actor", "perf/mfu/actor", "perf/throughput",
         "perf/max_memory_allocated_gb", "perf/max_memory_reserved_gb", "rollout/kv_num_blocks")
for step, name, value in db.execute(
        "SELECT m.step, s.value, m.value FROM step_metrics m JOIN strings s ON s.id = m.name_id "
        f"WHERE s.value IN ({','.join('?' * len(names))}) ORDER BY m.step, s.value", names):
    print(f"  step {step} {name} = {value:.4g}")
PY
fi

# --- 6. benchmarks -------------------------------------------------------------------------------
if part bench; then
  "$bin/bench/hs_gpu_bench" --benchmark_out="$out/gpu-bench.json" --benchmark_out_format=json \
    --benchmark_counters_tabular=true > "$out/bench.txt" 2>&1
  say "bench: rc=$?"
  grep -E '^BM_|^-|Benchmark' "$out/bench.txt" | tee -a "$summary"
fi
say "files in $out: $(ls "$out" | tr '\n' ' ')"
