"""GQA-style questions with executable programs, groups, types and grounding.

Question families (structural / semantic / detailed type):

=================  ==========  ========  =====================================
family             structural  semantic  example
=================  ==========  ========  =====================================
queryAttr          query       attr      What color is the banana?
verifyAttr         verify      attr      Is the banana yellow?
chooseAttr         choose      attr      Is the banana yellow or green?
existAttr          verify      attr      Is there a yellow banana?
relS / relO        query       rel       What is on the table? / What is the cup on?
categoryRelS       query       cat       What kind of fruit is on the table?
categoryAttr       query       cat       What kind of fruit is green?
verifyRel          verify      rel       Is the cup on the table?
chooseRel          choose      rel       Is the cup to the left or to the right of the bowl?
existRel           verify      rel       Is there a cup on the table?
exist              verify      obj       Is there a dog in the image?
logicAnd / Or      logical     obj       Are there both dogs and cats in the image?
sameAttr / diff    compare     attr      Do the cup and the plate have the same color?
compareSize        compare     attr      Which is larger, the cup or the plate?
queryPlace         query       global    Which place is this?
verifyPlace        verify      global    Is this a kitchen?
choosePlace        choose      global    Is this a kitchen or a street?
=================  ==========  ========  =====================================

``groups.local`` is ``<family>-<concept>`` (e.g. ``queryAttr-banana_color``),
``groups.global`` the answer kind for open questions (``color``, ``material``,
``place``, a category …) and ``null`` for yes/no questions, as in GQA.
Annotations map token indices (``"4"`` or ``"3:5"``; tokens = the text split on
spaces after removing the final ``?``/``.``) to object ids. Questions about the
same object and attribute family entail each other (``entailed``); a
paraphrase and its original are ``equivalent``.

:class:`QuestionMaker` draws an image's questions family by family; the families live in
:mod:`vqadiag.synth.gqa_attribute_questions`, :mod:`vqadiag.synth.gqa_relation_questions`,
:mod:`vqadiag.synth.gqa_object_questions` and :mod:`vqadiag.synth.gqa_place_questions`,
the record parts (phrases, programs, records) in :mod:`vqadiag.synth.gqa_record`.
:func:`mark_balanced` then balances a split's answers.
"""

from __future__ import annotations

import math
import random
from collections import defaultdict
from typing import Any

from vqadiag.synth import gqa_attribute_questions as attribute
from vqadiag.synth import gqa_object_questions as objects
from vqadiag.synth import gqa_place_questions as places
from vqadiag.synth.gqa_record import ImageContext
from vqadiag.synth.gqa_relation_questions import relation
from vqadiag.synth.taxonomy import FAMILIES

#: in a local group, an answer may keep at most this many × the balanced count of
#: all rarer answers (see :func:`mark_balanced`)
BALANCE_RATIO = 2.0


class QuestionMaker:
    """Generates the GQA questions of images, numbering them with a split prefix."""

    def __init__(
        self,
        rng: random.Random,
        attr_priors: dict[str, list[dict[str, float]]],
        place_classes: dict[str, list[tuple[str, float]]],
    ) -> None:
        self.rng = rng
        self.attr_priors = attr_priors  # family -> per class {value: p}
        self.place_classes = place_classes

    def false_value(self, ctx: ImageContext, i: int, family: str) -> str | None:
        """A value the object does not have, drawn from its class prior (language bias)."""
        prior = self.attr_priors[family][ctx.cls[i]]
        true = ctx.attrs[family][i]
        options = [(v, p) for v, p in prior.items() if v != true]
        if not options:
            return None
        values, weights = zip(*options, strict=True)
        return self.rng.choices(values, weights)[0]

    def image_questions(self, ctx: ImageContext) -> list[dict[str, Any]]:
        """About nine questions for one image (see the module docstring for families)."""
        rng = self.rng
        out: list[dict[str, Any]] = []
        focus = rng.sample(ctx.unique, min(2, len(ctx.unique)))
        for i in focus:
            fams = [f for f in FAMILIES if ctx.attrs[f][i] is not None]
            if fams:
                bundle = attribute.attribute_bundle(self, ctx, i, rng.choice(fams))
                base = len(out)
                for rec in bundle:
                    rec["_bundle"] = [base + k for k in rec["_bundle"]]
                    if "_equivalent_with" in rec:
                        rec["_equivalent_with"] += base
                out.extend(bundle)
        extra: list[dict[str, Any] | None] = (
            [objects.exist(self, ctx)] if rng.random() < 0.8 else []
        )
        if ctx.unique and rng.random() < 0.3:
            i = rng.choice(ctx.unique)
            fams = [f for f in FAMILIES if ctx.attrs[f][i] is not None]
            if fams:
                extra.append(attribute.exist_attr(self, ctx, i, rng.choice(fams)))
        for _ in range(2):
            extra.append(relation(self, ctx))
        if rng.random() < 0.3:
            extra.append(objects.logical(self, ctx))
        if rng.random() < 0.7:
            extra.append(objects.compare(self, ctx))
        if rng.random() < 0.25:
            extra.append(attribute.category_attr(self, ctx, rng.randrange(len(ctx.names))))
        if rng.random() < 0.25:
            extra.append(places.place_question(self, ctx))
        seen = {rec["question"] for rec in out}
        for rec in extra:
            if rec is not None and rec["question"] not in seen:
                seen.add(rec["question"])
                rec["_bundle"] = []
                out.append(rec)
        return out


def mark_balanced(questions: dict[str, dict[str, Any]], rng: random.Random) -> None:
    """Set ``isBalanced`` by smoothing each local group's answer distribution (in place).

    Answers of a group sorted from rarest to most frequent keep
    ``b_k = min(c_k, ceil(BALANCE_RATIO × Σ_{j rarer} b_j))`` questions (the rarest
    keeps all); which questions of an answer are kept is random. This mirrors GQA's
    balancing, which flattens but does not remove real-world skew.
    """
    by_group: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for qid, rec in questions.items():
        by_group[rec["groups"]["local"]][rec["answer"]].append(qid)
    for group in sorted(by_group):
        answers = by_group[group]
        if len(answers) < 2:
            continue
        order = sorted(answers, key=lambda a: (len(answers[a]), a))
        kept = len(answers[order[0]])
        for ans in order[1:]:
            ids = answers[ans]
            cap = math.ceil(BALANCE_RATIO * kept)
            if len(ids) > cap:
                drop = rng.sample(ids, len(ids) - cap)
                for qid in drop:
                    questions[qid]["isBalanced"] = False
            kept += min(len(ids), cap)
