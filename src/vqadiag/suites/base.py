"""The plug-in contract of a diagnostic suite (docs/contributing.md, "Add a suite").

A suite is one protocol of ``vqadiag diagnose``. It is a subclass of
:class:`Suite`, registered with :func:`register_suite`, and declares

* ``name`` and ``title``; ``datasets`` it reads (``vqadiag suites`` lists them, and a
  diagnosis lets go of VQA v2 question records before a suite that does not declare
  ``"vqa2"``: a suite that reads them must declare it); ``conditions`` it plans (the
  condition names it runs);
* ``requires``: model capabilities (:class:`vqadiag.models.base.Capabilities`
  flags) it cannot run without, each with the reason given when missing;
* ``figures``: every summary figure it reports (:class:`Figure`: key, label,
  unit, direction, decimals, the per-unit column it aggregates, the paired test);
* ``drilldown``: which units are failures, for the report's example tables;
* ``plot_figures``: figures the report draws as a bar chart per model;

and implements :meth:`Suite.run`, which runs the model through the state's
prediction store and scores once: the result dict, one row per unit (with the
per-unit ``values`` the figures aggregate) and the summary estimates.

Everything that lists suites or figures — ``diagnose``, the CLI summary,
``results.json``, ``export``, the report card, drill-downs and plots — iterates
:func:`suites` / :func:`figures`, so a new suite is one module (plus its test).
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from vqadiag.errors import SuiteSkipped as SuiteSkipped  # re-exported: the suite contract
from vqadiag.registry import Registry

if TYPE_CHECKING:
    from vqadiag.metrics.compare import PairedComparison
    from vqadiag.suites.state import DiagnoseState

#: per-unit values of one model's suite rows: ``{unit id: {column: value}}``
Units = Mapping[str, Mapping[str, Any]]
#: a paired test of one figure between two models: units of A and B, A's suite result →
#: the comparison of A − B (None when the units carry no values)
PairedTest = Callable[..., "PairedComparison | None"]
#: a drill-down failure rule: a row's ``values`` → failed (True / False) or None (no value)
FailureRule = Callable[[Mapping[str, Any]], "bool | None"]


@dataclass(frozen=True)
class Figure:
    """One summary figure of a suite.

    ``key``: its name in ``results.json`` ``summary``; ``label`` everywhere it is
    shown; ``unit`` ("%", "0–1" …); ``direction``: "higher" or "lower" is better,
    or "neither"; ``decimals`` shown; ``column``: the per-unit value in the suite's
    rows whose mean it is (default: ``key``); ``test``: the paired test, "rate"
    (McNemar on binary units, else paired bootstrap of the mean difference) or a
    callable (:data:`PairedTest`); ``clusters``: units ``"a|b"`` are resampled by
    ``a`` (several rows per main question); ``card``: a column of the report card;
    ``many``: the value is a list of estimates (one per partition …); ``bounded``: a
    rate in points whose interval ``--precision`` narrows (docs/diagnose.md, "A
    precision budget"; not a ratio such as GQA-OOD's Δ, nor a figure measured on a
    declared sample).
    """

    key: str
    label: str
    unit: str = "%"
    direction: str = "higher"
    decimals: int = 2
    column: str | None = None
    test: str | PairedTest = "rate"
    clusters: bool = False
    card: bool = True
    many: bool = False
    bounded: bool = True

    @property
    def values_column(self) -> str:
        """The per-unit column the figure aggregates."""
        return self.column or self.key

    def format(self, value: Any) -> str:
        """``value`` at the figure's decimals; ``-`` when missing or NaN."""
        if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
            return "-"
        if math.isnan(value):
            return "-"
        return f"{value:.{self.decimals}f}"


def below_one(column: str) -> FailureRule:
    """Failure when ``column`` < 1 (a wrong answer; soft scores below full credit)."""

    def failed(values: Mapping[str, Any]) -> bool | None:
        v = values.get(column)
        return None if v is None else v < 1.0

    failed.declared = ("below_one", column)  # type: ignore[attr-defined]  # suites.declared
    return failed


def is_zero(column: str) -> FailureRule:
    """Failure when ``column`` = 0."""

    def failed(values: Mapping[str, Any]) -> bool | None:
        v = values.get(column)
        return None if v is None else v == 0.0

    failed.declared = ("is_zero", column)  # type: ignore[attr-defined]  # suites.declared
    return failed


#: what a finding rule compares a figure with, besides a number (:class:`FindingRule`)
COMPARES = ("blind", "own")


@dataclass(frozen=True)
class FindingRule:
    """A verdict the report states about a model when one figure's test supports it
    (docs/report.md, "Findings"; evaluated by :mod:`vqadiag.report.findings`).

    ``key``: the summary figure; ``compare``: ``"blind"`` (the paired test against the
    strongest blind model's figure), ``"own"`` (the figure is a difference within the
    model, e.g. its multi-modal gain, and its suite recorded the paired test of that
    difference = 0 in ``results.json`` ``suites[suite].tests[key]``) or a number (a
    threshold the figure's 95% interval is tested against); ``superseded_by``: another
    figure that tests the same claim more directly (the rule says nothing about a model
    that has it); ``fires``: ``"above"`` / ``"below"`` (significantly, after Holm's
    correction) or ``"not_above"`` (the test does not show the figure above);
    ``min_value`` ≤ value < ``max_value``: optional bounds on the value itself;
    ``verdict``: a few words; ``sentence``: its evidence, a format string with the
    fields ``{label} {value} {ci} {other} {other_value} {diff} {p} {test} {threshold}``
    (``{p}`` reads ``p = …`` or ``p < …``) and ``{summary[KEY]}`` (another figure of the
    same model); ``tone``: ``"good"``, ``"bad"`` or ``"neutral"``.
    """

    key: str
    compare: str | float
    fires: str
    verdict: str
    sentence: str
    tone: str = "neutral"
    min_value: float | None = None
    max_value: float | None = None
    superseded_by: str | None = None

    def __post_init__(self) -> None:
        if self.fires not in ("above", "below", "not_above"):
            raise ValueError(f"FindingRule.fires must be above, below or not_above: {self.fires!r}")
        if self.compare not in COMPARES and not isinstance(self.compare, (int, float)):
            raise ValueError(
                f"FindingRule.compare must be 'blind', 'own' or a number: {self.compare!r}"
            )


@dataclass(frozen=True)
class Drilldown:
    """The report's example failures of a suite: a title and the failure rule."""

    title: str
    failed: FailureRule


@dataclass(frozen=True)
class Plot:
    """A figure of the report over every model's results (docs/report.md, "Plots").

    ``id``: its name in ``report.json`` ``plots`` and its HTML anchor; ``data``: the
    result sets (:class:`vqadiag.report.results.ResultSet`) → a JSON-able dict with a
    ``title`` and ``models`` (one entry per model drawn; a ``not_run`` map for the
    others); ``draw``: that dict → a base64 PNG (the helpers of
    :mod:`vqadiag.report.plots`)."""

    id: str
    data: Callable[[Any], dict[str, Any]]
    draw: Callable[[Mapping[str, Any]], str]


@dataclass(frozen=True)
class SummaryTable:
    """A table of a suite's own that ``vqadiag diagnose`` prints below the summary:
    a title, the column headers and rows of text."""

    title: str
    columns: tuple[str, ...]
    rows: list[tuple[str, ...]]


@dataclass
class SuiteOutput:
    """What a suite hands back: scoring dict, per-unit rows, summary estimates."""

    result: dict[str, Any]
    rows: list[dict[str, Any]] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)


class Suite:
    """Base class of a diagnostic suite (module docstring). Subclass, declare, register."""

    name: ClassVar[str]
    title: ClassVar[str] = ""
    datasets: ClassVar[tuple[str, ...]] = ()
    conditions: ClassVar[tuple[str, ...]] = ()
    requires: ClassVar[Mapping[str, str]] = {}
    figures: ClassVar[tuple[Figure, ...]] = ()
    #: the verdicts the report may state from this suite's figures
    findings: ClassVar[tuple[FindingRule, ...]] = ()
    drilldown: ClassVar[Drilldown | None] = None
    #: figure keys the report draws as one grouped bar chart per model (empty: no chart)
    plot_figures: ClassVar[tuple[str, ...]] = ()
    #: the suite's own figures of the report, in display order
    plots: ClassVar[tuple[Plot, ...]] = ()
    #: position of the suite's figures in summaries and on the card (lower first)
    display_order: ClassVar[float] = 100.0
    #: the suite runs its own conditions on its own prefix of the questions
    #: (``Options.questions_for(name)``, grown by ``--precision``); False: it scores the
    #: shared plain run, which covers every diagnosed question
    own_prefix: ClassVar[bool] = False

    def missing_capability(self, model: Any) -> str | None:
        """The reason the model cannot be diagnosed by this suite, from ``requires``."""
        caps = model.capabilities
        for flag, reason in self.requires.items():
            if not getattr(caps, flag, False):
                return reason
        return None

    def run(self, state: DiagnoseState) -> SuiteOutput:
        """Run the model under the suite's conditions and score them."""
        raise NotImplementedError

    def summary_tables(self, result: Mapping[str, Any]) -> list[SummaryTable]:
        """Tables of the suite's result the ``diagnose`` summary prints (default none)."""
        return []

    def not_run_reason(self, key: str, skipped: str | None, result: Any) -> str | None:
        """Why figure ``key`` is missing from a result: by default the suite's skip reason
        (``skipped``); ``result`` is the suite's result dict when it ran."""
        return skipped


_REGISTRY: Registry[Suite] = Registry("suite")
_BUILTINS_LOADED = False
_LOADED_PLUGINS: set[str] = set()

#: the built-in suites, in the order ``diagnose`` runs them
BUILTIN_MODULES = (
    "vqadiag.protocols.gqa.suite",
    "vqadiag.protocols.vqa.suite",
    "vqadiag.protocols.gain.suite",
    "vqadiag.protocols.ood.suite",
    "vqadiag.protocols.fpvg.suite",
    "vqadiag.protocols.importance.suite",
    "vqadiag.protocols.robustness.suite",
    "vqadiag.protocols.consistency.suite",
)


#: built-in suite name → its place in the run order (that of :data:`BUILTIN_MODULES`, not
#: of their imports: a script that imports one suite module first runs the same order)
_BUILTIN_RANK: dict[str, int] = {}


def register_suite(cls: type[Suite]) -> type[Suite]:
    """Class decorator: add a suite to the registry (a later one of the same name replaces it).

    A plug-in's suite registers after the built-ins (they are loaded first), so a plug-in
    of a built-in's name replaces it and keeps its place in the run order."""
    if cls.__module__ not in BUILTIN_MODULES:
        load_builtin_suites()
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"a suite needs a name that is an identifier, got {name!r}")
    keys = [f.key for f in cls.figures]
    if len(set(keys)) != len(keys):
        raise ValueError(f"suite {name!r} declares a figure key twice")
    for other in _REGISTRY.as_dict().values():
        if other.name != name and set(keys) & {f.key for f in other.figures}:
            raise ValueError(f"suite {name!r} reuses a figure key of suite {other.name!r}")
    if cls.__module__ in BUILTIN_MODULES:
        _BUILTIN_RANK[name] = BUILTIN_MODULES.index(cls.__module__)
    _REGISTRY.add(name, cls())
    return cls


def unregister_suite(name: str) -> None:
    """Remove a suite from the registry (tests, plug-ins that replace one); a suite
    registered later under the name runs after the built-ins."""
    _REGISTRY.remove(name)
    _BUILTIN_RANK.pop(name, None)


def load_builtin_suites() -> None:
    """Register the built-in suites (once), before any plug-in."""
    global _BUILTINS_LOADED
    if _BUILTINS_LOADED:
        return
    _BUILTINS_LOADED = True
    for module in BUILTIN_MODULES:
        importlib.import_module(module)


def _load_builtins() -> None:
    """The built-ins, then the plug-ins of entry points and ``VQADIAG_PLUGINS``."""
    load_builtin_suites()
    from vqadiag.plugins import load_plugins

    load_plugins(())


def registered_suites() -> dict[str, Suite]:
    """Every registered suite by name: the built-ins in run order, then plug-ins."""
    _load_builtins()
    entries = _REGISTRY.as_dict()
    last = len(BUILTIN_MODULES)
    return {n: entries[n] for n in sorted(entries, key=lambda n: _BUILTIN_RANK.get(n, last))}


def get_suite(name: str) -> Suite:
    """The suite registered as ``name`` (KeyError if none)."""
    return registered_suites()[name]


def figures() -> list[tuple[Suite, Figure]]:
    """Every figure of every suite, in display order (suite ``display_order``, then
    declaration order)."""
    ordered = sorted(registered_suites().values(), key=lambda s: s.display_order)
    return [(s, f) for s in ordered for f in s.figures]


def finding_rules() -> list[tuple[Suite, FindingRule]]:
    """Every finding rule of every suite, in display order (like :func:`figures`)."""
    ordered = sorted(registered_suites().values(), key=lambda s: s.display_order)
    return [(s, r) for s in ordered for r in s.findings]


def figure(key: str) -> tuple[Suite, Figure] | None:
    """The suite and figure of summary key ``key`` (None when no suite declares it)."""
    for suite, fig in figures():
        if fig.key == key:
            return suite, fig
    return None
