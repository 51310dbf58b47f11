#!/usr/bin/env bash
# remove-padding-ab.sh — actor_rollout_ref.model.use_remove_padding off vs on, run alternately
# (off, on, off, on, ...) on the demo GRPO step and on issue 21's shape (hidden 512, 4 layers,
# 8 prompts x 4 samples, up to 64 prompt + 64 response tokens, KL loss so the reference runs),
# then the medians over steps 2.. of every run of each variant: timing_s/{old_log_prob, ref,
# update_actor, step} and real tokens/s of those phases (perf/total_num_tokens / time).
# Figures and conditions: docs/benchmarks.md, "use_remove_padding".
#   scripts/remove-padding-ab.sh [demo|issue] [rounds] [steps]
# HS_VARIANTS="false:BIN true:BIN ..." (default: both settings with build/release's binary)
# compares binaries too, each run in turn within every round.
set -euo pipefail
shape=${1:-demo}
rounds=${2:-3}
steps=${3:-6}
bin=${HS_BIN:-build/release/cli/hybridscope}
out=${HS_OUT:-out/remove-padding-ab}/$shape
mkdir -p "$out"
args=(train --config configs/demo_grpo.yaml --no-progress hybridscope.warmup.steps=0 hybridscope.num_threads=2
      trainer.val_before_train=false trainer.test_freq=-1 trainer.save_freq=-1 trainer.resume_mode=disable
      "trainer.default_local_dir=$out/ckpt" "trainer.total_training_steps=$steps")
if [[ $shape == issue ]]; then
  args+=(hybridscope.model.hidden_size=512 hybridscope.model.intermediate_size=1536
         hybridscope.model.num_hidden_layers=4 hybridscope.model.num_attention_heads=8
         hybridscope.model.num_key_value_heads=4 hybridscope.model.max_position_embeddings=128
         data.max_prompt_length=64 data.max_response_length=64 data.train_batch_size=8
         actor_rollout_ref.rollout.n=4 actor_rollout_ref.actor.ppo_mini_batch_size=8
         actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=32 actor_rollout_ref.actor.use_kl_loss=true)
fi
read -r -a variants <<<"${HS_VARIANTS:-false:$bin true:$bin}"
for ((r = 0; r < rounds; ++r)); do
  for i in "${!variants[@]}"; do
    rm -f "$out/run-$i-$r.sqlite"
    OMP_WAIT_POLICY=PASSIVE "${variants[$i]#*:}" "${args[@]}" --db "$out/run-$i-$r.sqlite" \
      "actor_rollout_ref.model.use_remove_padding=${variants[$i]%%:*}" >/dev/null
  done
done
uptime
python3 - "$out" "$rounds" "${variants[@]}" <<'PY'
import sqlite3, statistics, sys
out, rounds, variants = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
phases = ["old_log_prob", "ref", "update_actor", "step"]
print(f"{'use_remove_padding:binary':>40} " + " ".join(f"{p + ' s':>16} {p + ' tok/s':>18}" for p in phases))
for i, variant in enumerate(variants):
    rows = {}
    for r in range(rounds):
        db = sqlite3.connect(f"{out}/run-{i}-{r}.sqlite")
        for step, name, value in db.execute(
                "SELECT m.step, s.value, m.value FROM step_metrics m JOIN strings s ON s.id = m.name_id "
                "WHERE m.step >= 2"):
            rows.setdefault((r, step), {})[name] = value
    cells = []
    for p in phases:
        times = [m[f"timing_s/{p}"] for m in rows.values() if f"timing_s/{p}" in m]
        rates = [m["perf/total_num_tokens"] / m[f"timing_s/{p}"] for m in rows.values() if f"timing_s/{p}" in m]
        cells.append(f"{statistics.median(times):>16.4f} {statistics.median(rates):>18.0f}" if times else f"{'-':>16} {'-':>18}")
    print(f"{variant:>40} " + " ".join(cells))
PY
