"""GQA object questions: is there a <name>?, both / either of two classes, and how two
objects compare (families exist, logicAnd / logicOr, sameAttr / diffAttr, compareSize;
:mod:`vqadiag.synth.gqa_questions`)."""

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
from vqadiag.synth.taxonomy import CLASS_INDEX, CLASSES


def exist(maker: Maker, ctx: ImageContext) -> dict[str, Any]:
    """Is there a <name> in the image? (present or absent class of the place)."""
    rng = maker.rng
    if rng.random() < 0.5:
        i = rng.randrange(len(ctx.names))
        name, oid = ctx.names[i], ctx.oids[i]
    else:
        absent = [(n, p) for n, p in maker.place_classes[ctx.place] if n not in ctx.count]
        if not absent:
            i = rng.randrange(len(ctx.names))
            name, oid = ctx.names[i], ctx.oids[i]
        else:
            names, weights = zip(*absent, strict=True)
            name, oid = rng.choices(names, weights)[0], None
    plural = CLASSES[CLASS_INDEX[name]].plural
    present = name in ctx.count
    if rng.random() < 0.5:
        q = Phrase().add(f"is there {article(name)}").obj(name, oid).add("in the image")
    else:
        q = Phrase().add("are there any").obj(plural, oid).add("in the image")
    full = Phrase().add("yes, there is a" if present else "no, there are no")
    full.obj(name if present else plural, oid)
    program = [step("select", [], f"{name} ({oid or '-'})"), step("exist", [0], "?")]
    return question_record(
        ctx, q, "yes" if present else "no", full, program,
        ("verify", "obj", "exist"), (None, f"exist-{name}"), plausible=("yes", "no"),
    )  # fmt: skip


def logical(maker: Maker, ctx: ImageContext) -> dict[str, Any] | None:
    """Are there both As and Bs / either As or Bs in the image?"""
    rng = maker.rng
    present = sorted(ctx.count)
    absent = [n for n, _ in maker.place_classes[ctx.place] if n not in ctx.count]
    pool = [(n, True) for n in present] + [(n, False) for n in absent]
    if len(pool) < 2:
        return None
    (a, pa), (b, pb) = rng.sample(pool, 2)
    op = "and" if rng.random() < 0.5 else "or"
    truth = (pa and pb) if op == "and" else (pa or pb)
    oid_a = ctx.oids[ctx.names.index(a)] if pa else None
    oid_b = ctx.oids[ctx.names.index(b)] if pb else None
    pl_a, pl_b = CLASSES[CLASS_INDEX[a]].plural, CLASSES[CLASS_INDEX[b]].plural
    q = Phrase().add("are there both" if op == "and" else "are there")
    q.obj(pl_a, oid_a).add(op).obj(pl_b, oid_b).add("in the image")
    full = Phrase()
    if truth and op == "and":
        full.add("yes, there are both").obj(pl_a, oid_a).add("and").obj(pl_b, oid_b)
    elif truth:
        full.add("yes, there are")
        (full.obj(pl_a, oid_a) if pa else full.obj(pl_b, oid_b))
    elif op == "or" or not (pa or pb):
        full.add("no, there are no").obj(pl_a, None).add("or").obj(pl_b, None)
    else:  # "and" with one of the two missing
        full.add("no, there are no").obj(pl_b if pa else pl_a, None)
    program = [
        step("select", [], f"{a} ({oid_a or '-'})"),
        step("exist", [0], "?"),
        step("select", [], f"{b} ({oid_b or '-'})"),
        step("exist", [2], "?"),
        step(op, [1, 3], ""),
    ]
    detailed = "logicAnd" if op == "and" else "logicOr"
    return question_record(
        ctx, q, "yes" if truth else "no", full, program,
        ("logical", "obj", detailed), (None, f"{detailed}-{CLASSES[CLASS_INDEX[a]].category}"),
        plausible=("yes", "no"),
    )  # fmt: skip


def compare(maker: Maker, ctx: ImageContext) -> dict[str, Any] | None:
    """Same / different attribute of two objects, or which of two is larger / smaller."""
    rng = maker.rng
    if len(ctx.unique) < 2:
        return None
    i, j = rng.sample(ctx.unique, 2)
    ni, nj, oi, oj = ctx.names[i], ctx.names[j], ctx.oids[i], ctx.oids[j]
    sel = [step("select", [], f"{ni} ({oi})"), step("select", [], f"{nj} ({oj})")]
    if rng.random() < 0.5:
        fams = [f for f in ("color", "material") if ctx.attrs[f][i] and ctx.attrs[f][j]]
        if not fams:
            return None
        fam = rng.choice(fams)
        vi, vj = ctx.attrs[fam][i], ctx.attrs[fam][j]
        same = rng.random() < 0.5
        if same:
            q = Phrase().add("do the").obj(ni, oi).add("and the").obj(nj, oj)
            q.add(f"have the same {fam}")
            truth = vi == vj
        else:
            q = Phrase().add("are the").obj(ni, oi).add("and the").obj(nj, oj)
            q.add(f"different in {fam}")
            truth = vi != vj
        full = Phrase()
        if vi == vj:
            full.add("yes," if same else "no,").add("both the").obj(ni, oi).add("and the")
            full.obj(nj, oj).add(f"are {vi}")
        else:
            full.add("no," if same else "yes,").add("the").obj(ni, oi).add(f"is {vi} and the")
            full.obj(nj, oj).add(f"is {vj}")
        op = f"{'same' if same else 'different'} {fam}"
        detailed = "sameAttr" if same else "diffAttr"
        return question_record(
            ctx, q, "yes" if truth else "no", full, [*sel, step(op, [0, 1], "")],
            ("compare", "attr", detailed), (None, f"{detailed}-{fam}"),
            plausible=("yes", "no"),
        )  # fmt: skip
    ai, aj = ctx.areas[i], ctx.areas[j]
    if max(ai, aj) < 1.5 * min(ai, aj):
        return None
    word = "larger" if rng.random() < 0.5 else "smaller"
    pick = (i if ai > aj else j) if word == "larger" else (i if ai < aj else j)
    first, second = (i, j) if rng.random() < 0.5 else (j, i)
    q = Phrase().add(f"which is {word}, the").obj(ctx.names[first], ctx.oids[first])
    q.add("or the").obj(ctx.names[second], ctx.oids[second])
    full = Phrase().add("the").obj(ctx.names[pick], ctx.oids[pick]).add(f"is {word}")
    program = [sel[0] if first == i else sel[1], sel[1] if first == i else sel[0],
               step(f"choose {word}", [0, 1], "")]  # fmt: skip
    return question_record(
        ctx, q, ctx.names[pick], full, program, ("compare", "attr", "compareSize"),
        ("name", f"compareSize-{word}"), ctx.oids[pick], (ni, nj),
    )  # fmt: skip
