"""GQA place questions: which place is this?, is this a <place>?, is this a <place> or a
<place>? (families queryPlace, verifyPlace, choosePlace; :mod:`vqadiag.synth.gqa_questions`)."""

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
from vqadiag.synth.taxonomy import PLACES


def place_question(maker: Maker, ctx: ImageContext) -> dict[str, Any]:
    """Which place is this? / Is this a kitchen? / Is this a kitchen or a street?"""
    rng = maker.rng
    kind = rng.randrange(3)
    sel = step("select", [], "scene")
    place = ctx.place
    if kind == 0:
        q = Phrase().add("which place is this")
        full = Phrase().add(f"it is {article(place)} {place}")
        program = [sel, step("query", [0], "place")]
        return question_record(
            ctx, q, place, full, program, ("query", "global", "queryPlace"),
            ("place", "queryPlace"), plausible=PLACES,
        )  # fmt: skip
    other = rng.choice([p for p in PLACES if p != place])
    if kind == 1:
        asked = place if rng.random() < 0.5 else other
        q = Phrase().add(f"is this {article(asked)} {asked}")
        full = Phrase().add("yes," if asked == place else "no,")
        full.add(f"it is {article(place)} {place}")
        program = [sel, step("verify place", [0], asked)]
        return question_record(
            ctx, q, "yes" if asked == place else "no", full, program,
            ("verify", "global", "verifyPlace"), (None, "verifyPlace"),
            plausible=("yes", "no"),
        )  # fmt: skip
    a, b = (place, other) if rng.random() < 0.5 else (other, place)
    q = Phrase().add(f"is this {article(a)} {a} or {article(b)} {b}")
    full = Phrase().add(f"it is {article(place)} {place}")
    program = [sel, step("choose place", [0], f"{a}|{b}")]
    return question_record(
        ctx, q, place, full, program, ("choose", "global", "choosePlace"),
        ("place", "choosePlace"), plausible=PLACES,
    )  # fmt: skip
