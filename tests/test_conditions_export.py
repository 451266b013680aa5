"""``vqadiag conditions export`` → a harness answers → ``diagnose --model files:ANSWERS
--model-args conditions=DIR`` gives what running the same model in-process gives.

The harnesses: LLaVA's question-file loop and VLMEvalKit's custom VQA TSV (each played by
a few lines that answer the exported files with the tiny LLaVA, as those tools do), and
the real lmms-eval where it is installed (``VQADIAG_LMMS_EVAL_PYTHON`` names an
interpreter that has it; ``scripts/test.sh`` makes one)."""

from __future__ import annotations

import base64
import io
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from PIL import Image

from tiny_vlm import build_tiny_llava, lmms_eval_samples, needs_lmms_eval
from vqadiag.models.adapters.chat_vlm import ChatVLM
from vqadiag.models.adapters.generated_answer import Generation
from vqadiag.models.base import PixelInput, QuestionBatch

SUITES = "accuracy,fpvg,robustness"
COMMON = ("--suite", SUITES, "--max-questions", "10", "--bq-ranker", "bleu1")
TOKENS = 8


@pytest.fixture(scope="module")
def llava_dir(tmp_path_factory):
    return build_tiny_llava(tmp_path_factory.mktemp("llava_export") / "model")


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    from vqadiag.synth import generate_world

    out = tmp_path_factory.mktemp("export_world") / "world"
    generate_world(out, images=40, seed=2)
    return out


@pytest.fixture(scope="module")
def in_process(llava_dir, world, tmp_path_factory):
    """The same model diagnosed in-process: per-question rows and results."""
    from typer.testing import CliRunner

    from vqadiag.cli.main import app

    out = tmp_path_factory.mktemp("in_process") / "res"
    args = ["diagnose", "--data", str(world), "--model", f"hf:{llava_dir}", "--out", str(out),
            *COMMON, "--n-bootstrap", "20", "--json",
            "--model-args", f"batch_size=1,max_new_tokens={TOKENS}"]  # fmt: skip
    got = CliRunner().invoke(app, args, catch_exceptions=False)
    assert got.exit_code == 0, got.stderr
    return json.loads(got.stdout), _rows(out)


def _rows(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "per_question.jsonl").read_text().splitlines()]


def _harness(llava_dir) -> ChatVLM:
    """What a harness runs: the model, asked the exported prompt text as it is."""
    return ChatVLM(llava_dir, batch_size=1,
                   generation=Generation("{question}", "raw", TOKENS))  # fmt: skip


def _answer(model: ChatVLM, text: str, image: np.ndarray) -> str:
    out = model.predict(QuestionBatch(["x"], [text], ["x"]), PixelInput([image]))
    return out.texts[0]


def _export(run_cli, world, out, fmt, *extra):
    got = run_cli("conditions", "export", "--data", world, "--out", out, "--format", fmt,
                  *(extra or COMMON), "--max-new-tokens", str(TOKENS), "--json")  # fmt: skip
    assert got.exit_code == 0, got.stderr
    return got.json()


def _diagnose_answers(run_cli, world, answers, export, out, *extra):
    got = run_cli("diagnose", "--data", world, "--model", f"files:{answers}", "--out", out,
                  "--model-args", f"conditions={export}", *COMMON, "--n-bootstrap", "20",
                  "--json", *extra)  # fmt: skip
    return got


def _same_as_in_process(result, rows, in_process):
    expected_result, expected_rows = in_process
    assert result["summary"] == expected_result["summary"]
    assert result["conditions"].keys() == expected_result["conditions"].keys()
    assert rows == expected_rows  # every answer and raw text of every condition


def test_jsonl_round_trip_gives_the_in_process_results(
    run_cli, llava_dir, world, tmp_path, in_process
):
    export = tmp_path / "export"
    summary = _export(run_cli, world, export, "jsonl")
    manifest = json.loads((export / "manifest.json").read_text())
    questions = [json.loads(x) for x in (export / "questions.jsonl").read_text().splitlines()]
    assert summary["items"] == len(questions) == len(manifest["items"]) > 30
    # the options to give diagnose again: the exported BQD, whose ranking is done
    assert manifest["options"]["bqd"] == str((export / "bqd.json").resolve())
    assert manifest["options"]["bq_ranker"] is None
    assert set(summary["conditions"]) == set(in_process[0]["conditions"])
    assert all(q["text"].endswith("single word or phrase.") for q in questions)
    # a LLaVA-style loop answers the question file: {"question_id", "text"} lines
    model = _harness(llava_dir)
    lines = []
    for q in questions:
        image = np.asarray(Image.open(export / q["image"]).convert("RGB"))
        lines.append(json.dumps({"question_id": q["question_id"],
                                 "text": _answer(model, q["text"], image)}))  # fmt: skip
    answers = tmp_path / "answers.jsonl"
    answers.write_text("\n".join(lines) + "\n")
    got = _diagnose_answers(run_cli, world, answers, export, tmp_path / "res")
    assert got.exit_code == 0, got.stderr
    result = got.json()
    assert result["model"]["name"] == "harness"
    _same_as_in_process(result, _rows(tmp_path / "res"), in_process)

    # a diagnose run that asks for another input than was exported: one line
    other = _diagnose_answers(run_cli, world, answers, export, tmp_path / "res2",
                              "--pixel-fill", "noise")  # fmt: skip
    assert other.exit_code == 2
    assert "no answer for question" in other.stderr and "manifest.json" in other.stderr
    # an answer for an item that was never exported: one line naming the record
    full = answers.read_text()
    answers.write_text(full + '{"question_id": "nope", "text": "x"}\n')
    bad = _diagnose_answers(run_cli, world, answers, export, tmp_path / "res3")
    assert bad.exit_code == 2 and "'nope'" in bad.stderr and "not an item" in bad.stderr
    # found in review: answers that are no harness's answers are refused in one line —
    # the export's own question file (every "answer" its prompt), empty answers (rows
    # the harness failed on), and an item answered twice, by its id and by its index
    own = _diagnose_answers(run_cli, world, export / "questions.jsonl", export, tmp_path / "q")
    assert own.exit_code == 2 and "the export's question file" in own.stderr
    blank = [json.loads(x) for x in full.splitlines()]
    blank[0]["text"] = "  "
    answers.write_text("".join(json.dumps(r) + "\n" for r in blank))
    empty = _diagnose_answers(run_cli, world, answers, export, tmp_path / "e")
    assert empty.exit_code == 2 and f"1 of {len(questions)} answers are empty" in empty.stderr
    by_index = {str(manifest["items"][0]["index"]): "zzz"}
    twice = tmp_path / "twice.json"
    twice.write_text(json.dumps({**{r["question_id"]: r["text"] for r in blank[1:]},
                                 blank[0]["question_id"]: "x", **by_index}))  # fmt: skip
    both = _diagnose_answers(run_cli, world, twice, export, tmp_path / "t")
    assert both.exit_code == 2 and "twice" in both.stderr and "its id and its index" in both.stderr
    # items left unanswered: refused before anything runs, with the count
    answers.write_text("\n".join(full.splitlines()[:-2]) + "\n")
    part = _diagnose_answers(run_cli, world, answers, export, tmp_path / "res4")
    assert part.exit_code == 2 and f"2 of {len(questions)} exported items" in part.stderr
    assert not (tmp_path / "res4" / "store.sqlite").exists()
    # a manifest whose items repeat an id: one line naming the item
    manifest["items"].append(dict(manifest["items"][0], index=10**6))
    (export / "manifest.json").write_text(json.dumps(manifest))
    dup = _diagnose_answers(run_cli, world, answers, export, tmp_path / "res5")
    assert dup.exit_code == 2 and "appears twice" in dup.stderr and "manifest.json" in dup.stderr
    # found in review: an --out that is not an export folder is refused, never cleared
    # (a world's gqa/ folder lost its 200 images to the export's images/)
    data_copy = tmp_path / "data-copy"
    shutil.copytree(world / "gqa" / "images", data_copy / "images")
    before = sorted(p.name for p in (data_copy / "images").iterdir())
    refused = run_cli("conditions", "export", "--data", world, "--out", data_copy,
                      "--suite", "accuracy", "--max-questions", "4")  # fmt: skip
    assert refused.exit_code == 2 and "not a folder vqadiag wrote" in refused.stderr
    assert sorted(p.name for p in (data_copy / "images").iterdir()) == before
    # exporting again into the folder replaces the earlier export's files
    again = _export(run_cli, world, export, "vlmevalkit", "--suite", "accuracy",
                    "--max-questions", "4")  # fmt: skip
    assert not (export / "questions.jsonl").exists() and (export / "VQADiagConditions.tsv").exists()
    assert len(json.loads((export / "manifest.json").read_text())["items"]) == again["items"] == 4
    assert len(list((export / "images").iterdir())) == again["images"]


def test_vlmevalkit_round_trip_gives_the_in_process_results(
    run_cli, llava_dir, world, tmp_path, in_process
):
    pd = pytest.importorskip("pandas")
    export = tmp_path / "export"
    _export(run_cli, world, export, "vlmevalkit")
    table = pd.read_csv(export / "VQADiagConditions.tsv", sep="\t", keep_default_na=False)
    assert list(table.columns) == ["index", "question_id", "image", "question", "answer"]
    # VLMEvalKit decodes the base64 image of each row and writes {model}_{dataset}.tsv
    # (PRED_FORMAT=tsv; its default .xlsx cannot hold the control characters a random
    # model generates)
    model = _harness(llava_dir)
    table["prediction"] = [
        _answer(model, row.question,
                np.asarray(Image.open(io.BytesIO(base64.b64decode(row.image))).convert("RGB")))
        for row in table.itertuples()
    ]  # fmt: skip
    predictions = tmp_path / "tiny_VQADiagConditions.tsv"
    # keyed by index alone (a table that lost the question_id column)
    table.drop(columns=["image", "question_id"]).to_csv(predictions, sep="\t", index=False)
    got = _diagnose_answers(run_cli, world, predictions, export, tmp_path / "res")
    assert got.exit_code == 0, got.stderr
    _same_as_in_process(got.json(), _rows(tmp_path / "res"), in_process)


def test_export_refuses_bad_options_with_one_line(run_cli, world, tmp_path):
    got = run_cli("conditions", "export", "--data", world, "--out", tmp_path / "e",
                  "--prompt", "no placeholder")  # fmt: skip
    assert got.exit_code == 2 and "--prompt" in got.stderr and "{question}" in got.stderr
    (tmp_path / "file").write_text("x")
    got = run_cli("conditions", "export", "--data", world, "--out", tmp_path / "file")
    assert got.exit_code == 2 and "file" in got.stderr
    got = run_cli("diagnose", "--data", world, "--model", f"files:{tmp_path / 'file'}",
                  "--out", tmp_path / "r", "--model-args", f"conditions={tmp_path}")  # fmt: skip
    assert got.exit_code == 2 and "manifest.json" in got.stderr
    # a bad suite list is refused before an earlier export in --out is cleared
    earlier = tmp_path / "earlier"
    earlier.mkdir()
    (earlier / "manifest.json").write_text("{}")
    for suites, says in (("", "no suite named"), ("vibes", "unknown suite(s) ['vibes']")):
        got = run_cli("conditions", "export", "--data", world, "--out", earlier,
                      "--suite", suites)  # fmt: skip
        assert got.exit_code == 2 and f"error: --suite: {says}" in got.stderr
        assert (earlier / "manifest.json").read_text() == "{}"
    # a ranker for a BQD that is given, or that no suite of the export builds
    for extra, says in ((("--bqd", earlier / "manifest.json"), "ranks the BQD built without"),
                        (("--suite", "accuracy"), "is read by the robustness suite")):  # fmt: skip
        got = run_cli("conditions", "export", "--data", world, "--out", earlier,
                      "--bq-ranker", "bleu1", *extra)  # fmt: skip
        assert got.exit_code == 2 and f"error: --bq-ranker: {says}" in got.stderr
        assert (earlier / "manifest.json").read_text() == "{}"


@pytest.mark.slow
@needs_lmms_eval
def test_real_lmms_eval_on_the_exported_task_gives_the_in_process_results(
    run_cli, llava_dir, world, tmp_path, in_process
):
    export = tmp_path / "export"
    _export(run_cli, world, export, "lmms-eval")
    samples = lmms_eval_samples(llava_dir, export, tmp_path)
    got = _diagnose_answers(run_cli, world, samples, export, tmp_path / "res")
    assert got.exit_code == 0, got.stderr
    _same_as_in_process(got.json(), _rows(tmp_path / "res"), in_process)
