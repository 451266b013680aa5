"""Sampling scenes (vectorized over all images) and deriving relations from geometry.

A scene is a place, an image size and 5–40 objects (``objects`` sets another range),
each with a class drawn from the place's class distribution, attributes drawn from the
class-conditional priors, and an integer box ``x, y, w, h`` in image pixels. Placeable objects
(fruit, cups, clothes, cats …) are often put on a support (table, shelf, bench
…) so that "on" relations arise from the geometry.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vqadiag.synth.priors import Priors, sample_rows
from vqadiag.synth.taxonomy import CLASSES, FAMILIES, RELATIONS, STATES, ripeness

MIN_OBJECTS, MAX_OBJECTS = 5, 40
#: candidate image sizes (width, height) in pixels
IMAGE_SIZES = np.array([[640, 480], [500, 375], [800, 600], [480, 640], [640, 427]])
P_ON = 0.5  # chance that a placeable object is put on a support of its image
LARGE, SMALL = 1.6, 0.6  # size attribute thresholds on area / typical area

_TYPICAL = np.array([c.size for c in CLASSES])
_SUPPORT = np.array([c.support for c in CLASSES])
_PLACEABLE = np.array([c.placeable for c in CLASSES])
_FRUIT = np.array([c.category == "fruit" for c in CLASSES])


@dataclass
class Scenes:
    """All objects of all images as flat arrays; image ``i`` owns ``offsets[i]:offsets[i+1]``.

    Attribute arrays hold indices into the family's value tuple (−1 = none);
    ``size`` indexes ``SIZES`` (``small``, ``large``). ``box`` is ``x, y, w, h``.
    """

    width: np.ndarray
    height: np.ndarray
    place: np.ndarray
    offsets: np.ndarray
    cls: np.ndarray
    color: np.ndarray
    material: np.ndarray
    state: np.ndarray
    size: np.ndarray
    box: np.ndarray

    @property
    def n_images(self) -> int:
        """Number of images."""
        return int(self.width.shape[0])

    def image_of(self) -> np.ndarray:
        """Image index of every object."""
        return np.repeat(np.arange(self.n_images), np.diff(self.offsets))


def check_object_range(objects: tuple[int, int]) -> tuple[int, int]:
    """``(lo, hi)`` objects per image, refused unless 2 ≤ lo ≤ hi ≤ :data:`MAX_OBJECTS`
    (a relation needs two objects)."""
    values = tuple(objects) if isinstance(objects, (tuple, list)) else ()
    if len(values) != 2 or not all(type(v) is int for v in values):
        raise ValueError(f"objects per image must be two whole numbers (MIN, MAX), got {objects!r}")
    lo, hi = values
    if not 2 <= lo <= hi <= MAX_OBJECTS:
        raise ValueError(
            f"objects per image must be a range 2 <= MIN <= MAX <= {MAX_OBJECTS}, got {lo}-{hi}"
        )
    return lo, hi


def sample_scenes(
    n_images: int,
    priors: Priors,
    rng: np.random.Generator,
    objects: tuple[int, int] = (MIN_OBJECTS, MAX_OBJECTS),
) -> Scenes:
    """Draw ``n_images`` scenes (see module docstring); all randomness comes from ``rng``.

    An image's object count is ``clip(round(Γ(2.5, 4)) + lo, lo, hi)`` for ``objects``
    ``(lo, hi)`` (about 15 on average with the default 5–40)."""
    lo, hi = check_object_range(objects)
    place = rng.integers(0, priors.class_given_place.shape[0], n_images)
    wh = IMAGE_SIZES[rng.integers(0, len(IMAGE_SIZES), n_images)]
    width, height = wh[:, 0].astype(np.int64), wh[:, 1].astype(np.int64)
    counts = np.clip(np.rint(rng.gamma(2.5, 4.0, n_images)) + lo, lo, hi)
    counts = counts.astype(np.int64)
    offsets = np.concatenate([[0], np.cumsum(counts)])
    img = np.repeat(np.arange(n_images), counts)
    cls = sample_rows(priors.class_given_place, place[img], rng)
    attrs = {fam: sample_rows(priors.attr[fam], cls, rng) for fam in FAMILIES}

    # boxes: typical size × a log-normal scale, bottom edge on the ground plane
    W, H = width[img].astype(np.float64), height[img].astype(np.float64)
    scale = rng.lognormal(0.0, 0.3, img.shape[0])
    aspect = rng.lognormal(0.0, 0.1, img.shape[0])
    w = np.clip(_TYPICAL[cls, 0] * W * scale * aspect, 4, 0.95 * W)
    h = np.clip(_TYPICAL[cls, 1] * H * scale / aspect, 4, 0.95 * H)
    x = rng.random(img.shape[0]) * (W - w)
    bottom = np.maximum(h, H * (0.35 + 0.65 * rng.random(img.shape[0])))

    # put some placeable objects on a support object of the same image
    is_support = _SUPPORT[cls]
    supports = np.flatnonzero(is_support)
    n_sup = np.bincount(img[supports], minlength=n_images)
    sup_start = np.concatenate([[0], np.cumsum(n_sup)])[:-1]
    wants = _PLACEABLE[cls] & (rng.random(img.shape[0]) < P_ON) & (n_sup[img] > 0)
    u_pick, u_x, u_y = rng.random((3, img.shape[0]))
    movers = np.flatnonzero(wants)
    if movers.size:
        k = np.minimum(
            (u_pick[movers] * n_sup[img[movers]]).astype(np.int64), n_sup[img[movers]] - 1
        )
        s = supports[sup_start[img[movers]] + k]
        sx, sw, sh = x[s], w[s], h[s]
        sy = bottom[s] - sh
        shrink = np.minimum(1.0, 0.5 * sw / w[movers])
        shrink = np.minimum(shrink, 0.5 * sh / h[movers])
        w[movers] *= shrink
        h[movers] *= shrink
        cx = sx + (0.2 + 0.6 * u_x[movers]) * sw
        x[movers] = cx - w[movers] / 2
        bottom[movers] = np.maximum(sy + (0.05 + 0.25 * u_y[movers]) * sh, h[movers])
    xi = np.clip(np.floor(x), 0, W - 2)
    yi = np.clip(np.floor(bottom - h), 0, H - 2)
    wi = np.clip(np.rint(w), 2, W - xi)
    hi = np.clip(np.rint(h), 2, H - yi)
    box = np.stack([xi, yi, wi, hi], axis=1).astype(np.int64)

    # derived attributes: ripeness of fruit from colour, size from area
    from vqadiag.synth.taxonomy import COLORS

    state = attrs["state"]
    fruit = np.flatnonzero(_FRUIT[cls] & (attrs["color"] >= 0))
    state[fruit] = [STATES.index(ripeness(COLORS[c])) for c in attrs["color"][fruit]]
    typical_area = _TYPICAL[cls, 0] * _TYPICAL[cls, 1] * W * H
    ratio = wi * hi / typical_area
    size = np.where(ratio > LARGE, 1, np.where(ratio < SMALL, 0, -1))
    return Scenes(
        width, height, place, offsets, cls, attrs["color"], attrs["material"], state, size, box
    )


def relation_tensor(
    box: np.ndarray, cls: np.ndarray, mask: np.ndarray, width: np.ndarray, height: np.ndarray
) -> np.ndarray:
    """Relations of padded images: ``R[i, r, a, b]`` = "object a RELATIONS[r] object b".

    ``box`` is (n, m, 4) ``x, y, w, h``, ``cls`` (n, m), ``mask`` (n, m) for real
    objects, ``width``/``height`` (n,). Rules (all from geometry):

    * a *on* b: b is a support class, a is not, a's bottom-centre lies inside b's
      width and in the top 40% of b's height, and area(a) < ½ area(b); *under* is the converse;
    * a *to the left of* b: a ends before b starts (x2_a < x1_b), the gap is
      below 15% of the image width, and their vertical extents overlap; *right* is the converse;
    * a *behind* b: the boxes overlap by more than 10% of the smaller box, a's
      bottom is higher than b's by more than 4% of the image height (further away
      on the ground plane), and neither is on the other; *in front of* is the converse;
    * a *near* b: centre distance below 10% of the image diagonal and no on /
      under / behind / in-front-of relation between them.
    """
    x1 = box[..., 0].astype(np.float64)
    y1 = box[..., 1].astype(np.float64)
    x2 = x1 + box[..., 2]
    y2 = y1 + box[..., 3]
    area = box[..., 2].astype(np.float64) * box[..., 3]
    W = width.astype(np.float64)[:, None, None]
    H = height.astype(np.float64)[:, None, None]
    A = (slice(None), slice(None), None)  # a on axis 1
    B = (slice(None), None, slice(None))  # b on axis 2
    valid = mask[A] & mask[B] & ~np.eye(box.shape[1], dtype=bool)[None]

    sup = _SUPPORT[cls]
    cx = (x1 + x2) / 2
    on = (
        sup[B]
        & ~sup[A]
        & (cx[A] >= x1[B])
        & (cx[A] <= x2[B])
        & (y2[A] >= y1[B])
        & (y2[A] <= y1[B] + 0.4 * (y2[B] - y1[B]))
        & (area[A] < 0.5 * area[B])
        & valid
    )
    under = on.transpose(0, 2, 1)
    v_overlap = np.minimum(y2[A], y2[B]) - np.maximum(y1[A], y1[B])
    left = (x2[A] < x1[B]) & (x1[B] - x2[A] < 0.15 * W) & (v_overlap > 0) & valid
    right = left.transpose(0, 2, 1)
    iw = np.clip(np.minimum(x2[A], x2[B]) - np.maximum(x1[A], x1[B]), 0, None)
    ih = np.clip(v_overlap, 0, None)
    overlap = iw * ih > 0.1 * np.minimum(area[A], area[B])
    stacked = on | under
    behind = overlap & (y2[A] < y2[B] - 0.04 * H) & ~stacked & valid
    front = behind.transpose(0, 2, 1)
    cy = (y1 + y2) / 2
    dist2 = (cx[A] - cx[B]) ** 2 + (cy[A] - cy[B]) ** 2
    near = (dist2 < (0.1**2) * (W**2 + H**2)) & ~(stacked | behind | front) & valid
    by_name = {
        "to the left of": left,
        "to the right of": right,
        "on": on,
        "under": under,
        "near": near,
        "behind": behind,
        "in front of": front,
    }
    return np.stack([by_name[r] for r in RELATIONS], axis=1)


def scene_relations(scenes: Scenes, start: int, stop: int) -> list[list[tuple[int, int, int]]]:
    """Relations of images ``start:stop`` as ``(a, r, b)`` triples of local object indices.

    Triples are sorted by subject, then object, then relation index.
    """
    n = stop - start
    counts = np.diff(scenes.offsets[start : stop + 1])
    m = int(counts.max()) if n else 0
    local = np.arange(m)
    mask = local[None, :] < counts[:, None]
    flat = scenes.offsets[start:stop, None] + np.minimum(local[None, :], counts[:, None] - 1)
    box = scenes.box[flat]
    cls = scenes.cls[flat]
    rel = relation_tensor(box, cls, mask, scenes.width[start:stop], scenes.height[start:stop])
    img, r, a, b = np.nonzero(rel)
    order = np.lexsort((r, b, a, img))
    img, r, a, b = img[order], r[order], a[order], b[order]
    bounds = np.searchsorted(img, np.arange(n + 1))
    triples = list(zip(a.tolist(), r.tolist(), b.tolist(), strict=True))
    return [triples[bounds[i] : bounds[i + 1]] for i in range(n)]
