"""Diagnosis results as pandas tables: ``vqadiag.per_question_table`` / ``summary_table`` and
``vqadiag export`` (CSV, JSON Lines, Parquet), on the hand-made result folders
(tests/fixtures/results_make.py works their numbers out)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pandas as pd
import pytest

import vqadiag
from vqadiag.report.results import summary_suites
from vqadiag.report.tables import UNIT_COLUMNS

FIX = Path(__file__).parent / "fixtures"
A, B, C = FIX / "results_a", FIX / "results_b", FIX / "results_c"


def test_per_question_table_rederives_every_mean_figure():
    frame = vqadiag.per_question_table([A, B])
    assert list(frame.columns[:7]) == list(UNIT_COLUMNS)
    assert UNIT_COLUMNS == ("model", "suite", "id", "qid", "image_id", "question", "truth")
    assert frame.groupby("model", sort=False).size().to_dict() == {"updn": 70, "question_only": 70}
    # hand-worked: accuracy 75 / 35, LOO relevant score 60 / 20 (results_make.py)
    acc = frame[frame.suite == "accuracy"].groupby("model").accuracy.mean() * 100
    assert acc.to_dict() == {"question_only": 35.0, "updn": 75.0}
    loo = frame.groupby("model").loo_relevant_score.mean() * 100
    assert loo.to_dict() == pytest.approx({"question_only": 20.0, "updn": 60.0})
    # docs/results-schema.md: summary[key].value == 100 × mean(values[key]) over the rows
    means = [k for k in summary_suites() if k not in ("delta", "r_score")]
    summary = vqadiag.summary_table([A, B])
    checked = 0
    for (model, figure), value in summary.set_index(["model", "figure"]).value.items():
        if figure in means:
            rows = frame[(frame.model == model) & frame[figure].notna()]
            assert 100 * rows[figure].mean() == pytest.approx(value), (model, figure)
            checked += 1
    assert checked == 23  # 12 figures for updn (no GradCAM), 11 for question_only (no attention)
    # answers per condition; NaN where a row does not carry a value
    row = frame[(frame.model == "updn") & (frame.suite == "fpvg") & (frame.id == "q09")].iloc[0]
    assert (row.answer_all, row.answer_rel, row.answer_irrel) == ("no", "green", "no")
    assert pd.isna(row.accuracy) and row.fpvg_plus == 0.0
    assert frame.accuracy.dtype == "float64"


def test_summary_table_is_tidy_in_card_order():
    summary = vqadiag.summary_table([A, C])
    assert list(summary.columns) == ["model", "figure", "value", "ci_low", "ci_high", "n"]
    updn = summary[summary.model == "updn"]
    # display order of the suite registry: accuracy first, consistency last, the noise
    # partitions after R_score
    assert updn.figure.iloc[0] == "accuracy" and updn.figure.iloc[-1] == "reasoning_consistency"
    figures = list(updn.figure)
    assert figures.index("r_score") + 7 == figures.index("noise_accuracy_7")
    first = updn.set_index("figure").loc["noise_accuracy_1"]
    assert first[["value", "ci_low", "ci_high", "n"]].tolist() == [90.0, 85.0, 95.0, 10]
    # symbolic ran the accuracy suite only: the other figures are absent, not NaN rows
    assert summary[summary.model == "symbolic"].figure.tolist() == ["accuracy"]
    assert str(summary.n.dtype) == "Int64"


def test_same_model_twice_gets_distinct_labels(tmp_path):
    copy = tmp_path / "again"
    shutil.copytree(A, copy)
    frame = vqadiag.summary_table([A, copy])
    assert frame.model.unique().tolist() == ["updn", "updn (2)"]


@pytest.mark.parametrize("suffix", [".csv", ".jsonl", ".parquet"])
def test_export_cli_round_trips(run_cli, tmp_path, suffix):
    if suffix == ".parquet":
        pytest.importorskip("pyarrow")
    out = tmp_path / f"rows{suffix}"
    res = run_cli("export", A, B, "--out", out, "--json")
    assert res.exit_code == 0, res.stderr
    info = res.json()
    assert (
        info["format"] == suffix[1:]
        and info["rows"] == 140
        and info["models"]
        == [
            "updn",
            "question_only",
        ]
    )
    back = {
        ".csv": lambda p: pd.read_csv(p, dtype={"id": str, "qid": str, "image_id": str}),
        ".jsonl": lambda p: pd.read_json(p, lines=True, dtype={"id": str, "image_id": str}),
        ".parquet": pd.read_parquet,
    }[suffix](out)
    expected = vqadiag.per_question_table([A, B])
    assert list(back.columns) == info["columns"] == list(expected.columns)
    pd.testing.assert_frame_equal(
        back[["model", "suite", "id", "accuracy", "loo_relevant_score"]],
        expected[["model", "suite", "id", "accuracy", "loo_relevant_score"]],
        check_dtype=False,
    )
    human = run_cli("export", A, "--table", "summary", "--out", tmp_path / "s.csv")
    assert human.exit_code == 0 and "summary table: 21 rows × 6 columns (updn)" in human.stdout


def test_every_format_writes_each_float_exactly(run_cli, tmp_path):
    """Found in review: JSON Lines rounded to 10 significant digits (35.7142857143 for
    35.714285714285715); CSV, JSON Lines and Parquet now read back the same floats."""
    expected = vqadiag.summary_table([A, B])
    for suffix, read in (
        (".csv", pd.read_csv),
        (".jsonl", lambda p: pd.read_json(p, lines=True, precise_float=True)),
    ):
        out = tmp_path / f"s{suffix}"
        assert run_cli("export", A, B, "--table", "summary", "--out", out).exit_code == 0
        back = read(out)
        for column in ("value", "ci_low", "ci_high"):
            assert back[column].tolist() == pytest.approx(
                expected[column].tolist(), rel=0, abs=0, nan_ok=True
            ), (suffix, column)


def test_export_bad_input_names_the_file(run_cli, tmp_path):
    res = run_cli("export", A, "--out", tmp_path / "rows.xlsx")
    assert res.exit_code == 2 and "rows.xlsx: unknown table format '.xlsx'" in res.stderr
    res = run_cli("export", A, "--table", "pairs", "--out", tmp_path / "rows.csv")
    assert res.exit_code == 2 and "unknown table 'pairs'" in res.stderr
    res = run_cli("export", tmp_path / "nowhere", "--out", tmp_path / "rows.csv")
    assert res.exit_code == 2 and "nowhere: result folder not found" in res.stderr
    broken = tmp_path / "broken"
    shutil.copytree(A, broken)
    lines = (broken / "per_question.jsonl").read_text().splitlines()
    record = json.loads(lines[2])
    record["values"]["accuracy"] = "high"
    lines[2] = json.dumps(record)
    (broken / "per_question.jsonl").write_text("\n".join(lines) + "\n")
    res = run_cli("export", broken, "--out", tmp_path / "rows.csv")
    assert res.exit_code == 2
    assert "per_question.jsonl: line 3: record 'q03': value 'accuracy'" in res.stderr
    assert not (tmp_path / "rows.csv").exists()


def test_parquet_without_pyarrow_says_how_to_get_it(run_cli, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow → ImportError
    res = run_cli("export", A, "--out", tmp_path / "rows.parquet")
    assert res.exit_code == 2
    assert "rows.parquet: writing Parquet needs pyarrow: pip install 'vqadiag[parquet]'" in (
        res.stderr
    )
