"""Fault injection: every command killed at every write point resumes to the same numbers.

A reference run of each command logs its write points (``VQADIAG_WRITE_LOG``, see
``vqadiag.data.io.faults``). Then, for every k, a fresh copy of the command is killed with
SIGKILL at its k-th write point (``VQADIAG_KILL_AT_WRITE=k``) and run again without the
fault; the second run must exit 0 with artefacts identical to the reference run's — or
refuse with one line, which none of these commands needs to. Two kills run at a time.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from vqadiag.data.io.faults import KILL_ENV, LOG_ENV

pytestmark = pytest.mark.slow

VQADIAG = [sys.executable, "-m", "vqadiag"]
ENV = {**os.environ, "COLUMNS": "120"}
for _name in (KILL_ENV, LOG_ENV):
    ENV.pop(_name, None)


def _run(args: Sequence[str | Path], *, kill_at: int | None = None, log: Path | None = None):
    env = dict(ENV)
    if kill_at is not None:
        env[KILL_ENV] = str(kill_at)
    if log is not None:
        env[LOG_ENV] = str(log)
    return subprocess.run(
        [*VQADIAG, *map(str, args)], env=env, capture_output=True, text=True, timeout=600
    )


def _points(log: Path) -> list[str]:
    return [line.split("\t", 1)[1] for line in log.read_text().splitlines()]


def _reference(args: Sequence[str | Path], tmp: Path) -> list[str]:
    """Run ``args`` uninterrupted; return the names of its write points."""
    log = tmp / "reference.log"
    done = _run(args, log=log)
    assert done.returncode == 0, done.stderr
    return _points(log)


def _kill_at_every_point(
    points: list[str],
    kill_args: Callable[[int], Sequence[str | Path]],
    after_kill: Callable[[int], None],
    tmp: Path,
) -> None:
    """For k = 1..len(points): run ``kill_args(k)`` dying at its k-th write point (which
    must be the reference's k-th), then ``after_kill(k)`` (rerun and compare)."""

    def one(k: int) -> None:
        log = tmp / f"kill-{k}.log"
        died = _run(kill_args(k), kill_at=k, log=log)
        assert died.returncode == -signal.SIGKILL, (k, died.returncode, died.stderr[-500:])
        assert _points(log) == points[:k], f"write point {k} is not the reference's"
        after_kill(k)

    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = [pool.submit(one, k) for k in range(1, len(points) + 1)]
        try:
            for future in futures:
                future.result()
        finally:
            pool.shutdown(cancel_futures=True)
    # one more than there are points: the command runs to the end
    assert _run(kill_args(len(points) + 1), kill_at=len(points) + 1).returncode == 0


def _temporaries(folder: Path) -> list[Path]:
    return list(folder.rglob("*.tmp"))


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("faults")
    done = _run(["synth", "--out", root / "world", "--images", "60", "--seed", "3"])
    assert done.returncode == 0, done.stderr
    return root / "world"


@pytest.fixture(scope="module")
def prior(world, tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("faults-run") / "prior"
    done = _run(["train", "--data", world, "--model", "prior", "--out", run])
    assert done.returncode == 0, done.stderr
    return run


# -- diagnose ---------------------------------------------------------------------------

RESUME_ONLY = ("store.sqlite", "store.sqlite-wal", "store.sqlite-shm", "timing.json")


def _comparable_results(path: Path) -> dict:
    """results.json without what differs between a fresh and a resumed run: the creation
    time, how many answers were computed or found cached, and whether a dataset was."""

    def strip(value):
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in ("cached", "created")}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    result = json.loads(path.read_text())
    conditions = result.pop("conditions")
    result["questions"] = {name: c["questions"] for name, c in conditions.items()}
    return strip(result)


def _assert_same_diagnosis(resumed: Path, reference: Path) -> None:
    assert _comparable_results(resumed / "results.json") == _comparable_results(
        reference / "results.json"
    )
    for path in sorted(reference.rglob("*")):
        rel = path.relative_to(reference)
        if not path.is_file() or rel.name.startswith(".") or rel.name in RESUME_ONLY:
            continue
        if rel.name == "results.json":
            continue
        if rel.name in ("bqd.json", "bqd.meta.json"):  # bqd.json records its build time
            ours, theirs = json.loads((resumed / rel).read_text()), json.loads(path.read_text())
            for name in ("meta", "sha256"):
                ours.pop(name, None), theirs.pop(name, None)
            assert ours == theirs, rel
            continue
        assert (resumed / rel).read_bytes() == path.read_bytes(), rel
    assert not _temporaries(resumed), "a killed run's temporary file outlived the resume"


def _diagnose(world: Path, prior: Path, out: Path, suite: str, ranker: str) -> list:
    return ["diagnose", "--data", world, "--model", prior, "--out", out, "--suite", suite,
            "--bq-ranker", ranker, "--n-bootstrap", "20", "--json"]  # fmt: skip


def test_diagnose_killed_at_every_write_point_resumes_to_the_uninterrupted_numbers(
    world, prior, tmp_path
):
    references = {r: tmp_path / f"reference-{r}" for r in ("bleu1", "rouge")}
    points = _reference(_diagnose(world, prior, references["bleu1"], "all", "bleu1"), tmp_path)
    assert _run(_diagnose(world, prior, references["rouge"], "all", "rouge")).returncode == 0
    # every kind of write point is among them: a kill can land anywhere
    for name in ("store batch before commit", "store batch after commit",
                 "before rename bqd.json", "after rename bqd.json",
                 "before rename bqd.meta.json", "before rename per_question.jsonl",
                 "before rename results.json", "after rename results.json",
                 "after rename timing.json"):  # fmt: skip
        assert name in points, name

    def after_kill(k: int) -> None:
        out = tmp_path / f"killed-{k}"
        assert not (out / "results.json").exists() or "after rename results.json" in points[:k]
        # odd k: the same run again; even k: another ranker
        ranker = "bleu1" if k % 2 else "rouge"
        done = _run(_diagnose(world, prior, out, "all", ranker))
        assert done.returncode == 0, (k, done.stderr[-500:])
        _assert_same_diagnosis(out, references[ranker])
        shutil.rmtree(out)

    _kill_at_every_point(
        points,
        lambda k: _diagnose(world, prior, tmp_path / f"killed-{k}", "all", "bleu1"),
        after_kill,
        tmp_path,
    )


def test_a_run_killed_over_another_rankers_results_never_reuses_the_wrong_dataset(
    world, prior, tmp_path
):
    """The audit's silent failure: a finished ROUGE run, then a BLEU-1 run into the same
    folder killed anywhere; the next run (either ranker) gives its own uninterrupted
    numbers, never the other ranker's basic questions."""
    references = {r: tmp_path / f"reference-{r}" for r in ("bleu1", "rouge")}
    for ranker, out in references.items():
        assert _run(_diagnose(world, prior, out, "robustness", ranker)).returncode == 0
    start = tmp_path / "reference-start"
    shutil.copytree(references["rouge"], start)
    points = _reference(_diagnose(world, prior, start, "robustness", "bleu1"), tmp_path)
    assert "before rename bqd.meta.json" in points

    def kill_args(k: int) -> list:
        out = tmp_path / f"killed-{k}"
        shutil.copytree(references["rouge"], out)
        return _diagnose(world, prior, out, "robustness", "bleu1")

    def after_kill(k: int) -> None:
        out = tmp_path / f"killed-{k}"
        ranker = "bleu1" if k % 2 else "rouge"
        done = _run(_diagnose(world, prior, out, "robustness", ranker))
        assert done.returncode == 0, (k, done.stderr[-500:])
        _assert_same_diagnosis(out, references[ranker])
        shutil.rmtree(out)

    _kill_at_every_point(points, kill_args, after_kill, tmp_path)


# -- report -----------------------------------------------------------------------------


def _report_html(path: Path) -> str:
    return re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d{2}:?\d{2}", "TIME", path.read_text())


def test_report_killed_at_every_write_point_writes_the_same_report(world, prior, tmp_path):
    results = tmp_path / "results"
    done = _run(["diagnose", "--data", world, "--model", prior, "--out", results,
                 "--suite", "accuracy,fpvg", "--n-bootstrap", "20", "--json"])  # fmt: skip
    assert done.returncode == 0, done.stderr
    reference = tmp_path / "reference"
    points = _reference(["report", results, "--out", reference], tmp_path)
    assert points == [f"{when} rename {name}"  # report.json last: it commits the report
                      for name in (".vqadiag-folder.json", "report.html", "report.json")
                      for when in ("before", "after")]  # fmt: skip

    def after_kill(k: int) -> None:
        out = tmp_path / f"killed-{k}"
        done = _run(["report", results, "--out", out])
        assert done.returncode == 0, (k, done.stderr[-500:])
        ours, theirs = (
            json.loads((out / "report.json").read_text()),
            json.loads((reference / "report.json").read_text()),
        )
        assert {**ours, "created": None} == {**theirs, "created": None}
        assert _report_html(out / "report.html") == _report_html(reference / "report.html")
        assert not _temporaries(out)

    _kill_at_every_point(
        points, lambda k: ["report", results, "--out", tmp_path / f"killed-{k}"], after_kill,
        tmp_path,
    )  # fmt: skip


# -- bq build ---------------------------------------------------------------------------


def test_bq_build_killed_at_every_write_point_builds_the_same_dataset(world, tmp_path):
    def args(out: Path) -> list[str | Path]:
        return ["bq", "build", "--pool", world / "gqa" / "train_balanced_questions.json",
                "--main", world / "gqa" / "val_balanced_questions.json", "--dim", "32",
                "-q", "--json", "--out", out]  # fmt: skip

    reference = tmp_path / "reference" / "bqd.json"
    points = _reference(args(reference), tmp_path)
    assert points[-2:] == ["before rename bqd.json", "after rename bqd.json"]
    assert "after rename 1.json" in points  # a checkpoint per chunk of main questions

    def after_kill(k: int) -> None:
        out = tmp_path / f"killed-{k}" / "bqd.json"
        done = _run(args(out))
        assert done.returncode == 0, (k, done.stderr[-500:])
        assert (
            json.loads(out.read_text())["records"] == json.loads(reference.read_text())["records"]
        )
        assert sorted(p.name for p in out.parent.iterdir()) == ["bqd.json"]

    _kill_at_every_point(
        points, lambda k: args(tmp_path / f"killed-{k}" / "bqd.json"), after_kill, tmp_path
    )


# -- synth ------------------------------------------------------------------------------


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_synth_killed_at_every_write_point_leaves_the_old_world_or_the_new_one(tmp_path):
    def args(out: Path, seed: int) -> list[str | Path]:
        return ["synth", "--out", out, "--images", "12", "--seed", str(seed)]

    old_world, new_world = tmp_path / "old", tmp_path / "reference" / "new"
    assert _run(args(old_world, 1)).returncode == 0
    shutil.copytree(old_world, new_world)  # the reference replaces an old world too
    points = _reference(args(new_world, 2), tmp_path)
    old, new = _tree(old_world), _tree(new_world)
    assert old != new
    assert points[-2:] == ["world new moved aside", "world new renamed into place"]

    def kill_args(k: int) -> list[str | Path]:
        # each kill replaces a copy of the old world
        target = tmp_path / f"killed-{k}" / "new"
        shutil.copytree(old_world, target)
        return args(target, 2)

    def after_kill(k: int) -> None:
        target = tmp_path / f"killed-{k}" / "new"
        if target.exists():  # never half a world: the old one whole, or the new one whole
            assert _tree(target) in (old, new), k
        done = _run(args(target, 2))
        assert done.returncode == 0, (k, done.stderr[-500:])
        assert _tree(target) == new
        assert [p.name for p in target.parent.iterdir()] == ["new"], "a killed run's folder"

    _kill_at_every_point(points, kill_args, after_kill, tmp_path)
