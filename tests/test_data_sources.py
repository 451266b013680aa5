"""``diagnose --data`` over the copies researchers hold (docs/data-sources.md).

From one rendered world (official layout) the tests build, with the real tools:

* an lmms-eval-style Hugging Face copy of GQA testdev, written by ``datasets`` as
  Parquet in the hub cache layout (``datasets--lmms-lab--GQA/snapshots/<rev>/
  testdev_balanced_{instructions,images}/testdev-00000-of-00001.parquet``);
* an lmms-lab/VQAv2-style copy of VQA v2 val (images embedded in every row), saved
  by ``datasets`` with ``save_to_disk`` (Arrow);
* a VLMEvalKit TSV of GQA testdev, written by pandas as VLMEvalKit writes it (base64
  images, repeated images as the index of the row holding them, no question ids);
* GQA-OOD's released testdev split files (``score ood --write-split``).

A model that reads pixels (its answer is a function of the image's bytes and the
question) is diagnosed over each source and over the official layout of the same
questions and images: every figure and every answer must be the same.
"""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from vqadiag import plugins
from vqadiag.models.base import Capabilities, ModelOutput

datasets = pytest.importorskip("datasets")

REVISION = "0123456789abcdef0123456789abcdef01234567"
ANSWERS = ["yes", "no", "red", "blue", "green", "metal", "wood", "left", "right", "two"]


class MeanColourModel:
    """Answers from the image's mean colour and the question's length: what it says
    changes with the pixels it is given, so equal answers mean equal images."""

    name = "mean-colour"
    capabilities = Capabilities(visual="pixels", object_masking=False, probabilities=False)
    input_size = (24, 24)

    def __init__(self, spec: str) -> None:
        self.answer_vocab = list(ANSWERS)

    def predict(self, batch, visual):
        answers = []
        for image, question in zip(visual.images, batch.questions, strict=True):
            mean = np.asarray(image, np.float64).mean(axis=(0, 1))
            answers.append(ANSWERS[(int(mean.sum()) + len(question)) % len(ANSWERS)])
        return ModelOutput(answers)

    def fingerprint(self) -> str:
        return "mean-colour-v1"


@pytest.fixture(autouse=True)
def _adapter():
    plugins.register_adapter("meancolour", MeanColourModel, "test: answers from pixels")
    yield
    plugins.unregister_adapter("meancolour")


def _read(path: Path):
    return json.loads(path.read_text())


def _image_bytes(world: Path, image_id: str) -> bytes:
    return (world / "gqa" / "images" / f"{image_id}.png").read_bytes()


def _image_cell(world: Path, image_id: str) -> dict:
    return {"bytes": _image_bytes(world, image_id), "path": f"{image_id}.png"}


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Path:
    from vqadiag.synth import generate_world

    root = tmp_path_factory.mktemp("sources") / "world"
    generate_world(root, images=60, seed=2)
    return root


@pytest.fixture(scope="module")
def ood_folder(world, tmp_path_factory) -> Path:
    """Released-style GQA-OOD testdev files (a split of the world's testdev questions:
    every third question in the tail), named as the release names them."""
    records = _read(world / "gqa" / "testdev_balanced_questions.json")
    parts = {"head": {}, "tail": {}}
    for k, (qid, record) in enumerate(sorted(records.items())):
        parts["tail" if k % 3 == 0 else "head"][qid] = record
    parts["all"] = {**parts["head"], **parts["tail"]}
    folder = tmp_path_factory.mktemp("ood-release")
    for part, content in parts.items():
        (folder / f"ood_testdev_{part}.json").write_text(json.dumps(content))
    return folder


@pytest.fixture(scope="module")
def hub_cache(world, tmp_path_factory) -> Path:
    """The hub cache holding lmms-lab/GQA's testdev configs, as ``datasets`` writes them."""
    cache = tmp_path_factory.mktemp("hf-hub")
    repo = cache / "datasets--lmms-lab--GQA"
    snapshot = repo / "snapshots" / REVISION
    records = _read(world / "gqa" / "testdev_balanced_questions.json")
    rows = [{"id": qid, **record} for qid, record in records.items()]
    datasets.Dataset.from_list(rows).to_parquet(
        str(_made(snapshot / "testdev_balanced_instructions" / "testdev-00000-of-00001.parquet"))
    )
    ids = sorted({r["imageId"] for r in rows})
    images = datasets.Dataset.from_dict(
        {"id": ids, "image": [_image_cell(world, i) for i in ids]},
        features=datasets.Features({"id": datasets.Value("string"), "image": datasets.Image()}),
    )
    images.to_parquet(
        str(_made(snapshot / "testdev_balanced_images" / "testdev-00000-of-00001.parquet"))
    )
    (_made(repo / "refs" / "main")).write_text(REVISION)
    return cache


@pytest.fixture(scope="module")
def vqa_copy(world, tmp_path_factory) -> Path:
    """lmms-lab/VQAv2's validation split (each row embeds its image), saved to disk."""
    folder = tmp_path_factory.mktemp("vqa-copy") / "VQAv2"
    questions = _read(world / "vqa2" / "v2_OpenEnded_mscoco_val2014_questions.json")["questions"]
    annotations = {
        a["question_id"]: a
        for a in _read(world / "vqa2" / "v2_mscoco_val2014_annotations.json")["annotations"]
    }
    to_gqa = _read(world / "world.json")["image_ids"]["vqa_to_gqa"]
    rows = []
    for q in questions:
        a = annotations[q["question_id"]]
        rows.append(
            {
                "question_id": q["question_id"], "question": q["question"],
                "question_type": a["question_type"],
                "multiple_choice_answer": a["multiple_choice_answer"], "answers": a["answers"],
                "image_id": q["image_id"], "answer_type": a["answer_type"],
                "image": _image_cell(world, to_gqa[str(q["image_id"])]),
            }
        )  # fmt: skip
    table = datasets.Dataset.from_list(rows).cast_column("image", datasets.Image())
    datasets.DatasetDict({"validation": table}).save_to_disk(str(folder))
    return folder


@pytest.fixture(scope="module")
def tsv_file(world, tmp_path_factory) -> Path:
    """GQA_TestDev_Balanced.tsv as VLMEvalKit writes it (pandas, tab-separated)."""
    import pandas as pd

    records = _read(world / "gqa" / "testdev_balanced_questions.json")
    holder: dict[str, int] = {}
    rows = []
    for index, record in enumerate(records.values()):
        image = record["imageId"]
        if image in holder:
            cell = str(holder[image])
        else:
            holder[image] = index
            cell = base64.b64encode(_image_bytes(world, image)).decode()
        rows.append(
            {"index": index, "image": cell, "question": record["question"],
             "answer": record["answer"]}
        )  # fmt: skip
    path = tmp_path_factory.mktemp("vlmeval") / "GQA_TestDev_Balanced.tsv"
    pd.DataFrame(rows).to_csv(path, sep="\t", index=False)
    return path


def _made(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def _diagnose(run_cli, data, out: Path, *extra) -> dict:
    result = run_cli(
        "diagnose", "--data", data, "--model", "meancolour:x", "--out", out,
        "--n-bootstrap", "30", "--json", *extra,
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    return result.json()


def _answers(out: Path, suite: str, key=("question",)) -> list:
    rows = [json.loads(line) for line in (out / "per_question.jsonl").read_text().splitlines()]
    return sorted(
        (*(r[k] for k in key), json.dumps(r["answers"], sort_keys=True))
        for r in rows
        if r["suite"] == suite
    )


GQA_SUITES = (
    "--split", "testdev", "--suite", "accuracy,ood,robustness,gain", "--bq-ranker", "bleu1",
)  # fmt: skip


@pytest.fixture(scope="module")
def official(world, ood_folder, tmp_path_factory):
    from typer.testing import CliRunner

    from vqadiag.cli.main import app

    plugins.register_adapter("meancolour", MeanColourModel, "test: answers from pixels")
    # the official layout of the copies' questions and images: GQA testdev only
    layout = tmp_path_factory.mktemp("official") / "gqa-testdev"
    name = "testdev_balanced_questions.json"
    (_made(layout / "gqa" / name)).write_bytes((world / "gqa" / name).read_bytes())
    shutil.copytree(world / "gqa" / "images", layout / "gqa" / "images")
    out = layout.parent / "res"
    args = ["diagnose", "--data", str(layout), "--model", "meancolour:x", "--out", str(out),
            "--n-bootstrap", "30", "--json", *GQA_SUITES,
            "--ood-split", str(ood_folder)]  # fmt: skip
    result = CliRunner().invoke(app, args, catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout), out


def _same_figures(a: dict, b: dict) -> None:
    assert a["summary"] == b["summary"]
    assert sorted(a["suites"]) == sorted(b["suites"])
    assert a["skipped"] == b["skipped"]


def test_official_layout_runs_the_three_gqa_suites(official):
    results, _ = official
    assert set(results["suites"]) == {"accuracy", "ood", "robustness", "gain"}
    assert results["summary"]["gain_gqa"]["value"] is not None
    assert results["suites"]["ood"]["split"]["source"] == "released"
    assert results["suites"]["ood"]["alpha"] is None  # the released tail is its own
    assert results["suites"]["ood"]["split"]["joined_on"] == "id"
    assert results["summary"]["accuracy"]["value"] is not None


def test_hugging_face_copy_by_name_gives_the_official_figures(
    official, hub_cache, ood_folder, run_cli, tmp_path, monkeypatch
):
    monkeypatch.setenv("HF_HUB_CACHE", str(hub_cache))
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(hub_cache))
    out = tmp_path / "res"
    results = _diagnose(run_cli, "lmms-lab/GQA", out, *GQA_SUITES, "--ood-split", ood_folder)
    _same_figures(results, official[0])
    assert _answers(out, "accuracy", ("id", "image_id")) == _answers(
        official[1], "accuracy", ("id", "image_id")
    )
    source = results["data"]["source"]
    assert source["format"] == "huggingface" and source["name"] == "lmms-lab/GQA"
    assert source["revision"] == REVISION
    # images were read from the Parquet cells, never extracted
    assert not list((out / "source").rglob("*.png"))


def test_copy_folder_and_name_share_one_fingerprint_the_official_layout_another(
    official, hub_cache, run_cli, tmp_path, monkeypatch
):
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(hub_cache))
    a = _diagnose(run_cli, "hf:lmms-lab/GQA", tmp_path / "a", "--split", "testdev",
                  "--suite", "accuracy")  # fmt: skip
    folder = hub_cache / "datasets--lmms-lab--GQA"
    b = _diagnose(run_cli, folder, tmp_path / "b", "--split", "testdev", "--suite", "accuracy")
    assert a["data"]["fingerprint"] == b["data"]["fingerprint"]
    assert a["data"]["fingerprint"] != official[0]["data"]["fingerprint"]
    assert a["summary"]["accuracy"] == official[0]["summary"]["accuracy"]


def test_datasets_cache_by_name_gives_the_official_figures(
    official, hub_cache, ood_folder, run_cli, tmp_path, monkeypatch
):
    """The Arrow files ``load_dataset`` leaves in the ``datasets`` cache, found by name
    when the hub cache has no snapshot."""
    snapshot = hub_cache / "datasets--lmms-lab--GQA" / "snapshots" / REVISION
    cache = tmp_path / "datasets-cache"
    for config in ("testdev_balanced_instructions", "testdev_balanced_images"):
        table = datasets.Dataset.from_parquet(
            str(snapshot / config / "testdev-00000-of-00001.parquet"),
            cache_dir=str(tmp_path / "scratch"),
        )
        saved = tmp_path / "saved" / config
        table.save_to_disk(str(saved))
        arrow = next(saved.glob("*.arrow"))
        target = _made(cache / "lmms-lab___gqa" / config / "0.0.0" / "abc123" / "gqa-testdev.arrow")
        target.write_bytes(arrow.read_bytes())
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "empty-hub"))
    monkeypatch.setenv("HF_DATASETS_CACHE", str(cache))
    out = tmp_path / "res"
    results = _diagnose(run_cli, "lmms-lab/GQA", out, *GQA_SUITES, "--ood-split", ood_folder)
    _same_figures(results, official[0])
    tables = results["data"]["source"]["tables"]
    assert {(t["config"], t["split"]) for t in tables} == {
        ("testdev_balanced_instructions", "testdev"),
        ("testdev_balanced_images", "testdev"),
    }


def test_vlmevalkit_tsv_gives_the_official_figures(
    official, tsv_file, ood_folder, run_cli, tmp_path
):
    out = tmp_path / "res"
    results = _diagnose(run_cli, tsv_file, out, *GQA_SUITES, "--ood-split", ood_folder)
    _same_figures(results, official[0])
    # the TSV numbers its questions and images itself: the answers agree by question
    assert _answers(out, "accuracy") == _answers(official[1], "accuracy")
    assert results["suites"]["ood"]["split"]["joined_on"] == "question text and answer"
    assert results["data"]["source"]["format"] == "vlmevalkit"


def test_vqa_copy_saved_to_disk_gives_the_official_pairs(world, vqa_copy, run_cli, tmp_path):
    pairs = world / "vqa2" / "v2_mscoco_val2014_complementary_pairs.json"
    ours = _diagnose(run_cli, vqa_copy, tmp_path / "copy", "--suite", "pairs", "--pairs", pairs)
    theirs = _diagnose(run_cli, world, tmp_path / "official", "--suite", "pairs")
    _same_figures(ours, theirs)
    assert _answers(tmp_path / "copy", "pairs", ("id",)) == _answers(
        tmp_path / "official", "pairs", ("id",)
    )


def test_testdev_copy_skips_what_it_cannot_support_with_the_reason(hub_cache, run_cli, tmp_path):
    results = _diagnose(run_cli, hub_cache / "datasets--lmms-lab--GQA", tmp_path / "r",
                        "--split", "testdev", "--suite", "accuracy,ood,fpvg,pairs")  # fmt: skip
    skipped = results["skipped"]
    assert "--scene-graphs" in skipped["fpvg"]
    assert "VQA v2" in skipped["pairs"]
    # the copy's questions carry their groups: the split is built from them
    assert "ood" not in skipped
    assert results["suites"]["ood"]["split"]["source"] == "built"


def test_tsv_without_released_split_skips_ood_naming_the_option(tsv_file, run_cli, tmp_path):
    results = _diagnose(run_cli, tsv_file, tmp_path / "r", "--split", "testdev",
                        "--suite", "accuracy,ood")  # fmt: skip
    assert "--ood-split" in results["skipped"]["ood"]
    accuracy = results["suites"]["accuracy"]
    # question and answer only: accuracy, and no eval.py metric that needs annotations
    assert accuracy["metrics"].startswith("accuracy only")
    assert accuracy["accuracy"] is not None and "binary" not in accuracy


def test_a_rerun_reuses_the_prepared_copy_and_the_store(hub_cache, run_cli, tmp_path):
    folder = hub_cache / "datasets--lmms-lab--GQA"
    args = ("--split", "testdev", "--suite", "accuracy")
    first = _diagnose(run_cli, folder, tmp_path / "r", *args)
    manifest = (tmp_path / "r" / "source" / "source.json").stat().st_mtime_ns
    second = _diagnose(run_cli, folder, tmp_path / "r", *args)
    assert (tmp_path / "r" / "source" / "source.json").stat().st_mtime_ns == manifest
    assert second["conditions"]["gqa.all"]["computed"] == 0
    assert first["summary"] == second["summary"]


# ------------------------------------------------------------------ bad sources


def test_a_name_not_in_the_cache_is_one_line_naming_where_and_how(run_cli, tmp_path, monkeypatch):
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "ds"))
    result = run_cli("diagnose", "--data", "lmms-lab/GQA", "--model", "meancolour:x",
                     "--out", tmp_path / "r")  # fmt: skip
    assert result.exit_code == 2
    line = result.stderr.strip()
    assert "\n" not in line
    assert str(tmp_path / "hub") in line and "hf download lmms-lab/GQA" in line


def test_a_split_the_copy_lacks_names_the_splits_it_has(hub_cache, run_cli, tmp_path):
    result = run_cli("diagnose", "--data", hub_cache / "datasets--lmms-lab--GQA",
                     "--model", "meancolour:x", "--out", tmp_path / "r")  # fmt: skip
    assert result.exit_code == 2
    assert "split 'val'" in result.stderr and "testdev" in result.stderr


def test_tsv_rows_that_are_wrong_name_the_file_and_row(tsv_file, run_cli, tmp_path):
    text = tsv_file.read_text().splitlines()
    header, rows = text[0], text[1:]
    cells = rows[3].split("\t")
    cells[1] = "999999"  # an image reference to no row
    bad = tmp_path / "GQA_TestDev_Balanced.tsv"
    bad.write_text("\n".join([header, *rows[:3], "\t".join(cells), *rows[4:]]) + "\n")
    result = run_cli("diagnose", "--data", bad, "--model", "meancolour:x",
                     "--out", tmp_path / "r", "--split", "testdev")  # fmt: skip
    assert result.exit_code == 2
    assert bad.name in result.stderr and "row 3" in result.stderr

    for content, problem in (("", "is empty"), ("index\tquestion\n0\twhat?\n", "'image'")):
        bad.write_text(content)
        result = run_cli("diagnose", "--data", bad, "--model", "meancolour:x",
                         "--out", tmp_path / "r2", "--split", "testdev")  # fmt: skip
        assert result.exit_code == 2 and problem in result.stderr and bad.name in result.stderr


def test_a_parquet_row_without_an_id_names_the_file_and_row(tmp_path, run_cli):
    folder = tmp_path / "copy" / "testdev_balanced_instructions"
    folder.mkdir(parents=True)
    rows = [{"id": "q1", "imageId": "i1", "question": "what?", "answer": "yes"},
            {"id": None, "imageId": "i1", "question": "who?", "answer": "no"}]  # fmt: skip
    datasets.Dataset.from_list(rows).to_parquet(str(folder / "testdev-00000-of-00001.parquet"))
    result = run_cli("diagnose", "--data", tmp_path / "copy", "--model", "meancolour:x",
                     "--out", tmp_path / "r", "--split", "testdev")  # fmt: skip
    assert result.exit_code == 2
    assert "testdev-00000-of-00001.parquet" in result.stderr and "row 1" in result.stderr


def test_an_undecodable_image_cell_names_the_file_the_row_and_the_question(tmp_path, run_cli):
    copy = tmp_path / "copy"
    rows = [{"id": "q1", "imageId": "i1", "question": "what?", "answer": "yes"}]
    datasets.Dataset.from_list(rows).to_parquet(
        str(_made(copy / "testdev_balanced_instructions" / "testdev-00000-of-00001.parquet"))
    )
    images = datasets.Dataset.from_dict(
        {"id": ["i1"], "image": [{"bytes": b"not an image", "path": None}]},
        features=datasets.Features({"id": datasets.Value("string"), "image": datasets.Image()}),
    )
    parquet = copy / "testdev_balanced_images" / "testdev-00000-of-00001.parquet"
    images.to_parquet(str(_made(parquet)))
    result = run_cli("diagnose", "--data", copy, "--model", "meancolour:x", "--out",
                     tmp_path / "r", "--split", "testdev", "--suite", "accuracy")  # fmt: skip
    assert result.exit_code == 2
    assert "testdev_balanced_images" in result.stderr and "q1" in result.stderr
    assert "cannot decode" in result.stderr


def test_a_changed_source_rebuilds_the_prepared_copy_and_changes_the_fingerprint(
    tsv_file, run_cli, tmp_path
):
    copy = tmp_path / "GQA_TestDev_Balanced.tsv"
    copy.write_bytes(tsv_file.read_bytes())
    args = ("--split", "testdev", "--suite", "accuracy")
    first = _diagnose(run_cli, copy, tmp_path / "r", *args)
    lines = copy.read_text().splitlines()
    cells = lines[1].split("\t")
    cells[-1] = "an answer no model gives"  # the gold answer of row 0
    copy.write_text("\n".join([lines[0], "\t".join(cells), *lines[2:]]) + "\n")
    second = _diagnose(run_cli, copy, tmp_path / "r", *args)
    assert first["data"]["fingerprint"] != second["data"]["fingerprint"]
    prepared = _read(tmp_path / "r" / "source" / "gqa" / "testdev_balanced_questions.json")
    assert prepared["0"]["answer"] == "an answer no model gives"
    n = first["summary"]["accuracy"]["n"]
    assert n == second["summary"]["accuracy"]["n"]
    # the gold answer is not model input: the stored answers are reused
    assert second["conditions"]["gqa.all"]["computed"] == 0
    assert second["summary"]["accuracy"]["value"] <= first["summary"]["accuracy"]["value"]


def test_a_tsv_without_answers_is_one_line_naming_the_file(tsv_file, run_cli, tmp_path):
    import pandas as pd

    frame = pd.read_csv(tsv_file, sep="\t", dtype=str, keep_default_na=False)
    bare = tmp_path / "GQA_TestDev_Balanced.tsv"
    frame.drop(columns=["answer"]).to_csv(bare, sep="\t", index=False)
    result = run_cli("diagnose", "--data", bare, "--model", "meancolour:x", "--out",
                     tmp_path / "r", "--split", "testdev")  # fmt: skip
    assert result.exit_code == 2
    assert bare.name in result.stderr and "'answer' column" in result.stderr


def test_official_file_names_at_the_folder_top_give_the_nested_figures(world, run_cli, tmp_path):
    """The official file names of GQA, VQA v2 and VQA-introspect at one folder's top (no
    ``gqa/``, ``vqa2/``, ``introspect/``) are the nested layout: the VQA v2 and
    introspect suites run and give the same figures (introspect's file used to be
    looked for in ``introspect/`` only, so consistency was skipped)."""
    flat = tmp_path / "flat"
    flat.mkdir()
    for part in ("gqa", "vqa2", "introspect"):
        for path in (world / part).iterdir():
            target = flat / path.name
            if path.is_dir():
                shutil.copytree(path, target)
            else:
                shutil.copyfile(path, target)
    shutil.copyfile(world / "world.json", flat / "world.json")
    suites = ("--suite", "pairs,consistency")
    nested = _diagnose(run_cli, world, tmp_path / "nested", *suites)
    flat_result = _diagnose(run_cli, flat, tmp_path / "flat-res", *suites)
    assert set(flat_result["suites"]) == {"pairs", "consistency"}, flat_result["skipped"]
    _same_figures(flat_result, nested)


def test_a_tsv_is_diagnosed_on_the_split_its_name_names(tsv_file, run_cli, tmp_path):
    """Without --split a VLMEvalKit TSV is diagnosed on the split its file name names
    (``…TestDev…``: testdev), as the docs say; a --split it does not hold is one line."""
    results = _diagnose(run_cli, tsv_file, tmp_path / "res", "--suite", "accuracy")
    assert results["config"]["split"] == "testdev"
    assert results["data"]["datasets"]["gqa"]["split"] == "testdev"
    bad = run_cli("diagnose", "--data", tsv_file, "--model", "meancolour:x", "--out",
                  tmp_path / "res2", "--suite", "accuracy", "--split", "val")  # fmt: skip
    assert bad.exit_code == 2
    assert "holds no GQA or VQA v2 questions of split 'val' (it holds: testdev)" in bad.stderr


def test_an_unreadable_tsv_is_one_line_naming_the_file_and_the_reason(tmp_path, monkeypatch):
    """The parser's reason is its first line; an error with no text is named by its type."""
    import pandas as pd

    from vqadiag.data.sources.vlmevalkit_tsv import read_frame
    from vqadiag.errors import DataError

    ragged = tmp_path / "GQA_TestDev_Balanced.tsv"
    ragged.write_text("index\tquestion\n1\ta\n2\tb\tc\td\n")
    with pytest.raises(DataError) as caught:
        read_frame(ragged)
    message = str(caught.value)
    assert str(ragged) in message and "is not a readable TSV: Error tokenizing data" in message
    assert "\n" not in message

    def silent(*args, **kwargs):
        raise ValueError()

    monkeypatch.setattr(pd, "read_csv", silent)
    with pytest.raises(
        DataError, match=r"GQA_TestDev_Balanced.tsv: is not a readable TSV: ValueError"
    ):
        read_frame(ragged)
