#!/usr/bin/env python3
"""grpo_plain_peer.py — a plain PyTorch GRPO step, the peer hs_grpo_compare_bench measures
hybridscope's step against (docs/benchmarks.md, "hybridscope's GRPO step against a plain PyTorch
loop").

What it is: the loop a PyTorch user writes in one file, on the same LibTorch (the venv's torch) and
thread count as the C++ side, with the same model and the same GRPO step:
  - model: hybridscope's Llama decoder (model.cpp) — embedding, per layer RMSNorm, q/k/v/o without
    bias, rotary embeddings (theta 10000, halves rotated), grouped-query attention, RMSNorm, SwiGLU
    MLP; final RMSNorm; untied LM head; every weight N(0, 0.02), norms 1 (same parameter count);
  - generation: prompts repeated n times, one prefill, then one token per step for every row
    against a preallocated KV cache (B, KV, T, D) per layer; sampling softmax(logits / T) with
    torch.multinomial; a row stops at EOS or max_response_length (the same policy as hybridscope's
    engine), and the loop ends when every row has stopped;
  - old and reference log-probs: no-grad forwards over the right-padded batch in micro-batches;
  - GRPO advantages (group mean / std, verl's compute_grpo_outcome_advantage);
  - update: shuffled mini-batches of ppo_mini_batch_size x n rows, micro-batches with gradient
    accumulation, verl's vanilla clipped loss (dual clip c = 3) + kl_loss_coef x k3 KL (verl's
    low_var_kl with its clamps), token-mean over the mini-batch, clip_grad_norm_, AdamW.
What it does not do: no entropy, no rollout log-probs, no metrics beyond the loss and grad norm,
no probes, no paged KV cache (finished rows keep decoding until the last row stops, as HF's
generate does), no reward model (Bernoulli(0.5) rewards from a seeded generator: values do not
change a step's cost, and they do not steer response lengths).

Protocol: one JSON object per line on stdin, one reply per line on stdout.
  {"cmd": "init", "hidden_size": 512, ...}  -> {"ok": true, "parameters": N, "torch": "2.11.0"}
  {"cmd": "step"}                           -> {"ok": true, "gen_s": ..., "response_tokens": ..., ...}
  {"cmd": "quit"}                           -> exits
Errors reply {"ok": false, "error": "..."}. `--self-check` runs one step on the tiny shape and
exits 0 when the step is a working GRPO step (finite loss, gradient, parameters moved), 1 when not,
77 when torch cannot be imported.
"""
import json
import math
import sys
import time

try:
    import torch
    import torch.nn.functional as F
except ImportError as e:  # the C++ driver and ctest skip on this
    torch = None
    _IMPORT_ERROR = str(e)

EOS, PAD = 2, 0  # CharTokenizer: 0 <pad>, 1 <bos>, 2 <eos>, printable ASCII 3..97


def rotary_tables(cfg):
    d = cfg["hidden_size"] // cfg["num_attention_heads"]
    inv_freq = cfg.get("rope_theta", 10000.0) ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    angles = torch.outer(torch.arange(cfg["max_position_embeddings"], dtype=torch.float64), inv_freq)
    emb = torch.cat([angles, angles], -1)
    return emb.cos().float(), emb.sin().float()


def rotate(x, cos, sin):
    # x (B, H, T, D); cos, sin (B, 1, T, D). HF's x * cos + rotate_half(x) * sin.
    x1, x2 = x.chunk(2, -1)
    return x * cos + torch.cat([-x2, x1], -1) * sin


class Layer(torch.nn.Module if torch else object):
    def __init__(self, cfg):
        super().__init__()
        c, f = cfg["hidden_size"], cfg["intermediate_size"]
        self.h, self.kv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
        self.d = c // self.h
        self.eps = cfg.get("rms_norm_eps", 1e-6)
        self.input_layernorm = torch.nn.Parameter(torch.ones(c))
        self.post_attention_layernorm = torch.nn.Parameter(torch.ones(c))
        self.q_proj = torch.nn.Linear(c, self.h * self.d, bias=False)
        self.k_proj = torch.nn.Linear(c, self.kv * self.d, bias=False)
        self.v_proj = torch.nn.Linear(c, self.kv * self.d, bias=False)
        self.o_proj = torch.nn.Linear(self.h * self.d, c, bias=False)
        self.gate_proj = torch.nn.Linear(c, f, bias=False)
        self.up_proj = torch.nn.Linear(c, f, bias=False)
        self.down_proj = torch.nn.Linear(f, c, bias=False)

    def forward(self, x, cos, sin, cache=None, at=0):
        """x (B, T, C). cache: (k, v) each (B, KV, T_max, D), written at [at, at + T)."""
        b, t, c = x.shape
        y = F.rms_norm(x, (c,), self.input_layernorm, self.eps)
        q = self.q_proj(y).view(b, t, self.h, self.d).transpose(1, 2)
        k = self.k_proj(y).view(b, t, self.kv, self.d).transpose(1, 2)
        v = self.v_proj(y).view(b, t, self.kv, self.d).transpose(1, 2)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        if cache is not None:
            cache[0][:, :, at:at + t] = k
            cache[1][:, :, at:at + t] = v
            k, v = cache[0][:, :, :at + t], cache[1][:, :, :at + t]
        # Prefill and training: causal over T; decode (T = 1): every cached position.
        a = F.scaled_dot_product_attention(q, k, v, is_causal=t > 1, enable_gqa=True)
        x = x + self.o_proj(a.transpose(1, 2).reshape(b, t, c))
        y = F.rms_norm(x, (c,), self.post_attention_layernorm, self.eps)
        return x + self.down_proj(F.silu(self.gate_proj(y)) * self.up_proj(y))


class Policy(torch.nn.Module if torch else object):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.embed_tokens = torch.nn.Embedding(cfg["vocab_size"], cfg["hidden_size"])
        self.layers = torch.nn.ModuleList(Layer(cfg) for _ in range(cfg["num_hidden_layers"]))
        self.norm = torch.nn.Parameter(torch.ones(cfg["hidden_size"]))
        self.lm_head = torch.nn.Linear(cfg["hidden_size"], cfg["vocab_size"], bias=False)
        with torch.no_grad():
            for p in self.parameters():
                if p.dim() == 2:
                    p.normal_(0.0, 0.02)  # model.cpp: initializer_range for every matrix
        cos, sin = rotary_tables(cfg)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    def forward(self, ids, pos, caches=None, at=0):
        """ids, pos (B, T) -> logits (B, T, V), causal attention (over the cache's first at + T rows when given)."""
        x = self.embed_tokens(ids)
        cos, sin = self.cos[pos].unsqueeze(1), self.sin[pos].unsqueeze(1)
        for i, layer in enumerate(self.layers):
            x = layer(x, cos, sin, None if caches is None else caches[i], at)
        return self.lm_head(F.rms_norm(x, (x.shape[-1],), self.norm, self.layers[0].eps))


@torch.no_grad() if torch else (lambda f: f)
def generate(model, prompts, n, max_new, temperature, gen):
    """prompts (P, Tp) equal-length ids -> list of P * n responses (prompt-major), each ending at EOS or max_new."""
    cfg = model.cfg
    ids = prompts.repeat_interleave(n, 0)  # (B, Tp)
    b, tp = ids.shape
    kv, d = cfg["num_key_value_heads"], cfg["hidden_size"] // cfg["num_attention_heads"]
    caches = [(torch.zeros(b, kv, tp + max_new, d), torch.zeros(b, kv, tp + max_new, d)) for _ in model.layers]
    pos = torch.arange(tp).expand(b, tp)
    logits = model(ids, pos, caches=caches, at=0)[:, -1]
    out = torch.full((b, max_new), PAD, dtype=torch.long)
    done = torch.zeros(b, dtype=torch.bool)
    lengths = torch.full((b,), max_new, dtype=torch.long)
    for t in range(max_new):
        probs = torch.softmax(logits.float() / temperature, -1)
        tok = torch.multinomial(probs, 1, generator=gen).squeeze(1)
        tok = torch.where(done, torch.full_like(tok, PAD), tok)
        out[:, t] = tok
        stopped = (tok == EOS) & ~done
        lengths = torch.where(stopped, torch.full_like(lengths, t + 1), lengths)
        done = done | stopped
        if t + 1 == max_new or bool(done.all()):
            break
        logits = model(tok.unsqueeze(1), torch.full((b, 1), tp + t, dtype=torch.long), caches=caches, at=tp + t)[:, -1]
    return [out[i, : int(lengths[i])] for i in range(b)]


def make_batch(prompts, responses, n):
    """hybridscope's make_rollout_batch: responses right-padded to the longest, masks, positions."""
    b = len(responses)
    r = max(1, max(len(x) for x in responses))
    resp = torch.full((b, r), PAD, dtype=torch.long)
    rmask = torch.zeros(b, r, dtype=torch.long)
    for i, x in enumerate(responses):
        resp[i, : len(x)] = x
        rmask[i, : len(x)] = 1
    p = prompts.repeat_interleave(n, 0)
    input_ids = torch.cat([p, resp], 1)
    attention_mask = torch.cat([torch.ones_like(p), rmask], 1)
    position_ids = (attention_mask.cumsum(1) - 1).clamp_min(0)
    return {"input_ids": input_ids, "attention_mask": attention_mask, "position_ids": position_ids,
            "responses": resp, "response_mask": rmask.float(), "prompt_length": p.shape[1]}


def response_log_probs(model, batch, rows, temperature):
    # Prompts have equal lengths and responses are right-padded: causal attention is exact for every
    # real token (padding only ever comes after it).
    ids, pos = batch["input_ids"][rows], batch["position_ids"][rows]
    p, r = batch["prompt_length"], batch["responses"].shape[1]
    logits = model(ids, pos)[:, p - 1 : p + r - 1] / temperature
    return torch.log_softmax(logits.float(), -1).gather(-1, batch["responses"][rows].unsqueeze(-1)).squeeze(-1)


def micro_batched_log_probs(model, batch, micro, temperature):
    b = batch["input_ids"].shape[0]
    micro = b if micro <= 0 else micro
    with torch.no_grad():
        return torch.cat([response_log_probs(model, batch, torch.arange(s, min(b, s + micro)), temperature)
                          for s in range(0, b, micro)])


def grpo_advantages(scores, mask, n, eps=1e-6):
    """verl's compute_grpo_outcome_advantage with norm_adv_by_std_in_grpo: (s - mean) / (std + eps) per group."""
    g = scores.view(-1, n)
    adv = (g - g.mean(1, keepdim=True)) / (g.std(1, keepdim=True) + eps)
    return adv.reshape(-1, 1) * mask


def low_var_kl(logp, ref_logp):
    x = (ref_logp - logp).clamp(-20.0, 20.0)
    return (torch.exp(x) - x - 1).clamp(-10.0, 10.0)


def policy_loss(old_logp, logp, adv, mask, clip, clip_c=3.0):
    """verl's vanilla PPO loss (dual clip) per token."""
    ratio = torch.exp((logp - old_logp).clamp(-20.0, 20.0))
    l1, l2 = -adv * ratio, -adv * ratio.clamp(1 - clip, 1 + clip)
    clipped = torch.maximum(l1, l2)
    return torch.where(adv < 0, torch.minimum(-adv * clip_c, clipped), clipped)


class Peer:
    def __init__(self, cfg):
        torch.set_num_threads(int(cfg.get("num_threads", 2)))
        torch.manual_seed(int(cfg.get("seed", 1)))
        self.cfg = cfg
        self.actor = Policy(cfg)
        self.ref = Policy(cfg)
        self.ref.load_state_dict(self.actor.state_dict())
        self.ref.requires_grad_(False)
        self.opt = torch.optim.AdamW(self.actor.parameters(), lr=cfg.get("lr", 1e-6), betas=(0.9, 0.999), eps=1e-8,
                                     weight_decay=cfg.get("weight_decay", 0.01))
        self.gen = torch.Generator().manual_seed(int(cfg.get("seed", 1)))
        self.step_index = 0

    def step(self):
        c = self.cfg
        n, temp = c["n"], c.get("temperature", 1.0)
        t0 = time.perf_counter()
        prompts = torch.randint(3, c["vocab_size"], (c["prompts"], c["prompt_length"]), generator=self.gen)
        prompts[:, 0] = 1  # bos
        self.actor.eval()
        responses = generate(self.actor, prompts, n, c["max_response_length"], temp, self.gen)
        t1 = time.perf_counter()
        batch = make_batch(prompts, responses, n)
        old = micro_batched_log_probs(self.actor, batch, c.get("log_prob_micro_batch_size", -1), temp)
        t2 = time.perf_counter()
        ref = micro_batched_log_probs(self.ref, batch, c.get("log_prob_micro_batch_size", -1), temp)
        t3 = time.perf_counter()
        scores = torch.bernoulli(torch.full((len(responses),), 0.5), generator=self.gen)
        mask = batch["response_mask"]
        adv = grpo_advantages(scores, mask, n)
        t4 = time.perf_counter()
        self.actor.train()
        b = len(responses)
        mini, micro = c["ppo_mini_batch_size"] * n, c["ppo_micro_batch_size"]
        losses, norms = [], []
        order = torch.randperm(b, generator=self.gen)
        for s in range(0, b, mini):
            rows = order[s : s + mini]
            tokens = mask[rows].sum().clamp_min(1.0)
            self.opt.zero_grad(set_to_none=True)
            total = 0.0
            for u in range(0, len(rows), micro):
                ub = rows[u : u + micro]
                logp = response_log_probs(self.actor, batch, ub, temp)
                m = mask[ub]
                per_token = policy_loss(old[ub], logp, adv[ub], m, c.get("clip_ratio", 0.2))
                per_token = per_token + c.get("kl_loss_coef", 0.001) * low_var_kl(logp, ref[ub])
                loss = (per_token * m).sum() / tokens  # token-mean over the mini-batch
                loss.backward()
                total += float(loss.detach())
            norms.append(float(torch.nn.utils.clip_grad_norm_(self.actor.parameters(), c.get("grad_clip", 1.0))))
            self.opt.step()
            losses.append(total)
        t5 = time.perf_counter()
        self.step_index += 1
        return {"ok": True, "gen_s": t1 - t0, "old_log_prob_s": t2 - t1, "ref_s": t3 - t2, "update_s": t5 - t4,
                "step_s": t5 - t0, "response_tokens": int(mask.sum()), "total_tokens": int(batch["attention_mask"].sum()),
                "max_response_length": int(mask.sum(1).max()), "min_response_length": int(mask.sum(1).min()),
                "loss": sum(losses) / len(losses), "grad_norm": sum(norms) / len(norms)}


TINY = {"vocab_size": 98, "hidden_size": 128, "intermediate_size": 384, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 160, "prompts": 4, "n": 4,
        "prompt_length": 16, "max_response_length": 16, "ppo_mini_batch_size": 2, "ppo_micro_batch_size": 4,
        "log_prob_micro_batch_size": 8, "lr": 1e-3, "num_threads": 2}


def self_check():
    """One step on the tiny shape: a working GRPO step has a finite loss, a non-zero gradient, moved weights,
    group-normalised advantages, and a k3 KL that is 0 where the policies agree and positive where they do not."""
    peer = Peer(dict(TINY))
    before = [p.detach().clone() for p in peer.actor.parameters()]
    r = peer.step()
    moved = max(float((p.detach() - q).abs().max()) for p, q in zip(peer.actor.parameters(), before))
    adv = grpo_advantages(torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0]), torch.ones(8, 1), 4).view(2, 4)
    kl_same = float(low_var_kl(torch.tensor([-1.0]), torch.tensor([-1.0])))
    kl_far = float(low_var_kl(torch.tensor([-1.0]), torch.tensor([-2.0])))
    checks = {
        "loss finite": math.isfinite(r["loss"]),
        "grad_norm > 0": r["grad_norm"] > 0,
        "parameters moved by more than weight decay": moved > 1e-4,
        "group advantages sum to 0": abs(float(adv.sum(1).abs().max())) < 1e-5,
        "constant group has 0 advantage": float(adv[1].abs().max()) == 0.0,
        "k3 KL is 0 for equal log-probs": kl_same == 0.0,
        "k3 KL is exp(-1) - (-1) - 1 for a gap of 1": abs(kl_far - (math.exp(-1) + 1 - 1)) < 1e-6,
        "tokens counted": r["response_tokens"] > 0 and r["total_tokens"] > r["response_tokens"],
    }
    for name, ok in checks.items():
        print(("ok   " if ok else "FAIL ") + name)
    print(json.dumps(r))
    return 0 if all(checks.values()) else 1


def main():
    if torch is None:
        msg = "torch cannot be imported: " + _IMPORT_ERROR
        if "--self-check" in sys.argv:
            print(msg)
            return 77
        print(json.dumps({"ok": False, "error": msg}), flush=True)
        return 2
    if "--self-check" in sys.argv:
        return self_check()
    peer = None
    for line in sys.stdin:
        try:
            cmd = json.loads(line)
            if cmd["cmd"] == "quit":
                return 0
            if cmd["cmd"] == "init":
                peer = Peer(cmd)
                reply = {"ok": True, "torch": torch.__version__, "threads": torch.get_num_threads(),
                         "parameters": sum(p.numel() for p in peer.actor.parameters())}
            elif cmd["cmd"] == "step":
                if peer is None:
                    raise RuntimeError("step before init")
                reply = peer.step()
            else:
                raise RuntimeError("unknown command " + str(cmd["cmd"]))
        except Exception as e:  # the driver reports it and skips; the peer stays up for quit
            reply = {"ok": False, "error": f"{type(e).__name__}: {e}"}
        print(json.dumps(reply), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
