"""Execute GQA ``semantic`` programs on a GQA scene graph.

The synthetic world writes every question with an executable program in
GQA's step format ``{"operation", "dependencies", "argument"}``; executing it on
the image's scene graph (the official JSON shape) gives the question's answer.
Supported operations (GQA names):

* ``select`` ``"name (id)"``: objects whose name — or category — is ``name``
  (``"scene"`` selects the whole image); the id is an annotation and is ignored;
* ``filter <family>`` ``value``: keep objects that have the attribute;
* ``relate`` ``"name,relation,s|o (id)"``: ``s`` → objects X (named ``name``,
  or anything for ``_``) with "X relation Y" for some input Y; ``o`` → objects X
  with "Y relation X";
* ``query`` ``name|category|color|material|state|size|place``: the value
  shared by the input objects;
* ``verify <family>`` ``value``, ``verify rel`` ``"name,relation,o|s (id)"``,
  ``verify place`` ``value``, ``exist`` → yes/no;
* ``choose <family>`` ``"a|b"``, ``choose place`` ``"a|b"``, ``choose rel``
  ``"name,r1|r2,s (id)"`` (the relation of the objects named ``name`` to the
  input; answered ``left``/``right``), ``choose larger|smaller`` (two inputs,
  answered by the name of the larger / smaller box);
* ``and``, ``or`` (two yes/no inputs), ``same <family>``, ``different <family>``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from vqadiag.synth.taxonomy import ATTRIBUTE_FAMILY, CLASS_INDEX, CLASSES, RELATION_ANSWER


class ProgramError(ValueError):
    """A program that cannot be executed (unknown operation, ambiguous reference …)."""


def _name_of(arg: str) -> str:
    return arg.split(" (", 1)[0]


def _category(name: str) -> str | None:
    k = CLASS_INDEX.get(name)
    return None if k is None else CLASSES[k].category


def _matches(obj: Mapping[str, Any], name: str) -> bool:
    return name == "_" or obj["name"] == name or _category(obj["name"]) == name


def _value(objects: Mapping[str, Any], ids: Sequence[str], what: str, scene: Mapping) -> str:
    if what == "place":
        return str(scene["location"])
    if not ids:
        raise ProgramError(f"query {what} of no object")
    values = set()
    for oid in ids:
        obj = objects[oid]
        if what == "name":
            values.add(obj["name"])
        elif what == "category":
            values.add(_category(obj["name"]))
        else:
            found = [a for a in obj.get("attributes", []) if ATTRIBUTE_FAMILY.get(a) == what]
            values.add(found[0] if found else None)
    if len(values) != 1 or None in values:
        raise ProgramError(f"query {what} is ambiguous: {sorted(map(str, values))}")
    return values.pop()


def _single(ids: Any) -> str:
    if not isinstance(ids, list) or len(ids) != 1:
        raise ProgramError(f"expected one object, got {ids!r}")
    return ids[0]


def _has_rel(objects: Mapping[str, Any], a: str, rel: str, b: str) -> bool:
    return any(r["name"] == rel and r["object"] == b for r in objects[a].get("relations", []))


def _relate(objects: Mapping[str, Any], ids: list[str], arg: str) -> list[str]:
    name, rel, role = _name_of(arg).split(",")
    chosen = set(ids)
    out = []
    for oid, obj in objects.items():
        if oid in chosen or not _matches(obj, name):
            continue
        if role == "s":
            hit = any(_has_rel(objects, oid, rel, y) for y in ids)
        else:
            hit = any(_has_rel(objects, y, rel, oid) for y in ids)
        if hit:
            out.append(oid)
    return sorted(out)


def _area(obj: Mapping[str, Any]) -> float:
    return float(obj["w"]) * float(obj["h"])


def execute(program: Sequence[Mapping[str, Any]], scene: Mapping[str, Any]) -> str:
    """Run a GQA program on a scene graph and return the answer (``yes``/``no`` for booleans)."""
    objects = scene["objects"]
    results: list[Any] = []
    for step in program:
        op = step["operation"]
        arg = step.get("argument", "")
        deps = [results[d] for d in step.get("dependencies", [])]
        head, _, family = op.partition(" ")
        x = deps[0] if deps else None
        if op == "select":
            name = _name_of(arg)
            if name == "scene":
                out: Any = "scene"
            else:
                out = sorted(oid for oid, obj in objects.items() if _matches(obj, name))
        elif head == "filter":
            out = [oid for oid in x if arg in objects[oid].get("attributes", [])]
        elif op == "relate":
            out = _relate(objects, x, arg)
        elif op == "query":
            out = _value(objects, [] if x == "scene" else x, arg, scene)
        elif op == "exist":
            out = bool(x)
        elif op == "verify rel":
            name, rel, role = _name_of(arg).split(",")
            a = _single(x)
            others = [o for o, obj in objects.items() if o != a and _matches(obj, name)]
            if role == "o":
                out = any(_has_rel(objects, a, rel, b) for b in others)
            else:
                out = any(_has_rel(objects, b, rel, a) for b in others)
        elif head == "verify":
            out = _value(objects, [] if x == "scene" else x, family, scene) == arg
        elif op == "choose rel":
            name, rels, _role = _name_of(arg).split(",")
            subjects = [o for o, obj in objects.items() if _matches(obj, name) and o not in x]
            held = [
                r
                for r in rels.split("|")
                if any(_has_rel(objects, s, r, y) for s in subjects for y in x)
            ]
            if len(held) != 1:
                raise ProgramError(f"choose rel: {len(held)} of {rels!r} hold")
            out = RELATION_ANSWER.get(held[0], held[0])
        elif op in ("choose larger", "choose smaller"):
            a, b = objects[_single(deps[0])], objects[_single(deps[1])]
            larger = a if _area(a) > _area(b) else b
            smaller = b if larger is a else a
            out = (larger if op == "choose larger" else smaller)["name"]
        elif head == "choose":
            value = _value(objects, [] if x == "scene" else x, family, scene)
            options = arg.split("|")
            if value not in options:
                raise ProgramError(f"choose {family}: {value!r} is not among {options}")
            out = value
        elif op in ("and", "or"):
            a, b = deps
            out = (a and b) if op == "and" else (a or b)
        elif head in ("same", "different"):
            va = _value(objects, [_single(deps[0])], family, scene)
            vb = _value(objects, [_single(deps[1])], family, scene)
            out = (va == vb) if head == "same" else (va != vb)
        else:
            raise ProgramError(f"unknown operation {op!r}")
        results.append(out)
    final = results[-1]
    if isinstance(final, bool):
        return "yes" if final else "no"
    if not isinstance(final, str):
        raise ProgramError(f"program ends in objects, not an answer: {final!r}")
    return final
