"""Execute GQA ``semantic`` programs over any GQA-shaped scene graph.

A GQA question carries its program as a list of steps
``{"operation", "dependencies", "argument"}``; executing it on the image's scene
graph (the official JSON shape ``{objects: {id: {name, x, y, w, h, attributes,
relations: [{name, object}]}}, location?}``) gives the question's answer. The
synthetic world (:mod:`vqadiag.synth`) writes every question this way, and the
symbolic model (:mod:`vqadiag.models.reference.symbolic`) runs the same programs over the
scene graph it *predicts* from detector output.

What a program needs beyond the scene graph is a :class:`ProgramVocabulary`:
which family an attribute value belongs to (``red`` → ``color``), the categories
of an object name (``apple`` → ``fruit``), the short answer of a relation
(``to the left of`` → ``left``) and which scene key a scene-level query reads
(``place`` → ``location``). The synthetic world has a fixed vocabulary; the
symbolic model learns one from training programs and scene graphs.

Supported operations (GQA names):

* ``select`` ``"name (ids)"``: objects whose name — or one of its categories —
  is ``name`` (``"scene"`` selects the whole image); the ids are annotations and ignored;
* ``filter <family>`` ``value`` (or ``not(value)``): keep objects that have (not) the attribute;
* ``relate`` ``"name,relation,s|o (ids)"``: ``s`` → objects X (named ``name``,
  or anything for ``_``) with "X relation Y" for some input Y; ``o`` → objects X
  with "Y relation X";
* ``query`` ``name|category|<family>|place``: the value shared by the input objects;
* ``verify <family>`` ``value``, ``verify rel`` ``"name,relation,o|s (ids)"``,
  ``verify place`` ``value``, ``exist`` → yes/no;
* ``choose <family>`` ``"a|b"``, ``choose place`` ``"a|b"``, ``choose rel``
  ``"name,r1|r2,s (ids)"`` (the relation of the objects named ``name`` to the
  input, answered by its short form), ``choose larger|smaller`` (two inputs,
  answered by the name of the larger / smaller box);
* ``and``, ``or`` (two yes/no inputs), ``same <family>``, ``different <family>``.

Two operations beyond GQA's, for the synthetic world's VQA v2 programs
(:mod:`vqadiag.synth.vqa2_programs`, docs/synth.md "Programs"): ``count`` (the number of
input objects, as a decimal string: ``"2"``) and ``not`` (a yes/no input negated).

**Strict** execution (the default; the ground truth of the synthetic world)
raises :class:`ProgramError` on any ambiguity. **Lenient** execution
(``strict=False``, for predicted scene graphs) resolves ambiguity by the
objects' confidences: an object may carry ``score`` (how sure the detector /
classifier is that it exists, default 1) and ``probs`` ``{family: {value: p}}``
(classifier distributions, ``"name"`` included), and the scene ``probs``
``{scene_key: {value: p}}``; a query then answers the value of largest
score-weighted probability mass, a choice the most probable option, and a step
that needs one object takes the highest-scoring one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


class ProgramError(ValueError):
    """A program that cannot be executed (unknown operation, ambiguous reference …)."""


@dataclass(frozen=True)
class ProgramVocabulary:
    """What programs need to know beyond a scene graph.

    ``attribute_family`` maps an attribute value to its family (``red`` →
    ``color``); ``categories`` maps an object name to its categories (first =
    the answer of ``query category``); ``relation_answer`` maps a relation to
    the short answer of ``choose rel`` (relations not listed answer themselves);
    ``scene_keys`` maps a scene-level query family to the scene graph key it reads.
    """

    attribute_family: Mapping[str, str] = field(default_factory=dict)
    categories: Mapping[str, Sequence[str]] = field(default_factory=dict)
    relation_answer: Mapping[str, str] = field(default_factory=dict)
    scene_keys: Mapping[str, str] = field(default_factory=lambda: {"place": "location"})

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form (for checkpoints)."""
        return {
            "attribute_family": dict(self.attribute_family),
            "categories": {k: list(v) for k, v in self.categories.items()},
            "relation_answer": dict(self.relation_answer),
            "scene_keys": dict(self.scene_keys),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ProgramVocabulary:
        """Inverse of :meth:`to_dict`."""
        return cls(
            dict(data.get("attribute_family", {})),
            {k: tuple(v) for k, v in data.get("categories", {}).items()},
            dict(data.get("relation_answer", {})),
            dict(data.get("scene_keys", {"place": "location"})),
        )


@dataclass(frozen=True)
class Execution:
    """The outcome of a program: the answer, every object a step selected or
    matched (``touched``, sorted), and the operation / input objects of the final step."""

    answer: str
    touched: list[str]
    final_operation: str
    final_objects: list[str]


def parse_argument(arg: str) -> tuple[str, list[str]]:
    """``"apple (12,13)"`` → ``("apple", ["12", "13"])``; ``"-"`` ids are dropped."""
    text, sep, rest = arg.partition(" (")
    if not sep:
        return arg.strip(), []
    ids = [i.strip() for i in rest.rstrip(")").split(",")]
    return text.strip(), [i for i in ids if i and i != "-"]


class _Runner:
    def __init__(self, scene: Mapping[str, Any], vocab: ProgramVocabulary, strict: bool) -> None:
        self.scene = scene
        self.objects: Mapping[str, Any] = scene.get("objects", {})
        self.vocab = vocab
        self.strict = strict
        self.touched: set[str] = set()

    # -- object properties ---------------------------------------------------------------
    def score(self, oid: str) -> float:
        return float(self.objects[oid].get("score", 1.0))

    def category(self, name: str) -> str | None:
        cats = self.vocab.categories.get(name)
        return cats[0] if cats else None

    def matches(self, obj: Mapping[str, Any], name: str) -> bool:
        return (
            name == "_" or obj["name"] == name or name in self.vocab.categories.get(obj["name"], ())
        )

    def own_value(self, oid: str, what: str) -> str | None:
        obj = self.objects[oid]
        if what == "name":
            return obj["name"]
        if what == "category":
            return self.category(obj["name"])
        family = self.vocab.attribute_family
        found = [a for a in obj.get("attributes", []) if family.get(a) == what]
        return found[0] if found else None

    def distribution(self, ids: Sequence[str], what: str) -> dict[str, float]:
        """Score-weighted value mass of ``what`` over ``ids`` (lenient execution)."""
        mass: dict[str, float] = {}
        for oid in ids:
            weight = self.score(oid)
            probs = self.objects[oid].get("probs", {}).get(what)
            if probs:
                for value, p in probs.items():
                    mass[value] = mass.get(value, 0.0) + weight * float(p)
            else:
                value = self.own_value(oid, what)
                if value is not None:
                    mass[value] = mass.get(value, 0.0) + weight
        return mass

    def value(self, ids: Any, what: str, options: Sequence[str] | None = None) -> str:
        scene_key = self.vocab.scene_keys.get(what)
        if scene_key is not None and (ids == "scene" or scene_key in self.scene):
            if scene_key not in self.scene:
                raise ProgramError(f"the scene has no {scene_key!r}")
            probs = self.scene.get("probs", {}).get(scene_key)
            if not self.strict and options is not None and probs:
                return max(options, key=lambda v: (float(probs.get(v, 0.0)), v))
            return str(self.scene[scene_key])
        ids = [] if ids == "scene" else ids
        if not ids:
            raise ProgramError(f"query {what} of no object")
        if self.strict:
            values = {self.own_value(oid, what) for oid in ids}
            if len(values) != 1 or None in values:
                raise ProgramError(f"query {what} is ambiguous: {sorted(map(str, values))}")
            return values.pop()  # type: ignore[return-value]
        mass = self.distribution(ids, what)
        if options is not None:
            mass = {v: mass.get(v, 0.0) for v in options}
        if not mass:
            raise ProgramError(f"no {what} for objects {list(ids)}")
        return max(mass, key=lambda v: (mass[v], v))

    def single(self, ids: Any) -> str:
        if not isinstance(ids, list) or not ids:
            raise ProgramError(f"expected one object, got {ids!r}")
        if len(ids) == 1:
            return ids[0]
        if self.strict:
            raise ProgramError(f"expected one object, got {ids!r}")
        return max(ids, key=lambda o: (self.score(o), o))

    def has_rel(self, a: str, rel: str, b: str) -> bool:
        return any(
            r["name"] == rel and r["object"] == b for r in self.objects[a].get("relations", [])
        )

    def area(self, oid: str) -> float:
        obj = self.objects[oid]
        return float(obj["w"]) * float(obj["h"])

    # -- operations ------------------------------------------------------------------------
    def relate(self, ids: list[str], arg: str) -> list[str]:
        name, rel, role = parse_argument(arg)[0].split(",")
        chosen = set(ids)
        out = []
        for oid, obj in self.objects.items():
            if oid in chosen or not self.matches(obj, name):
                continue
            if role == "s":
                hit = any(self.has_rel(oid, rel, y) for y in ids)
            else:
                hit = any(self.has_rel(y, rel, oid) for y in ids)
            if hit:
                out.append(oid)
        return sorted(out)

    def step(self, op: str, arg: str, deps: list[Any]) -> Any:
        head, _, family = op.partition(" ")
        x = deps[0] if deps else None
        if op == "select":
            name = parse_argument(arg)[0]
            if name == "scene":
                return "scene"
            return sorted(oid for oid, obj in self.objects.items() if self.matches(obj, name))
        if head == "filter":
            value = arg.strip()
            if value.startswith("not(") and value.endswith(")"):
                value = value[4:-1]
                return [o for o in x if value not in self.objects[o].get("attributes", [])]
            return [o for o in x if value in self.objects[o].get("attributes", [])]
        if op == "relate":
            return self.relate(x, arg)
        if op == "query":
            return self.value(x, arg)
        if op == "exist":
            return bool(x)
        if op == "count":
            if not isinstance(x, list):
                raise ProgramError(f"count needs objects, got {x!r}")
            return str(len(x))
        if op == "not":
            if not isinstance(x, bool):
                raise ProgramError(f"not needs a yes/no input, got {x!r}")
            return not x
        if op == "verify rel":
            name, rel, role = parse_argument(arg)[0].split(",")
            a = self.single(x)
            others = [o for o, obj in self.objects.items() if o != a and self.matches(obj, name)]
            if role == "o":
                hits = [b for b in others if self.has_rel(a, rel, b)]
            else:
                hits = [b for b in others if self.has_rel(b, rel, a)]
            self.touched.update(hits)
            return bool(hits)
        if head == "verify":
            return self.value(x, family) == arg
        if op == "choose rel":
            name, rels, _role = parse_argument(arg)[0].split(",")
            subjects = [o for o, obj in self.objects.items() if self.matches(obj, name)]
            subjects = [o for o in subjects if o not in x]
            held = []
            for r in rels.split("|"):
                pairs = [s for s in subjects if any(self.has_rel(s, r, y) for y in x)]
                if pairs:
                    held.append(r)
                    self.touched.update(pairs)
            if len(held) != 1:
                raise ProgramError(f"choose rel: {len(held)} of {rels!r} hold")
            return self.vocab.relation_answer.get(held[0], held[0])
        if op in ("choose larger", "choose smaller"):
            a, b = self.single(deps[0]), self.single(deps[1])
            larger = a if self.area(a) > self.area(b) else b
            smaller = b if larger == a else a
            return self.objects[larger if op == "choose larger" else smaller]["name"]
        if head == "choose":
            options = arg.split("|")
            value = self.value(x, family, options=None if self.strict else options)
            if value not in options:
                raise ProgramError(f"choose {family}: {value!r} is not among {options}")
            return value
        if op in ("and", "or"):
            a, b = deps
            return (a and b) if op == "and" else (a or b)
        if head in ("same", "different"):
            va = self.value([self.single(deps[0])], family)
            vb = self.value([self.single(deps[1])], family)
            return (va == vb) if head == "same" else (va != vb)
        raise ProgramError(f"unknown operation {op!r}")


def run(
    program: Sequence[Mapping[str, Any]],
    scene: Mapping[str, Any],
    vocabulary: ProgramVocabulary | None = None,
    *,
    strict: bool = True,
) -> Execution:
    """Run a GQA program on a scene graph; booleans answer ``yes`` / ``no``.

    Raises :class:`ProgramError` when a step cannot be executed (unknown
    operation, a reference to no object, an ambiguity under ``strict``) or the
    program ends in objects instead of an answer.
    """
    if not program:
        raise ProgramError("empty program")
    runner = _Runner(scene, vocabulary or ProgramVocabulary(), strict)
    results: list[Any] = []
    inputs: list[str] = []
    op = ""
    for step in program:
        try:
            op = step["operation"]
            arg = step.get("argument", "") or ""
            deps = [results[d] for d in step.get("dependencies", [])]
        except (KeyError, IndexError, TypeError) as err:
            raise ProgramError(f"malformed step {step!r}: {err}") from None
        inputs = sorted({o for d in deps if isinstance(d, list) for o in d})
        try:
            out = runner.step(op, arg, deps)
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            if isinstance(err, ProgramError):
                raise
            raise ProgramError(f"{op!r} failed: {err!r}") from None
        if isinstance(out, list):
            runner.touched.update(out)
        results.append(out)
    final = results[-1]
    if isinstance(final, bool):
        final = "yes" if final else "no"
    if not isinstance(final, str) or final == "scene":
        raise ProgramError(f"program ends in objects, not an answer: {final!r}")
    return Execution(final, sorted(runner.touched), op, inputs)


def execute(
    program: Sequence[Mapping[str, Any]],
    scene: Mapping[str, Any],
    vocabulary: ProgramVocabulary | None = None,
    *,
    strict: bool = True,
) -> str:
    """Run a GQA program on a scene graph and return only the answer (see :func:`run`)."""
    return run(program, scene, vocabulary, strict=strict).answer
