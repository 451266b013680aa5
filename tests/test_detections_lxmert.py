"""LXMERT's ``*_obj36.tsv`` detections, laid out as its extraction script writes them."""

from __future__ import annotations

import base64

import numpy as np
import pytest

from vqadiag.data.formats.detections import read_detections
from vqadiag.errors import DataError


def _line(image_id, boxes, features, height=480, width=640):
    boxes = np.asarray(boxes, np.float32)
    features = np.asarray(features, np.float32)
    n = len(boxes)
    cells = [image_id, str(height), str(width),
             base64.b64encode(np.arange(n, dtype=np.int64).tobytes()).decode(),
             base64.b64encode(np.ones(n, np.float32).tobytes()).decode(),
             base64.b64encode(np.zeros(n, np.int64).tobytes()).decode(),
             base64.b64encode(np.ones(n, np.float32).tobytes()).decode(),
             str(n), base64.b64encode(boxes.tobytes()).decode(),
             base64.b64encode(features.tobytes()).decode()]  # fmt: skip
    return "\t".join(cells) + "\n"


def test_lxmert_tsv_boxes_features_and_size(tmp_path):
    path = tmp_path / "val2014_obj36.tsv"
    a_boxes = [[0, 0, 10, 20], [5, 5, 50, 60]]
    b_boxes = [[1, 2, 3, 4]]
    path.write_text(_line("COCO_val2014_000000000042", a_boxes, np.eye(2, 3))
                    + _line("2354786", b_boxes, [[7, 8, 9]], height=300, width=500))  # fmt: skip
    with read_detections(path) as det:
        assert sorted(det) == ["2354786", "COCO_val2014_000000000042"]
        np.testing.assert_array_equal(det["COCO_val2014_000000000042"], a_boxes)
        np.testing.assert_array_equal(det["2354786"], b_boxes)
        assert det.features("2354786").tolist() == [[7, 8, 9]]
        assert det.image_size("2354786") == (500.0, 300.0)
        with pytest.raises(DataError, match="image is not in the detections"):
            det["nope"]


def test_lxmert_tsv_bad_files_name_file_and_line_or_image(tmp_path):
    short = tmp_path / "short_obj36.tsv"
    short.write_text("img\t1\t2\n")
    with pytest.raises(DataError) as err:
        read_detections(short)
    assert str(short) in str(err.value) and "line 1" in str(err.value)
    twice = tmp_path / "twice_obj36.tsv"
    twice.write_text(_line("a", [[0, 0, 1, 1]], [[1]]) * 2)
    with pytest.raises(DataError, match="image 'a': image twice"):
        read_detections(twice)
    bad = tmp_path / "bad_obj36.tsv"
    line = _line("a", [[0, 0, 1, 1]], [[1]]).split("\t")
    line[8] = "not base64!"
    bad.write_text("\t".join(line))
    with read_detections(bad) as det, pytest.raises(DataError, match="image 'a'.*'boxes'"):
        det["a"]
    inverted = tmp_path / "inverted_obj36.tsv"
    inverted.write_text(_line("a", [[5, 5, 1, 1]], [[1]]))
    with read_detections(inverted) as det, pytest.raises(DataError, match=str(inverted)):
        det["a"]
    empty = tmp_path / "empty_obj36.tsv"
    empty.write_text("")
    with pytest.raises(DataError, match="file is empty"):
        read_detections(empty)


@pytest.mark.parametrize(
    ("height", "width", "problem"),
    [
        ("480", "nan", "'img_w' must be a positive number of pixels, got nan"),
        ("480", "0", "'img_w' must be a positive number of pixels, got 0.0"),
        ("-3", "640", "'img_h' must be a positive number of pixels, got -3.0"),
        ("480", "inf", "'img_w' must be a positive number of pixels, got inf"),
        ("tall", "640", "'img_h' must be a number of pixels, got 'tall'"),
    ],
)
def test_lxmert_tsv_image_size_that_is_not_a_positive_number_is_refused(
    tmp_path, height, width, problem
):
    path = tmp_path / "val2014_obj36.tsv"
    path.write_text(_line("a", [[0, 0, 1, 1]], [[1]], height=height, width=width))
    with read_detections(path) as det, pytest.raises(DataError) as err:
        det["a"]
    message = str(err.value)
    assert str(path) in message and "image 'a'" in message and problem in message


def test_relevance_from_an_lxmert_tsv_equals_the_gqa_layout(run_cli, tmp_path):
    """The same boxes as LXMERT's TSV give the same R.json as the GQA features layout."""
    import json

    from vqadiag.synth import generate_world

    world = tmp_path / "world"
    generate_world(world, images=20, seed=5, render=False)
    gqa = world / "gqa"
    tsv = tmp_path / "val_obj36.tsv"
    with read_detections(gqa / "objects") as det, tsv.open("w") as fh:
        for image_id in det:
            boxes = det[image_id]
            boxes = boxes[np.any(boxes != 0, axis=1)]  # LXMERT has no padding rows
            width, height = det.image_size(image_id) or (640, 480)
            fh.write(_line(image_id, boxes, np.zeros((len(boxes), 2)), height, width))
    outs = {}
    for name, detections in (("gqa", gqa / "objects"), ("tsv", tsv)):
        out = tmp_path / f"R_{name}.json"
        res = run_cli("relevance", "--questions", gqa / "val_balanced_questions.json",
                      "--scenes", gqa / "val_sceneGraphs.json", "--detections", detections,
                      "--out", out, "--quiet", "--json")  # fmt: skip
        assert res.exit_code == 0, res.stderr
        outs[name] = json.loads(out.read_text())
    assert outs["tsv"] == outs["gqa"] and len(outs["gqa"]) > 10
