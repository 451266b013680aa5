"""Training the symbolic model (:mod:`vqadiag.models.reference.symbolic`, steps 1-5 of its
module docstring): labelled samples from detections matched to scene graphs, the object,
relation and scene classifiers, and their networks
(:mod:`vqadiag.models.networks.symbolic`)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any, TypeVar

import numpy as np

from vqadiag.data.formats.gqa import object_box_corners
from vqadiag.data.formats.gqa_program import ProgramVocabulary
from vqadiag.data.model_inputs.geometry import best_matches
from vqadiag.data.model_inputs.gqa_data import GQAData
from vqadiag.errors import DataError
from vqadiag.models.reference.symbolic_features import (
    MATCH_IOU,
    N_PAIR_FEATURES,
    object_geometry,
    pair_geometry,
    pool_features,
)
from vqadiag.models.reference.symbolic_vocabulary import (
    answer_vocabulary,
    group_priors,
    learn_vocabulary,
)
from vqadiag.progress import LOSS_ACC, progress_bar

#: the symbolic model's class (:class:`vqadiag.models.reference.symbolic.SymbolicModel`)
M = TypeVar("M")


def build_nets(
    d_in: int, hidden: int, heads: list[int], n_names: int, n_rel: int
) -> tuple[Any, Any]:
    """The object classifier and the relation classifier, built in that order
    (:mod:`vqadiag.models.networks.symbolic`)."""
    from vqadiag.models.networks.symbolic import (
        ObjectNet,
        ObjectNetConfig,
        RelationNet,
        RelationNetConfig,
    )

    objects = ObjectNet(ObjectNetConfig(d_in, hidden, tuple(heads)))
    return objects, RelationNet(RelationNetConfig(n_names, n_rel, N_PAIR_FEATURES))


def _fit(
    step_fn,
    n: int,
    epochs: int,
    batch_size: int,
    generator,
    progress: bool,
    description: str,
) -> None:
    """Mini-batch training: ``step_fn(index_tensor) -> (loss, n_correct, n_counted)``."""
    import torch

    with progress_bar(progress, metrics=LOSS_ACC) as bar:
        task = bar.add_task(description, total=epochs, loss=0.0, acc=0.0)
        for _ in range(epochs):
            order = torch.randperm(n, generator=generator)
            total_loss, correct, counted = 0.0, 0, 0
            for start in range(0, n, batch_size):
                idx = order[start : start + batch_size]
                loss, c, k = step_fn(idx)
                total_loss += float(loss) * len(idx)
                correct, counted = correct + c, counted + k
            bar.update(
                task,
                advance=1,
                loss=total_loss / max(n, 1),
                acc=100.0 * correct / max(counted, 1),
            )


class torch_threads:
    """Run small torch work on ``n`` intra-op threads (restored afterwards): the nets are
    tiny, so extra threads only add synchronisation, and oversubscribed cores stall them."""

    def __init__(self, n: int = 1) -> None:
        self.n = n
        self.old = 0

    def __enter__(self) -> None:
        import torch

        self.old = torch.get_num_threads()
        torch.set_num_threads(self.n)

    def __exit__(self, *exc: object) -> None:
        import torch

        torch.set_num_threads(self.old)


def train_symbolic(
    cls: type[M],
    data: GQAData,
    split: str,
    epochs: int | None,
    seed: int,
    progress: bool,
    hidden: int,
    relation_epochs: int | None,
    max_images: int | None,
    max_pairs: int,
    nms_iou: float,
) -> M:
    """Train the object, relation and scene classifiers on ``split`` (the symbolic model's
    module docstring, steps 1-5) and return ``cls(config, tensors, answers)``; the config
    names the model ``cls.name``."""
    import torch

    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    rng = np.random.default_rng(seed)
    questions = data.questions(split)
    scenes = data.scene_graphs(split)
    vocab = learn_vocabulary(questions, scenes)
    samples = _collect(data, scenes, vocab, max_images)
    if not samples["images"]:
        raise DataError(data.gqa_dir, f"no image of split {split!r} has detections")
    names, families, relations = samples["names"], samples["families"], samples["relations"]
    feats = np.concatenate(samples["features"])
    mean = feats.mean(axis=0)
    std = feats.std(axis=0) + 1e-6
    x = np.concatenate([(feats - mean) / std, np.concatenate(samples["geometry"])], axis=1)
    y = np.concatenate(samples["labels"])  # (n, 1 + F): name, then each family
    config: dict[str, Any] = {
        "model": cls.name,
        "split": split,
        "seed": seed,
        "hidden": hidden,
        "feature_dim": int(feats.shape[1]),
        "nms_iou": nms_iou,
        "names": names,
        "families": families,
        "relations": relations,
        "vocabulary": vocab.to_dict(),
        "priors": group_priors(questions),
        "data": data.describe(),
    }
    scene_values = {
        key: sorted({str(s[key]) for s in scenes.values() if key in s})
        for key in sorted(set(vocab.scene_keys.values()))
    }
    config["scene_values"] = {k: v for k, v in scene_values.items() if v}
    heads = [len(names) + 1] + [len(v) + 1 for v in families.values()]
    obj_net, rel_net = build_nets(x.shape[1], hidden, heads, len(names) + 1, len(relations))
    n_obj = int(epochs) if epochs is not None else 30
    n_rel = int(relation_epochs) if relation_epochs is not None else (epochs or 10)

    xt, yt = torch.from_numpy(x.astype(np.float32)), torch.from_numpy(y)
    opt = torch.optim.Adam(obj_net.parameters(), lr=1e-3)
    ce = torch.nn.CrossEntropyLoss(ignore_index=-1)

    def object_step(idx):
        logits = obj_net(xt[idx])
        target = yt[idx]
        loss = sum(ce(lg, target[:, k]) for k, lg in enumerate(logits))
        opt.zero_grad()
        loss.backward()
        opt.step()
        correct = int((logits[0].argmax(1) == target[:, 0]).sum())
        return loss.detach(), correct, len(idx)

    obj_net.train()
    _fit(object_step, len(x), n_obj, 256, generator, progress, "symbolic objects  ")

    pair_geo, pair_a, pair_b, pair_y = _pairs(samples, len(relations), max_pairs, rng)
    tensors = {f"object.{k}": v.detach().numpy() for k, v in obj_net.state_dict().items()}
    if len(pair_geo) and relations:
        pmean, pstd = pair_geo.mean(axis=0), pair_geo.std(axis=0) + 1e-6
        gt = torch.from_numpy(((pair_geo - pmean) / pstd).astype(np.float32))
        at, bt = torch.from_numpy(pair_a), torch.from_numpy(pair_b)
        rt = torch.from_numpy(pair_y.astype(np.float32))
        ropt = torch.optim.Adam(rel_net.parameters(), lr=2e-3)
        bce = torch.nn.BCEWithLogitsLoss()

        def relation_step(idx):
            logits = rel_net(gt[idx], at[idx], bt[idx])
            loss = bce(logits, rt[idx])
            ropt.zero_grad()
            loss.backward()
            ropt.step()
            correct = int(((logits > 0) == (rt[idx] > 0.5)).all(1).sum())
            return loss.detach(), correct, len(idx)

        rel_net.train()
        _fit(relation_step, len(gt), n_rel, 1024, generator, progress, "symbolic relations")
    else:
        pmean = np.zeros(N_PAIR_FEATURES, np.float32)
        pstd = np.ones(N_PAIR_FEATURES, np.float32)
    tensors.update({f"relation.{k}": v.detach().numpy() for k, v in rel_net.state_dict().items()})
    tensors.update(
        feature_mean=mean.astype(np.float32),
        feature_std=std.astype(np.float32),
        pair_mean=pmean.astype(np.float32),
        pair_std=pstd.astype(np.float32),
    )
    for key, values in config["scene_values"].items():
        w, b = _fit_scene(samples, scenes, key, values, mean, std, seed)
        tensors[f"scene.{key}.weight"], tensors[f"scene.{key}.bias"] = w, b
    answers = answer_vocabulary(questions, names, families, vocab, config["scene_values"])
    return cls(config, tensors, answers)


def _collect(
    data: GQAData,
    scenes: Mapping[str, Mapping[str, Any]],
    vocab: ProgramVocabulary,
    max_images: int | None,
) -> dict[str, Any]:
    """Match every image's detections to its scene graph and build labelled samples."""
    names = sorted({o["name"] for s in scenes.values() for o in s["objects"].values()})
    name_index = {n: i for i, n in enumerate(names)}
    scene_fams = set(vocab.scene_keys)
    fam_values: dict[str, set[str]] = defaultdict(set)
    for value, fam in vocab.attribute_family.items():
        if fam not in scene_fams and fam not in ("name", "category"):
            fam_values[fam].add(value)
    families = {f: sorted(v) for f, v in sorted(fam_values.items())}
    value_index = {f: {v: i for i, v in enumerate(vals)} for f, vals in families.items()}
    relations = sorted(
        {
            r["name"]
            for s in scenes.values()
            for o in s["objects"].values()
            for r in o.get("relations", [])
        }
    )
    rel_index = {r: i for i, r in enumerate(relations)}
    out: dict[str, Any] = {
        "names": names,
        "families": families,
        "relations": relations,
        "images": [],
        "features": [],
        "geometry": [],
        "labels": [],
        "boxes": [],
        "sizes": [],
        "match": [],
        "object_rel": [],
    }
    detections = data.detections
    image_ids = [i for i in sorted(scenes) if i in detections]
    if max_images is not None:
        image_ids = image_ids[:max_images]
    n_heads = 1 + len(families)
    for image_id in image_ids:
        scene = scenes[image_id]
        feats, boxes = data.image_objects(image_id)
        valid = (boxes[:, 2] > boxes[:, 0]) & (boxes[:, 3] > boxes[:, 1])
        feats, boxes = feats[valid], boxes[valid]
        if len(boxes) == 0:
            continue
        obj_ids = list(scene["objects"])
        obj_boxes = np.array(
            [object_box_corners(scene["objects"][o]) for o in obj_ids], dtype=np.float64
        ).reshape(-1, 4)
        match = best_matches(boxes, obj_boxes, MATCH_IOU, inclusive=False)
        labels = np.full((len(boxes), n_heads), -1, dtype=np.int64)
        labels[:, 0] = len(names)  # no object
        for i, m in enumerate(match.tolist()):
            if m < 0:
                continue
            obj = scene["objects"][obj_ids[m]]
            labels[i, 0] = name_index[obj["name"]]
            for k, fam in enumerate(families):
                found = [
                    value_index[fam][a] for a in obj.get("attributes", []) if a in value_index[fam]
                ]
                labels[i, k + 1] = found[0] if found else len(families[fam])
        wh = detections.image_size(image_id)
        size = (
            (float(scene.get("width", 0)) or wh[0], float(scene.get("height", 0)) or wh[1])
            if wh is not None
            else (float(scene.get("width", 1)), float(scene.get("height", 1)))
        )
        rel_of: dict[tuple[int, int], list[int]] = defaultdict(list)
        pos = {o: k for k, o in enumerate(obj_ids)}
        for k, o in enumerate(obj_ids):
            for r in scene["objects"][o].get("relations", []):
                if r["object"] in pos:
                    rel_of[(k, pos[r["object"]])].append(rel_index[r["name"]])
        out["images"].append(image_id)
        out["features"].append(feats)
        out["geometry"].append(object_geometry(boxes, np.tile(np.array([size]), (len(boxes), 1))))
        out["labels"].append(labels)
        out["boxes"].append(boxes)
        out["sizes"].append(size)
        out["match"].append(match)
        out["object_rel"].append(rel_of)
    return out


def _pairs(samples: Mapping[str, Any], n_rel: int, max_pairs: int, rng: np.random.Generator):
    """Ordered pairs of matched boxes (of different objects) with their relation labels,
    subsampled uniformly to at most about ``max_pairs``."""
    counts = [int((m >= 0).sum()) for m in samples["match"]]
    total = sum(c * (c - 1) for c in counts)
    rate = min(1.0, max_pairs / max(total, 1))
    geo, sub, obj, lab = [], [], [], []
    for boxes, size, match, labels, rel_of in zip(
        samples["boxes"],
        samples["sizes"],
        samples["match"],
        samples["labels"],
        samples["object_rel"],
        strict=True,
    ):
        det = np.nonzero(match >= 0)[0]
        if len(det) < 2:
            continue
        a, b = np.meshgrid(det, det, indexing="ij")
        a, b = a.ravel(), b.ravel()
        keep = match[a] != match[b]
        if rate < 1.0:
            keep &= rng.random(len(a)) < rate
        a, b = a[keep], b[keep]
        if len(a) == 0:
            continue
        y = np.zeros((len(a), n_rel), dtype=np.uint8)
        for k, (i, j) in enumerate(zip(match[a].tolist(), match[b].tolist(), strict=True)):
            for r in rel_of.get((i, j), ()):
                y[k, r] = 1
        geo.append(pair_geometry(boxes, size, a, b))
        sub.append(labels[a, 0])
        obj.append(labels[b, 0])
        lab.append(y)
    if not geo:
        empty = np.zeros(0, dtype=np.int64)
        return np.zeros((0, N_PAIR_FEATURES), np.float32), empty, empty, np.zeros((0, n_rel))
    return np.concatenate(geo), np.concatenate(sub), np.concatenate(obj), np.concatenate(lab)


def _fit_scene(samples, scenes, key, values, mean, std, seed) -> tuple[np.ndarray, np.ndarray]:
    """A softmax regression from pooled standardised box features to a scene value."""
    import torch

    index = {v: i for i, v in enumerate(values)}
    xs, ys = [], []
    for image_id, feats in zip(samples["images"], samples["features"], strict=True):
        value = scenes[image_id].get(key)
        if value is None or str(value) not in index:
            continue
        xs.append(pool_features((feats - mean) / std))
        ys.append(index[str(value)])
    torch.manual_seed(seed)
    lin = torch.nn.Linear(2 * len(mean), len(values))
    if xs:
        x = torch.from_numpy(np.asarray(xs, np.float32))
        y = torch.from_numpy(np.asarray(ys, np.int64))
        opt = torch.optim.Adam(lin.parameters(), lr=1e-2, weight_decay=1e-4)
        for _ in range(200):
            loss = torch.nn.functional.cross_entropy(lin(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    return lin.weight.detach().numpy().copy(), lin.bias.detach().numpy().copy()
