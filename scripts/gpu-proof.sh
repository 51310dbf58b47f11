#!/usr/bin/env bash
# gpu-proof.sh — the GPU checks of issues 33 and 36 in one call on a lent GPU machine
# (docs/benchmarks.md, "On a GPU"). Run from the repository root there, with the bundle that
# scripts/gpu-bundle.sh made on the CPU machine carried along (.gpu-bundle). Every part runs under
# its own time limit; the whole proof is planned for <= 8 minutes on an H100. At most 8 files come
# back in $OUT (summary.txt, status.txt, tests.txt, demo.txt, cells.txt, bench.json, sim.txt,
# logs.tar.gz with everything else); the summary table is printed last.
#
# Parts (HS_PROOF_PARTS, default all, in this order):
#   probe   the device, and the kernels one NCCL rank really launches (PyTorch profiler)
#   tests   every CUDA test, each in its own process (a crash is named and rerun under cuda-gdb
#           for its backtrace), and hs_cupti_tests
#   demo    the demo GRPO run on cuda in bf16 with CUPTI, then the kernel->range correlation check
#   cells   the cells of bench/matrices/gpu-shapes.yaml that fit one device, smallest first, each
#           under its own limit while the part's budget lasts: steps, phases, MFU, peak memory
#           against `hybridscope simulate`'s prediction for the same cell
#   bench   hs_gpu_bench: decode step vs the HBM roofline (default path, paged kernel, CUDA graphs),
#           a training step's MFU
#   sim     simulate --calibrate on the cells' database with the device's hardware file, --validate
#   peer    (only when named) bench/micro/hf_grpo_peer.py, the transformers loop, on a cell's shape
#
# A second call reruns only what failed: copy the status.txt that came back to
# .gpu-bundle/rerun.txt (it travels with the bundle) and call again; or name parts in
# HS_PROOF_PARTS. Environment: OUT (output folder, default out/gpu), HS_PROOF_STEPS (demo steps,
# default 10), HS_PROOF_CELLS_BUDGET (seconds for
# all cells, default 200); HS_PROOF_SHAPES, HS_PROOF_RESPONSE (the cells run), HS_PROOF_BENCH_FILTER (hs_gpu_bench's), HS_PROOF_BENCH_TIMEOUT (seconds, default 240), HS_PROOF_EXTRA_OVERRIDES (appended to every cell's).
set -uo pipefail

repo="$(pwd)"
out="${OUT:-$repo/out/gpu}"
steps="${HS_PROOF_STEPS:-10}"
cells_budget="${HS_PROOF_CELLS_BUDGET:-200}"
mkdir -p "$out"
logs="$(mktemp -d)"
summary="$out/summary.txt"
status="$out/status.txt"
: > "$summary"
: > "$status"
say() { printf '%s\n' "$*" | tee -a "$summary"; }
mark() { printf '%s %s\n' "$1" "$2" >> "$status"; }  # part ok|fail
t0=$(date +%s)
elapsed() { echo $(( $(date +%s) - t0 )); }

parts="${HS_PROOF_PARTS:-probe tests demo cells bench sim}"
if [ -z "${HS_PROOF_PARTS:-}" ] && [ -f .gpu-bundle/rerun.txt ]; then
  parts="$(awk '$2 != "ok" {print $1}' .gpu-bundle/rerun.txt | tr '\n' ' ')"
  say "rerun of the parts that failed last time: ${parts:-none}"
fi
part() { [[ " $parts " == *" $1 "* ]]; }

# --- layout: unpack the binaries where they were built ------------------------------------------
[ -f .gpu-bundle/bundle.tar.xz ] || { echo "gpu-proof: no .gpu-bundle/bundle.tar.xz here: run scripts/gpu-bundle.sh on the build machine and carry .gpu-bundle"; exit 2; }
unpacked="/tmp/hs-gpu-bundle"
rm -rf "$unpacked" && mkdir -p "$unpacked"
if ! tar -C "$unpacked" -xJf .gpu-bundle/bundle.tar.xz 2>/dev/null; then
  python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' .gpu-bundle/bundle.tar.xz "$unpacked" ||
    { echo "gpu-proof: could not unpack the bundle"; exit 2; }
fi
src="$(grep '^SOURCE=' .gpu-bundle/paths.txt | cut -d= -f2)"
bld="$(grep '^BUILD=' .gpu-bundle/paths.txt | cut -d= -f2)"
if [ "$(realpath "$src" 2>/dev/null)" != "$(realpath "$repo")" ]; then
  [ -e "$src" ] && { echo "gpu-proof: $src exists and is not this repository; run from there"; exit 2; }
  mkdir -p "$(dirname "$src")" && ln -s "$repo" "$src"
fi
mkdir -p "$(dirname "$bld")"
[ -e "$bld" ] || ln -s "$unpacked/build/release" "$bld"
bin="$bld"
hs="$bin/cli/hybridscope"

py="${HS_PYTHON:-python3}"
torch_lib="$("$py" -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')"
nvidia_libs="$("$py" -c 'import glob, os, site; print(":".join(sorted(glob.glob(os.path.join(site.getsitepackages()[0], "nvidia", "*", "lib")))))')"
export LD_LIBRARY_PATH="$unpacked/lib:$torch_lib:$nvidia_libs:${LD_LIBRARY_PATH:-}"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-8}"

device_name="$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)"
say "# hybridscope GPU proof — $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(head -1 .gpu-bundle/commit.txt)$(sed -n 2p .gpu-bundle/commit.txt)"
say "device: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | head -1)"
say "torch here: $("$py" -c 'import torch; print(torch.__version__, "cuda", torch.version.cuda)'); built against $(grep '^TORCH=' .gpu-bundle/paths.txt | cut -d= -f2)"
missing="$(ldd "$hs" | grep 'not found')"
[ -n "$missing" ] && { say "missing libraries: $missing"; exit 3; }
case "$device_name" in
  *H200*) hardware=bench/hardware/h200-ib.yaml ;;
  *) hardware=bench/hardware/h100-ib.yaml ;;
esac

# --- probe: what one NCCL rank launches ------------------------------------------------------------
if part probe; then
  timeout 60 "$py" - > "$logs/probe.txt" 2>&1 <<'PY'
import os, torch, torch.distributed as dist
from torch.profiler import profile, ProfilerActivity
os.environ.setdefault("MASTER_ADDR", "127.0.0.1"); os.environ.setdefault("MASTER_PORT", "29533")
dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda:0"))
t = torch.ones(1 << 20, device="cuda")
for name, fn in [("all_reduce sum", lambda: dist.all_reduce(t)),
                 ("all_reduce avg", lambda: dist.all_reduce(t, op=dist.ReduceOp.AVG)),
                 ("all_gather", lambda: dist.all_gather_into_tensor(torch.empty_like(t), t))]:
    fn(); torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as p:
        fn(); torch.cuda.synchronize()
    names = sorted({e.name for e in p.events() if e.device_type == torch.autograd.DeviceType.CUDA})
    print(f"nccl one rank, {name}: {names}")
dist.destroy_process_group()
PY
  rc=$?
  cat "$logs/probe.txt" | grep -E '^nccl' | tee -a "$summary"
  mark probe "$([ $rc -eq 0 ] && echo ok || echo fail)"
fi

# --- tests: each CUDA test in its own process --------------------------------------------------------
if part tests; then
  : > "$out/tests.txt"
  mapfile -t names < <(cd "$bin/tests" && ./hs_cuda_tests --gtest_list_tests |
                       awk '/^[^ ]/ {suite=$1} /^  / {print suite $1}')
  pass=0 fail=0
  for name in "${names[@]}"; do
    (cd "$bin/tests" && timeout 120 ./hs_cuda_tests --gtest_filter="$name" > "$logs/test-$name.log" 2>&1)
    rc=$?
    if [ $rc -eq 0 ] && ! grep -q '\[  SKIPPED \]' "$logs/test-$name.log"; then
      pass=$((pass + 1)); echo "PASS $name" >> "$out/tests.txt"
    elif [ $rc -eq 0 ]; then
      echo "SKIP $name: $(grep -m1 -A1 'Skipped' "$logs/test-$name.log" | tail -1)" >> "$out/tests.txt"
    else
      fail=$((fail + 1))
      { echo "FAIL $name (rc $rc)"; grep -E 'Failure|Expected|Which is|actual|error|what\(\)' "$logs/test-$name.log" | head -12 | sed 's/^/    /'; } >> "$out/tests.txt"
      if [ $rc -ge 128 ] && [ $rc -ne 137 ] && command -v cuda-gdb > /dev/null; then
        (cd "$bin/tests" && timeout 150 cuda-gdb -batch -ex run -ex bt -ex 'thread apply all bt 6' \
           --args ./hs_cuda_tests --gtest_filter="$name" > "$logs/gdb-$name.log" 2>&1)
        { echo "    backtrace:"; grep -E '^#[0-9]' "$logs/gdb-$name.log" | head -25 | sed 's/^/    /'; } >> "$out/tests.txt"
      fi
    fi
  done
  if [ -x "$bin/tests/hs_cupti_tests" ]; then
    (cd "$bin/tests" && timeout 120 ./hs_cupti_tests --gtest_brief=1 > "$logs/cupti-tests.log" 2>&1)
    rc=$?
    echo "hs_cupti_tests rc=$rc: $(grep -E '^\[  (PASSED|FAILED) ' "$logs/cupti-tests.log" | tr '\n' ' ')" >> "$out/tests.txt"
    [ $rc -eq 0 ] || fail=$((fail + 1))
  fi
  say "tests: ${#names[@]} tests of hs_cuda_tests, $pass passed, $fail failed (+ hs_cupti_tests) at $(elapsed) s"
  grep -E '^(FAIL|SKIP|hs_cupti)' "$out/tests.txt" | tee -a "$summary"
  mark tests "$([ $fail -eq 0 ] && echo ok || echo fail)"
fi

# --- demo on cuda with CUPTI, and the correlation check -----------------------------------------------
if part demo; then
  rm -f /tmp/hs-gpu-demo.sqlite*
  start=$(date +%s)
  timeout 240 "$hs" train --config configs/demo_grpo.yaml --no-progress --db /tmp/hs-gpu-demo.sqlite \
    trainer.device=cuda hybridscope.precision=bf16 trainer.total_training_steps="$steps" trainer.test_freq=-1 \
    trainer.save_freq=-1 trainer.resume_mode=disable trainer.default_local_dir=/tmp/hs-gpu-ckpt > "$out/demo.txt" 2>&1
  rc=$?
  say "demo (cuda, bf16, CUPTI, $steps steps): rc=$rc in $(( $(date +%s) - start )) s; $(grep -m1 'after' "$out/demo.txt" | tr -s ' ')"
  start=$(date +%s)
  if "$hs" --help 2>/dev/null | grep -qE "^ +check"; then
    timeout 90 "$hs" check /tmp/hs-gpu-demo.sqlite >> "$out/demo.txt" 2>&1
  else
    timeout 90 "$py" scripts/gpu-checks.py /tmp/hs-gpu-demo.sqlite >> "$out/demo.txt" 2>&1
  fi
  crc=$?
  say "correlation check: rc=$crc in $(( $(date +%s) - start )) s"
  grep -iE 'correlation|records:|kernels (compute|nccl|memory)|external_frag' "$out/demo.txt" | head -12 | tee -a "$summary"
  timeout 60 "$hs" diagnose /tmp/hs-gpu-demo.sqlite > "$logs/demo-diagnose.txt" 2>&1
  say "diagnose on the demo: rc=$? ($(wc -l < "$logs/demo-diagnose.txt") lines)"
  ls -la /tmp/hs-gpu-demo.sqlite >> "$logs/demo-db.txt" 2>&1
  mark demo "$([ $rc -eq 0 ] && [ $crc -eq 0 ] && echo ok || echo fail)"
fi

# --- cells of gpu-shapes.yaml that fit one device ---------------------------------------------------
# A trimmed copy of the matrix (HS_PROOF_SHAPES, response HS_PROOF_RESPONSE; one repetition of
# 1 warm-up + 1 measured step) through `hybridscope bench`, so that the database is a matrix that
# `summary` and `simulate --calibrate` read; the whole part under one limit (a rerun resumes).
if part cells; then
  : > "$out/cells.txt"
  shapes="${HS_PROOF_SHAPES:-qwen2.5-0.5b qwen2.5-1.5b}"
  response="${HS_PROOF_RESPONSE:-256}"
  "$py" - "$shapes" "$response" > bench/matrices/gpu-shapes-proof.yaml <<'PY'
import os, sys, yaml
spec = yaml.safe_load(open("bench/matrices/gpu-shapes.yaml"))
shapes, response = sys.argv[1].split(), [int(r) for r in sys.argv[2].split()]
spec.update(name="gpu-shapes-proof", repetitions=1, warmup_steps=1, measured_steps=1)
spec["overrides"] += os.environ.get("HS_PROOF_EXTRA_OVERRIDES", "").split()
spec["axes"]["shape"] = {k: v for k, v in spec["axes"]["shape"].items() if k in shapes}
spec["axes"]["data.max_response_length"] = response
spec["baseline"] = {"shape": shapes[0], "data.max_response_length": response[0]}
print(yaml.safe_dump(spec, sort_keys=False))
PY
  start=$(date +%s)
  resume=""
  [ -f out/gpu-shapes.sqlite ] && resume="--resume"  # a second call continues the matrix
  timeout "$cells_budget" "$hs" bench bench/matrices/gpu-shapes-proof.yaml --db out/gpu-shapes.sqlite $resume \
    > "$logs/cells-bench.txt" 2>&1
  rc=$?
  echo "hybridscope bench (shapes: $shapes; response $response): rc=$rc in $(( $(date +%s) - start )) s" >> "$out/cells.txt"
  "$hs" matrix plan bench/matrices/gpu-shapes-proof.yaml --commands > "$logs/plan.txt" 2>&1
  # Per cell: its run's steps, and simulate's predicted peak memory for the same overrides.
  grep '^# cell ' "$logs/plan.txt" | while read -r _ _ index name; do
    cell="$(grep -A1 "^# cell $index " "$logs/plan.txt" | tail -1)"
    sim_cmd="$(sed -E "s|^[^ ]*hybridscope |$hs |; s| train | simulate --hardware $hardware --ranks 1 |; s| --db [^ ]+||; s| --no-progress||" <<< "$cell")"
    eval "timeout 30 $sim_cmd" > "$logs/sim-cell$index.txt" 2>&1
    # simulate's table: ranks, step s, switch, gen, logp, update, mem GB, ... (the row of 1 rank)
    predicted="$(awk '/^ +ranks +step s/ {table = 1; next} table && $1 == 1 {print $7; exit}' "$logs/sim-cell$index.txt")"
    "$py" - out/gpu-shapes.sqlite "$index" "$name" "${predicted:-}" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
index, name, predicted = int(sys.argv[2]), sys.argv[3], sys.argv[4]
row = db.execute("SELECT r.run_id, r.status, r.error FROM matrix_runs r JOIN matrix_cells c ON c.id = r.cell_id "
                 "WHERE c.cell_index = ? AND c.matrix_id = (SELECT MAX(id) FROM matrices) ORDER BY r.id DESC LIMIT 1",
                 (index - 1,)).fetchone()
if row is None:
    print(f"cell {index} {name}: not run"); sys.exit(0)
run, status, error = row
print(f"cell {index} {name}: {status}" + (f" ({error.splitlines()[-1][:300]})" if error else ""))
names = ("perf/time_per_step", "timing_s/gen", "timing_s/old_log_prob", "timing_s/update_actor", "perf/mfu/actor",
         "perf/throughput", "perf/max_memory_allocated_gb", "perf/max_memory_reserved_gb")
rows = db.execute("SELECT m.step, s.value, m.value FROM step_metrics m JOIN strings s ON s.id = m.name_id "
                  f"WHERE m.run_id = ? AND s.value IN ({','.join('?' * len(names))}) ORDER BY m.step",
                  (run, *names)).fetchall() if run else []
for step in sorted({r[0] for r in rows}):
    v = {n: x for st, n, x in rows if st == step}
    print(f"    step {step}: " + ", ".join(f"{n.split('/')[-1]} {v[n]:.4g}" for n in names if n in v))
peaks = [x for st, n, x in rows if n == "perf/max_memory_reserved_gb"]
if peaks and predicted:
    peak = max(peaks) * 2**30 / 1e9
    print(f"    peak reserved {peak:.2f} GB vs simulate {float(predicted):.2f} GB: {100 * (float(predicted) / peak - 1):+.1f} %")
elif peaks:
    print("    simulate gave no peak-memory figure for this cell")
PY
  done >> "$out/cells.txt" 2>&1
  "$hs" summary out/gpu-shapes.sqlite >> "$logs/cells-summary.txt" 2>&1
  gzip -c out/gpu-shapes.sqlite > "$logs/gpu-shapes.sqlite.gz" 2>/dev/null
  [ "$(stat -c %s "$logs/gpu-shapes.sqlite.gz" 2>/dev/null || echo 0)" -gt 8000000 ] && rm -f "$logs/gpu-shapes.sqlite.gz"
  say "cells at $(elapsed) s:"
  tee -a "$summary" < "$out/cells.txt"
  mark cells "$([ $rc -eq 0 ] && ! grep -qE ': (failed|not run)' "$out/cells.txt" && echo ok || echo fail)"
fi

# --- benchmarks -----------------------------------------------------------------------------------
if part bench; then
  # Debian 12's Google Benchmark (1.7) takes --benchmark_min_time in seconds without a unit.
  # Decode: the default path (mode 0), the paged kernel (1) and its CUDA graphs (2), issue 36.
  timeout "${HS_PROOF_BENCH_TIMEOUT:-240}" "$bin/bench/hs_gpu_bench" --benchmark_out="$out/bench.json" --benchmark_out_format=json \
    --benchmark_filter="${HS_PROOF_BENCH_FILTER:-BM_DecodeStep/[23]/(32|64)/1024/[012]|BM_TrainStepMfu/[23]/}" --benchmark_min_time=0.2 --benchmark_counters_tabular=true \
    > "$logs/bench.txt" 2>&1
  rc=$?
  say "bench: rc=$rc at $(elapsed) s"
  grep -E '^BM_|^-|Benchmark' "$logs/bench.txt" | tee -a "$summary"
  mark bench "$([ $rc -eq 0 ] && echo ok || echo fail)"
fi

# --- the transformers peer on a cell's shape (issue 36; not in the default parts) -----------------------
if part peer; then
  timeout "${HS_PROOF_PEER_TIMEOUT:-150}" "$py" bench/micro/hf_grpo_peer.py --shape "${HS_PROOF_PEER_SHAPE:-qwen2.5-0.5b}" \
    --prompts 32 --n 8 --response "${HS_PROOF_RESPONSE:-256}" --steps "${HS_PROOF_PEER_STEPS:-1}" \
    > "$logs/peer.txt" 2>&1
  rc=$?
  say "transformers peer (${HS_PROOF_PEER_SHAPE:-qwen2.5-0.5b}): rc=$rc"
  grep '^{' "$logs/peer.txt" | tee -a "$summary"
  mark peer "$([ $rc -eq 0 ] && echo ok || echo fail)"
fi

# --- the simulator calibrated on the cells ------------------------------------------------------------
if part sim; then
  if [ -f out/gpu-shapes.sqlite ]; then
    timeout 90 "$hs" simulate --hardware "$hardware" --config configs/demo_grpo.yaml --calibrate out/gpu-shapes.sqlite \
      --validate --ranks 1,8 > "$out/sim.txt" 2>&1
    rc=$?
  else
    echo "no cell database to calibrate on (run the cells part)" > "$out/sim.txt"; rc=1
  fi
  say "simulate --calibrate --validate ($hardware): rc=$rc"
  grep -iE 'MAPE|held-out|fitted|error' "$out/sim.txt" | head -8 | tee -a "$summary"
  mark sim "$([ $rc -eq 0 ] && echo ok || echo fail)"
fi

cp "$summary" "$logs/" 2>/dev/null
tar -C "$logs" -czf "$out/logs.tar.gz" . 2>/dev/null
say "parts: $(tr '\n' ' ' < "$status")— $(elapsed) s in all; files in $out: $(ls "$out" | tr '\n' ' ')"
