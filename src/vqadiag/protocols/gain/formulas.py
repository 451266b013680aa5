"""The multi-modal gain and its test (docs/protocols.md §9).

On the n questions a model answered both with its image (``a_i``: the per-question
accuracy of the plain run) and without it (``b_i``: the no-image condition):

* gain = 100 · (Σ a_i − Σ b_i) / n, in points (MMStar's multi-modal gain of one model);
* its 95% interval: the paired bootstrap that resamples questions jointly for both runs
  (:func:`vqadiag.metrics.compare.compare_rates`);
* its test of gain = 0: McNemar's exact test on the discordant questions when the
  accuracies are 0/1 (GQA): with ``improved`` = #(a_i = 1, b_i = 0) and ``worsened`` =
  #(a_i = 0, b_i = 1), the two-sided binomial test of ``improved`` successes in
  ``improved + worsened`` trials at 1/2; with soft accuracies (VQA v2's official
  min(1, #matches/3) averaged over annotator subsets) McNemar does not apply and the
  paired bootstrap's two-sided p is the test.

Per-question accuracies: GQA's exact match with the gold answer (docs/protocols.md §1.2);
VQA v2's official accuracy (docs/protocols.md §1.1,
:func:`vqadiag.metrics.vqa_accuracy.vqa_accuracies`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from vqadiag.metrics.compare import compare_rates
from vqadiag.metrics.vqa_accuracy import vqa_accuracies


def gqa_correct(answers: Sequence[str], records: Sequence[Mapping[str, Any]]) -> np.ndarray:
    """Per question 1.0 when the answer is the gold ``answer`` exactly, else 0.0."""
    return np.array(
        [float(a == r.get("answer")) for a, r in zip(answers, records, strict=True)], np.float64
    )


def vqa2_accuracy(answers: Sequence[str], records: Sequence[Mapping[str, Any]]) -> np.ndarray:
    """Per question the official VQA accuracy in [0, 1] against the record's 10 annotator
    ``answers``."""
    return vqa_accuracies(list(answers), [list(r["answers"]) for r in records])


def multimodal_gain(
    with_image: np.ndarray, without_image: np.ndarray, *, seed: int = 0, n_bootstrap: int = 1000
) -> dict[str, Any]:
    """The gain of one model's image on the same questions (module docstring):
    ``{gain: {value, ci_low, ci_high, n}, accuracy_all, accuracy_noimage, improved,
    worsened, n, test: {p_value, test}}``, percentages in points."""
    a = np.asarray(with_image, np.float64)
    b = np.asarray(without_image, np.float64)
    if a.shape != b.shape:
        raise ValueError("the gain needs both runs on the same questions")
    cmp = compare_rates(a, b, n_resamples=n_bootstrap, seed=seed)
    n = int(a.size)
    return {
        "gain": cmp.difference.to_dict(),
        "accuracy_all": float(100.0 * a.mean()) if n else None,
        "accuracy_noimage": float(100.0 * b.mean()) if n else None,
        "improved": int(np.sum(a > b)),
        "worsened": int(np.sum(a < b)),
        "n": n,
        "test": {"p_value": cmp.p_value, "test": cmp.test},
    }
