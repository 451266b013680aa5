"""Suite ``pairs``: the model on both questions of every complementary pair of the split
(``vqadiag score pairs``, docs/protocols.md §2)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vqadiag.data.io.jsonio import write_json
from vqadiag.probes.conditions import Condition
from vqadiag.suites.base import (
    Drilldown,
    Figure,
    Suite,
    SuiteOutput,
    SuiteSkipped,
    below_one,
    register_suite,
)
from vqadiag.suites.sources import needs_visual, vqa_context, vqa_data, vqa_probe
from vqadiag.suites.state import DiagnoseState, estimate_of, hash_order, write_predictions


@register_suite
class PairsSuite(Suite):
    """Both correct, identical and different answers on complementary pairs."""

    name = "pairs"
    title = "Complementary pairs (VQA v2)"
    datasets = ("vqa2", "vqa2 complementary pairs")
    conditions = ("vqa2.all",)
    display_order = 50
    own_prefix = True
    figures = (Figure("pair_both_correct", "pairs both correct"),)
    drilldown = Drilldown(
        "Complementary pairs not both answered right", below_one("pair_both_correct")
    )

    def run(self, state: DiagnoseState) -> SuiteOutput:
        return pairs_suite(state)


def _pairs_inputs(data: Any, split: str, records: Mapping[str, Any], pairs: list) -> Any:
    """The pairs with their questions' annotator answers, which the VQA v2 records hold
    (``VQA2Data.questions``); skipped without an annotations file."""
    from vqadiag.protocols.vqa.score import PairsInputs

    if data.annotations_path(split) is None:
        raise SuiteSkipped(f"no VQA v2 annotations for split {split!r}")
    answers = {q: {"answer_list": records[q]["answers"]} for p in pairs for q in p}
    return PairsInputs(answers, list(pairs))


def pairs_suite(state: DiagnoseState) -> SuiteOutput:
    """Complementary-pair figures (``vqadiag score pairs``): both correct, identical, different.

    ``--max-questions`` keeps pairs in a fixed pseudo-random order until their
    questions reach the limit. Per-question rows: one per pair, ``id = "qa|qb"``,
    ``values.pair_both_correct`` = [acc(qa) ≥ τ ∧ acc(qb) ≥ τ], ``pair_identical`` and
    ``pair_both_exact`` (both answers equal the canonical ``multiple_choice_answer``).
    """
    from vqadiag.data.formats.vqa2 import read_pairs
    from vqadiag.protocols.vqa.score import score_pair_answers

    data = vqa_data(state)
    needs_visual(state, data)
    split = state.options.split
    name = data.questions_path(split).name.replace("v2_OpenEnded_mscoco_", "v2_mscoco_")
    pairs_path = state.extra_file(
        "pairs", data.vqa_dir / name.replace("_questions.json", "_complementary_pairs.json")
    )
    if not pairs_path.is_file():
        raise SuiteSkipped(
            f"no complementary pairs file ({pairs_path.name}; add it with --pairs FILE)"
        )
    records = data.questions(split)
    pairs = read_pairs(pairs_path, records)
    limit = state.options.questions_for("pairs")
    if limit is not None:
        by_key = {f"{a}|{b}": (a, b) for a, b in pairs}
        chosen = set(hash_order(by_key)[: max(1, limit // 2)])
        pairs = [p for p in pairs if f"{p[0]}|{p[1]}" in chosen]
    image_of = {q: str(records[q]["imageId"]) for p in pairs for q in p}
    kept = set(state.drop_missing_images(list(image_of), image_of, data))
    pairs = [p for p in pairs if p[0] in kept and p[1] in kept]
    if not pairs:
        raise SuiteSkipped("no complementary pairs")
    write_json(state.inputs / "vqa2_pairs.json", [list(p) for p in pairs])
    inputs = _pairs_inputs(data, split, records, pairs)
    qids = inputs.paired
    probes = [vqa_probe(q, records[q]) for q in qids]
    run = state.run(vqa_context(state, data), Condition("vqa2.all", "plain"), probes)
    write_predictions(state, "pairs", "all", qids, run.answers)  # for score pairs
    o = state.options
    answer_of = {q: a.answer for q, a in zip(qids, run.answers, strict=True)}
    score = score_pair_answers(
        inputs, [answer_of[q] for q in qids], seed=o.seed, n_bootstrap=o.n_bootstrap
    )
    result, units = score.to_dict(), score.units
    acc_of = units["accuracy"]
    rows = []
    for (a, b), both, same in zip(
        units["pairs"], units["both_correct"], units["identical"], strict=True
    ):
        rows.append(
            {
                "suite": "pairs",
                "id": f"{a}|{b}",
                "qid": [a, b],
                "image_id": [records[a]["image_id"], records[b]["image_id"]],
                "question": records[a]["question"],
                "truth": [records[a].get("answer"), records[b].get("answer")],
                "answers": {"a": answer_of[a], "b": answer_of[b]},
                "values": {
                    "pair_both_correct": int(both),
                    "pair_identical": int(same),
                    "pair_both_exact": int(
                        answer_of[a] == records[a].get("answer")
                        and answer_of[b] == records[b].get("answer")
                    ),
                    "vqa_accuracy_a": acc_of[a],
                    "vqa_accuracy_b": acc_of[b],
                },
            }
        )
    return SuiteOutput(
        result, rows, {"pair_both_correct": estimate_of(result["ci"], "both_correct")}
    )
