"""Options that only one suite reads (``diagnose``, ``conditions export``): refused in one
line when that suite is not run, or when they contradict each other, instead of being
accepted and ignored (docs/diagnose.md, "Options that would do nothing")."""

from __future__ import annotations

from pathlib import Path

from vqadiag.errors import DataError

DEFAULT_RANKER = "lasso"


def suite_left_out(suites: str, name: str) -> bool:
    """Whether the ``--suite`` text surely leaves out the built-in suite ``name``: read as
    the diagnosis reads it (:func:`~vqadiag.diagnosis.diagnose.parse_suites`), it names
    only registered suites, none of them ``name``. A list the diagnosis would refuse (no
    name, or one not yet registered: a typo, or a plug-in's suite that registers later)
    is left to it, which names the problem itself."""
    from vqadiag.diagnosis.diagnose import parse_suites

    try:
        return name not in parse_suites(suites)
    except DataError:
        return False


def suite_option(suites: str, option: str, suite: str) -> None:
    """One line when ``option`` was given and ``--suite`` leaves out ``suite``, the one
    suite that reads it."""
    if suite_left_out(suites, suite):
        raise DataError(option, f"is read by the {suite} suite alone, which --suite leaves out")


def basic_question_options(suites: str, bqd: Path | None, bq_ranker: str | None) -> str:
    """The ranker of the BQD a run builds (``lasso`` when none is named), after checking
    that ``--bqd`` and ``--bq-ranker`` go with the robustness suite and not together: a
    given BQD was ranked when it was built."""
    if bqd is not None and bq_ranker is not None:
        raise DataError("--bq-ranker", "ranks the BQD built without --bqd: give one of them")
    given = "--bqd" if bqd is not None else "--bq-ranker" if bq_ranker is not None else None
    if given:
        suite_option(suites, given, "robustness")
    return bq_ranker or DEFAULT_RANKER
