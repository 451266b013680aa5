"""``vqadiag relevance`` end to end, on a GQA h5 layout, and its bad-input errors."""

from __future__ import annotations

import json

import h5py
import numpy as np
import pytest

# The hand-worked image of test_relevance_geometry.py (see the comments there).
IMG1_BOXES = [
    (10.9, 10.9, 30.9, 30.9),
    (0, 0, 0, 0),
    (20, 10, 40, 30),
    (25, 10, 45, 30),
    (100, 100, 150, 150),
    (0, 10, 13.99, 30),
    (200, 200, 300, 300),
    (10.5, 10, 30, 49.5),
    (0, 0, 100, 100),
]


def _ann(question=None, answer=None, full=None):
    return {"question": question or {}, "answer": answer or {}, "fullAnswer": full or {}}


@pytest.fixture
def world(tmp_path):
    """Questions, scene graphs and GQA-layout detections of three images."""
    questions = {
        "q1": {
            "imageId": "img1",
            "question": "?",
            "answer": "yes",
            "annotations": _ann({"0": "o1"}),
        },
        "q2": {
            "imageId": "img1",
            "question": "?",
            "answer": "red",
            "annotations": _ann(answer={"2": "o2"}, full={"1:3": "o2"}),
        },
        "q3": {
            "imageId": "img1",
            "question": "?",
            "answer": "2",
            "annotations": _ann({"0": "o1"}, {"0": "o2"}),
        },
        "q4": {"imageId": "img1", "question": "?", "answer": "cat", "annotations": _ann()},
        "q5": {
            "imageId": "img2",
            "question": "?",
            "answer": "no",
            "annotations": _ann({"0": "o3"}),
        },
        "q6": {
            "imageId": "img3",
            "question": "?",
            "answer": "no",
            "annotations": _ann({"0": "o4"}),
        },
    }

    def obj(x, y, w, h):
        return {"name": "thing", "x": x, "y": y, "w": w, "h": h, "attributes": [], "relations": []}

    scenes = {
        "img1": {
            "width": 640,
            "height": 480,
            "objects": {"o1": obj(10, 10, 20, 20), "o2": obj(100, 100, 50, 50)},
        },
        "img2": {"width": 640, "height": 480, "objects": {"o3": obj(0, 0, 10, 10)}},
        "img3": {"width": 640, "height": 480, "objects": {"o4": obj(0, 0, 100, 100)}},
    }
    feats = tmp_path / "features"
    feats.mkdir()
    bb = np.zeros((2, 10, 4), np.float32)
    bb[1, :9] = IMG1_BOXES
    bb[0, :2] = [(0, 0, 100, 100), (10, 10, 20, 20)]
    with h5py.File(feats / "gqa_objects_0.h5", "w") as f:
        f["bboxes"] = bb
        f["features"] = np.zeros((2, 10, 4), np.float32)
    bb2 = np.zeros((1, 10, 4), np.float32)
    bb2[0, 0] = (50, 50, 60, 60)
    with h5py.File(feats / "gqa_objects_1.h5", "w") as f:
        f["bboxes"] = bb2
        f["features"] = np.zeros((1, 10, 4), np.float32)
    info = {
        "img1": {"width": 640, "height": 480, "objectsNum": 9, "file": 0, "idx": 1},
        "img3": {"width": 640, "height": 480, "objectsNum": 2, "file": 0, "idx": 0},
        "img2": {"width": 640, "height": 480, "objectsNum": 1, "file": 1, "idx": 0},
    }
    (feats / "gqa_objects_info.json").write_text(json.dumps(info))
    (tmp_path / "q.json").write_text(json.dumps(questions))
    (tmp_path / "sg.json").write_text(json.dumps(scenes))
    return tmp_path


def _args(world, *extra):
    return (
        "relevance",
        "--questions",
        world / "q.json",
        "--scenes",
        world / "sg.json",
        "--detections",
        world / "features" / "gqa_objects_info.json",
        "--out",
        world / "R.json",
        *extra,
    )


def test_relevance_official(run_cli, world):
    result = run_cli(*_args(world, "--json"))
    assert result.exit_code == 0, result.stderr
    summary = result.json()
    assert summary["n_questions"] == 6 and summary["n_kept"] == 3
    assert summary["excluded"] == {
        "no_annotated_objects": 1,  # q4
        "no_relevant_boxes": 1,  # q5: the only box (50..60) misses o3 (0..10)
        "no_irrelevant_boxes": 1,  # q6: o4 covers both boxes of img3
    }
    # kept q1, q2, q3: 9 boxes each; relevant 2, 1, 3; irrelevant 6, 8, 5
    assert summary["detector"] == {
        "questions": 3,
        "max_boxes": {"all": 9, "rel": 3, "irrel": 8},
        "avg_boxes": {"all": 9.0, "rel": 2.0, "irrel": pytest.approx(19 / 3)},
    }
    records = json.loads((world / "R.json").read_text())
    assert records["q1"] == {"relevant": [0, 7], "irrelevant": [1, 3, 4, 5, 6, 8]}
    assert records["q2"] == {"relevant": [4], "irrelevant": [0, 1, 2, 3, 5, 6, 7, 8]}
    assert records["q3"] == {"relevant": [0, 4, 7], "irrelevant": [1, 3, 5, 6, 8]}
    assert records["q4"]["excluded"] == "no_annotated_objects"
    assert records["q5"] == {"relevant": [], "irrelevant": [0], "excluded": "no_relevant_boxes"}


def test_relevance_reads_the_single_h5_detectron_layout(run_cli, world):
    """The same boxes as FPVG's Detectron / VinVL extraction writes them (one h5, an info
    JSON with ``index``) give the same relevance file."""
    import h5py

    reference = run_cli(*_args(world))
    assert reference.exit_code == 0, reference.stderr
    expected = (world / "R.json").read_bytes()
    feats = world / "features"
    info = json.loads((feats / "gqa_objects_info.json").read_text())
    single = world / "detectron"
    single.mkdir()
    rows, new_info = [], {}
    for row, (image, record) in enumerate(sorted(info.items())):
        with h5py.File(feats / f"gqa_objects_{record['file']}.h5", "r") as f:
            rows.append(f["bboxes"][record["idx"]])
        new_info[image] = {"objectsNum": record["objectsNum"], "index": row}
    with h5py.File(single / "output_gqa_detectron_objects.h5", "w") as f:
        f["bboxes"] = np.stack(rows)
    info_path = single / "output_gqa_detectron_objects_info.json"
    info_path.write_text(json.dumps(new_info))
    args = list(_args(world))
    args[args.index("--detections") + 1] = info_path
    got = run_cli(*args)
    assert got.exit_code == 0, got.stderr
    assert (world / "R.json").read_bytes() == expected


def test_relevance_annotated_denominator_and_exact(run_cli, world):
    assert run_cli(*_args(world, "--overlap-denominator", "annotated")).exit_code == 0
    records = json.loads((world / "R.json").read_text())
    # box 8 holds all of o1 → excluded for q1; img3 box 1 covers 100/10000 of o4 → irrelevant
    assert records["q1"]["irrelevant"] == [1, 3, 4, 5, 6]
    assert records["q6"] == {"relevant": [0], "irrelevant": [1]}
    assert run_cli(*_args(world, "--exact-geometry")).exit_code == 0
    records = json.loads((world / "R.json").read_text())
    assert records["q1"] == {"relevant": [0], "irrelevant": [1, 3, 4, 6, 8]}


def test_relevance_human_output(run_cli, world):
    result = run_cli(*_args(world))
    assert result.exit_code == 0
    assert "3 of 6 questions" in result.stdout
    assert "no_irrelevant_boxes" in result.stdout


def test_relevance_progress_on_stderr_unless_quiet(run_cli, world):
    result = run_cli(*_args(world, "--json"))
    assert "match boxes" in result.stderr and "6/6" in result.stderr  # every question counted
    json.loads(result.stdout)  # stdout stays one JSON object
    quiet = run_cli(*_args(world, "--json", "--quiet"))
    assert quiet.exit_code == 0 and "match boxes" not in quiet.stderr


def test_unknown_image_in_detections(run_cli, world):
    info = json.loads((world / "features" / "gqa_objects_info.json").read_text())
    del info["img2"]
    (world / "features" / "gqa_objects_info.json").write_text(json.dumps(info))
    result = run_cli(*_args(world))
    assert result.exit_code == 2
    assert "gqa_objects_info.json: image 'img2': image is not in the detections" in result.stderr


def test_missing_h5_file(run_cli, world):
    (world / "features" / "gqa_objects_1.h5").unlink()
    result = run_cli(*_args(world))
    assert result.exit_code == 2
    assert "gqa_objects_1.h5: file not found (named by image 'img2'" in result.stderr


def test_nan_box(run_cli, world):
    with h5py.File(world / "features" / "gqa_objects_1.h5", "r+") as f:
        f["bboxes"][0, 0, 2] = np.nan
    result = run_cli(*_args(world))
    assert result.exit_code == 2
    assert "gqa_objects_1.h5: image 'img2': box 0 has a NaN" in result.stderr


def test_negative_size_box(run_cli, world):
    with h5py.File(world / "features" / "gqa_objects_0.h5", "r+") as f:
        f["bboxes"][1, 2] = (40, 10, 20, 30)
    result = run_cli(*_args(world))
    assert result.exit_code == 2
    assert "gqa_objects_0.h5: image 'img1': box 2 has non-positive size" in result.stderr


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", "q.json: file is empty"),
        ('{"q1": {"imageId": "img1",', "q.json: malformed JSON at line 1"),
        ('{"q1": {"question": "?"}}', "q.json: record 'q1': missing field 'imageId'"),
        ('{"q1": {"imageId": "img1", "annotations": {"question": {"0": 1.5}}}}', "record 'q1'"),
    ],
)
def test_bad_questions(run_cli, world, content, message):
    (world / "q.json").write_text(content)
    result = run_cli(*_args(world))
    assert result.exit_code == 2
    assert message in result.stderr


def test_object_missing_from_scene_graph(run_cli, world):
    scenes = json.loads((world / "sg.json").read_text())
    del scenes["img1"]["objects"]["o2"]
    (world / "sg.json").write_text(json.dumps(scenes))
    result = run_cli(*_args(world))
    assert result.exit_code == 2
    assert "sg.json: image 'img1': annotated object 'o2' is not in the scene graph" in result.stderr


def test_scene_graph_box_nan(run_cli, world):
    (world / "sg.json").write_text(
        '{"img1": {"objects": {"o1": {"name": "a", "x": NaN, "y": 0, "w": 1, "h": 1}}}}'
    )
    result = run_cli(*_args(world))
    assert result.exit_code == 2
    assert "sg.json: malformed JSON" in result.stderr and "NaN" in result.stderr
