#!/usr/bin/env python3
"""Records a PyTorch-profiler (Kineto) trace of a small verl-style PPO loop, the way verl's
`global_profiler.tool=torch` does: every step and phase is a `record_function` with verl's
`marked_timer` name (step, gen, reward, old_log_prob, ref, values, adv, update_critic,
update_actor, update_weights), and each step prints verl's console metrics line
(`step:N - timing_s/gen:... - perf/...`). On a CUDA machine the trace also holds kernels, copies,
memsets and (with --nccl) NCCL kernels of a one-rank process group.

    make_verl_trace.py OUT_DIR [--steps 3] [--nccl]

Writes OUT_DIR/verl_rank0.json (the trace), OUT_DIR/verl_console.log (the metrics lines) and
OUT_DIR/wall.json (time.time_ns() at the start and end of the profiled loop). Exit 77 without
torch (the C++ tests skip then).
"""
import argparse
import json
import os
import sys
import time

try:
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function
except ImportError:  # the tests read 77 as "skipped"
    print("no torch", file=sys.stderr)
    sys.exit(77)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out_dir")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--nccl", action="store_true")
    args = ap.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    torch.manual_seed(0)
    cuda = torch.cuda.is_available()
    dev = "cuda" if cuda else "cpu"
    if args.nccl and cuda:
        import torch.distributed as dist
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29561")
        dist.init_process_group("nccl", rank=0, world_size=1)
    hidden, batch = 256, 16
    actor = torch.nn.Sequential(torch.nn.Linear(hidden, hidden), torch.nn.GELU(), torch.nn.Linear(hidden, hidden)).to(dev)
    critic = torch.nn.Linear(hidden, 1).to(dev)
    ref = torch.nn.Linear(hidden, hidden).to(dev)
    rollout = torch.nn.Linear(hidden, hidden).to(dev)
    opt_a = torch.optim.AdamW(actor.parameters(), lr=1e-4)
    opt_c = torch.optim.AdamW(critic.parameters(), lr=1e-4)
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    lines = []
    wall_start = time.time_ns()
    with profile(activities=acts, profile_memory=True, record_shapes=True, acc_events=True) as prof:
        for step in range(1, args.steps + 1):
            t = {}
            step_t0 = time.perf_counter()

            def timed(name, fn):
                t0 = time.perf_counter()
                with record_function(name):
                    out = fn()
                    if cuda:
                        torch.cuda.synchronize()
                t[name] = time.perf_counter() - t0
                return out

            with record_function("step"):
                timed("update_weights", lambda: [p.data.copy_(q.data) for p, q in zip(rollout.parameters(), [actor[0].weight, actor[0].bias])])
                prompts = torch.randn(batch, hidden, device=dev)

                def gen():
                    x = prompts
                    for _ in range(4):  # decode steps
                        x = torch.tanh(rollout(x))
                    return x

                seqs = timed("gen", gen).detach()
                scores = timed("reward", lambda: seqs.sum(-1).cpu().to(dev))
                old_lp = timed("old_log_prob", lambda: torch.log_softmax(actor(seqs), -1).detach())
                ref_lp = timed("ref", lambda: torch.log_softmax(ref(seqs), -1).detach())
                values = timed("values", lambda: critic(seqs).squeeze(-1).detach())
                adv = timed("adv", lambda: (scores - values) / (scores.std() + 1e-6))

                def update_critic():
                    opt_c.zero_grad()
                    loss = ((critic(seqs).squeeze(-1) - scores) ** 2).mean()
                    loss.backward()
                    opt_c.step()

                def update_actor():
                    opt_a.zero_grad()
                    lp = torch.log_softmax(actor(seqs), -1)
                    loss = -(torch.exp(lp - old_lp).mean(-1) * adv).mean() + 0.01 * (lp - ref_lp).pow(2).mean()
                    loss.backward()
                    if args.nccl and cuda:
                        import torch.distributed as dist
                        for p in actor.parameters():
                            dist.all_reduce(p.grad)
                    opt_a.step()

                timed("update_critic", update_critic)
                timed("update_actor", update_actor)
            t["step"] = time.perf_counter() - step_t0
            fields = [f"step:{step}"] + [f"timing_s/{k}:{v:.6f}" for k, v in t.items()]
            fields += [f"perf/throughput:{batch / t['step']:.3f}", f"actor/pg_loss:{float(adv.mean()):.6f}"]
            lines.append(" - ".join(fields))
    wall_end = time.time_ns()
    prof.export_chrome_trace(os.path.join(args.out_dir, "verl_rank0.json"))
    with open(os.path.join(args.out_dir, "verl_console.log"), "w") as f:
        f.write("(TaskRunner pid=4242) Training Progress:  33%|###       | 1/3\n")
        for line in lines:
            f.write(f"(TaskRunner pid=4242) {line}\n")
    with open(os.path.join(args.out_dir, "wall.json"), "w") as f:
        json.dump({"start_ns": wall_start, "end_ns": wall_end, "torch": torch.__version__, "cuda": cuda}, f)
    if args.nccl and cuda:
        import torch.distributed as dist
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
