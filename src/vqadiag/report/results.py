"""Reading the result folders of ``vqadiag diagnose`` (docs/results-schema.md, schema 1).

A folder holds ``results.json`` (kind ``vqadiag.results``, ``schema_version``
1) and the per-question table it names (``per_question.jsonl``). Everything is
validated here, at the edge; the report only sees :class:`ResultSet` objects.
Unknown keys are ignored (the schema allows additions).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vqadiag.arguments import one_or_many
from vqadiag.data.io.atomic import file_digest
from vqadiag.data.io.jsonio import iter_jsonl, read_json
from vqadiag.errors import DataError, record_label
from vqadiag.suites.declared import register_declared

RESULTS_KIND = "vqadiag.results"
RESULTS_SCHEMA_VERSION = 1


def summary_suites() -> dict[str, str]:
    """Summary keys with one estimate each, in display order, and the suite whose rows
    carry their per-unit values (the figures of the suite registry, docs/results-schema.md)."""
    from vqadiag.suites.base import figures

    return {f.key: suite.name for suite, f in figures() if not f.many}


@dataclass(frozen=True)
class Row:
    """One scored unit of ``per_question.jsonl``."""

    suite: str
    id: str
    values: dict[str, float | None]
    answers: dict[str, str | None]
    question: str | None = None
    image_id: str | None = None
    truth: str | None = None
    qid: str | None = None
    relevant: tuple[int, ...] | None = None
    irrelevant: tuple[int, ...] | None = None
    #: a generative model's text before it became each answer (None: not generative)
    raw: dict[str, str | None] | None = None


def _indices(record: Mapping[str, Any], key: str) -> tuple[int, ...] | None:
    """An optional list of box indices (FPVG rows' ``relevant`` / ``irrelevant``)."""
    value = record.get(key)
    if not isinstance(value, list) or not all(
        isinstance(i, int) and not isinstance(i, bool) for i in value
    ):
        return None
    return tuple(value)


@dataclass
class ResultSet:
    """One model's diagnosis: the parsed ``results.json`` and its per-question rows."""

    path: Path
    results: dict[str, Any]
    rows: dict[str, dict[str, Row]] = field(default_factory=dict)  # suite -> id -> row
    label: str = ""

    @property
    def name(self) -> str:
        """The model's name from ``results.json``."""
        return str(self.results["model"]["name"])

    @property
    def data_fingerprint(self) -> str | None:
        """``fingerprints.data`` (or ``data.fingerprint``); None when absent."""
        fp = (self.results.get("fingerprints") or {}).get("data")
        if fp is None:
            fp = (self.results.get("data") or {}).get("fingerprint")
        return None if fp is None else str(fp)

    @property
    def summary(self) -> dict[str, Any]:
        """The flat ``summary`` of Estimates (``None`` for suites that did not run)."""
        return self.results.get("summary") or {}

    @property
    def suites(self) -> dict[str, Any]:
        """The per-suite result dicts."""
        return self.results.get("suites") or {}

    @property
    def data_root(self) -> Path | None:
        """The data folder the model was diagnosed on (``data.root``; relative paths are
        read from the result folder's parent's working directory as written)."""
        root = (self.results.get("data") or {}).get("root")
        return None if not isinstance(root, str) else Path(root)

    @property
    def images_dir(self) -> Path | None:
        """``config.images`` when the run was given one."""
        images = (self.results.get("config") or {}).get("images")
        return None if not isinstance(images, str) else Path(images)

    @property
    def skipped(self) -> dict[str, str]:
        """``{suite: reason}`` for suites that could not run."""
        return {str(k): str(v) for k, v in (self.results.get("skipped") or {}).items()}


def _check_estimate(value: Any, path: Path, label: str) -> dict[str, Any] | None:
    """An Estimate object ``{value, ci_low, ci_high, n}`` (numbers or null) or None."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise DataError(path, f"expected an estimate object or null, got {value!r}", label)
    out: dict[str, Any] = {}
    for key in ("value", "ci_low", "ci_high"):
        if key not in value:
            raise DataError(path, f"missing field {key!r}", label)
        v = value[key]
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
            raise DataError(path, f"{key} must be a number or null, got {v!r}", label)
        if v is not None and not math.isfinite(float(v)):
            raise DataError(path, f"{key} is {v!r}, expected a finite number or null", label)
        out[key] = None if v is None else float(v)
    n = value.get("n")
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise DataError(path, f"n must be a non-negative integer, got {n!r}", label)
    out["n"] = n
    return out


def _check_results(raw: Any, path: Path) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise DataError(path, f"expected a JSON object, got {type(raw).__name__}")
    if raw.get("kind") != RESULTS_KIND:
        raise DataError(
            path,
            f"not a vqadiag results file: kind is {raw.get('kind')!r}, expected {RESULTS_KIND!r}",
        )
    version = raw.get("schema_version")
    if version != RESULTS_SCHEMA_VERSION:
        raise DataError(
            path,
            f"unsupported schema_version {version!r} (this vqadiag reads {RESULTS_SCHEMA_VERSION})",
        )
    model = raw.get("model")
    if not isinstance(model, Mapping) or not isinstance(model.get("name"), str):
        raise DataError(path, "missing field 'model.name'")
    if not model["name"].strip():
        raise DataError(path, "'model.name' is empty")
    if model.get("capabilities") is not None and not isinstance(model["capabilities"], Mapping):
        raise DataError(path, "'model.capabilities' must be an object", "model.capabilities")
    for key in ("summary", "suites", "skipped"):
        if raw.get(key) is not None and not isinstance(raw[key], Mapping):
            raise DataError(path, f"{key!r} must be an object", key)
    summary = dict(raw.get("summary") or {})
    for key, value in summary.items():
        if key == "noise_accuracy":
            if value is None:
                continue
            if not isinstance(value, list):
                raise DataError(path, "expected a list of estimates", "summary.noise_accuracy")
            summary[key] = [
                _check_estimate(v, path, f"summary.noise_accuracy[{i}]")
                for i, v in enumerate(value)
            ]
        else:
            summary[key] = _check_estimate(value, path, f"summary.{key}")
    out = dict(raw)
    out["summary"] = summary
    return out


def _text(record: Mapping[str, Any], key: str, path: Path, label: str) -> str | None:
    """A text field: a string (or integer id), or a list of them (a pair's two
    questions / images / answers) shown joined by ``" | "``."""
    value = record.get(key)
    if value is None:
        return None
    items = value if isinstance(value, list) else [value]
    if items and all(isinstance(v, (str, int)) and not isinstance(v, bool) for v in items):
        return " | ".join(str(v) for v in items)
    raise DataError(path, f"{key} must be a string or a list of strings, got {value!r}", label)


def _check_row(record: Any, path: Path, lineno: int) -> Row:
    where = f"line {lineno}"
    if not isinstance(record, Mapping):
        raise DataError(path, f"expected an object, got {type(record).__name__}", where)
    for key in ("suite", "id"):
        if key not in record:
            raise DataError(path, f"missing field {key!r}", where)
        if not isinstance(record[key], str) or not record[key]:
            raise DataError(path, f"{key} must be a non-empty string", where)
    label = f"{where}: {record_label(record['id'])}"
    values = record.get("values", {})
    if not isinstance(values, Mapping):
        raise DataError(path, "values must be an object", label)
    clean: dict[str, float | None] = {}
    for key, v in values.items():
        if v is None:
            clean[key] = None
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise DataError(path, f"value {key!r} must be a finite number, got {v!r}", label)
        clean[key] = float(v)
    ans = _answer_map(record, "answers", path, label) or {}
    raw = _answer_map(record, "raw", path, label)
    question = _text(record, "question", path, label)
    truth = _text(record, "truth", path, label)
    sub_question = _text(record, "sub_question", path, label)
    if sub_question is not None:  # a consistency unit: main question → sub-question
        question = f"{question or ''} → sub: {sub_question}"
        truth = f"{truth or ''} | sub: {_text(record, 'sub_truth', path, label) or ''}"
    return Row(
        suite=record["suite"],
        id=record["id"],
        values=clean,
        answers=ans,
        question=question,
        image_id=_text(record, "image_id", path, label),
        truth=truth,
        qid=_text(record, "qid", path, label),
        relevant=_indices(record, "relevant"),
        irrelevant=_indices(record, "irrelevant"),
        raw=raw,
    )


def _answer_map(
    record: Mapping[str, Any], key: str, path: Path, label: str
) -> dict[str, str | None] | None:
    """``record[key]`` (``answers`` or ``raw``): an object of strings or nulls; None when
    absent."""
    answers = record.get(key)
    if answers is None:
        return None
    if not isinstance(answers, Mapping):
        raise DataError(path, f"{key} must be an object", label)
    out: dict[str, str | None] = {}
    for name, a in answers.items():
        if a is not None and not isinstance(a, str):
            what = "answer" if key == "answers" else key
            raise DataError(path, f"{what} {name!r} must be a string or null, got {a!r}", label)
        out[str(name)] = a
    return out


def _check_committed(results: Mapping[str, Any], path: Path, table: Path) -> None:
    """The per-question table must be the one ``results.json`` recorded (its row count and
    sha256, written by diagnose since results record them); a torn or replaced table is
    an error, never a silently shorter one."""
    rows, digest = results.get("per_question_rows"), results.get("per_question_sha256")
    if rows is None and digest is None:
        return  # results written before the digest was recorded
    if not table.is_file():
        raise DataError(table, "per-question table missing (results.json records one)")
    if digest != file_digest(table):
        raise DataError(
            table,
            f"does not match results.json (which records {rows} rows and its sha256): "
            "the diagnosis was interrupted or the file changed; run diagnose again",
        )


def load_result_dir(folder: str | Path) -> ResultSet:
    """Read and validate one result folder (``results.json`` + its per-question table).

    Errors (:class:`DataError`) name the file and the record: a missing folder or
    file, another ``kind`` or ``schema_version``, malformed estimates, rows without
    ``suite`` / ``id``, non-finite values, duplicate ``(suite, id)`` units.
    """
    root = Path(folder)
    if not root.is_dir():
        raise DataError(root, "result folder not found" if not root.exists() else "not a folder")
    path = root / "results.json"
    results = _check_results(read_json(path), path)
    register_declared(results, path)  # a plug-in's suites, shown as its results declare them
    name = results.get("per_question") or "per_question.jsonl"
    if not isinstance(name, str) or Path(name).name != name or name in (".", ".."):
        raise DataError(path, "per_question must be a file name in the folder", "per_question")
    table = root / name
    _check_committed(results, path, table)
    rows: dict[str, dict[str, Row]] = {}
    if table.exists() and table.stat().st_size == 0:
        return ResultSet(root, results, rows)  # nothing was scored (every suite skipped)
    for lineno, record in iter_jsonl(table):
        row = _check_row(record, table, lineno)
        suite = rows.setdefault(row.suite, {})
        if row.id in suite:
            raise DataError(
                table,
                f"duplicate unit in suite {row.suite!r}",
                f"line {lineno}: {record_label(row.id)}",
            )
        suite[row.id] = row
    return ResultSet(root, results, rows)


def estimate_value(est: Mapping[str, Any] | None) -> float | None:
    """The finite ``value`` of a summary estimate ``{value, ci_low, ci_high, n}``, or None
    (missing estimate, missing or NaN value)."""
    value = None if not est else est.get("value")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        return None
    return float(value)


def _refuse_copies(sets: list[ResultSet], folders: list[str | Path]) -> None:
    """One :class:`DataError` for two folders holding the same diagnosis (a copy: the
    same model fingerprint and the same per-question table, by its recorded sha256),
    which a report would compare with itself and count twice in its Holm family."""
    seen: dict[tuple[Any, Any], str | Path] = {}
    for rs, folder in zip(sets, folders, strict=True):
        digest = rs.results.get("per_question_sha256")
        if not isinstance(digest, str):
            continue
        key = (rs.results.get("fingerprints", {}).get("model"), digest)
        if key in seen:
            raise DataError(
                Path(folder), f"holds the same diagnosis as {seen[key]} (the same model and "
                "per-question table: a copy?): each model once in a report",
            )  # fmt: skip
        seen[key] = folder


def load_result_dirs(folders: str | Path | Sequence[str | Path]) -> list[ResultSet]:
    """Load every folder (one folder may be given alone, not in a list) and give each a
    unique label (the model name, ``name (2)`` …)."""
    folders = one_or_many(folders)
    if not folders:
        raise DataError(None, "no result folder given")
    seen: dict[Path, str | Path] = {}
    for folder in folders:
        key = Path(folder).resolve()
        if key in seen:
            raise DataError(
                Path(folder), f"given twice (also as {seen[key]}): each model once in a report"
            )
        seen[key] = folder
    sets = [load_result_dir(f) for f in folders]
    _refuse_copies(sets, folders)
    taken: set[str] = set()
    for rs in sets:
        label, count = rs.name, 1
        while label in taken:  # models named "m", "m" and "m (2)" stay three labels
            count += 1
            label = f"{rs.name} ({count})"
        taken.add(label)
        rs.label = label
    return sets
