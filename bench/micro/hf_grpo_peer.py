#!/usr/bin/env python3
"""hf_grpo_peer.py — the GRPO step a transformers user writes, the peer hybridscope's GPU step is
compared with (docs/benchmarks.md, "On a GPU"; issue 36).

The loop a competent user writes with HuggingFace transformers and PyTorch, on the gpu-shapes
cells' sizes (bench/matrices/gpu-shapes.yaml):
  - model: transformers' Qwen2ForCausalLM from a Qwen2.5-shaped config with random weights
    (the full 151,936-row vocabulary), float32 master weights on the device;
  - generation: `model.generate` under bf16 autocast with the KV cache, do_sample at temperature 1,
    num_return_sequences = n, every response run to max_new_tokens (random weights rarely say EOS;
    the cells measure the full length too);
  - old log-probs: no-grad forwards in micro-batches, log_softmax of the response positions;
  - GRPO advantages from Bernoulli(0.5) rewards (group mean / std);
  - update: mini-batches of ppo_mini_batch_size x n rows, micro-batches with gradient accumulation,
    verl's clipped loss (token-mean), bf16 autocast over the float32 masters, clip_grad_norm_,
    AdamW (fused where the device supports it).
It prints one JSON object per step: gen_s, old_log_prob_s, update_s, step_s, tokens, and the
update's MFU with verl's flops estimate (6 N tokens + attention) over the device's dense bf16 peak
given by --peak-flops.

Usage (on the GPU machine, its python3):
  python3 bench/micro/hf_grpo_peer.py --shape qwen2.5-0.5b --prompts 32 --n 8 --response 256 --steps 2
  python3 bench/micro/hf_grpo_peer.py --self-check   # one tiny step on the CPU: exit 0 when it is a
                                                      # working GRPO step, 1 when not, 77 without torch
"""
import argparse
import json
import sys
import time

SHAPES = {  # Qwen2.5's config.json sizes (trainer/include/hybridscope/trainer/model/model_shapes.h)
    "tiny": dict(vocab_size=97, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True),
    "qwen2.5-0.5b": dict(vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                         num_attention_heads=14, num_key_value_heads=2, tie_word_embeddings=True),
    "qwen2.5-1.5b": dict(vocab_size=151936, hidden_size=1536, intermediate_size=8960, num_hidden_layers=28,
                         num_attention_heads=12, num_key_value_heads=2, tie_word_embeddings=True),
    "qwen2.5-3b": dict(vocab_size=151936, hidden_size=2048, intermediate_size=11008, num_hidden_layers=36,
                       num_attention_heads=16, num_key_value_heads=2, tie_word_embeddings=True),
}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shape", default="qwen2.5-0.5b", choices=sorted(SHAPES))
    p.add_argument("--prompts", type=int, default=32)
    p.add_argument("--n", type=int, default=8)
    p.add_argument("--prompt-length", type=int, default=24)
    p.add_argument("--response", type=int, default=256)
    p.add_argument("--mini", type=int, default=8, help="ppo_mini_batch_size (prompts)")
    p.add_argument("--micro", type=int, default=8, help="ppo_micro_batch_size_per_gpu (sequences)")
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--peak-flops", type=float, default=989.4e12, help="dense bf16 FLOP/s of the device")
    p.add_argument("--device", default="cuda")
    p.add_argument("--self-check", action="store_true")
    args = p.parse_args(argv)
    try:
        import torch
        from transformers import Qwen2Config, Qwen2ForCausalLM
    except ImportError as e:
        print(f"hf_grpo_peer: {e}", file=sys.stderr)
        return 77
    if args.self_check:
        args.shape, args.device, args.prompts, args.n, args.response, args.prompt_length = "tiny", "cpu", 2, 2, 4, 3
        args.mini, args.micro, args.steps = 2, 2, 1

    device = torch.device(args.device)
    cuda = device.type == "cuda"
    torch.manual_seed(0)
    shape = SHAPES[args.shape]
    config = Qwen2Config(**shape, max_position_embeddings=32768, rope_theta=1e6, rms_norm_eps=1e-6,
                         initializer_range=0.02, attn_implementation="sdpa", use_cache=True)
    model = Qwen2ForCausalLM(config).to(device)
    fused = {"fused": True} if cuda else {}
    optim = torch.optim.AdamW(model.parameters(), lr=1e-6, weight_decay=0.01, **fused)
    params = sum(p.numel() for p in model.parameters())
    heads, head_dim, layers = shape["num_attention_heads"], shape["hidden_size"] // shape["num_attention_heads"], \
        shape["num_hidden_layers"]
    autocast = torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=cuda)
    before = [p.detach().clone() for p in model.parameters()]

    def sync():
        if cuda:
            torch.cuda.synchronize()

    def response_log_probs(ids, P):
        logits = model(input_ids=ids).logits[:, P - 1:-1].float()  # (b, R, V)
        return torch.log_softmax(logits, -1).gather(-1, ids[:, P:].unsqueeze(-1)).squeeze(-1)

    loss_value = float("nan")
    for step in range(1, args.steps + 1):
        prompts = torch.randint(3, shape["vocab_size"], (args.prompts, args.prompt_length), device=device)
        sync()
        t0 = time.perf_counter()
        with torch.no_grad(), autocast:
            seqs = model.generate(input_ids=prompts, attention_mask=torch.ones_like(prompts), do_sample=True,
                                  temperature=1.0, top_k=0, top_p=1.0, num_return_sequences=args.n,
                                  max_new_tokens=args.response, min_new_tokens=args.response,
                                  eos_token_id=None, pad_token_id=0)
        sync()
        t1 = time.perf_counter()
        B, P = seqs.size(0), args.prompt_length
        R = seqs.size(1) - P
        with torch.no_grad(), autocast:
            old = torch.cat([response_log_probs(seqs[i:i + args.micro], P) for i in range(0, B, args.micro)])
        sync()
        t2 = time.perf_counter()
        rewards = torch.bernoulli(torch.full((args.prompts, args.n), 0.5, device=device))
        rewards[:, 0], rewards[:, -1] = 1.0, 0.0  # every group has a spread: every row has a gradient
        adv = ((rewards - rewards.mean(1, keepdim=True)) / (rewards.std(1, keepdim=True) + 1e-6)).reshape(B, 1)
        rows = args.mini * args.n
        for m0 in range(0, B, rows):
            optim.zero_grad(set_to_none=True)
            tokens = (min(B, m0 + rows) - m0) * R
            for i in range(m0, min(B, m0 + rows), args.micro):
                mb = seqs[i:i + args.micro]
                with autocast:
                    lp = response_log_probs(mb, P)
                ratio = torch.exp(lp - old[i:i + args.micro])
                a = adv[i:i + args.micro]
                pg = torch.maximum(-a * ratio, -a * ratio.clamp(0.8, 1.28))
                loss = pg.sum() / tokens
                loss.backward()
                loss_value = loss.detach().item()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optim.step()
        sync()
        t3 = time.perf_counter()
        T = P + R
        flops = 6 * params * B * T + 6 * B * T * T * head_dim * heads * layers  # verl's flops_counter estimate
        print(json.dumps(dict(step=step, shape=args.shape, sequences=B, response=R, gen_s=t1 - t0,
                              old_log_prob_s=t2 - t1, update_s=t3 - t2, step_s=t3 - t0,
                              tokens_per_s=B * R / (t3 - t0), mfu_update=flops / (t3 - t2) / args.peak_flops,
                              max_memory_allocated_gb=torch.cuda.max_memory_allocated() / 2**30 if cuda else None,
                              loss=loss_value)), flush=True)
    if args.self_check:
        moved = any(not torch.equal(a, b.detach()) for a, b in zip(before, model.parameters()))
        ok = moved and loss_value == loss_value and abs(loss_value) < 1e6
        print(f"hf_grpo_peer self-check: loss {loss_value}, parameters moved {moved}")
        return 0 if ok else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
