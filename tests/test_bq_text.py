"""Text-similarity rankers (docs/protocols.md §4): hand-worked BLEU, ROUGE-L, CIDEr-D, METEOR; the
vectorized pool scores equal the pair formulas; METEOR's bounded top-k equals brute force."""

from __future__ import annotations

import math

import numpy as np
import pytest

from vqadiag.protocols.robustness.basic_questions import text_similarity as ts
from vqadiag.protocols.robustness.basic_questions.porter import porter_stem
from vqadiag.protocols.robustness.basic_questions.rankers import text_chunk, top_indices

CAND = "what color is the cat"
REF = "What color is the dog?"


def test_bleu_hand_worked_equal_lengths():
    # 5 vs 5 tokens, BP ≈ 1. Matches: unigrams 4/5, bigrams 3/4 (what color, color is,
    # is the), trigrams 2/3, 4-grams 1/2.
    assert ts.bleu(CAND, REF, 1) == pytest.approx(0.8, rel=1e-8)
    assert ts.bleu(CAND, REF, 2) == pytest.approx(math.sqrt(0.8 * 0.75), rel=1e-8)  # 0.774597
    assert ts.bleu(CAND, REF, 3) == pytest.approx(0.4 ** (1 / 3), rel=1e-8)  # 0.736806
    assert ts.bleu(CAND, REF, 4) == pytest.approx(0.2**0.25, rel=1e-8)  # 0.668740


def test_bleu_brevity_penalty():
    # "is the cat black" (4) vs "what color is the cat" (5): p1 = 3/4,
    # BP = exp(1 − 5/4) = 0.778801 → BLEU-1 = 0.584101
    assert ts.bleu("is the cat black", "what color is the cat", 1) == pytest.approx(
        0.75 * math.exp(-0.25), rel=1e-8
    )


def test_rouge_l_hand_worked():
    # LCS("is the cat black", "what color is the cat") = 3 (is the cat);
    # P = 3/4, R = 3/5, F = (1 + 1.44)·0.45 / (0.6 + 1.44·0.75) = 1.098 / 1.68 = 0.653571
    assert ts.rouge_l("is the cat black", "what color is the cat") == pytest.approx(
        1.098 / 1.68, rel=1e-9
    )
    assert ts.rouge_l("a b", "c d") == 0.0


def test_meteor_hand_worked_with_stem_stage():
    # exact: the→the, running→running; stem: cats→cat ("cat"); are/is differ. m = 3,
    # P = R = 3/4, Fmean = 10PR/(R + 9P) = 0.75; chunks {the cats}{running} = 2,
    # penalty = 0.5·(2/3)³ = 0.148148 → 0.75·0.851852 = 0.638889
    assert ts.meteor("the cats are running", "the cat is running") == pytest.approx(
        0.75 * (1 - 0.5 * (2 / 3) ** 3), rel=1e-9
    )
    # identical: one chunk, penalty 0.5·(1/4)³ → Fmean 1·(1 − 0.0078125)
    assert ts.meteor("a b c d", "a b c d") == pytest.approx(1 - 0.5 / 64, rel=1e-12)


def test_cider_hand_worked_pool_document_frequencies():
    pool = ["the cat", "the dog", "a cat"]
    # N = 3; df: the 2, cat 2, dog 1, a 1. idf(the) = idf(cat) = ln 3 − ln 2 = 0.4054651,
    # idf(a) = ln 3. n = 1: candidate "a cat" g = (a 1.0986123, cat 0.4054651),
    # reference "the cat" g = (the 0.4054651, cat 0.4054651);
    # Σ min·g_r = 0.1644019; ‖g_c‖ = 1.1710469, ‖g_r‖ = 0.5734142, product 0.6714950
    # → 0.2448297. n = 2: no shared bigram → 0; δ = 0. CIDEr = 10 · 0.2448297 / 4 = 0.6120744
    index = ts.PoolIndex(pool)
    df = index.df[0] | index.df[1]
    assert ts.cider_pair("a cat", "the cat", df, 3) == pytest.approx(0.6120744, rel=1e-6)
    # identical "the cat": n = 1 and n = 2 both give 1 → 10·2/4 = 5
    assert ts.cider_pair("the cat", "the cat", df, 3) == pytest.approx(5.0, rel=1e-12)
    # "the dog" has the same shape as "a cat" (one shared word of idf 0.405, one of idf ln 3)
    scores = index.cider(["the cat"])[:, 0]
    np.testing.assert_allclose(scores, [5.0, 0.6120744, 0.6120744], rtol=1e-6)


def test_porter_examples_from_the_paper():
    cases = {
        "caresses": "caress",
        "ponies": "poni",
        "hopping": "hop",
        "relational": "relat",
        "generalization": "gener",
        "running": "run",
        "agreed": "agre",
        "happy": "happi",
        "adjustment": "adjust",
        "controll": "control",
        "cats": "cat",
        "is": "is",
    }
    for word, stem in cases.items():
        assert porter_stem(word) == stem


POOL = [
    "What color is the cat?",
    "Is the cat black?",
    "What is on the table?",
    "What color is the dog?",
    "How many cats are there?",
    "Is the dog running?",
    "Are the cats running on the table?",
    "Is there a cat on the table?",
    "the the the cat",
]
MAINS = ["What color is the cat on the table?", "Are the dogs running?", "the cat the cat"]


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_vectorized_bleu_equals_pair_formula(n):
    index = ts.PoolIndex(POOL)
    S = index.bleu(MAINS, n)
    for j, m in enumerate(MAINS):
        for i, p in enumerate(POOL):
            assert S[i, j] == pytest.approx(ts.bleu(p, m, n), rel=1e-9, abs=1e-300)


def test_vectorized_rouge_cider_meteor_equal_pair_formulas():
    index = ts.PoolIndex(POOL)
    R = index.rouge(MAINS)
    C = index.cider(MAINS)
    df = {}
    for part in index.df:
        df.update(part)
    for j, m in enumerate(MAINS):
        met = ts.meteor_scores(index, m)
        for i, p in enumerate(POOL):
            assert R[i, j] == pytest.approx(ts.rouge_l(p, m), abs=1e-12)
            assert C[i, j] == pytest.approx(ts.cider_pair(p, m, df, len(POOL)), abs=1e-9)
            assert met[i] == pytest.approx(ts.meteor(p, m), abs=1e-12)


def test_meteor_top_equals_brute_force_and_skips_excluded():
    index = ts.PoolIndex(POOL)
    for m in MAINS:
        brute = ts.meteor_scores(index, m)
        for exclude in (None, 0):
            idx, scores = ts.meteor_top(index, m, 4, exclude)
            assert list(idx) == list(top_indices(brute, 4, exclude))
            np.testing.assert_allclose(scores, brute[idx])


def test_top_indices_ties_go_to_lower_index():
    assert list(top_indices(np.array([0.5, 0.9, 0.5, 0.9, 0.1]), 3, None)) == [1, 3, 0]
    assert list(top_indices(np.array([0.5, 0.9, 0.5, 0.9, 0.1]), 3, 1)) == [3, 0, 2]


def test_text_chunk_results_are_best_first():
    index = ts.PoolIndex(POOL)
    shared = {"index": index, "ranker": "rouge", "top": 3}
    res = text_chunk(shared, {"texts": MAINS[:1], "exclude": [None]})[0]
    scores = res["scores"].tolist()
    assert scores == sorted(scores, reverse=True)
    assert res["indices"][0] == 0  # "What color is the cat?" shares the longest subsequence
    # kept as arrays (the scores as float64: the dataset writes them as Python floats)
    assert res["indices"].dtype == np.int64 and res["scores"].dtype == np.float64
