#!/usr/bin/env python3
"""generate_arithmetic.py - verifiable arithmetic tasks in verl's JSONL row format.

Writes <out-dir>/train.jsonl and <out-dir>/val.jsonl. Each row is one problem a tiny
character-level model can learn, scored by the GSM8K rule reward (the answer after "#### "):

  {"data_source": "hybridscope/addition",
   "prompt": [{"role": "user", "content": "37+58="}],
   "ability": "math",
   "reward_model": {"style": "rule", "ground_truth": "95"},
   "extra_info": {"split": "train", "index": 12, "answer": "#### 95"}}

extra_info.answer is the whole target response.

With --warmup-copies N it also writes <out-dir>/warmup.jsonl: N copies of the training problems
for the supervised warm-up (hybridscope.warmup.files), where a share --warmup-noise of the
targets comes from a "sloppy teacher" that drops every carry (addition: 37+58 -> 85) or borrow
(subtraction: digit-wise difference mod 10). The base policy then knows the answer format and
holds two candidate answers, the right one and the carry-less one, so greedy accuracy starts
partial and RL has something real to fix. Validation always scores against the true answer.

Tasks (operands are integers in [0, 10**digits)):
  addition     "a+b="  -> a + b
  subtraction  "a-b="  -> a - b, with a >= b so every answer is a non-negative integer

Train and validation problems are drawn together without replacement from all distinct
problems, so no validation prompt appears in train. Output depends only on the arguments
(--seed drives Python's random.Random, whose seeded sampling is stable across CPython 3.x).
No dependencies beyond the standard library.
"""

import argparse
import json
import math
import os
import random
import sys

TASKS = ("addition", "subtraction")


def problem_count(task, digits):
    """Number of distinct problems for the task."""
    n = 10 ** digits
    if task == "addition":
        return n * n  # ordered pairs (a, b)
    return n * (n + 1) // 2  # pairs with a >= b


def problem(task, digits, k):
    """The k-th distinct problem (0 <= k < problem_count) as (prompt text, answer text)."""
    n = 10 ** digits
    if task == "addition":
        a, b = divmod(k, n)
        return f"{a}+{b}=", str(a + b)
    # Triangular numbering: k = a*(a+1)/2 + b with 0 <= b <= a.
    a = (math.isqrt(8 * k + 1) - 1) // 2
    b = k - a * (a + 1) // 2
    return f"{a}-{b}=", str(a - b)


def sample_distinct(rng, total, count):
    """count distinct integers from [0, total), in draw order."""
    if total <= sys.maxsize:  # random.sample needs len(range(total)) to fit in a C ssize_t
        return rng.sample(range(total), count)
    seen, picks = set(), []
    while len(picks) < count:  # total is astronomically larger than count here: few repeats
        k = rng.randrange(total)
        if k not in seen:
            seen.add(k)
            picks.append(k)
    return picks


def sloppy_answer(task, prompt):
    """The answer with every carry (addition) or borrow (subtraction) dropped."""
    a, b = (int(x) for x in prompt[:-1].replace("+", " ").replace("-", " ").split())
    digits, place = 0, 1
    while a or b:
        da, db = a % 10, b % 10
        digits += ((da + db) % 10 if task == "addition" else (da - db) % 10) * place
        a, b, place = a // 10, b // 10, place * 10
    return str(digits)


def row(task, split, index, prompt, answer):
    return {
        "data_source": f"hybridscope/{task}",
        "prompt": [{"role": "user", "content": prompt}],
        "ability": "math",
        "reward_model": {"style": "rule", "ground_truth": answer},
        "extra_info": {"split": split, "index": index, "answer": f"#### {answer}"},
    }


def write_jsonl(path, rows):
    with open(path, "w", encoding="ascii", newline="\n") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=True) + "\n")


def parse_args(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--task", choices=TASKS, default="addition")
    p.add_argument("--digits", type=int, default=2, help="operands are integers in [0, 10**digits)")
    p.add_argument("--train-size", type=int, default=4000)
    p.add_argument("--val-size", type=int, default=200)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out-dir", default=None, help="default: datasets/<task> beside this script")
    p.add_argument("--warmup-copies", type=int, default=0,
                   help="also write warmup.jsonl with this many noisy copies of the training problems")
    p.add_argument("--warmup-noise", type=float, default=0.7,
                   help="share of warm-up targets from the carry-dropping teacher")
    args = p.parse_args(argv)
    if args.digits < 1:
        p.error("--digits must be at least 1")
    if args.train_size < 1 or args.val_size < 1:
        p.error("--train-size and --val-size must be at least 1")
    total = problem_count(args.task, args.digits)
    if args.train_size + args.val_size > total:
        p.error(f"--train-size + --val-size = {args.train_size + args.val_size} exceeds the "
                f"{total} distinct {args.task} problems with --digits {args.digits}")
    if args.out_dir is None:
        args.out_dir = os.path.join(here, args.task)
    return args


def main(argv):
    args = parse_args(argv)
    rng = random.Random(args.seed)
    picks = sample_distinct(rng, problem_count(args.task, args.digits), args.train_size + args.val_size)
    splits = {"train": picks[:args.train_size], "val": picks[args.train_size:]}

    os.makedirs(args.out_dir, exist_ok=True)
    for split, ks in splits.items():
        rows = [row(args.task, split, i, *problem(args.task, args.digits, k)) for i, k in enumerate(ks)]
        path = os.path.join(args.out_dir, f"{split}.jsonl")
        write_jsonl(path, rows)
        print(f"wrote {len(rows)} rows to {path}")
    if args.warmup_copies > 0:
        rows = []
        for copy in range(args.warmup_copies):
            for i, k in enumerate(splits["train"]):
                prompt, answer = problem(args.task, args.digits, k)
                target = sloppy_answer(args.task, prompt) if rng.random() < args.warmup_noise else answer
                r = row(args.task, "warmup", copy * len(splits["train"]) + i, prompt, target)
                r["extra_info"]["true_answer"] = answer
                rows.append(r)
        path = os.path.join(args.out_dir, "warmup.jsonl")
        write_jsonl(path, rows)
        print(f"wrote {len(rows)} rows to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
