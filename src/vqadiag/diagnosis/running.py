"""Running the suites of a diagnosis: the question-file check, the suites in registry
order with what each ran or why it was skipped (shared by ``diagnose`` and its plan,
docs/diagnose.md)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vqadiag.diagnosis.row_lines import RowLines
from vqadiag.errors import DataError
from vqadiag.suites.base import SuiteSkipped, figures
from vqadiag.suites.sources import release_idle_sources
from vqadiag.suites.state import DiagnoseState, Options


def summary_keys() -> list[str]:
    """The keys of ``results.json`` ``summary``: every registered figure, in display order."""
    return [f.key for _, f in figures()]


def require_questions(root: Path, split: str, shown: Path | None = None) -> None:
    """One :class:`DataError` when the data folder holds no GQA or VQA v2 question file
    of ``split`` (an empty folder, a misspelt ``--split``): every suite would be skipped.
    ``shown``: the source a prepared copy was made from (named instead, with its
    splits)."""
    from vqadiag.data.model_inputs.gqa_data import GQAData
    from vqadiag.data.model_inputs.vqa2_data import VQA2Data

    for reader in (GQAData, VQA2Data):
        try:
            reader(root).questions_path(split)
            return
        except DataError:
            continue
    if shown is not None:
        from vqadiag.data.sources.prepared import available_splits

        held = ", ".join(available_splits(root)) or "none"
        raise DataError(
            shown, f"holds no GQA or VQA v2 questions of split {split!r} (it holds: {held}); "
            "give one of those with --split",
        )  # fmt: skip
    raise DataError(
        root,
        f"no GQA or VQA v2 question file for split {split!r}: no suite could run "
        "(check --data and --split)",
    )


@dataclass
class SuiteRuns:
    """What the suites of one diagnosis produced."""

    #: suite name → its ``results.json`` ``suites`` entry
    results: dict[str, Any] = field(default_factory=dict)
    #: suite name → why it was skipped
    skipped: dict[str, str] = field(default_factory=dict)
    #: the per_question.jsonl rows, as compressed lines (the row objects, or even their
    #: lines, would be held through every later suite until the file is written)
    rows: RowLines = field(default_factory=RowLines)
    #: every registered figure (None until a suite gives it)
    summary: dict[str, Any] = field(default_factory=lambda: dict.fromkeys(summary_keys()))
    #: suite name → the conditions it ran first (a condition two suites share is the
    #: first one's)
    conditions: dict[str, list[str]] = field(default_factory=dict)


def run_suites(
    ran: SuiteRuns,
    the_model: Any,
    state: DiagnoseState,
    options: Options,
    registry: Mapping[str, Any],
) -> None:
    """Run each chosen suite in order into ``ran``; a suite whose capability the model
    lacks, or that skips itself, is recorded under ``skipped`` with the reason. Between
    two suites, data the next one does not read is let go
    (:func:`~vqadiag.suites.sources.release_idle_sources`)."""
    chosen = list(options.suites)
    for i, name in enumerate(chosen):
        _run_suite(ran, the_model, state, name, registry[name])
        upcoming = registry[chosen[i + 1]].datasets if i + 1 < len(chosen) else ()
        release_idle_sources(state, upcoming)


def _run_suite(ran: SuiteRuns, the_model: Any, state: DiagnoseState, name: str, suite: Any) -> None:
    """Run one suite into ``ran``, or record why it was skipped."""
    missing = suite.missing_capability(the_model)
    if missing is not None:
        ran.skipped[name] = missing
        return
    before = set(state.runs)
    try:
        output = suite.run(state)
    except SuiteSkipped as why:
        ran.skipped[name] = str(why)
        return
    finally:
        ran.conditions[name] = [c for c in state.runs if c not in before]
    ran.results[name] = output.result
    ran.rows.extend(output.rows)
    ran.summary.update(output.summary)
