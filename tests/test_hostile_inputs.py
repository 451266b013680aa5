"""Inputs that are wrong, huge, hostile or numeric nonsense (docs/reliability.md,
"Hostile and malformed inputs"): each is refused with one bounded line, never read
whole, never followed out of its folder."""

from __future__ import annotations

import json
import pickle
import time
from pathlib import Path

import pytest

from vqadiag.data.formats.predictions import read_predictions
from vqadiag.errors import DataError, excerpt, show_path_as


def _error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error")]


def _vqa_text(ids: list[str]) -> tuple[str, str]:
    """Official VQA v2 questions and annotations (JSON text) of question ids written as
    they are (``ids``: JSON number or string literals), one per image."""
    questions = ",".join(
        f'{{"image_id": {k}, "question": "is it?", "question_id": {qid}}}'
        for k, qid in enumerate(ids)
    )
    answers = ",".join(f'{{"answer": "yes", "answer_confidence": "yes", "answer_id": {i}}}'
                       for i in range(1, 11))  # fmt: skip
    annotations = ",".join(
        f'{{"question_id": {qid}, "image_id": {k}, "question_type": "is it", '
        f'"answer_type": "yes/no", "multiple_choice_answer": "yes", "answers": [{answers}]}}'
        for k, qid in enumerate(ids)
    )
    return f'{{"questions": [{questions}]}}', f'{{"annotations": [{annotations}]}}'


@pytest.fixture
def vqa_of(tmp_path):
    """``vqa_of(ids, predictions_text)`` → the questions, annotations and prediction files."""

    def write(ids: list[str], predictions: str) -> tuple[Path, Path, Path]:
        paths = [tmp_path / n for n in ("q.json", "a.json", "p.json")]
        for path, text in zip(paths, (*_vqa_text(ids), predictions), strict=True):
            path.write_text(text)
        return paths[0], paths[1], paths[2]

    return write


# -- messages: one bounded line ----------------------------------------------------------


def test_a_pickle_of_shared_references_is_quoted_as_an_excerpt(tmp_path):
    nested: object = "x"
    for _ in range(60):  # 2**60 leaves when written out, a few hundred bytes pickled
        nested = [nested, nested]
    path = tmp_path / "preds.pkl"
    path.write_bytes(pickle.dumps({"q1": {"answer": nested}}))
    assert path.stat().st_size < 2048
    start = time.perf_counter()
    with pytest.raises(DataError) as caught:
        read_predictions(path)
    assert time.perf_counter() - start < 1
    message = str(caught.value)
    assert message.startswith(f"{path}: record 'q1': answer must be a string, got [[[")
    assert len(message) < len(str(path)) + 200 and "\n" not in message


def test_a_50000_item_answer_is_cut_to_an_excerpt(run_cli, vqa_of):
    answer = json.dumps(list(range(50_000)))
    q, a, p = vqa_of(["1"], f'[{{"question_id": 1, "answer": {answer}}}]')
    res = run_cli("score", "vqa", "--questions", q, "--annotations", a, "--predictions", p)
    assert res.exit_code == 2
    (line,) = _error_lines(res.stderr)
    assert "answer must be a string, got [0, 1, 2, 3, 4, 5, ...]" in line
    assert len(line) < 300


def test_a_file_name_with_a_newline_is_quoted(run_cli, tmp_path, vqa_of):
    q, a, _ = vqa_of(["1"], "")
    bad = tmp_path / "bad\nname.json"
    bad.write_text("{not json")
    res = run_cli("score", "vqa", "--questions", q, "--annotations", a, "--predictions", bad)
    assert res.exit_code == 2
    assert res.stderr.count("\n") == 1, res.stderr
    assert res.stderr.startswith(f"error: {str(bad)!r}: malformed JSON")


def test_an_error_names_the_path_given_not_a_private_copy(tmp_path):
    copy = tmp_path / "vqadiag-stream-123.json"
    copy.write_text("[1, 2")
    show_path_as(copy, "/dev/fd/63")
    with pytest.raises(DataError, match=r"^/dev/fd/63: malformed JSON"):
        read_predictions(copy)


def test_excerpt_is_bounded_for_any_value():
    assert excerpt("yes") == "'yes'" and excerpt([1, 2]) == "[1, 2]"
    assert len(excerpt("a" * 100_000)) <= 120
    assert excerpt(10**10_000).startswith("<integer of")
    assert "\n" not in excerpt("a\nb")
    assert json.dumps(excerpt({"k": [1] * 1000}))


# -- endless and huge inputs -----------------------------------------------------------


def test_dev_zero_is_refused_with_one_line(run_cli, vqa_of):
    q, a, _ = vqa_of(["1"], "")
    res = run_cli(
        "score", "vqa", "--questions", q, "--annotations", a, "--predictions", "/dev/zero"
    )
    assert res.exit_code == 2
    assert _error_lines(res.stderr) == [
        "error: /dev/zero: is a character device, expected a file or a pipe"
    ]
    with pytest.raises(DataError, match=r"^/dev/zero: is a character device, expected a regular"):
        read_predictions("/dev/zero")


@pytest.mark.parametrize("name", ["preds.json", "preds.jsonl", "preds.csv"])
def test_a_2_gb_sparse_file_is_refused_without_reading_it(tmp_path, name):
    path = tmp_path / name
    with path.open("wb") as fh:
        fh.truncate(2 << 30)  # 2 GiB of zeros, on disk only as a hole
    start = time.perf_counter()
    with pytest.raises(DataError) as caught:
        read_predictions(path)
    assert time.perf_counter() - start < 1
    assert str(caught.value).startswith(f"{path}: ")
    assert "column 1" in str(caught.value) or "NUL bytes" in str(caught.value)


def test_the_typed_readers_skip_a_sparse_file_without_scanning_it(tmp_path):
    from vqadiag.data.formats.gqa_typed import ScoredQuestion, read_typed_questions
    from vqadiag.data.formats.vqa2_columns import read_annotation_columns, read_result_columns

    path = tmp_path / "a.json"
    with path.open("wb") as fh:
        fh.truncate(2 << 30)
    start = time.perf_counter()
    assert read_annotation_columns(path) is None and read_result_columns(path) is None
    assert read_typed_questions(path, ScoredQuestion) is None
    assert time.perf_counter() - start < 1


def test_an_input_over_the_limit_is_refused(monkeypatch, tmp_path, vqa_of, run_cli):
    import io

    from vqadiag.data.io import bounded

    q, a, p = vqa_of(["1"], '[{"question_id": 1, "answer": "yes"}]')
    monkeypatch.setattr(bounded, "MAX_INPUT_BYTES", 30)
    res = run_cli("score", "vqa", "--questions", q, "--annotations", a, "--predictions", p)
    assert res.exit_code == 2
    assert _error_lines(res.stderr) == [
        f"error: {q}: larger than 30 bytes, the most vqadiag reads (MAX_INPUT_BYTES)"
    ]
    with pytest.raises(DataError, match="^<stdin>: larger than 30 bytes"):
        bounded.read_stream(io.BytesIO(b"x" * 31), "<stdin>")
    assert bounded.read_stream(io.BytesIO(b"x" * 30), "<stdin>") == b"x" * 30


def test_a_pipe_is_named_as_given_in_errors(run_cli, tmp_path, vqa_of):
    import os
    import threading

    q, a, _ = vqa_of(["1"], "")
    fifo = tmp_path / "preds.json"
    os.mkfifo(fifo)

    def feed() -> None:
        with fifo.open("w") as fh:
            fh.write('[{"question_id": 1, "answer": ')

    writer = threading.Thread(target=feed)
    writer.start()
    res = run_cli("score", "vqa", "--questions", q, "--annotations", a, "--predictions", fifo)
    writer.join()
    assert res.exit_code == 2
    (line,) = _error_lines(res.stderr)
    assert line.startswith(f"error: {fifo}: malformed JSON"), line


# -- very large integer ids --------------------------------------------------------------

BIG = "100000000000000000000"  # 10**20: beyond 2**64, read by JSON readers as a double


@pytest.mark.parametrize(
    ("ids", "prediction", "wrong"),
    [
        ([BIG], "100000000000000000001", "q.json"),  # 10**20 + 1 read as 10**20
        (["1"], "123456789012345678901234567890", "p.json"),  # 30 digits
    ],
)
def test_an_id_beyond_exact_integers_is_refused_not_rounded(
    run_cli, vqa_of, ids, prediction, wrong
):
    q, a, p = vqa_of(ids, f'[{{"question_id": {prediction}, "answer": "yes"}}]')
    res = run_cli(
        "score", "vqa", "--questions", q, "--annotations", a, "--predictions", p, "--json"
    )
    assert res.exit_code == 2, res.stdout
    (line,) = _error_lines(res.stderr)
    assert line.startswith(f"error: {q.parent / wrong}: item 0: question id ")
    assert "too large to be read exactly" in line and "write it as a string" in line


def test_the_fast_and_checked_readers_agree_on_large_ids(tmp_path, vqa_of):
    from vqadiag.data.formats.vqa2 import read_vqa_annotations, read_vqa_questions
    from vqadiag.data.formats.vqa2_columns import (
        read_annotation_columns,
        read_question_columns,
        read_result_columns,
    )

    top = str(2**64 - 1)  # exact in both readers; beyond int64, so only the checked reads it
    q, a, p = vqa_of([top, "7"], f'[{{"question_id": {top}, "answer": "yes"}}]')
    assert read_question_columns(q) is None and read_annotation_columns(a) is None
    assert read_result_columns(p) is None
    assert list(read_vqa_questions(q)) == [top, "7"] and top in read_vqa_annotations(a)
    assert read_predictions(p)[top].answer == "yes"
    q, a, p = vqa_of([BIG], f'[{{"question_id": "{BIG}1", "answer": "yes"}}]')
    assert read_question_columns(q) is None and read_annotation_columns(a) is None
    for reader in (read_vqa_questions, read_vqa_annotations):
        with pytest.raises(DataError, match="too large to be read exactly"):
            reader(q if reader is read_vqa_questions else a)
    assert list(read_predictions(p)) == [f"{BIG}1"]  # a string id is kept as written


def test_a_huge_integer_id_in_a_pickle_is_kept_exactly_or_refused(tmp_path):
    path = tmp_path / "p.pkl"
    path.write_bytes(pickle.dumps({10**29 + 7: "yes"}))
    assert list(read_predictions(path)) == [str(10**29 + 7)]
    path.write_bytes(pickle.dumps([{"question_id": 10**5000, "answer": "yes"}]))
    with pytest.raises(DataError, match=r"item 0: question id <integer of \d+ bits> is too long"):
        read_predictions(path)


# -- numeric options ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (("score", "ood", "--alpha", "nan"), "error: --alpha: nan is not a finite number"),
        (("score", "ood", "--alpha", "-5"), "error: --alpha: -5 is not above -1"),
        (("score", "ood", "--alpha", "inf"), "error: --alpha: inf is not a finite number"),
        (("score", "robustness", "--truth", "t", "--clean", "c", "--noisy", "n", "--t", "nan"),
         "error: --t: nan is not a finite number"),
        (("score", "robustness", "--truth", "t", "--clean", "c", "--noisy", "n", "--m", "inf"),
         "error: --m: inf is not a finite number"),
        (("score", "robustness", "--truth", "t", "--clean", "c", "--noisy", "n",
          "--t", "20", "--m", "20"),
         "error: --t/--m: t must be smaller than m, got t=20.0, m=20.0"),
        (("score", "pairs", "--annotations", "a", "--pairs", "p", "--predictions", "x",
          "--pair-threshold", "-inf"), "error: --pair-threshold: -inf is not a finite number"),
        (("score", "consistency", "--threshold", "NaN"),
         "error: --threshold: NaN is not a finite number"),
        (("synth", "--out", "w", "--bias", "1.5"), "error: --bias: 1.5 is not at most 1"),
        (("bq", "build", "--lambda", "nan"), "error: --lambda: nan is not a finite number"),
        (("finetune", "--method", "subq", "--model", "m", "--data", "d", "--out", "o",
          "--lr", "inf"), "error: --lr: inf is not a finite number"),
        (("explain", "train", "--data", "d", "--out", "o", "--margin", "-1"),
         "error: --margin: -1 is not at least 0"),
        (("score", "ood", "--n-bootstrap", "abc"), "error: --n-bootstrap: "),
    ],
)  # fmt: skip
def test_a_bad_option_value_is_one_line(run_cli, args, line):
    res = run_cli(*args)
    assert res.exit_code == 2
    assert res.stderr.count("\n") == 1 and res.stderr.startswith(line), res.stderr
    assert "Usage:" not in res.stderr and not res.stdout


def test_float_options_accept_finite_values(run_cli):
    from vqadiag.console.common import FiniteFloat

    assert FiniteFloat(-1, low_open=True)("0.2") == 0.2
    assert FiniteFloat(0, 1)(1.0) == 1.0 and FiniteFloat()("-1e300") == -1e300
    res = run_cli("score", "ood", "--alpha", "nan", "--help")
    assert res.exit_code == 0  # --help first: the value is not parsed


# -- image ids are names, never paths ----------------------------------------------------


def _png(path: Path) -> Path:
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (4, 4), (200, 10, 10)).save(path)
    return path


@pytest.fixture
def data_with_secret(tmp_path):
    """A GQA data folder with one image, and a PNG outside it that no id may reach."""
    root = tmp_path / "data"
    _png(root / "gqa" / "images" / "ok.png")
    secret = _png(tmp_path / "secret.png")
    return root, secret


@pytest.mark.parametrize(
    "image_id", ["../../secret", "../../../../../../etc/passwd", "..", "C:secret", "a\\b"]
)
def test_an_image_id_that_is_a_path_is_one_line_naming_the_question(data_with_secret, image_id):
    from vqadiag.data.model_inputs.gqa_data import GQAData

    root, secret = data_with_secret
    for id_ in (image_id, str(secret.with_suffix(""))):  # relative escapes and an absolute path
        data = GQAData(root)
        with pytest.raises(DataError) as caught:
            data.pixel_input([id_], questions=["q7"])
        message = str(caught.value)
        assert message.startswith("question 'q7': image id ") and "\n" not in message
        assert message.endswith("an image id is a name, not a path")
        with pytest.raises(DataError, match="not a path"):
            data.images.digest(id_, "q7")
    assert GQAData(root).pixel_input(["ok"]).images[0].shape == (4, 4, 3)


def test_no_image_path_leaves_its_folder(data_with_secret):
    from vqadiag.data.model_inputs.images import ImageFiles

    root, _ = data_with_secret
    files = ImageFiles([root / "gqa"], images_dir=root / "gqa" / "images")
    tried = files.candidates("ok")
    assert tried and all(".." not in p.parts for p in tried)
    assert files.find("ok") == root / "gqa" / "images" / "ok.png"


def test_a_report_never_embeds_a_file_outside_the_data_folder(data_with_secret):
    from types import SimpleNamespace

    from vqadiag.report.thumbnails import drilldown_thumbnails

    root, secret = data_with_secret
    results = SimpleNamespace(data_root=root, images_dir=None)
    rows = [{"id": "q1", "image_id": "../../secret"}, {"id": "q2", "image_id": str(secret)[:-4]},
            {"id": "q3", "image_id": "ok"}]  # fmt: skip
    thumbnails = drilldown_thumbnails([results], {"fpvg": {"rows": rows}})
    assert list(thumbnails) == ["fpvg|q3"]


# -- a setting with its own option -------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "setting", "flag"),
    [
        (("train", "--model", "updn"), "epochs=1", "--epochs"),
        (("train", "--model", "prior"), "seed=3", "--seed"),
        (("explain", "train"), "epochs=1", "--epochs"),
        (("explain", "train"), "split=val", "--split"),
    ],
)
def test_a_setting_with_its_own_option_names_it(run_cli, tmp_path, command, setting, flag):
    (tmp_path / "data").mkdir()
    res = run_cli(*command, "--data", tmp_path / "data", "--out", tmp_path / "run", "-o", setting)
    assert res.exit_code == 2
    key = setting.split("=")[0]
    assert res.stderr == f"error: --option: '{key}' has its own option: use {flag}\n"


def test_train_with_epochs_as_a_setting_names_the_option(run_cli, rendered_world_60, tmp_path):
    res = run_cli("train", "--data", rendered_world_60, "--model", "prior",
                  "--out", tmp_path / "run", "-o", "epochs=1", "-q")  # fmt: skip
    assert res.exit_code == 2 and not (tmp_path / "run").exists()
    assert res.stderr == "error: --option: 'epochs' has its own option: use --epochs\n"
