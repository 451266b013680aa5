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
    "score_vqa": "vqadiag.scoring.vqa",
    "score_pairs": "vqadiag.scoring.vqa",
    "balance_stats": "vqadiag.scoring.vqa",
    "score_gqa": "vqadiag.scoring.gqa",
    "score_ood": "vqadiag.scoring.gqa",
    "write_ood_split": "vqadiag.scoring.gqa",
    "relevance": "vqadiag.scoring.fpvg",
    "score_fpvg": "vqadiag.scoring.fpvg",
    "score_robustness": "vqadiag.scoring.robustness",
    "score_consistency": "vqadiag.scoring.consistency",
    "introspect_questions": "vqadiag.scoring.consistency",
    "classify_questions": "vqadiag.scoring.consistency",
    "generate_world": "vqadiag.synth.world",
    "world_stats": "vqadiag.scoring.world_stats",
    "read_predictions": "vqadiag.data.predictions",
    "train": "vqadiag.workflows.models",
    "predict": "vqadiag.workflows.models",
    "build_bqd": "vqadiag.questions.bqd_build",
    "make_noise": "vqadiag.questions.bqd_build",
    "diagnose": "vqadiag.diagnosis.diagnose",
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


def __getattr__(name: str) -> Any:
    if name in _API:
        module, _, attr = _API[name].partition(":")
        return getattr(importlib.import_module(module), attr or name)
    raise AttributeError(f"module 'vqadiag' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
