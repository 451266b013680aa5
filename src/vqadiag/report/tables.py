"""Diagnosis results as pandas tables (``vqadiag export``, ``vqadiag.per_question_table``).

Two tables, both built from validated result folders
(:func:`vqadiag.report.results.load_result_dirs`, so errors name the file and
the record):

* :func:`per_question_table` — one row per scored unit and model: ``model``,
  ``suite``, ``id``, ``qid``, ``image_id``, ``question``, ``truth``, one
  ``answer_<condition>`` column per condition (``answer_all``,
  ``answer_noise_3`` …) and one float column per per-question value
  (``accuracy``, ``acc_tail``, ``attention_relevant_score`` …; NaN where a
  row does not carry it). ``summary[key].value == 100 × mean`` of that column
  over a model's rows (docs/results-schema.md), so the report card can be
  re-derived or sliced by any column with pandas.
* :func:`summary_table` — the report-card figures, tidy: ``model``,
  ``figure``, ``value``, ``ci_low``, ``ci_high``, ``n`` (``noise_accuracy`` as
  ``noise_accuracy_1`` … ``noise_accuracy_7``), figures in display order (the suite registry).

Texts are those of the report: a complementary pair's two questions (ids,
images, answers) are joined by ``" | "``; a consistency unit's question reads
``"main → sub: sub-question"``.

:func:`write_table` writes either as CSV, JSON Lines or Parquet (by suffix;
Parquet needs ``pyarrow``: ``pip install 'vqadiag[parquet]'``).
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
import pandas as pd

from vqadiag.arguments import one_or_many
from vqadiag.data.io.atomic import write_bytes_atomic
from vqadiag.errors import DataError
from vqadiag.report.results import ResultSet, load_result_dirs

#: The text columns of :func:`per_question_table`, in order, before answers and values.
UNIT_COLUMNS = ("model", "suite", "id", "qid", "image_id", "question", "truth")
SUMMARY_COLUMNS = ("model", "figure", "value", "ci_low", "ci_high", "n")
FORMATS = {".csv": "csv", ".jsonl": "jsonl", ".parquet": "parquet"}


def _sets(results: str | Path | Sequence[str | Path] | Sequence[ResultSet]) -> list[ResultSet]:
    items = one_or_many(results)  # one folder given alone
    if items and all(isinstance(r, ResultSet) for r in items):
        return items  # type: ignore[return-value]
    return load_result_dirs(items)  # type: ignore[arg-type]


def per_question_table(
    results: str | Path | Sequence[str | Path] | Sequence[ResultSet],
) -> pd.DataFrame:
    """Every scored unit of every result folder, one row each (columns in the module doc).

    Rows follow the folders' order, then ``(suite, id)``. ``model`` is the
    report's label (the model name, ``name (2)`` for a repeated name).
    """
    import pandas as pd

    records: list[dict[str, Any]] = []
    answer_cols: dict[str, None] = {}
    value_cols: dict[str, None] = {}
    for rs in _sets(results):
        for suite in sorted(rs.rows):
            for unit_id in sorted(rs.rows[suite]):
                row = rs.rows[suite][unit_id]
                rec: dict[str, Any] = {
                    "model": rs.label,
                    "suite": row.suite,
                    "id": row.id,
                    "qid": row.qid,
                    "image_id": row.image_id,
                    "question": row.question,
                    "truth": row.truth,
                }
                for cond, answer in row.answers.items():
                    col = f"answer_{cond}"
                    answer_cols[col] = None
                    rec[col] = answer
                for key, value in row.values.items():
                    col = f"value_{key}" if key in UNIT_COLUMNS else key
                    value_cols[col] = None
                    rec[col] = value
                records.append(rec)
    columns = [*UNIT_COLUMNS, *sorted(answer_cols), *sorted(value_cols)]
    frame = pd.DataFrame.from_records(records, columns=columns)
    for col in value_cols:
        frame[col] = frame[col].astype("float64")
    return frame


def summary_table(
    results: str | Path | Sequence[str | Path] | Sequence[ResultSet],
) -> pd.DataFrame:
    """Every summary figure of every result folder (Estimates; absent figures left out)."""
    import pandas as pd

    from vqadiag.suites.base import figures

    order = {f.key: i for i, (_, f) in enumerate(figures())}
    many = {f.key for _, f in figures() if f.many}
    records = []
    for rs in _sets(results):
        keys = sorted(rs.summary, key=lambda k: order.get(k, len(order)))
        for key in keys:
            est = rs.summary[key]
            items = (
                [(f"{key}_{k}", e) for k, e in enumerate(est or [], start=1)]
                if key in many
                else [(key, est)]
            )
            for figure, e in items:
                if e is None:
                    continue
                records.append(
                    {"model": rs.label, "figure": figure}
                    | {k: e.get(k) for k in ("value", "ci_low", "ci_high", "n")}
                )
    frame = pd.DataFrame.from_records(records, columns=list(SUMMARY_COLUMNS))
    for col in ("value", "ci_low", "ci_high"):
        frame[col] = frame[col].astype("float64")
    frame["n"] = frame["n"].astype("Int64")
    return frame


def table_format(path: str | Path) -> str:
    """``csv``, ``jsonl`` or ``parquet`` from the file suffix; DataError otherwise."""
    suffix = Path(path).suffix.lower()
    if suffix not in FORMATS:
        raise DataError(
            path, f"unknown table format {suffix or '(no suffix)'!r}; use {', '.join(FORMATS)}"
        )
    return FORMATS[suffix]


def write_table(frame: pd.DataFrame, path: str | Path) -> str:
    """Write ``frame`` as CSV, JSON Lines or Parquet (by suffix), atomically; returns the
    format."""
    fmt = table_format(path)
    out = Path(path)
    buf = io.BytesIO()
    if fmt == "csv":
        frame.to_csv(buf, index=False)
    elif fmt == "jsonl":
        # orjson writes each float's shortest exact form (pandas' to_json rounds to at
        # most 15 decimals, 10 by default); NaN is null, as pandas writes it
        for record in frame.to_dict(orient="records"):
            buf.write(orjson.dumps(record, option=orjson.OPT_SERIALIZE_NUMPY) + b"\n")
    else:
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise DataError(
                out, "writing Parquet needs pyarrow: pip install 'vqadiag[parquet]'"
            ) from None
        frame.to_parquet(buf, index=False)
    write_bytes_atomic(out, buf.getvalue())
    return fmt
