"""VQA v2-format data for models: the same interface as :class:`GQAData`, over VQA v2 files.

A VQA v2 folder holds the official question and annotation files (a synthetic world
has them under ``DIR/vqa2/``)::

    DIR/vqa2/v2_OpenEnded_mscoco_{split}2014_questions.json
    DIR/vqa2/v2_mscoco_{split}2014_annotations.json      (optional at prediction time)

Objects come from a GQA-layout detections folder (``DIR/gqa/objects`` by default,
or ``detections=``). Detector files are keyed by their own image ids; a VQA image id
is translated with ``image_map`` (``{vqa_image_id: feature_image_id}``), which for a
synthetic world is read from ``world.json`` (``image_ids.vqa_to_gqa``). Real COCO
features keyed by COCO ids need no map.

Each question becomes a GQA-like record, so every model trains and predicts on it
unchanged: ``question``, ``imageId`` (the feature image id), ``answer`` (the
annotation's ``multiple_choice_answer``), plus the VQA fields ``image_id`` (the VQA
id), ``answers`` (the 10 annotator answers), ``question_type`` and ``answer_type``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from vqadiag.data.formats.vqa2 import check_questions, read_vqa_annotations, read_vqa_questions
from vqadiag.data.io.jsonio import read_json
from vqadiag.data.model_inputs.gqa_data import DEFAULT_CACHE_BYTES, GQAData
from vqadiag.errors import DataError, record_label

SPLIT_NAMES = {"train": "train2014", "val": "val2014", "test": "test2015"}


def _vqa_dir(data_dir: Path) -> Path:
    nested = data_dir / "vqa2"
    return nested if nested.is_dir() else data_dir


def _world_image_map(root: Path) -> dict[str, str] | None:
    """``{vqa_image_id: gqa_image_id}`` of a synthetic world, None elsewhere."""
    path = root / "world.json"
    if not path.is_file():
        return None
    world = read_json(path)
    mapping = world.get("image_ids", {}).get("vqa_to_gqa") if isinstance(world, dict) else None
    if not isinstance(mapping, Mapping):
        return None
    return {str(k): str(v) for k, v in mapping.items()}


class VQA2Data(GQAData):
    """VQA v2 questions (and annotations when present) answered from detector objects."""

    dataset = "vqa2"

    def __init__(
        self,
        data_dir: str | Path,
        *,
        detections: str | Path | None = None,
        image_map: Mapping[str, str] | None = None,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
        images: str | Path | None = None,
    ) -> None:
        self.vqa_dir = _vqa_dir(Path(data_dir))
        super().__init__(data_dir, detections=detections, cache_bytes=cache_bytes, images=images)
        self.image_map = dict(image_map) if image_map is not None else _world_image_map(self.root)

    def image_roots(self) -> list[Path]:
        """The VQA folder (COCO ``{split}2014/`` images) and the GQA ones (the world's)."""
        return [self.vqa_dir, *super().image_roots()]

    def _file(self, split: str, kind: str) -> Path:
        name = SPLIT_NAMES.get(split, split)
        if kind == "questions":
            return self.vqa_dir / f"v2_OpenEnded_mscoco_{name}_questions.json"
        return self.vqa_dir / f"v2_mscoco_{name}_annotations.json"

    def questions_path(self, split: str) -> Path:
        """The official questions file of ``split`` (``train``, ``val`` or a full name);
        a DataError naming that file when it is missing."""
        path = self._file(split, "questions")
        if not path.is_file():
            raise DataError(path, f"no VQA v2 question file for split {split!r}")
        return path

    def annotations_path(self, split: str) -> Path | None:
        """The annotations file of ``split``, None when it is absent."""
        path = self._file(split, "annotations")
        return path if path.is_file() else None

    def feature_image_id(self, vqa_image_id: str, path: Path, qid: str) -> str:
        """The detector image id of a VQA image id (through ``image_map`` when set)."""
        if self.image_map is None:
            return vqa_image_id
        mapped = self.image_map.get(vqa_image_id)
        if mapped is None:
            raise DataError(
                path, f"image {vqa_image_id} is not in the image map", record_label(qid)
            )
        return mapped

    def questions(self, split: str) -> dict[str, dict[str, Any]]:
        """``{qid: GQA-like record}`` of ``split`` (read once; see the module docstring)."""
        if split in self._questions:
            return self._questions[split]
        path = self.questions_path(split)
        raw = read_vqa_questions(path)
        ann_path = self.annotations_path(split)
        annotations = read_vqa_annotations(ann_path, slim=True) if ann_path is not None else {}
        if ann_path is not None:  # each annotation a question of the file, on its image
            check_questions(raw, annotations, ann_path)
        out: dict[str, dict[str, Any]] = {}
        for qid, record in raw.items():
            ann = annotations.get(qid)
            if annotations and ann is None:
                raise DataError(ann_path, "question has no annotation", record_label(qid))
            row = record  # read for this call alone: completed in place, not copied
            row["imageId"] = self.feature_image_id(record["image_id"], path, qid)
            if ann is not None:
                row["answer"] = ann.get("multiple_choice_answer", ann["answer_list"][0])
                row["answers"] = ann["answer_list"]
                row["question_type"] = ann.get("question_type")
                row["answer_type"] = ann.get("answer_type")
            out[qid] = row
        self._questions[split] = out
        return out

    def scene_graphs(self, split: str) -> Any:
        """VQA v2 has no scene graphs."""
        raise DataError(self.vqa_dir, "VQA v2 data has no scene graphs")

    def describe(self) -> dict[str, Any]:
        """Where the data came from (for run configs and fingerprints)."""
        return {"root": str(self.root), "vqa_dir": str(self.vqa_dir), "dataset": self.dataset}


def main_question_image(data: Any, split: str, main_id: str, image_id: int | str) -> str:
    """The feature image id of a VQA-introspect main question ``main_id`` of ``split``
    (VQA image ``image_id``): its VQA v2 record's ``imageId`` where ``data`` has the
    question, else ``image_id`` through ``data.feature_image_id`` (an image missing from
    the map is refused naming the questions file and the question)."""
    record = data.questions(split).get(main_id)
    if record is not None:
        return str(record["imageId"])
    return str(data.feature_image_id(str(image_id), data.questions_path(split), main_id))
