"""vqadiag: what accuracy hides about your VQA model.

The Python API mirrors the command line: each function below takes the same
files as its command and returns the dict that the command prints with
``--json``::

    import vqadiag
    result = vqadiag.score_vqa(questions="q.json", annotations="a.json", predictions="p.json")
    result["overall"], result["ci"]["overall"]

Models, diagnosis and the report follow the same rule (``vqadiag.diagnose(...)``
returns ``results.json``'s content). Diagnosis results come back as pandas
tables too: ``vqadiag.per_question_table(["results/updn", "results/prior"])``
and ``vqadiag.summary_table(...)``. Names are imported lazily, so ``import
vqadiag`` stays light.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_API = {
    "score_vqa": "vqadiag.api.vqa",
    "score_pairs": "vqadiag.api.vqa",
    "balance_stats": "vqadiag.api.vqa",
    "score_gqa": "vqadiag.api.gqa",
    "score_ood": "vqadiag.api.gqa",
    "write_ood_split": "vqadiag.api.gqa",
    "relevance": "vqadiag.api.fpvg",
    "score_fpvg": "vqadiag.api.fpvg",
    "score_robustness": "vqadiag.api.robustness",
    "score_consistency": "vqadiag.api.consistency",
    "introspect_questions": "vqadiag.api.consistency",
    "classify_questions": "vqadiag.api.consistency",
    "generate_world": "vqadiag.synth.world",
    "world_stats": "vqadiag.synth.stats",
    "read_predictions": "vqadiag.data.predictions",
    "train": "vqadiag.api.models",
    "predict": "vqadiag.api.models",
    "build_bqd": "vqadiag.api.bq",
    "make_noise": "vqadiag.api.bq",
    "diagnose": "vqadiag.api.diagnose",
    "report": "vqadiag.api.report",
    "export": "vqadiag.api.report",
    "per_question_table": "vqadiag.report.tables",
    "summary_table": "vqadiag.report.tables",
    "demo": "vqadiag.api.demo",
    "finetune": "vqadiag.api.finetune",
    "explain_train": "vqadiag.api.explain:train",
    "explain_eval": "vqadiag.api.explain:evaluate",
    "explain_show": "vqadiag.api.explain:show",
    "DataError": "vqadiag.errors",
}

__all__ = ["__version__", *_API]


def __getattr__(name: str) -> Any:
    if name in _API:
        module, _, attr = _API[name].partition(":")
        return getattr(importlib.import_module(module), attr or name)
    raise AttributeError(f"module 'vqadiag' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
