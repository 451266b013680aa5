"""``vqadiag score robustness`` end to end, and its bad-input errors (docs/protocols.md §4)."""

from __future__ import annotations

import pytest


def _ann(qid, answers, answer_type):
    return {
        "question_id": qid,
        "image_id": 1,
        "question_type": "what",
        "answer_type": answer_type,
        "answers": [
            {"answer": a, "answer_confidence": "yes", "answer_id": i + 1}
            for i, a in enumerate(answers)
        ],
    }


def _score(run_cli, truth, clean, *noisy, args=()):
    """``vqadiag score robustness --truth T --clean C --noisy N1 [N2 …] ARGS``."""
    return run_cli(
        "score", "robustness", "--truth", truth, "--clean", clean, "--noisy", *noisy, *args
    )


@pytest.fixture
def vqa(write_json):
    """Four VQA questions; clean 97.5%, partition 1 75%, partition 2 72.5% (hand-worked)."""
    annotations = {
        "info": {},
        "annotations": [
            _ann(1, ["yes"] * 10, "yes/no"),
            _ann(2, ["two"] * 3 + ["three"] * 7, "number"),
            _ann(3, ["red"] * 10, "other"),
            _ann(4, ["no"] * 10, "yes/no"),
        ],
    }
    # "two" matches 3 of 10 annotators: 3 × min(1, 2/3) + 7 × min(1, 3/3) = 9 → 0.9.
    # clean:   1 + 0.9 + 1 + 1 = 3.9 / 4 = 97.5
    # noisy 1: q2 "one" → 0:      3 / 4 = 75.0   Acc_diff 22.5
    # noisy 2: q1 "no" → 0:     2.9 / 4 = 72.5   Acc_diff 25.0
    return {
        "truth": write_json("ann.json", annotations),
        "clean": write_json("clean.json", {"1": "yes", "2": "two", "3": "red", "4": "no"}),
        "n1": write_json(
            "n1.json",
            [
                {"question_id": q, "answer": a}
                for q, a in [(1, "yes"), (2, "one"), (3, "red"), (4, "no")]
            ],
        ),
        "n2": write_json("n2.json", {"1": "no", "2": "two", "3": "red", "4": "no"}),
    }


def test_the_api_takes_one_noisy_file_given_alone(vqa):
    """Found in review: ``noisy="n1.json"`` was read as one partition per character."""
    import vqadiag

    alone = vqadiag.score_robustness(vqa["truth"], vqa["clean"], str(vqa["n1"]))
    assert alone == vqadiag.score_robustness(vqa["truth"], vqa["clean"], [vqa["n1"]])
    assert alone["partitions"][0]["acc_diff"] == pytest.approx(22.5)


def test_vqa_partitions_and_r_score(run_cli, vqa):
    res = _score(
        run_cli,
        vqa["truth"],
        vqa["clean"],
        vqa["n1"],
        vqa["n2"],
        args=("--t", "0", "--m", "100", "--json"),
    )
    assert res.exit_code == 0, res.stderr
    out = res.json()
    assert out["truth"] == "vqa_annotations" and out["metric"] == "vqa_accuracy"
    assert out["clean"] == pytest.approx(97.5)
    p1, p2 = out["partitions"]
    assert p1["accuracy"] == pytest.approx(75.0) and p2["accuracy"] == pytest.approx(72.5)
    assert p1["acc_diff"] == pytest.approx(22.5) and p2["acc_diff"] == pytest.approx(25.0)
    # t = 0, m = 100: R = (10 − √Acc_diff) / 10 → 1 − √22.5/10 = 0.525658, 1 − 5/10 = 0.5
    assert p1["r_score"] == pytest.approx(1 - 22.5**0.5 / 10, abs=1e-12)
    assert p2["r_score"] == pytest.approx(0.5, abs=1e-12)
    assert out["r_score"] == p1["r_score"] and out["acc_diff"] == p1["acc_diff"]
    assert out["monotonic"] is True and out["monotonic_violations"] == []
    assert out["n"] == 4
    # per answer type: yes/no = q1, q4; number = q2; other = q3
    assert out["perAnswerType"] == pytest.approx({"yes/no": 100.0, "number": 90.0, "other": 100.0})
    assert p1["perAnswerType"] == pytest.approx({"yes/no": 100.0, "number": 0.0, "other": 100.0})
    assert p2["perAnswerType"] == pytest.approx({"yes/no": 50.0, "number": 90.0, "other": 100.0})
    ci = out["ci"]
    assert ci["clean"]["value"] == pytest.approx(97.5) and ci["clean"]["n"] == 4
    assert ci["clean"]["ci_low"] <= 97.5 <= ci["clean"]["ci_high"]
    assert ci["partitions"][1]["r_score"]["value"] == pytest.approx(0.5)
    assert ci["r_score"] == ci["partitions"][0]["r_score"]
    assert ci["partitions"][0]["perAnswerType"]["yes/no"]["n"] == 2


def test_default_limits_and_order_matter(run_cli, vqa):
    res = _score(
        run_cli, vqa["truth"], vqa["clean"], vqa["n2"], args=("--noisy", vqa["n1"], "--json")
    )
    out = res.json()
    assert out["t"] == 0.05 and out["m"] == 20.0
    assert [p["r_score"] for p in out["partitions"]] == [0.0, 0.0]  # both diffs ≥ m = 20
    assert out["monotonic"] is False and out["monotonic_violations"] == [2]  # 72.5 → 75


def test_same_seed_same_intervals(run_cli, vqa):
    args = ("--json", "--seed", "5", "--n-bootstrap", "200")

    def run():
        return _score(run_cli, vqa["truth"], vqa["clean"], vqa["n1"], args=args).json()

    assert run() == run()


def test_human_output(run_cli, vqa):
    res = _score(run_cli, vqa["truth"], vqa["clean"], vqa["n1"], vqa["n2"])
    assert res.exit_code == 0
    assert "R_score" in res.stdout and "monotonic fall: yes" in res.stdout
    assert "yes/no" in res.stdout


def test_gqa_truth_exact_match_balanced_only(run_cli, write_json):
    questions = {
        "01": {"question": "Is it a cat?", "answer": "yes", "imageId": "i1", "isBalanced": True},
        "02": {"question": "What color?", "answer": "red", "imageId": "i1", "isBalanced": True},
        "03": {"question": "What?", "answer": "cat", "imageId": "i2", "isBalanced": False},
    }
    truth = write_json("gqa.json", questions)
    clean = write_json("c.json", {"01": "yes", "02": "red", "03": "dog"})  # 03 is ignored
    noisy = write_json("n.json", {"01": "yes", "02": "Red"})  # no normalization: "Red" ≠ "red"
    res = _score(run_cli, truth, clean, noisy, args=("--t", "0", "--m", "100", "--json"))
    assert res.exit_code == 0, res.stderr
    out = res.json()
    assert out["truth"] == "gqa" and out["metric"] == "exact_match" and out["n"] == 2
    assert out["clean"] == 100.0 and out["partitions"][0]["accuracy"] == 50.0
    # Acc_diff 50: (10 − √50) / 10 = 1 − 0.707107 = 0.292893
    assert out["r_score"] == pytest.approx(1 - 50**0.5 / 10, abs=1e-12)
    assert "perAnswerType" not in out
    assert out["monotonic"] is None  # one partition: nothing to compare
    assert out["missing_predictions"] == {"clean": 0, "noisy_1": 0}
    res = _score(
        run_cli, truth, clean, noisy, args=("--all-questions", "--allow-missing", "--json")
    )
    assert res.json()["n"] == 3
    assert res.json()["missing_predictions"] == {"clean": 0, "noisy_1": 1}  # 03
    assert "note: 1 scored questions had no prediction in the noisy_1 predictions" in res.stderr
    res = _score(run_cli, truth, clean, noisy, args=("--lenient",))  # VQA's normalisation
    assert res.exit_code == 2 and res.stderr.strip() == (
        "error: --lenient: normalises answers for VQA accuracy: GQA answers match exactly"
    )


def test_questions_restricts_the_run(run_cli, vqa, write_json):
    subset = write_json("subset.json", ["1", "2"])
    res = _score(
        run_cli, vqa["truth"], vqa["clean"], vqa["n1"], args=("--questions", subset, "--json")
    )
    out = res.json()
    # clean (1 + 0.9) / 2 = 95.0; noisy 1 (1 + 0) / 2 = 50.0
    assert out["n"] == 2 and out["clean"] == pytest.approx(95.0)
    assert out["partitions"][0]["accuracy"] == pytest.approx(50.0)


@pytest.mark.parametrize(
    ("target", "content", "message"),
    [
        ("truth", "", "ann.json: file is empty"),
        ("truth", '{"annotations": [', "ann.json: malformed JSON at line 1"),
        (
            "clean",
            '{"1": "yes", "9": "no", "2": "x", "3": "y", "4": "z"}',
            "clean.json: record '9': question id is not in ann.json",
        ),
        ("clean", '{"1": "yes"}', "clean.json: 3 of 4 questions have no prediction"),
        ("n1", '[{"question_id": 1, "answer": NaN}]', "n1.json: malformed JSON"),
        ("n1", '[{"question_id": 1}]', "n1.json: record '1': missing answer field"),
    ],
)
def test_bad_input(run_cli, vqa, target, content, message):
    vqa[target].write_text(content)
    res = _score(run_cli, vqa["truth"], vqa["clean"], vqa["n1"])
    assert res.exit_code == 2
    assert message in res.stderr
    assert "Traceback" not in res.stderr


def test_annotation_without_answers(run_cli, vqa, write_json):
    truth = write_json(
        "ann.json",
        {"annotations": [{"question_id": 1, "question_type": "is", "answer_type": "yes/no"}]},
    )
    res = _score(run_cli, truth, vqa["clean"], vqa["n1"])
    assert res.exit_code == 2
    assert "ann.json: record '1': missing field 'answers'" in res.stderr


def test_questions_file_as_truth_is_refused(run_cli, vqa, write_json):
    truth = write_json(
        "q.json",
        {"info": {}, "questions": [{"question_id": 1, "image_id": 1, "question": "Is it?"}]},
    )
    res = _score(run_cli, truth, vqa["clean"], vqa["n1"])
    assert res.exit_code == 2
    assert "q.json: this is a VQA v2 questions file" in res.stderr
    ids = write_json("robustness_questions.json", ["1", "2"])  # the --questions file
    res = _score(run_cli, ids, vqa["clean"], vqa["n1"])
    assert res.exit_code == 2
    assert "robustness_questions.json: this is a list of question ids (the --questions " in (
        res.stderr
    )
    given = write_json("answers.json", [{"question_id": 1, "answer": "yes"}])
    res = _score(run_cli, given, vqa["clean"], vqa["n1"])
    assert res.exit_code == 2 and "answers.json: this is a prediction file, which has" in (
        res.stderr
    )


def test_unknown_question_in_subset(run_cli, vqa, write_json):
    subset = write_json("subset.json", ["1", "77"])
    res = _score(run_cli, vqa["truth"], vqa["clean"], vqa["n1"], args=("--questions", subset))
    assert res.exit_code == 2
    assert "subset.json: record '77': question id is not in ann.json" in res.stderr


@pytest.mark.parametrize(("t", "m"), [("20", "20"), ("-1", "20"), ("0.05", "150")])
def test_bad_limits(run_cli, vqa, t, m):
    res = _score(run_cli, vqa["truth"], vqa["clean"], vqa["n1"], args=("--t", t, "--m", m))
    assert res.exit_code == 2
    assert "--t/--m" in res.stderr


def test_too_many_partitions(run_cli, vqa):
    res = _score(run_cli, vqa["truth"], vqa["clean"], *([vqa["n1"]] * 8))
    assert res.exit_code == 2
    assert "at most 7 noisy partitions" in res.stderr
