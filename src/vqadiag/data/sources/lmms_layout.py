"""The tables of a Hugging Face copy as GQA and VQA v2 data (docs/data-sources.md).

Which data a table holds is read from its columns, as lmms-eval's datasets lay them
out (``lmms-lab/GQA``, since 2026 ``lmms-lab-encoder/GQA``; ``lmms-lab/VQAv2``):

* **GQA questions** (``*_instructions`` configs): ``id``, ``imageId``, ``question``,
  ``answer`` and the other fields of the official question records (``fullAnswer``,
  ``isBalanced``, ``groups``, ``types``, ``semantic``, …). Each row is the official
  record of question ``id``, every column but ``id`` kept as it is (the
  ``annotations`` maps without Arrow's null entries, :func:`_token_maps`). A config
  named ``*_all_*`` holds all questions, any other the balanced ones.
* **GQA images** (``*_images`` configs): ``id`` and ``image``.
* **VQA v2**: ``question_id``, ``question``, ``image_id``, ``image`` and, where the
  split has them, the annotations ``answers`` (ten ``{answer, answer_confidence,
  answer_id}``), ``multiple_choice_answer``, ``question_type``, ``answer_type``. Split
  ``validation`` is VQA v2's ``val2014``, ``train`` its ``train2014``.

An image cell is the ``datasets`` ``Image`` struct ``{bytes, path}`` or plain bytes;
:mod:`vqadiag.data.sources.embedded_images` reads it when a model needs it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from vqadiag.data.sources.hf_copies import TablePath
from vqadiag.data.sources.tables import TableFile
from vqadiag.errors import DataError, record_label

GQA_QUESTION_COLUMNS = frozenset({"id", "imageId", "question", "answer"})
GQA_IMAGE_COLUMNS = frozenset({"id", "image"})
VQA_COLUMNS = frozenset({"question_id", "question", "image_id"})
VQA_ANNOTATION_FIELDS = ("question_type", "answer_type", "multiple_choice_answer", "answers")
#: Hugging Face split names → the official files' split names
VQA_SPLITS = {"validation": "val", "val": "val", "train": "train", "test": "test"}
GQA_SPLITS = {"validation": "val"}


def table_kind(columns: Iterable[str]) -> str | None:
    """``gqa-questions``, ``gqa-images``, ``vqa2`` or None (a table vqadiag does not read)."""
    names = set(columns)
    if names >= GQA_QUESTION_COLUMNS:
        return "gqa-questions"
    if names >= VQA_COLUMNS:
        return "vqa2"
    if names >= GQA_IMAGE_COLUMNS and "question" not in names:
        return "gqa-images"
    return None


@dataclass
class ImageRows:
    """Where each image of one dataset is: ``{image_id: (table number, row)}``."""

    tables: list[TablePath] = field(default_factory=list)
    rows: dict[str, tuple[int, int]] = field(default_factory=dict)

    def add_table(self, table: TablePath) -> int:
        self.tables.append(table)
        return len(self.tables) - 1


@dataclass
class CopyData:
    """The official files a copy amounts to: GQA question files by name, VQA v2
    question and annotation objects by split, and where each dataset's images are."""

    gqa_files: dict[str, dict[str, Any]] = field(default_factory=dict)
    vqa_questions: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    vqa_annotations: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    images: dict[str, ImageRows] = field(default_factory=dict)

    def image_rows(self, dataset: str) -> ImageRows:
        return self.images.setdefault(dataset, ImageRows())


def read_copy(tables: Iterable[TablePath]) -> CopyData:
    """Read every table vqadiag knows (module docstring) into :class:`CopyData`; the
    image columns stay in their files."""
    out = CopyData()
    for table in tables:
        file = TableFile(table.path)
        kind = table_kind(file.columns)
        if kind == "gqa-questions":
            _gqa_questions(out, table, file)
        elif kind == "gqa-images":
            _image_column(out.image_rows("gqa"), table, file, "id")
        elif kind == "vqa2":
            _vqa(out, table, file)
    return out


def gqa_file_name(split: str, config: str) -> str:
    """The official question file name of a GQA config's split."""
    split = GQA_SPLITS.get(split, split)
    scope = "all" if "_all_" in f"_{config}_" else "balanced"
    return f"{split}_{scope}_questions.json"


def _gqa_questions(out: CopyData, table: TablePath, file: TableFile) -> None:
    records = out.gqa_files.setdefault(gqa_file_name(table.split, table.config), {})
    columns = [c for c in file.columns if c != "image"]
    images = out.image_rows("gqa")
    number = images.add_table(table) if "image" in file.columns else None
    for row_number, row in enumerate(file.rows(columns)):
        qid = _id(row.get("id"), table, row_number, "id")
        if qid in records:
            raise DataError(table.path, "question id appears twice in the copy", record_label(qid))
        del row["id"]
        _require_text(row, ("question", "answer"), table, qid)
        row["imageId"] = _id(row.get("imageId"), table, row_number, "imageId")
        if isinstance(row.get("annotations"), dict):
            row["annotations"] = _token_maps(row["annotations"])
        records[qid] = row
        if number is not None:  # a copy that embeds each question's image
            images.rows.setdefault(row["imageId"], (number, row_number))


def _vqa(out: CopyData, table: TablePath, file: TableFile) -> None:
    split = VQA_SPLITS.get(table.split, table.split)
    questions = out.vqa_questions.setdefault(split, [])
    annotations = out.vqa_annotations.setdefault(split, [])
    wanted = [c for c in file.columns if c in VQA_COLUMNS or c in VQA_ANNOTATION_FIELDS]
    images = out.image_rows("vqa2")
    number = images.add_table(table) if "image" in file.columns else None
    for row_number, row in enumerate(file.rows(wanted)):
        label = f"row {row_number}"
        qid = _int(row.get("question_id"), table, label, "question_id")
        image_id = _int(row.get("image_id"), table, record_label(str(qid)), "image_id")
        _require_text(row, ("question",), table, str(qid))
        questions.append({"image_id": image_id, "question": row["question"], "question_id": qid})
        if row.get("answers") is not None:
            _check_annotation(row, table, str(qid))
            annotations.append(
                {"question_id": qid, "image_id": image_id}
                | {k: row[k] for k in VQA_ANNOTATION_FIELDS if row.get(k) is not None}
            )
        if number is not None:
            images.rows.setdefault(str(image_id), (number, row_number))


def _token_maps(annotations: Mapping[str, Any]) -> dict[str, Any]:
    """GQA's ``annotations`` maps (token index → object id) with the null entries dropped:
    Arrow stores each map as a struct of every index any question uses, null where the
    question has none, so dropping them gives the official maps back."""
    return {
        part: {k: v for k, v in value.items() if v is not None}
        if isinstance(value, dict)
        else value
        for part, value in annotations.items()
    }


def _image_column(images: ImageRows, table: TablePath, file: TableFile, id_column: str) -> None:
    number = images.add_table(table)
    for row_number, row in enumerate(file.rows([id_column])):
        image_id = _id(row.get(id_column), table, row_number, id_column)
        images.rows.setdefault(image_id, (number, row_number))


def _id(value: Any, table: TablePath, row_number: int, column: str) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int)) or value == "":
        raise DataError(table.path, f"missing or invalid {column!r}", f"row {row_number}")
    return str(value)


def _int(value: Any, table: TablePath, label: str, column: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, str) and value.isdigit():
            return int(value)
        raise DataError(table.path, f"missing or invalid {column!r}", label)
    return value


def _require_text(row: Mapping[str, Any], names: tuple[str, ...], table: TablePath, qid: str):
    for name in names:
        if not isinstance(row.get(name), str):
            raise DataError(table.path, f"missing or invalid field {name!r}", record_label(qid))


def _check_annotation(row: Mapping[str, Any], table: TablePath, qid: str) -> None:
    """An annotated row: ten-ish ``{answer: str}`` items and string types."""
    answers = row["answers"]
    if not isinstance(answers, list) or not answers:
        raise DataError(table.path, "'answers' must be a non-empty list", record_label(qid))
    for k, item in enumerate(answers):
        if not isinstance(item, Mapping) or not isinstance(item.get("answer"), str):
            raise DataError(table.path, f"answer {k} has no string 'answer'", record_label(qid))
    _require_text(row, ("question_type", "answer_type"), table, qid)
