"""``vqadiag bq build`` and ``vqadiag bq noise``: basic-question datasets and noisy questions.

docs/protocols.md §4 (Huang et al.): every main question gets the ``top`` (21) most
similar questions of a pool of basic questions, ranked by LASSO over sentence
embeddings or by a text-similarity metric; the ranked list is cut into 7
partitions of 3 that are appended to the main question as noise.

* **Pool**: the questions of every ``--pool`` file, in file order. Duplicates
  are removed first: two questions are the same when their texts are equal
  after lower-casing and collapsing whitespace (the first spelling and id are
  kept). With ``yes_no`` only yes/no questions enter the pool (Yes/No BQD; the
  paper's YNBQD keeps *all* main questions and restricts the pool).
* **A main question never ranks itself**: the pool entry with its normalized
  text is left out of its problem.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from vqadiag.arguments import one_or_many
from vqadiag.data.formats.bqd import QuestionFile, read_bqd, read_question_file, write_bqd
from vqadiag.errors import DataError

DEFAULT_TOP = 21
LASSO_CHUNK = 64
TEXT_CHUNK = 256
#: a text ranker scores a chunk of mains against the whole pool as a few pool × chunk
#: float64 matrices: chunks hold at most this many cells (8 MB a matrix)
TEXT_CELLS = 1_000_000


def normalize_text(text: str) -> str:
    """The duplicate key of a question: lower-case, whitespace collapsed to single spaces."""
    return " ".join(text.lower().split())


def _pool(files: Sequence[str | Path], yes_no: bool) -> tuple[list[str], list[str], dict[str, Any]]:
    """Unique pool texts and their ids (first occurrence), plus counts for the meta."""
    if not files:
        raise DataError(None, "no --pool file given")
    texts: list[str] = []
    ids: list[str] = []
    seen: set[str] = set()
    total = kept = 0
    for path in files:
        qf = read_question_file(path, need_answers=yes_no, keep_raw=False)
        for qid, text, yn in zip(qf.ids, qf.texts, qf.yes_no, strict=True):
            total += 1
            if yes_no and not yn:
                continue
            kept += 1
            key = normalize_text(text)
            if not key or key in seen:
                continue
            seen.add(key)
            texts.append(text)
            ids.append(qid)
    counts = {
        "pool_questions": total,
        "pool_yes_no": kept if yes_no else None,
        "duplicates_removed": kept - len(texts),
        "pool_size": len(texts),
    }
    return texts, ids, counts


def _chunks(n: int, size: int) -> list[slice]:
    return [slice(s, min(s + size, n)) for s in range(0, n, size)]


#: ``build_bqd``'s LASSO settings, with their defaults (the paper's λ; an LSA of 384)
LASSO_DEFAULTS: dict[str, Any] = {"embedder": "lsa", "dim": 384, "lam": 1e-6}
#: the settings only one ranker reads: parameter → (command-line name, that ranker)
RANKER_SETTINGS = {
    "embedder": ("--embedder", "lasso"), "dim": ("--dim", "lasso"),
    "lam": ("--lambda", "lasso"), "embedder_path": ("embedder_path", "lasso"),
    "meteor_jar": ("--meteor-jar", "meteor"),
}  # fmt: skip


def _check_options(ranker: str, backend: str, top: int, given: Mapping[str, Any]) -> None:
    """One line for an option ``build_bqd`` cannot use: ``given`` holds the settings of
    :data:`RANKER_SETTINGS` as passed (None: not given), which another ranker would
    silently leave unused."""
    from vqadiag.protocols.robustness.basic_questions.backends import BACKENDS
    from vqadiag.protocols.robustness.basic_questions.rankers import check_ranker

    check_ranker(ranker)
    if backend not in BACKENDS:
        raise DataError(None, f"unknown backend {backend!r} (choose {', '.join(BACKENDS)})")
    if top < 1:
        raise DataError(None, "--top must be at least 1")
    for key, value in given.items():
        option, needs = RANKER_SETTINGS[key]
        if value is not None and ranker != needs:
            raise DataError(option, f"is used by the {needs} ranker only, not {ranker}")
    lam = given.get("lam")
    if lam is not None and not lam > 0:
        raise DataError(None, f"lambda must be positive, got {lam!r}")


def _checked_pool(
    pool: Sequence[str | Path], yes_no: bool, top: int
) -> tuple[list[str], list[Any], dict[str, Any]]:
    """The pool's unique questions (yes/no only with ``yes_no``), their ids and counts;
    one line when it has none or fewer than ``top``."""
    pool_texts, pool_ids, counts = _pool(pool, yes_no)
    where = Path(pool[0]) if len(pool) == 1 else None
    if not pool_texts:
        what = "yes/no questions" if yes_no else "questions"
        raise DataError(where, f"the pool has no {what}")
    if len(pool_texts) < top:
        raise DataError(
            where, f"the pool has {len(pool_texts)} unique questions, fewer than --top {top}"
        )
    return pool_texts, pool_ids, counts


def _lasso_work(
    pool_texts: list[str], main_texts: list[str], exclude: list[int | None],
    slices: list[slice], meta: dict[str, Any], *, embedder: str, dim: int, seed: int,
    embedder_path: str | Path | None, lam: float, top: int, progress: bool,
) -> tuple[Any, dict[str, Any], list[dict[str, Any]]]:  # fmt: skip
    """The LASSO ranker's chunk function, shared data and chunks: the pool and the main
    questions embedded (``meta`` gains the embedder, its dimension and λ)."""
    from vqadiag.protocols.robustness.basic_questions.embedders import make_embedder
    from vqadiag.protocols.robustness.basic_questions.rankers import lasso_chunk

    emb = make_embedder(embedder, dim=dim, seed=seed, path=embedder_path)
    emb.fit(pool_texts)
    P = np.ascontiguousarray(emb.encode(pool_texts, progress=progress))
    B = emb.encode(main_texts, progress=progress)
    shared: dict[str, Any] = {"P": P, "lam": lam, "top": top}
    chunks = [{"B": np.ascontiguousarray(B[s].T), "exclude": exclude[s]} for s in slices]
    meta.update({"embedder": emb.name, "dim": int(P.shape[1]), "lambda": lam})
    return lasso_chunk, shared, chunks


def _text_work(
    pool_texts: list[str], main_texts: list[str], exclude: list[int | None],
    slices: list[slice], meta: dict[str, Any], *, ranker: str, top: int,
    meteor_jar: str | Path | None,
) -> tuple[Any, dict[str, Any], list[dict[str, Any]]]:  # fmt: skip
    """A text-similarity ranker's chunk function, shared pool index and chunks (METEOR:
    the Java jar re-scores the pure-Python top when java is found; ``meta`` says which)."""
    from vqadiag.protocols.robustness.basic_questions import text_similarity as ts
    from vqadiag.protocols.robustness.basic_questions.rankers import text_chunk

    shared: dict[str, Any] = {"index": ts.PoolIndex(pool_texts), "ranker": ranker, "top": top}
    chunks = [{"texts": main_texts[s], "exclude": exclude[s]} for s in slices]
    if ranker == "meteor":
        meta["meteor"] = ts.METEOR_VARIANT
        if meteor_jar is not None:
            import shutil

            if not Path(meteor_jar).is_file():
                raise DataError(meteor_jar, "METEOR jar not found")
            java = shutil.which("java")
            if java is None:
                meta["meteor_jar"] = "not used: java not found"
            else:
                meta["meteor"] = (
                    f"java METEOR 1.5 ({Path(meteor_jar).name}), re-scoring the "
                    f"pure-Python top {max(ts.JAVA_PRESELECT, top)}"
                )
                shared["jar"] = str(meteor_jar)
                shared["java"] = java
    return text_chunk, shared, chunks


def _records(
    mq: QuestionFile, main_texts: list[str], pool_texts: list[str], pool_ids: list[Any],
    results: Sequence[dict[str, Any]],
) -> Iterator[dict[str, Any]]:  # fmt: skip
    """One BQD record per main question, made as it is written: its basic questions, best
    first, with scores."""
    for i, res in enumerate(results):
        record: dict[str, Any] = {
            "image_id": mq.image_ids[i],
            "question_id": mq.ids[i],
            "question": main_texts[i],
            "basic": [
                {"question": pool_texts[j], "score": s, "pool_id": pool_ids[j]}
                for j, s in zip(
                    np.asarray(res["indices"]).tolist(),
                    np.asarray(res["scores"]).tolist(),
                    strict=True,
                )
            ],
        }
        for key in ("exact", "ranked", "rounds"):
            if key in res:
                record[key] = res[key]
        yield record


def _lasso_meta(results: Sequence[dict[str, Any]], top: int) -> dict[str, Any]:
    """How the LASSO solves went: KKT-exact or not, filled by cosine, rounds, non-zeros."""
    rounds = [r["rounds"] for r in results]
    return {
        "exact": sum(bool(r["exact"]) for r in results),
        "not_exact": sum(not r["exact"] for r in results),
        "filled": sum(r["ranked"] < top for r in results),
        "rounds_mean": float(np.mean(rounds)) if rounds else 0.0,
        "rounds_max": int(max(rounds)) if rounds else 0,
        "nonzero_mean": float(np.mean([r["nonzero"] for r in results])) if results else 0.0,
    }


def build_bqd(
    pool: Sequence[str | Path],
    main: str | Path,
    out: str | Path | None = None,
    *,
    ranker: str = "lasso",
    embedder: str | None = None,
    top: int = DEFAULT_TOP,
    yes_no: bool = False,
    lam: float | None = None,
    backend: str = "local",
    address: str | None = None,
    seed: int = 0,
    progress: bool = True,
    embedder_path: str | Path | None = None,
    max_main: int | None = None,
    dim: int | None = None,
    workers: int | None = None,
    meteor_jar: str | Path | None = None,
) -> dict[str, Any]:
    """Build a General (or, with ``yes_no``, Yes/No) basic-question dataset.

    Returns the ``--json`` dict (the BQD's ``meta`` plus ``out``); writes the
    BQD to ``out`` when given. Records: ``{image_id, question_id, question,
    basic: [{question, score, pool_id}] × top}``, LASSO records also
    ``exact`` (KKT verified over the whole pool), ``ranked`` (entries ranked by
    a positive coefficient) and ``rounds``. ``embedder``, ``dim``, ``lam`` and
    ``embedder_path`` are the LASSO ranker's (None: :data:`LASSO_DEFAULTS`), ``meteor_jar``
    the METEOR ranker's; given to another ranker they are refused.
    """
    from vqadiag.protocols.robustness.basic_questions.backends import run_chunks

    given = {"embedder": embedder, "dim": dim, "lam": lam, "embedder_path": embedder_path,
             "meteor_jar": meteor_jar}  # fmt: skip
    _check_options(ranker, backend, top, given)
    settings = {k: LASSO_DEFAULTS[k] if given[k] is None else given[k] for k in LASSO_DEFAULTS}
    embedder, dim, lam = settings["embedder"], settings["dim"], settings["lam"]
    pool = one_or_many(pool)  # one pool file given alone
    if workers is not None and workers < 1:
        raise DataError("--workers", f"must be at least 1, got {workers}")
    started = time.perf_counter()
    pool_texts, pool_ids, counts = _checked_pool(pool, yes_no, top)
    mq: QuestionFile = read_question_file(main, keep_raw=False)
    n_main = len(mq.ids) if max_main is None else min(max_main, len(mq.ids))
    main_texts = mq.texts[:n_main]
    key_index = {normalize_text(t): j for j, t in enumerate(pool_texts)}
    exclude = [key_index.get(normalize_text(t)) for t in main_texts]
    meta: dict[str, Any] = {
        "ranker": ranker, "top": top, "yes_no": yes_no, "pool_files": [str(p) for p in pool],
        "main_file": str(main), "main_format": mq.format, **counts, "mains": n_main,
        "mains_in_pool": sum(e is not None for e in exclude),
        "dedup": "lower-case, whitespace collapsed", "backend": backend, "seed": seed,
    }  # fmt: skip
    chunk_size = (
        LASSO_CHUNK if ranker == "lasso" else max(8, min(TEXT_CHUNK, TEXT_CELLS // len(pool_texts)))
    )
    slices = _chunks(n_main, chunk_size)
    if ranker == "lasso":
        fn, shared, chunks = _lasso_work(
            pool_texts, main_texts, exclude, slices, meta, embedder=embedder, dim=dim,
            seed=seed, embedder_path=embedder_path, lam=lam, top=top, progress=progress,
        )  # fmt: skip
    else:
        fn, shared, chunks = _text_work(
            pool_texts, main_texts, exclude, slices, meta, ranker=ranker, top=top,
            meteor_jar=meteor_jar,
        )  # fmt: skip
    cache = None
    if out is not None:  # finished chunks survive a kill, keyed by everything they depend on
        from vqadiag.data.io.jsonio import stable_hash
        from vqadiag.protocols.robustness.basic_questions.chunk_cache import ChunkCache

        cache = ChunkCache(out, stable_hash([
            ranker, top, yes_no, seed, lam, embedder, dim, str(meteor_jar), chunk_size,
            pool_texts, pool_ids, main_texts, exclude,
        ]))  # fmt: skip
    results = run_chunks(
        fn, shared, chunks, sizes=[s.stop - s.start for s in slices], backend=backend,
        address=address, num_cpus=workers, progress=progress,
        description=f"ranking ({ranker})", cache=cache,
    )  # fmt: skip
    del fn, shared, chunks  # the pool index: the records are written without it
    if ranker == "lasso":
        meta.update(_lasso_meta(results, top))
    meta["seconds"] = time.perf_counter() - started
    written = len(results)
    if out is not None:
        written = write_bqd(out, _records(mq, main_texts, pool_texts, pool_ids, results), meta)
        if cache is not None:
            cache.clear()
    return {**meta, "out": None if out is None else str(out), "records": written}


def make_noise(
    bqd: str | Path,
    questions: str | Path,
    out: str | Path,
    *,
    partitions: int = 7,
    size: int = 3,
    max_words: int | None = 26,
) -> dict[str, Any]:
    """Write one noisy copy of ``questions`` per partition (docs/protocols.md §4).

    ``OUT/partition_<k>/<questions file name>`` for k = 1..partitions, in the
    input's own format (GQA dict with ``question`` replaced; VQA v2 questions
    file), keeping only main questions that have a BQD record, plus
    ``OUT/manifest.json``. Returns the manifest (the ``--json`` dict).
    """
    from vqadiag.data.formats.bqd import check_same_main, write_question_file
    from vqadiag.data.io.jsonio import write_json
    from vqadiag.errors import record_label
    from vqadiag.protocols.robustness.basic_questions.noise import noise_partitions

    if partitions < 1 or size < 1:
        raise DataError(None, "--partitions and --size must be at least 1")
    if max_words is not None and max_words < 0:
        raise DataError(None, "--max-words must be positive (0 = no limit)")
    records = read_bqd(bqd)
    qf = read_question_file(questions)
    text_of = dict(zip(qf.ids, qf.texts, strict=True))
    for record in records:
        qid = record["question_id"]
        if qid not in text_of:
            raise DataError(bqd, f"question id is not in {Path(questions).name}", record_label(qid))
        check_same_main(bqd, qid, record["question"], text_of[qid], questions)
    short = sum(len(r["basic"]) < partitions * size for r in records)
    parts = noise_partitions(records, partitions=partitions, size=size, max_words=max_words)
    root = Path(out)
    files = []
    truncated = []
    for k, texts in enumerate(parts, start=1):
        path = write_question_file(qf, texts, root / f"partition_{k}" / qf.path.name)
        files.append(str(path))
        full = {
            r["question_id"]: len(r["question"].split())
            + sum(len(b["question"].split()) for b in r["basic"][(k - 1) * size : k * size])
            for r in records
        }
        truncated.append(sum(len(texts[q].split()) < full[q] for q in texts))
    manifest = {
        "bqd": str(bqd),
        "questions": str(questions),
        "format": qf.format,
        "partitions": partitions,
        "size": size,
        "max_words": max_words or None,
        "mains": len(records),
        "short_records": short,
        "dropped_identical": sum(r["dropped_identical"] for r in records),
        "truncated": truncated,
        "files": files,
    }
    write_json(root / "manifest.json", manifest, indent=True)
    return manifest
