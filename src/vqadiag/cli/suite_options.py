"""Options that only one suite reads (``diagnose``, ``conditions export``): refused in one
line when that suite is not run, or when they contradict each other, instead of being
accepted and ignored (docs/diagnose.md, "Options that would do nothing")."""

from __future__ import annotations

from pathlib import Path

from vqadiag.errors import DataError

DEFAULT_RANKER = "lasso"


def suite_selected(suites: str, name: str) -> bool:
    """Whether the ``--suite`` text (``all`` or comma-separated names) runs ``name``;
    the names themselves are checked by the diagnosis, after any plug-in registers its
    suites."""
    names = {s.strip() for s in suites.split(",")}
    return "all" in names or name in names


def basic_question_options(suites: str, bqd: Path | None, bq_ranker: str | None) -> str:
    """The ranker of the BQD a run builds (``lasso`` when none is named), after checking
    that ``--bqd`` and ``--bq-ranker`` go with the robustness suite and not together: a
    given BQD was ranked when it was built."""
    if bqd is not None and bq_ranker is not None:
        raise DataError("--bq-ranker", "ranks the BQD built without --bqd: give one of them")
    given = "--bqd" if bqd is not None else "--bq-ranker" if bq_ranker is not None else None
    if given and not suite_selected(suites, "robustness"):
        raise DataError(given, "is read by the robustness suite alone, which --suite leaves out")
    return bq_ranker or DEFAULT_RANKER
