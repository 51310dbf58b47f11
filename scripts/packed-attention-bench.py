"""packed-attention-bench.py — the two ways to attend within packed sequences on CPU, timed with the
same ATen ops trainer/src/model/packed_attention.cpp calls (baddbmm with an additive mask, float32
softmax, bmm; GQA with the G query heads of a KV head stacked as rows), forward + backward:

  loop    one causal (G*n, n) mask per sequence, attention per sequence;
  chunk   consecutive sequences in chunks of up to 128 tokens, one block-diagonal causal mask per
          chunk (what the trainer does, kAttentionChunkTokens);
  block   one (1, N, N) block-diagonal causal mask over the whole packed micro-batch;
  padded  the (B, T) padded attention packing replaces, for reference.

Shapes: issue 21's (hidden 512 = 8 heads x 64, 4 KV heads; 32 sequences of 7 prompt tokens and a
response of 1..64) and the demo's (hidden 128 = 4 heads x 32, 2 KV heads; 64 sequences of 12 + 9).
One layer's attention, forward + backward, Python calling the ops (a few us per op more than C++).
  OMP_WAIT_POLICY=PASSIVE venv/bin/python scripts/packed-attention-bench.py [threads] [reps]
"""
import statistics
import sys
import time

import torch

threads = int(sys.argv[1]) if len(sys.argv) > 1 else 2
reps = int(sys.argv[2]) if len(sys.argv) > 2 else 20
torch.set_num_threads(threads)
torch.manual_seed(0)


def attend(q, k, v, mask):  # q (X, G*n, D), k v (X, n, D), mask broadcastable to (X, G*n, n)
    scores = torch.baddbmm(mask, q, k.transpose(1, 2), beta=1.0, alpha=scale)
    return torch.bmm(torch.softmax(scores, -1, dtype=torch.float32), v)


def stacked(x, n):  # (n, KV*G, D) -> (KV, G*n, D)
    return x.view(n, KV, G, D).permute(1, 2, 0, 3).reshape(KV, G * n, D)


def causal(n):
    return torch.full((n, n), float("-inf")).triu(1)


def block_mask(members):
    c = sum(members)
    seg = torch.repeat_interleave(torch.arange(len(members)), torch.tensor(members))
    visible = (seg[:, None] == seg[None, :]) & torch.ones(c, c, dtype=torch.bool).tril()
    return torch.zeros(c, c).masked_fill_(~visible, float("-inf")).repeat(G, 1)


def chunks(budget):
    out, members = [], []
    for n in lengths:
        if members and sum(members) + n > budget:
            out.append(members)
            members = []
        members.append(n)
    return out + [members]


def over_chunks(groups):
    def run(q, k, v):
        outs, start = [], 0
        for members in groups:  # masks built inside: once per forward, as the trainer does
            c = sum(members)
            qs = stacked(q[start:start + c], c)
            outs.append(attend(qs, k[start:start + c].transpose(0, 1), v[start:start + c].transpose(0, 1),
                               block_mask(members)))
            start += c
        return torch.cat([o.reshape(-1) for o in outs])
    return run


def padded(q, k, v):  # q (B*T, H, D) laid out (B, T)
    mask = causal(T).repeat(G, 1)
    qb = q.view(B, T, KV, G, D).permute(0, 2, 3, 1, 4).reshape(B * KV, G * T, D)
    kb = k.view(B, T, KV, D).permute(0, 2, 1, 3).reshape(B * KV, T, D)
    vb = v.view(B, T, KV, D).permute(0, 2, 1, 3).reshape(B * KV, T, D)
    return attend(qb, kb, vb, mask).reshape(-1)


def timed(fn, tokens):
    q = torch.randn(tokens, H, D, requires_grad=True)
    k = torch.randn(tokens, KV, D, requires_grad=True)
    v = torch.randn(tokens, KV, D, requires_grad=True)
    out = []
    for i in range(reps + 2):
        t0 = time.perf_counter()
        fn(q, k, v).sum().backward()
        if i >= 2:
            out.append(time.perf_counter() - t0)
    return statistics.median(out) * 1e3


for shape, (H, KV, D, lengths) in {
        "issue": (8, 4, 64, [7 + int(r) for r in torch.randint(1, 65, (32,))]),
        "demo": (4, 2, 32, [12 + 9] * 64)}.items():
    G, scale = H // KV, D ** -0.5
    N, T, B = sum(lengths), max(lengths), len(lengths)
    print(f"{shape}: torch {torch.__version__}, {threads} threads, N = {N} real tokens, "
          f"B x T = {B} x {T} = {B * T} padded")
    for name, fn, tokens in (("loop", over_chunks([[n] for n in lengths]), N), ("chunk", over_chunks(chunks(128)), N),
                             ("block", over_chunks([lengths]), N), ("padded", padded, B * T)):
        print(f"{name:>8}: {timed(fn, tokens):8.2f} ms forward+backward (median of {reps})")
