"""The data sources the built-in suites share: the GQA questions and the VQA v2 data of
the split, their probe contexts, the plain run, and the per-unit row layout.

The GQA questions are the balanced questions of the split (``--max-questions``:
a fixed pseudo-random subset), written to ``RESULT_DIR/inputs/gqa_questions.json``
for the scorers; VQA v2 questions become GQA-like records through
:class:`~vqadiag.data.model_inputs.vqa2_data.VQA2Data` (feature image ids via the world's
image map).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vqadiag.data.formats.gqa import is_balanced
from vqadiag.data.io.jsonio import write_json
from vqadiag.errors import DataError, SuiteSkipped, record_label
from vqadiag.probes.conditions import Condition, Probe, donor_map
from vqadiag.probes.runner import ConditionRun, ProbeContext
from vqadiag.suites.state import DiagnoseState, subsample


@dataclass
class GQASource:
    """The diagnosed GQA questions: data, ids, records and the subset file."""

    data: Any
    qids: list[str]
    records: dict[str, Mapping[str, Any]]
    questions_file: Path
    ctx: ProbeContext
    #: the questions ``max_questions`` took, before those without their image were left
    #: out (``--allow-missing-images``)
    taken: list[str] = field(default_factory=list)

    def prefix(self, n: int | None) -> list[str]:
        """The diagnosed questions among the first ``n`` of the fixed order: what a
        diagnosis with ``--max-questions n`` takes (a suite's own prefix)."""
        if n is None or n >= len(self.taken):
            return self.qids
        chosen = set(subsample(self.taken, n))
        return [q for q in self.qids if q in chosen]

    def prefix_file(self, prefix: list[str], path: Path) -> Path:
        """The questions file of ``prefix`` (:meth:`prefix`): :attr:`questions_file` when
        it is every diagnosed question, else ``path`` written with their records."""
        if len(prefix) == len(self.qids):
            return self.questions_file
        return write_json(path, {q: self.records[q] for q in prefix})


def gqa_source(state: DiagnoseState) -> GQASource:
    """The GQA questions of the split (balanced, subsampled), made once per run."""
    if "gqa" in state.memo:
        return state.memo["gqa"]
    from vqadiag.data.model_inputs.gqa_data import GQAData

    data = GQAData(state.data_root, images=state.options.images, compact_questions=True)
    split = state.options.split
    try:
        data.questions_path(split)
    except DataError as err:
        raise SuiteSkipped(f"no GQA questions for split {split!r} ({err.path})") from None
    needs_visual(state, data)
    records = data.questions(split)
    balanced = [q for q, r in records.items() if is_balanced(r)]
    if not balanced:
        raise SuiteSkipped(f"no balanced GQA questions in split {split!r}")
    taken = qids = subsample(balanced, state.options.max_questions)
    path = data.questions_path(split)
    qids = state.drop_missing_images(qids, {q: str(records[q].get("imageId")) for q in qids}, data)
    if not qids:
        raise SuiteSkipped("no diagnosed question has its image")
    for q in qids:
        for name in ("question", "imageId"):
            if not isinstance(records[q].get(name), (str, int)) or isinstance(
                records[q].get(name), bool
            ):
                raise DataError(path, f"missing or invalid field {name!r}", record_label(q))
    subset = {q: records[q] for q in qids}
    path = write_json(state.inputs / "gqa_questions.json", subset)
    donors = donor_map([str(records[q]["imageId"]) for q in qids])
    ctx = state.context("gqa", data, donors)
    source = GQASource(data, qids, subset, path, ctx, taken)
    state.memo["gqa"] = source
    return source


def probe_of(record: Mapping[str, Any], qid: str, **kw: Any) -> Probe:
    """The plain probe of a GQA-like record (``kw``: keep / remove / ref / question)."""
    question = kw.pop("question") if "question" in kw else record["question"]
    return Probe(qid, question, str(record["imageId"]), record, **kw)


def plain_run(state: DiagnoseState) -> tuple[GQASource, ConditionRun]:
    """The model on every diagnosed GQA question with all objects (condition ``gqa.all``)."""
    src = gqa_source(state)
    needs_visual(state)
    probes = [probe_of(src.records[q], q) for q in src.qids]
    run = state.run(src.ctx, Condition("gqa.all", "plain"), probes)
    return src, run


def needs_visual(state: DiagnoseState, data: Any = None) -> None:
    """Skip when the model needs an input this data cannot give: pixels from a data
    folder without images (``--images DIR`` points at them), or an unknown input kind.
    ``data``: the suite's dataset (its image folders), the GQA one by default."""
    caps = state.model.capabilities
    if caps.sees_features_or_nothing:
        return
    if not caps.pixel_input:
        raise SuiteSkipped(f"model needs {caps.visual} input; diagnose feeds objects or pixels")
    if data is None:
        from vqadiag.data.model_inputs.gqa_data import GQAData

        data = GQAData(state.data_root, images=state.options.images)
    if not data.images.available():
        raise SuiteSkipped(
            f"model reads pixels and {state.data_root} has no images (give --images DIR)"
        )


def unit_row(suite: str, qid: str, record: Mapping[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "suite": suite,
        "id": qid,
        "qid": qid,
        "image_id": str(record.get("imageId")),
        "question": record.get("question"),
        "truth": record.get("answer"),
        **extra,
    }


def raw_texts(answers: Mapping[str, Any]) -> dict[str, Any]:
    """``{"raw": {name: text}}`` when a generative model's raw texts are known (the
    per-question row's ``raw``, beside ``answers``), else ``{}``."""
    raw = {name: getattr(a, "raw", None) for name, a in answers.items()}
    return {"raw": raw} if any(t is not None for t in raw.values()) else {}


def vqa_data(state: DiagnoseState) -> Any:
    """The VQA v2 data of the split with annotations, made once (skips when absent)."""
    if "vqa2" in state.memo:
        return state.memo["vqa2"]
    from vqadiag.data.model_inputs.vqa2_data import VQA2Data

    data = VQA2Data(state.data_root, images=state.options.images)
    split = state.options.split
    try:
        data.questions_path(split)
    except DataError:
        raise SuiteSkipped(f"no VQA v2 questions for split {split!r}") from None
    if data.annotations_path(split) is None:
        raise SuiteSkipped(f"no VQA v2 annotations for split {split!r}")
    state.memo["vqa2"] = data
    return data


def release_idle_sources(state: DiagnoseState, upcoming: Collection[str]) -> None:
    """Between two suites: let go of the VQA v2 question records unless the next suite
    (whose ``datasets`` are ``upcoming``) reads VQA v2; a later suite reads them again.
    They are the largest data a diagnosis holds after the GQA questions, and the suites
    between ``pairs`` (and ``gain``) and ``consistency`` never read them."""
    data = state.memo.get("vqa2")
    if data is not None and "vqa2" not in upcoming:
        data.forget_questions()


def vqa_context(state: DiagnoseState, data: Any) -> ProbeContext:
    return state.context("vqa2", data)


def vqa_probe(qid: str, record: Mapping[str, Any], question: str | None = None) -> Probe:
    return Probe(qid, question or record["question"], str(record["imageId"]), record)
