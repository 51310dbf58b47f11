#!/usr/bin/env bash
# soak.sh — a long run of a tiny model with every probe on, watched from outside: is the trainer's
# resident memory flat, and does its run database grow linearly with the steps?
#
#   scripts/soak.sh [--steps N] [--interval S] [--out DIR] [--binary PATH] [-- extra overrides...]
#
# Runs `hybridscope train` (configs/demo_ppo.yaml's PPO: actor, critic, reference and rollout, all
# shrunk to a tiny model; ranges, memory samples every 10 ms, KV-pool samples, switches, comm)
# for N steps (default 3000) and every S seconds (default 5) samples the trainer's VmRSS
# (/proc/PID/status), the step it printed last and the run database's logical size (page_count x
# page_size, WAL included: what a reader sees, not the sawtooth of the -wal file). At the end it
# fits least-squares lines and prints a table:
#   RSS       KiB per 1000 steps and KiB per minute, over the samples after the first 10% of the
#             steps (allocator warm-up), and again over the samples taken once the database is
#             larger than the recorder's SQLite page cache (64 MiB: PRAGMA cache_size=-65536 in
#             probes/src/run_file.cpp), which grows with the database until then by design;
#   database  bytes per step, with R^2 (1.0 = linear growth);
# samples.tsv and train.log stay in DIR (default out/soak). What this is not: a benchmark (the
# step time depends on whatever else the machine runs) or a test (it asserts nothing; the figures
# go to docs/reliability.md).
set -euo pipefail
cd "$(dirname "$0")/.."

steps=3000
cache_bytes=$((64 * 1024 * 1024))  # the writer's page cache bound (run_file.cpp)
interval=5
out=out/soak
binary=build/release/cli/hybridscope
while [ $# -gt 0 ]; do
  case "$1" in
    --steps) steps=$2; shift 2 ;;
    --interval) interval=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --binary) binary=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "soak.sh: unknown argument $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
[ -x "$binary" ] || { echo "soak.sh: no $binary: build it first (cmake --build build/release --target hybridscope)" >&2; exit 2; }
command -v sqlite3 > /dev/null || { echo "soak.sh: needs the sqlite3 command (apt-get install sqlite3)" >&2; exit 2; }

mkdir -p "$out"
db="$out/soak.sqlite"
rm -f "$db" "$db-wal" "$db-shm"
rm -rf "$out/ckpt"
samples="$out/samples.tsv"

"$binary" train --config configs/demo_ppo.yaml --no-progress --db "$db" \
  data.train_files=datasets/addition/train.jsonl data.val_files=datasets/addition/val.jsonl \
  data.train_batch_size=8 actor_rollout_ref.actor.ppo_mini_batch_size=8 \
  actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=-1 critic.ppo_mini_batch_size=8 \
  critic.ppo_micro_batch_size_per_gpu=-1 actor_rollout_ref.rollout.n=2 \
  actor_rollout_ref.actor.use_kl_loss=true \
  hybridscope.model.hidden_size=32 hybridscope.model.intermediate_size=64 hybridscope.model.num_hidden_layers=1 \
  hybridscope.model.num_attention_heads=2 hybridscope.model.num_key_value_heads=1 \
  hybridscope.warmup.steps=0 hybridscope.num_threads=1 hybridscope.peak_flops=1e9 \
  hybridscope.probes.enable=true hybridscope.probes.memory_interval_ms=10 \
  trainer.val_before_train=false trainer.test_freq=-1 trainer.save_freq=-1 trainer.resume_mode=disable \
  trainer.default_local_dir="$out/ckpt" trainer.total_training_steps="$steps" "$@" \
  > "$out/train.log" 2>&1 &
pid=$!
trap 'kill $pid 2> /dev/null || true' INT TERM

start=$(date +%s.%N)
printf 'seconds\tstep\trss_kib\tdb_bytes\n' > "$samples"
while kill -0 "$pid" 2> /dev/null; do
  rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status" 2> /dev/null || true)
  step=$(grep -o '^step *[0-9]*' "$out/train.log" 2> /dev/null | tail -n 1 | awk '{print $2}' || true)
  bytes=0
  if [ -f "$db" ]; then
    bytes=$(sqlite3 -cmd '.timeout 5000' "file:$db?mode=ro" \
      'SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()' 2> /dev/null || echo 0)
  fi
  now=$(date +%s.%N)
  if [ -n "$rss" ] && [ -n "$step" ]; then
    printf '%s\t%s\t%s\t%s\n' "$(awk -v a="$now" -v b="$start" 'BEGIN { printf "%.1f", a - b }')" "$step" "$rss" "$bytes" >> "$samples"
  fi
  sleep "$interval"
done
status=0
wait "$pid" || status=$?
if [ "$status" -ne 0 ]; then
  echo "soak.sh: the trainer exited $status; its log:" >&2
  tail -n 20 "$out/train.log" >&2
  exit 1
fi

# Least squares y = a + b x over the samples with step >= `from` and a database of at least
# `min_bytes`; prints b and R^2.
fit() {  # fit <x column> <y column> <from step> [min_bytes]
  awk -F'\t' -v xc="$1" -v yc="$2" -v from="$3" -v min_bytes="${4:-0}" 'NR > 1 && $2 >= from && $4 >= min_bytes {
      n++; x = $xc; y = $yc; sx += x; sy += y; sxx += x * x; sxy += x * y; syy += y * y }
    END {
      if (n < 3) { print "nan nan"; exit }
      d = n * sxx - sx * sx; b = (n * sxy - sx * sy) / d; a = (sy - b * sx) / n
      ss = syy - 2 * a * sy - 2 * b * sxy + n * a * a + 2 * a * b * sx + b * b * sxx
      st = syy - sy * sy / n
      printf "%.6g %.4f\n", b, (st > 0 ? 1 - ss / st : 1) }' "$samples"
}
warm=$((steps / 10))
read -r rss_per_step rss_r2 < <(fit 2 3 "$warm")
read -r rss_per_second _ < <(fit 1 3 "$warm")
read -r db_per_step db_r2 < <(fit 2 4 0)
read -r rss_per_step_cached rss_cached_r2 < <(fit 2 3 0 "$cache_bytes")
read -r rss_per_second_cached _ < <(fit 1 3 0 "$cache_bytes")
cached_from=$(awk -F'\t' -v m="$cache_bytes" 'NR > 1 && $4 >= m { print $2; exit }' "$samples")
read -r first_rss last_rss < <(awk -F'\t' -v from="$warm" 'NR > 1 && $2 >= from { if (!f) f = $3; l = $3 } END { print f, l }' "$samples")
seconds=$(tail -n 1 "$samples" | cut -f1)
final_bytes=$(sqlite3 "file:$db?mode=ro" 'SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()')
n=$(($(wc -l < "$samples") - 1))

printf '\nsoak: %s steps in %.0f s, %s samples every %s s (%s)\n' "$steps" "$seconds" "$n" "$interval" "$samples"
printf '%-52s %s\n' "quantity" "value"
printf '%-52s %.1f (R^2 %s)\n' "RSS slope, KiB per 1000 steps (after 10%)" "$(awk -v b="$rss_per_step" 'BEGIN { print b * 1000 }')" "$rss_r2"
printf '%-52s %.1f\n' "RSS slope, KiB per minute (after 10%)" "$(awk -v b="$rss_per_second" 'BEGIN { print b * 60 }')"
printf '%-52s %s -> %s\n' "RSS KiB, first -> last (after 10%)" "$first_rss" "$last_rss"
if [ -n "$cached_from" ]; then
  printf '%-52s %.1f (R^2 %s)\n' "RSS slope, KiB/1000 steps, cache full (>= $cached_from)" \
    "$(awk -v b="$rss_per_step_cached" 'BEGIN { print b * 1000 }')" "$rss_cached_r2"
  printf '%-52s %.1f\n' "RSS slope, KiB per minute, cache full" "$(awk -v b="$rss_per_second_cached" 'BEGIN { print b * 60 }')"
else
  printf '%-52s %s\n' "RSS slope once the page cache is full" "n/a: the database never passed 64 MiB (run more --steps)"
fi
printf '%-52s %.0f (R^2 %s)\n' "database growth, bytes per step" "$db_per_step" "$db_r2"
printf '%-52s %s\n' "database at the end, bytes" "$final_bytes"
printf '%-52s %s\n' "runs.status" "$(sqlite3 "file:$db?mode=ro" 'SELECT status || '"'"' (write_errors '"'"' || write_errors || '"'"', dropped '"'"' || dropped_records || '"'"')'"'"' FROM runs')"
