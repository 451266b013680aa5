"""`vqadiag explain train | eval | show` end to end on a small synthetic world."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from vqadiag.cli.main import app
from vqadiag.synth import generate_world

pytest.importorskip("torch")

SMALL = [
    "-o",
    "hidden_dim=64",
    "-o",
    "embedding_dim=32",
    "-o",
    "attention_dim=32",
    "-o",
    "explain_dim=32",
]


def _cli(*args: Any) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("explain") / "world"
    generate_world(out, images=200, seed=1)
    return out


@pytest.fixture(scope="module")
def trained(world: Path) -> tuple[Path, dict[str, Any]]:
    run = world.parent / "explainer"
    code, out, err = _cli(
        "explain", "train", "--data", world, "--out", run, "--epochs", "3", *SMALL,
        "--n-bootstrap", "100", "--quiet", "--json",
    )  # fmt: skip
    assert code == 0, err
    return run, json.loads(out)


@pytest.fixture(scope="module")
def evaluated(world: Path, trained: tuple[Path, dict[str, Any]]) -> dict[str, Any]:
    code, out, err = _cli(
        "explain", "eval", "--model", trained[0], "--data", world, "--n-bootstrap", "200",
        "--quiet", "--json",
    )  # fmt: skip
    assert code == 0, err
    return json.loads(out)


def _val_candidates(world: Path) -> dict[str, Any]:
    return json.loads((world / "vqa2" / "synth_val2014_pair_candidates.json").read_text())


def test_train_writes_a_run_and_reports_validation(trained: tuple[Path, dict[str, Any]]) -> None:
    run, result = trained
    assert {"config.json", "weights.safetensors", "answers.json"} <= {p.name for p in run.iterdir()}
    assert json.loads((run / "config.json").read_text())["model"] == "counterexample"
    assert result["epochs"] == 3 and len(result["history"]) == 3
    assert result["options"]["k_candidates"] == 24
    assert result["options"]["lambda"] == 1.0 and result["options"]["margin"] == 1.0
    assert result["explained_questions"] < result["train_questions"]
    val = result["val"]["recall@5"]
    assert set(val) == {"value", "ci_low", "ci_high", "n"}
    assert val["value"] == pytest.approx(result["history"][-1]["val_recall_at_5"])


def test_eval_beats_random_and_reports_every_baseline(
    world: Path, evaluated: dict[str, Any]
) -> None:
    cands = _val_candidates(world)
    n = len(cands)
    assert evaluated["questions"] == n and evaluated["k_candidates"] == 24
    assert evaluated["random_expected"]["recall@5"] == pytest.approx(100 * 5 / 24)
    methods = evaluated["methods"]
    assert set(methods) == {"model", "random", "distance", "distance_features", "vqa_model"}
    # Distance (candidates' order): I' is a hit iff it is among the first 5 candidates,
    # counted here straight from the file
    hits = sum(r["candidates"].index(r["complement_image_id"]) < 5 for r in cands.values())
    assert methods["distance"]["recall@5"]["value"] == pytest.approx(100 * hits / n)
    model = methods["model"]["recall@5"]
    assert model["n"] == n
    # the trained explainer beats the Random baseline's 5/24 clearly
    assert model["value"] > 100 * 5 / 24 + 8
    assert model["ci_low"] > 100 * 5 / 24
    for block in methods.values():
        assert block["recall@1"]["value"] <= block["recall@5"]["value"]
        assert block["recall@5"]["value"] <= block["recall@10"]["value"]
    cmp = evaluated["comparison"]
    assert cmp["baseline"] in {"random", "distance", "distance_features", "vqa_model"}
    best = max(methods[b]["recall@5"]["value"] for b in methods if b != "model")
    assert cmp["difference"]["value"] == pytest.approx(model["value"] - best)
    assert 0.0 <= cmp["p_value"] <= 1.0 and 0.0 <= cmp["mcnemar_p_value"] <= 1.0
    assert evaluated["vqa_model"]["source"].startswith("answering head of")


def test_eval_human_output(world: Path, trained: tuple[Path, dict[str, Any]]) -> None:
    code, out, _ = _cli(
        "explain", "eval", "--model", trained[0], "--data", world, "--n-bootstrap", "50",
        "--quiet",
    )  # fmt: skip
    assert code == 0
    assert "Recall@k" in out and "explainer − " in out
    assert "distance" in out and "expected" in out and "paper" in out


def test_eval_with_an_external_vqa_model(world: Path, trained: tuple[Path, dict[str, Any]]) -> None:
    updn = world.parent / "updn"
    code, _, err = _cli(
        "train", "--data", world, "--model", "updn", "--out", updn, "--epochs", "1",
        "-o", "hidden_dim=32", "-o", "embedding_dim=16", "--quiet", "--json",
        "--n-bootstrap", "10",
    )  # fmt: skip
    assert code == 0, err
    code, out, err = _cli(
        "explain", "eval", "--model", trained[0], "--data", world, "--vqa-model", updn,
        "--n-bootstrap", "50", "--quiet", "--json",
    )  # fmt: skip
    assert code == 0, err
    result = json.loads(out)
    # UpDn learnt GQA answers: the VQA answers it never saw count as P = 0
    gqa_answers = set(json.loads((updn / "answers.json").read_text()))
    vqa = {
        a["question_id"]: a["multiple_choice_answer"]
        for a in json.loads((world / "vqa2" / "v2_mscoco_val2014_annotations.json").read_text())[
            "annotations"
        ]
    }
    missing = sum(vqa[int(q)] not in gqa_answers for q in _val_candidates(world))
    assert result["vqa_model"] == {
        "source": str(updn),
        "model": "updn",
        "answers_not_in_vocabulary": missing,
    }
    assert result["methods"]["vqa_model"]["recall@5"]["n"] == result["questions"]


def test_show_lists_counter_examples(world: Path, trained: tuple[Path, dict[str, Any]]) -> None:
    cands = _val_candidates(world)
    qid = next(iter(cands))
    code, out, err = _cli(
        "explain", "show", "--model", trained[0], "--data", world, "--question", qid,
        "--top", "3", "--json",
    )  # fmt: skip
    assert code == 0, err
    result = json.loads(out)
    assert result["question_id"] == qid and result["explained"] == "predicted"
    assert result["explained_answer"] == result["predicted_answer"]
    assert 0.0 < result["probability"] <= 1.0
    top = result["counter_examples"]
    assert [r["rank"] for r in top] == [1, 2, 3]
    assert [r["score"] for r in top] == sorted((r["score"] for r in top), reverse=True)
    expected = [str(c) for c in cands[qid]["candidates"]]
    assert all(r["image_id"] == expected[r["distance_rank"] - 1] for r in top)
    assert result["complement_image_id"] == str(cands[qid]["complement_image_id"])
    assert 1 <= result["complement_rank"] <= 24
    assert any(r["is_complement"] for r in top) == (result["complement_rank"] <= 3)
    code, out, _ = _cli(
        "explain", "show", "--model", trained[0], "--data", world, "--question", qid, "--gold"
    )  # fmt: skip
    assert code == 0 and "complementary image" in out


def test_same_seed_same_weights(world: Path, tmp_path: Path) -> None:
    from vqadiag.workflows.explain import train

    tiny = {"hidden_dim": 16, "embedding_dim": 8, "attention_dim": 8, "explain_dim": 8}
    kw = {"epochs": 1, "seed": 5, "options": tiny, "progress": False, "val_split": None}
    a = train(world, tmp_path / "a", **kw)
    b = train(world, tmp_path / "b", **kw)
    assert a["val"] is None
    assert a["fingerprint"] == b["fingerprint"]
    assert a["history"][0]["loss"] == b["history"][0]["loss"]


# ------------------------------------------------------------------ bad input
def _bad_eval(world: Path, run: Path, candidates: Path) -> tuple[int, str]:
    code, _, err = _cli(
        "explain", "eval", "--model", run, "--data", world, "--candidates", candidates, "--quiet"
    )  # fmt: skip
    return code, err


def test_malformed_candidates_file(
    world: Path, trained: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    bad = tmp_path / "cands.json"
    bad.write_text('{"1000": {"image_id": 1, "candidates": [NaN]')
    code, err = _bad_eval(world, trained[0], bad)
    assert code == 2 and "cands.json" in err and "malformed JSON" in err


def test_unknown_question_in_candidates(
    world: Path, trained: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    cands = _val_candidates(world)
    cands["999999999"] = next(iter(cands.values()))
    bad = tmp_path / "cands.json"
    bad.write_text(json.dumps(cands))
    code, err = _bad_eval(world, trained[0], bad)
    assert code == 2
    assert err.startswith(f"error: {bad}: record '999999999': question id is not in")


def test_complement_not_among_candidates(
    world: Path, trained: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    cands = _val_candidates(world)
    qid = list(cands)[3]
    cands[qid]["complement_image_id"] = 987654
    bad = tmp_path / "cands.json"
    bad.write_text(json.dumps(cands))
    code, err = _bad_eval(world, trained[0], bad)
    assert code == 2
    assert f"{bad}: record '{qid}': complementary image 987654 is not among" in err


def test_wrong_k_for_the_model(
    world: Path, trained: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    cands = _val_candidates(world)
    for record in cands.values():
        record["candidates"] = record["candidates"][:23]
        if record["complement_image_id"] not in record["candidates"]:
            record["candidates"][-1] = record["complement_image_id"]
    bad = tmp_path / "cands.json"
    bad.write_text(json.dumps(cands))
    code, err = _bad_eval(world, trained[0], bad)
    assert code == 2
    assert f"{bad}: record '{next(iter(cands))}'" in err and "K = 24" in err


def test_train_with_a_bad_candidates_file(world: Path, tmp_path: Path) -> None:
    bad = tmp_path / "cands.json"
    bad.write_text(json.dumps({"1000": {"image_id": 1, "complement_image_id": 2}}))
    code, _, err = _cli(
        "explain", "train", "--data", world, "--out", tmp_path / "run", "--candidates", bad,
        "--quiet",
    )  # fmt: skip
    assert code == 2 and f"{bad}: record '1000': missing field 'candidates'" in err
    assert not (tmp_path / "run").exists()


def test_not_an_explainer_run_and_unknown_question(
    world: Path, trained: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    fake = tmp_path / "fake"
    fake.mkdir()
    (fake / "config.json").write_text(json.dumps({"model": "updn"}))
    code, _, err = _cli("explain", "eval", "--model", fake, "--data", world, "--quiet")
    assert code == 2 and "config.json" in err and "not a counter-example run" in err
    code, _, err = _cli(
        "explain", "show", "--model", trained[0], "--data", world, "--question", "123"
    )  # fmt: skip
    assert code == 2 and "record '123': unknown question id" in err


def test_a_setting_given_by_its_flag_and_by_option_is_refused(world: Path, tmp_path: Path) -> None:
    """Found in review: ``--lambda 2 -o lambda=0.5`` trained with the flag's value and
    recorded nothing of the other; it is one line, before any work."""
    code, _, err = _cli(
        "explain", "train", "--data", world, "--out", tmp_path / "run", "--epochs", "1",
        "--lambda", "2", "-o", "lambda=0.5", "--quiet",
    )  # fmt: skip
    assert (
        code == 2
        and err.strip() == "error: --option: lambda is also given by --lambda: give it once"
    )
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("option", "rule"),
    [
        ("explain_dim=0", "explain_dim must be a whole number of 1 or more, not 0"),
        ("attention_dim=-4", "attention_dim must be a whole number of 1 or more, not -4"),
        ("lambda=-1", "lambda must be a number of 0 or more, not -1"),
        ("margin=nan", "margin must be a number of 0 or more, not 'nan'"),
        ("count_feature=no", "count_feature must be true or false, not 'no'"),
        ("all_questions=2", "all_questions must be true or false, not 2"),
        (
            "k_candidates=5",
            "k_candidates is the number of candidates per question in the "
            "candidates file, not an option",
        ),
    ],
)
def test_an_explainer_width_or_weight_out_of_range_is_refused(
    world: Path, tmp_path: Path, option: str, rule: str
) -> None:
    """The explaining head's widths and the hinge's λ and M through ``-o``: one line that
    names the option, no run folder (a width of 0 used to fail inside PyTorch, a negative
    λ to train against the ranking)."""
    key = option.split("=")[0]
    small = [x for pair in zip(SMALL[::2], SMALL[1::2], strict=True) for x in pair
             if not pair[1].startswith(f"{key}=")]  # fmt: skip
    code, _, err = _cli(
        "explain", "train", "--data", world, "--out", tmp_path / "run", "--epochs", "1",
        *small, "-o", option, "--quiet",
    )  # fmt: skip
    assert code == 2 and err.strip().splitlines() == [f"error: --option: {rule}"], err
    assert not (tmp_path / "run").exists()


def test_features_of_another_width_name_the_detections_file(
    trained: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    """The explainer scores candidates' objects through its own path, not the answering
    model's: asked on features of another width it names the detections file too."""
    narrow = tmp_path / "narrow"
    generate_world(narrow, images=200, seed=1, feature_dim=32, progress=False)
    code, _, err = _cli("explain", "eval", "--model", trained[0], "--data", narrow, "--quiet")
    info = narrow / "gqa" / "objects" / "gqa_objects_info.json"
    assert code == 2
    assert f"{info}: object features have 32 dimensions; model 'counterexample' was trained" in (
        " ".join(err.split())
    )
