"""Probes: conditions, replacement policies, fingerprints, the SQLite store, the runner."""

from __future__ import annotations

import sqlite3
from typing import ClassVar

import numpy as np
import pytest

from vqadiag.diagnosis.diagnose import parse_suites
from vqadiag.errors import DataError
from vqadiag.models.base import Capabilities, ModelOutput, ObjectInput
from vqadiag.probes.conditions import (
    Condition,
    Probe,
    apply_replacement,
    donor_map,
    visible_mask,
)
from vqadiag.probes.fingerprints import data_fingerprint, object_digest
from vqadiag.probes.runner import ProbeContext
from vqadiag.probes.store import Answer, PredictionStore
from vqadiag.suites.state import hash_order, subsample


def _visual(b: int = 1, n: int = 4, d: int = 2) -> ObjectInput:
    feats = np.arange(b * n * d, dtype=np.float32).reshape(b, n, d) + 1.0
    boxes = np.tile(np.array([0, 0, 10, 10], np.float32), (b, n, 1))
    mask = np.ones((b, n), dtype=bool)
    mask[:, -1] = False  # last slot is padding
    return ObjectInput(feats, boxes, mask, np.full((b, 2), 100, np.float32))


# ----------------------------------------------------------------- conditions
def test_visible_mask_keep_remove_and_out_of_range():
    present = np.array([True, True, True, False])
    # keep {0, 2, 7}: 7 is past the input, slot 3 is padding → [T, F, T, F]
    keep = Probe("q", "?", "i", {}, keep=(0, 2, 7))
    assert visible_mask(keep, present).tolist() == [True, False, True, False]
    # remove {1}: everything present but 1 → [T, F, T, F]
    remove = Probe("q", "?", "i", {}, remove=(1,))
    assert visible_mask(remove, present).tolist() == [True, False, True, False]
    assert visible_mask(Probe("q", "?", "i", {}), present).tolist() == present.tolist()


def test_replacement_drop_masks_and_keeps_features():
    vis = _visual()
    keep = np.array([[True, False, True, False]])
    out = apply_replacement(vis, keep, "drop")
    assert out.mask.tolist() == [[True, False, True, False]]
    assert out.features[0, 1].tolist() == [3.0, 4.0]  # untouched, only masked


@pytest.mark.parametrize(("policy", "fill"), [("zeros", 0.0), ("minus-one", -1.0)])
def test_replacement_constant_keeps_objects_visible(policy, fill):
    vis = _visual()
    out = apply_replacement(vis, np.array([[True, False, True, True]]), policy)
    # object 1 removed → visible, features replaced; padding (slot 3) stays masked
    assert out.mask.tolist() == [[True, True, True, False]]
    assert out.features[0, 1].tolist() == [fill, fill]
    assert out.features[0, 0].tolist() == [1.0, 2.0]


def test_replacement_other_images_cycles_donor_objects():
    vis = _visual(n=5)
    vis.mask[0, -1] = True  # 5 real objects
    donor = np.array([[10.0, 10.0], [20.0, 20.0]], np.float32)
    # remove objects 0, 2, 4 → donor objects 0, 1, 0 (cycling) in that order
    keep = np.array([[False, True, False, True, False]])
    out = apply_replacement(vis, keep, "other-images", lambda row: donor)
    assert out.features[0, [0, 2, 4], 0].tolist() == [10.0, 20.0, 10.0]
    assert out.features[0, 1].tolist() == [3.0, 4.0]
    assert out.mask.all()


def test_unknown_replacement_is_an_error():
    with pytest.raises(ValueError, match="replacement"):
        apply_replacement(_visual(), np.ones((1, 4), bool), "noise")


def test_donor_map_next_image_cyclic():
    assert donor_map(["b", "a", "c", "a"]) == {"a": "b", "b": "c", "c": "a"}
    assert donor_map(["x"]) == {"x": "x"}


# ----------------------------------------------------------------- fingerprints
def test_data_fingerprint_ignores_gold_fields_only():
    record = {"question": "Is it red?", "imageId": "1", "semantic": [], "answer": "yes"}
    base = data_fingerprint(record, "Is it red?", "abc")
    assert data_fingerprint({**record, "answer": "no"}, "Is it red?", "abc") == base
    assert data_fingerprint({**record, "semantic": [1]}, "Is it red?", "abc") != base
    assert data_fingerprint(record, "Is it blue?", "abc") != base
    assert data_fingerprint(record, "Is it red?", "abd") != base


def test_object_digest_sees_every_value_and_shape():
    f = np.zeros((2, 3), np.float32)
    b = np.zeros((2, 4), np.float32)
    g = f.copy()
    g[1, 2] = 1e-6
    assert object_digest(f, b) != object_digest(g, b)
    assert object_digest(f, b) != object_digest(f.reshape(3, 2), b)
    assert object_digest(f, b) == object_digest(f.copy(), b.copy())


# ----------------------------------------------------------------- store
def test_store_round_trip_and_reopen(tmp_path):
    path = tmp_path / "store.sqlite"
    key = ("m", "d", "c", "q1")
    a = Answer("red", 0.75, "blue", 0.125, {"red": 0.75, "green": 0.1}, np.array([0.5, 0.25]))
    with PredictionStore(path) as store:
        assert store.get(key) is None
        store.put_many([(key, a)])
    with PredictionStore(path) as store:
        got = store.get(key)
        assert store.count() == 1 and store.count("other") == 0
    assert (got.answer, got.p_answer, got.ref, got.p_ref) == ("red", 0.75, "blue", 0.125)
    assert got.vector.tolist() == [0.5, 0.25]
    # prediction-file probs: top answers plus the reference answer's probability
    assert got.probs() == {"red": 0.75, "green": 0.1, "blue": 0.125}


def test_store_rejects_a_file_that_is_not_sqlite(tmp_path):
    path = tmp_path / "store.sqlite"
    path.write_text("not a database at all, just text " * 20)
    with pytest.raises(DataError, match="store.sqlite: not a vqadiag prediction store"):
        PredictionStore(path)


def test_store_rejects_another_schema(tmp_path):
    path = tmp_path / "store.sqlite"
    PredictionStore(path).close()
    db = sqlite3.connect(path)
    db.execute("UPDATE meta SET value='0' WHERE key='schema'")
    db.commit()
    db.close()
    with pytest.raises(DataError, match="store schema 0"):
        PredictionStore(path)


# ----------------------------------------------------------------- runner
class CountingModel:
    """Answers 'n<visible objects>' and records every batch it is asked."""

    name = "counting"
    capabilities: ClassVar[Capabilities] = Capabilities(visual="objects", attention=True)
    answer_vocab: ClassVar[list[str]] = [f"n{i}" for i in range(6)]

    def __init__(self) -> None:
        self.batches: list[list[str]] = []

    def predict(self, batch, visual):
        self.batches.append(list(batch.question_ids))
        counts = visual.mask.sum(axis=1)
        probs = np.zeros((len(batch), 6), np.float32)
        probs[np.arange(len(batch)), counts] = 1.0
        return ModelOutput([f"n{c}" for c in counts], probs, visual.mask.astype(np.float32))

    def fingerprint(self) -> str:
        return "counting-v1"


class FakeData:
    """Images '0'..'4' with image i holding i + 1 objects."""

    root = "fake"

    def image_objects(self, image_id):
        n = int(image_id) + 1
        return np.ones((n, 2), np.float32) * n, np.tile([0, 0, 5, 5], (n, 1)).astype(np.float32)

    def object_input(self, image_ids, max_objects=100):
        per = [self.image_objects(i) for i in image_ids]
        n = max(len(b) for _, b in per)
        feats = np.zeros((len(per), n, 2), np.float32)
        boxes = np.zeros((len(per), n, 4), np.float32)
        mask = np.zeros((len(per), n), bool)
        for r, (f, b) in enumerate(per):
            feats[r, : len(f)], boxes[r, : len(b)], mask[r, : len(b)] = f, b, True
        return ObjectInput(feats, boxes, mask, np.full((len(per), 2), 10, np.float32))


def _probes(keep: tuple[int, ...] | None = None) -> list[Probe]:
    return [
        Probe(f"q{i}", "how many?", str(i), {"question": "how many?"}, keep=keep) for i in range(5)
    ]


def test_runner_batches_caches_and_recomputes_only_changes(tmp_path):
    model = CountingModel()
    with PredictionStore(tmp_path / "s.sqlite") as store:
        ctx = ProbeContext(model, FakeData(), store, batch_size=2, workers=2)
        run = ctx.run(Condition("all", "plain"), _probes())
        # image i has i + 1 objects → answers n1..n5; batches of 2 in order
        assert [a.answer for a in run.answers] == ["n1", "n2", "n3", "n4", "n5"]
        assert model.batches == [["q0", "q1"], ["q2", "q3"], ["q4"]]
        assert (run.computed, run.cached) == (5, 0)
        # attention of image 2 over its own 3 objects (padding not stored)
        assert run.answers[2].vector.tolist() == [1.0, 1.0, 1.0]
        again = ctx.run(Condition("all", "plain"), _probes())
        assert (again.computed, again.cached) == (0, 5) and len(model.batches) == 3
        # keep only object 0: a new condition → computed; images with 1 object give n1;
        # image 0 has that one object only, so its probe is the plain input: reused
        kept = ctx.run(Condition("rel", "objects", {"replacement": "drop"}), _probes(keep=(0,)))
        assert [a.answer for a in kept.answers] == ["n1"] * 5
        assert (kept.computed, kept.reused) == (4, 1)
        # change one question's text: only that question is recomputed
        probes = _probes()
        probes[3] = Probe("q3", "how many now?", "3", {"question": "how many now?"})
        model.batches.clear()
        third = ctx.run(Condition("all", "plain"), probes)
        assert (third.computed, third.cached) == (1, 4) and model.batches == [["q3"]]


def test_runner_reference_probability(tmp_path):
    model = CountingModel()
    probes = [Probe("q", "?", "2", {}, remove=(0,), ref="n3")]
    with PredictionStore(tmp_path / "s.sqlite") as store:
        ctx = ProbeContext(model, FakeData(), store)
        run = ctx.run(Condition("loo", "objects", {"replacement": "drop"}), probes)
    # image 2 has 3 objects; one removed → answer n2 (p = 1), reference n3 gets p = 0
    a = run.answers[0]
    assert (a.answer, a.p_answer, a.ref, a.p_ref) == ("n2", 1.0, "n3", 0.0)


# ----------------------------------------------------------------- options
def test_parse_suites_and_subsample():
    assert parse_suites("all")[0] == "accuracy" and len(parse_suites("all")) == 8
    assert parse_suites("fpvg, accuracy") == ("accuracy", "fpvg")
    with pytest.raises(DataError, match="unknown suite"):
        parse_suites("accuracy,speed")
    for empty in ("", " , ", []):  # an empty list is not every suite
        with pytest.raises(
            DataError, match=r"^--suite: no suite named \(give all, or some of accuracy, "
        ):
            parse_suites(empty)
    ids = [f"q{i}" for i in range(50)]
    sub = subsample(ids, 10)
    assert len(sub) == 10 and sub == [q for q in ids if q in set(sub)]
    assert set(sub) == set(hash_order(ids)[:10])
    # adding ids never moves the ones already chosen ahead of each other
    assert [q for q in hash_order([*ids, "zz"]) if q != "zz"] == hash_order(ids)
