"""``vqadiag conditions export``: every input a diagnose run would show a model, written
for a harness to answer (docs/harnesses.md).

The suites run exactly as in ``diagnose`` (same options, same probes), with
:class:`~vqadiag.models.adapters.condition_answers.RecordingModel` in the model's place: it
records each distinct (question, condition pixels) as an *item* instead of answering.
The folder then holds

* ``manifest.json``: ``{kind: "vqadiag.conditions", version, vqadiag_version, data, format, prompt,
  max_new_tokens,
  options, conditions: {name: questions}, skipped, items: [{index, question_id, question,
  image}]}`` (``question_id`` is the item id);
* ``images/<digest>.png``: each distinct image once (lossless, :mod:`vqadiag.data.io.png`);
* for ``--format jsonl``: ``questions.jsonl`` in LLaVA's question-file shape
  (``question_id`` = item id, ``image``, ``text`` = the prompt);
* for ``--format vlmevalkit``: ``VQADiagConditions.tsv`` (``index``, ``question_id`` = item
  id, ``image`` as base64 PNG, ``question`` = the prompt, ``answer`` empty), a custom VQA
  dataset;
* for ``--format lmms-eval``: ``lmms-eval/`` with a task ``vqadiag_conditions``
  (``vqadiag_conditions.yaml``, ``utils.py``, ``items.jsonl``) to run with
  ``--include_path``; its ``process_results`` logs ``submission.question_id`` = item id.

Every file is written atomically and ``manifest.json`` last; an earlier export's files
in the folder are removed first (its manifest before the rest), so a killed export
leaves no manifest and cannot be imported.
"""

from __future__ import annotations

import base64
import csv
import io
import shutil
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from vqadiag import __version__
from vqadiag.data.io.atomic import FolderLock, write_bytes_atomic
from vqadiag.data.io.folders import FolderKind, claim_folder, owned_folder, read_json_file
from vqadiag.data.io.jsonio import write_json
from vqadiag.data.io.outputs import folders_read, outputs_apart
from vqadiag.data.io.png import rgb_png
from vqadiag.errors import DataError
from vqadiag.models.adapters.condition_answers import MANIFEST, MANIFEST_KIND, Item, RecordingModel
from vqadiag.models.adapters.generated_answer import Generation

FORMATS = ("jsonl", "vlmevalkit", "lmms-eval")
TASK = "vqadiag_conditions"
TSV = "VQADiagConditions.tsv"

LMMS_YAML = """\
task: "{task}"
dataset_path: json
dataset_kwargs:
  data_files:
    test: "{items}"
test_split: test
output_type: generate_until
doc_to_visual: !function utils.doc_to_visual
doc_to_text: !function utils.doc_to_text
doc_to_target: "answer"
generation_kwargs:
  max_new_tokens: {max_new_tokens}
  temperature: 0
  do_sample: false
process_results: !function utils.process_results
metric_list:
  - metric: submission
    aggregation: !function utils.aggregate_submissions
    higher_is_better: true
metadata:
  - version: 0.0
"""

LMMS_UTILS = '''\
"""vqadiag conditions export: the task's hooks (the images are in ../images)."""

from pathlib import Path

from PIL import Image

IMAGES = Path(__file__).resolve().parent.parent


def doc_to_visual(doc):
    return [Image.open(IMAGES / doc["image"]).convert("RGB")]


def doc_to_text(doc, lmms_eval_specific_kwargs=None):
    return doc["text"]


def process_results(doc, results):
    return {"submission": {"question_id": doc["question_id"], "answer": results[0]}}


def aggregate_submissions(results, args=None):
    return float(len(results))
'''


def export_conditions(
    data: str | Path,
    out: str | Path,
    *,
    fmt: str = "jsonl",
    suites: str | Iterable[str] = "all",
    split: str | None = None,
    max_questions: int | None = None,
    max_objects: int = 100,
    images: str | Path | None = None,
    pixel_fill: str = "mean",
    allow_missing_images: bool = False,
    bqd: str | Path | None = None,
    bq_ranker: str | None = None,
    seed: int = 0,
    prompt: str | None = None,
    max_new_tokens: int = 16,
    progress: bool = False,
    plugins: Iterable[str] = (),
) -> dict[str, Any]:
    """Write the export folder of the module docstring; returns its summary
    ``{out, format, items, images, conditions, skipped}``."""
    from vqadiag.diagnosis.diagnose import check_one_suite_options, parse_suites
    from vqadiag.plugins import load_plugins

    outputs_apart(
        {"--out": out}, {"--data": data, "--images": images, "--bqd": bqd},
        read_whole=folders_read(data=data, images=images),
    )  # fmt: skip
    generation = _generation(fmt, prompt, max_new_tokens)
    load_plugins(plugins)
    chosen = parse_suites(suites)  # refused before the folder's earlier export is cleared
    check_one_suite_options(chosen, bqd=bqd, bq_ranker=bq_ranker)
    owned_folder(out, EXPORT_FOLDER)
    with FolderLock(out):  # a second export into the same folder is one line, not a mix
        return _export_locked(
            data, out, fmt, generation, suites=suites, split=split,
            max_questions=max_questions, max_objects=max_objects, images=images,
            pixel_fill=pixel_fill, allow_missing_images=allow_missing_images, bqd=bqd,
            bq_ranker=bq_ranker, seed=seed, progress=progress, plugins=plugins,
        )  # fmt: skip


def _export_locked(
    data: str | Path,
    out: str | Path,
    fmt: str,
    generation: Generation,
    *,
    suites: str | Iterable[str],
    split: str | None,
    max_questions: int | None,
    max_objects: int,
    images: str | Path | None,
    pixel_fill: str,
    allow_missing_images: bool,
    bqd: str | Path | None,
    bq_ranker: str | None,
    seed: int,
    progress: bool,
    plugins: Iterable[str],
) -> dict[str, Any]:
    """:func:`export_conditions` once it holds the folder: clear the earlier export,
    record every condition's inputs and write them in the harness format."""
    from vqadiag.diagnosis.diagnose import diagnose
    from vqadiag.suites.state import DEFAULT_RANKER

    target, given_bqd = _clear_folder(out, bqd)
    recorder, names = _recorder(target)
    options = {
        "suites": suites if isinstance(suites, str) else ",".join(suites),
        "split": split,
        "max_questions": max_questions,
        "max_objects": max_objects,
        "pixel_fill": pixel_fill,
        "allow_missing_images": allow_missing_images,
        "bqd": None if given_bqd is None else str(given_bqd),
        "bq_ranker": bq_ranker or DEFAULT_RANKER,
        "seed": seed,
        "images": None if images is None else str(Path(images).resolve()),
    }
    with tempfile.TemporaryDirectory(prefix=SCRATCH_PREFIX, dir=target) as scratch:
        run = diagnose(
            data, recorder, Path(scratch) / "run", suites=suites, split=split,
            max_questions=max_questions, max_objects=max_objects, images=images,
            pixel_fill=pixel_fill, allow_missing_images=allow_missing_images, bqd=bqd,
            bq_ranker=bq_ranker, seed=seed, n_bootstrap=10, progress=progress,
            plugins=plugins,
        )  # fmt: skip
        options["split"] = run["config"]["split"]  # the one diagnose chose when None
        if (Path(scratch) / "run" / "bqd.json").is_file():  # the BQD robustness used
            shutil.copyfile(Path(scratch) / "run" / "bqd.json", target / "bqd.json")
            options["bqd"] = str((target / "bqd.json").resolve())
    if options["bqd"] is not None:  # diagnose reads it with --bqd, which takes no ranker
        options["bq_ranker"] = None
    items = list(recorder.items.values())
    if not items:
        raise DataError(Path(data), "no condition to export (every suite was skipped)")
    rows = _write_items(target, fmt, items, names, generation)
    manifest = _write_manifest(target, data, fmt, generation, options, run, rows)
    return {
        "out": str(target),
        "format": fmt,
        "items": len(items),
        "images": len(names),
        "conditions": manifest["conditions"],
        "skipped": run["skipped"],
    }


def _generation(fmt: str, prompt: str | None, max_new_tokens: int) -> Generation:
    """Check ``fmt`` and build the prompt and generation settings the items are asked with."""
    if fmt not in FORMATS:
        raise DataError("--format", f"must be one of {', '.join(FORMATS)}")
    try:
        return Generation(prompt=prompt or Generation.prompt, max_new_tokens=max_new_tokens)
    except ValueError as err:
        raise DataError("--prompt", str(err)) from None


def _earlier_export(folder: Path) -> bool:
    """An export folder an earlier vqadiag wrote before it marked its folders: its
    ``manifest.json`` is of kind ``vqadiag.conditions``."""
    manifest = read_json_file(folder / MANIFEST)
    return isinstance(manifest, dict) and manifest.get("kind") == MANIFEST_KIND


#: ``conditions export --out``: only a folder an export wrote is cleared and written again
EXPORT_FOLDER = FolderKind(
    "conditions export folder", "vqadiag conditions export (manifest.json)", _earlier_export
)


#: the hidden folder an export records its conditions in, removed when it ends
SCRATCH_PREFIX = ".conditions-"


def _clear_folder(out: str | Path, bqd: str | Path | None) -> tuple[Path, Path | None]:
    """The export folder ``out`` without an earlier export's files (its manifest first;
    a ``--bqd`` that an earlier export wrote there stays) or a killed export's scratch
    folder, with an empty ``images/``; returns it and the resolved ``bqd``. The caller
    holds the folder's lock and has checked that it is new, empty or an export folder
    (:data:`EXPORT_FOLDER`): a data folder that merely holds an ``images/`` is refused,
    not cleared."""
    ours = (MANIFEST, "images", "questions.jsonl", TSV, "lmms-eval", "bqd.json")
    target = claim_folder(out, EXPORT_FOLDER)
    for scratch in target.glob(f"{SCRATCH_PREFIX}*"):  # a killed export's (the lock is ours)
        shutil.rmtree(scratch, ignore_errors=True)
    given_bqd = None if bqd is None else Path(bqd).resolve()
    for name in ours:  # an earlier export's files go first, its manifest before the rest
        old = target / name
        if old.resolve() == given_bqd:  # --bqd is the BQD an earlier export wrote here
            continue
        if old.is_dir():
            shutil.rmtree(old)
        elif old.exists():
            old.unlink()
    image_dir = target / "images"
    image_dir.mkdir(exist_ok=True)
    return target, given_bqd


def _recorder(target: Path) -> tuple[RecordingModel, dict[str, str]]:
    """A :class:`RecordingModel` that writes each distinct image once under
    ``target/images``, and the map it fills (image digest → ``images/<name>.png``)."""
    names: dict[str, str] = {}

    def write_image(item: Item, image: np.ndarray) -> None:
        if item.image_digest not in names:
            name = f"images/{item.image_digest[:20]}.png"
            write_bytes_atomic(target / name, rgb_png(image))
            names[item.image_digest] = name

    return RecordingModel(write_image), names


def _write_items(
    target: Path, fmt: str, items: list[Item], names: dict[str, str], generation: Generation
) -> list[dict[str, Any]]:
    """Write the items in the harness format ``fmt``; returns their rows."""
    rows = [
        {"question_id": it.id, "index": it.index, "image": names[it.image_digest],
         "text": generation.ask(it.question), "question": it.question, "answer": ""}
        for it in items
    ]  # fmt: skip
    if fmt == "jsonl":
        _write_jsonl(target / "questions.jsonl", rows, ("question_id", "image", "text"))
    elif fmt == "vlmevalkit":
        _write_tsv(target / TSV, rows, target)
    else:
        _write_lmms_task(target / "lmms-eval", rows, generation)
    return rows


def _write_manifest(
    target: Path,
    data: str | Path,
    fmt: str,
    generation: Generation,
    options: dict[str, Any],
    run: Mapping[str, Any],
    rows: list[dict[str, Any]],
) -> dict[str, Any]:
    """Write ``manifest.json`` (the export's last file); returns it."""
    manifest = {
        "kind": MANIFEST_KIND,
        "version": 1,
        "vqadiag_version": __version__,
        "data": str(Path(data).resolve()),
        "format": fmt,
        "prompt": generation.prompt,
        "max_new_tokens": generation.max_new_tokens,
        "options": options,
        "conditions": {name: c["questions"] for name, c in run["conditions"].items()},
        "skipped": run["skipped"],
        "items": [{k: r[k] for k in ("index", "question_id", "question", "image")} for r in rows],
    }
    write_json(target / MANIFEST, manifest, indent=True)
    return manifest


def _write_jsonl(path: Path, rows: list[dict[str, Any]], keep: tuple[str, ...]) -> None:
    """One JSON line per row, with the ``keep`` fields only."""
    lines = b"".join(orjson.dumps({k: r[k] for k in keep}) + b"\n" for r in rows)
    write_bytes_atomic(path, lines)


def _write_tsv(path: Path, rows: list[dict[str, Any]], folder: Path) -> None:
    buffer = io.StringIO()
    writer = csv.writer(buffer, delimiter="\t", lineterminator="\n")
    writer.writerow(["index", "question_id", "image", "question", "answer"])
    encoded: dict[str, str] = {}
    for r in rows:
        if r["image"] not in encoded:
            encoded[r["image"]] = base64.b64encode((folder / r["image"]).read_bytes()).decode()
        writer.writerow([r["index"], r["question_id"], encoded[r["image"]], r["text"], ""])
    write_bytes_atomic(path, buffer.getvalue().encode())


def _write_lmms_task(folder: Path, rows: list[dict[str, Any]], generation: Generation) -> None:
    folder.mkdir(exist_ok=True)
    items = folder / "items.jsonl"
    _write_jsonl(items, rows, ("question_id", "image", "text", "answer"))
    write_bytes_atomic(folder / "utils.py", LMMS_UTILS.encode())
    yaml = LMMS_YAML.format(
        task=TASK, items=str(items.resolve()), max_new_tokens=generation.max_new_tokens
    )
    write_bytes_atomic(folder / f"{TASK}.yaml", yaml.encode())
