#!/usr/bin/env python3
"""generate_gsm8k.py - a GSM8K-style math task in verl's row format, generated (no download).

Writes <out-dir>/train.jsonl and <out-dir>/test.jsonl, one row per line, exactly as verl's
examples/data_preprocess/gsm8k.py writes openai/gsm8k (there as parquet):

  {"data_source": "openai/gsm8k",
   "prompt": [{"role": "user", "content": "<question> Let's think step by step and output the final answer after \\"####\\"."}],
   "ability": "math",
   "reward_model": {"style": "rule", "ground_truth": "72"},
   "extra_info": {"split": "train", "index": 0, "answer": "<worked solution>\\n#### 72", "question": "<question>"}}

data_source "openai/gsm8k" selects verl's GSM8K reward (hybridscope: reward_model.rule gsm8k,
trainer/src/rl/reward.cpp gsm8k_compute_score): 1 when the number after the last "#### " in the
response's last 300 characters equals ground_truth, format_score otherwise, 0 without "#### ".

The questions are multi-step grade-school word problems (2-4 arithmetic steps: shopping,
wages, farm animals, savings, sharing, discounts, travel, ages) drawn from templates with random
names, items and numbers. Every answer is a non-negative integer; every intermediate value too.
The worked solution follows GSM8K's style, one step per line with calculator annotations
("48/2 = <<48/2=24>>24"), ending "#### <answer>". Questions are distinct across both files.
Output depends only on the arguments (--seed drives Python's random.Random, whose seeded
sampling is stable across CPython 3.x). Standard library only.
"""

import argparse
import json
import math
import os
import random
import re
import sys

DATA_SOURCE = "openai/gsm8k"
# verl examples/data_preprocess/gsm8k.py: instruction_following.
INSTRUCTION = 'Let\'s think step by step and output the final answer after "####".'

NAMES = [("Natalia", "she"), ("Weng", "he"), ("Betty", "she"), ("Julie", "she"), ("James", "he"),
         ("Albert", "he"), ("Ken", "he"), ("Alexis", "she"), ("Tina", "she"), ("Mark", "he"),
         ("Priya", "she"), ("Kwame", "he"), ("Sofia", "she"), ("Hiro", "he"), ("Amara", "she"),
         ("Diego", "he"), ("Lena", "she"), ("Omar", "he"), ("Mei", "she"), ("Carlos", "he")]
OBJECT = {"he": "him", "she": "her"}
ITEMS = ["pencils", "stickers", "marbles", "cupcakes", "apples", "baseball cards", "seashells", "books",
         "cookies", "crayons", "beads", "stamps"]
THINGS = ["bicycle", "video game", "pair of shoes", "backpack", "guitar", "jacket", "lamp", "board game"]
ANIMALS = [("cows", "chickens", "pigs"), ("sheep", "ducks", "goats"), ("horses", "geese", "rabbits")]


def extract_solution(solution_str):
    """verl's extract_solution: the number after "#### ", commas removed."""
    solution = re.search("#### (\\-?[0-9\\.\\,]+)", solution_str)
    assert solution is not None
    return solution.group(0).split("#### ")[1].replace(",", "")


def step(expr, value, text):
    """One GSM8K solution line: text with "expr = <<expr=value>>value" in place of {}."""
    return text.format(f"{expr} = <<{expr}={value}>>{value}")


def shopping(rng):
    (name, he), item = rng.choice(NAMES), rng.choice(ITEMS)
    friend = rng.choice([n for n, _ in NAMES if n != name])
    packs, per, gave = rng.randint(2, 12), rng.randint(3, 24), 0
    total = packs * per
    gave = rng.randint(1, total - 1)
    left = total - gave
    q = (f"{name} buys {packs} packs of {item} with {per} {item} in each pack. {he.capitalize()} gives "
         f"{gave} {item} to {friend}. How many {item} does {name} have left?")
    lines = [step(f"{packs}*{per}", total, f"{name} buys {{}} {item}."),
             step(f"{total}-{gave}", left, f"After giving some away, {name} has {{}} {item} left.")]
    return q, lines, left


def wages(rng):
    (name, he) = rng.choice(NAMES)
    rate, h1, h2, bonus = rng.randint(8, 45), rng.randint(2, 9), rng.randint(2, 9), rng.randint(5, 60)
    hours = h1 + h2
    pay = hours * rate
    total = pay + bonus
    q = (f"{name} earns ${rate} an hour babysitting. This week {he} worked {h1} hours on Saturday and {h2} "
         f"hours on Sunday, and the family gave {OBJECT[he]} a ${bonus} tip. "
         f"How much money did {name} make this week?")
    lines = [step(f"{h1}+{h2}", hours, f"{name} worked {{}} hours."),
             step(f"{hours}*{rate}", pay, f"{name} earned ${{}} for the hours."),
             step(f"{pay}+{bonus}", total, f"With the tip, {name} made ${{}}.")]
    return q, lines, total


def farm(rng):
    a_name, b_name, c_name = rng.choice(ANIMALS)
    a, k = rng.randint(3, 40), rng.randint(2, 6)
    b = a * k
    d = rng.randint(1, b - 1)
    c = b - d
    total = a + b + c
    q = (f"A farm has {a} {a_name}. It has {k} times as many {b_name} as {a_name}, and {d} fewer {c_name} "
         f"than {b_name}. How many animals are on the farm in total?")
    lines = [step(f"{a}*{k}", b, f"There are {{}} {b_name}."),
             step(f"{b}-{d}", c, f"There are {{}} {c_name}."),
             step(f"{a}+{b}+{c}", total, "In total there are {} animals.")]
    return q, lines, total


def savings(rng):
    (name, he), thing = rng.choice(NAMES), rng.choice(THINGS)
    weekly, weeks = rng.randint(5, 50), rng.randint(3, 20)
    saved = weekly * weeks
    price = rng.randint(10, saved)
    left = saved - price
    q = (f"{name} saves ${weekly} every week for {weeks} weeks. Then {he} spends ${price} on a {thing}. "
         f"How much money does {name} have left?")
    lines = [step(f"{weekly}*{weeks}", saved, f"{name} saves ${{}}."),
             step(f"{saved}-{price}", left, f"After buying the {thing}, {name} has ${{}} left.")]
    return q, lines, left


def sharing(rng):
    (name, he), item = rng.choice(NAMES), rng.choice(["cookies", "cupcakes", "muffins", "brownies"])
    boxes, per_box = rng.randint(2, 15), rng.randint(2, 12)
    baked = boxes * per_box
    sold_boxes = rng.randint(1, boxes - 1)
    sold = sold_boxes * per_box
    left = baked - sold
    q = (f"{name} baked {baked} {item} and packed them equally into {boxes} boxes. {he.capitalize()} sold "
         f"{sold_boxes} of the boxes at the school fair. How many {item} does {name} have left?")
    lines = [step(f"{baked}/{boxes}", per_box, f"Each box holds {{}} {item}."),
             step(f"{sold_boxes}*{per_box}", sold, f"{name} sold {{}} {item}."),
             step(f"{baked}-{sold}", left, f"{name} has {{}} {item} left.")]
    return q, lines, left


def discount(rng):
    (name, he), thing = rng.choice(NAMES), rng.choice(THINGS)
    percent = rng.choice([10, 20, 25, 50])
    price = rng.randint(2, 40) * (100 // math.gcd(100, percent))  # so the discount is whole dollars
    off = price * percent // 100
    sale = price - off
    n = rng.randint(2, 6)
    total = sale * n
    q = (f"A {thing} costs ${price}. This week it is {percent}% off. {name} buys {n} of them. "
         f"How much does {name} pay?")
    lines = [step(f"{price}*{percent}/100", off, "The discount is ${}."),
             step(f"{price}-{off}", sale, "Each one costs ${} on sale."),
             step(f"{sale}*{n}", total, f"{name} pays ${{}}.")]
    return q, lines, total


def travel(rng):
    v1, t1, v2, t2 = rng.randint(20, 80), rng.randint(2, 6), rng.randint(20, 80), rng.randint(2, 6)
    d1, d2 = v1 * t1, v2 * t2
    q = (f"A train travels at {v1} miles per hour for {t1} hours, then at {v2} miles per hour for {t2} hours. "
         f"How many miles does it travel in total?")
    lines = [step(f"{v1}*{t1}", d1, "First it travels {} miles."),
             step(f"{v2}*{t2}", d2, "Then it travels {} miles."),
             step(f"{d1}+{d2}", d1 + d2, "In total it travels {} miles.")]
    return q, lines, d1 + d2


def ages(rng):
    (name, _), (friend, _) = rng.sample(NAMES, 2)
    age, k, years = rng.randint(3, 15), rng.randint(2, 4), rng.randint(2, 10)
    friend_age = age * k
    now = age + friend_age
    later = now + 2 * years
    q = (f"{name} is {age} years old. {friend} is {k} times as old as {name}. In {years} years, what will "
         f"be the sum of their ages?")
    lines = [step(f"{age}*{k}", friend_age, f"{friend} is {{}} years old."),
             step(f"{age}+{friend_age}", now, "Their ages now add up to {}."),
             step(f"{now}+2*{years}", later, f"In {years} years the sum will be {{}}.")]
    return q, lines, later


TEMPLATES = (shopping, wages, farm, savings, sharing, discount, travel, ages)


def row(split, index, question, answer_text, answer):
    return {"data_source": DATA_SOURCE,
            "prompt": [{"role": "user", "content": question + " " + INSTRUCTION}],
            "ability": "math",
            "reward_model": {"style": "rule", "ground_truth": str(answer)},
            "extra_info": {"split": split, "index": index, "answer": answer_text, "question": question}}


def generate(rng, count):
    """`count` distinct problems, templates in turn at random."""
    seen, problems = set(), []
    while len(problems) < count:
        question, lines, answer = rng.choice(TEMPLATES)(rng)
        if question in seen:
            continue
        seen.add(question)
        assert answer >= 0
        answer_text = "\n".join(lines) + f"\n#### {answer}"
        assert extract_solution(answer_text) == str(answer)
        problems.append((question, answer_text, answer))
    return problems


def write_jsonl(path, rows):
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")


def main(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--train-size", type=int, default=7473, help="default: GSM8K's train size")
    p.add_argument("--test-size", type=int, default=1319, help="default: GSM8K's test size")
    p.add_argument("--seed", type=int, default=8)
    p.add_argument("--out-dir", default=here)
    args = p.parse_args(argv)
    if args.train_size < 1 or args.test_size < 1:
        p.error("--train-size and --test-size must be at least 1")
    problems = generate(random.Random(args.seed), args.train_size + args.test_size)
    os.makedirs(args.out_dir, exist_ok=True)
    for split, chunk in (("train", problems[:args.train_size]), ("test", problems[args.train_size:])):
        rows = [row(split, i, *problem) for i, problem in enumerate(chunk)]
        path = os.path.join(args.out_dir, f"{split}.jsonl")
        write_jsonl(path, rows)
        print(f"wrote {len(rows)} rows to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
