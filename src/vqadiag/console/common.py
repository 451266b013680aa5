"""Shared command-line plumbing: options, error handling, JSON and table output."""

from __future__ import annotations

import functools
import math
import sqlite3
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, NoReturn, TypeVar

import orjson
import typer

from vqadiag.arguments import MAX_SEED
from vqadiag.data.io.folders import FolderKind
from vqadiag.errors import DataError, excerpt, one_line, shown_path

F = TypeVar("F", bound=Callable[..., Any])


class FiniteFloat:
    """The parser of every float option: a finite number (``nan``, ``inf`` refused)
    within optional bounds (``low`` / ``high``, open when ``low_open`` / ``high_open``).
    A bad value is a ``typer.BadParameter``, which the application prints as one line
    naming the option (:mod:`vqadiag.console.apps`)."""

    def __init__(
        self,
        low: float | None = None,
        high: float | None = None,
        *,
        low_open: bool = False,
        high_open: bool = False,
    ) -> None:
        self.low, self.high, self.low_open, self.high_open = low, high, low_open, high_open

    def __call__(self, value: Any) -> float:
        """``value`` as a float, or ``typer.BadParameter`` saying why not."""
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise typer.BadParameter(f"{excerpt(value)} is not a number") from None
        if not math.isfinite(number):
            raise typer.BadParameter(f"{value} is not a finite number")
        low, high = self.low, self.high
        if low is not None and (number < low or (self.low_open and number == low)):
            raise typer.BadParameter(
                f"{number:g} is not {'above' if self.low_open else 'at least'} {low:g}"
            )
        if high is not None and (number > high or (self.high_open and number == high)):
            raise typer.BadParameter(
                f"{number:g} is not {'below' if self.high_open else 'at most'} {high:g}"
            )
        return number


def float_option(
    *names: str,
    help: str,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    high_open: bool = False,
) -> Any:
    """A ``--option FLOAT`` parsed by :class:`FiniteFloat` (every float option is one)."""
    parse = FiniteFloat(low, high, low_open=low_open, high_open=high_open)
    return typer.Option(*names, help=help, parser=parse, metavar="FLOAT")


JsonFlag = Annotated[bool, typer.Option("--json", help="Print one JSON object instead of tables.")]
PluginOption = Annotated[
    list[str] | None,
    typer.Option(
        "--plugin",
        help="A module or .py file that registers suites or model adapters (repeatable; "
        "also the VQADIAG_PLUGINS variable and installed vqadiag.plugins entry points).",
    ),
]
QuietFlag = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars.")]
#: every seed goes to JSON, NumPy and PyTorch as a signed 64-bit integer (MAX_SEED)
SeedOption = Annotated[
    int, typer.Option("--seed", min=0, max=MAX_SEED, help="Seed of the bootstrap intervals.")
]
#: ``train``, ``explain train`` and ``finetune``: the seed of the weights and the intervals
TrainingSeedOption = Annotated[
    int, typer.Option("--seed", min=0, max=MAX_SEED, help="Seed of training and intervals.")
]
#: ``diagnose`` and ``conditions export``: the seed also ranks the basic questions
DiagnoseSeedOption = Annotated[
    int,
    typer.Option(
        "--seed", min=0, max=MAX_SEED,
        help="Seed of the bootstrap intervals and of the LASSO basic-question ranking.",
    ),
]  # fmt: skip
ResamplesOption = Annotated[
    int, typer.Option("--n-bootstrap", min=10, help="Bootstrap resamples for 95% intervals.")
]
ModelArgsOption = Annotated[
    str | None,
    typer.Option(
        "--model-args",
        help="Settings of an adapter model, KEY=VALUE,… (hf: chat VLMs device, dtype, "
        "batch_size, prompt, extraction, max_new_tokens; ViLT / BLIP probs, batch_size, "
        "max_new_tokens, device; openai: model, in_flight, timeout, max_retries, "
        "api_key_env, image_format, revision, prompt, extraction, max_new_tokens; files: "
        "conditions, extraction).",
    ),
]
DeviceOption = Annotated[
    str | None,
    typer.Option("--device", help="Device of an in-process hf: model (cpu, cuda, cuda:1 …)."),
]
DtypeOption = Annotated[
    str | None,
    typer.Option(
        "--dtype", help="Weights dtype of an in-process hf: model (auto, float32, bfloat16 …)."
    ),
]
AllowMissing = Annotated[
    bool,
    typer.Option("--allow-missing", help="Count questions without a prediction as wrong."),
]


def model_settings(
    model_args: str | None, device: str | None = None, dtype: str | None = None
) -> dict[str, str]:
    """``--model-args`` parsed, with ``--device`` / ``--dtype`` added (given twice: an error)."""
    from vqadiag.models.model_args import parse_model_args

    settings = parse_model_args(model_args)
    for key, value in (("device", device), ("dtype", dtype)):
        if value is None:
            continue
        if key in settings:
            raise DataError(f"--{key}", f"also given in --model-args ({key}={settings[key]})")
        settings[key] = value
    return settings


def rereadable_paths(value: Any) -> Any:
    """Option callback: pipes and process substitutions read once into a temporary file
    (:func:`vqadiag.data.io.streams.rereadable`), so that sniffing a format does not eat them."""
    from vqadiag.data.io.streams import rereadable

    if value is None:
        return None
    try:
        if isinstance(value, (list, tuple)):
            return [rereadable(v) for v in value]
        return rereadable(value)
    except DataError as err:  # while the options are parsed: no cli_errors around yet
        fail(err)


def fail(err: object) -> NoReturn:
    """Print ``error: {err}`` on stderr (one line) and exit with code 2."""
    typer.echo(f"error: {err}", err=True)
    raise typer.Exit(2) from None


def existing_file(help_text: str, *names: str) -> Any:
    """A required ``--option PATH`` (``names``: its flags when not the parameter's own):
    existence and kind are checked by the readers, not by click, so a folder or unreadable
    file is one line (``cli_errors``), not a usage box; a pipe is read once
    (:func:`rereadable_paths`)."""
    return typer.Option(..., *names, help=help_text, callback=rereadable_paths)


def optional_file(help_text: str, *names: str) -> Any:
    """An optional input ``--option PATH`` (default None in the signature), read like
    :func:`existing_file`'s."""
    return typer.Option(*names, help=help_text, callback=rereadable_paths)


def cli_errors(fn: F) -> F:
    """Turn ``DataError`` (bad input), ``OSError`` (the file system refused) and a prediction
    store's ``sqlite3.DatabaseError`` into one line on stderr and exit code 2."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except DataError as err:
            fail(err)
        except OSError as err:  # permission denied, a file where a folder is expected, full disk …
            where = "file system" if err.filename is None else shown_path(err.filename)
            typer.echo(f"error: {where}: {one_line(str(err.strerror or err))}", err=True)
            raise typer.Exit(2) from None
        except sqlite3.DatabaseError as err:  # the prediction store (e.g. disk full)
            typer.echo(f"error: prediction store (store.sqlite): {err}", err=True)
            raise typer.Exit(2) from None

    return wrapper  # type: ignore[return-value]


def print_json(obj: Any) -> None:
    """Write one JSON object to stdout (NaN becomes null)."""
    option = orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS
    sys.stdout.write(orjson.dumps(obj, option=option).decode() + "\n")


def fmt_rate(ci: Mapping[str, Any] | None, value: float | None = None) -> tuple[str, str]:
    """``("63.20", "[61.90, 64.41]")`` for a rate and its interval; NaN shows as ``-``."""
    v = ci["value"] if ci is not None else value
    if v is None or v != v:
        return "-", "-"
    if ci is None or ci.get("ci_low") is None or ci["ci_low"] != ci["ci_low"]:
        return f"{v:.2f}", ""
    return f"{v:.2f}", f"[{ci['ci_low']:.2f}, {ci['ci_high']:.2f}]"


def fmt_estimate(est: Mapping[str, Any], decimals: int = 2) -> tuple[str, str]:
    """``("63.20", "[61.90, 64.41]")`` for an estimate at ``decimals``; NaN shows as ``-``."""
    v = est.get("value")
    if v is None or v != v:
        return "-", "-"
    low, high = est.get("ci_low"), est.get("ci_high")
    if low is None or low != low or high is None:
        return f"{v:.{decimals}f}", ""
    return f"{v:.{decimals}f}", f"[{low:.{decimals}f}, {high:.{decimals}f}]"


def rate_table(title: str, rows: Sequence[tuple[str, Mapping[str, Any] | None, Any]]) -> None:
    """Print a table of ``(label, ci_object, n)`` rows: value, 95% interval, n."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_column("95% CI", justify="right")
    table.add_column("n", justify="right")
    for label, ci, n in rows:
        value, interval = fmt_rate(ci)
        table.add_row(label, value, interval, "" if n is None else str(n))
    Console().print(table)


def emit(result: Mapping[str, Any], as_json: bool, render: Callable[[Mapping[str, Any]], None]):
    """Print ``result`` as JSON or through its human renderer."""
    if as_json:
        print_json(result)
    else:
        render(result)


def output_file(path: Path | None) -> Path | None:
    """An optional output file, checked before the work: not a folder, in a folder that
    can be written (created when missing); otherwise one line naming it."""
    from vqadiag.data.io.atomic import writable_file

    return None if path is None else writable_file(path)


def output_dir(path: Path | None, ours: tuple[str, ...] | FolderKind = ()) -> Path | None:
    """An optional output folder, checked before the work (not created: a run that fails
    on its inputs leaves nothing behind): writable; with ``ours`` a non-empty folder that
    is not vqadiag's is refused, so a user's own files are never written among. ``ours``
    is a :class:`~vqadiag.data.io.folders.FolderKind` (the folder must be marked as one, or
    be an earlier vqadiag's, :func:`~vqadiag.data.io.folders.owned_folder`) or the names the
    command writes there (one of them must be present)."""
    from vqadiag.data.io.atomic import output_folder, writable_folder
    from vqadiag.data.io.folders import owned_folder

    if path is None:
        return None
    if isinstance(ours, FolderKind):
        return owned_folder(path, ours)
    if ours:
        return output_folder(path, ours, create=False)
    return writable_folder(path, create=False)


#: ``--all-questions`` of the GQA scorers
AllQuestions = Annotated[
    bool,
    typer.Option(
        "--all-questions", help="Use every question, not only those with isBalanced true."
    ),
]


def note_prediction_counts(result: Mapping[str, Any], where: str) -> None:
    """Say on stderr how many predictions were ignored, converted, null or missing."""
    notes = {
        "extra_predictions": f"predictions for questions outside {where} were ignored "
        "(as the official script ignores them)",
        "converted_predictions": "predictions were JSON booleans or numbers, read as "
        "yes / no / digits (GQA's official script counts them wrong, VQA's stops on them)",
        "null_predictions": "predictions were null, scored wrong (as officially)",
    }
    for key, text in notes.items():
        if result.get(key):
            typer.echo(f"note: {result[key]} {text}", err=True)
    note_missing(result.get("missing_predictions"))


def note_missing(missing: int | Mapping[str, int] | None) -> None:
    """Say on stderr how many scored questions had no prediction and were counted
    wrong (``--allow-missing``): ``missing`` is a count, or one per prediction file."""
    counts = missing.items() if isinstance(missing, Mapping) else [("", missing)]
    for label, n in counts:
        if n:
            of = f" in the {label} predictions" if label else ""
            typer.echo(f"note: {n} scored questions had no prediction{of}, counted wrong "
                       "(--allow-missing)", err=True)  # fmt: skip
