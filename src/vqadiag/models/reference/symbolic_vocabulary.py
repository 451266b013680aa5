"""What the symbolic model learns from training questions and scene graphs besides its
classifiers (:mod:`vqadiag.models.reference.symbolic`): the program vocabulary, the
group priors of its fallback answer and its answer vocabulary."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping
from typing import Any

from vqadiag.data.formats.gqa_program import ProgramVocabulary, parse_argument

_NOT_FAMILIES = frozenset({"rel", "larger", "smaller", "healthier", "older", "taller", "shorter"})


def learn_vocabulary(
    questions: Mapping[str, Mapping[str, Any]], scenes: Mapping[str, Mapping[str, Any]]
) -> ProgramVocabulary:
    """Learn a :class:`ProgramVocabulary` from training programs and scene graphs.

    * value → family: arguments of ``filter|verify|choose <family>`` (``a|b`` split,
      ``not(v)`` unwrapped) and answers of questions ending in ``query <family>``;
      a value seen under several families keeps the most frequent one;
    * name → categories: a ``select`` / ``relate`` / ``verify rel`` / ``choose rel``
      argument naming annotated objects (ids in parentheses) by a word other than their
      scene-graph name; categories ordered by frequency;
    * relation → short answer: ``choose rel`` questions whose answer is not one of the
      relations offered but a word of one (``left`` for ``to the left of``);
    * ``place`` → ``location`` when the scene graphs carry a location.
    """
    fam_votes: dict[str, Counter[str]] = defaultdict(Counter)
    cat_votes: dict[str, Counter[str]] = defaultdict(Counter)
    rel_answer: dict[str, str] = {}
    scene_keys = {"place": "location"}
    for record in questions.values():
        program = record.get("semantic") or []
        scene = scenes.get(str(record.get("imageId")), {})
        objects = scene.get("objects", {})
        for step in program:
            op = str(step.get("operation", ""))
            arg = str(step.get("argument", "") or "")
            head, _, family = op.partition(" ")
            if head in ("filter", "verify", "choose") and family and family not in _NOT_FAMILIES:
                if family in scene_keys:
                    continue
                for value in arg.split("|"):
                    value = value.strip()
                    if value.startswith("not(") and value.endswith(")"):
                        value = value[4:-1]
                    if value:
                        fam_votes[value][family] += 1
            if op in ("select", "relate", "verify rel", "choose rel"):
                text, ids = parse_argument(arg)
                name = text.split(",")[0] if op != "select" else text
                for oid in ids:
                    obj = objects.get(oid)
                    if obj is not None and name not in ("_", "scene") and obj["name"] != name:
                        cat_votes[obj["name"]][name] += 1
            if op == "choose rel":
                answer = str(record.get("answer", ""))
                rels = parse_argument(arg)[0].split(",")[1].split("|") if "," in arg else []
                if answer and answer not in rels:
                    hits = [r for r in rels if answer in r.split()]
                    if len(hits) == 1:
                        rel_answer[hits[0]] = answer
        if program:
            last = program[-1]
            op, arg = str(last.get("operation", "")), str(last.get("argument", ""))
            if op == "query" and arg not in ("name", "category") and arg not in scene_keys:
                fam_votes[str(record.get("answer", ""))][arg] += 1
    family = {v: max(c, key=lambda f: (c[f], f)) for v, c in fam_votes.items() if v}
    categories = {
        n: tuple(sorted(c, key=lambda k: (-c[k], k))) for n, c in sorted(cat_votes.items())
    }
    return ProgramVocabulary(dict(sorted(family.items())), categories, rel_answer, scene_keys)


def group_priors(questions: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The most frequent answer of each local group, global group, detailed type and
    program (:func:`program_key`), and of all ``questions`` (``"overall"``): the symbolic
    model's fallback answers."""
    counts: dict[str, dict[str, Counter[str]]] = {
        "local": defaultdict(Counter),
        "global": defaultdict(Counter),
        "detailed": defaultdict(Counter),
        "program": defaultdict(Counter),
    }
    overall: Counter[str] = Counter()
    for record in questions.values():
        answer = str(record.get("answer", ""))
        overall[answer] += 1
        for key, group in group_keys(record):
            counts[key][group][answer] += 1

    def top(c: Counter[str]) -> str:
        return max(c, key=lambda a: (c[a], a))

    priors: dict[str, Any] = {k: {g: top(c) for g, c in v.items()} for k, v in counts.items()}
    priors["overall"] = top(overall) if overall else "yes"
    return priors


def group_keys(record: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(kind, group)`` of the question's local group, global group, detailed type and
    program (:func:`program_key`), in that order (the ones it has)."""
    groups = record.get("groups") or {}
    types = record.get("types") or {}
    keys = [("local", groups.get("local")), ("global", groups.get("global"))]
    keys.append(("detailed", types.get("detailed")))
    keys.append(("program", program_key(record.get("semantic"))))
    return [(k, str(g)) for k, g in keys if g]


def program_key(program: Any) -> str | None:
    """A program without its object ids: ``"op: text [deps]"`` per step (the ids in
    parentheses of an argument dropped, :func:`parse_argument`), joined by ``->``; None
    without a program. So GQA's ``select: table (12) -> query: color [0]`` and the
    synthetic world's VQA v2 ``select: table -> query: color [0]`` (docs/synth.md
    "Programs") share one key, and one fallback answer: the most frequent training
    answer of that program (the table's most frequent colour)."""
    if not isinstance(program, list) or not program:
        return None
    parts = []
    for step in program:
        if not isinstance(step, Mapping):
            return None
        text = parse_argument(str(step.get("argument", "") or ""))[0]
        deps = ",".join(str(d) for d in step.get("dependencies", []) or [])
        parts.append(f"{step.get('operation', '')}: {text} [{deps}]")
    return "->".join(parts)


def answer_vocabulary(
    questions: Mapping[str, Mapping[str, Any]],
    names: list[str],
    families: Mapping[str, list[str]],
    vocab: ProgramVocabulary,
    scene_values: Mapping[str, list[str]],
) -> list[str]:
    """The training answers by frequency, then every other answer the program can give
    (yes / no, names, attribute values, categories, relation and scene answers)."""
    counts = Counter(str(r.get("answer", "")) for r in questions.values())
    extra: set[str] = {"yes", "no", *names, *vocab.relation_answer.values()}
    for values in families.values():
        extra.update(values)
    for cats in vocab.categories.values():
        extra.update(cats)
    for values in scene_values.values():
        extra.update(values)
    ordered = sorted(counts, key=lambda a: (-counts[a], a))
    return ordered + sorted(extra - set(ordered))
