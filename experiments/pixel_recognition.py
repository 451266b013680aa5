"""How well can the pixel model's CNN recognise objects? (docs/models.md, "The pixel model")

Trains the pixel model's grid encoder (:func:`vqadiag.models.networks.pixel.grid_encoder`,
the same CNN) on the cell-name targets alone, with no question, and after each
epoch prints, on the val split:

* ``cell``: name accuracy over the foreground cells (a cell's target is the object
  whose box contains its centre, the smallest one; the pixel model's rule);
* ``centre``: name accuracy at the cell under each object's box centre, overall and by
  the object's shorter side in model-input pixels (0-6, 6-12, 12-24, 24+), with counts;
* ``train cell``: the same as ``cell`` on every fifth training image (train ≈ val
  means the encoder underfits: it needs more steps, not more data).

Usage: ``python experiments/pixel_recognition.py WORLD/gqa [--epochs 10] [--size 128]
[--channels 24]``. Each epoch takes about 7 s on one core at the defaults (1,400
training images).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from torch import nn

from vqadiag.data.model_inputs.gqa_data import GQAData
from vqadiag.models.networks.pixel import grid_encoder

SIDE_BINS = ((0, 6), (6, 12), (12, 24), (24, 10_000))


def cell_targets(
    scene: dict, grid: int, names: dict[str, int], size: int
) -> tuple[np.ndarray, list[tuple[int, int, float]]]:
    """Per cell the index of the smallest box containing its centre (0: none), and per
    object (cell under its box centre, name index, shorter side in input pixels)."""
    width, height = float(scene["width"]), float(scene["height"])
    centres = (np.arange(grid) + 0.5) / grid
    cx, cy = np.tile(centres * width, grid), np.repeat(centres * height, grid)
    target = np.zeros(grid * grid, dtype=np.int64)
    best = np.full(grid * grid, np.inf)
    objects = []
    for obj in scene["objects"].values():
        x, y, w, h = (float(obj[k]) for k in ("x", "y", "w", "h"))
        inside = (cx >= x) & (cx < x + w) & (cy >= y) & (cy < y + h) & (w * h < best)
        best[inside] = w * h
        name = names.get(str(obj["name"]), 0)
        target[inside] = name
        col = min(grid - 1, int((x + w / 2) / width * grid))
        row = min(grid - 1, int((y + h / 2) / height * grid))
        objects.append((row * grid + col, name, min(w / width, h / height) * size))
    return target, objects


def load_split(data: GQAData, split: str, size: int, grid: int, names: dict[str, int]):
    """Images at the model's input size, cell targets and per-object centre cells."""
    scenes = data.scene_graphs(split)
    ids = sorted(scenes)
    images = np.stack(data.pixel_input(ids, size=(size, size), max_objects=0).images)
    targets, objects = [], []
    for k, image_id in enumerate(ids):
        target, objs = cell_targets(scenes[image_id], grid, names, size)
        targets.append(target)
        objects.extend((k, *o) for o in objs)
    return images, np.stack(targets), objects


def as_tensor(images: np.ndarray) -> torch.Tensor:
    """uint8 (U, S, S, 3) → float (U, 3, S, S) in [−1, 1], as the pixel model reads."""
    return torch.from_numpy(images.astype(np.float32) / 127.5 - 1.0).permute(0, 3, 1, 2)


def predict(cnn: nn.Module, head: nn.Module, images: np.ndarray) -> np.ndarray:
    """Predicted name index per cell (U, G·G)."""
    with torch.no_grad():
        return torch.cat(
            [head(cnn(as_tensor(images[i : i + 64]))).flatten(2).argmax(1)
             for i in range(0, len(images), 64)]
        ).numpy()  # fmt: skip


def side_bin(hits: np.ndarray, sides: np.ndarray, lo: float, hi: float) -> str:
    """``"lo-hi: accuracy (n=count)"`` over the objects with ``lo <= side < hi``
    (accuracy ``-`` when there are none)."""
    inside = (sides >= lo) & (sides < hi)
    accuracy = f"{hits[inside].mean():.2f}" if inside.any() else "-"
    return f"{lo}-{hi if hi < 10_000 else ''}: {accuracy} (n={int(inside.sum())})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("gqa", help="a GQA folder with scene graphs and images")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--size", type=int, default=128)
    parser.add_argument("--channels", type=int, default=24)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--images-per-step", type=int, default=9)
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    data = GQAData(args.gqa)
    grid = args.size // 8
    scenes = data.scene_graphs("train")
    vocab = sorted({str(o["name"]) for s in scenes.values() for o in s["objects"].values()})
    names = {n: i + 1 for i, n in enumerate(vocab)}
    tr_images, tr_targets, _ = load_split(data, "train", args.size, grid, names)
    va_images, va_targets, va_objects = load_split(data, "val", args.size, grid, names)
    cnn = grid_encoder(args.channels)
    head = nn.Conv2d(4 * args.channels, len(names) + 1, 1)
    params = [*cnn.parameters(), *head.parameters()]
    optimizer = torch.optim.AdamW(params, lr=args.lr, weight_decay=1e-3)
    rng = np.random.default_rng(0)
    sample = np.arange(0, len(tr_images), 5)
    for epoch in range(1, args.epochs + 1):
        start = time.perf_counter()
        cnn.train()
        order = rng.permutation(len(tr_images))
        for b in range(0, len(order), args.images_per_step):
            idx = order[b : b + args.images_per_step]
            logits = head(cnn(as_tensor(tr_images[idx]))).flatten(2)
            loss = nn.functional.cross_entropy(logits, torch.from_numpy(tr_targets[idx]))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        cnn.eval()
        seconds = time.perf_counter() - start
        train_pred, train_true = predict(cnn, head, tr_images[sample]), tr_targets[sample]
        val_pred = predict(cnn, head, va_images)
        fg, train_fg = va_targets > 0, train_true > 0
        hits = np.array([val_pred[k, cell] == name for k, cell, name, _ in va_objects])
        sides = np.array([side for *_, side in va_objects])
        bins = " ".join(side_bin(hits, sides, lo, hi) for lo, hi in SIDE_BINS)
        print(
            f"epoch {epoch} ({seconds:.1f} s): cell {(val_pred[fg] == va_targets[fg]).mean():.3f}"
            f"  train cell {(train_pred[train_fg] == train_true[train_fg]).mean():.3f}"
            f"  centre {hits.mean():.3f}  by side {bins}",
            flush=True,
        )


if __name__ == "__main__":
    main()
