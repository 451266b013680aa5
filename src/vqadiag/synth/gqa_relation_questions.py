"""GQA relation questions on one relation triple (subject, relation, object) of an image:
what is <rel> the <b>? / what kind of <category> is <rel> the <b>? / what is the <a>
<rel>? / is the <a> to the left or to the right of the <b>? / is the <a> <rel> the <b>?
/ is there a <name> <rel> the <b>? (families relS, categoryRelS, relO, chooseRel,
verifyRel, existRel; :mod:`vqadiag.synth.gqa_questions`)."""

from __future__ import annotations

import random
from typing import Any, NamedTuple

from vqadiag.synth.gqa_record import (
    ImageContext,
    Maker,
    Phrase,
    article,
    question_record,
    step,
)
from vqadiag.synth.taxonomy import CLASSES, RELATION_ANSWER, RELATIONS


class RelationTriple(NamedTuple):
    """A relation triple of an image: subject ``a``, relation ``r``, object ``b`` (local
    object indices), with the relation's words, both names and ids and the subject's
    category."""

    a: int
    r: int
    b: int
    rel: str
    na: str
    nb: str
    ida: str
    idb: str
    cat_a: str

    @classmethod
    def of(cls, ctx: ImageContext, a: int, r: int, b: int) -> RelationTriple:
        """The triple ``(a, r, b)`` of image ``ctx``."""
        return cls(
            a, r, b, RELATIONS[r], ctx.names[a], ctx.names[b], ctx.oids[a], ctx.oids[b],
            CLASSES[ctx.cls[a]].category,
        )  # fmt: skip


def relation(maker: Maker, ctx: ImageContext) -> dict[str, Any] | None:
    """One relation question on a random relation triple with an unambiguous referent
    (the object ``b`` is the only one of its name); None when the drawn family does not
    fit the image."""
    rng = maker.rng
    candidates = [t for t in ctx.triples if ctx.count[ctx.names[t[2]]] == 1]
    if not candidates:
        return None
    t = RelationTriple.of(ctx, *rng.choice(candidates))
    kinds = ["relS", "categoryRelS", "verifyRel", "existRel"]
    if ctx.count[t.na] == 1:
        kinds += ["relO", "chooseRel"] if t.rel in RELATION_ANSWER else ["relO"]
    kind = rng.choice(kinds)
    if kind in ("relS", "categoryRelS"):
        return _subject_question(ctx, t, kind)
    if kind == "relO":
        return _object_question(ctx, t)
    if kind == "chooseRel":
        return _choose_relation(rng, ctx, t)
    if kind == "verifyRel":
        return _verify_relation(rng, ctx, t)
    return _exist_relation(rng, ctx, t)


def _subject_question(ctx: ImageContext, t: RelationTriple, kind: str) -> dict[str, Any] | None:
    """relS (what is <rel> the <b>?) or categoryRelS (what kind of <category> is <rel>
    the <b>?); None unless every subject so related to ``b`` has the same name."""
    rel, na, nb, ida, idb, cat_a = t.rel, t.na, t.nb, t.ida, t.idb, t.cat_a
    subjects = ctx.subjects[(t.r, t.b)]
    if len({ctx.names[s] for s in subjects}) != 1:
        return None
    target = "_" if kind == "relS" else cat_a
    if kind == "categoryRelS":
        # every object of that category related to b must share the name
        same_cat = [s for s in subjects if CLASSES[ctx.cls[s]].category == cat_a]
        if len({ctx.names[s] for s in same_cat}) != 1:
            return None
        q = Phrase().add(f"what kind of {cat_a} is {rel} the").obj(nb, idb)
        types = ("query", "cat", "categoryRelS")
        groups = (cat_a, f"categoryRelS-{nb}_{rel.replace(' ', '_')}")
    else:
        q = Phrase().add(f"what is {rel} the").obj(nb, idb)
        types = ("query", "rel", "relS")
        groups = (cat_a, f"relS-{nb}_{rel.replace(' ', '_')}")
    full = Phrase().add("the").obj(na, ida).add(f"is {rel} the").obj(nb, idb)
    program = [step("select", [], f"{nb} ({idb})"),
               step("relate", [0], f"{target},{rel},s ({ida})"),
               step("query", [1], "name")]  # fmt: skip
    plausible = [c.name for c in CLASSES if c.category == cat_a]
    return question_record(ctx, q, na, full, program, types, groups, ida, plausible)


def _object_question(ctx: ImageContext, t: RelationTriple) -> dict[str, Any] | None:
    """relO: what is the <a> <rel>?; None unless every object ``a`` is so related to has
    the same name."""
    rel, na, nb, ida, idb = t.rel, t.na, t.nb, t.ida, t.idb
    objects = ctx.objects[(t.a, t.r)]
    if len({ctx.names[o] for o in objects}) != 1:
        return None
    q = Phrase().add("what is the").obj(na, ida).add(rel)
    full = Phrase().add("the").obj(na, ida).add(f"is {rel} the").obj(nb, idb)
    program = [
        step("select", [], f"{na} ({ida})"),
        step("relate", [0], f"_,{rel},o ({idb})"),
        step("query", [1], "name"),
    ]
    cat_b = CLASSES[ctx.cls[t.b]].category
    plausible = [c.name for c in CLASSES if c.category == cat_b]
    return question_record(
        ctx, q, nb, full, program, ("query", "rel", "relO"),
        (cat_b, f"relO-{na}_{rel.replace(' ', '_')}"), idb, plausible,
    )  # fmt: skip


def _choose_relation(rng: random.Random, ctx: ImageContext, t: RelationTriple) -> dict[str, Any]:
    """chooseRel: is the <a> to the left or to the right of the <b>? (options shuffled)."""
    rel, na, nb, ida, idb = t.rel, t.na, t.nb, t.ida, t.idb
    opts = ["to the left of", "to the right of"]
    rng.shuffle(opts)
    q = Phrase().add("is the").obj(na, ida).add(f"{opts[0].removesuffix(' of')} or {opts[1]} the")
    q.obj(nb, idb)
    ans = RELATION_ANSWER[rel]
    full = Phrase().add("the").obj(na, ida).add(f"is {rel} the").obj(nb, idb)
    program = [
        step("select", [], f"{nb} ({idb})"),
        step("choose rel", [0], f"{na},{opts[0]}|{opts[1]},s ({ida})"),
    ]
    return question_record(
        ctx, q, ans, full, program, ("choose", "rel", "chooseRel"),
        ("position", f"chooseRel-{na}_{nb}"), plausible=("left", "right"),
    )  # fmt: skip


def _verify_relation(
    rng: random.Random, ctx: ImageContext, t: RelationTriple
) -> dict[str, Any] | None:
    """verifyRel: is the <a> <rel> the <b>? (the true relation or, half the time, one that
    does not hold); None when ``a``'s name is not unique (checked after the draws)."""
    na, nb, ida, idb = t.na, t.nb, t.ida, t.idb
    truth = rng.random() < 0.5
    asked = t.rel
    if not truth:
        false = [x for x in RELATIONS if (t.a, RELATIONS.index(x), t.b) not in ctx.rels]
        asked = rng.choice(false)
    q = Phrase().add("is the").obj(na, ida).add(f"{asked} the").obj(nb, idb)
    full = Phrase().add("yes," if truth else "no,").add("the").obj(na, ida)
    full.add(("is " if truth else "is not ") + asked + " the").obj(nb, idb)
    program = [step("select", [], f"{na} ({ida})"),
               step("verify rel", [0], f"{nb},{asked},o ({idb})")]  # fmt: skip
    if ctx.count[na] != 1:
        return None
    return question_record(
        ctx, q, "yes" if truth else "no", full, program, ("verify", "rel", "verifyRel"),
        (None, f"verifyRel-{na}_{asked.replace(' ', '_')}"), plausible=("yes", "no"),
    )  # fmt: skip


def _exist_relation(
    rng: random.Random, ctx: ImageContext, t: RelationTriple
) -> dict[str, Any] | None:
    """existRel: is there a <name> <rel> the <b>? (``a``'s name, or half the time a class
    of its category that nothing so related to ``b`` has); None when no such class."""
    rel, na, nb, ida, idb = t.rel, t.na, t.nb, t.ida, t.idb
    truth = rng.random() < 0.5
    subjects = {ctx.names[s] for s in ctx.subjects[(t.r, t.b)]}
    if truth:
        name, oid = na, ida
    else:
        pool = [
            c.name
            for c in CLASSES
            if c.category == t.cat_a and c.name not in subjects and c.name != nb
        ]
        if not pool:
            return None
        name, oid = rng.choice(pool), None
    q = Phrase().add(f"is there {article(name)}").obj(name, oid).add(f"{rel} the")
    q.obj(nb, idb)
    full = Phrase().add("yes, there is" if truth else "no, there is no").obj(name, oid)
    full.add(f"{rel} the").obj(nb, idb)
    program = [step("select", [], f"{nb} ({idb})"),
               step("relate", [0], f"{name},{rel},s ({oid or '-'})"),
               step("exist", [1], "?")]  # fmt: skip
    return question_record(
        ctx, q, "yes" if truth else "no", full, program, ("verify", "rel", "existRel"),
        (None, f"existRel-{nb}_{rel.replace(' ', '_')}"), plausible=("yes", "no"),
    )  # fmt: skip
