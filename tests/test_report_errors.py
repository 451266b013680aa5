"""Bad result folders: one line naming the file and the record, exit code 2."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

FIX = Path(__file__).parent / "fixtures"


@pytest.fixture
def folder(tmp_path):
    out = tmp_path / "res"
    shutil.copytree(FIX / "results_b", out)
    return out


def _edit_results(folder, change):
    path = folder / "results.json"
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def _fails(run_cli, tmp_path, folder, *parts):
    res = run_cli("report", folder, "--out", tmp_path / "out", "--n-bootstrap", "10")
    assert res.exit_code == 2, res.stdout
    line = res.stderr.strip()
    assert line.startswith("error: ") and "\n" not in line
    for part in parts:
        assert part in line, line
    assert not (tmp_path / "out" / "report.html").exists()
    return line


def test_missing_folder_and_results_file(run_cli, tmp_path, folder):
    _fails(run_cli, tmp_path, tmp_path / "nope", "nope", "result folder not found")
    (folder / "results.json").unlink()
    _fails(run_cli, tmp_path, folder, "results.json", "file not found")


def test_wrong_kind_and_version(run_cli, tmp_path, folder):
    _edit_results(folder, lambda d: d.update(kind="vqadiag.report"))
    _fails(run_cli, tmp_path, folder, "results.json", "not a vqadiag results file", "report")
    _edit_results(folder, lambda d: d.update(kind="vqadiag.results", schema_version=2))
    _fails(run_cli, tmp_path, folder, "results.json", "unsupported schema_version 2")


def test_malformed_and_empty_results(run_cli, tmp_path, folder):
    (folder / "results.json").write_text('{"kind": "vqadiag.results", ')
    _fails(run_cli, tmp_path, folder, "results.json", "malformed JSON")
    (folder / "results.json").write_text("")
    _fails(run_cli, tmp_path, folder, "results.json", "file is empty")


def test_bad_summary_estimate(run_cli, tmp_path, folder):
    _edit_results(folder, lambda d: d["summary"]["accuracy"].pop("ci_low"))
    _fails(run_cli, tmp_path, folder, "results.json", "summary.accuracy", "missing field 'ci_low'")
    _edit_results(folder, lambda d: d["summary"]["accuracy"].update(ci_low=1, n="7"))
    _fails(run_cli, tmp_path, folder, "summary.accuracy", "n must be a non-negative integer")
    _edit_results(folder, lambda d: d.pop("model"))
    _fails(run_cli, tmp_path, folder, "results.json", "model.name")


def _edit_rows(folder, lineno, text):
    path = folder / "per_question.jsonl"
    lines = path.read_text().splitlines()
    lines[lineno - 1] = text
    path.write_text("\n".join(lines) + "\n")


def test_malformed_per_question_rows(run_cli, tmp_path, folder):
    table = folder / "per_question.jsonl"
    original = table.read_text()
    _edit_rows(folder, 3, '{"suite": "accuracy", "id": "q03", "values": {"accuracy": NaN}}')
    _fails(run_cli, tmp_path, folder, "per_question.jsonl", "line 3", "NaN")
    table.write_text(original)
    _edit_rows(folder, 2, '{"suite": "accuracy", "values": {}}')
    _fails(run_cli, tmp_path, folder, "per_question.jsonl", "line 2", "missing field 'id'")
    table.write_text(original)
    _edit_rows(folder, 4, '{"suite": "accuracy", "id": "q04", "values": {"accuracy": "yes"}}')
    _fails(run_cli, tmp_path, folder, "line 4: record 'q04'", "must be a finite number")
    table.write_text(original)
    _edit_rows(folder, 5, '{"suite": "accuracy", "id": "q01", "values": {"accuracy": 1}}')
    _fails(run_cli, tmp_path, folder, "line 5: record 'q01'", "duplicate unit")
    table.write_text(original)
    _edit_rows(folder, 6, '{"suite": "accuracy", "id": "q06", "answers": {"all": 3}}')
    _fails(run_cli, tmp_path, folder, "record 'q06'", "answer 'all' must be a string")
    table.write_text(original)
    _edit_rows(folder, 6, '{"suite": "accuracy", "id": "q06", "raw": ["Yes."]}')
    _fails(run_cli, tmp_path, folder, "line 6: record 'q06'", "raw must be an object")
    table.write_text(original)
    _edit_rows(folder, 6, '{"suite": "accuracy", "id": "q06", "raw": {"all": 1}}')
    _fails(run_cli, tmp_path, folder, "record 'q06'", "raw 'all' must be a string")
    table.write_text(original)
    _edit_rows(folder, 1, "[1, 2]")
    _fails(run_cli, tmp_path, folder, "per_question.jsonl", "line 1", "expected an object")


def test_missing_per_question_table(run_cli, tmp_path, folder):
    (folder / "per_question.jsonl").unlink()
    _fails(run_cli, tmp_path, folder, "per_question.jsonl", "file not found")


def test_every_suite_skipped_is_not_an_error(run_cli, tmp_path, folder):
    def skip_all(d):
        d["suites"] = {}
        d["skipped"] = {"accuracy": "no questions", "fpvg": "model has no object masking"}
        d["summary"] = dict.fromkeys(d["summary"])

    _edit_results(folder, skip_all)
    (folder / "per_question.jsonl").write_text("")
    res = run_cli("report", folder, "--out", tmp_path / "out", "--json", "--n-bootstrap", "10")
    assert res.exit_code == 0, res.stderr
    data = res.json()
    cell = data["card"]["rows"][0]["cells"]["accuracy"]
    assert cell["estimate"] is None and cell["not_run"] == "no questions"
    assert data["drilldown"] == {} and data["comparisons"] == []
    html = (tmp_path / "out" / "report.html").read_text()
    assert "not run: model has no object masking" in html
    assert "not run for any model" in html


def test_pair_and_consistency_rows_are_read(folder):
    from vqadiag.report.results import load_result_dir

    rows = [
        {
            "suite": "pairs",
            "id": "1|2",
            "qid": ["1", "2"],
            "image_id": ["7", "8"],
            "question": "Is it red?",
            "truth": ["yes", "no"],
            "answers": {"a": "yes", "b": None},
            "values": {"pair_both_correct": 0},
        },
        {
            "suite": "consistency",
            "id": "3|3_0",
            "qid": "3",
            "image_id": "7",
            "question": "Is it ripe?",
            "sub_question": "Is it <b>green</b>?",
            "truth": "no",
            "sub_truth": "yes",
            "answers": {"main": "no", "sub": "yes"},
            "values": {"reasoning_consistency": 1, "attention_correlation": None},
        },
    ]
    (folder / "per_question.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    rs = load_result_dir(folder)
    pair = rs.rows["pairs"]["1|2"]
    assert (pair.image_id, pair.truth, pair.qid) == ("7 | 8", "yes | no", "1 | 2")
    assert pair.answers == {"a": "yes", "b": None}
    sub = rs.rows["consistency"]["3|3_0"]
    assert sub.question == "Is it ripe? → sub: Is it <b>green</b>?"
    assert sub.truth == "no | sub: yes"
    assert sub.values == {"reasoning_consistency": 1.0, "attention_correlation": None}
