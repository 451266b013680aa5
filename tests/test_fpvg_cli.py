"""``vqadiag score fpvg`` end to end (hand-worked numbers) and its bad-input errors."""

from __future__ import annotations

import json

import pytest

GOLD = {
    "q1": "yes",
    "q2": "red",
    "q3": "2",
    "q4": "cat",
    "q5": "no",
    "q6": "x",
    "q7": "y",
    "q8": "z",
}
ALL = {
    "q1": "yes",
    "q2": "red",
    "q3": "3",
    "q4": "dog",
    "q5": "no",
    "q6": "x",
    "q7": "y",
    "q8": "z",
}
REL = {"q1": "yes", "q2": "blue", "q3": "3", "q4": "dog", "q5": "no"}
IRREL = {"q1": "no", "q2": "red", "q3": "4", "q4": "dog", "q5": "no"}
# Scored q1..q5 (see test_fpvg_metrics.py): FPVG_j = 1, 0, 1, 0, 0; correct = ✓ ✓ ✗ ✗ ✓


@pytest.fixture
def files(tmp_path, write_json):
    questions = {
        qid: {"imageId": "img", "question": "?", "answer": answer} for qid, answer in GOLD.items()
    }
    relevance = {qid: {"relevant": [0], "irrelevant": [1, 2]} for qid in REL}
    relevance["q6"] = {"relevant": [], "irrelevant": [0, 1]}  # no relevant boxes
    relevance["q7"] = {"relevant": [], "irrelevant": [], "excluded": "no_annotated_objects"}
    # q8 is not in R.json at all
    return {
        "q": write_json("q.json", questions),
        "r": write_json("R.json", relevance),
        "all": write_json("all.json", ALL),
        "rel": write_json("rel.json", REL),
        "irrel": write_json("irrel.json", IRREL),
    }


def _args(files, *extra):
    return (
        "score",
        "fpvg",
        "--questions",
        files["q"],
        "--relevance",
        files["r"],
        "--all",
        files["all"],
        "--rel",
        files["rel"],
        "--irrel",
        files["irrel"],
        "--n-bootstrap",
        "100",
        *extra,
    )


def test_score_fpvg_json(run_cli, files):
    result = run_cli(*_args(files, "--json"))
    assert result.exit_code == 0, result.stderr
    out = result.json()
    assert out["n"] == 5
    assert out["fpvg_plus"] == pytest.approx(40.0)
    assert out["fpvg_minus"] == pytest.approx(60.0)
    assert out["fpvg_plus_correct"] == pytest.approx(20.0)
    assert out["fpvg_plus_wrong"] == pytest.approx(20.0)
    assert out["fpvg_minus_correct"] == pytest.approx(40.0)
    assert out["fpvg_minus_wrong"] == pytest.approx(20.0)
    assert out["mod_fpvg_plus"] == pytest.approx(80.0)
    assert out["acc_all"] == pytest.approx(60.0)
    assert out["acc_rel"] == pytest.approx(40.0)
    assert out["acc_irrel"] == pytest.approx(40.0)
    assert out["excluded"] == {
        "no_annotated_objects": 1,
        "no_relevant_boxes": 1,
        "no_irrelevant_boxes": 0,
        "not_in_relevance": 1,
    }
    # c2i: FPVG+ {q1 ✓, q3 ✗} = 1; FPVG− {q2 ✓, q4 ✗, q5 ✓} = 2; mod− {q2 ✓} = ∞ → null
    assert out["c2i"]["all"]["fpvg_plus"] == 1.0
    assert out["c2i"]["all"]["fpvg_minus"] == 2.0
    assert out["c2i"]["all"]["mod_fpvg_minus"] is None
    assert out["c2i"]["drop_plus_to_minus"]["all"] == pytest.approx(-100.0)  # (1 − 2) / 1
    ci = out["ci"]
    for key in ("fpvg_plus", "fpvg_minus", "acc_all", "acc_rel", "acc_irrel", "mod_fpvg_plus"):
        assert set(ci[key]) == {"value", "ci_low", "ci_high", "n"}
        assert ci[key]["value"] == out[key] and ci[key]["n"] == 5
    assert ci["c2i"]["all"]["fpvg_plus"]["value"] == 1.0
    assert "suff_comp" not in out and "splits" not in out


def test_score_fpvg_splits(run_cli, files, write_json):
    id_file = write_json("id.json", ["q1", "q2", "q3"])
    ood_file = write_json("ood.json", {"q4": {}, "q5": {}})  # a GQA-format question dict
    result = run_cli(*_args(files, "--split-ids", id_file, ood_file, "--json"))
    assert result.exit_code == 0, result.stderr
    out = result.json()
    # ID: FPVG+ {q1 ✓, q3 ✗} → 1; FPVG− {q2 ✓} → ∞.  OOD: FPVG+ ∅ → NaN; FPVG− {q4 ✗, q5 ✓} → 1
    assert out["c2i"]["id"]["fpvg_plus"] == 1.0
    assert out["c2i"]["id"]["fpvg_minus"] is None
    assert out["c2i"]["ood"]["fpvg_plus"] is None
    assert out["c2i"]["ood"]["fpvg_minus"] == 1.0
    assert set(out["c2i"]["drop_id_to_ood"]) == {
        "fpvg_plus",
        "fpvg_minus",
        "mod_fpvg_plus",
        "mod_fpvg_minus",
    }
    # ID acc q1 ✓ q2 ✓ q3 ✗ = 66.7 %, FPVG+ q1, q3 = 66.7 %; OOD acc 50 %, FPVG+ 0 %
    assert out["splits"]["id"]["acc_all"] == pytest.approx(200 / 3)
    assert out["splits"]["id"]["fpvg_plus"] == pytest.approx(200 / 3)
    assert out["splits"]["ood"] == pytest.approx(
        {"acc_all": 50.0, "fpvg_plus": 0.0, "mod_fpvg_plus": 100.0, "n": 2}
    )
    assert out["ci"]["splits"]["ood"]["acc_all"]["n"] == 2


def test_score_fpvg_suff_comp(run_cli, files, write_json):
    def with_probs(answers, probs):
        return {q: {"answer": a, "probs": probs[q]} for q, a in answers.items()}

    files["all"] = write_json(
        "all_p.json",
        with_probs(
            {q: ALL[q] for q in REL},
            {
                "q1": {"yes": 0.9},
                "q2": {"red": 0.5},
                "q3": {"3": 0.6},
                "q4": {"dog": 0.8},
                "q5": {"no": 0.7},
            },
        ),
    )
    files["rel"] = write_json(
        "rel_p.json",
        with_probs(
            REL,
            {
                "q1": {"yes": 0.895},
                "q2": {"blue": 0.6, "red": 0.3},
                "q3": {"3": 0.6},
                "q4": {"dog": 0.1},
                "q5": {"no": 0.7},
            },
        ),
    )
    files["irrel"] = write_json(
        "irrel_p.json",
        with_probs(
            IRREL,
            {
                "q1": {"no": 0.8, "yes": 0.1},
                "q2": {"red": 0.5},
                "q3": {"4": 0.9},  # "3" not in the top-k → probability 0
                "q4": {"dog": 0.8},
                "q5": {"no": 0.7},
            },
        ),
    )
    out = run_cli(*_args(files, "--json")).json()
    sc = out["suff_comp"]
    # suff = [0.005, 0.2, 0, 0.7, 0] → 18.1 pp; comp = [0.8, 0, 0.6, 0, 0] → 28 pp
    assert sc["suff"] == pytest.approx(18.1) and sc["comp"] == pytest.approx(28.0)
    assert sc["n"] == 5
    # suff good (< 0.01): q1, q3, q5 → 60 %; rel flips among them: none (yes, 3, no kept)
    assert sc["categories"]["suff_good"] == pytest.approx({"share": 60.0, "flip": 0.0, "n": 3})
    # comp best (≥ 0.4): q1, q3 → 40 %; both flipped their irrel answer
    assert sc["categories"]["comp_best"] == pytest.approx({"share": 40.0, "flip": 100.0, "n": 2})
    assert out["ci"]["suff_comp"]["suff"]["value"] == pytest.approx(18.1)
    assert "suff_comp_left_out" not in out
    # one answer without its probabilities: suff_comp is left out, and said why
    irrel = json.loads(files["irrel"].read_text())
    irrel["q2"] = "red"
    files["irrel"] = write_json("irrel_p2.json", irrel)
    result = run_cli(*_args(files, "--json"))
    assert result.exit_code == 0, result.stderr
    assert "suff_comp" not in result.json()
    why = f"{files['irrel']}: record 'q2' carries no probs"
    assert result.json()["suff_comp_left_out"] == why
    assert f"note: suff_comp left out: {why}" in result.stderr


def test_score_fpvg_human(run_cli, files):
    result = run_cli(*_args(files))
    assert result.exit_code == 0
    assert "FPVG (5 questions)" in result.stdout
    assert "40.00" in result.stdout
    assert "not_in_relevance 1" in result.stdout


def test_missing_predictions(run_cli, files, write_json):
    files["rel"] = write_json("rel2.json", {q: a for q, a in REL.items() if q != "q3"})
    result = run_cli(*_args(files))
    assert result.exit_code == 2
    assert "rel2.json: 1 of 5 questions have no prediction, first 'q3'" in result.stderr
    result = run_cli(*_args(files, "--allow-missing", "--json"))
    out = result.json()
    # q3 loses its relevant-run answer → FPVG_3 = 0: only q1 remains FPVG+ → 20 %
    assert out["fpvg_plus"] == pytest.approx(20.0)
    assert out["acc_rel"] == pytest.approx(40.0)
    assert out["missing_predictions"] == {"all": 0, "relevant": 1, "irrelevant": 0}
    assert "note: 1 scored questions had no prediction in the relevant predictions" in (
        result.stderr
    )


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("r", "", "R.json: file is empty"),
        ("r", '{"q1": {"relevant": [0]', "R.json: malformed JSON at line 1"),
        ("r", '{"q1": {"relevant": [0]}}', "R.json: record 'q1': missing field 'irrelevant'"),
        ("r", '{"q1": {"relevant": [0], "irrelevant": [-1]}}', "R.json: record 'q1': 'irrelevant'"),
        ("r", '{"q1": {"relevant": [0], "irrelevant": [0]}}', "both relevant and irrelevant"),
        ("r", '{"qx": {"relevant": [0], "irrelevant": [1]}}', "R.json: record 'qx': question id"),
        ("all", '{"q1": "yes", "zz": "no"}', "all.json: record 'zz': question id is not among"),
        ("irrel", '{"q1": {"answer": "a", "probs": {"a": NaN}}}', "irrel.json: malformed JSON"),
        ("q", '{"q1": {"imageId": "img"}}', "q.json: record 'q1': missing field 'answer'"),
    ],
)
def test_bad_input(run_cli, files, name, content, message):
    files[name].write_text(content)
    result = run_cli(*_args(files))
    assert result.exit_code == 2
    assert message in result.stderr


def test_bad_split_files(run_cli, files, write_json):
    ood = write_json("ood.json", ["q4"])
    unknown = write_json("id.json", ["q1", "nope"])
    result = run_cli(*_args(files, "--split-ids", unknown, ood))
    assert result.exit_code == 2
    assert "id.json: record 'nope': question id is not among the questions" in result.stderr
    both = write_json("id2.json", ["q1", "q4"])
    result = run_cli(*_args(files, "--split-ids", both, ood))
    assert "ood.json: record 'q4': question id is in both the ID and the OOD split" in result.stderr


def test_nothing_to_score(run_cli, files, write_json):
    files["r"] = write_json("R0.json", {"q1": {"relevant": [], "irrelevant": [1]}})
    result = run_cli(*_args(files))
    assert result.exit_code == 2
    assert "R0.json: no question has both relevant and irrelevant boxes" in result.stderr


def test_relevance_then_score_round_trip(run_cli, tmp_path, write_json):
    """R.json written by `vqadiag relevance` feeds `vqadiag score fpvg` directly."""
    questions = {
        "a": {
            "imageId": "i",
            "question": "?",
            "answer": "yes",
            "annotations": {"question": {"0": "o"}, "answer": {}, "fullAnswer": {}},
        },
        "b": {"imageId": "i", "question": "?", "answer": "no", "annotations": {}},
    }
    scenes = {"i": {"objects": {"o": {"name": "n", "x": 0, "y": 0, "w": 10, "h": 10}}}}
    q = write_json("q.json", questions)
    write_json("sg.json", scenes)
    write_json("boxes.json", {"i": [[0, 0, 10, 10], [50, 50, 60, 60]]})
    r = tmp_path / "R.json"
    made = run_cli(
        "relevance", "--questions", q, "--scenes", tmp_path / "sg.json",
        "--detections", tmp_path / "boxes.json", "--out", r,
    )  # fmt: skip
    assert made.exit_code == 0, made.stderr
    preds = {k: write_json(f"{k}.json", {"a": v, "b": "no"}) for k, v in
             {"all": "yes", "rel": "yes", "irrel": "no"}.items()}  # fmt: skip
    out = run_cli(
        "score", "fpvg", "--questions", q, "--relevance", r, "--all", preds["all"],
        "--rel", preds["rel"], "--irrel", preds["irrel"], "--json",
    ).json()  # fmt: skip
    assert out["n"] == 1 and out["fpvg_plus"] == 100.0
    assert out["excluded"]["no_annotated_objects"] == 1


# -- FPVG's own files: object pickles and pickled predictions -----------------------------


def _official_pickles(tmp_path, files):
    """The FPVG repository's relevant / irrelevant object pickles for the same R.json:
    ``{imageId: {qid: [box indices]}}`` (q6 has no relevant boxes; q7, q8 are absent)."""
    import json
    import pickle

    relevance = json.loads(files["r"].read_text())
    rel = {"img": {q: r["relevant"] for q, r in relevance.items() if q != "q7"}}
    irrel = {"img": {q: r["irrelevant"] for q, r in relevance.items() if q != "q7"}}
    paths = []
    for name, obj in (("relevant_objects.pkl", rel), ("irrelevant_objects.pkl", irrel)):
        path = tmp_path / name
        path.write_bytes(pickle.dumps(obj, protocol=4))
        paths.append(path)
    return paths


def test_fpvg_object_pickles_and_pickled_predictions(run_cli, files, tmp_path):
    import pickle

    rel_pkl, irrel_pkl = _official_pickles(tmp_path, files)
    for key in ("all", "rel", "irrel"):  # FPVG's prediction files are pickled dicts too
        path = tmp_path / f"{key}_predictions.pkl"
        path.write_bytes(pickle.dumps(__import__("json").loads(files[key].read_text())))
        files[f"{key}_pkl"] = path
    args = ["score", "fpvg", "--questions", files["q"], "--relevant-objects", rel_pkl,
            "--irrelevant-objects", irrel_pkl, "--all", files["all_pkl"], "--rel",
            files["rel_pkl"], "--irrel", files["irrel_pkl"], "--n-bootstrap", "100",
            "--json"]  # fmt: skip
    result = run_cli(*args)
    assert result.exit_code == 0, result.stderr
    reference = run_cli(*_args(files, "--json")).json()
    out = result.json()
    for key in ("n", "fpvg_plus", "fpvg_minus", "acc_all", "acc_rel", "acc_irrel", "c2i"):
        assert out[key] == reference[key], key
    # q7 is absent from the pickles (R.json excluded it): not in relevance
    assert out["excluded"]["no_relevant_boxes"] == 1 and out["excluded"]["not_in_relevance"] == 2
    runs = ("--all", files["all"], "--rel", files["rel"], "--irrel", files["irrel"])
    pickles = ("--relevant-objects", rel_pkl, "--irrelevant-objects", irrel_pkl)
    both = run_cli("score", "fpvg", "--questions", files["q"], "--relevance", files["r"],
                   *pickles, *runs)  # fmt: skip
    assert both.exit_code == 2 and "--relevance" in both.stderr
    one = run_cli("score", "fpvg", "--questions", files["q"], "--relevant-objects", rel_pkl,
                  *runs)  # fmt: skip
    assert one.exit_code == 2 and "--irrelevant-objects" in one.stderr


class _Payload:
    """A pickle that would create a file when loaded by pickle.load."""

    def __init__(self, target):
        self.target = str(target)

    def __reduce__(self):
        return (open, (self.target, "w"))


def test_pickles_never_run_code(tmp_path):
    import pickle

    import numpy as np

    from vqadiag.data.io.safe_pickle import load_plain_pickle
    from vqadiag.errors import DataError

    plain = tmp_path / "plain.pkl"
    value = {"img": {"q1": [0, 2], "q2": []}, "t": (1, 2.5, None, True), "s": {1, 2}}
    plain.write_bytes(pickle.dumps(value, protocol=2))
    assert load_plain_pickle(plain) == value
    evil = tmp_path / "evil.pkl"
    created = tmp_path / "created-by-the-pickle"
    evil.write_bytes(pickle.dumps({"q1": _Payload(created)}))
    with pytest.raises(DataError) as err:
        load_plain_pickle(evil)
    assert not created.exists()
    assert str(evil) in str(err.value) and "asks for io.open" in str(err.value)
    arrays = tmp_path / "arrays.pkl"
    arrays.write_bytes(pickle.dumps({"q1": np.array([0, 1])}))
    with pytest.raises(DataError, match="numpy.*convert the file to JSON"):
        load_plain_pickle(arrays)
    torn = tmp_path / "torn.pkl"
    torn.write_bytes(pickle.dumps(value)[:-5])
    with pytest.raises(DataError, match="malformed pickle"):
        load_plain_pickle(torn)
