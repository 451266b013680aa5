"""Text-similarity rankers of basic questions (protocols.md §4): BLEU-1..4, ROUGE-L, CIDEr, METEOR.

The pool question is the *candidate*, the main question the (single)
*reference*. Tokens: lower-case runs of letters/digits (apostrophe suffixes
kept: ``what's``), punctuation dropped, as the COCO caption tokenizer does.

* **BLEU-N** (Papineni et al.; sentence level as in the COCO caption code):
  ``p_k = (clipped k-gram matches + 1e-15) / (candidate k-grams + 1e-9)``,
  ``BLEU-N = (Π_{k≤N} p_k)^{1/N} · BP``, ``BP = exp(1 − 1/ρ)`` when
  ``ρ = (c + 1e-15)/(r + 1e-9) < 1`` (c, r: candidate and reference lengths),
  else 1.
* **ROUGE-L** (Lin 2004, COCO's β = 1.2): ``P = LCS/c``, ``R = LCS/r``,
  ``score = (1 + β²)PR / (R + β²P)`` (0 when LCS = 0).
* **CIDEr** (Vedantam et al.; the CIDEr-D form of the COCO caption code):
  for n = 1..4, ``g(w) = tf(w) · (ln N − ln max(1, df(w)))`` with document
  frequencies ``df`` over the *pool* (N pool questions);
  ``s_n = Σ_w min(g_c(w), g_r(w)) · g_r(w) / (‖g_c‖‖g_r‖) · exp(−δ²/(2·6²))``
  with δ the difference of the bigram counts; ``CIDEr = 10 · mean_n s_n``.
* **METEOR** (Banerjee & Lavie 2005, pure Python): unigrams aligned in two
  stages, exact then Porter stem (no WordNet); m matches,
  ``P = m/c``, ``R = m/r``, ``Fmean = 10PR/(R + 9P)``,
  ``penalty = 0.5 (chunks/m)³``, ``score = Fmean (1 − penalty)``.
  Within a stage each candidate word (left to right) takes the first free
  reference word of the same form after the previously aligned one (else the
  first free one), which gives the fewest crossings on questions.

Speed: matches are sparse products. ``min(a, b) = Σ_t [a ≥ t][b ≥ t]``, so
clipped counts are dot products of binary "k-gram occurrence level" vectors:
the pool side is one sparse matrix, the mains of a chunk one small dense
block. LCS lengths are bit-parallel (Allison–Dix) over all pool questions at
once; METEOR is evaluated exactly only for pool questions whose Fmean (an
upper bound of the score) can still reach the top.
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from collections.abc import Sequence

import numpy as np

from vqadiag.protocols.robustness.basic_questions.porter import porter_stem

_TOKEN = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
TINY = 1e-15
SMALL = 1e-9
ROUGE_BETA = 1.2
CIDER_SIGMA = 6.0
METEOR_VARIANT = "python (Banerjee & Lavie 2005: exact + Porter stem)"


def tokenize(text: str) -> list[str]:
    """Lower-case word tokens, punctuation dropped."""
    return _TOKEN.findall(text.lower())


def ngrams(tokens: Sequence[str], n: int) -> Counter[tuple[str, ...]]:
    """Counts of the n-grams of ``tokens``."""
    return Counter(tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))


# ----------------------------------------------------------------------------- pair formulas


def bleu(candidate: str, reference: str, n: int = 4) -> float:
    """Sentence BLEU-n of one candidate against one reference (formula above)."""
    c, r = tokenize(candidate), tokenize(reference)
    score = 1.0
    for k in range(1, n + 1):
        cand, ref = ngrams(c, k), ngrams(r, k)
        match = sum(min(v, ref[g]) for g, v in cand.items())
        score *= (match + TINY) / (max(len(c) - k + 1, 0) + SMALL)
    score **= 1.0 / n
    ratio = (len(c) + TINY) / (len(r) + SMALL)
    if ratio < 1:
        score *= math.exp(1 - 1 / ratio)
    return score


def lcs_length(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest common subsequence (dynamic programming)."""
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b):
            cur.append(prev[j] + 1 if x == y else max(prev[j + 1], cur[j]))
        prev = cur
    return prev[-1]


def rouge_l(candidate: str, reference: str, beta: float = ROUGE_BETA) -> float:
    """ROUGE-L F-score with β = 1.2 (COCO caption)."""
    c, r = tokenize(candidate), tokenize(reference)
    lcs = lcs_length(c, r)
    if lcs == 0:
        return 0.0
    p, rec = lcs / len(c), lcs / len(r)
    return (1 + beta**2) * p * rec / (rec + beta**2 * p)


def _meteor_align(c: list[str], r: list[str]) -> list[tuple[int, int]]:
    """(candidate position, reference position) pairs: exact stage, then stem stage."""
    used_c: set[int] = set()
    used_r: set[int] = set()
    pairs: list[tuple[int, int]] = []
    for form in (lambda w: w, porter_stem):
        cf = [form(w) for w in c]
        rf = [form(w) for w in r]
        last = -1
        for i, w in enumerate(cf):
            if i in used_c:
                continue
            free = [j for j, v in enumerate(rf) if v == w and j not in used_r]
            if not free:
                continue
            after = [j for j in free if j > last]
            j = after[0] if after else free[0]
            used_c.add(i)
            used_r.add(j)
            pairs.append((i, j))
            last = j
    return sorted(pairs)


def meteor(candidate: str, reference: str) -> float:
    """METEOR (2005 form, exact + Porter stem stages) of one candidate against one reference."""
    return _meteor_tokens(tokenize(candidate), tokenize(reference))


def _meteor_tokens(c: list[str], r: list[str]) -> float:
    pairs = _meteor_align(c, r)
    m = len(pairs)
    if m == 0:
        return 0.0
    chunks = 1
    for (i0, j0), (i1, j1) in itertools.pairwise(pairs):
        if i1 != i0 + 1 or j1 != j0 + 1:
            chunks += 1
    p, rec = m / len(c), m / len(r)
    fmean = 10 * p * rec / (rec + 9 * p)
    return fmean * (1 - 0.5 * (chunks / m) ** 3)


def cider_pair(
    candidate: str, reference: str, df: dict[tuple[str, ...], int], n_docs: int
) -> float:
    """CIDEr-D of one pair given document frequencies ``df`` over ``n_docs`` documents."""
    c, r = tokenize(candidate), tokenize(reference)
    total = 0.0
    log_n = math.log(float(n_docs))
    delta = max(len(c) - 1, 0) - max(len(r) - 1, 0)
    for k in range(1, 5):
        gc, gr = ngrams(c, k), ngrams(r, k)
        wc = {g: v * (log_n - math.log(max(1.0, df.get(g, 0)))) for g, v in gc.items()}
        wr = {g: v * (log_n - math.log(max(1.0, df.get(g, 0)))) for g, v in gr.items()}
        val = sum(min(v, wr.get(g, 0.0)) * wr.get(g, 0.0) for g, v in wc.items())
        nc = math.sqrt(sum(v * v for v in wc.values()))
        nr = math.sqrt(sum(v * v for v in wr.values()))
        if nc and nr:
            val /= nc * nr
        total += val * math.exp(-(delta**2) / (2 * CIDER_SIGMA**2))
    return 10 * total / 4


# ----------------------------------------------------------------------------- pool index


class PoolIndex:
    """Tokenized pool with sparse k-gram level matrices (k = 1..4), stems and LCS arrays."""

    def __init__(self, pool: Sequence[str]) -> None:
        from scipy import sparse

        self.texts = list(pool)
        self.tokens = [tokenize(t) for t in pool]
        self.n = len(self.tokens)
        self.lengths = np.array([len(t) for t in self.tokens], dtype=np.float64)
        self.level_ids: list[dict[tuple[tuple[str, ...], int], int]] = []
        self.levels: list[sparse.csc_matrix] = []
        self.df: list[dict[tuple[str, ...], int]] = []
        self.cider_norm = np.zeros((4, self.n))
        for k in range(1, 5):
            ids: dict[tuple[tuple[str, ...], int], int] = {}
            rows: list[int] = []
            cols: list[int] = []
            df: Counter[tuple[str, ...]] = Counter()
            grams = [ngrams(t, k) for t in self.tokens]
            for i, counts in enumerate(grams):
                df.update(counts.keys())
                for g, v in counts.items():
                    for t in range(1, v + 1):
                        rows.append(i)
                        cols.append(ids.setdefault((g, t), len(ids)))
            data = np.ones(len(rows), dtype=np.float64)
            self.levels.append(
                sparse.csc_matrix((data, (rows, cols)), shape=(self.n, max(len(ids), 1)))
            )
            self.level_ids.append(ids)
            self.df.append(dict(df))
            log_n = math.log(float(self.n))
            for i, counts in enumerate(grams):
                self.cider_norm[k - 1, i] = math.sqrt(
                    sum((v * (log_n - math.log(max(1.0, df[g])))) ** 2 for g, v in counts.items())
                )
        # stems (METEOR): level matrix over stemmed unigrams
        stem_ids: dict[tuple[str, int], int] = {}
        rows, cols = [], []
        for i, toks in enumerate(self.tokens):
            for s, v in Counter(porter_stem(w) for w in toks).items():
                for t in range(1, v + 1):
                    rows.append(i)
                    cols.append(stem_ids.setdefault((s, t), len(stem_ids)))
        self.stem_ids = stem_ids
        self.stem_levels = sparse.csc_matrix(
            (np.ones(len(rows)), (rows, cols)), shape=(self.n, max(len(stem_ids), 1))
        )
        # LCS: pool token ids padded with -1
        vocab: dict[str, int] = {}
        width = max((len(t) for t in self.tokens), default=0)
        self.token_ids = np.full((self.n, max(width, 1)), -1, dtype=np.int64)
        for i, toks in enumerate(self.tokens):
            self.token_ids[i, : len(toks)] = [vocab.setdefault(w, len(vocab)) for w in toks]
        self.vocab = vocab

    # -- clipped matches ----------------------------------------------------------------
    def _matches(self, matrix, ids, mains_counts, weights=None) -> np.ndarray:
        """n × m clipped matches Σ_g min(c_pool, c_main)·weight via occurrence levels."""
        cols: dict[int, int] = {}
        entries: list[tuple[int, int, float]] = []
        for j, counts in enumerate(mains_counts):
            for g, v in counts.items():
                w = 1.0 if weights is None else weights[j][g]
                for t in range(1, v + 1):
                    f = ids.get((g, t))
                    if f is None:
                        break
                    entries.append((cols.setdefault(f, len(cols)), j, w))
        out = np.zeros((self.n, len(mains_counts)))
        if not cols:
            return out
        D = np.zeros((len(cols), len(mains_counts)))
        for c, j, w in entries:
            D[c, j] += w
        sub = matrix[:, list(cols)]
        return np.asarray(sub @ D)

    def bleu(self, mains: Sequence[str], n: int) -> np.ndarray:
        """n_pool × m BLEU-n of every pool question (candidate) against each main (reference)."""
        toks = [tokenize(m) for m in mains]
        log_score = np.zeros((self.n, len(mains)))
        for k in range(1, n + 1):
            M = self._matches(
                self.levels[k - 1], self.level_ids[k - 1], [ngrams(t, k) for t in toks]
            )
            total = np.maximum(self.lengths - k + 1, 0)[:, None]
            log_score += np.log((M + TINY) / (total + SMALL))
        score = np.exp(log_score / n)
        ref = np.array([len(t) for t in toks], dtype=np.float64)[None, :]
        ratio = (self.lengths[:, None] + TINY) / (ref + SMALL)
        with np.errstate(divide="ignore", over="ignore"):
            bp = np.where(ratio < 1, np.exp(1 - 1 / ratio), 1.0)
        return score * bp

    def rouge(self, mains: Sequence[str]) -> np.ndarray:
        """n_pool × m ROUGE-L (bit-parallel LCS, one pass over pool positions per main)."""
        out = np.zeros((self.n, len(mains)))
        for j, main in enumerate(mains):
            r = tokenize(main)
            if not r:
                continue
            lcs = self._lcs(r)
            with np.errstate(divide="ignore", invalid="ignore"):
                p = lcs / self.lengths
                rec = lcs / len(r)
                f = (1 + ROUGE_BETA**2) * p * rec / (rec + ROUGE_BETA**2 * p)
            out[:, j] = np.where(lcs > 0, f, 0.0)
        return out

    def _lcs(self, ref: list[str]) -> np.ndarray:
        """LCS length of every pool question with ``ref`` (Allison–Dix bit vectors)."""
        if len(ref) > 63:
            return np.array([lcs_length(t, ref) for t in self.tokens], dtype=np.float64)
        masks = np.zeros(len(self.vocab) + 1, dtype=np.uint64)  # last slot: padding (-1)
        for i, w in enumerate(ref):
            if w in self.vocab:
                masks[self.vocab[w]] |= np.uint64(1 << i)
        full = np.uint64((1 << len(ref)) - 1)
        V = np.full(self.n, full, dtype=np.uint64)
        for pos in range(self.token_ids.shape[1]):
            U = V & masks[self.token_ids[:, pos]]
            V = ((V + U) | (V - U)) & full
        # LCS = number of zero bits among the len(ref) low bits
        ones = np.zeros(self.n, dtype=np.int64)
        for i in range(len(ref)):
            ones += ((V >> np.uint64(i)) & np.uint64(1)).astype(np.int64)
        return (len(ref) - ones).astype(np.float64)

    def cider(self, mains: Sequence[str]) -> np.ndarray:
        """n_pool × m CIDEr-D with document frequencies over the pool."""
        toks = [tokenize(m) for m in mains]
        log_n = math.log(float(self.n))
        out = np.zeros((self.n, len(mains)))
        ref_bigrams = np.array([max(len(t) - 1, 0) for t in toks], dtype=np.float64)[None, :]
        pool_bigrams = np.maximum(self.lengths - 1, 0)[:, None]
        penalty = np.exp(-((pool_bigrams - ref_bigrams) ** 2) / (2 * CIDER_SIGMA**2))
        for k in range(1, 5):
            counts = [ngrams(t, k) for t in toks]
            df = self.df[k - 1]
            idf = [{g: log_n - math.log(max(1.0, df.get(g, 0))) for g in c} for c in counts]
            # min(tf_c·idf, tf_r·idf)·tf_r·idf = Σ_t [tf_c ≥ t][tf_r ≥ t] · tf_r · idf²
            weights = [{g: c[g] * idf[j][g] ** 2 for g in c} for j, c in enumerate(counts)]
            M = self._matches(self.levels[k - 1], self.level_ids[k - 1], counts, weights)
            ref_norm = np.array(
                [math.sqrt(sum((c[g] * idf[j][g]) ** 2 for g in c)) for j, c in enumerate(counts)]
            )[None, :]
            denom = self.cider_norm[k - 1][:, None] * ref_norm
            with np.errstate(divide="ignore", invalid="ignore"):
                val = np.where(denom > 0, M / denom, M)
            out += val * penalty
        return 10 * out / 4

    def meteor_fmean(self, main: str) -> tuple[np.ndarray, list[str]]:
        """Fmean of every pool question (an upper bound of its METEOR) and the main's tokens."""
        r = tokenize(main)
        counts = Counter(porter_stem(w) for w in r)
        cols = []
        for s, v in counts.items():
            for t in range(1, v + 1):
                f = self.stem_ids.get((s, t))
                if f is None:
                    break
                cols.append(f)
        if not cols or not r:
            return np.zeros(self.n), r
        m = np.asarray(self.stem_levels[:, cols].sum(axis=1)).ravel()
        with np.errstate(divide="ignore", invalid="ignore"):
            p = m / self.lengths
            rec = m / len(r)
            f = 10 * p * rec / (rec + 9 * p)
        return np.where(m > 0, f, 0.0), r


def score_matrix(index: PoolIndex, ranker: str, mains: Sequence[str]) -> np.ndarray:
    """n_pool × m similarity of every pool question to each main question."""
    if ranker.startswith("bleu"):
        return index.bleu(mains, int(ranker[4:]))
    if ranker == "rouge":
        return index.rouge(mains)
    if ranker == "cider":
        return index.cider(mains)
    if ranker == "meteor":
        return np.stack([meteor_scores(index, m) for m in mains], axis=1)
    raise ValueError(f"unknown text ranker {ranker!r}")


def meteor_scores(index: PoolIndex, main: str) -> np.ndarray:
    """METEOR of every pool question against ``main`` (exact everywhere; slow on big pools)."""
    fmean, r = index.meteor_fmean(main)
    out = np.zeros(index.n)
    for i in np.flatnonzero(fmean > 0):
        out[i] = _meteor_tokens(index.tokens[i], r)
    return out


def meteor_top(
    index: PoolIndex, main: str, top: int, exclude: int | None = None
) -> tuple[list[int], list[float]]:
    """Exact METEOR top-``top`` (ties: lower index) without scoring the whole pool.

    Pool questions are scored in decreasing Fmean order; since METEOR ≤ Fmean,
    scoring stops once the next Fmean is below the current ``top``-th score.
    """
    fmean, r = index.meteor_fmean(main)
    if exclude is not None:
        fmean = fmean.copy()
        fmean[exclude] = -1.0
    order = np.lexsort((np.arange(index.n), -fmean))
    if exclude is not None:
        order = order[order != exclude]
    import heapq

    heap: list[tuple[float, int]] = []  # (score, −index): the worst of the best on top
    for i in order:
        i = int(i)
        if len(heap) >= top and (fmean[i] < heap[0][0] or fmean[i] <= 0):
            break
        s = _meteor_tokens(index.tokens[i], r) if fmean[i] > 0 else 0.0
        item = (s, -i)
        if len(heap) < top:
            heapq.heappush(heap, item)
        elif item > heap[0]:
            heapq.heapreplace(heap, item)
    best = sorted(heap, reverse=True)
    return [-i for _, i in best], [s for s, _ in best]


# ----------------------------------------------------------------------------- Java METEOR 1.5

JAVA_PRESELECT = 100


class JavaMeteor:
    """The official METEOR 1.5 jar in ``-stdio`` mode (``SCORE ||| ref ||| hyp`` → stats,
    ``EVAL ||| stats`` → score), as the COCO caption code drives it."""

    def __init__(self, jar: str, java: str = "java") -> None:
        import subprocess

        cmd = [java, "-jar", "-Xmx2G", jar, "-", "-", "-stdio", "-l", "en", "-norm"]
        self.proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            bufsize=1,
        )

    def score(self, candidate: str, reference: str) -> float:
        """METEOR 1.5 of one candidate against one reference."""
        clean = [" ".join(t.replace("|||", " ").split()) for t in (reference, candidate)]
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"SCORE ||| {clean[0]} ||| {clean[1]}\n")
        stats = self.proc.stdout.readline().strip()
        self.proc.stdin.write(f"EVAL ||| {stats}\n")
        return float(self.proc.stdout.readline().strip())

    def close(self) -> None:
        """Stop the Java process."""
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=30)


def java_meteor_top(
    index: PoolIndex,
    main: str,
    top: int,
    exclude: int | None,
    scorer: JavaMeteor,
    preselect: int = JAVA_PRESELECT,
) -> tuple[list[int], list[float]]:
    """Top-``top`` by Java METEOR 1.5 among the pure-Python METEOR top-``preselect``.

    Java's METEOR (with synonyms and paraphrases) has no cheap upper bound, so
    it re-scores the ``max(preselect, top)`` best pool questions of the
    pure-Python METEOR (ties: lower index first).
    """
    idx, _ = meteor_top(index, main, max(preselect, top), exclude)
    scored = [(scorer.score(index.texts[i], main), i) for i in idx]
    best = sorted(scored, key=lambda x: (-x[0], x[1]))[:top]
    return [i for _, i in best], [s for s, _ in best]
