"""vqadiag: what accuracy hides about your VQA model.

The Python API mirrors the command line: each function below takes the same
files as its command and returns the dict that the command prints with
``--json``::

    import vqadiag
    result = vqadiag.score_vqa(questions="q.json", annotations="a.json", predictions="p.json")
    result["overall"], result["ci"]["overall"]

Models, diagnosis and the report follow the same rule (``vqadiag.diagnose(...)``
returns ``results.json``'s content). Whole-number arguments are bounded as the
command's options are (``n_bootstrap`` at least 10 …) and NaN comes back as ``None``
(:mod:`vqadiag.arguments`). Diagnosis results come back as pandas
tables too: ``vqadiag.per_question_table(["results/updn", "results/prior"])``
and ``vqadiag.summary_table(...)``. Names are imported lazily, so ``import
vqadiag`` stays light.
"""

from __future__ import annotations

import functools
import importlib
from typing import Any

__version__ = "0.1.0"

_API = {
    "score_vqa": "vqadiag.protocols.vqa.score",
    "score_pairs": "vqadiag.protocols.vqa.score",
    "balance_stats": "vqadiag.protocols.vqa.score",
    "score_gqa": "vqadiag.protocols.gqa.score",
    "score_ood": "vqadiag.protocols.ood.score",
    "relevance": "vqadiag.data.formats.relevance_files",
    "score_fpvg": "vqadiag.protocols.fpvg.score",
    "score_robustness": "vqadiag.protocols.robustness.score",
    "score_consistency": "vqadiag.protocols.consistency.score",
    "introspect_questions": "vqadiag.protocols.consistency.score",
    "classify_questions": "vqadiag.protocols.consistency.score",
    "generate_world": "vqadiag.synth.world",
    "world_stats": "vqadiag.workflows.world_stats",
    "read_predictions": "vqadiag.data.formats.predictions",
    "train": "vqadiag.workflows.models",
    "predict": "vqadiag.workflows.models",
    "build_bqd": "vqadiag.protocols.robustness.basic_questions.bqd_build",
    "make_noise": "vqadiag.protocols.robustness.basic_questions.bqd_build",
    "diagnose": "vqadiag.diagnosis.diagnose",
    "diagnose_to_precision": "vqadiag.diagnosis.precision",
    "report": "vqadiag.workflows.report",
    "export": "vqadiag.workflows.report",
    "per_question_table": "vqadiag.report.tables",
    "summary_table": "vqadiag.report.tables",
    "demo": "vqadiag.workflows.demo",
    "finetune": "vqadiag.workflows.finetune",
    "explain_train": "vqadiag.workflows.explain:train",
    "explain_eval": "vqadiag.workflows.explain:evaluate",
    "explain_show": "vqadiag.workflows.explain:show",
    "DataError": "vqadiag.errors",
}

__all__ = ["__version__", *_API]


# ``vqadiag.report`` is the API's function and also the name of a subpackage. Importing a
# subpackage for the first time binds its name in this module, which would hide the
# function from then on; the subpackage (a light one) is imported here once, and its
# binding removed, so the name always reaches ``__getattr__`` and the function.
importlib.import_module("vqadiag.report")
del globals()["report"]


class _FunctionAndPackage:
    """An API function that shares its name with a subpackage (``report``): called, the
    function; asked for an attribute, the subpackage's (``import vqadiag.report.tables
    as t`` looks ``tables`` up through it)."""

    def __init__(self, function: Any, package: str) -> None:
        functools.update_wrapper(self, function)
        self._function, self._package = function, package

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._function(*args, **kwargs)

    def __repr__(self) -> str:
        return repr(self._function)

    def __getattr__(self, name: str) -> Any:
        return getattr(importlib.import_module(self._package), name)


def __getattr__(name: str) -> Any:
    if name in _API:
        module, _, attr = _API[name].partition(":")
        found = getattr(importlib.import_module(module), attr or name)
        if isinstance(found, type):  # DataError
            return found
        from vqadiag.arguments import public

        function = public(found)  # arguments bounded as the command's, --json's nulls
        if name == "report":
            function = _FunctionAndPackage(function, f"{__name__}.report")
        globals()[name] = function
        return function
    raise AttributeError(f"module 'vqadiag' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
