"""The plug-in contract: a new suite and a new model adapter defined in this file only.

Through the public plug-in API (:mod:`vqadiag.plugins`) this file defines

* a model adapter ``toy:`` whose model is blind and case-sensitive: it answers a
  question with its gold answer when the text has an even number of characters
  and is not all upper case, else ``"nope"`` (never a gold answer);
* a suite ``case`` that asks every GQA question again in upper case (its own
  condition ``gqa.upper``) and reports ``case_invariance`` = mean over questions
  of [answer(upper) = answer(plain)].

Hand-worked: the upper-case answer is always "nope", so case_invariance_j =
[len(question_j) is odd], and GQA accuracy = mean [len even] = 100 − case_invariance.
``vqadiag diagnose`` runs both (in-process, and in a subprocess that loads this file
with ``--plugin``); the figure appears in ``results.json``, the CLI summary, the
export tables and ``report.html`` (a card column, a drill-down and a bar chart) with no change
to the package.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

from vqadiag import plugins
from vqadiag.plugins import (
    Capabilities,
    Condition,
    Drilldown,
    Figure,
    ModelOutput,
    Suite,
    SuiteOutput,
    estimate_of,
    is_zero,
    mean_ci,
    plain_run,
    probe_of,
    unit_row,
)

NOPE = "nope"


class ToyModel:
    """Blind and case-sensitive (module docstring)."""

    name = "toy"
    capabilities = Capabilities(visual="none", object_masking=False, probabilities=False)

    def __init__(self, spec: str) -> None:
        self.spec = spec
        self.answer_vocab = [NOPE]

    def predict(self, batch: Any, visual: Any = None) -> ModelOutput:
        answers = [
            str(batch.record(i).get("answer")) if len(q) % 2 == 0 and not q.isupper() else NOPE
            for i, q in enumerate(batch.questions)
        ]
        return ModelOutput(answers)

    def fingerprint(self) -> str:
        return f"toy-{self.spec}"


class CaseSuite(Suite):
    """Does the answer survive an upper-cased question?"""

    name = "case"
    title = "Case invariance"
    datasets = ("gqa",)
    conditions = ("gqa.all", "gqa.upper")
    requires: ClassVar[dict[str, str]] = {"reruns": "needs the model on upper-cased questions"}
    display_order = 95
    figures = (Figure("case_invariance", "case invariance"),)
    drilldown = Drilldown("Answer changed by upper case", is_zero("case_invariance"))
    plot_figures = ("case_invariance",)

    def run(self, state: Any) -> SuiteOutput:
        src, plain = plain_run(state)
        probes = [
            probe_of(src.records[q], q, question=src.records[q]["question"].upper())
            for q in src.qids
        ]
        upper = state.run(src.ctx, Condition("gqa.upper", "text", {"case": "upper"}), probes)
        same = np.array(
            [a.answer == b.answer for a, b in zip(plain.answers, upper.answers, strict=True)], float
        )
        o = state.options
        est = mean_ci(same, n_resamples=o.n_bootstrap, seed=o.seed).to_dict()
        result = {"case_invariance": est["value"], "n": len(same), "ci": {"case_invariance": est}}
        rows = [
            unit_row(
                "case",
                q,
                src.records[q],
                answers={"all": a.answer, "upper": b.answer},
                values={"case_invariance": int(s)},
            )
            for q, a, b, s in zip(src.qids, plain.answers, upper.answers, same, strict=True)
        ]
        return SuiteOutput(
            result, rows, {"case_invariance": estimate_of(result["ci"], "case_invariance")}
        )


def register() -> None:
    """Register the toy adapter and suite (a plug-in module does this when imported)."""
    plugins.register_adapter("toy", ToyModel, "toy model of tests/test_plugins.py")
    plugins.register_suite(CaseSuite)


def unregister() -> None:
    plugins.unregister_adapter("toy")
    plugins.unregister_suite("case")


if __name__.startswith("vqadiag_plugin_"):  # loaded by `vqadiag ... --plugin tests/test_plugins.py`
    register()


# --------------------------------------------------------------------------- tests
@pytest.fixture(scope="module")
def world(tmp_path_factory):
    from vqadiag.synth import generate_world

    root = tmp_path_factory.mktemp("plug") / "world"
    generate_world(root, images=40, seed=5)
    return root


@pytest.fixture
def registered():
    register()
    yield
    unregister()


def _hand_worked(result_dir: Path) -> tuple[float, float]:
    """(accuracy, case_invariance) in % from the diagnosed questions' texts."""
    questions = json.loads((result_dir / "inputs" / "gqa_questions.json").read_text())
    odd = np.array([len(r["question"]) % 2 == 1 for r in questions.values()], float)
    return 100 * (1 - odd.mean()), 100 * odd.mean()


def test_toy_suite_and_adapter_end_to_end(world, tmp_path, run_cli, registered):
    out = tmp_path / "toy"
    args = ["diagnose", "--data", world, "--model", "toy:v1", "--out", out]
    args += ["--suite", "accuracy,case,fpvg", "--n-bootstrap", "50"]
    cli = run_cli(*args)
    assert cli.exit_code == 0, cli.stderr
    # the CLI summary shows the figure under its declared label
    assert "case invariance" in cli.stdout
    results = json.loads((out / "results.json").read_text())
    accuracy, invariance = _hand_worked(out)
    assert results["summary"]["case_invariance"]["value"] == pytest.approx(invariance)
    assert results["summary"]["accuracy"]["value"] == pytest.approx(accuracy)
    assert 0 < invariance < 100
    assert results["suites"]["case"]["n"] == results["summary"]["case_invariance"]["n"] > 20
    assert (
        results["model"]["name"] == "toy" and results["model"]["capabilities"]["visual"] == "none"
    )
    # its condition ran and is cached like the built-in ones
    assert results["conditions"]["gqa.upper"]["computed"] > 0
    # a blind toy model still gets FPVG (it can be rerun): exactly 0
    assert results["summary"]["fpvg_plus"]["value"] == 0.0
    rows = [json.loads(line) for line in (out / "per_question.jsonl").open()]
    case_rows = [r for r in rows if r["suite"] == "case"]
    assert all(r["answers"]["upper"] == NOPE for r in case_rows)
    assert np.mean([r["values"]["case_invariance"] for r in case_rows]) * 100 == pytest.approx(
        invariance
    )
    # vqadiag suites lists it with its declarations
    listing = json.loads(run_cli("suites", "--json").stdout)["suites"]
    assert listing["case"]["figures"][0]["key"] == "case_invariance"
    assert listing["case"]["requires"] == {"reruns": CaseSuite.requires["reruns"]}
    # a rerun computes nothing: every condition comes from the store
    again = run_cli(*args, "--json")
    assert again.exit_code == 0
    assert all(c["computed"] == 0 for c in json.loads(again.stdout)["conditions"].values())

    # export: the per-question column and the summary figure
    table = tmp_path / "pq.csv"
    assert run_cli("export", out, "--out", table).exit_code == 0
    import pandas as pd

    frame = pd.read_csv(table)
    case = frame[frame.suite == "case"]
    assert 100 * case.case_invariance.mean() == pytest.approx(invariance)
    summary = tmp_path / "summary.csv"
    assert run_cli("export", out, "--out", summary, "--table", "summary").exit_code == 0
    tidy = pd.read_csv(summary)
    assert tidy[tidy.figure == "case_invariance"].value.iloc[0] == pytest.approx(invariance)

    # report: a card column with the label and a drill-down headed by the declared title
    report_dir = tmp_path / "report"
    assert run_cli("report", out, "--out", report_dir).exit_code == 0
    report = json.loads((report_dir / "report.json").read_text())
    columns = {c["key"]: c for c in report["card"]["columns"]}
    assert columns["case_invariance"]["label"] == "case invariance"
    cell = report["card"]["rows"][0]["cells"]["case_invariance"]
    assert cell["estimate"]["value"] == pytest.approx(invariance)
    drill = report["drilldown"]["case"]
    assert drill["title"] == "Answer changed by upper case"
    assert drill["n_failing"] == round(len(case_rows) * (1 - invariance / 100))
    plot = report["plots"]["suite_case"]
    assert plot["models"][0]["values"]["case_invariance"]["value"] == pytest.approx(invariance)
    html = (report_dir / "report.html").read_text()
    assert "case invariance" in html and "Answer changed by upper case" in html
    assert 'id="plot-suite_case"' in html and 'alt="Case invariance" src="data:image/png' in html


def test_missing_capability_skips_with_the_declared_reason(world, tmp_path, run_cli, registered):
    preds = {
        q: "yes" for q in json.loads((world / "gqa" / "val_balanced_questions.json").read_text())
    }
    path = tmp_path / "p.json"
    path.write_text(json.dumps(preds))
    out = tmp_path / "files"
    cli = run_cli(
        "diagnose", "--data", world, "--model", f"files:{path}", "--out", out,
        "--suite", "case", "--json",
    )  # fmt: skip
    # the only suite asked for was skipped: the reason is recorded, and the command fails
    assert cli.exit_code == 1, cli.stderr
    assert cli.stderr.strip().endswith(
        "every suite asked for was skipped (case): nothing was diagnosed"
    )
    result = json.loads(cli.stdout)
    assert result["skipped"] == {"case": CaseSuite.requires["reruns"]}
    assert result["summary"]["case_invariance"] is None


def test_plugin_file_loaded_by_a_fresh_process(world, tmp_path):
    """``--plugin FILE``: a new process registers the suite and adapter from this file."""
    out = tmp_path / "sub"
    env = {k: v for k, v in os.environ.items() if k != "VQADIAG_PLUGINS"}
    cmd = [
        sys.executable, "-m", "vqadiag", "diagnose", "--data", str(world), "--model", "toy:v2",
        "--out", str(out), "--suite", "case", "--n-bootstrap", "20", "--json",
        "--plugin", __file__,
    ]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    _, invariance = _hand_worked(out)
    assert result["summary"]["case_invariance"]["value"] == pytest.approx(invariance)
    # without the plug-in the suite and the adapter are unknown: one line each, exit 2
    cmd_plain = [c for c in cmd if c not in ("--plugin", __file__)]
    plain = subprocess.run(cmd_plain, capture_output=True, text=True, env=env, timeout=300)
    assert plain.returncode == 2
    assert "unknown model adapter 'toy'" in plain.stderr or "unknown suite" in plain.stderr
    assert len(plain.stderr.strip().splitlines()) == 1


def test_report_and_export_of_a_plugin_folder_need_no_plugin(world, tmp_path):
    """results.json declares its suites: a fresh process without the plug-in renders the
    plug-in's figure with its own label, drill-down and bar chart, and exports it."""
    out = tmp_path / "made"
    env = {k: v for k, v in os.environ.items() if k != "VQADIAG_PLUGINS"}
    vqadiag = [sys.executable, "-m", "vqadiag"]
    made = subprocess.run(
        [*vqadiag, "diagnose", "--data", str(world), "--model", "toy:v3", "--out", str(out),
         "--suite", "accuracy,case", "--n-bootstrap", "20", "--plugin", __file__],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    declared = json.loads((out / "results.json").read_text())["declarations"]["case"]
    assert declared["figures"][0]["label"] == "case invariance"
    assert declared["drilldown"] == {
        "title": "Answer changed by upper case", "rule": "is_zero", "column": "case_invariance"
    }  # fmt: skip
    _, invariance = _hand_worked(out)

    report_dir = tmp_path / "report"
    done = subprocess.run(
        [*vqadiag, "report", str(out), "--out", str(report_dir)],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads((report_dir / "report.json").read_text())
    columns = {c["key"]: c for c in report["card"]["columns"]}
    assert columns["case_invariance"]["label"] == "case invariance"
    cell = report["card"]["rows"][0]["cells"]["case_invariance"]
    assert cell["estimate"]["value"] == pytest.approx(invariance)
    assert report["drilldown"]["case"]["title"] == "Answer changed by upper case"
    plot = report["plots"]["suite_case"]
    assert plot["models"][0]["values"]["case_invariance"]["value"] == pytest.approx(invariance)
    html = (report_dir / "report.html").read_text()
    assert 'id="plot-suite_case"' in html and 'alt="Case invariance" src="data:image/png' in html

    summary = tmp_path / "summary.csv"
    done = subprocess.run(
        [*vqadiag, "export", str(out), "--out", str(summary), "--table", "summary"],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    import pandas as pd

    tidy = pd.read_csv(summary)
    assert tidy[tidy.figure == "case_invariance"].value.iloc[0] == pytest.approx(invariance)


def test_unknown_plugin_file_is_one_line(tmp_path, run_cli, world):
    cli = run_cli(
        "diagnose", "--data", world, "--model", "toy:x", "--out", tmp_path / "o",
        "--plugin", tmp_path / "absent.py",
    )  # fmt: skip
    assert cli.exit_code == 2
    assert "absent.py" in cli.stderr and "plug-in file not found" in cli.stderr


def test_registry_refuses_a_figure_key_of_another_suite():
    class Clash(Suite):
        name = "clash"
        figures = (Figure("accuracy", "again"),)

    plugins.registered_suites()  # built-ins loaded
    with pytest.raises(ValueError, match="reuses a figure key of suite 'accuracy'"):
        plugins.register_suite(Clash)
    assert "clash" not in plugins.registered_suites()


def test_plugin_files_with_one_name_load_both_and_errors_are_one_line(tmp_path, run_cli, world):
    for folder, label in (("a", "first"), ("b", "second")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "myplug.py").write_text(
            "from vqadiag.plugins import Figure, Suite, register_suite\n"
            f"@register_suite\nclass S(Suite):\n    name = 'plug_{folder}'\n"
            f"    figures = (Figure('fig_{folder}', '{label}'),)\n"
        )
    cli = run_cli(
        "suites", "--json", "--plugin", tmp_path / "a" / "myplug.py",
        "--plugin", tmp_path / "b" / "myplug.py",
    )  # fmt: skip
    assert cli.exit_code == 0, cli.stderr
    listing = json.loads(cli.stdout)["suites"]
    assert {"plug_a", "plug_b"} <= set(listing)
    plugins.unregister_suite("plug_a")
    plugins.unregister_suite("plug_b")
    broken = tmp_path / "broken.py"
    broken.write_text("raise RuntimeError('boom')\n")
    cli = run_cli("suites", "--plugin", broken)
    assert cli.exit_code == 2 and "RuntimeError: boom" in cli.stderr
    assert len(cli.stderr.strip().splitlines()) == 1
    cli = run_cli("suites", "--plugin", "no_such_module_xyz")
    assert cli.exit_code == 2 and "no_such_module_xyz" in cli.stderr


def test_a_plugin_replaces_a_built_in_suite_of_the_same_name(tmp_path, run_cli):
    from vqadiag.protocols.gqa.suite import AccuracySuite

    plug = tmp_path / "replace_accuracy.py"
    plug.write_text(
        "from vqadiag.plugins import register_suite\n"
        "from vqadiag.protocols.gqa.suite import AccuracySuite\n"
        "@register_suite\nclass Mine(AccuracySuite):\n    title = 'my accuracy'\n"
    )
    try:
        cli = run_cli("suites", "--json", "--plugin", plug)
        assert cli.exit_code == 0, cli.stderr
        assert json.loads(cli.stdout)["suites"]["accuracy"]["title"] == "my accuracy"
    finally:
        plugins.register_suite(AccuracySuite)


def test_suites_run_in_the_built_in_order_whatever_was_imported_first(tmp_path):
    """A script that imports one suite's module before anything else (to patch it, say)
    still gets the built-ins in their run order, and a plug-in after them."""
    from vqadiag.suites.base import BUILTIN_MODULES

    plug = tmp_path / "late_suite.py"
    plug.write_text(
        "from vqadiag.plugins import register_suite\n"
        "from vqadiag.suites.base import Suite\n"
        "@register_suite\nclass Late(Suite):\n    name = 'late'\n    figures = ()\n"
    )
    code = (
        "import importlib, json, sys\n"
        "import vqadiag.protocols.consistency.suite, vqadiag.protocols.robustness.suite\n"
        "from vqadiag.suites.base import registered_suites\n"
        f"importlib.import_module('vqadiag.plugins').load_plugins([{str(plug)!r}])\n"
        "print(json.dumps([[n, type(s).__module__] for n, s in registered_suites().items()]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    names, modules = zip(*json.loads(out), strict=True)
    assert list(modules[:-1]) == list(BUILTIN_MODULES) and names[-1] == "late"


def test_a_suite_registered_after_its_built_in_was_removed_runs_last():
    """Removing a built-in gives up its place: a suite registered later under the name is
    a plug-in like any other (found in review)."""
    from vqadiag.protocols.ood.suite import OODSuite
    from vqadiag.suites.base import registered_suites, unregister_suite

    class Other(OODSuite):
        title = "other ood"

    Other.__module__ = "some_plugin"
    try:
        unregister_suite("ood")
        plugins.register_suite(Other)
        assert list(registered_suites())[-1] == "ood"
    finally:
        unregister_suite("ood")
        plugins.register_suite(OODSuite)
    assert list(registered_suites()).index("ood") == 3
