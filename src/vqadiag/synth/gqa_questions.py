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
"""

from __future__ import annotations

import math
import random
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

from vqadiag.synth.taxonomy import (
    CLASS_INDEX,
    CLASSES,
    FAMILIES,
    PLACES,
    RELATION_ANSWER,
    RELATIONS,
)

#: in a local group, an answer may keep at most this many × the balanced count of
#: all rarer answers (see :func:`mark_balanced`)
BALANCE_RATIO = 2.0


class Phrase:
    """A sentence built token by token, remembering which tokens name which object."""

    __slots__ = ("annotations", "tokens")

    def __init__(self) -> None:
        self.tokens: list[str] = []
        self.annotations: dict[str, str] = {}

    def add(self, words: str) -> Phrase:
        """Append plain words."""
        self.tokens.extend(words.split())
        return self

    def obj(self, words: str, oid: str | None) -> Phrase:
        """Append words that refer to object ``oid`` (annotated unless ``oid`` is None)."""
        start = len(self.tokens)
        self.tokens.extend(words.split())
        if oid is not None:
            stop = len(self.tokens)
            key = str(start) if stop == start + 1 else f"{start}:{stop}"
            self.annotations[key] = oid
        return self

    def text(self, end: str) -> str:
        """The sentence, capitalised, ending in ``end``."""
        s = " ".join(self.tokens) + end
        return s[0].upper() + s[1:]


def step(operation: str, deps: Sequence[int], argument: str) -> dict[str, Any]:
    """One GQA program step."""
    return {"operation": operation, "dependencies": list(deps), "argument": argument}


def semantic_str(program: Sequence[dict[str, Any]]) -> str:
    """GQA's ``semanticStr``: ``op: arg [deps]`` joined by ``->``."""
    parts = []
    for st in program:
        deps = ", ".join(str(d) for d in st["dependencies"])
        parts.append(f"{st['operation']}: {st['argument']}" + (f" [{deps}]" if deps else ""))
    return "->".join(parts)


def _article(word: str) -> str:
    return "an" if word[0] in "aeiou" else "a"


class ImageContext:
    """What the question generator needs to know about one image."""

    def __init__(
        self,
        image_id: str,
        place: str,
        oids: list[str],
        cls: list[int],
        attrs: dict[str, list[str | None]],
        areas: list[int],
        triples: list[tuple[int, int, int]],
    ) -> None:
        self.image_id = image_id
        self.place = place
        self.oids = oids
        self.cls = cls
        self.names = [CLASSES[c].name for c in cls]
        self.attrs = attrs
        self.areas = areas
        self.count = Counter(self.names)
        self.unique = [i for i, n in enumerate(self.names) if self.count[n] == 1]
        self.rels: set[tuple[int, int, int]] = set(triples)
        self.triples = triples
        self.subjects: dict[tuple[int, int], list[int]] = defaultdict(list)  # (r, b) -> [a]
        self.objects: dict[tuple[int, int], list[int]] = defaultdict(list)  # (a, r) -> [b]
        for a, r, b in triples:
            self.subjects[(r, b)].append(a)
            self.objects[(a, r)].append(b)


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

    # ------------------------------------------------------------------ helpers
    def _false_value(self, ctx: ImageContext, i: int, family: str) -> str | None:
        """A value the object does not have, drawn from its class prior (language bias)."""
        prior = self.attr_priors[family][ctx.cls[i]]
        true = ctx.attrs[family][i]
        options = [(v, p) for v, p in prior.items() if v != true]
        if not options:
            return None
        values, weights = zip(*options, strict=True)
        return self.rng.choices(values, weights)[0]

    @staticmethod
    def _q(
        ctx: ImageContext,
        question: Phrase,
        answer: str,
        full: Phrase,
        program: list[dict[str, Any]],
        types: tuple[str, str, str],
        groups: tuple[str | None, str],
        answer_oid: str | None = None,
        plausible: Sequence[str] = (),
    ) -> dict[str, Any]:
        return {
            "imageId": ctx.image_id,
            "question": question.text("?"),
            "answer": answer,
            "fullAnswer": full.text("."),
            "isBalanced": True,
            "groups": {"global": groups[0], "local": groups[1]},
            "types": {"structural": types[0], "semantic": types[1], "detailed": types[2]},
            "annotations": {
                "question": question.annotations,
                "answer": {"0": answer_oid} if answer_oid is not None else {},
                "fullAnswer": full.annotations,
            },
            "semantic": program,
            "semanticStr": semantic_str(program),
            "entailed": [],
            "equivalent": [],
            "_plausible": sorted(set(plausible) | {answer}),
        }

    # --------------------------------------------------------------- families
    def attribute_bundle(self, ctx: ImageContext, i: int, family: str) -> list[dict[str, Any]]:
        """query / verify / choose questions on one attribute of one object (mutually entailed)."""
        rng = self.rng
        name, oid, value = ctx.names[i], ctx.oids[i], ctx.attrs[family][i]
        sel = step("select", [], f"{name} ({oid})")
        support = sorted(self.attr_priors[family][ctx.cls[i]])
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
                    self._q(
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
            asked = value if truth else self._false_value(ctx, i, family)
            if asked is not None:
                q = Phrase().add("is the").obj(name, oid).add(asked)
                full = Phrase().add("yes," if truth else "no,").add("the").obj(name, oid)
                full.add(f"is {value}")
                out.append(
                    self._q(
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
            other = self._false_value(ctx, i, family)
            if other is not None:
                a, b = (value, other) if rng.random() < 0.5 else (other, value)
                q = Phrase().add("is the").obj(name, oid).add(f"{a} or {b}")
                full = Phrase().add("the").obj(name, oid).add(f"is {value}")
                out.append(
                    self._q(
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

    def exist_attr(self, ctx: ImageContext, i: int, family: str) -> dict[str, Any] | None:
        """Is there a <value> <name>? (the name is unique in the image)."""
        name, oid = ctx.names[i], ctx.oids[i]
        truth = self.rng.random() < 0.5
        value = ctx.attrs[family][i] if truth else self._false_value(ctx, i, family)
        if value is None:
            return None
        q = Phrase().add(f"is there {_article(value)} {value}").obj(name, oid if truth else None)
        full = Phrase().add(f"yes, there is {_article(value)}" if truth else "no, there is no")
        full.add(value).obj(name, oid if truth else None)
        program = [
            step("select", [], f"{name} ({oid})"),
            step(f"filter {family}", [0], value),
            step("exist", [1], "?"),
        ]
        return self._q(
            ctx, q, "yes" if truth else "no", full, program,
            ("verify", "attr", "existAttr"), (None, f"existAttr-{name}_{family}"),
            plausible=("yes", "no"),
        )  # fmt: skip

    def exist(self, ctx: ImageContext) -> dict[str, Any]:
        """Is there a <name> in the image? (present or absent class of the place)."""
        rng = self.rng
        if rng.random() < 0.5:
            i = rng.randrange(len(ctx.names))
            name, oid = ctx.names[i], ctx.oids[i]
        else:
            absent = [(n, p) for n, p in self.place_classes[ctx.place] if n not in ctx.count]
            if not absent:
                i = rng.randrange(len(ctx.names))
                name, oid = ctx.names[i], ctx.oids[i]
            else:
                names, weights = zip(*absent, strict=True)
                name, oid = rng.choices(names, weights)[0], None
        plural = CLASSES[CLASS_INDEX[name]].plural
        present = name in ctx.count
        if rng.random() < 0.5:
            q = Phrase().add(f"is there {_article(name)}").obj(name, oid).add("in the image")
        else:
            q = Phrase().add("are there any").obj(plural, oid).add("in the image")
        full = Phrase().add("yes, there is a" if present else "no, there are no")
        full.obj(name if present else plural, oid)
        program = [step("select", [], f"{name} ({oid or '-'})"), step("exist", [0], "?")]
        return self._q(
            ctx, q, "yes" if present else "no", full, program,
            ("verify", "obj", "exist"), (None, f"exist-{name}"), plausible=("yes", "no"),
        )  # fmt: skip

    def logical(self, ctx: ImageContext) -> dict[str, Any] | None:
        """Are there both As and Bs / either As or Bs in the image?"""
        rng = self.rng
        present = sorted(ctx.count)
        absent = [n for n, _ in self.place_classes[ctx.place] if n not in ctx.count]
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
        return self._q(
            ctx, q, "yes" if truth else "no", full, program,
            ("logical", "obj", detailed), (None, f"{detailed}-{CLASSES[CLASS_INDEX[a]].category}"),
            plausible=("yes", "no"),
        )  # fmt: skip

    def relation(self, ctx: ImageContext) -> dict[str, Any] | None:
        """One relation question on a random relation triple with an unambiguous referent."""
        rng = self.rng
        candidates = [t for t in ctx.triples if ctx.count[ctx.names[t[2]]] == 1]
        if not candidates:
            return None
        a, r, b = rng.choice(candidates)
        rel = RELATIONS[r]
        na, nb, ida, idb = ctx.names[a], ctx.names[b], ctx.oids[a], ctx.oids[b]
        cat_a = CLASSES[ctx.cls[a]].category
        kinds = ["relS", "categoryRelS", "verifyRel", "existRel"]
        if ctx.count[na] == 1:
            kinds += ["relO", "chooseRel"] if rel in RELATION_ANSWER else ["relO"]
        kind = rng.choice(kinds)
        sel_b = step("select", [], f"{nb} ({idb})")
        if kind in ("relS", "categoryRelS"):
            subjects = ctx.subjects[(r, b)]
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
            program = [sel_b, step("relate", [0], f"{target},{rel},s ({ida})"),
                       step("query", [1], "name")]  # fmt: skip
            plausible = [c.name for c in CLASSES if c.category == cat_a]
            return self._q(ctx, q, na, full, program, types, groups, ida, plausible)
        if kind == "relO":
            objects = ctx.objects[(a, r)]
            if len({ctx.names[o] for o in objects}) != 1:
                return None
            q = Phrase().add("what is the").obj(na, ida).add(rel)
            full = Phrase().add("the").obj(na, ida).add(f"is {rel} the").obj(nb, idb)
            program = [
                step("select", [], f"{na} ({ida})"),
                step("relate", [0], f"_,{rel},o ({idb})"),
                step("query", [1], "name"),
            ]
            cat_b = CLASSES[ctx.cls[b]].category
            plausible = [c.name for c in CLASSES if c.category == cat_b]
            return self._q(
                ctx, q, nb, full, program, ("query", "rel", "relO"),
                (cat_b, f"relO-{na}_{rel.replace(' ', '_')}"), idb, plausible,
            )  # fmt: skip
        if kind == "chooseRel":
            opts = ["to the left of", "to the right of"]
            rng.shuffle(opts)
            q = (
                Phrase()
                .add("is the")
                .obj(na, ida)
                .add(f"{opts[0].removesuffix(' of')} or {opts[1]} the")
            )
            q.obj(nb, idb)
            ans = RELATION_ANSWER[rel]
            full = Phrase().add("the").obj(na, ida).add(f"is {rel} the").obj(nb, idb)
            program = [sel_b, step("choose rel", [0], f"{na},{opts[0]}|{opts[1]},s ({ida})")]
            return self._q(
                ctx, q, ans, full, program, ("choose", "rel", "chooseRel"),
                ("position", f"chooseRel-{na}_{nb}"), plausible=("left", "right"),
            )  # fmt: skip
        if kind == "verifyRel":
            truth = rng.random() < 0.5
            asked = rel
            if not truth:
                false = [x for x in RELATIONS if (a, RELATIONS.index(x), b) not in ctx.rels]
                asked = rng.choice(false)
            q = Phrase().add("is the").obj(na, ida).add(f"{asked} the").obj(nb, idb)
            full = Phrase().add("yes," if truth else "no,").add("the").obj(na, ida)
            full.add(("is " if truth else "is not ") + asked + " the").obj(nb, idb)
            program = [step("select", [], f"{na} ({ida})"),
                       step("verify rel", [0], f"{nb},{asked},o ({idb})")]  # fmt: skip
            if ctx.count[na] != 1:
                return None
            return self._q(
                ctx, q, "yes" if truth else "no", full, program, ("verify", "rel", "verifyRel"),
                (None, f"verifyRel-{na}_{asked.replace(' ', '_')}"), plausible=("yes", "no"),
            )  # fmt: skip
        # existRel: is there a <name> <rel> the <b>?
        truth = rng.random() < 0.5
        subjects = {ctx.names[s] for s in ctx.subjects[(r, b)]}
        if truth:
            name, oid = na, ida
        else:
            pool = [
                c.name
                for c in CLASSES
                if c.category == cat_a and c.name not in subjects and c.name != nb
            ]
            if not pool:
                return None
            name, oid = rng.choice(pool), None
        q = Phrase().add(f"is there {_article(name)}").obj(name, oid).add(f"{rel} the")
        q.obj(nb, idb)
        full = Phrase().add("yes, there is" if truth else "no, there is no").obj(name, oid)
        full.add(f"{rel} the").obj(nb, idb)
        program = [sel_b, step("relate", [0], f"{name},{rel},s ({oid or '-'})"),
                   step("exist", [1], "?")]  # fmt: skip
        return self._q(
            ctx, q, "yes" if truth else "no", full, program, ("verify", "rel", "existRel"),
            (None, f"existRel-{nb}_{rel.replace(' ', '_')}"), plausible=("yes", "no"),
        )  # fmt: skip

    def category_attr(self, ctx: ImageContext, i: int) -> dict[str, Any] | None:
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
        return self._q(
            ctx, q, name, full, program, ("query", "cat", "categoryAttr"),
            (cat, f"categoryAttr-{cat}_{color}"), oid, plausible,
        )  # fmt: skip

    def compare(self, ctx: ImageContext) -> dict[str, Any] | None:
        """Same / different attribute of two objects, or which of two is larger / smaller."""
        rng = self.rng
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
            return self._q(
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
        return self._q(
            ctx, q, ctx.names[pick], full, program, ("compare", "attr", "compareSize"),
            ("name", f"compareSize-{word}"), ctx.oids[pick], (ni, nj),
        )  # fmt: skip

    def place(self, ctx: ImageContext) -> dict[str, Any]:
        """Which place is this? / Is this a kitchen? / Is this a kitchen or a street?"""
        rng = self.rng
        kind = rng.randrange(3)
        sel = step("select", [], "scene")
        place = ctx.place
        if kind == 0:
            q = Phrase().add("which place is this")
            full = Phrase().add(f"it is {_article(place)} {place}")
            program = [sel, step("query", [0], "place")]
            return self._q(
                ctx, q, place, full, program, ("query", "global", "queryPlace"),
                ("place", "queryPlace"), plausible=PLACES,
            )  # fmt: skip
        other = rng.choice([p for p in PLACES if p != place])
        if kind == 1:
            asked = place if rng.random() < 0.5 else other
            q = Phrase().add(f"is this {_article(asked)} {asked}")
            full = Phrase().add("yes," if asked == place else "no,")
            full.add(f"it is {_article(place)} {place}")
            program = [sel, step("verify place", [0], asked)]
            return self._q(
                ctx, q, "yes" if asked == place else "no", full, program,
                ("verify", "global", "verifyPlace"), (None, "verifyPlace"),
                plausible=("yes", "no"),
            )  # fmt: skip
        a, b = (place, other) if rng.random() < 0.5 else (other, place)
        q = Phrase().add(f"is this {_article(a)} {a} or {_article(b)} {b}")
        full = Phrase().add(f"it is {_article(place)} {place}")
        program = [sel, step("choose place", [0], f"{a}|{b}")]
        return self._q(
            ctx, q, place, full, program, ("choose", "global", "choosePlace"),
            ("place", "choosePlace"), plausible=PLACES,
        )  # fmt: skip

    # ------------------------------------------------------------------ driver
    def image_questions(self, ctx: ImageContext) -> list[dict[str, Any]]:
        """About nine questions for one image (see the module docstring for families)."""
        rng = self.rng
        out: list[dict[str, Any]] = []
        focus = rng.sample(ctx.unique, min(2, len(ctx.unique)))
        for i in focus:
            fams = [f for f in FAMILIES if ctx.attrs[f][i] is not None]
            if fams:
                bundle = self.attribute_bundle(ctx, i, rng.choice(fams))
                base = len(out)
                for rec in bundle:
                    rec["_bundle"] = [base + k for k in rec["_bundle"]]
                    if "_equivalent_with" in rec:
                        rec["_equivalent_with"] += base
                out.extend(bundle)
        extra: list[dict[str, Any] | None] = [self.exist(ctx)] if rng.random() < 0.8 else []
        if ctx.unique and rng.random() < 0.3:
            i = rng.choice(ctx.unique)
            fams = [f for f in FAMILIES if ctx.attrs[f][i] is not None]
            if fams:
                extra.append(self.exist_attr(ctx, i, rng.choice(fams)))
        for _ in range(2):
            extra.append(self.relation(ctx))
        if rng.random() < 0.3:
            extra.append(self.logical(ctx))
        if rng.random() < 0.7:
            extra.append(self.compare(ctx))
        if rng.random() < 0.25:
            extra.append(self.category_attr(ctx, rng.randrange(len(ctx.names))))
        if rng.random() < 0.25:
            extra.append(self.place(ctx))
        seen = {rec["question"] for rec in out}
        for rec in extra:
            if rec is not None and rec["question"] not in seen:
                seen.add(rec["question"])
                rec["_bundle"] = []
                out.append(rec)
        return out


def finalize(records: list[dict[str, Any]], qids: list[str]) -> None:
    """Turn in-image bundle indices into ``entailed`` / ``equivalent`` question ids (in place).

    ``records`` are one image's questions in order and ``qids`` their ids.
    """
    for k, rec in enumerate(records):
        rec["entailed"] = [qids[j] for j in rec.pop("_bundle")]
        other = rec.pop("_equivalent_with", None)
        rec["equivalent"] = [qids[k]]
        if other is not None:
            rec["equivalent"].append(qids[other])
            records[other]["equivalent"].append(qids[k])
    for rec in records:
        rec["equivalent"].sort()


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
