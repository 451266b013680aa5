"""results.json declares its suites (vqadiag.suites.declared): round trips and bad input."""

from __future__ import annotations

import json
from typing import Any

import pytest

from vqadiag.errors import DataError
from vqadiag.suites.base import registered_suites, unregister_suite
from vqadiag.suites.declared import (
    FUNCTION_TEST,
    declared_suite,
    register_declared,
    suite_declaration,
)


def _round_trip(name: str) -> tuple[Any, Any]:
    suite = registered_suites()[name]
    data = json.loads(json.dumps(suite_declaration(suite)))  # through JSON, as written
    return suite, declared_suite(name, data, "results.json")


@pytest.mark.parametrize("name", list(registered_suites()))
def test_every_built_in_suite_round_trips(name):
    suite, declared = _round_trip(name)
    assert declared.title == suite.title
    assert declared.display_order == suite.display_order
    assert declared.findings == suite.findings
    assert declared.plot_figures == suite.plot_figures
    for fig, back in zip(suite.figures, declared.figures, strict=True):
        expected = FUNCTION_TEST if callable(fig.test) else fig.test
        assert (back.key, back.label, back.unit, back.direction, back.decimals, back.test) == (
            fig.key, fig.label, fig.unit, fig.direction, fig.decimals, expected,
        )  # fmt: skip
        assert (back.column, back.clusters, back.card, back.many) == (
            fig.column, fig.clusters, fig.card, fig.many,
        )  # fmt: skip


def test_failure_rules_come_back_as_the_same_rule():
    suite, declared = _round_trip("fpvg")  # is_zero("fpvg_plus")
    assert declared.drilldown.title == suite.drilldown.title
    for values in ({"fpvg_plus": 0}, {"fpvg_plus": 1}, {}):
        assert declared.drilldown.failed(values) == suite.drilldown.failed(values)
    suite, declared = _round_trip("accuracy")
    for values in ({"accuracy": 0.3}, {"accuracy": 1.0}, {"accuracy": None}):
        assert declared.drilldown.failed(values) == suite.drilldown.failed(values)


def test_a_custom_paired_test_is_declared_as_the_plugins():
    data = suite_declaration(registered_suites()["ood"])
    tests = {f["key"]: f["test"] for f in data["figures"]}
    assert tests["delta"] == FUNCTION_TEST and tests["acc_tail"] == "rate"


def test_declared_suites_register_only_when_no_code_provides_them():
    data = suite_declaration(registered_suites()["fpvg"])
    renamed = {
        **data,
        "title": "declared elsewhere",
        "figures": [{**f, "key": f"x_{f['key']}"} for f in data["figures"]],
        "findings": [],
    }
    results = {"declarations": {"fpvg": {**data, "title": "ignored"}, "xsuite": renamed}}
    try:
        assert register_declared(results, "r/results.json") == ["xsuite"]
        assert registered_suites()["fpvg"].title != "ignored"  # the code's suite stays
        assert registered_suites()["xsuite"].title == "declared elsewhere"
    finally:
        unregister_suite("xsuite")


@pytest.mark.parametrize(
    ("declarations", "message"),
    [
        ([], "'declarations' must be an object"),
        ({"s": []}, "suite 's': must be an object"),
        ({"s": {"figures": {}}}, "suite 's': 'figures' must be a list"),
        ({"s": {"figures": [{"label": "no key"}]}}, "a figure must be an object with a string"),
        ({"s": {"figures": [{"key": "k"}]}}, "figure 'k': "),
        ({"s": {"figures": [{"key": "k", "label": "L", "direction": "up"}]}}, "unknown direction"),
        ({"s": {"figures": [{"key": "k", "label": "L", "decimals": -1}]}}, "'decimals' must"),
        ({"s": {"figures": [], "findings": [{"key": "k"}]}}, "finding rule:"),
        ({"bad name": {"figures": []}}, "needs a name that is an identifier"),
        ({"t": {"figures": [{"key": "accuracy", "label": "L"}]}}, "reuses a figure key"),
    ],
)
def test_malformed_declarations_name_the_file_and_suite(declarations, message):
    with pytest.raises(DataError, match="results.json") as err:
        register_declared({"declarations": declarations}, "run/results.json")
    assert message in str(err.value)
    assert len(str(err.value).splitlines()) == 1
    for name in ("s", "t", "bad name"):
        unregister_suite(name)
