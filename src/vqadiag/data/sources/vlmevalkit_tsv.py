"""A VLMEvalKit benchmark TSV as GQA-format questions (docs/data-sources.md, "VLMEvalKit").

VLMEvalKit keeps one tab-separated file per benchmark (``GQA_TestDev_Balanced.tsv``),
written by pandas, with the columns ``index``, ``image``, ``question``, ``answer`` and
optional others; a TSV without gold answers (a test split) is refused, as there is
nothing to score. An ``image`` cell is the image file base64-encoded, or, when it is at
most :data:`REFERENCE_CHARS` characters, the ``index`` of the row that holds the same
image (as VLMEvalKit itself resolves it).

Each row becomes the GQA-format record ``{question, answer, imageId, …}`` of question
``question_id`` (or ``qid``) when the TSV has that column, else of its ``index``. The
image id is the ``image_id`` (or ``imageId``) column when there is one, else the
``index`` of the row that holds the image's bytes; other columns are kept as record
fields. The split is the one the file name names (``…TestDev…`` is ``testdev``,
``…Val…`` ``val``, ``…Train…`` ``train``), else the diagnosed one; a name with
``all`` holds all questions, any other the balanced ones.

Images stay base64 in the file: :mod:`vqadiag.data.sources.embedded_images` decodes
one when a model needs it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vqadiag.errors import DataError, excerpt, first_line

#: VLMEvalKit: an image cell this short names another row's ``index``
REFERENCE_CHARS = 64
REQUIRED = ("index", "image", "question", "answer")
ID_COLUMNS = ("question_id", "qid")
IMAGE_ID_COLUMNS = ("image_id", "imageId")
_NOT_FIELDS = {"index", "image", "image_path", *ID_COLUMNS, *IMAGE_ID_COLUMNS}
_SPLIT_WORDS = {"testdev": "testdev", "val": "val", "validation": "val", "train": "train"}


@dataclass
class TSVQuestions:
    """The questions of a TSV and the row holding each image's bytes."""

    split: str
    file_name: str
    records: dict[str, dict[str, Any]]
    image_rows: dict[str, int]


def read_frame(path: Path, columns: list[str] | None = None) -> Any:
    """The TSV as a pandas frame of strings (``columns`` only, when given); a file pandas
    cannot parse, or an empty one, is one :class:`DataError` naming it."""
    import pandas as pd

    try:
        return pd.read_csv(
            path, sep="\t", dtype=str, keep_default_na=False, na_filter=False, usecols=columns
        )
    except pd.errors.EmptyDataError:
        raise DataError(path, "is empty: a VLMEvalKit TSV has a header and rows") from None
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as err:
        raise DataError(path, f"is not a readable TSV: {first_line(err)}") from None
    except OSError as err:
        raise DataError(path, f"cannot read: {err.strerror or err}") from None


def split_of(path: Path, requested: str) -> tuple[str, str]:
    """(split, GQA question file name) that the TSV's file name gives (module docstring)."""
    words = [w for w in re.split(r"[^a-z0-9]+", path.stem.lower()) if w]
    split = next((_SPLIT_WORDS[w] for w in words if w in _SPLIT_WORDS), requested)
    scope = "all" if "all" in words else "balanced"
    return split, f"{split}_{scope}_questions.json"


def read_tsv_questions(path: Path, requested_split: str) -> TSVQuestions:
    """The TSV's GQA-format questions (module docstring); a missing column, a duplicate
    id, an empty question or a dangling image reference names the file and the row."""
    frame = read_frame(path)
    missing = [c for c in REQUIRED if c not in frame.columns]
    if missing == ["answer"]:
        raise DataError(
            path, "has no 'answer' column: vqadiag scores against the gold answers, which a "
            "test split's TSV does not give",
        )  # fmt: skip
    if missing:
        raise DataError(path, f"has no column {missing[0]!r} (VLMEvalKit TSVs have {REQUIRED})")
    if frame.empty:
        raise DataError(path, "has a header but no rows")
    id_column = next((c for c in ID_COLUMNS if c in frame.columns), "index")
    image_column = next((c for c in IMAGE_ID_COLUMNS if c in frame.columns), None)
    fields = [c for c in frame.columns if c not in _NOT_FIELDS]
    position = {str(v): i for i, v in enumerate(frame["index"])}
    cells = frame["image"].tolist()
    split, file_name = split_of(path, requested_split)
    records: dict[str, dict[str, Any]] = {}
    image_rows: dict[str, int] = {}
    for row, values in enumerate(frame.itertuples(index=False)):
        line = dict(zip(frame.columns, values, strict=True))
        label = f"row {row} (index {excerpt(line['index'], 40)})"
        qid = line[id_column]
        if not qid or qid in records:
            problem = "empty" if not qid else "repeated"
            raise DataError(path, f"{problem} question id in column {id_column!r}", label)
        if not line["question"].strip():
            raise DataError(path, "empty question", label)
        if not line["answer"].strip():
            raise DataError(path, "empty gold answer", label)
        holder = _holder(cells, row, position, path, label)
        image_id = (line[image_column] if image_column else "") or str(frame["index"][holder])
        record = {k: line[k] for k in fields if line[k] != ""}
        record["imageId"] = image_id
        records[qid] = record
        image_rows.setdefault(image_id, holder)
    return TSVQuestions(split, file_name, records, image_rows)


def _holder(cells: list[str], row: int, position: dict[str, int], path: Path, label: str) -> int:
    """The row whose ``image`` cell holds the bytes of ``row``'s image."""
    cell = cells[row]
    if len(cell) > REFERENCE_CHARS:
        return row
    target = position.get(cell)
    if not cell or target is None or len(cells[target]) <= REFERENCE_CHARS:
        raise DataError(
            path, f"image cell {excerpt(cell, 40)} is neither base64 nor the index of a row "
            "holding an image", label,
        )  # fmt: skip
    return target
