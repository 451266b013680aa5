"""Benchmark the synthetic world generator (issue 3).

Prints, in one run:

1. end-to-end generation: seconds, questions written (GQA + VQA v2), questions/s;
2. the 24-nearest-neighbour search of complementary pairs: blocked matrix-product
   search vs a naive per-image scan (time per query image, ratio, identical result);
3. relations from geometry: vectorized tensor rules vs a per-pair Python loop
   (time per image, ratio, identical relation sets);
4. renders per second: drawing + the PNG encoder of ``vqadiag.synth.render`` vs the same
   pixels saved with Pillow's default PNG writer (ratio, identical decoded pixels), and
   the share of ``generate_world`` time the images take (the same world with
   ``render=False``).

Usage: ``python benchmarks/bench_synth.py --images 50000`` (full size) or
``--images 2000`` (demo size).
"""

from __future__ import annotations

import argparse
import io
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image

from vqadiag.synth import generate_world
from vqadiag.synth import render as rnd
from vqadiag.synth.neighbours import knn, knn_naive, scene_embedding
from vqadiag.synth.priors import build_priors
from vqadiag.synth.scenes import sample_scenes, scene_relations
from vqadiag.synth.taxonomy import CLASSES, PLACES, RELATIONS


def naive_relations(box, cls, width, height) -> set[tuple[int, str, int]]:
    """The relation rules of ``relation_tensor``, one pair at a time in plain Python."""
    support = [CLASSES[c].support for c in cls]
    out = set()
    n = len(box)
    corners = [(x, y, x + w, y + h, w * h) for x, y, w, h in box]
    diag2 = width**2 + height**2

    def on(a, b):
        ax1, _, ax2, ay2, aarea = corners[a]
        bx1, by1, bx2, by2, barea = corners[b]
        cx = (ax1 + ax2) / 2
        return (
            support[b]
            and not support[a]
            and bx1 <= cx <= bx2
            and by1 <= ay2 <= by1 + 0.4 * (by2 - by1)
            and aarea < 0.5 * barea
        )

    def behind(a, b):
        ax1, ay1, ax2, ay2, aarea = corners[a]
        bx1, by1, bx2, by2, barea = corners[b]
        iw = max(0.0, min(ax2, bx2) - max(ax1, bx1))
        ih = max(0.0, min(ay2, by2) - max(ay1, by1))
        return (
            iw * ih > 0.1 * min(aarea, barea)
            and ay2 < by2 - 0.04 * height
            and not on(a, b)
            and not on(b, a)
        )

    for a in range(n):
        for b in range(n):
            if a == b:
                continue
            ax1, ay1, ax2, ay2, _ = corners[a]
            bx1, by1, bx2, by2, _ = corners[b]
            v_overlap = min(ay2, by2) - max(ay1, by1)
            if on(a, b):
                out.add((a, "on", b))
            if on(b, a):
                out.add((a, "under", b))
            if ax2 < bx1 and bx1 - ax2 < 0.15 * width and v_overlap > 0:
                out.add((a, "to the left of", b))
            if bx2 < ax1 and ax1 - bx2 < 0.15 * width and v_overlap > 0:
                out.add((a, "to the right of", b))
            if behind(a, b):
                out.add((a, "behind", b))
            if behind(b, a):
                out.add((a, "in front of", b))
            d2 = ((ax1 + ax2) / 2 - (bx1 + bx2) / 2) ** 2 + ((ay1 + ay2) / 2 - (by1 + by2) / 2) ** 2
            related = on(a, b) or on(b, a) or behind(a, b) or behind(b, a)
            if d2 < 0.01 * diag2 and not related:
                out.add((a, "near", b))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=50000, help="world size (scale)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--feature-dim", type=int, default=64)
    parser.add_argument(
        "--naive-queries", type=int, default=200, help="query images for the naive neighbour scan"
    )
    parser.add_argument(
        "--naive-images", type=int, default=300, help="images for the naive relation loop"
    )
    parser.add_argument(
        "--render-images", type=int, default=300, help="images for the renders-per-second line"
    )
    parser.add_argument(
        "--render-workers", type=int, default=None, help="render worker processes (default: auto)"
    )
    parser.add_argument("--out", type=Path, default=None, help="keep the world here")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or Path(tmp) / "world"
        summary = generate_world(
            out, images=args.images, seed=args.seed, feature_dim=args.feature_dim,
            progress=True, render_workers=args.render_workers,
        )  # fmt: skip
        size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
        png = sum(p.stat().st_size for p in (out / "gqa" / "images").glob("*.png"))
        plain = generate_world(
            Path(tmp) / "plain", images=args.images, seed=args.seed,
            feature_dim=args.feature_dim, render=False,
        )  # fmt: skip
    print(
        f"generate_world: {args.images} images, {summary['questions']} questions "
        f"in {summary['seconds']:.1f} s = {summary['questions_per_second']:.0f} questions/s, "
        f"{size / 1e6:.1f} MB ({png / 1e6:.1f} MB of PNG)"
    )

    rng = np.random.default_rng(args.seed)
    priors = build_priors(0.8, rng)
    scenes = sample_scenes(args.images, priors, rng)
    emb = scene_embedding(scenes.cls, scenes.offsets, scenes.place, len(CLASSES), len(PLACES))
    train = emb[: round(0.7 * args.images)]
    t0 = time.perf_counter()
    fast = knn(train)
    t_fast = (time.perf_counter() - t0) / train.shape[0]
    rows = np.linspace(0, train.shape[0] - 1, min(args.naive_queries, train.shape[0])).astype(int)
    t0 = time.perf_counter()
    slow = knn_naive(train, rows=rows)
    t_slow = (time.perf_counter() - t0) / rows.shape[0]
    same = np.array_equal(fast[rows], slow)
    print(
        f"24-NN over {train.shape[0]} images: blocked {t_fast * 1e6:.1f} us/query, naive "
        f"{t_slow * 1e6:.1f} us/query, ratio {t_slow / t_fast:.1f}x, identical: {same}"
    )

    m = min(args.naive_images, args.images)
    t0 = time.perf_counter()
    vec = scene_relations(scenes, 0, m)
    t_vec = (time.perf_counter() - t0) / m
    t0 = time.perf_counter()
    identical = True
    for i in range(m):
        lo, hi = scenes.offsets[i], scenes.offsets[i + 1]
        ref = naive_relations(
            scenes.box[lo:hi].tolist(),
            scenes.cls[lo:hi].tolist(),
            int(scenes.width[i]),
            int(scenes.height[i]),
        )
        got = {(a, RELATIONS[r], b) for a, r, b in vec[i]}
        identical &= ref == got
    t_loop = (time.perf_counter() - t0) / m
    print(
        f"relations over {m} images: vectorized {t_vec * 1e3:.2f} ms/image, Python loop "
        f"{t_loop * 1e3:.2f} ms/image, ratio {t_loop / t_vec:.1f}x, identical: {identical}"
    )

    m = min(args.render_images, args.images)
    t0 = time.perf_counter()
    images = [rnd.render_image(scenes, i) for i in range(m)]
    t_draw = (time.perf_counter() - t0) / m
    t0 = time.perf_counter()
    ours = [rnd.encode_png(img) for img in images]
    t_png = (time.perf_counter() - t0) / m
    t0 = time.perf_counter()
    pillow = []
    for img in images:
        buf = io.BytesIO()
        img.save(buf, format="PNG")
        pillow.append(buf.getvalue())
    t_pil = (time.perf_counter() - t0) / m
    pixels_same = all(
        np.array_equal(np.asarray(Image.open(io.BytesIO(a))), np.asarray(Image.open(io.BytesIO(b))))
        for a, b in zip(ours, pillow, strict=True)
    )
    extra = summary["seconds"] - plain["seconds"]
    print(
        f"renders per second: {1 / (t_draw + t_png):.0f} images/s in one process "
        f"(draw {t_draw * 1e3:.2f} ms + PNG {t_png * 1e3:.2f} ms per image, "
        f"{np.mean([len(b) for b in ours]) / 1e3:.1f} kB); Pillow's PNG writer "
        f"{t_pil * 1e3:.2f} ms/image, ratio {t_pil / t_png:.1f}x "
        f"({np.mean([len(b) for b in pillow]) / 1e3:.1f} kB), identical pixels: {pixels_same}"
    )
    print(
        f"images in generate_world: {summary['seconds']:.1f} s with, {plain['seconds']:.1f} s "
        f"without (render=False): +{extra:.1f} s = {100 * extra / summary['seconds']:.0f}% of "
        f"synth time, {args.images / max(extra, 1e-9):.0f} added renders per second "
        f"({summary['render_workers']} render workers)"
    )
    if not (same and identical and pixels_same):
        raise SystemExit("fast and naive results differ")


if __name__ == "__main__":
    main()
