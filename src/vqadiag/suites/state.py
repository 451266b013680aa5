"""What a suite works with: the options of the run and :class:`DiagnoseState`.

Every suite's :meth:`~vqadiag.suites.base.Suite.run` gets one
:class:`DiagnoseState`: the model, the prediction store, the options and every
condition already run (so ``accuracy``, ``ood``, ``fpvg`` and ``robustness``
share the one plain run of the GQA split), plus helpers to subsample ids and
write a condition's predictions where ``vqadiag score`` can read them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from vqadiag.data.io.jsonio import write_json
from vqadiag.errors import SuiteSkipped
from vqadiag.probes.conditions import Condition, Probe
from vqadiag.probes.runner import ConditionRun, ProbeContext
from vqadiag.probes.store import Answer, PredictionStore

REPLACEMENTS = ("drop", "zeros", "minus-one", "other-images")


#: how the robustness suite ranks the basic questions of a BQD it builds
DEFAULT_RANKER = "lasso"


@dataclass(frozen=True)
class Options:
    """Every option of a diagnose run (all of them go to ``results.json`` ``config``)."""

    suites: tuple[str, ...] = ()
    split: str = "val"
    batch_size: int = 256
    workers: int = 1
    seed: int = 0
    n_bootstrap: int = 1000
    replacement: str = "drop"
    bqd: str | None = None
    bq_ranker: str = DEFAULT_RANKER
    max_questions: int | None = None
    max_objects: int = 100
    progress: bool = False
    images: str | None = None
    fill: str = "mean"
    allow_missing_images: bool = False
    #: files added beside any data source (docs/data-sources.md, "Extra files"):
    #: scene graphs, complementary pairs, GQA-OOD's released split folder, choices
    scene_graphs: str | None = None
    pairs: str | None = None
    ood_split: str | None = None
    choices: str | None = None
    #: count the model calls instead of making them (``diagnose --plan``; not in config)
    plan: bool = False
    #: reuse an answer for a probe with the same model input (``--no-reuse``: never)
    reuse_inputs: bool = True
    #: importance (leave-one-out, GradCAM, attention) on the first N FPVG questions only
    importance_sample: int | None = None
    #: suite → the questions of the ``max_questions`` order its own conditions run on
    #: (``--precision`` bounds each suite on its own prefix; :meth:`questions_for`)
    suite_questions: Mapping[str, int] | None = None

    def questions_for(self, suite: str) -> int | None:
        """How many questions of the fixed order ``suite`` runs its own conditions on: its
        ``suite_questions`` entry within ``max_questions`` (None: all). The shared plain
        run of a dataset covers ``max_questions``; a suite's prefix is a subset of it."""
        cap = None if self.suite_questions is None else self.suite_questions.get(suite)
        if cap is None:
            return self.max_questions
        return cap if self.max_questions is None else min(cap, self.max_questions)

    def config(self) -> dict[str, Any]:
        """The ``config`` object of ``results.json``."""
        return {
            "suites": list(self.suites),
            "split": self.split,
            "batch_size": self.batch_size,
            "workers": self.workers,
            "seed": self.seed,
            "n_bootstrap": self.n_bootstrap,
            "replacement": self.replacement,
            "bqd": self.bqd,
            "bq_ranker": None if self.bqd else self.bq_ranker,  # a given BQD was ranked elsewhere
            "max_questions": self.max_questions,
            "max_objects": self.max_objects,
            "images": self.images,
            "pixel_fill": self.fill,
            "allow_missing_images": self.allow_missing_images,
            **({} if self.reuse_inputs else {"reuse_inputs": False}),
            **(
                {}
                if self.importance_sample is None
                else {"importance_sample": self.importance_sample}
            ),
            **({} if not self.suite_questions else {"suite_questions": dict(self.suite_questions)}),
            **{
                name: value
                for name, value in (
                    ("scene_graphs", self.scene_graphs),
                    ("pairs", self.pairs),
                    ("ood_split", self.ood_split),
                    ("choices", self.choices),
                )
                if value is not None
            },
        }


@dataclass
class DiagnoseState:
    """Model, store, options, output folder and the conditions run so far."""

    model: Any
    store: PredictionStore
    options: Options
    out: Path
    data_root: Path
    runs: dict[str, ConditionRun] = field(default_factory=dict)
    memo: dict[str, Any] = field(default_factory=dict)
    contexts: dict[str, ProbeContext] = field(default_factory=dict)
    missing_images: set[str] = field(default_factory=set)

    def extra_file(self, name: str, default: Path) -> Path:
        """The file given by the option ``name`` (``scene_graphs``, ``pairs``,
        ``ood_split``, ``choices``), else ``default`` (where the official layout has it)."""
        given = getattr(self.options, name)
        return Path(given) if given is not None else default

    @property
    def inputs(self) -> Path:
        """``RESULT_DIR/inputs``: the question subsets and relevance files the scorers read."""
        return self.out / "inputs"

    def context(
        self, name: str, data: Any, donors: Mapping[str, str] | None = None
    ) -> ProbeContext:
        """The probe context of one data source (made once)."""
        if name not in self.contexts:
            o = self.options
            self.contexts[name] = ProbeContext(
                self.model,
                data,
                self.store,
                batch_size=o.batch_size,
                max_objects=o.max_objects,
                workers=o.workers,
                progress=o.progress,
                donors=donors,
                plan_only=o.plan,
                share_inputs=o.reuse_inputs,
            )
        return self.contexts[name]

    def run(self, ctx: ProbeContext, condition: Condition, probes: Sequence[Probe]) -> ConditionRun:
        """Run (or reuse) ``condition``; a condition name is run once per diagnose run."""
        hit = self.runs.get(condition.name)
        if hit is not None and hit.answers and hit.answers[0] is None:
            raise ValueError(
                f"condition {condition.name!r} was released by the suite that ran it; a "
                "suite asking it again must use its own condition name"
            )
        if hit is not None and len(hit.answers) != len(probes):
            raise ValueError(
                f"condition {condition.name!r} already ran on {len(hit.answers)} probes in this "
                f"diagnosis; a suite asking it for {len(probes)} must use its own condition name"
            )
        if hit is None and not self.model.capabilities.reruns:
            self.check_covered(probes)
        if hit is None:
            hit = self.runs[condition.name] = ctx.run(condition, probes)
        return hit

    def release(self, names: Sequence[str]) -> None:
        """Let go of the answers of the conditions ``names`` once their suite has scored
        them and no later suite reads them (the basic-question noise): their counts stay
        for ``results.json``, and the store keeps the answers."""
        for name in names:
            run = self.runs[name]
            self.runs[name] = replace(run, answers=[None] * len(run.answers))

    def removal_params(self) -> dict[str, Any]:
        """Parameters of a condition that removes objects: the replacement policy, and for
        a pixel model the fill policy of replaced pixels (both enter the fingerprint)."""
        if self.model.capabilities.pixel_input:  # pixels ignore the object replacement
            return {"fill": self.options.fill}
        return {"replacement": self.options.replacement}

    def drop_missing_images(self, qids: Sequence[str], image_of: Mapping[str, str], data: Any):
        """``qids`` whose image file exists, for a pixel model (others: all of them).

        A missing image is one :class:`DataError` naming it and its question, unless
        ``allow_missing_images``: then the question is left out and counted
        (``results.json`` ``data.missing_images``)."""
        if not self.model.capabilities.pixel_input:
            return list(qids)
        kept = []
        for q in qids:
            if data.images.find(image_of[q], q) is not None:
                kept.append(q)
            elif not self.options.allow_missing_images:
                data.images.path(image_of[q], q)  # raises, naming file and question
            else:
                self.missing_images.add(image_of[q])
        return kept

    def check_covered(self, probes: Sequence[Probe]) -> None:
        """A model that cannot be rerun (prediction files) must already hold an answer to
        every probe (``model.answers_known(qids)``), else the suite is skipped."""
        missing = self.model.missing_answers([p.qid for p in probes])
        if missing:
            raise SuiteSkipped(
                f"the prediction file has no answer for {len(missing)} of {len(probes)} "
                f"questions (e.g. {missing[0]!r})"
            )


def hash_order(ids: Iterable[str]) -> list[str]:
    """Ids ordered by SHA-1 of the id: a fixed pseudo-random order that does not move
    when ids are added or removed (``--max-questions`` takes a prefix of it)."""
    return sorted(ids, key=lambda q: (hashlib.sha1(q.encode()).hexdigest(), q))


def subsample(ids: Sequence[str], limit: int | None) -> list[str]:
    """The first ``limit`` ids in :func:`hash_order`, back in their original order."""
    if limit is None or limit >= len(ids):
        return list(ids)
    chosen = set(hash_order(ids)[: max(0, limit)])
    return [q for q in ids if q in chosen]


def prediction_entry(answer: Answer) -> Any:
    """``{"answer", "probs"}`` (top-5 plus the reference answer) or the plain answer."""
    probs = answer.probs()
    return answer.answer if probs is None else {"answer": answer.answer, "probs": probs}


def write_predictions(
    state: DiagnoseState, suite: str, condition: str, qids: Sequence[str], answers: Sequence[Answer]
) -> Path:
    """``RESULT_DIR/predictions/<suite>/<condition>.json`` in a shape ``vqadiag score`` reads."""
    path = state.out / "predictions" / suite / f"{condition}.json"
    preds = {q: prediction_entry(a) for q, a in zip(qids, answers, strict=True)}
    return write_json(path, preds)


def estimate_of(ci: Mapping[str, Any] | None, key: str) -> dict[str, Any] | None:
    """``ci[key]`` when it is an Estimate object, else None."""
    if ci is None:
        return None
    value = ci.get(key)
    return dict(value) if isinstance(value, Mapping) and "value" in value else None
