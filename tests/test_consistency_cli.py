"""``score consistency``, ``introspect-questions`` and ``classify-questions`` end to end (§6)."""

from __future__ import annotations

import json

import pytest


def _entry(q_type, *pairs):
    return {
        "pred_q_type": q_type,
        "sub_qa": [{"sub_question": q, "sub_answer": a} for q, a in pairs],
    }


def _main(question, answer, image_id, entries):
    return {
        "reasoning_question": question,
        "reasoning_answer_most_common": answer,
        "image_id": image_id,
        "introspect": entries,
    }


INTROSPECT = {
    "100": _main(
        "Is the banana ripe?",
        "yes",
        1,
        [
            _entry(
                "reasoning", ("What color is the banana?", "yellow"), ("Is the banana green?", "no")
            ),
            _entry("reasoning", ("what color is the  banana?", "Yellow")),  # duplicate, dropped
            _entry("invalid", ("junk?", "x")),  # skipped
        ],
    ),
    "200": _main(
        "Is it safe to swim?", "no", 2, [_entry("perception", ("Are there sharks?", "yes"))]
    ),
    "300": _main(
        "Is this a vegan dish?",
        "yes",
        3,
        [
            _entry("reasoning", ("Is there meat?", "no"), ("Are only vegetables shown?", "yes")),
        ],
    ),
    "400": _main("Would you eat this?", "no", 4, []),
}
MAIN = {"100": "yes", "200": "yes", "300": "Yes", "400": "no"}
SUB = {"100_0": "yellow", "100_1": "yes", "200_0": "yes", "300_0": "yes", "300_1": "no"}


def _ann(qid, answers):
    return {
        "question_id": int(qid),
        "image_id": 1,
        "question_type": "is",
        "answer_type": "yes/no",
        "answers": [{"answer": a} for a in answers],
    }


@pytest.fixture
def files(write_json):
    return {
        "introspect": write_json("intro.json", INTROSPECT),
        "main": write_json("main.json", MAIN),
        "sub": write_json("sub.json", SUB),
        "annotations": write_json(
            "ann.json",
            {
                "annotations": [
                    _ann("100", ["yes"] * 10),
                    _ann("200", ["no"] * 10),
                    _ann("300", ["yes"] * 3 + ["no"] * 7),  # "Yes" → normalized "yes": 0.9
                    _ann("400", ["no"] * 10),
                ]
            },
        ),
    }


def _run(run_cli, files, *extra):
    """``vqadiag score consistency --introspect I --main M --sub S EXTRA`` (files by role)."""
    return run_cli(
        "score",
        "consistency",
        "--introspect",
        files["introspect"],
        "--main",
        files["main"],
        "--sub",
        files["sub"],
        *extra,
    )


def _score(run_cli, files, *extra):
    res = _run(run_cli, files, "--json", *extra)
    assert res.exit_code == 0, res.stderr
    return res.json()


def test_normalized_match_hand_worked(run_cli, files):
    out = _score(run_cli, files)
    # mains: 100 ✓, 200 ✗, 300 ✓ ("Yes" ~ "yes"), 400 ✓ (no subs)
    # pairs: 100_0 M✓S✓, 100_1 M✓S✗, 200_0 M✗S✓, 300_0 M✓S✗, 300_1 M✓S✗
    assert out["quadrants"] == {
        "main_correct_sub_correct": 20.0,
        "main_correct_sub_wrong": 60.0,
        "main_wrong_sub_correct": 20.0,
        "main_wrong_sub_wrong": 0.0,
    }
    assert out["consistency"] == pytest.approx(25.0)  # 1 / (1 + 3)
    # sub answers yellow, no, yes, no, yes: 2 yes, 2 no → weights 1 → same as plain
    assert out["consistency_balanced"] == pytest.approx(25.0)
    assert out["all_subs_wrong"] == pytest.approx(50.0)  # 300 of {100, 300}
    assert out["reasoning_accuracy"] == pytest.approx(75.0)  # 3 of 4 mains
    assert out["sub_accuracy"] == pytest.approx(40.0)  # 2 of 5
    assert (out["n_main"], out["n_pairs"], out["n_main_without_subs"]) == (4, 5, 1)
    assert out["n_main_correct"] == 3
    assert out["main_correctness"] == "normalized_match"
    assert "reasoning_vqa_accuracy" not in out and "overall_accuracy" not in out
    ci = out["ci"]
    assert ci["consistency"]["value"] == pytest.approx(25.0) and ci["consistency"]["n"] == 4
    assert ci["quadrants"]["main_wrong_sub_wrong"]["ci_high"] == 0.0
    low, high = ci["reasoning_accuracy"]["ci_low"], ci["reasoning_accuracy"]["ci_high"]
    assert low <= 75.0 <= high


def test_vqa_accuracy_for_mains(run_cli, files, write_json):
    overall = write_json("all.json", {"100": "yes", "200": "no", "300": "no", "400": "yes"})
    out = _score(run_cli, files, "--annotations", files["annotations"], "--overall", overall)
    # VQA accuracy of mains: 100 → 1, 200 → 0, 300 → 0.9, 400 → 1; correct = 1.0: 100, 400
    # pairs: 100_0 M✓S✓, 100_1 M✓S✗, 200_0 M✗S✓, 300_0 M✗S✗, 300_1 M✗S✗
    assert out["quadrants"] == pytest.approx(
        {
            "main_correct_sub_correct": 20.0,
            "main_correct_sub_wrong": 20.0,
            "main_wrong_sub_correct": 20.0,
            "main_wrong_sub_wrong": 40.0,
        }
    )
    assert out["consistency"] == pytest.approx(50.0)
    assert out["all_subs_wrong"] == pytest.approx(0.0)
    assert out["reasoning_accuracy"] == pytest.approx(50.0)
    assert out["reasoning_vqa_accuracy"] == pytest.approx(72.5)  # (1 + 0 + 0.9 + 1) / 4
    assert out["main_correctness"] == "vqa_accuracy >= 1"
    # overall: 1 + 1 + 1 ("no" matches 7 annotators) + 0 = 3 / 4
    assert out["overall_accuracy"] == pytest.approx(75.0) and out["n_overall"] == 4
    lowered = _score(run_cli, files, "--annotations", files["annotations"], "--threshold", "0.9")
    assert lowered["reasoning_accuracy"] == pytest.approx(75.0)  # 300 now counts (0.9 ≥ 0.9)


def test_one_file_for_mains_and_subs(run_cli, files, write_json):
    both = write_json("both.json", {**MAIN, **SUB})
    out = _score(run_cli, {**files, "main": both, "sub": both})
    assert out["consistency"] == pytest.approx(25.0)


def test_imp_vqa_subquestion_ids_and_prediction_file(run_cli, files, write_json):
    """imp_vqa's ``VQAIntrospect_val_withidv1.0.json``: every sub_qa entry gets
    ``subquestion_id = int(str(n) + "0" * 9)``, n counting from 1 over the file, and its
    LXMERT prediction file ``[{"question_id", "answer"}]`` holds mains and subs."""
    import copy

    withid = copy.deepcopy(INTROSPECT)
    n, ids = 1, {}
    for main_id, record in withid.items():
        for entry in record["introspect"]:
            for qa in entry["sub_qa"]:
                qa["subquestion_id"] = int(str(n) + "0" * 9)
                ids.setdefault(main_id, []).append(qa["subquestion_id"])
                n += 1
    # the sub-questions vqadiag keeps (first of duplicates, no invalid entries), in order
    kept = {"100_0": ids["100"][0], "100_1": ids["100"][1], "200_0": ids["200"][0],
            "300_0": ids["300"][0], "300_1": ids["300"][1]}  # fmt: skip
    predictions = [{"question_id": int(q), "answer": a} for q, a in MAIN.items()]
    predictions += [{"question_id": kept[s], "answer": a} for s, a in SUB.items()]
    predictions.append({"question_id": ids["100"][2], "answer": "yellow"})  # dropped duplicate
    predictions.append({"question_id": ids["100"][3], "answer": "x"})  # an 'invalid' entry
    intro = write_json("VQAIntrospect_val_withidv1.0.json", withid)
    preds = write_json("val_predict.json", predictions)
    out = _score(run_cli, {**files, "introspect": intro, "main": preds, "sub": preds})
    reference = _score(run_cli, files)
    # separate files: the sub-question file also answers the left-out sub-questions
    mains = write_json("mains.json", predictions[: len(MAIN)])
    subs = write_json("subs.json", predictions[len(MAIN) :])
    again = _score(run_cli, {**files, "introspect": intro, "main": mains, "sub": subs})
    assert again["consistency"] == reference["consistency"]
    assert out["consistency"] == reference["consistency"] == pytest.approx(25.0)
    assert out["quadrants"] == reference["quadrants"] and out["n_pairs"] == 5
    # one id on two sub-questions: one line naming it
    withid["300"]["introspect"][0]["sub_qa"][1]["subquestion_id"] = ids["100"][0]
    bad = _run(run_cli, {**files, "introspect": write_json("dup.json", withid)})
    assert bad.exit_code == 2 and f"'{ids['100'][0]}' appears twice" in bad.stderr
    withid["300"]["introspect"][0]["sub_qa"][1]["subquestion_id"] = [1]
    bad = _run(run_cli, {**files, "introspect": write_json("bad.json", withid)})
    assert bad.exit_code == 2 and "'subquestion_id' must be an integer" in bad.stderr


def test_sub_types_option(run_cli, files, write_json):
    sub = write_json("sub.json", {k: v for k, v in SUB.items() if k != "200_0"})
    out = _score(run_cli, {**files, "sub": sub}, "--sub-types", "reasoning")
    assert out["n_pairs"] == 4 and out["n_main_without_subs"] == 2


def test_whole_split_predictions_are_read_and_missing_ones_counted(run_cli, files, write_json):
    """A --main file of a whole VQA split (ids outside the introspect file) scores as the
    main questions alone do, the extra ids counted and noted; with --allow-missing the
    questions without a prediction are counted per file and noted on stderr."""
    reference = _score(run_cli, files)
    assert reference["extra_predictions"] == 0
    assert reference["missing_predictions"] == {"main": 0, "sub": 0}
    whole = write_json("whole.json", {**MAIN, "900": "no", "901": "yes"})
    res = _run(run_cli, {**files, "main": whole}, "--json")
    assert res.exit_code == 0, res.stderr
    assert res.json()["quadrants"] == reference["quadrants"]
    assert res.json()["extra_predictions"] == 2
    assert "note: 2 predictions for questions outside the introspect file" in res.stderr
    part = write_json("part.json", {k: v for k, v in SUB.items() if k != "300_1"})
    res = _run(run_cli, {**files, "sub": part}, "--allow-missing", "--json")
    assert res.exit_code == 0, res.stderr
    assert res.json()["missing_predictions"] == {"main": 0, "sub": 1}
    assert res.json()["quadrants"]["main_correct_sub_wrong"] == 60.0  # 300_1 was wrong anyway
    assert "note: 1 scored questions had no prediction in the sub predictions" in res.stderr


def test_human_output(run_cli, files):
    res = _run(run_cli, files)
    assert res.exit_code == 0
    assert "M✓ S✗" in res.stdout and "25.00" in res.stdout


@pytest.mark.parametrize(
    ("target", "content", "message"),
    [
        ("sub", '{"100_0": "yellow"}', "sub.json: 4 of 5 questions have no prediction"),
        ("sub", json.dumps({**SUB, "100_9": "x"}), "sub.json: record '100_9': question id is not"),
        ("main", '{"100": "yes", "200": NaN}', "main.json: malformed JSON"),
        ("main", "", "main.json: file is empty"),
        (
            "introspect",
            json.dumps({"1": {"reasoning_question": "Is it?"}}),
            "intro.json: record '1': missing field 'reasoning_answer_most_common'",
        ),
        ("introspect", '{"1": ', "intro.json: malformed JSON at line 1"),
    ],
)
def test_bad_input(run_cli, files, target, content, message):
    files[target].write_text(content)
    res = _run(run_cli, files)
    assert res.exit_code == 2
    assert message in res.stderr
    assert "Traceback" not in res.stderr


def test_main_without_annotation(run_cli, files, write_json):
    ann = write_json("ann.json", {"annotations": [_ann("100", ["yes"] * 10)]})
    res = _run(run_cli, files, "--annotations", ann)
    assert res.exit_code == 2
    assert "ann.json: record '200': main question has no annotation" in res.stderr


def test_allow_missing_counts_wrong(run_cli, files, write_json):
    sub = write_json("sub.json", {k: v for k, v in SUB.items() if k != "100_0"})
    out = _score(run_cli, {**files, "sub": sub}, "--allow-missing")
    assert out["consistency"] == pytest.approx(0.0)  # the only M✓S✓ pair became wrong


def test_bad_options(run_cli, files):
    res = _run(run_cli, files, "--sub-types", "reasoning,sometimes")
    assert res.exit_code == 2 and "--sub-types" in res.stderr
    res = _run(run_cli, files, "--overall", files["main"])
    assert res.exit_code == 2 and "needs --annotations" in res.stderr


def test_introspect_questions_writes_runnable_files(run_cli, files, tmp_path):
    out_dir = tmp_path / "qs"
    res = run_cli(
        "introspect-questions", "--introspect", files["introspect"], "--out", out_dir, "--json"
    )
    assert res.exit_code == 0, res.stderr
    assert res.json()["n_main"] == 4 and res.json()["n_sub"] == 5
    subs = json.loads((out_dir / "sub_questions.json").read_text())["questions"]
    assert [q["question_id"] for q in subs] == list(SUB)
    assert subs[2] == {"question_id": "200_0", "image_id": 2, "question": "Are there sharks?"}
    mains = json.loads((out_dir / "main_questions.json").read_text())["questions"]
    assert [q["question_id"] for q in mains] == list(MAIN)


def test_classify_questions_vqa(run_cli, write_json, tmp_path):
    questions = write_json(
        "q.json",
        {
            "info": {},
            "questions": [
                {"question_id": 1, "image_id": 1, "question": "How many dogs?"},
                {"question_id": 2, "image_id": 1, "question": "Is the banana ripe enough to eat?"},
                {"question_id": 3, "image_id": 1, "question": "What color is the bus?"},
                {"question_id": 4, "image_id": 1, "question": "Is this a home or a hotel?"},
            ],
        },
    )
    labels_path = tmp_path / "labels.json"
    res = run_cli("classify-questions", "--questions", questions, "--out", labels_path, "--json")
    assert res.exit_code == 0, res.stderr
    out = res.json()
    assert out["format"] == "vqa" and out["n"] == 4
    assert out["counts"] == {"reasoning": 2, "perception": 2}
    assert out["reasoning_percent"] == 50.0 and out["ci"]["reasoning_percent"]["n"] == 4
    by_rule = {r["rule"]: r["n"] for r in out["by_rule"]}
    assert by_rule[1] == 1 and by_rule[2] == 1 and sum(by_rule.values()) == 2
    labels = json.loads(labels_path.read_text())
    assert labels["1"] == {"label": "perception", "rules": [1]}
    assert labels["2"] == {"label": "reasoning", "rules": []}


def test_classify_questions_gqa_and_introspect(run_cli, write_json, files):
    gqa = write_json("gqa.json", {"07": {"question": "Is there a cat?", "answer": "no"}})
    out = run_cli("classify-questions", "--questions", gqa, "--json").json()
    assert out["format"] == "gqa" and out["counts"] == {"reasoning": 0, "perception": 1}
    out = run_cli("classify-questions", "--questions", files["introspect"], "--json").json()
    assert out["format"] == "introspect" and out["n"] == 9
    # mains all survive; subs: 'color' (2), 'Are there' (15), 'Is there' (6), 'shown?' (32)
    assert out["by_kind"] == {
        "main": {"reasoning": 4, "perception": 0},
        "sub": {"reasoning": 1, "perception": 4},
    }


def test_classify_questions_bad_input(run_cli, write_json, files):
    res = run_cli("classify-questions", "--questions", files["annotations"])
    assert res.exit_code == 2 and "ann.json: this is a VQA v2 annotations file" in res.stderr
    bad = write_json("g.json", {"07": {"answer": "no"}})
    res = run_cli("classify-questions", "--questions", bad)
    assert res.exit_code == 2 and "g.json: record '07': missing field 'question'" in res.stderr
