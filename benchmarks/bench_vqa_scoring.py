"""Benchmark: vectorized VQA v2 scoring vs a direct per-question port of the official loop.

Generates ``--size`` questions × 10 annotator answers with realistic variation
(case, trailing periods, articles, number words, stray whitespace, commas in
numbers, unanimous yes/no questions), scores them both ways IN THE SAME RUN,
checks that every per-question accuracy is identical (bit for bit) and that
the overall figure is identical, and prints the times and their ratio.

    python benchmarks/bench_vqa_scoring.py               # 214k questions (VQA v2 val)
    python benchmarks/bench_vqa_scoring.py --size 5000   # quick

The naive port (``naive_vqa_accuracies``) follows the official algorithm
(docs/protocols.md §1) statement by statement with no caching; it is written here from
the algorithm, not copied.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from typing import Any

import numpy as np

from vqadiag.metrics.vqa_accuracy import official_mean, vqa_accuracies
from vqadiag.metrics.vqa_normalize import normalization_tables

# --------------------------------------------------------------------------- naive port


_COMMA_STRIP = re.compile(r"(\d)(,)(\d)")
_PERIOD_STRIP = re.compile(r"(?!<=\d)(\.)(?!\d)")


def _naive_punctuation(in_text: str) -> str:
    tables = normalization_tables()
    out_text = in_text
    for p in tables["punctuation"]:
        if (p + " " in in_text or " " + p in in_text) or (
            re.search(_COMMA_STRIP, in_text) is not None
        ):
            out_text = out_text.replace(p, "")
        else:
            out_text = out_text.replace(p, " ")
    return _PERIOD_STRIP.sub("", out_text, re.UNICODE)


def _naive_digit_article(in_text: str) -> str:
    tables = normalization_tables()
    words = []
    for word in in_text.lower().split():
        word = tables["number_words"].get(word, word)
        if word not in tables["articles"]:
            words.append(word)
    for k, word in enumerate(words):
        if word in tables["contractions"]:
            words[k] = tables["contractions"][word]
    return " ".join(words)


def naive_vqa_accuracies(
    gts: list[dict[str, Any]], res: list[dict[str, Any]], lenient: bool = False
) -> list[float]:
    """Per-question official loop: ``gts[k] = {"answers": [{"answer", "answer_id"}]}``,
    ``res[k] = {"answer": str}``; returns the per-question accuracies in [0, 1]."""
    out = []
    for gt, r in zip(gts, res, strict=True):
        answers = [dict(a) for a in gt["answers"]]
        for a in answers:
            a["answer"] = a["answer"].replace("\n", " ").replace("\t", " ").strip()
        res_ans = r["answer"].replace("\n", " ").replace("\t", " ").strip()
        gt_answers = [a["answer"] for a in answers]
        if lenient or len(set(gt_answers)) > 1:
            for a in answers:
                a["answer"] = _naive_digit_article(_naive_punctuation(a["answer"]))
            res_ans = _naive_digit_article(_naive_punctuation(res_ans))
        gt_acc = []
        for datum in answers:
            others = [item for item in answers if item != datum]
            matching = [item for item in others if item["answer"] == res_ans]
            gt_acc.append(min(1, float(len(matching)) / 3))
        out.append(float(sum(gt_acc)) / len(gt_acc))
    return out


# --------------------------------------------------------------------------- data

_COLORS = ["white", "black", "red", "blue", "green", "yellow", "brown", "gray", "orange", "pink"]
_THINGS = [
    "frisbee", "umbrella", "phone", "pizza", "dog", "cat", "horse", "kite", "surfboard", "tennis",
    "baseball", "skateboard", "laptop", "banana", "clock", "bus", "train", "giraffe", "elephant",
]  # fmt: skip
_NUMBER_WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]


def _vocabulary(rng: np.random.Generator, size: int) -> list[str]:
    words = list(_COLORS + _THINGS)
    while len(words) < size:
        a, b = rng.integers(0, len(_COLORS)), rng.integers(0, len(_THINGS))
        words.append(f"{_COLORS[a]} {_THINGS[b]}{len(words)}")
    return words


def _variant(answer: str, rng: np.random.Generator) -> str:
    """A way an annotator (or a model) might write ``answer``."""
    r = rng.random()
    if r < 0.55:
        return answer
    if r < 0.63:
        return answer.capitalize()
    if r < 0.70:
        return answer + "."
    if r < 0.76:
        return "the " + answer
    if r < 0.80:
        return " " + answer + "\n"
    if r < 0.84:
        return answer.replace(" ", "-")
    if r < 0.87:
        return answer + "!"
    if r < 0.90:
        return "a " + answer + "?"
    if r < 0.93:
        return answer + " , " + answer
    if r < 0.96:
        return "(" + answer + ")"
    return answer + "s"


def generate(size: int, seed: int = 0) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``size`` VQA-like questions (10 answers each) and predictions, deterministic in ``seed``."""
    rng = np.random.default_rng(seed)
    vocab = _vocabulary(rng, 3000)
    gts: list[dict[str, Any]] = []
    res: list[dict[str, Any]] = []
    for _ in range(size):
        kind = rng.random()
        if kind < 0.38:  # yes/no
            main = "yes" if rng.random() < 0.5 else "no"
            other = "no" if main == "yes" else "yes"
            k = int(rng.choice([10, 10, 10, 9, 8, 7, 6]))
            answers = [main] * k + [other] * (10 - k)
            pred = main if rng.random() < 0.8 else other
            if rng.random() < 0.05:
                pred = pred.capitalize()
        elif kind < 0.50:  # number
            n = int(rng.integers(0, 10))
            pool = [str(n), str(n), _NUMBER_WORDS[n], str(n + 1), f"{n},000", str(max(n - 1, 0))]
            answers = [pool[int(rng.integers(0, len(pool)))] for _ in range(10)]
            pred = pool[int(rng.integers(0, len(pool)))]
        else:  # other
            choices = rng.integers(0, len(vocab), size=3)
            weights = np.array([0.7, 0.2, 0.1])
            picks = rng.choice(3, size=10, p=weights)
            answers = [_variant(vocab[int(choices[p])], rng) for p in picks]
            pred_base = (
                vocab[int(choices[0])] if rng.random() < 0.6 else vocab[int(rng.integers(0, 3000))]
            )
            pred = _variant(pred_base, rng)
        rng.shuffle(answers)
        gts.append({"answers": [{"answer": a, "answer_id": j + 1} for j, a in enumerate(answers)]})
        res.append({"answer": pred})
    return gts, res


# --------------------------------------------------------------------------- run


def run(size: int, seed: int, lenient: bool, repeat: int) -> dict[str, float]:
    """Time both implementations on the same data; raise if any result differs."""
    t0 = time.perf_counter()
    gts, res = generate(size, seed)
    t_gen = time.perf_counter() - t0
    answers = [[a["answer"] for a in g["answers"]] for g in gts]
    preds = [r["answer"] for r in res]

    # Imports and table loading happen before timing (the naive port gets them for free too).
    vqa_accuracies(["a"], [["a", "b"]])
    # The vectorized scorer runs first, so it cannot profit from string hashes cached by the
    # naive loop.
    t_fast = float("inf")
    fast = np.zeros(0)
    for _ in range(repeat):
        # A fresh normalization cache each time: the timing includes normalizing every string.
        from vqadiag.metrics.vqa_normalize import normalize_answer

        normalize_answer.cache_clear()
        t0 = time.perf_counter()
        fast = vqa_accuracies(preds, answers, lenient=lenient)
        t_fast = min(t_fast, time.perf_counter() - t0)

    t_naive = float("inf")
    naive: list[float] = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        naive = naive_vqa_accuracies(gts, res, lenient)
        t_naive = min(t_naive, time.perf_counter() - t0)

    naive_arr = np.asarray(naive, dtype=np.float64)
    mismatches = int(np.sum(naive_arr != fast))
    if mismatches:
        first = int(np.flatnonzero(naive_arr != fast)[0])
        raise SystemExit(
            f"MISMATCH on {mismatches} questions; first #{first}: naive {naive_arr[first]!r} "
            f"vs fast {fast[first]!r}; answers {answers[first]!r}, prediction {preds[first]!r}"
        )
    overall_naive = 100 * float(sum(naive)) / len(naive)
    overall_fast = official_mean(fast)
    if overall_naive != overall_fast:
        raise SystemExit(f"MISMATCH overall: naive {overall_naive!r} vs fast {overall_fast!r}")
    return {
        "questions": size,
        "generate_s": t_gen,
        "naive_s": t_naive,
        "fast_s": t_fast,
        "speedup": t_naive / t_fast,
        "overall": overall_fast,
        "normalized_share": float(np.mean([len({a.strip() for a in row}) > 1 for row in answers])),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=214_354, help="questions (default: VQA v2 val)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--lenient", action="store_true", help="always normalize")
    parser.add_argument("--repeat", type=int, default=1, help="best of N timings")
    parser.add_argument("--min-speedup", type=float, default=20.0)
    args = parser.parse_args(argv)

    r = run(args.size, args.seed, args.lenient, args.repeat)
    print(f"questions            {r['questions']:>12,d} × 10 answers")
    print(f"normalized questions {100 * r['normalized_share']:>11.1f} %  (answers disagree)")
    print(f"naive official loop  {r['naive_s']:>12.3f} s")
    print(f"vqadiag (vectorized) {r['fast_s']:>12.3f} s")
    print(f"speed-up             {r['speedup']:>12.1f} ×  (target ≥ {args.min_speedup:g} ×)")
    print(f"overall accuracy     {r['overall']:>12.4f} %  (identical per question and overall)")
    return 0 if r["speedup"] >= args.min_speedup else 1


if __name__ == "__main__":
    sys.exit(main())
