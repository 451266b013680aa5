"""Rendered images of the synthetic world (vqadiag.synth.render and the palette, textures and
object drawing it uses; docs/synth.md, "Images")."""

from __future__ import annotations

import io
import itertools
import json
from collections import Counter

import numpy as np
import pytest
from PIL import Image

from vqadiag.synth import generate_world
from vqadiag.synth import object_drawing as D
from vqadiag.synth import palette as P
from vqadiag.synth import render as R
from vqadiag.synth import textures as T
from vqadiag.synth.priors import build_priors
from vqadiag.synth.scenes import Scenes, sample_scenes, scene_relations
from vqadiag.synth.taxonomy import (
    CATEGORIES,
    CLASS_INDEX,
    CLASSES,
    COLORS,
    MATERIALS,
    PLACES,
    RELATIONS,
    STATES,
)


def make_scenes(objects, place="kitchen", width=100, height=80) -> Scenes:
    """One image holding ``objects``: (class, colour, material, state, (x, y, w, h)),
    attribute values as names or None."""

    def index(values, v):
        return -1 if v is None else values.index(v)

    n = len(objects)
    arr = lambda xs: np.array(xs, dtype=np.int64)  # noqa: E731
    return Scenes(
        width=arr([width]),
        height=arr([height]),
        place=arr([PLACES.index(place)]),
        offsets=arr([0, n]),
        cls=arr([CLASS_INDEX[o[0]] for o in objects]),
        color=arr([index(COLORS, o[1]) for o in objects]),
        material=arr([index(MATERIALS, o[2]) for o in objects]),
        state=arr([index(STATES, o[3]) for o in objects]),
        size=np.full(n, -1, dtype=np.int64),
        box=arr([o[4] for o in objects]).reshape(n, 4),
    )


def rgb(scenes: Scenes, i: int = 0) -> np.ndarray:
    """(height, width, 3) colours of image ``i`` as a reader sees them."""
    return np.asarray(R.render_image(scenes, i).convert("RGB"))


@pytest.fixture(scope="module")
def sampled() -> Scenes:
    rng = np.random.default_rng(11)
    return sample_scenes(12, build_priors(0.8, rng), rng)


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path):
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    ra = generate_world(a, images=6, seed=4, feature_dim=4, render_workers=0)
    generate_world(b, images=6, seed=4, feature_dim=4, render_workers=2)  # worker processes
    generate_world(c, images=6, seed=5, feature_dim=4, render_workers=0)
    names = sorted(p.name for p in (a / "gqa" / "images").iterdir())
    assert names == [f"{2300000 + i}.png" for i in range(6)]
    assert [f for f in ra["files"] if f.startswith("gqa/images/")] == [
        f"gqa/images/{n}" for n in names
    ]
    assert ra["splits"]["images"] == {"images": 6, "folder": "gqa/images"}
    for name in names:
        assert (a / "gqa" / "images" / name).read_bytes() == (
            b / "gqa" / "images" / name
        ).read_bytes()
        assert (a / "gqa" / "images" / name).read_bytes() != (
            c / "gqa" / "images" / name
        ).read_bytes()
    # each PNG has the size of its scene graph and loads as a plain palette image
    graphs = {}
    for split in ("train", "val", "testdev"):
        graphs.update(json.loads((a / "gqa" / f"{split}_sceneGraphs.json").read_text()))
    for image_id, graph in graphs.items():
        img = Image.open(a / "gqa" / "images" / f"{image_id}.png")
        assert img.mode == "P" and img.size == (graph["width"], graph["height"])
        assert not img.info  # no metadata chunks


def test_no_images_option(tmp_path):
    res = generate_world(tmp_path, images=5, seed=1, feature_dim=4, render=False)
    assert not (tmp_path / "gqa" / "images").exists()
    assert "images" not in res["splits"]
    assert not any(f.startswith("gqa/images") for f in res["files"])
    assert json.loads((tmp_path / "world.json").read_text())["rendering"] is None


def test_cli_no_images_flag(run_cli, tmp_path):
    res = run_cli("synth", "--out", tmp_path / "w", "--images", "5", "--feature-dim", "4",
                  "--no-images", "--json")  # fmt: skip
    assert res.exit_code == 0, res.stderr
    assert not (tmp_path / "w" / "gqa" / "images").exists()
    res = run_cli("synth", "--out", tmp_path / "v", "--images", "5", "--feature-dim", "4")
    assert res.exit_code == 0
    assert len(list((tmp_path / "v" / "gqa" / "images").glob("*.png"))) == 5
    assert "PNG in gqa/images/" in res.stdout


def test_png_bytes_decode_to_the_rendered_pixels(sampled):
    for i in range(3):
        img = R.render_image(sampled, i)
        back = Image.open(io.BytesIO(R.encode_png(img)))
        assert back.mode == "P"
        assert np.array_equal(np.asarray(back), np.asarray(img))
        assert np.array_equal(np.asarray(back.convert("RGB")), rgb(sampled, i))


def test_empty_image_is_just_background():
    for place in PLACES:
        s = make_scenes([], place=place, width=64, height=50)
        pixels = rgb(s)
        upper, lower, tone, _ = P.PLACE_BACKGROUND[place]
        assert set(map(tuple, pixels.reshape(-1, 3).tolist())) <= {upper, lower, tone}
        assert tuple(pixels[0, 0]) == upper and tuple(pixels[-1, -1]) in {lower, tone}
        idx, owner = R.render_indices(s, 0)
        assert np.array_equal(idx, R.background(PLACES.index(place), 64, 50))
        assert (owner == -1).all()


def test_background_colours_differ_from_every_object_colour():
    objects = {*P.COLOR_RGB.values(), P.NO_COLOR_RGB}
    objects |= {P.shade_of(c) for c in objects}
    for upper, lower, tone, _ in P.PLACE_BACKGROUND.values():
        assert not {upper, lower, tone} & objects


def test_fill_colour_at_a_point_and_dominant_in_the_box():
    # a red apple, no material, no state: left of the centre mark, inside the ellipse
    s = make_scenes([("apple", "red", None, None, (10, 10, 40, 40))])
    pixels = rgb(s)
    assert tuple(pixels[30, 16]) == P.COLOR_RGB["red"]  # row y=30, column x=16
    for color in COLORS:
        for material in (None, "wood", "stone", "cotton", "brick"):
            s = make_scenes([("table", color, material, "old", (5, 5, 60, 44))])
            mine = R.render_indices(s, 0)[1] == 0
            counts = Counter(map(tuple, rgb(s)[mine].tolist())).most_common(2)
            assert counts[0][0] == P.COLOR_RGB[color], (color, material)
            assert counts[0][1] > 1.5 * counts[1][1], (color, material)


def test_dominant_colour_of_every_visible_object_in_sampled_scenes(sampled):
    checked = 0
    for i in range(sampled.n_images):
        idx, owner = R.render_indices(sampled, i)
        lo, hi = sampled.offsets[i], sampled.offsets[i + 1]
        for k in range(hi - lo):
            w, h = sampled.box[lo + k, 2:].tolist()
            mine = owner == k
            shape = D.silhouette(CATEGORIES.index(CLASSES[sampled.cls[lo + k]].category), w, h)
            if min(w, h) < D.MIN_DETAIL or mine.sum() < max(150, 0.7 * shape.sum()):
                continue
            color = sampled.color[lo + k]
            want = P.PALETTE.fill[color if color >= 0 else len(COLORS)]
            values, counts = np.unique(idx[mine], return_counts=True)
            assert values[counts.argmax()] == want, (i, k)
            checked += 1
    assert checked > 50


def test_box_maps_to_pixels_exactly():
    bg = rgb(make_scenes([], width=60, height=50))
    sizes = [(20, 20), (20, 7), (2, 2), (3, 5), (7, 30), (41, 33)]
    for cls, (w, h) in itertools.product([c.name for c in CLASSES], sizes):
        obj = CLASSES[CLASS_INDEX[cls]]
        color = obj.colors[0] if obj.colors else None
        material = obj.materials[0] if obj.materials else None
        s = make_scenes([(cls, color, material, obj.states[0], (10, 4, w, h))], width=60, height=50)
        changed = (rgb(s) != bg).any(axis=2)
        ys, xs = np.nonzero(changed)
        assert (xs.min(), xs.max(), ys.min(), ys.max()) == (10, 10 + w - 1, 4, 4 + h - 1), cls
        owner = R.render_indices(s, 0)[1]
        assert np.array_equal(owner == 0, changed | (owner == 0))
    # the brief's example: x=10, w=20 paints columns 10..29, never 9 or 30
    s = make_scenes([("bus", "yellow", "metal", "parked", (10, 10, 20, 12))], width=60, height=50)
    changed = (rgb(s) != bg).any(axis=2)
    assert changed[:, 10].any() and changed[:, 29].any()
    assert not changed[:, 9].any() and not changed[:, 30].any()


def test_classes_have_distinct_pixel_patterns():
    for size in (32, 48):
        patterns = []
        for c in CLASSES:
            s = make_scenes([(c.name, "red", None, None, (0, 0, size, size))], "park", size, size)
            patterns.append(R.render_indices(s, 0)[0].ravel())
        stack = np.stack(patterns)
        for a, b in itertools.combinations(range(len(CLASSES)), 2):
            differ = (stack[a] != stack[b]).mean()
            assert differ > 0.03, (size, CLASSES[a].name, CLASSES[b].name, differ)


def test_materials_and_states_have_distinct_pixel_patterns():
    def pattern(material, state):
        s = make_scenes([("table", "brown", material, state, (0, 0, 48, 40))], "park", 48, 40)
        return R.render_indices(s, 0)[0]

    textures = [pattern(m, None) for m in (None, *MATERIALS)]
    for a, b in itertools.combinations(range(len(textures)), 2):
        assert (textures[a] != textures[b]).mean() > 0.05, (a, b)
    badges = [pattern(None, st) for st in (None, *STATES)]
    for a, b in itertools.combinations(range(len(badges)), 2):
        assert (badges[a] != badges[b]).sum() >= 8, (a, b)


def test_drawn_textures_are_the_documented_patterns():
    for m in range(len(MATERIALS)):
        for w, h in ((9, 8), (30, 47), (130, 61), (250, 200)):
            drawn = np.asarray(T.plain_mask(m, w, h)) == 0
            assert np.array_equal(drawn, T.texture(m, w, h)), (MATERIALS[m], w, h)
            assert 0.08 < drawn.mean() < 0.4, (MATERIALS[m], w, h)


def test_smaller_objects_are_drawn_on_top_and_clear_is_see_through():
    table = ("table", "brown", "wood", None, (10, 10, 60, 40))
    cup = ("cup", "blue", "ceramic", "full", (30, 12, 14, 16))
    for objects in ([table, cup], [cup, table]):  # drawing order does not follow input order
        s = make_scenes(objects)
        owner = R.render_indices(s, 0)[1]
        x, y, w, h = cup[4]
        shape = D.silhouette(CATEGORIES.index("kitchenware"), w, h)
        assert (owner[y : y + h, x : x + w][shape] == objects.index(cup)).all()
    glass = ("bottle", "clear", "glass", None, (30, 12, 14, 24))
    s = make_scenes([table, glass])
    idx, owner = R.render_indices(s, 0)
    inside = idx[13:35, 31:43]
    assert (inside == P.PALETTE.fill[COLORS.index("clear")]).any()
    assert (owner[13:35, 31:43] == 0).any()  # the table shows through


def test_spatial_relations_hold_on_the_pixels(sampled):
    relations = scene_relations(sampled, 0, sampled.n_images)
    left = RELATIONS.index("to the left of")
    n_left = 0
    for i in range(sampled.n_images):
        owner = R.render_indices(sampled, i)[1]
        lo = sampled.offsets[i]
        cols = {}
        for k in np.unique(owner[owner >= 0]).tolist():
            ys, xs = np.nonzero(owner == k)
            x, y, w, h = sampled.box[lo + k].tolist()
            assert xs.min() >= x and xs.max() < x + w and ys.min() >= y and ys.max() < y + h
            cols[k] = (xs.min(), xs.max())
        for a, r, b in relations[i]:
            if r == left and a in cols and b in cols:
                assert cols[a][1] < cols[b][0], (i, a, b)
                n_left += 1
    assert n_left > 10


def _crop(mask: np.ndarray, size: int = 24) -> np.ndarray:
    """A boolean texture as the box encoder sees it: resized to size × size (area mean)."""
    img = Image.fromarray(mask.astype(np.uint8) * 255)
    return np.asarray(img.resize((size, size), Image.BOX), dtype=np.float32) / 255


def test_a_texture_looks_alike_on_square_crops_of_any_aspect():
    # each axis has its own period, so an elongated box's texture resized to a square
    # crop is the square box's texture with as many periods (up to the rounding of line
    # widths), closer to it than to any other material's; with one period for both axes
    # (the shorter side's) a 4:1 box had 4 × too many periods along its long side
    square = [_crop(T.texture(m, 48, 48)) for m in range(len(MATERIALS))]
    for w, h in ((192, 48), (48, 192), (96, 48), (80, 40)):
        for m in range(len(MATERIALS)):
            long = _crop(T.texture(m, w, h))
            gaps = [np.abs(long - other).mean() for other in square]
            assert int(np.argmin(gaps)) == m, (MATERIALS[m], w, h, gaps)
            assert gaps[m] < 0.2, (MATERIALS[m], w, h, gaps[m])


def test_periods_follow_each_side_and_the_badge_scales_with_the_box():
    assert [T.period(s) for s in (8, 19, 20, 48, 60, 192, 1000)] == [4, 4, 5, 12, 12, 48, 64]
    x0, y0, x1, y1 = D.badge_box(CATEGORIES.index("furniture"), 200, 50)
    assert (x1 - x0 + 1, y1 - y0 + 1) == (44, 11)  # 22 % of each side
    assert min(x0, y0) >= 0 and x1 < 200 and y1 < 50
    x0, y0, x1, y1 = D.badge_box(CATEGORIES.index("furniture"), 12, 12)
    assert (x1 - x0 + 1, y1 - y0 + 1) == (4, 4)  # at least 4 px
