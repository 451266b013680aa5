"""Answer balance and prior baselines (docs/protocols.md §2; Goyal et al. §3, "Dataset analysis").

* Entropy of the answer distribution of one question type t, in bits:
  H_t = −Σ_a p(a | t) log2 p(a | t).
* Dataset balance figure of the paper: the average of H_t over question types,
  weighted by type frequency: H̄ = Σ_t (n_t / n) H_t (the paper reports +56%
  after balancing).
* Baselines: the prior (most common answer overall, "yes" on VQA v2) and the
  per-question-type prior (most common answer of each type), predicted for
  every question.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Mapping, Sequence

import numpy as np


def entropy_bits(counts: Sequence[int] | np.ndarray) -> float:
    """Shannon entropy −Σ p log2 p of a histogram (zero counts ignored; empty → NaN)."""
    c = np.asarray(counts, dtype=np.float64)
    c = c[c > 0]
    if c.size == 0:
        return float("nan")
    p = c / c.sum()
    return float(-(p * np.log2(p)).sum()) + 0.0  # + 0.0 turns −0.0 into 0.0


def answer_counts_by_type(
    types: Sequence[Hashable], answers: Sequence[str]
) -> dict[Hashable, Counter[str]]:
    """Answer histogram per question type, types in first-seen order."""
    if len(types) != len(answers):
        raise ValueError("one question type per answer is needed")
    out: dict[Hashable, Counter[str]] = {}
    for t, a in zip(types, answers, strict=True):
        out.setdefault(t, Counter())[a] += 1
    return out


def entropy_by_type(counts: Mapping[Hashable, Counter[str]]) -> dict[Hashable, float]:
    """H_t in bits for every question type (docs/protocols.md §2)."""
    return {t: entropy_bits(list(c.values())) for t, c in counts.items()}


def weighted_mean_entropy(counts: Mapping[Hashable, Counter[str]]) -> float:
    """H̄ = Σ_t (n_t / n) H_t: type entropies weighted by type frequency (docs/protocols.md §2)."""
    sizes = np.array([sum(c.values()) for c in counts.values()], dtype=np.float64)
    if sizes.sum() == 0:
        return float("nan")
    entropies = np.array(list(entropy_by_type(counts).values()), dtype=np.float64)
    return float((sizes * entropies).sum() / sizes.sum())


def most_common(counter: Counter[str]) -> str:
    """The most frequent answer; ties go to the answer seen first (``Counter`` order)."""
    return counter.most_common(1)[0][0]


def prior_answer(answers: Sequence[str]) -> str:
    """The Prior baseline's answer: the most common answer of ``answers`` (docs/protocols.md §2)."""
    if not answers:
        raise ValueError("no answers to take a prior from")
    return most_common(Counter(answers))


def per_type_prior(types: Sequence[Hashable], answers: Sequence[str]) -> dict[Hashable, str]:
    """The per-question-type prior: the most common answer of each type (docs/protocols.md §2)."""
    return {t: most_common(c) for t, c in answer_counts_by_type(types, answers).items()}


def prior_predictions(
    types: Sequence[Hashable],
    type_priors: Mapping[Hashable, str],
    fallback: str,
) -> list[str]:
    """Predictions of the per-type prior; types without a prior get ``fallback``."""
    return [type_priors.get(t, fallback) for t in types]
