"""Glue of ``vqadiag report``: result folders → ``report.json`` + ``report.html``
(docs/report.md)."""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from vqadiag.data.io.folders import FolderKind, read_json_file
from vqadiag.data.io.outputs import outputs_apart
from vqadiag.report.drilldown import DEFAULT_EXAMPLES


def _earlier_report_folder(folder: Path) -> bool:
    """A report folder an earlier vqadiag wrote: its ``report.json`` is of kind
    ``vqadiag.report``."""
    from vqadiag.report.build import REPORT_KIND

    report_json = read_json_file(folder / "report.json")
    return isinstance(report_json, dict) and report_json.get("kind") == REPORT_KIND


#: ``report --out``
REPORT_FOLDER = FolderKind("report folder", "vqadiag report (report.json)", _earlier_report_folder)


def report(
    result_dirs: str | Path | Sequence[str | Path],
    out: str | Path,
    *,
    reference: str | None = None,
    seed: int = 0,
    n_bootstrap: int = 1000,
    examples: int = DEFAULT_EXAMPLES,
) -> dict[str, Any]:
    """Compare the models of ``result_dirs`` and write ``OUT/report.json`` and ``OUT/report.html``.

    The report card copies each result's summary Estimates; every pair of models
    is compared on each figure with a paired test on the same units (docs/protocols.md §8;
    McNemar exact for 0/1 outcomes, paired bootstrap otherwise), cells are marked
    against ``reference`` (default: the first folder). Returns the ``report.json``
    object plus ``files: {json, html}``.
    """
    from vqadiag import __version__
    from vqadiag.data.io.atomic import FolderLock, write_bytes_atomic
    from vqadiag.data.io.folders import claim_folder, owned_folder
    from vqadiag.data.io.jsonio import write_json
    from vqadiag.report.build import build_report
    from vqadiag.report.html import render_html
    from vqadiag.report.plots import draw_all
    from vqadiag.report.results import load_result_dirs
    from vqadiag.report.thumbnails import drilldown_thumbnails

    outputs_apart({"--out": out}, {}, read_whole={"RESULT_DIR": result_dirs})
    owned_folder(out, REPORT_FOLDER)  # before the work
    sets = load_result_dirs(result_dirs)
    created = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat()
    result = build_report(
        sets,
        reference=reference,
        seed=seed,
        n_bootstrap=n_bootstrap,
        examples=examples,
        created=created,
        version=__version__,
    )
    folder = claim_folder(out, REPORT_FOLDER)
    with FolderLock(folder):
        json_path, html_path = folder / "report.json", folder / "report.html"
        for earlier in (json_path, html_path):  # never one run's JSON beside another's page
            earlier.unlink(missing_ok=True)
        thumbs = drilldown_thumbnails(sets, result["drilldown"])
        html = render_html(result, draw_all(result["plots"]), thumbs)
        write_bytes_atomic(html_path, html.encode("utf-8"))
        write_json(json_path, result, indent=True)  # last: the report is whole once it is
    return result | {"files": {"json": str(json_path), "html": str(html_path)}}


TABLES = ("per-question", "summary")


def export(
    result_dirs: str | Path | Sequence[str | Path], out: str | Path, *, table: str = "per-question"
) -> dict[str, Any]:
    """Write the ``per-question`` or ``summary`` table of ``result_dirs`` to ``out``.

    The format follows the suffix: ``.csv``, ``.jsonl`` or ``.parquet``
    (:mod:`vqadiag.report.tables`). Returns ``{out, format, table, rows,
    columns, models}``.
    """
    from vqadiag.data.io.atomic import writable_file
    from vqadiag.errors import DataError
    from vqadiag.report.results import load_result_dirs
    from vqadiag.report.tables import per_question_table, summary_table, table_format, write_table

    if table not in TABLES:
        raise DataError("--table", f"unknown table {table!r} (known: {', '.join(TABLES)})")
    table_format(out)  # refuse an unknown suffix before reading anything
    outputs_apart({"--out": out}, {}, read_whole={"RESULT_DIR": result_dirs})
    writable_file(out)
    sets = load_result_dirs(result_dirs)
    frame = per_question_table(sets) if table == "per-question" else summary_table(sets)
    fmt = write_table(frame, out)
    return {
        "out": str(out),
        "format": fmt,
        "table": table,
        "rows": len(frame),
        "columns": [str(c) for c in frame.columns],
        "models": [rs.label for rs in sets],
    }
