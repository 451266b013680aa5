"""`vqadiag report` end to end on the hand-made result folders (tests/fixtures/results_*;
the numbers are worked out in tests/fixtures/results_make.py)."""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
from pathlib import Path

import pytest

from vqadiag.errors import DataError
from vqadiag.report.build import build_report
from vqadiag.report.card import not_run_reason
from vqadiag.report.results import ResultSet, load_result_dirs
from vqadiag.workflows.report import report

FIX = Path(__file__).parent / "fixtures"
A, B, C = FIX / "results_a", FIX / "results_b", FIX / "results_c"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    return report([A, B, C], out, n_bootstrap=300, seed=0, examples=50), out


def _cell(result, model, key):
    row = next(r for r in result["card"]["rows"] if r["model"] == model)
    return row["cells"][key]


def _cmp(result, a, b, key):
    return next(c for c in result["comparisons"] if (c["a"], c["b"], c["metric"]) == (a, b, key))


def test_report_card_copies_the_summaries(built):
    result, _ = built
    assert result["kind"] == "vqadiag.report" and result["schema_version"] == 1
    assert [m["label"] for m in result["models"]] == ["updn", "question_only", "symbolic"]
    assert result["card"]["reference"] == "updn"
    assert _cell(result, "updn", "accuracy")["estimate"] == {
        "value": 75.0,
        "ci_low": 70.0,
        "ci_high": 80.0,
        "n": 20,
    }
    assert _cell(result, "question_only", "delta")["estimate"]["value"] == 100.0
    # symbolic did not run FPVG: "not run" with the reason, not an error
    cell = _cell(result, "symbolic", "fpvg_plus")
    assert cell["estimate"] is None and cell["not_run"] == "model has no object masking"
    assert result["not_run"]["symbolic"]["pairs"] == "no VQA v2 data"


def test_significance_marks_against_the_reference(built):
    result, _ = built
    # accuracy 35 vs 75: discordant 2 vs 10 → McNemar p = 158/4096 < 0.05, lower
    vs = _cell(result, "question_only", "accuracy")["vs_reference"]
    assert vs["test"] == "mcnemar_exact"
    assert vs["p_value"] == pytest.approx(158 / 4096)
    assert vs["direction"] == "lower" and vs["significant"]
    assert vs["difference"]["value"] == pytest.approx(-40.0)  # question_only − updn
    # FPVG+ 30 vs 80: discordant 0 vs 5 → p = 2/32 = 0.0625, not significant, no mark
    vs = _cell(result, "question_only", "fpvg_plus")["vs_reference"]
    assert vs["p_value"] == pytest.approx(0.0625)
    assert vs["direction"] is None and not vs["significant"]
    # pairs 1/6 vs 5/6: discordant 0 vs 4 → p = 2/16
    assert _cell(result, "question_only", "pair_both_correct")["vs_reference"][
        "p_value"
    ] == pytest.approx(0.125)
    assert _cell(result, "updn", "accuracy")["vs_reference"] is None  # the reference itself


def test_statistics_are_compared_by_paired_bootstrap(built):
    result, _ = built
    delta = _cmp(result, "updn", "question_only", "delta")
    assert delta["test"] == "paired_bootstrap"
    assert delta["difference"]["value"] == pytest.approx(100.0)  # Δ 200 − Δ 100
    r = _cmp(result, "updn", "question_only", "r_score")
    assert r["difference"]["value"] == pytest.approx(0.308309 - 1.0, abs=1e-6)
    cons = _cmp(result, "updn", "question_only", "reasoning_consistency")
    assert cons["difference"]["value"] == pytest.approx(75.0)  # 3/4 − 0/2
    assert cons["test"] == "paired_bootstrap"  # clustered by main question


def test_importance_figures_and_the_methods_not_run(built):
    result, _ = built
    assert _cell(result, "updn", "attention_relevant_score")["estimate"]["value"] == 80.0
    assert _cell(result, "updn", "loo_relevant_score")["estimate"]["value"] == 60.0
    # a method the model could not run: "not run" with the suite's reason for that method
    cell = _cell(result, "updn", "gradcam_relevant_score")
    assert cell["estimate"] is None and cell["not_run"] == "model has no gradients"
    cell = _cell(result, "question_only", "attention_relevant_score")
    assert cell["estimate"] is None and cell["not_run"] == "model has no attention"
    cell = _cell(result, "symbolic", "loo_relevant_score")
    assert cell["not_run"] == "model has no object masking"  # the whole suite skipped
    # LOO 20 vs 60 on the same 10 questions: discordant 0 vs 4 → McNemar p = 2/16
    vs = _cell(result, "question_only", "loo_relevant_score")["vs_reference"]
    assert vs["test"] == "mcnemar_exact" and vs["p_value"] == pytest.approx(0.125)
    assert vs["difference"]["value"] == pytest.approx(-40.0)
    # attention: only updn has it, so there is nothing to compare
    assert not any(c["metric"] == "attention_relevant_score" for c in result["comparisons"])


def test_a_skipped_importance_suite_gives_each_method_its_reason():
    rs = ResultSet(
        Path("r"),
        {
            "model": {"name": "prior"},
            "skipped": {
                "importance": "attention: model has no attention; loo: model does not see "
                "objects; gradcam: model has no gradients"
            },
        },
    )
    assert not_run_reason(rs, "attention_relevant_score") == "model has no attention"
    assert not_run_reason(rs, "loo_relevant_score") == "model does not see objects"
    assert not_run_reason(rs, "gradcam_relevant_score") == "model has no gradients"
    assert not_run_reason(rs, "fpvg_plus") is None  # fpvg ran


def test_other_data_is_not_paired(built):
    result, _ = built
    cmp = _cmp(result, "updn", "symbolic", "accuracy")
    assert cmp["paired"] is False and cmp["p_value"] is None
    assert "not paired" in cmp["reason"] and "q01" in cmp["reason"]
    vs = _cell(result, "symbolic", "accuracy")["vs_reference"]
    assert vs["paired"] is False and vs["direction"] is None
    # no comparison for figures a model does not have
    assert not any(
        c["b"] == "symbolic" and c["metric"] == "fpvg_plus" for c in result["comparisons"]
    )


def test_plot_data_and_images(built):
    result, out = built
    plots = result["plots"]
    assert list(plots) == [  # by suite display order: ood, fpvg, importance, robustness, …
        "ood_curve",
        "fpvg_categories",
        "c2i",
        "suff_comp",
        "importance",
        "noise",
        "consistency_quadrants",
    ]
    curve = plots["ood_curve"]["models"][0]
    assert curve["model"] == "updn" and len(curve["points"]) == 22
    assert curve["points"][0]["x"] == pytest.approx(0.3)  # 1 + α at α = −0.7
    assert plots["noise"]["not_run"] == {"symbolic": "no basic-question data"}
    assert [p["value"] for p in plots["noise"]["models"][0]["partitions"]] == [
        90.0,
        90.0,
        80.0,
        70.0,
        60.0,
        50.0,
        40.0,
    ]
    importance = plots["importance"]
    assert list(importance["labels"]) == [  # GradCAM: no model ran it
        "attention|fpvg_plus",
        "attention|fpvg_minus",
        "loo|fpvg_plus",
        "loo|fpvg_minus",
    ]
    updn, question_only = importance["models"]
    assert {k: e["value"] for k, e in updn["values"].items()} == {
        "attention|fpvg_plus": 75.0,
        "attention|fpvg_minus": 100.0,
        "loo|fpvg_plus": 75.0,
        "loo|fpvg_minus": 0.0,
    }
    assert question_only["values"]["attention|fpvg_plus"] is None
    assert question_only["values"]["loo|fpvg_plus"]["value"] == pytest.approx(200 / 3)
    assert importance["not_run"] == {"symbolic": "model has no object masking"}
    html = (out / "report.html").read_text()
    images = html.split('src="data:image/png;base64,')[1:]
    assert len(images) == 7
    for chunk in images:
        png = base64.b64decode(chunk.split('"', 1)[0])
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000


def test_dataset_text_is_escaped(built):
    _, out = built
    html = (out / "report.html").read_text()
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt; cup &amp; saucer" in html
    assert "fish &amp; &lt;chips&gt;" in html
    assert "<script" not in html  # the page has no script at all
    assert "http://" not in html and "https://" not in html  # nothing fetched from a network


def test_drilldown_failures_are_deterministic(built):
    result, _ = built
    acc = result["drilldown"]["accuracy"]
    # failing units: updn q16..q20, question_only q06..q15 and q18..q20 → q06..q20
    assert acc["n_failing"] == 15 and len(acc["rows"]) == 15
    row = next(r for r in acc["rows"] if r["id"] == "q16")
    by_model = {m["model"]: m for m in row["models"]}
    assert by_model["updn"]["failed"] is True and by_model["question_only"]["failed"] is False
    assert row["truth"] == "yes" and row["image_id"] == "2300016"
    assert result["drilldown"]["fpvg"]["n_failing"] == 7  # FPVG− of either model: q04..q10
    assert result["drilldown"]["consistency"]["n_failing"] == 3
    one = build_report(load_result_dirs([A, B]), n_bootstrap=50, seed=3, examples=4)
    two = build_report(load_result_dirs([A, B]), n_bootstrap=50, seed=3, examples=4)
    assert len(one["drilldown"]["accuracy"]["rows"]) == 4
    assert one == two
    ids = [r["id"] for r in one["drilldown"]["accuracy"]["rows"]]
    assert ids == sorted(ids) and set(ids) <= {f"q{i:02d}" for i in range(6, 21)}


def test_cli_gives_the_same_report_bytes_and_a_table(built, run_cli, tmp_path):
    _, out = built
    res = run_cli(
        "report",
        A,
        B,
        C,
        "--out",
        tmp_path / "r",
        "--json",
        "--n-bootstrap",
        "300",
        "--examples",
        "50",
    )
    assert res.exit_code == 0, res.stderr
    data = res.json()
    assert data["files"]["html"] == str(tmp_path / "r" / "report.html")
    one = json.loads((out / "report.json").read_text())
    two = json.loads((tmp_path / "r" / "report.json").read_text())
    one.pop("created"), two.pop("created")
    assert one == two  # same inputs and seed: same report apart from the time
    h1 = (out / "report.html").read_text().split("the creation time")[0]
    h2 = (tmp_path / "r" / "report.html").read_text().split("the creation time")[0]
    assert h1 == h2  # plots included, byte for byte
    res = run_cli(
        "report",
        A,
        B,
        C,
        "--out",
        tmp_path / "t",
        "--reference",
        "question_only",
        "--n-bootstrap",
        "50",
    )
    assert res.exit_code == 0, res.stderr
    assert "reference: question_only" in res.stdout and "not run" in res.stdout
    assert "report.html" in res.stdout
    # against question_only, updn's accuracy (75.00) is significantly higher
    assert "▲" in res.stdout and "†" in res.stdout


def test_unknown_reference_and_duplicate_names(run_cli, tmp_path):
    res = run_cli("report", A, B, "--out", tmp_path / "r", "--reference", "nope")
    assert res.exit_code == 2
    assert "--reference" in res.stderr and "nope" in res.stderr and "updn" in res.stderr
    assert not (tmp_path / "r" / "report.json").exists()
    # one folder twice would be compared with itself and counted twice among the tests
    again = A.parent / ".." / A.parent.name / A.name
    res = run_cli("report", A, B, again, "--out", tmp_path / "r")
    assert res.exit_code == 2
    assert res.stderr.strip() == (
        f"error: {again}: given twice (also as {A}): each model once in a report"
    )
    for twice in ([A, A], [str(A), B, str(A)]):  # the same object twice, through the API
        with pytest.raises(DataError, match="given twice"):
            load_result_dirs(twice)
    copy = tmp_path / "a_copy"
    shutil.copytree(A, copy)  # the same model name in two folders: labelled apart
    labels = [rs.label for rs in load_result_dirs([A, B, copy])]
    assert labels == ["updn", "question_only", "updn (2)"]
    # found in review: a copy of a folder that records its table's digest is the same
    # diagnosis under another path: refused as the same folder given twice is
    committed = tmp_path / "committed"
    shutil.copytree(A, committed)
    results = json.loads((committed / "results.json").read_text())
    table = committed / "per_question.jsonl"
    results["per_question_rows"] = len(table.read_text().splitlines())
    results["per_question_sha256"] = hashlib.sha256(table.read_bytes()).hexdigest()
    (committed / "results.json").write_text(json.dumps(results))
    twin = tmp_path / "twin"
    shutil.copytree(committed, twin)
    res = run_cli("report", committed, B, twin, "--out", tmp_path / "r2")
    assert res.exit_code == 2 and res.stderr.strip() == (
        f"error: {twin}: holds the same diagnosis as {committed} (the same model and "
        "per-question table: a copy?): each model once in a report"
    )


def _accuracy_set(label: str, values: dict[str, int]) -> ResultSet:
    """A result of the accuracy suite alone on ``values``' questions, same data fingerprint."""
    from vqadiag.report.results import Row

    rows = {q: Row("accuracy", q, {"accuracy": v}, {"all": None}) for q, v in values.items()}
    rate = 100 * sum(values.values()) / len(values)
    results = {
        "model": {"name": label},
        "fingerprints": {"data": "same-data"},
        "summary": {"accuracy": {"value": rate, "ci_low": 0, "ci_high": 100, "n": len(values)}},
    }
    return ResultSet(Path(label), results, {"accuracy": rows}, label)


def test_results_on_different_question_subsets_are_compared_on_the_shared_ones():
    """``--max-questions 4`` against all 10 questions (same data fingerprint): the
    difference is taken on the 4 questions both answered, not 80 (A on 10) − 100 (B on 4).
    On q1–q4, A is right on 2 and B on 4: −50 points, discordant 0 vs 2, McNemar p = 2/4."""
    from vqadiag.report.card import compare_pair

    a = _accuracy_set("a", {"q1": 1, "q2": 1, "q3": 0, "q4": 0} | {f"r{i}": 1 for i in range(6)})
    b = _accuracy_set("b", {"q1": 1, "q2": 1, "q3": 1, "q4": 1})
    cmp = compare_pair(a, b, "accuracy", seed=0, n_bootstrap=200)
    assert cmp["paired"] is True and cmp["pairing"] == "fingerprint"
    assert cmp["difference"]["value"] == pytest.approx(-50.0) and cmp["difference"]["n"] == 4
    assert cmp["test"] == "mcnemar_exact" and cmp["p_value"] == pytest.approx(0.5)
    disjoint = _accuracy_set("c", {"s1": 1, "s2": 0})
    none = compare_pair(a, disjoint, "accuracy", seed=0, n_bootstrap=200)
    assert none["paired"] is False and none["difference"] is None
    assert none["reason"] == "no accuracy unit was diagnosed in both results"
