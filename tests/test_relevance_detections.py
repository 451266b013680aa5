"""Reading detected boxes: GQA info JSON + h5 layout, box-list JSON and npz."""

from __future__ import annotations

import json

import h5py
import numpy as np
import pytest

from vqadiag.data.formats.detections import read_detections
from vqadiag.errors import DataError


def _write_gqa(folder, prefix="gqa_objects", with_features=True, boxes=None):
    """Two images in file 0 (rows 0, 1) and one in file 1; 5 slots per image."""
    bb = np.zeros((2, 5, 4), np.float32)
    bb[0, :2] = boxes if boxes is not None else [(1, 2, 3, 4), (0, 0, 0, 0)]
    bb[1, :3] = [(0, 0, 10, 10), (5, 5, 6, 7), (1.5, 1.5, 2.5, 9)]
    with h5py.File(folder / f"{prefix}_0.h5", "w") as f:
        f["bboxes"] = bb
        if with_features:
            feats = np.arange(2 * 5 * 3, dtype=np.float32).reshape(2, 5, 3)
            f["features"] = feats
    with h5py.File(folder / f"{prefix}_1.h5", "w") as f:
        f["bboxes"] = np.array([[(7, 7, 8, 8)] + [(0, 0, 0, 0)] * 4], np.float32)
    info = {
        "img0": {"width": 50, "height": 40, "objectsNum": 2, "file": 0, "idx": 0},
        "img1": {"width": 50, "height": 40, "objectsNum": 3, "file": 0, "idx": 1},
        "img2": {"width": 20, "height": 20, "objectsNum": 1, "file": 1, "idx": 0},
    }
    path = folder / f"{prefix}_info.json"
    path.write_text(json.dumps(info))
    return path


def test_gqa_layout_slices_rows_up_to_objects_num(tmp_path):
    info = _write_gqa(tmp_path)
    with read_detections(info) as dets:
        assert sorted(dets) == ["img0", "img1", "img2"] and len(dets) == 3
        assert dets["img1"].tolist() == [[0, 0, 10, 10], [5, 5, 6, 7], [1.5, 1.5, 2.5, 9]]
        assert dets["img0"].shape == (2, 4)  # a zero box inside objectsNum is kept
        assert dets["img2"].tolist() == [[7, 7, 8, 8]]
        assert dets.image_size("img2") == (20.0, 20.0)
        # features rows 0..objectsNum-1 of row idx: image 1 of file 0 starts at 5·3 = 15
        assert dets.features("img1").tolist() == [[15, 16, 17], [18, 19, 20], [21, 22, 23]]
        assert "nope" not in dets and dets.get("nope") is None


def test_detectron_vinvl_single_h5_layout(tmp_path):
    """FPVG's Detectron / VinVL features: ``<prefix>_info.json`` with ``index`` rows of one
    ``<prefix>.h5``; the same boxes as the GQA layout gives."""
    (tmp_path / "gqa").mkdir()
    gqa = _write_gqa(tmp_path / "gqa")
    prefix = "output_gqa_detectron_objects"
    single = tmp_path / "single"
    single.mkdir()
    with read_detections(gqa) as ref:
        boxes = np.zeros((3, 5, 4), np.float32)
        feats = np.zeros((3, 5, 3), np.float32)
        info = {}
        for row, image in enumerate(("img2", "img0", "img1")):  # another row order
            n = len(ref[image])
            boxes[row, :n] = ref[image]
            info[image] = {"width": 50, "height": 40, "objectsNum": n, "index": row}
            if image != "img2":
                feats[row, :n] = ref.features(image)
        with h5py.File(single / f"{prefix}.h5", "w") as f:
            f["bboxes"], f["features"] = boxes, feats
        (single / f"{prefix}_info.json").write_text(json.dumps(info))
        with read_detections(single) as dets:
            assert sorted(dets) == sorted(ref)
            for image in ref:
                assert dets[image].tolist() == ref[image].tolist()
            assert dets.features("img1").tolist() == ref.features("img1").tolist()
    (single / f"{prefix}.h5").unlink()
    with (
        read_detections(single) as dets,
        pytest.raises(DataError, match=rf"{prefix}.h5: file not found \(named by image 'img0'"),
    ):
        dets["img0"]


def test_folder_and_other_prefix(tmp_path):
    _write_gqa(tmp_path, prefix="objects")
    dets = read_detections(tmp_path)
    assert dets["img2"].tolist() == [[7, 7, 8, 8]]
    dets.close()


def test_boxes_do_not_need_features(tmp_path):
    # Relevance never touches 'features': a file without it still gives boxes.
    info = _write_gqa(tmp_path, with_features=False)
    with read_detections(info) as dets:
        assert dets["img0"].shape == (2, 4)
        with pytest.raises(DataError, match="gqa_objects_0.h5: missing dataset 'features'"):
            dets.features("img0")


def test_box_list_json_and_npz(tmp_path, write_json):
    path = write_json("boxes.json", {"a": [[0, 0, 2, 2]], "b": []})
    dets = read_detections(path)
    assert dets["a"].tolist() == [[0, 0, 2, 2]] and dets["b"].shape == (0, 4)
    with pytest.raises(DataError, match="holds boxes only"):
        dets.features("a")
    npz = tmp_path / "boxes.npz"
    np.savez(npz, **{"2354786": np.array([[1.0, 1.0, 3.0, 4.0]])})
    with read_detections(npz) as d:
        assert d["2354786"].tolist() == [[1, 1, 3, 4]]


def test_unknown_image(tmp_path):
    info = _write_gqa(tmp_path)
    with (
        read_detections(info) as dets,
        pytest.raises(DataError, match="gqa_objects_info.json: image 'x9': image is not in"),
    ):
        dets["x9"]


def test_missing_h5_file(tmp_path):
    info = _write_gqa(tmp_path)
    (tmp_path / "gqa_objects_1.h5").unlink()
    with (
        read_detections(info) as dets,
        pytest.raises(DataError, match=r"gqa_objects_1.h5: file not found \(named by image 'img2'"),
    ):
        dets["img2"]


def test_nan_coordinate_names_file_and_image(tmp_path):
    info = _write_gqa(tmp_path, boxes=[(1, 2, 3, 4), (1, np.nan, 3, 4)])
    with (
        read_detections(info) as dets,
        pytest.raises(DataError, match="gqa_objects_0.h5: image 'img0': box 1 has a NaN"),
    ):
        dets["img0"]


@pytest.mark.parametrize("box", [[5, 0, 4, 1], [0, 3, 1, 3]])
def test_non_positive_size(write_json, box):
    dets = read_detections(write_json("b.json", {"im": [[0, 0, 1, 1], box]}))
    with pytest.raises(DataError, match="b.json: image 'im': box 1 has non-positive size"):
        dets["im"]


def test_bad_files(tmp_path, write_json):
    with pytest.raises(DataError, match="file is empty"):
        (tmp_path / "e.json").write_text("")
        read_detections(tmp_path / "e.json")
    with pytest.raises(DataError, match="no '<prefix>_info.json' file"):
        read_detections(tmp_path)
    with pytest.raises(DataError, match="looks like a GQA info file"):
        read_detections(write_json("info.json", {"a": {"objectsNum": 1, "file": 0, "idx": 0}}))
    with pytest.raises(DataError, match=r"boxes must have shape \(n, 4\)"):
        read_detections(write_json("c.json", {"a": [[1, 2, 3]]}))["a"]
    info = write_json("x_info.json", {"a": {"objectsNum": -1, "file": 0, "idx": 0}})
    with pytest.raises(DataError, match="x_info.json: image 'a': 'objectsNum' must be a non-neg"):
        read_detections(info)["a"]


def test_bad_sizes_shared_rows_and_bad_npz_are_one_line(tmp_path):
    """Found in review: a non-numeric ``width`` and a bad npz were tracebacks, and two
    images naming one h5 row were read as one image's objects for both, without a word."""
    info_path = _write_gqa(tmp_path)
    info = json.loads(info_path.read_text())
    info["img1"]["width"] = "wide"
    info_path.write_text(json.dumps(info))
    with (
        read_detections(info_path) as dets,
        pytest.raises(DataError, match="_info.json: image 'img1': 'width' must be a number of"),
    ):
        dets.image_size("img1")
    info["img1"]["width"] = 50
    info["img2"].update(file=0, idx=1)  # img1's row
    info_path.write_text(json.dumps(info))
    with pytest.raises(DataError, match=r"images 'img1' and 'img2' name the same h5 row \(file 0,"):
        read_detections(info_path)
    ragged = tmp_path / "ragged.npz"
    np.savez(ragged, a=np.array([[1, 2, 3, 4], [5, 6, 7, 8, 9]], dtype=object))
    with pytest.raises(DataError, match="ragged.npz: image 'a': cannot read the boxes"):
        read_detections(ragged)["a"]
    broken = tmp_path / "broken.npz"
    broken.write_bytes(b"PK\x03\x04garbage")
    with pytest.raises(DataError, match="broken.npz: cannot read as npz"):
        read_detections(broken)


def test_a_box_wholly_outside_its_image_is_refused(tmp_path):
    """Found in review: boxes shifted by +5000 px were read, and the diagnosis moved
    (accuracy 28.33 → 33.33, FPVG skipped for another reason) without a word. A box
    partly outside is a detector's, and stays."""
    _write_gqa(tmp_path, boxes=[(1, 2, 3, 4), (45, 35, 60, 50)])  # img0 is 50 x 40
    with read_detections(tmp_path) as dets:
        assert dets["img0"].tolist()[1] == [45, 35, 60, 50]
    for shifted in ((50, 2, 60, 4), (1, -9, 3, -1), (-30, -20, -1, 4)):
        _write_gqa(tmp_path, boxes=[(1, 2, 3, 4), shifted])
        with (
            read_detections(tmp_path) as dets,
            pytest.raises(DataError, match=r"image 'img0': box 1 \[.*\] lies outside the 50 x 40"),
        ):
            dets["img0"]
