#!/usr/bin/env python3
"""Records the fixture traces beside this script: a small verl-style PPO loop on 2 ranks
(torch.distributed over gloo, CPU), profiled by the PyTorch profiler the way verl's
`global_profiler.tool=torch` profiles a worker: one Chrome-trace JSON per rank, verl's
`marked_timer` names as `record_function` annotations (step, update_weights, gen, old_log_prob,
ref, adv, update_actor), `distributedInfo` (rank, world size, backend) in the header, and the gloo
collectives the CPU profiler sees (`record_param_comms` operators, `gloo:*` ranges).

    record_verl_gloo.py OUT_DIR [--steps 10] [--decode 4] [--name base] [--seed 0]

Writes OUT_DIR/<name>_rank{0,1}.json.gz (gzipped traces) and OUT_DIR/<name>_console.log (rank 0's
verl console metric lines: step:N - timing_s/... - perf/...). --decode sets the rollout's decode
steps per step, so two recordings differ in `gen` (the committed `base` and `longgen` pair:
--decode 4 and --decode 12; 10 steps each, so that 9 measured steps a side let compare's U test
reach significance). The loop is CPU-only on purpose: these traces must be recordable on a
laptop; the GPU side of the importer is checked on HolisticTraceAnalysis' traces (../kineto_hta).

Not verl: the models are small linear layers, the "rollout" a few tanh layers, the losses PPO's
shape without its numerics. What matters here is the trace's structure, not the math.
"""
import argparse
import gzip
import os
import shutil
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.profiler import ProfilerActivity, profile, record_function

WORLD = 2
HIDDEN, BATCH = 128, 8


def worker(rank, args):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(args.port)
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    torch.manual_seed(args.seed + rank)
    torch.set_num_threads(1)
    actor = torch.nn.Sequential(torch.nn.Linear(HIDDEN, HIDDEN), torch.nn.GELU(), torch.nn.Linear(HIDDEN, HIDDEN))
    rollout = torch.nn.Linear(HIDDEN, HIDDEN)
    ref = torch.nn.Linear(HIDDEN, HIDDEN)
    opt = torch.optim.SGD(actor.parameters(), lr=1e-3)
    lines = []
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for step in range(1, args.steps + 1):
            t = {}
            step_t0 = time.perf_counter()

            def timed(name, fn):
                t0 = time.perf_counter()
                with record_function(name):
                    out = fn()
                t[name] = time.perf_counter() - t0
                return out

            with record_function("step"):
                def update_weights():
                    # the rollout's weights from the actor's first layer, broadcast from rank 0
                    with torch.no_grad():
                        rollout.weight.copy_(actor[0].weight)
                        rollout.bias.copy_(actor[0].bias)
                    dist.broadcast(rollout.weight.data, src=0)
                    dist.broadcast(rollout.bias.data, src=0)

                timed("update_weights", update_weights)
                prompts = torch.randn(BATCH, HIDDEN)

                def gen():
                    x = prompts
                    with torch.no_grad():
                        for _ in range(args.decode):
                            x = torch.tanh(rollout(x))
                    return x

                seqs = timed("gen", gen)
                old_lp = timed("old_log_prob", lambda: torch.log_softmax(actor(seqs), -1).detach())
                ref_lp = timed("ref", lambda: torch.log_softmax(ref(seqs), -1).detach())
                scores = seqs.sum(-1)
                adv = timed("adv", lambda: (scores - scores.mean()) / (scores.std() + 1e-6))

                def update_actor():
                    opt.zero_grad()
                    lp = torch.log_softmax(actor(seqs), -1)
                    loss = -(torch.exp(lp - old_lp).mean(-1) * adv).mean() + 0.01 * (lp - ref_lp).pow(2).mean()
                    loss.backward()
                    for p in actor.parameters():  # data parallel: the gradients averaged over the ranks
                        dist.all_reduce(p.grad)
                        p.grad /= WORLD
                    opt.step()
                    return loss

                loss = timed("update_actor", update_actor)
            t["step"] = time.perf_counter() - step_t0
            fields = [f"step:{step}"] + [f"timing_s/{k}:{v:.6f}" for k, v in t.items()]
            fields += [f"perf/throughput:{BATCH / t['step']:.3f}", f"actor/pg_loss:{float(loss):.6f}"]
            lines.append(" - ".join(fields))
    plain = os.path.join(args.out_dir, f"{args.name}_rank{rank}.json")
    prof.export_chrome_trace(plain)
    with open(plain, "rb") as src, open(plain + ".gz", "wb") as raw:
        with gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=9, mtime=0) as dst:
            shutil.copyfileobj(src, dst)
    os.remove(plain)
    if rank == 0:
        with open(os.path.join(args.out_dir, f"{args.name}_console.log"), "w") as f:
            for line in lines:
                f.write(f"(TaskRunner pid=4242) {line}\n")
    dist.barrier()
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out_dir")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--decode", type=int, default=4)
    ap.add_argument("--name", default="base")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--port", type=int, default=29571)
    args = ap.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    mp.spawn(worker, args=(args,), nprocs=WORLD, join=True)
    print(f"wrote {args.out_dir}/{args.name}_rank{{0,1}}.json.gz and {args.name}_console.log (torch {torch.__version__})")


if __name__ == "__main__":
    sys.exit(main())
