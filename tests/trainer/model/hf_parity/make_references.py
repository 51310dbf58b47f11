#!/usr/bin/env python3
"""HuggingFace transformers as the independent peer of hybridscope's decoder (issue 20).

Writes random-weight Llama 3 (rope_type llama3), Qwen2 (q/k/v biases, tied embeddings) and Qwen3
(per-head q/k RMSNorm, head_dim != hidden / heads) checkpoints exactly as transformers saves them,
and the logits transformers computes for fixed token ids, into OUT/<case>/...:

  f32/       transformers' save_pretrained in float32 (5.x config.json: rope_parameters, dtype)
  f32-v4/    the same weights with the config.json in the 4.x layout (rope_theta, rope_scaling,
             torch_dtype at the top level, no layer_types)
  bf16/      the weights in bfloat16, sharded (model.safetensors.index.json + several files)
  f16/       the weights in float16
  f64/       the weights in float64
  refs.safetensors  input_ids (2, T); logits_f32, logits_bf16 / logits_f16 (float32
             compute over the bf16- / f16-rounded weights), logits_f64 (float64 compute; transformers' rotary inv_freq,
             a float32 buffer, recomputed in float64 first: the peer's only float32 piece)

hybridscope's test (hf_parity_test.cpp) loads each directory and compares logits; check_saved.py
then loads what hybridscope saved back into transformers. Exit 77 (CTest: skipped) when the peer
is not installed.
"""
import json
import os
import shutil
import sys
import types

try:
    import torch
    import transformers
    from safetensors.torch import save_file
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM, Qwen3Config, Qwen3ForCausalLM
except ImportError as e:  # the test-only peer is missing: skip, saying why
    print(f"skipped: the test peer is not installed ({e}); run scripts/install-deps.sh")
    sys.exit(77)

COMMON = dict(vocab_size=62,  # even: the LM head splits over tp 2
              hidden_size=64, intermediate_size=96, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
              rms_norm_eps=1e-6)


def cases():
    yield "llama3", LlamaForCausalLM, LlamaConfig(
        **COMMON, rope_theta=500000.0,
        # original 32 < max 128: wavelengths above 32 are divided by 4, below 8 kept, between smoothed
        rope_scaling={"rope_type": "llama3", "factor": 4.0, "low_freq_factor": 1.0,
                      "high_freq_factor": 4.0, "original_max_position_embeddings": 32})
    yield "qwen2", Qwen2ForCausalLM, Qwen2Config(**COMMON, rope_theta=10000.0, tie_word_embeddings=True)
    yield "qwen3", Qwen3ForCausalLM, Qwen3Config(**COMMON, head_dim=32, rope_theta=1000000.0)


def randomise(model, seed):
    """O(1) logits and nothing at its default: biases and norm weights random too, so a missing
    bias or norm in hybridscope would show."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(torch.rand(p.shape, generator=g) + 0.5)
            elif name.endswith(".bias"):
                p.copy_(torch.randn(p.shape, generator=g) * 0.5)
            else:
                p.copy_(torch.randn(p.shape, generator=g) * 0.15)


def to_v4_layout(config_path):
    with open(config_path) as f:
        c = json.load(f)
    rope = c.pop("rope_parameters")
    c["rope_theta"] = rope.pop("rope_theta")
    c["rope_scaling"] = None if rope.get("rope_type", "default") == "default" else rope
    c["torch_dtype"] = c.pop("dtype", "float32")
    c.pop("layer_types", None)
    c["transformers_version"] = "4.51.3"
    with open(config_path, "w") as f:
        json.dump(c, f, indent=2)
    return c


def float64_rotary(model):
    rotary = model.model.rotary_emb
    cfg = model.config
    inv_freq, _ = rotary.compute_default_rope_parameters(cfg) if rotary.rope_type == "default" else (None, None)
    if inv_freq is None:
        from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
        inv_freq, _ = ROPE_INIT_FUNCTIONS[rotary.rope_type](cfg, "cpu")
    # recompute in float64 from the same formula: theta^(-2i/D), then the rope type's scaling
    dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    theta = cfg.rope_parameters["rope_theta"]
    base = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
    if rotary.rope_type == "llama3":
        import math
        rp = cfg.rope_parameters
        factor, low, high = rp["factor"], rp["low_freq_factor"], rp["high_freq_factor"]
        old = rp["original_max_position_embeddings"]
        wavelen = 2 * math.pi / base
        scaled = torch.where(wavelen > old / low, base / factor, base)
        smooth = (old / wavelen - low) / (high - low)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = ~(wavelen < old / high) * ~(wavelen > old / low)
        base = torch.where(medium, smoothed, scaled)
    assert torch.allclose(base.float(), inv_freq.float(), rtol=1e-6), "float64 inv_freq does not match the peer's"
    rotary.inv_freq = base
    rotary.original_inv_freq = base

    # transformers computes the angles position * inv_freq in float32 whatever the model's dtype
    # (its rotary forward casts both to float32 under autocast(enabled=False)); here in float64.
    def forward_f64(self, x, position_ids):
        inv = self.inv_freq.to(torch.float64)[None, :, None].expand(position_ids.shape[0], -1, 1)
        freqs = (inv @ position_ids[:, None, :].to(torch.float64)).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        return (emb.cos() * self.attention_scaling).to(x.dtype), (emb.sin() * self.attention_scaling).to(x.dtype)

    rotary.forward = types.MethodType(forward_f64, rotary)

    # Its RMSNorm upcasts to float32 (a no-op for float32 models, a downcast for float64 ones):
    # the same formula in the input's dtype.
    def rms_f64(self, h):
        return self.weight * (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.variance_epsilon))

    for module in model.modules():
        if type(module).__name__.endswith("RMSNorm"):
            module.forward = types.MethodType(rms_f64, module)


def main():
    transformers.utils.logging.disable_progress_bar()
    out = sys.argv[1]
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    torch.manual_seed(0)
    for seed, (name, cls, config) in enumerate(cases()):
        case = os.path.join(out, name)
        model = cls(config).eval()
        randomise(model, 100 + seed)
        ids = torch.randint(0, config.vocab_size, (2, 12), generator=torch.Generator().manual_seed(7 + seed))
        refs = {"input_ids": ids}
        with torch.no_grad():
            refs["logits_f32"] = model(input_ids=ids).logits.float().contiguous()
        model.save_pretrained(os.path.join(case, "f32"))
        shutil.copytree(os.path.join(case, "f32"), os.path.join(case, "f32-v4"))
        to_v4_layout(os.path.join(case, "f32-v4", "config.json"))

        bf16 = cls(config).eval()
        bf16.load_state_dict(model.state_dict())
        bf16.to(torch.bfloat16).save_pretrained(os.path.join(case, "bf16"), max_shard_size="40KB")
        assert os.path.exists(os.path.join(case, "bf16", "model.safetensors.index.json")), "bf16 not sharded"
        bf16.to(torch.float32)
        # .to(bfloat16) rounded the rotary inv_freq buffer too; hybridscope computes it from the config
        bf16.model.rotary_emb.inv_freq = model.model.rotary_emb.inv_freq.clone()
        with torch.no_grad():
            refs["logits_bf16"] = bf16(input_ids=ids).logits.float().contiguous()

        # sdpa computes in the tensors' dtype; eager attention takes its softmax in float32
        f16 = cls(config).eval()
        f16.load_state_dict(model.state_dict())
        f16.to(torch.float16).save_pretrained(os.path.join(case, "f16"))
        f16.to(torch.float32)
        f16.model.rotary_emb.inv_freq = model.model.rotary_emb.inv_freq.clone()
        with torch.no_grad():
            refs["logits_f16"] = f16(input_ids=ids).logits.float().contiguous()

        f64 = cls._from_config(config, attn_implementation="sdpa").eval()
        f64.load_state_dict(model.state_dict())
        f64.to(torch.float64)
        f64.save_pretrained(os.path.join(case, "f64"))
        float64_rotary(f64)
        with torch.no_grad():
            refs["logits_f64"] = f64(input_ids=ids).logits.contiguous()
        save_file(refs, os.path.join(case, "refs.safetensors"))
        print(f"{name}: transformers {transformers.__version__} wrote f32, f32-v4, bf16 (sharded), f16, f64")


if __name__ == "__main__":
    main()
