"""Images in the data path: finding and decoding files, pixel conditions, fingerprints.

Hand-worked: a 6 × 4 image whose left half is red and right half blue; a box
(x1, y1, x2, y2) = (1, 1, 3, 3) covers the pixels whose centres lie inside it,
columns 1–2 and rows 1–2.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from vqadiag.data.model_inputs.images import ImageFiles, decode
from vqadiag.data.model_inputs.inputs import PixelInput
from vqadiag.errors import DataError
from vqadiag.probes.conditions import Probe, apply_pixel_condition, region_mask

RED, BLUE = (255, 0, 0), (0, 0, 255)


def _image() -> np.ndarray:
    img = np.zeros((4, 6, 3), np.uint8)
    img[:, :3] = RED
    img[:, 3:] = BLUE
    return img


def _save(path: Path, array: np.ndarray, fmt: str = "PNG", **kw) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(array).save(path, fmt, **kw)
    return path


def _probe(**kw) -> Probe:
    return Probe("q1", "what?", "img", {}, **kw)


def test_region_mask_takes_the_pixels_whose_centre_is_in_a_box():
    mask = region_mask(4, 6, np.array([[1.0, 1.0, 3.0, 3.0]]))
    assert mask.sum() == 4 and mask[1:3, 1:3].all()
    # pixel centres decide: x1 = 0.6 leaves column 0 out (centre 0.5), x2 = 2.6 takes
    # column 2 (centre 2.5), x2 = 2.4 does not
    assert region_mask(1, 4, np.array([[0.6, 0, 2.6, 1]]))[0].tolist() == [0, 1, 1, 0]
    assert region_mask(1, 4, np.array([[0.6, 0, 2.4, 1]]))[0].tolist() == [0, 1, 0, 0]
    # boxes past the border are clipped; an empty box covers nothing
    assert region_mask(4, 6, np.array([[-5, -5, 100, 100]])).all()
    assert not region_mask(4, 6, np.array([[2, 2, 2, 3]])).any()


def test_keep_replaces_outside_and_remove_replaces_inside_with_the_mean():
    image = _image()
    boxes = np.array([[[1.0, 1.0, 3.0, 3.0]]], np.float32)
    visual = PixelInput([image], boxes, np.ones((1, 1), bool), np.array([[6, 4]], np.float32))
    mean = np.round(image.reshape(-1, 3).mean(0)).astype(np.uint8)  # (128, 0, 128)
    assert mean.tolist() == [128, 0, 128]
    kept = apply_pixel_condition(visual, [_probe(keep=(0,))]).images[0]
    assert (kept[1:3, 1:3] == image[1:3, 1:3]).all()
    outside = ~region_mask(4, 6, boxes[0])
    assert (kept[outside] == mean).all()
    removed = apply_pixel_condition(visual, [_probe(remove=(0,))]).images[0]
    assert (removed[1:3, 1:3] == mean).all() and (removed[outside] == image[outside]).all()
    # the cached original is never changed, and a plain probe gets it back unchanged
    assert (image == _image()).all()
    assert apply_pixel_condition(visual, [_probe()]).images[0] is image
    # keeping nothing (an empty relevant set) replaces every pixel
    assert (apply_pixel_condition(visual, [_probe(keep=())]).images[0] == mean).all()


def test_noise_is_reproducible_and_blur_smooths():
    rng = np.random.default_rng(0)
    image = rng.integers(0, 256, (16, 16, 3), dtype=np.uint8)
    boxes = np.array([[[0.0, 0.0, 8.0, 16.0]]], np.float32)
    visual = PixelInput([image], boxes, np.ones((1, 1), bool))
    a = apply_pixel_condition(visual, [_probe(remove=(0,))], fill="noise").images[0]
    b = apply_pixel_condition(visual, [_probe(remove=(0,))], fill="noise").images[0]
    assert (a == b).all() and not (a[:, :8] == image[:, :8]).all()
    assert (a[:, 8:] == image[:, 8:]).all()
    blurred = apply_pixel_condition(visual, [_probe(remove=(0,))], fill="blur").images[0]
    assert blurred[:, :8].astype(float).std() < image[:, :8].astype(float).std() / 2
    with pytest.raises(ValueError, match="fill must be one of"):
        apply_pixel_condition(visual, [_probe(remove=(0,))], fill="paint")


def test_images_are_found_in_gqa_coco_and_given_folders(tmp_path):
    root = tmp_path / "data"
    _save(root / "gqa" / "images" / "n1.png", _image())
    _save(root / "vqa2" / "val2014" / "COCO_val2014_000000000042.jpg", _image(), "JPEG")
    files = ImageFiles([root / "vqa2", root / "gqa", root])
    assert files.find("n1") == root / "gqa" / "images" / "n1.png"
    assert files.find("42") == root / "vqa2" / "val2014" / "COCO_val2014_000000000042.jpg"
    assert files.pixels("n1").shape == (4, 6, 3)
    other = _save(tmp_path / "mine" / "n1.jpg", np.zeros((2, 2, 3), np.uint8), "JPEG")
    given = ImageFiles([root / "gqa"], images_dir=tmp_path / "mine")
    assert given.find("n1") == other and given.pixels("n1").shape == (2, 2, 3)
    # found in review: an image the given folder lacks came from the data folder, mixing
    # two sets of images without a word; it is missing
    _save(root / "gqa" / "images" / "n2.png", _image())
    assert ImageFiles([root / "gqa"]).find("n2") is not None and given.find("n2") is None
    small, original = files.resized("n1", (3, 2))
    assert small.shape == (2, 3, 3) and original == (6, 4)


def test_missing_and_broken_images_are_one_line_naming_file_and_question(tmp_path):
    files = ImageFiles([tmp_path])
    with pytest.raises(DataError) as err:
        files.pixels("nope", question="q7")
    assert "nope" in str(err.value) and "q7" in str(err.value)
    assert "\n" not in str(err.value)
    broken = tmp_path / "images" / "bad.png"
    broken.parent.mkdir()
    broken.write_bytes(b"not a png at all")
    with pytest.raises(DataError, match="cannot decode the image") as err:
        files.pixels("bad", question="q8")
    assert "bad.png" in str(err.value) and "q8" in str(err.value)
    with pytest.raises(DataError, match="images folder not found"):
        ImageFiles([tmp_path], images_dir=tmp_path / "absent")


def test_wide_and_huge_images_are_read_right_or_refused(tmp_path, monkeypatch):
    """Found in review: Pillow's RGB conversion clipped a 16-bit grey PNG to pure white
    (every condition's image the same: FPVG+ 0, no word), and a decompression bomb was a
    traceback. A 16-bit image is scaled to 8 bits; a float image and a bomb are refused."""
    grey = np.arange(256, dtype=np.uint16).reshape(16, 16) * 257
    Image.fromarray(grey).save(tmp_path / "wide.png")
    assert Image.open(tmp_path / "wide.png").mode == "I;16"
    pixels = decode(tmp_path / "wide.png")
    assert pixels.dtype == np.uint8 and pixels.shape == (16, 16, 3)
    assert np.array_equal(pixels[..., 0].ravel(), np.arange(256))
    Image.fromarray(np.ones((4, 4), np.float32)).save(tmp_path / "float.tiff")
    with pytest.raises(DataError, match=r"float\.tiff: a 32-bit float image: its range is"):
        decode(tmp_path / "float.tiff")
    Image.fromarray(_image()).save(tmp_path / "big.png")
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 5)  # 24 pixels: more than twice the limit
    with pytest.raises(DataError, match=r"big\.png: image too large to decode safely"):
        decode(tmp_path / "big.png")


def test_no_exif_rotation(tmp_path):
    """Boxes are in the stored pixels: an EXIF orientation tag must not rotate them."""
    exif = Image.Exif()
    exif[0x0112] = 6  # "rotate 90° clockwise to display"
    buf = io.BytesIO()
    Image.fromarray(_image()).save(buf, "JPEG", exif=exif.tobytes())
    path = tmp_path / "rot.jpg"
    path.write_bytes(buf.getvalue())
    assert decode(path).shape == (4, 6, 3)


def test_digest_follows_the_bytes(tmp_path):
    path = _save(tmp_path / "images" / "a.png", _image())
    first = ImageFiles([tmp_path]).digest("a")
    _save(path, _image()[:, ::-1].copy())
    assert ImageFiles([tmp_path]).digest("a") != first


def test_image_mean_is_numpys_mean_to_the_last_bit():
    from vqadiag.probes.conditions import image_mean

    two = np.array([[[0, 10, 255], [3, 11, 0]]], np.uint8)  # by hand: 1.5, 10.5, 127.5
    assert image_mean(two).tolist() == [1.5, 10.5, 127.5]
    rng = np.random.default_rng(0)
    for shape in ((1, 1, 3), (7, 5, 3), (480, 640, 3)):
        image = rng.integers(0, 256, size=shape, dtype=np.uint8)
        assert np.array_equal(image_mean(image), image.reshape(-1, 3).mean(axis=0))


@pytest.mark.parametrize("fill", ["mean", "blur", "noise"])
def test_conditions_replace_exactly_the_union_of_the_boxes(fill):
    from vqadiag.probes.conditions import _filler

    rng = np.random.default_rng(1)
    image = rng.integers(0, 256, size=(37, 53, 3), dtype=np.uint8)
    # overlapping, fractional, partly outside, and empty boxes
    boxes = np.array([[[2.4, 3.6, 20.5, 30.0], [15.0, 10.0, 40.2, 25.7],
                       [-5.0, 30.0, 8.0, 60.0], [30.0, 5.0, 30.2, 5.2]]], np.float32)  # fmt: skip
    visual = PixelInput([image], boxes, np.ones((1, 4), bool), np.array([[53.0, 37.0]]))
    for kw in ({"keep": (0, 1, 2, 3)}, {"remove": (0, 1, 2, 3)}, {"keep": (1,)}):
        probe = _probe(**kw)
        got = apply_pixel_condition(visual, [probe], fill=fill).images[0]
        covered = region_mask(37, 53, boxes[0, list(next(iter(kw.values())))])
        replace = ~covered if "keep" in kw else covered
        filler = _filler(image, fill, f"{probe.qid}|{probe.image_id}")
        expected = image.copy()
        expected[replace] = filler[replace]  # the definition, pixel by pixel
        assert np.array_equal(got, expected), (fill, kw)
