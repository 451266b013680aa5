"""The program of each VQA v2 and VQA-introspect question of the synthetic world.

A VQA v2 template (:data:`vqadiag.synth.vqa2.TEMPLATES`) with its parameter fixes the
question; :func:`program_of` writes the GQA-style program (``semantic`` steps
``{"operation", "dependencies", "argument"}``, docs/models-symbolic-hf.md "GQA program
executor") that computes its answer from an image's scene graph, with the world's rules
(docs/synth.md, "The world") spelt out as steps (docs/synth.md, "Programs"):

===============  ===============================================================
template         program
===============  ===============================================================
color, material  select N → query <family>
count            select N → count
exist, any       select N → exist
verify_color     select N → verify color: C
on, anything_on  select N → relate _,on,s → query name  /  → exist
seat             select N → relate _,on,s → exist → not        (free: nothing on it)
room, indoors    select scene → query place  /  verify place: P for each indoor place,
                 joined by or
animal, wild     select animal → query name  /  verify name: A for each wild animal,
                 joined by or
ripe             select N → verify color: C for each colour that makes a fruit not
                 ripe, joined by or → not
warm             select N → verify material: M for each warm material, joined by or
===============  ===============================================================

A program is a function of the question alone (template and parameter): arguments
name no object ids, so a program tells nothing about the image that the question does
not (unlike GQA's, whose arguments carry the annotated ids). ``count`` and ``not`` are
the two operations beyond GQA's (:mod:`vqadiag.data.formats.gqa_program`). Every
generated question's program executes, strictly, on its image's scene graph to its
answer (tested on every generated question).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from vqadiag.synth.gqa_record import step
from vqadiag.synth.taxonomy import INDOOR_PLACES, RIPENESS_RULE, WARM_MATERIALS, WILD_ANIMALS

Program = list[dict[str, Any]]


def _any_of(program: Program, dep: int, operation: str, values: Iterable[str]) -> int:
    """Append ``operation: v`` on step ``dep`` for each of ``values`` (sorted), joined by
    ``or``; returns the index of the last step (yes when any of them holds)."""
    last = -1
    for value in sorted(values):
        program.append(step(operation, [dep], value))
        here = len(program) - 1
        if last >= 0:
            program.append(step("or", [last, here], ""))
            here = len(program) - 1
        last = here
    return last


def program_of(key: str, param: str) -> Program:
    """The program of template ``key`` with parameter ``param`` (module docstring)."""
    name = param.split("|")[0]
    if key in ("room", "indoors"):
        program = [step("select", [], "scene")]
        if key == "room":
            program.append(step("query", [0], "place"))
        else:
            _any_of(program, 0, "verify place", INDOOR_PLACES)
        return program
    if key in ("animal", "wild"):
        program = [step("select", [], "animal")]
        if key == "animal":
            program.append(step("query", [0], "name"))
        else:
            _any_of(program, 0, "verify name", WILD_ANIMALS)
        return program
    program = [step("select", [], name)]
    if key in ("color", "material"):
        program.append(step("query", [0], key))
    elif key == "count":
        program.append(step("count", [0], ""))
    elif key in ("exist", "any"):
        program.append(step("exist", [0], "?"))
    elif key == "verify_color":
        program.append(step("verify color", [0], param.split("|")[1]))
    elif key in ("on", "anything_on", "seat"):
        program.append(step("relate", [0], "_,on,s"))
        if key == "on":
            program.append(step("query", [1], "name"))
        else:
            program.append(step("exist", [1], "?"))
            if key == "seat":
                program.append(step("not", [2], ""))
    elif key == "ripe":
        last = _any_of(program, 0, "verify color", RIPENESS_RULE)
        program.append(step("not", [last], ""))
    elif key == "warm":
        _any_of(program, 0, "verify material", WARM_MATERIALS)
    else:
        raise KeyError(f"no program for VQA v2 template {key!r}")
    return program
