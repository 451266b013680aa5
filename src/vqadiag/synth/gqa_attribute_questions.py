"""GQA attribute questions: query / verify / choose an object's attribute, is there a
<value> <name>?, and what kind of <category> is <colour>? (families queryAttr,
verifyAttr, chooseAttr, existAttr, categoryAttr; :mod:`vqadiag.synth.gqa_questions`)."""

from __future__ import annotations

from typing import Any

from vqadiag.synth.gqa_record import (
    ImageContext,
    Maker,
    Phrase,
    article,
    question_record,
    step,
)
from vqadiag.synth.taxonomy import CLASSES


def attribute_bundle(maker: Maker, ctx: ImageContext, i: int, family: str) -> list[dict[str, Any]]:
    """query / verify / choose questions on one attribute of one object (mutually entailed)."""
    rng = maker.rng
    name, oid, value = ctx.names[i], ctx.oids[i], ctx.attrs[family][i]
    sel = step("select", [], f"{name} ({oid})")
    support = sorted(maker.attr_priors[family][ctx.cls[i]])
    out = []
    groups_local = f"{name}_{family}"
    if family != "state":
        paraphrase = rng.random() < 0.25
        forms = [0, 1] if paraphrase else [rng.randrange(2)]
        for form in forms:
            q = Phrase()
            if family == "color":
                (q.add("what color is the") if form == 0 else q.add("what is the color of the"))
                q.obj(name, oid)
                full = Phrase().add("the").obj(name, oid).add(f"is {value}")
            else:
                if form == 0:
                    q.add("what is the").obj(name, oid).add("made of")
                else:
                    q.add("what material is the").obj(name, oid)
                full = Phrase().add("the").obj(name, oid).add(f"is made of {value}")
            out.append(
                question_record(
                    ctx,
                    q,
                    value,
                    full,
                    [sel, step("query", [0], family)],
                    ("query", "attr", "queryAttr"),
                    (family, f"queryAttr-{groups_local}"),
                    plausible=support,
                )
            )
        if paraphrase:
            out[0]["_equivalent_with"] = 1
    if rng.random() < 0.7:
        truth = rng.random() < 0.5
        asked = value if truth else maker.false_value(ctx, i, family)
        if asked is not None:
            q = Phrase().add("is the").obj(name, oid).add(asked)
            full = Phrase().add("yes," if truth else "no,").add("the").obj(name, oid)
            full.add(f"is {value}")
            out.append(
                question_record(
                    ctx,
                    q,
                    "yes" if truth else "no",
                    full,
                    [sel, step(f"verify {family}", [0], asked)],
                    ("verify", "attr", "verifyAttr"),
                    (None, f"verifyAttr-{groups_local}"),
                    plausible=("yes", "no"),
                )
            )
    if rng.random() < 0.5:
        other = maker.false_value(ctx, i, family)
        if other is not None:
            a, b = (value, other) if rng.random() < 0.5 else (other, value)
            q = Phrase().add("is the").obj(name, oid).add(f"{a} or {b}")
            full = Phrase().add("the").obj(name, oid).add(f"is {value}")
            out.append(
                question_record(
                    ctx,
                    q,
                    value,
                    full,
                    [sel, step(f"choose {family}", [0], f"{a}|{b}")],
                    ("choose", "attr", "chooseAttr"),
                    (family, f"chooseAttr-{groups_local}"),
                    plausible=support,
                )
            )
    for k, rec in enumerate(out):
        rec["_bundle"] = [j for j in range(len(out)) if j != k]
    return out


def exist_attr(maker: Maker, ctx: ImageContext, i: int, family: str) -> dict[str, Any] | None:
    """Is there a <value> <name>? (the name is unique in the image)."""
    name, oid = ctx.names[i], ctx.oids[i]
    truth = maker.rng.random() < 0.5
    value = ctx.attrs[family][i] if truth else maker.false_value(ctx, i, family)
    if value is None:
        return None
    q = Phrase().add(f"is there {article(value)} {value}").obj(name, oid if truth else None)
    full = Phrase().add(f"yes, there is {article(value)}" if truth else "no, there is no")
    full.add(value).obj(name, oid if truth else None)
    program = [
        step("select", [], f"{name} ({oid})"),
        step(f"filter {family}", [0], value),
        step("exist", [1], "?"),
    ]
    return question_record(
        ctx, q, "yes" if truth else "no", full, program,
        ("verify", "attr", "existAttr"), (None, f"existAttr-{name}_{family}"),
        plausible=("yes", "no"),
    )  # fmt: skip


def category_attr(maker: Maker, ctx: ImageContext, i: int) -> dict[str, Any] | None:
    """What kind of <category> is <colour>? (one name among that category's colour)."""
    color = ctx.attrs["color"][i]
    cat = CLASSES[ctx.cls[i]].category
    names = {
        ctx.names[j]
        for j in range(len(ctx.names))
        if CLASSES[ctx.cls[j]].category == cat and ctx.attrs["color"][j] == color
    }
    if color is None or names != {ctx.names[i]}:
        return None
    name, oid = ctx.names[i], ctx.oids[i]
    q = Phrase().add(f"what kind of {cat} is {color}")
    full = Phrase().add("the").obj(name, oid).add(f"is {color}")
    program = [step("select", [], f"{cat} ({oid})"), step("filter color", [0], color),
               step("query", [1], "name")]  # fmt: skip
    plausible = [c.name for c in CLASSES if c.category == cat]
    return question_record(
        ctx, q, name, full, program, ("query", "cat", "categoryAttr"),
        (cat, f"categoryAttr-{cat}_{color}"), oid, plausible,
    )  # fmt: skip
