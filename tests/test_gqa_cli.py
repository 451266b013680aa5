"""``vqadiag score gqa`` and ``vqadiag score ood`` end to end, and their bad-input errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import vqadiag
from vqadiag.errors import DataError


def op(text: str) -> dict[str, Any]:
    operation, argument = text.split(": ", 1)
    return {"operation": operation, "argument": argument, "dependencies": []}


def rec(
    question: str,
    answer: str,
    structural: str,
    semantic: str,
    global_group: str | None,
    *,
    entailed: tuple[str, ...] = (),
    balanced: bool = True,
    steps: tuple[str, ...] = ("select: sky (1)", "query: color"),
    local: str | None = "l",
) -> dict[str, Any]:
    return {
        "question": question,
        "answer": answer,
        "fullAnswer": answer,
        "imageId": "2354786",
        "isBalanced": balanced,
        "groups": {"global": global_group, "local": local},
        "types": {"structural": structural, "semantic": semantic, "detailed": "x"},
        "semantic": [op(s) for s in steps],
        "entailed": list(entailed),
        "equivalent": [],
        "annotations": {"question": {}, "answer": {}, "fullAnswer": {}},
    }


QUESTIONS = {
    "001": rec("What color is the sky?", "blue", "query", "attr", "color", entailed=("002", "003")),
    "002": rec("Is the sky blue?", "yes", "verify", "attr", None),
    "003": rec("Is the sky red?", "no", "verify", "attr", None, balanced=False),
    "004": rec(
        "What is on the table?",
        "cup",
        "query",
        "obj",
        "object",
        steps=("select: table (1)", "relate: on,s (2)", "query: name"),
    ),
}
CHOICES = {
    "001": {"valid": ["blue", "red"], "plausible": ["blue"]},
    "002": {"valid": ["yes", "no"], "plausible": ["yes"]},
    "003": {"valid": ["yes", "no"], "plausible": ["no"]},
    "004": {"valid": ["cup", "plate"], "plausible": ["cup"]},
}
# 001 right, 002 right, 004 wrong; 003 (unbalanced) has no prediction
PREDICTIONS = [
    {"questionId": "001", "prediction": "blue"},
    {"questionId": "002", "prediction": "yes"},
    {"questionId": "004", "prediction": "plate"},
]


@pytest.fixture
def gqa_files(write_json):
    return (
        write_json("q.json", QUESTIONS),
        write_json("p.json", PREDICTIONS),
        write_json("c.json", CHOICES),
    )


def test_score_gqa_json_hand_worked(run_cli, gqa_files):
    q, p, c = gqa_files
    res = run_cli("score", "gqa", "--questions", q, "--predictions", p, "--choices", c, "--json")
    assert res.exit_code == 0, res.stderr
    out = res.json()
    # scored: 001 (right), 002 (right), 004 (wrong); 003 is not balanced
    assert out["n"] == 3
    assert out["accuracy"] == 2 / 3 * 100
    assert out["binary"] == 100.0  # 002
    assert out["open"] == 50.0  # 001 right, 004 wrong
    assert out["perStructuralType"] == {"query": 50.0, "verify": 100.0}
    assert out["perSemanticType"] == {"attr": 100.0, "obj": 0.0}
    assert out["perLength"] == {"4": 100.0, "5": 50.0}  # "Is the sky blue?" has 4 words
    assert out["perSteps"] == {"2": 2 / 3 * 100}  # 004: "query: name" is not a step
    assert out["validity"] == 100.0
    assert out["plausibility"] == 2 / 3 * 100  # "plate" is valid but not plausible
    # 001 is right; its entailed 002 is right, 003 has no prediction (skipped) -> 1.0
    assert out["consistency"] == 100.0
    assert out["consistency_detail"] == {
        "n_questions": 1,
        "n_entailed": 1,
        "entailed_skipped": 1,
        "questions_skipped": 0,
    }
    # group color: blue/blue -> 0; group object: gold cup, predicted plate -> 1, N = 1
    # (0*1 + 1*1) / 2 / 100
    assert out["distribution"] == 0.005
    assert out["balanced_only"] is True
    ci = out["ci"]
    assert ci["accuracy"]["value"] == out["accuracy"] and ci["accuracy"]["n"] == 3
    assert ci["accuracy"]["ci_low"] <= out["accuracy"] <= ci["accuracy"]["ci_high"]
    assert set(ci["perStructuralType"]) == {"query", "verify"}
    assert ci["perLength"]["5"]["n"] == 2
    assert ci["distribution"]["value"] == 0.005


def test_score_gqa_human_output_and_seed(run_cli, gqa_files):
    q, p, _ = gqa_files
    res = run_cli("score", "gqa", "--questions", q, "--predictions", p)
    assert res.exit_code == 0, res.stderr
    assert "accuracy" in res.stdout and "66.67" in res.stdout
    assert "pass --choices" in res.stdout
    args = ("score", "gqa", "--questions", q, "--predictions", p, "--json", "--n-bootstrap", "50")
    first, again = run_cli(*args, "--seed", "3").json(), run_cli(*args, "--seed", "3").json()
    assert first == again
    assert first["validity"] is None and first["ci"]["validity"] is None


def test_score_gqa_all_questions_needs_every_prediction(run_cli, gqa_files, write_json):
    q, p, _ = gqa_files
    res = run_cli("score", "gqa", "--questions", q, "--predictions", p, "--all-questions")
    assert res.exit_code == 2
    assert "p.json" in res.stderr and "1 of 4 questions have no prediction" in res.stderr
    res = run_cli(
        "score", "gqa", "--questions", q, "--predictions", p, "--all-questions",
        "--allow-missing", "--json",
    )  # fmt: skip
    assert res.exit_code == 0, res.stderr
    assert res.json()["n"] == 4 and res.json()["accuracy"] == 50.0  # 003 counted wrong


def test_score_gqa_missing_balanced_prediction(run_cli, gqa_files, write_json):
    q, _, _ = gqa_files
    p = write_json("p2.json", {"001": "blue", "002": "yes"})
    res = run_cli("score", "gqa", "--questions", q, "--predictions", p)
    assert res.exit_code == 2
    assert "p2.json" in res.stderr and "'004'" in res.stderr and "--allow-missing" in res.stderr
    res = run_cli("score", "gqa", "--questions", q, "--predictions", p, "--allow-missing", "--json")
    assert res.json()["accuracy"] == 2 / 3 * 100
    assert res.json()["distribution"] == 0.005  # no prediction: counts in no histogram


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("q.json", '{"001": {"question": "a", ', "q.json: malformed JSON at line 1"),
        ("q.json", "", "q.json: file is empty"),
        ("p.json", '{"001": NaN}', "p.json: malformed JSON at line 1, column 9: NaN"),
        ("p.json", '{"001": "blue", "999": "x"}', "p.json: 2 of 3 questions have no prediction"),
    ],
)
def test_score_gqa_bad_files(run_cli, gqa_files, name, content, message):
    q, p, _ = gqa_files
    (q if name == "q.json" else p).write_text(content)
    res = run_cli("score", "gqa", "--questions", q, "--predictions", p)
    assert res.exit_code == 2
    assert res.stderr.startswith("error: ")
    assert message in res.stderr


def test_score_gqa_null_gold_answer_is_refused(run_cli, write_json, gqa_files):
    """A null gold answer is refused naming the file and record, on the typed fast path's
    fallback and in every command that reads GQA answers (it used to be scored as if no
    prediction could match it)."""
    _, p, _ = gqa_files
    broken = json.loads(json.dumps(QUESTIONS))
    broken["002"]["answer"] = None
    q = write_json("nullans.json", broken)
    for command in (("gqa", "--predictions", p), ("ood",)):
        res = run_cli("score", *command[:1], "--questions", q, *command[1:])
        assert res.exit_code == 2, command
        assert "nullans.json: record '002': 'answer' is null" in res.stderr


def test_score_gqa_allow_missing_counts_and_notes_the_missing(run_cli, gqa_files, write_json):
    """With --allow-missing the questions without a prediction are scored wrong, counted
    in ``missing_predictions`` and said on stderr; a complete file counts 0."""
    q, p, _ = gqa_files
    res = run_cli("score", "gqa", "--questions", q, "--predictions", p, "--json")
    assert res.exit_code == 0 and res.json()["missing_predictions"] == 0
    assert "no prediction" not in res.stderr
    part = write_json("part.json", {"001": "blue"})
    res = run_cli(
        "score", "gqa", "--questions", q, "--predictions", part, "--allow-missing", "--json"
    )
    assert res.exit_code == 0, res.stderr
    out = res.json()
    assert out["missing_predictions"] == 2  # 002 and 004, counted wrong
    assert out["accuracy"] == pytest.approx(100 / 3)
    assert "note: 2 scored questions had no prediction, counted wrong" in res.stderr


def test_score_gqa_missing_fields_name_the_record(run_cli, write_json, gqa_files):
    _, p, _ = gqa_files
    broken = json.loads(json.dumps(QUESTIONS))
    del broken["004"]["types"]
    q = write_json("broken.json", broken)
    res = run_cli("score", "gqa", "--questions", q, "--predictions", p)
    assert res.exit_code == 2
    assert "broken.json: record '004': missing field 'types'" in res.stderr
    del broken["004"]
    broken["002"]["semantic"] = [{"operation": "select"}]
    q = write_json("broken2.json", broken)
    p2 = write_json("p2.json", {"001": "blue", "002": "yes"})
    res = run_cli("score", "gqa", "--questions", q, "--predictions", p2)
    assert res.exit_code == 2
    assert "broken2.json: record '002': 'semantic' step 0 needs" in res.stderr
    small_choices = write_json("c2.json", {"001": CHOICES["001"]})
    res = run_cli("score", "gqa", "--questions", q, "--predictions", p2, "--choices", small_choices)
    assert res.exit_code == 2
    assert "c2.json: record '002': no choices for this question" in res.stderr


def test_score_gqa_without_balanced_questions(run_cli, write_json):
    q = write_json("unbalanced.json", {"003": QUESTIONS["003"]})
    p = write_json("p.json", {"003": "no"})
    res = run_cli("score", "gqa", "--questions", q, "--predictions", p)
    assert res.exit_code == 2
    assert "unbalanced.json: no balanced questions" in res.stderr


# ------------------------------------------------------------------- score ood

# Local group A: yes x8, no x2 -> H = 0.72193; B (red/blue x5), C (cat x1), D (x/y/z x2)
# have H = 1. mean 0.93048, population std 0.12041 -> threshold 0.81007: A kept.
# alpha = 0.2: tail if p < 0.6 -> "no" (p = 0.2) is tail, "yes" (0.8) head.
OOD_GROUPS = {
    "A": [("yes", 8), ("no", 2)],
    "B": [("red", 5), ("blue", 5)],
    "C": [("cat", 1)],
    "D": [("x", 2), ("y", 2), ("z", 2)],
}


def ood_questions() -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for local, answers in OOD_GROUPS.items():
        for answer, count in answers:
            for _ in range(count):
                out[f"0{len(out):03d}"] = rec("Is it?", answer, "verify", "attr", None, local=local)
    return out


@pytest.fixture
def ood_files(write_json):
    questions = ood_questions()
    predictions = {qid: r["answer"] for qid, r in questions.items()}
    in_a = [q for q, r in questions.items() if r["groups"]["local"] == "A"]
    a_yes = [q for q in in_a if questions[q]["answer"] == "yes"]
    a_no = [q for q in in_a if questions[q]["answer"] == "no"]
    predictions[a_yes[0]] = "no"  # head: 7 of 8 right
    predictions[a_no[0]] = "yes"  # tail: 1 of 2 right
    return write_json("ood_q.json", questions), write_json("ood_p.json", predictions), a_no


def test_score_ood_hand_worked(run_cli, ood_files):
    q, p, _ = ood_files
    res = run_cli("score", "ood", "--questions", q, "--predictions", p, "--json")
    assert res.exit_code == 0, res.stderr
    out = res.json()
    assert (out["n_all"], out["n_head"], out["n_tail"]) == (10, 8, 2)
    assert out["acc_all"] == 80.0  # 8 of 10
    assert out["acc_head"] == 87.5  # 7 of 8
    assert out["acc_tail"] == 50.0  # 1 of 2
    assert out["delta"] == 75.0  # (87.5 - 50) / 50 * 100
    assert out["alpha"] == 0.2
    assert out["split"]["n_groups"] == 4 and out["split"]["n_groups_kept"] == 1
    assert out["split"]["entropy_threshold"] == pytest.approx(0.81007, abs=1e-5)
    assert out["ci"]["acc_tail"]["n"] == 2 and out["ci"]["delta"]["value"] == 75.0
    assert out["ci"]["delta"]["n"] == 10
    assert "curve" not in out


def test_score_ood_curve_plot_and_split_files(run_cli, ood_files, tmp_path):
    q, p, a_no = ood_files
    png = tmp_path / "plots" / "tail.png"
    split_dir = tmp_path / "split"
    res = run_cli(
        "score", "ood", "--questions", q, "--predictions", p, "--plot", png,
        "--write-split", split_dir, "--json",
    )  # fmt: skip
    assert res.exit_code == 0, res.stderr
    out = res.json()
    curve = {point["alpha"]: point for point in out["curve"]}
    assert len(out["curve"]) == 22
    # alpha = -0.7: threshold 0.3 / 2 = 0.15 > p("no") = 0.2 is false -> empty tail
    assert curve[-0.7] == {"alpha": -0.7, "acc_tail": None, "n_tail": 0}
    # alpha = -0.5: 0.25 -> "no" is tail; alpha = 9: 5 -> every answer of A is tail
    assert curve[-0.5] == {"alpha": -0.5, "acc_tail": 50.0, "n_tail": 2}
    assert curve[9.0] == {"alpha": 9.0, "acc_tail": 80.0, "n_tail": 10}
    assert out["ci"]["curve"][0] == {"alpha": -0.7, "acc_tail": None}
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out["plot"] == str(png)
    questions = json.loads(Path(q).read_text())
    tail = json.loads((split_dir / "ood_tail.json").read_text())
    assert list(tail) == sorted(a_no)
    assert tail[a_no[0]] == questions[a_no[0]]
    assert len(json.loads((split_dir / "ood_all.json").read_text())) == 10
    assert len(json.loads((split_dir / "ood_head.json").read_text())) == 8


def test_score_ood_split_only_without_predictions(run_cli, ood_files, tmp_path):
    q, _, _ = ood_files
    res = run_cli("score", "ood", "--questions", q, "--write-split", tmp_path / "s", "--curve")
    assert res.exit_code == 0, res.stderr
    assert "1 of 4 local groups kept" in res.stdout and "2 tail" in res.stdout
    out = run_cli("score", "ood", "--questions", q, "--alpha", "9", "--json").json()
    assert out["acc_all"] is None and out["delta"] is None
    assert (out["n_all"], out["n_head"], out["n_tail"]) == (10, 0, 10)
    assert (tmp_path / "s" / "ood_head.json").exists()
    res = run_cli("score", "ood", "--questions", q, "--plot", tmp_path / "x.png")
    assert res.exit_code == 2 and "--plot needs --predictions" in res.stderr
    txt = tmp_path / "x.txt"
    res = run_cli("score", "ood", "--questions", q, "--predictions", q, "--plot", txt)
    assert res.exit_code == 2 and res.stderr.strip() == (
        f"error: {txt}: --plot writes a PNG: name the file … .png"
    )
    assert not txt.exists()


def test_score_ood_predictions_may_cover_only_the_split(run_cli, ood_files, write_json):
    q, _, a_no = ood_files
    questions = json.loads(Path(q).read_text())
    split_only = {qid: r["answer"] for qid, r in questions.items() if r["groups"]["local"] == "A"}
    p = write_json("split_p.json", split_only)
    res = run_cli("score", "ood", "--questions", q, "--predictions", p, "--json")
    assert res.exit_code == 0 and res.json()["acc_all"] == 100.0
    del split_only[a_no[0]]
    p = write_json("split_p.json", split_only)
    res = run_cli("score", "ood", "--questions", q, "--predictions", p)
    assert res.exit_code == 2
    assert "split_p.json: 1 of 10 questions have no prediction" in res.stderr


def test_score_ood_bad_input(run_cli, write_json):
    questions = ood_questions()
    del questions["0003"]["groups"]["local"]
    q = write_json("noloc.json", questions)
    res = run_cli("score", "ood", "--questions", q)
    assert res.exit_code == 2
    assert "noloc.json: record '0003': missing field 'groups.local'" in res.stderr
    questions = ood_questions()
    del questions["0005"]["groups"]
    res = run_cli("score", "ood", "--questions", write_json("nogroups.json", questions))
    assert res.exit_code == 2
    assert "nogroups.json: record '0005': missing field 'groups'" in res.stderr
    res = run_cli("score", "ood", "--questions", write_json("ok.json", ood_questions()),
                  "--alpha", "-1")  # fmt: skip
    assert res.exit_code == 2


# -- GQA-OOD's released split files and the official construction ----------------------


def _released(write_json, questions, split_of):
    """The three files of the GQA-OOD release, ``{qid: record}`` with sorted ids."""
    files = {}
    for name in ("all", "head", "tail"):
        ids = sorted(q for q in questions if name == "all" or split_of[q] == name)
        files[name] = write_json(f"ood_testdev_{name}.json", {q: questions[q] for q in ids})
    return files


def test_score_ood_scores_released_split_files_as_they_are(run_cli, write_json):
    """The official evaluation scores each released file as it is: 3 head and 2 tail
    questions, testdev-wide predictions (more ids than the split) counted, not refused."""
    questions = {f"h{i}": rec("Is it?", "yes", "verify", "attr", None) for i in range(3)}
    questions |= {f"t{i}": rec("Is it?", "no", "verify", "attr", None) for i in range(2)}
    questions["t9"] = rec("Is it?", "no", "verify", "attr", None, balanced=False)
    split_of = {q: "head" if q.startswith("h") else "tail" for q in questions}
    files = _released(write_json, questions, split_of)
    predictions = {q: r["answer"] for q, r in questions.items()}
    predictions["h0"] = "no"  # head 2 of 3
    predictions |= {"x1": "yes", "x2": "no"}  # testdev questions outside the split
    p = write_json("testdev_predictions.json", predictions)
    res = run_cli("score", "ood", "--head", files["head"], "--tail", files["tail"],
                  "--predictions", p, "--json")  # fmt: skip
    assert res.exit_code == 0, res.stderr
    out = res.json()
    # t9 is not balanced: in the file, not scored (the official evaluation)
    assert (out["n_all"], out["n_head"], out["n_tail"]) == (5, 3, 2)
    assert out["acc_head"] == pytest.approx(200 / 3) and out["acc_tail"] == 100.0
    assert out["acc_all"] == 80.0 and out["delta"] == pytest.approx(-100 / 3)
    assert out["split"]["source"] == "released" and out["extra_predictions"] == 2
    assert out["alpha"] is None  # the released split's tail is its own
    sized = run_cli("score", "ood", "--head", files["head"], "--tail", files["tail"],
                    "--predictions", p, "--alpha", "3")  # fmt: skip
    assert sized.exit_code == 2 and sized.stderr.strip() == (
        "error: --alpha: sizes the tail of a built split: --head / --tail have theirs"
    )
    assert "2 predictions for questions outside the split were ignored" in res.stderr
    # the all file may come along: it must be head ∪ tail
    ok = run_cli("score", "ood", "--questions", files["all"], "--head", files["head"],
                 "--tail", files["tail"], "--predictions", p, "--json")  # fmt: skip
    assert ok.exit_code == 0 and ok.json()["acc_all"] == 80.0
    other = write_json("other_all.json", {"h0": questions["h0"]})
    bad = run_cli("score", "ood", "--questions", other, "--head", files["head"],
                  "--tail", files["tail"], "--predictions", p)  # fmt: skip
    assert bad.exit_code == 2 and "other_all.json" in bad.stderr and "head ∪ tail" in bad.stderr
    # a released file is never rebuilt into a split inside it without a word
    again = run_cli("score", "ood", "--questions", files["all"], "--predictions", p)
    assert again.exit_code == 2
    line = again.stderr.strip()
    assert "\n" not in line and "ood_testdev_all.json" in line and "--head" in line
    lonely = run_cli("score", "ood", "--head", files["head"], "--predictions", p)
    assert lonely.exit_code == 2 and "--tail" in lonely.stderr
    curve = run_cli("score", "ood", "--head", files["head"], "--tail", files["tail"],
                    "--predictions", p, "--curve")  # fmt: skip
    assert curve.exit_code == 2 and "--curve" in curve.stderr
    overlap = run_cli("score", "ood", "--head", files["head"], "--tail", files["head"],
                      "--predictions", p)  # fmt: skip
    assert overlap.exit_code == 2 and "in both" in overlap.stderr


def test_score_ood_builds_groups_from_every_question_scores_the_balanced(run_cli, write_json):
    """The official build_gqa_ood.py groups every question of the file it is given; its
    evaluation counts the balanced ones. 25 unbalanced "red" answers make group B
    (red 30, blue 5: H = 0.59167) the one kept instead of A (yes 8, no 2: H = 0.72193):
    H of A, B, C, D = 0.72193, 0.59167, 1, 1 → mean 0.82840, population std 0.17767,
    threshold 0.65073."""
    questions = ood_questions()
    for i in range(25):
        questions[f"u{i:02d}"] = rec("Is it?", "red", "verify", "attr", None, local="B",
                                     balanced=False)  # fmt: skip
    in_b = [q for q, r in questions.items() if r["groups"]["local"] == "B" and r["isBalanced"]]
    predictions = {q: r["answer"] for q, r in questions.items()}
    blue = [q for q in in_b if questions[q]["answer"] == "blue"]
    predictions[blue[0]] = "red"  # tail: 4 of 5
    q = write_json("mixed_questions.json", questions)
    p = write_json("mixed_predictions.json", predictions)
    res = run_cli("score", "ood", "--questions", q, "--predictions", p, "--json")
    assert res.exit_code == 0, res.stderr
    out = res.json()
    assert out["split"]["entropy_threshold"] == pytest.approx(0.65073, abs=1e-5)
    assert out["split"]["n_groups_kept"] == 1 and out["split"]["n_questions"] == 52
    # blue (p = 1/7 < 0.6) is tail, red head; scored: the 10 balanced questions of B
    assert (out["n_all"], out["n_head"], out["n_tail"]) == (10, 5, 5)
    assert out["acc_head"] == 100.0 and out["acc_tail"] == 80.0 and out["delta"] == 25.0


def test_score_gqa_counts_predictions_for_other_questions(run_cli, gqa_files, write_json):
    q, p, _ = gqa_files
    predictions = json.loads(Path(p).read_text())
    predictions += [{"questionId": "zzz1", "prediction": "blue"},
                    {"questionId": "zzz2", "prediction": "no"}]  # fmt: skip
    wide = write_json("wide_predictions.json", predictions)
    res = run_cli("score", "gqa", "--questions", q, "--predictions", wide, "--json")
    assert res.exit_code == 0, res.stderr
    narrow = run_cli("score", "gqa", "--questions", q, "--predictions", p, "--json").json()
    out = res.json()
    assert out["extra_predictions"] == 2 and narrow["extra_predictions"] == 0
    assert out["accuracy"] == narrow["accuracy"]
    assert "2 predictions for questions outside" in res.stderr


def test_score_gqa_counts_converted_and_null_predictions(run_cli, gqa_files, write_json):
    """002 (gold "yes") predicted JSON true: read as "yes" and counted; 004 (gold "cup")
    null: scored wrong, as the official script scores it, and counted."""
    q, _, _ = gqa_files
    p = write_json("typed.json", {"001": "blue", "002": True, "004": None})
    res = run_cli("score", "gqa", "--questions", q, "--predictions", p, "--json")
    assert res.exit_code == 0, res.stderr
    out = res.json()
    assert out["converted_predictions"] == 1 and out["null_predictions"] == 1
    assert out["accuracy"] == pytest.approx(200 / 3)  # 001 and 002 right, 004 wrong
    assert "note: 1 predictions were JSON booleans or numbers" in res.stderr
    assert "note: 1 predictions were null, scored wrong" in res.stderr


def test_score_pairs_help_shows_the_pair_shape():
    import os
    import subprocess
    import sys

    env = {**os.environ, "COLUMNS": "200"}
    out = subprocess.run([sys.executable, "-m", "vqadiag", "score", "pairs", "--help"],
                         capture_output=True, text=True, env=env, check=True).stdout  # fmt: skip
    assert "JSON list of [qid_a, qid_b] pairs" in out


# -- grounding (eval.py --grounding) ------------------------------------------------------


def test_grounding_score_hand_worked():
    """Image 100 × 100, object "A" at x 0–50, y 0–50 → region (0, 0, .5, .5)."""
    from vqadiag.protocols.gqa.grounding import grounding_score, intersection_rate

    scene = {"width": 100, "height": 100,
             "objects": {"A": {"x": 0, "y": 0, "w": 50, "h": 50}}}  # fmt: skip
    step = {"operation": "select", "argument": "scene", "dependencies": []}
    question = {"annotations": {"question": {"0": "A"}, "fullAnswer": {}}, "semantic": [step]}
    # 2 × 2 map: cell (0, 0) = (0, 0, .5, .5) lies inside the region; the others outside
    grid = [[0.6, 0.1], [0.2, 0.1]]
    assert grounding_score(question, scene, grid, map_size=2) == pytest.approx(0.6)
    # named in the full answer too: the region counts twice (the official sum can pass 1);
    # the "scene" argument does not add the whole image ("scene" in a dict tests its keys)
    twice = {**question, "annotations": {"question": {"0": "A"}, "fullAnswer": {"2": "A"}}}
    assert grounding_score(twice, scene, grid, map_size=2) == pytest.approx(1.2)
    # 4 × 4 map with all weight on cell (1, 2) = (.25, .5, .5, .75): outside (y ≥ .5)
    grid4 = [[0.0] * 4 for _ in range(4)]
    grid4[1][1] = 1.0  # (.25, .25, .5, .5): inside
    assert grounding_score(question, scene, grid4, map_size=4) == pytest.approx(1.0)
    grid4[1][1], grid4[1][2] = 0.0, 1.0
    assert grounding_score(question, scene, grid4, map_size=4) == 0.0
    # object boxes: (0, 0, .25, .5) inside → .5; (.25, .25, .75, .75) a quarter inside → .125
    boxes = [[0, 0, 0.25, 0.5, 0.5], [0.25, 0.25, 0.75, 0.75, 0.5]]
    assert grounding_score(question, scene, boxes, object_boxes=True) == pytest.approx(0.625)
    assert intersection_rate((0.3, 0.3, 0.3, 0.6), (0, 0, 1, 1)) == 0.0  # a zero-area cell


def test_score_gqa_grounding_end_to_end(run_cli, gqa_files, write_json):
    q, p, _ = gqa_files
    questions = json.loads(Path(q).read_text())
    for qid in questions:
        questions[qid]["imageId"] = "img"
        questions[qid]["annotations"] = {"question": {"0": "A"}, "fullAnswer": {}}
    q = write_json("q_annotated.json", questions)
    scenes = write_json("scenes.json", {"img": {"width": 100, "height": 100, "objects": {
        "A": {"name": "sky", "x": 0, "y": 0, "w": 50, "h": 50}}}})  # fmt: skip
    # scored (balanced): 001 → 0.6, 002 → 0.2, 004 → 1.0: grounding = 100 · 1.8 / 3 = 60
    maps = write_json("att.json", [
        {"questionId": "001", "attention": [[0.6, 0.4], [0.0, 0.0]]},
        {"questionId": "002", "attention": [[0.2, 0.0], [0.8, 0.0]]},
        {"questionId": "004", "attention": [[1.0, 0.0], [0.0, 0.0]]},
    ])  # fmt: skip
    args = ("score", "gqa", "--questions", q, "--predictions", p, "--attentions", maps,
            "--map-size", "2")  # fmt: skip
    res = run_cli(*args, "--scene-graphs", scenes, "--json")
    assert res.exit_code == 0, res.stderr
    out = res.json()
    assert out["grounding"] == pytest.approx(60.0) and out["ci"]["grounding"]["n"] == 3
    assert out["grounding_missing"] == 0
    no_scenes = run_cli(*args)
    assert no_scenes.exit_code == 2 and "--scene-graphs" in no_scenes.stderr
    bad = write_json("att_bad.json", [{"questionId": "001", "attention": [[0.6, 0.4]]}])
    res = run_cli("score", "gqa", "--questions", q, "--predictions", p, "--attentions", bad,
                  "--map-size", "2", "--scene-graphs", scenes)  # fmt: skip
    assert res.exit_code == 2
    assert "att_bad.json: record '001': attention must be a 2 x 2 grid" in res.stderr
    partial = write_json("att_partial.json", [{"questionId": "001", "attention": [[1, 0], [0, 0]]}])
    res = run_cli("score", "gqa", "--questions", q, "--predictions", p, "--attentions", partial,
                  "--map-size", "2", "--scene-graphs", scenes)  # fmt: skip
    assert res.exit_code == 2 and "no attention map for this scored question" in res.stderr
    res = run_cli("score", "gqa", "--questions", q, "--predictions", p, "--attentions", partial,
                  "--map-size", "2", "--scene-graphs", scenes, "--allow-missing",
                  "--json")  # fmt: skip
    assert res.exit_code == 0 and res.json()["grounding"] == pytest.approx(100.0)
    assert res.json()["grounding_missing"] == 2
    # found in review: the grounding options without --attentions were accepted and did
    # nothing; a grid of side 0 reached the API
    for extra, flag in ((("--scene-graphs", scenes), "--scene-graphs"),
                        (("--object-attention",), "--object-attention"),
                        (("--map-size", "3"), "--map-size")):  # fmt: skip
        res = run_cli("score", "gqa", "--questions", q, "--predictions", p, *extra)
        assert res.exit_code == 2 and res.stderr.strip() == (
            f"error: {flag}: goes with --attentions (the grounding score)"
        )
    with pytest.raises(DataError, match="--map-size: must be a whole number of 1 or more"):
        vqadiag.score_gqa(q, p, attentions=maps, scene_graphs=scenes, map_size=0)


def test_score_ood_refuses_a_null_gold_answer_in_a_released_split(run_cli, write_json):
    """A released head question whose gold answer is null cannot be scored (no answer
    equals it, and None must never equal a missing prediction): it is refused naming
    the file and record, with or without ``--allow-missing``."""
    head = write_json("ood_x_head.json", {"h0": {"answer": None}, "h1": {"answer": "yes"}})
    tail = write_json("ood_x_tail.json", {"t0": {"answer": "no"}})
    p = write_json("p.json", [{"questionId": "h1", "prediction": "yes"},
                              {"questionId": "t0", "prediction": "no"}])  # fmt: skip
    result = run_cli("score", "ood", "--head", head, "--tail", tail, "--predictions", p,
                     "--allow-missing", "--json")  # fmt: skip
    assert result.exit_code == 2
    assert "ood_x_head.json: record 'h0': 'answer' is null" in result.stderr
