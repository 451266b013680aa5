"""End-to-end: `vqadiag score vqa`, `score pairs`, `stats balance` on the shipped example.

examples/vqa2_tiny, worked by hand (c = annotators equal to the prediction after
normalization; normalization only when the 10 answers disagree):

  qid     type                answer type  prediction        answers (normalized)          acc
  101000  what color is the   other        white             white 8, silver 2   c=8       1.0
  101001  how many            number       3                 2 7 (two→2), 3 3    c=3       0.9
  101002  is the              yes/no       Yes               yes 10 (unanimous!) c=0       0.0
  102000  what color is the   other        red               red 6, dark red 2, maroon 2   1.0
  102001  is there a          yes/no       no                no 9, yes 1         c=9       1.0
  102002  what is the man     other        umbrellas         umbrella 8, phone 2 c=0       0.0
  103000  is there a          yes/no       yes               yes 10              c=10      1.0
  103001  how many            number       3                 4 5, 5 3, 3 2       c=2       0.6
  103002  what sport is       other        ultimate frisbee  frisbee 7, ult. 2, catch 1    0.6
  104000  what color is the   other        red               blue 7, light/navy blue 3     0.0
  104001  how many            number       one → 1           1 8, 2 2            c=8       1.0
  104002  what sport is       other        surfing           surfing 8, surf 2   c=8       1.0

overall = 100 × 8.1 / 12 = 67.5; yes/no (0 + 1 + 1)/3 = 66.67; number (0.9 + 0.6 + 1)/3 =
83.33; other (1 + 1 + 0 + 0.6 + 0 + 1)/6 = 60.0. With --lenient, "Yes" matches: 9.1/12 = 75.83.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "vqa2_tiny"
Q = EXAMPLE / "questions.json"
A = EXAMPLE / "annotations.json"
P = EXAMPLE / "predictions.json"
PAIRS = EXAMPLE / "pairs.json"

PER_QUESTION = {
    "101000": 1.0,
    "101001": 0.9,
    "101002": 0.0,
    "102000": 1.0,
    "102001": 1.0,
    "102002": 0.0,
    "103000": 1.0,
    "103001": 0.6,
    "103002": 0.6,
    "104000": 0.0,
    "104001": 1.0,
    "104002": 1.0,
}


def _vqa(run_cli: Callable[..., Any], *extra: Any) -> Any:
    return run_cli("score", "vqa", "--questions", Q, "--annotations", A, *extra)


def test_score_vqa_example_worked_by_hand(run_cli: Callable[..., Any], tmp_path: Path) -> None:
    out = tmp_path / "per_q.jsonl"
    res = _vqa(run_cli, "--predictions", P, "--json", "--per-question", out)
    assert res.exit_code == 0, res.stderr
    data = res.json()
    assert data["overall"] == pytest.approx(67.5)
    assert data["n"] == 12
    assert data["n_missing"] == 0
    assert data["lenient"] is False
    assert data["perAnswerType"] == pytest.approx(
        {"yes/no": 200 / 3, "number": 250 / 3, "other": 60.0}
    )
    assert data["perQuestionType"] == pytest.approx(
        {
            "what color is the": 200 / 3,
            "how many": 250 / 3,
            "is the": 0.0,
            "is there a": 100.0,
            "what is the man": 0.0,
            "what sport is": 80.0,
        }
    )
    ci = data["ci"]
    assert set(ci) == {"overall", "perAnswerType", "perQuestionType"}
    assert ci["overall"]["value"] == data["overall"]
    assert ci["overall"]["n"] == 12
    assert ci["overall"]["ci_low"] <= data["overall"] <= ci["overall"]["ci_high"]
    assert ci["perAnswerType"]["number"]["n"] == 3
    assert set(ci["perQuestionType"]) == set(data["perQuestionType"])
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert {r["question_id"]: r["accuracy"] for r in rows} == pytest.approx(PER_QUESTION)


def test_score_vqa_lenient(run_cli: Callable[..., Any]) -> None:
    data = _vqa(run_cli, "--predictions", P, "--json", "--lenient").json()
    assert data["overall"] == pytest.approx(100 * 9.1 / 12)
    assert data["perQuestionType"]["is the"] == 100.0
    assert data["lenient"] is True


def test_score_vqa_seed_is_deterministic(run_cli: Callable[..., Any]) -> None:
    one = _vqa(run_cli, "--predictions", P, "--json", "--seed", "3", "--n-bootstrap", "200")
    two = _vqa(run_cli, "--predictions", P, "--json", "--seed", "3", "--n-bootstrap", "200")
    assert one.stdout == two.stdout


def test_score_vqa_human_table(run_cli: Callable[..., Any]) -> None:
    res = _vqa(run_cli, "--predictions", P)
    assert res.exit_code == 0
    assert "67.50" in res.stdout
    assert "what sport is" in res.stdout


def test_other_prediction_shapes(run_cli: Callable[..., Any], write_json: Any) -> None:
    preds = {r["question_id"]: r["answer"] for r in json.loads(P.read_text())}
    path = write_json("preds_dict.json", {str(k): v for k, v in preds.items()})
    data = _vqa(run_cli, "--predictions", path, "--json").json()
    assert data["overall"] == pytest.approx(67.5)


def test_missing_predictions(run_cli: Callable[..., Any], write_json: Any) -> None:
    records = json.loads(P.read_text())
    # drop 101000 (acc 1.0) → without it the example sums to 7.1
    path = write_json("preds.json", [r for r in records if r["question_id"] != 101000])
    res = _vqa(run_cli, "--predictions", path, "--json")
    assert res.exit_code == 2
    assert str(path) in res.stderr and "1 of 12 questions have no prediction" in res.stderr
    assert "'101000'" in res.stderr
    data = _vqa(run_cli, "--predictions", path, "--json", "--allow-missing").json()
    assert data["n_missing"] == 1
    assert data["n"] == 12
    assert data["overall"] == pytest.approx(100 * 7.1 / 12)


def test_extra_prediction_id(run_cli: Callable[..., Any], write_json: Any) -> None:
    records = [*json.loads(P.read_text()), {"question_id": 999, "answer": "yes"}]
    path = write_json("preds.json", records)
    res = _vqa(run_cli, "--predictions", path)
    assert res.exit_code == 2
    assert res.stderr.strip() == (
        f"error: {path}: record '999': question id is not among the questions"
    )


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ("", "file is empty"),
        ('[{"question_id": 1, ', "malformed JSON at line 1"),
        ('[{"question_id": 101000, "answer": NaN}]', "NaN"),
        ('[{"question_id": 101000}]', "record '101000': missing answer field"),
        ('[{"question_id": 101000, "answer": "a"}, {"question_id": 101000, "answer": "b"}]',
         "record '101000': duplicate question id"),
    ],
)  # fmt: skip
def test_bad_prediction_files(
    run_cli: Callable[..., Any], tmp_path: Path, content: str, fragment: str
) -> None:
    path = tmp_path / "preds.json"
    path.write_text(content)
    res = _vqa(run_cli, "--predictions", path)
    assert res.exit_code == 2
    assert res.stderr.startswith(f"error: {path}")
    assert fragment in res.stderr
    assert "Traceback" not in res.stderr


def _example_annotations() -> dict[str, Any]:
    return json.loads(A.read_text())


def test_bad_annotation_files(run_cli: Callable[..., Any], write_json: Any) -> None:
    data = _example_annotations()
    data["annotations"][3]["answers"] = []
    path = write_json("ann.json", data)
    res = run_cli("score", "vqa", "--questions", Q, "--annotations", path, "--predictions", P)
    assert res.exit_code == 2
    assert res.stderr.strip() == f"error: {path}: record '102000': empty answer list"

    data = _example_annotations()
    del data["annotations"][0]["question_type"]
    path = write_json("ann.json", data)
    res = run_cli("score", "vqa", "--questions", Q, "--annotations", path, "--predictions", P)
    assert res.exit_code == 2
    assert "record '101000': missing field 'question_type'" in res.stderr


def test_annotation_not_in_questions(run_cli: Callable[..., Any], write_json: Any) -> None:
    questions = json.loads(Q.read_text())
    questions["questions"] = questions["questions"][1:]
    path = write_json("q.json", questions)
    res = run_cli("score", "vqa", "--questions", path, "--annotations", A, "--predictions", P)
    assert res.exit_code == 2
    assert res.stderr.strip() == (
        f"error: {A}: record '101000': question id is not in the questions file"
    )
    questions = json.loads(Q.read_text())
    questions["questions"][0]["image_id"] = 555
    path = write_json("q.json", questions)
    res = run_cli("score", "vqa", "--questions", path, "--annotations", A, "--predictions", P)
    assert res.exit_code == 2
    assert "record '101000': image_id 101 differs from the questions file (555)" in res.stderr


def test_missing_file(run_cli: Callable[..., Any], tmp_path: Path) -> None:
    res = _vqa(run_cli, "--predictions", tmp_path / "nope.json")
    assert res.exit_code == 2
    assert "nope.json: file not found" in res.stderr


# ---------------------------------------------------------------- pairs

# pairs.json: (102001 no ✓, 103000 yes ✓) both correct, different;
# (102000 red ✓, 104000 red ✗) identical; (103002 0.6, 104002 1.0) different.
# both correct 1/3, identical 1/3, different 2/3.


def test_score_pairs_example(run_cli: Callable[..., Any]) -> None:
    res = run_cli(
        "score", "pairs", "--annotations", A, "--pairs", PAIRS, "--predictions", P, "--json"
    )
    assert res.exit_code == 0, res.stderr
    data = res.json()
    assert data["n_pairs"] == 3
    assert data["both_correct"] == pytest.approx(100 / 3)
    assert data["identical"] == pytest.approx(100 / 3)
    assert data["different"] == pytest.approx(200 / 3)
    assert set(data["ci"]) == {"both_correct", "identical", "different"}
    assert data["ci"]["different"]["n"] == 3


def test_score_pairs_threshold(run_cli: Callable[..., Any]) -> None:
    # τ = 0.6: the sport pair (0.6, 1.0) is both correct too → 2/3
    data = run_cli(
        "score", "pairs", "--annotations", A, "--pairs", PAIRS, "--predictions", P,
        "--pair-threshold", "0.6", "--json",
    ).json()  # fmt: skip
    assert data["both_correct"] == pytest.approx(200 / 3)


def test_identical_uses_normalized_answers(run_cli: Callable[..., Any], write_json: Any) -> None:
    records = json.loads(P.read_text())
    for r in records:
        if r["question_id"] == 104000:
            r["answer"] = "Red."  # same as "red" on 102000 after normalization
    path = write_json("preds.json", records)
    data = run_cli(
        "score", "pairs", "--annotations", A, "--pairs", PAIRS, "--predictions", path, "--json"
    ).json()
    assert data["identical"] == pytest.approx(100 / 3)


def test_pairs_only_need_paired_predictions(run_cli: Callable[..., Any], write_json: Any) -> None:
    paired = {102001, 103000, 102000, 104000, 103002, 104002}
    records = [r for r in json.loads(P.read_text()) if r["question_id"] in paired]
    path = write_json("preds.json", records)
    args = ("score", "pairs", "--annotations", A, "--pairs", PAIRS, "--json")
    data = run_cli(*args, "--predictions", path).json()
    assert data["both_correct"] == pytest.approx(100 / 3)
    missing = write_json("preds2.json", [r for r in records if r["question_id"] != 103000])
    res = run_cli(*args, "--predictions", missing)
    assert res.exit_code == 2 and "'103000'" in res.stderr
    data = run_cli(*args, "--predictions", missing, "--allow-missing").json()
    assert data["n_missing"] == 1
    assert data["both_correct"] == 0.0


def test_pairs_unknown_id(run_cli: Callable[..., Any], write_json: Any) -> None:
    path = write_json("pairs.json", [[101000, 42]])
    res = run_cli("score", "pairs", "--annotations", A, "--pairs", path, "--predictions", P)
    assert res.exit_code == 2
    assert (
        res.stderr.strip() == f"error: {path}: record '42': question id is not in the annotations"
    )


# ---------------------------------------------------------------- balance

# multiple_choice_answer per type: what color is the {white, red, blue}: log2 3;
# how many {2, 4, 1}: log2 3; is the {yes}: 0; is there a {no, yes}: 1;
# what is the man {umbrella}: 0; what sport is {frisbee, surfing}: 1.
# weighted mean = (3 log2 3 + 3 log2 3 + 0 + 2 + 0 + 2) / 12 = log2(3)/2 + 1/3 = 1.125815
# prior "yes" (2 of 12): 101002 1.0, 102001 (1 of 10 yes) 0.3, 103000 1.0 → 2.3/12 = 19.17%
# per-type prior: white ✓ 101000, 2 ✓ 101001, yes ✓ 101002, no ✓ 102001, umbrella ✓ 102002,
# frisbee ✓ 103002, "2" on 104001 (2 of 10) 0.6, the rest 0 → 6.6/12 = 55%


def test_stats_balance_example(run_cli: Callable[..., Any]) -> None:
    res = run_cli("stats", "balance", "--annotations", A, "--questions", Q, "--top", "2", "--json")
    assert res.exit_code == 0, res.stderr
    data = res.json()
    assert data["n"] == 12
    assert data["n_images"] == 4
    assert data["n_question_types"] == 6
    assert data["mean_entropy"] == pytest.approx(0.5 * 1.584962500721156 + 1 / 3)
    per_type = data["perQuestionType"]
    assert per_type["is there a"]["entropy"] == pytest.approx(1.0)
    assert per_type["is the"]["entropy"] == 0.0
    assert per_type["what sport is"]["top"] == [
        {"answer": "frisbee", "count": 1, "percent": 50.0},
        {"answer": "surfing", "count": 1, "percent": 50.0},
    ]
    assert len(per_type["how many"]["top"]) == 2
    assert per_type["how many"]["n_answers"] == 3
    assert data["prior"]["answer"] == "yes"
    assert data["prior"]["accuracy"] == pytest.approx(100 * 2.3 / 12)
    assert data["per_type_prior"]["accuracy"] == pytest.approx(55.0)
    assert data["prior_source"] == "self"
    assert data["ci"]["prior"]["accuracy"]["n"] == 12


def test_stats_balance_prior_from_train(run_cli: Callable[..., Any], write_json: Any) -> None:
    train = _example_annotations()
    for record in train["annotations"]:
        record["multiple_choice_answer"] = "no"
    path = write_json("train.json", train)
    data = run_cli("stats", "balance", "--annotations", A, "--prior-from", path, "--json").json()
    # prior "no" everywhere: 102001 has 9 × no → 1.0, nothing else says no → 1/12
    assert data["prior"]["answer"] == "no"
    assert data["prior"]["accuracy"] == pytest.approx(100 / 12)
    assert data["per_type_prior"]["accuracy"] == pytest.approx(100 / 12)
    assert data["prior_source"] == "train"


def test_stats_balance_human(run_cli: Callable[..., Any]) -> None:
    res = run_cli("stats", "balance", "--annotations", A)
    assert res.exit_code == 0
    assert "1.1258" in res.stdout
    assert "per-question-type prior" in res.stdout
