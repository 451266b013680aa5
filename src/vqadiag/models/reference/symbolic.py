"""The symbolic model: classify detected objects, predict a scene graph, execute the program.

The reference for well-grounded behaviour (like VLR / NSM in the FPVG paper,
``papers/fpvg-faithful-plausible-visual-grounding.txt`` §4): the answer comes
only from the objects the question's program selects, so removing those objects
changes it and removing the others does not.

Training (seconds on the demo world), all from a split's scene graphs, detector
output and questions — nothing specific to the synthetic world:

1. **Matching.** Every detected box is labelled with the scene-graph object of
   largest IoU if that IoU is > 0.5 (docs/protocols.md §5 box geometry), else "no object".
2. **Program vocabulary** (:func:`learn_vocabulary`): attribute families from the
   arguments of ``filter/verify/choose <family>`` and the answers of ``query <family>``;
   categories of a name from ``select`` / ``relate`` arguments that name the
   annotated object by something other than its name (``select: fruit (12)``);
   short answers of ``choose rel`` from the training answers (``left``).
3. **Object classifier**: an MLP over ``[standardised features, log w/W, log h/H,
   cx/W, cy/H]`` with one softmax head for the name (plus "no object") and one per
   attribute family (plus "none"), cross-entropy summed over heads.
4. **Relation classifier**: an MLP over 18 pair-geometry features (gaps, overlaps,
   offsets, log size ratios, IoU …) and learned embeddings of both objects'
   names, one sigmoid per relation (binary cross-entropy), on matched box pairs.
5. **Scene classifier** (e.g. ``location``, read by ``query place``): a linear
   softmax over mean- and max-pooled standardised features of the image's boxes.
6. **Fallback**: the most frequent training answer of the question's local group
   (else its global group, detailed type, the whole split).

Prediction: the visible objects (``ObjectInput.mask``; a masked object does not
exist for the model) are classified; boxes whose "no object" probability is
≥ 0.5 are dropped, duplicates of one name with IoU > ``nms_iou`` are merged
(highest score kept); relations are the pairs whose sigmoid is > 0.5; the
question's ``semantic`` program is executed leniently
(:func:`vqadiag.data.gqa_program.run`). When execution fails the fallback answers.
``probs``: for a final ``query``, the classifier distribution of the queried
objects (score-weighted) mixed 0.9 / 0.1 with uniform; otherwise a one-hot
smoothed with ε = 0.1 (ε = 0.5 for a fallback). ``attention``: uniform over the
objects the program touched (zero elsewhere).
"""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import orjson

from vqadiag.data.geometry import iou_matrix
from vqadiag.data.gqa import object_box_corners
from vqadiag.data.gqa_data import GQAData
from vqadiag.data.gqa_program import ProgramError, ProgramVocabulary, parse_argument, run
from vqadiag.errors import DataError
from vqadiag.models.base import Capabilities, ModelOutput, ObjectInput, PixelInput, QuestionBatch
from vqadiag.models.checkpoint import load_checkpoint, save_checkpoint
from vqadiag.progress import LOSS_ACC, progress_bar

NAME = "symbolic"
NONE = "<none>"
MATCH_IOU = 0.5
N_PAIR_FEATURES = 18
_NOT_FAMILIES = frozenset({"rel", "larger", "smaller", "healthier", "older", "taller", "shorter"})


# --------------------------------------------------------------------------- geometry
def match_boxes(boxes: np.ndarray, object_boxes: np.ndarray, threshold: float = MATCH_IOU):
    """For each detected box, the index of the object box of largest IoU if that IoU
    is > ``threshold``, else −1 (several boxes may match one object)."""
    if len(boxes) == 0 or len(object_boxes) == 0:
        return np.full(len(boxes), -1, dtype=np.int64)
    iou = iou_matrix(boxes, object_boxes)
    best = iou.argmax(axis=1)
    return np.where(iou[np.arange(len(boxes)), best] > threshold, best, -1)


def object_geometry(boxes: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Per box ``[log(w/W), log(h/H), cx/W, cy/H]`` (boxes (n, 4) corners, sizes (n, 2) W H)."""
    b = np.asarray(boxes, np.float64)
    wh = np.maximum(np.asarray(sizes, np.float64), 1.0)
    w = np.maximum(b[:, 2] - b[:, 0], 1e-3)
    h = np.maximum(b[:, 3] - b[:, 1], 1e-3)
    return np.stack(
        [
            np.log(w / wh[:, 0]),
            np.log(h / wh[:, 1]),
            (b[:, 0] + b[:, 2]) / 2 / wh[:, 0],
            (b[:, 1] + b[:, 3]) / 2 / wh[:, 1],
        ],
        axis=1,
    ).astype(np.float32)


def pair_geometry(boxes: np.ndarray, size: Sequence[float], a: np.ndarray, b: np.ndarray):
    """The 18 geometry features of ordered pairs (subject ``a``, object ``b``) of one image.

    With W, H the image size: gaps ``(x1_b − x2_a)/W``, ``(x1_a − x2_b)/W``; overlaps
    ``(min y2 − max y1)/H``, ``(min x2 − max x1)/W``; intersection / smaller area; IoU;
    bottom offset ``(y2_a − y2_b)/H``; centre offsets /W, /H; centre distance / diagonal;
    log area ratio; ``a``'s bottom and centre relative to ``b`` (``(y2_a − y1_b)/h_b``,
    ``(cx_a − x1_b)/w_b``, ``(x2_b − cx_a)/w_b``); log sizes of both boxes — clipped to ±5.
    """
    bx = np.asarray(boxes, np.float64)
    big_w, big_h = max(float(size[0]), 1.0), max(float(size[1]), 1.0)
    x1, y1, x2, y2 = (bx[:, k] for k in range(4))
    w = np.maximum(x2 - x1, 1e-3)
    h = np.maximum(y2 - y1, 1e-3)
    area = w * h
    cx, cy = (x1 + x2) / 2, (y1 + y2) / 2
    vo = np.minimum(y2[a], y2[b]) - np.maximum(y1[a], y1[b])
    ho = np.minimum(x2[a], x2[b]) - np.maximum(x1[a], x1[b])
    inter = np.clip(vo, 0, None) * np.clip(ho, 0, None)
    feats = np.stack(
        [
            (x1[b] - x2[a]) / big_w,
            (x1[a] - x2[b]) / big_w,
            vo / big_h,
            ho / big_w,
            inter / np.minimum(area[a], area[b]),
            inter / (area[a] + area[b] - inter),
            (y2[a] - y2[b]) / big_h,
            (cx[a] - cx[b]) / big_w,
            (cy[a] - cy[b]) / big_h,
            np.hypot(cx[a] - cx[b], cy[a] - cy[b]) / np.hypot(big_w, big_h),
            np.log(area[a] / area[b]),
            (y2[a] - y1[b]) / h[b],
            (cx[a] - x1[b]) / w[b],
            (x2[b] - cx[a]) / w[b],
            np.log(w[a] / big_w),
            np.log(h[a] / big_h),
            np.log(w[b] / big_w),
            np.log(h[b] / big_h),
        ],
        axis=1,
    )
    return np.clip(feats, -5, 5).astype(np.float32)


# --------------------------------------------------------------------------- vocabulary
def learn_vocabulary(
    questions: Mapping[str, Mapping[str, Any]], scenes: Mapping[str, Mapping[str, Any]]
) -> ProgramVocabulary:
    """Learn a :class:`ProgramVocabulary` from training programs and scene graphs.

    * value → family: arguments of ``filter|verify|choose <family>`` (``a|b`` split,
      ``not(v)`` unwrapped) and answers of questions ending in ``query <family>``;
      a value seen under several families keeps the most frequent one;
    * name → categories: a ``select`` / ``relate`` / ``verify rel`` / ``choose rel``
      argument naming annotated objects (ids in parentheses) by a word other than their
      scene-graph name; categories ordered by frequency;
    * relation → short answer: ``choose rel`` questions whose answer is not one of the
      relations offered but a word of one (``left`` for ``to the left of``);
    * ``place`` → ``location`` when the scene graphs carry a location.
    """
    fam_votes: dict[str, Counter[str]] = defaultdict(Counter)
    cat_votes: dict[str, Counter[str]] = defaultdict(Counter)
    rel_answer: dict[str, str] = {}
    scene_keys = {"place": "location"}
    for record in questions.values():
        program = record.get("semantic") or []
        scene = scenes.get(str(record.get("imageId")), {})
        objects = scene.get("objects", {})
        for step in program:
            op = str(step.get("operation", ""))
            arg = str(step.get("argument", "") or "")
            head, _, family = op.partition(" ")
            if head in ("filter", "verify", "choose") and family and family not in _NOT_FAMILIES:
                if family in scene_keys:
                    continue
                for value in arg.split("|"):
                    value = value.strip()
                    if value.startswith("not(") and value.endswith(")"):
                        value = value[4:-1]
                    if value:
                        fam_votes[value][family] += 1
            if op in ("select", "relate", "verify rel", "choose rel"):
                text, ids = parse_argument(arg)
                name = text.split(",")[0] if op != "select" else text
                for oid in ids:
                    obj = objects.get(oid)
                    if obj is not None and name not in ("_", "scene") and obj["name"] != name:
                        cat_votes[obj["name"]][name] += 1
            if op == "choose rel":
                answer = str(record.get("answer", ""))
                rels = parse_argument(arg)[0].split(",")[1].split("|") if "," in arg else []
                if answer and answer not in rels:
                    hits = [r for r in rels if answer in r.split()]
                    if len(hits) == 1:
                        rel_answer[hits[0]] = answer
        if program:
            last = program[-1]
            op, arg = str(last.get("operation", "")), str(last.get("argument", ""))
            if op == "query" and arg not in ("name", "category") and arg not in scene_keys:
                fam_votes[str(record.get("answer", ""))][arg] += 1
    family = {v: max(c, key=lambda f: (c[f], f)) for v, c in fam_votes.items() if v}
    categories = {
        n: tuple(sorted(c, key=lambda k: (-c[k], k))) for n, c in sorted(cat_votes.items())
    }
    return ProgramVocabulary(dict(sorted(family.items())), categories, rel_answer, scene_keys)


def _group_priors(questions: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    counts: dict[str, dict[str, Counter[str]]] = {
        "local": defaultdict(Counter),
        "global": defaultdict(Counter),
        "detailed": defaultdict(Counter),
    }
    overall: Counter[str] = Counter()
    for record in questions.values():
        answer = str(record.get("answer", ""))
        overall[answer] += 1
        for key, group in _group_keys(record):
            counts[key][group][answer] += 1

    def top(c: Counter[str]) -> str:
        return max(c, key=lambda a: (c[a], a))

    priors: dict[str, Any] = {k: {g: top(c) for g, c in v.items()} for k, v in counts.items()}
    priors["overall"] = top(overall) if overall else "yes"
    return priors


def _group_keys(record: Mapping[str, Any]) -> list[tuple[str, str]]:
    groups = record.get("groups") or {}
    types = record.get("types") or {}
    keys = [("local", groups.get("local")), ("global", groups.get("global"))]
    keys.append(("detailed", types.get("detailed")))
    return [(k, str(g)) for k, g in keys if g]


# --------------------------------------------------------------------------- torch parts
def _nets(d_in: int, hidden: int, heads: list[int], n_names: int, n_rel: int) -> tuple[Any, Any]:
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


class _threads:
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


# --------------------------------------------------------------------------- the model
class SymbolicModel:
    """Per-object classifiers + predicted scene graph + GQA program execution."""

    name: ClassVar[str] = NAME
    capabilities: ClassVar[Capabilities] = Capabilities(
        visual="objects", object_masking=True, attention=True, gradients=False
    )

    def __init__(
        self, config: Mapping[str, Any], tensors: Mapping[str, np.ndarray], answers: list[str]
    ) -> None:
        import torch

        self.config = dict(config)
        self.tensors = {k: np.asarray(v) for k, v in tensors.items()}
        self.answer_vocab = list(answers)
        self._answer_index = {a: i for i, a in enumerate(self.answer_vocab)}
        self.vocabulary = ProgramVocabulary.from_dict(config["vocabulary"])
        self.names: list[str] = list(config["names"])
        self.families: dict[str, list[str]] = {k: list(v) for k, v in config["families"].items()}
        self.relations: list[str] = list(config["relations"])
        self.scene_values: dict[str, list[str]] = {
            k: list(v) for k, v in config["scene_values"].items()
        }
        self.priors: dict[str, Any] = config["priors"]
        self.nms_iou = float(config.get("nms_iou", 0.5))
        heads = [len(self.names) + 1] + [len(v) + 1 for v in self.families.values()]
        d_in = int(config["feature_dim"]) + 4
        self._object_net, self._relation_net = _nets(
            d_in, int(config["hidden"]), heads, len(self.names) + 1, len(self.relations)
        )
        for prefix, net in (("object.", self._object_net), ("relation.", self._relation_net)):
            state = {
                k[len(prefix) :]: torch.from_numpy(v.copy())
                for k, v in self.tensors.items()
                if k.startswith(prefix)
            }
            if state:
                net.load_state_dict(state)
            net.eval()

    # -- training ---------------------------------------------------------------------
    @classmethod
    def train(
        cls,
        data: GQAData,
        *,
        split: str = "train",
        epochs: int | None = None,
        seed: int = 0,
        progress: bool = True,
        hidden: int = 256,
        relation_epochs: int | None = None,
        max_images: int | None = None,
        max_pairs: int = 300_000,
        nms_iou: float = 0.5,
        **options: Any,
    ) -> SymbolicModel:
        """Train the object, relation and scene classifiers on ``split`` (module docstring).

        ``epochs`` sets the object classifier's epochs (default 30) and, unless
        ``relation_epochs`` is given, the relation classifier's (default 10).
        """

        if options:
            raise ValueError(f"unknown options for the symbolic model: {sorted(options)}")
        with _threads(1):
            return cls._train(
                data, split, epochs, seed, progress, hidden, relation_epochs, max_images,
                max_pairs, nms_iou,
            )  # fmt: skip

    @classmethod
    def _train(
        cls, data, split, epochs, seed, progress, hidden, relation_epochs, max_images, max_pairs,
        nms_iou,
    ) -> SymbolicModel:  # fmt: skip
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
            "model": NAME,
            "split": split,
            "seed": seed,
            "hidden": hidden,
            "feature_dim": int(feats.shape[1]),
            "nms_iou": nms_iou,
            "names": names,
            "families": families,
            "relations": relations,
            "vocabulary": vocab.to_dict(),
            "priors": _group_priors(questions),
            "data": data.describe(),
        }
        scene_values = {
            key: sorted({str(s[key]) for s in scenes.values() if key in s})
            for key in sorted(set(vocab.scene_keys.values()))
        }
        config["scene_values"] = {k: v for k, v in scene_values.items() if v}
        heads = [len(names) + 1] + [len(v) + 1 for v in families.values()]
        obj_net, rel_net = _nets(x.shape[1], hidden, heads, len(names) + 1, len(relations))
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
        tensors.update(
            {f"relation.{k}": v.detach().numpy() for k, v in rel_net.state_dict().items()}
        )
        tensors.update(
            feature_mean=mean.astype(np.float32),
            feature_std=std.astype(np.float32),
            pair_mean=pmean.astype(np.float32),
            pair_std=pstd.astype(np.float32),
        )
        for key, values in config["scene_values"].items():
            w, b = _fit_scene(samples, scenes, key, values, mean, std, seed)
            tensors[f"scene.{key}.weight"], tensors[f"scene.{key}.bias"] = w, b
        answers = _answer_vocabulary(questions, names, families, vocab, config["scene_values"])
        return cls(config, tensors, answers)

    # -- checkpoints ------------------------------------------------------------------
    def save(self, run_dir: Path) -> None:
        """Write config, weights and answers with :func:`save_checkpoint`."""
        save_checkpoint(run_dir, self.config, self.tensors, self.answer_vocab)

    @classmethod
    def load(cls, run_dir: Path) -> SymbolicModel:
        """Rebuild a model saved by :meth:`save` (no unpickling)."""
        config, tensors, answers = load_checkpoint(run_dir)
        if config.get("model") != NAME:
            raise DataError(Path(run_dir) / "config.json", f"not a {NAME} model run")
        for key in ("vocabulary", "names", "families", "relations", "scene_values", "priors"):
            if key not in config:
                raise DataError(Path(run_dir) / "config.json", f"missing field {key!r}")
        return cls(config, tensors, answers)

    def fingerprint(self) -> str:
        """SHA-256 (16 hex) over the config (less the writer's version), the answer
        vocabulary and every tensor."""
        config = {k: v for k, v in self.config.items() if k != "vqadiag_version"}
        digest = hashlib.sha256(orjson.dumps(config, option=orjson.OPT_SORT_KEYS))
        digest.update(orjson.dumps(self.answer_vocab))
        for key in sorted(self.tensors):
            digest.update(key.encode())
            digest.update(np.ascontiguousarray(self.tensors[key]).tobytes())
        return digest.hexdigest()[:16]

    # -- prediction -------------------------------------------------------------------
    def object_probabilities(
        self, features: np.ndarray, boxes: np.ndarray, sizes: np.ndarray
    ) -> list[np.ndarray]:
        """Softmax outputs of every head for objects (n, D): the name head (last
        column = no object), then one per family (last column = none)."""
        import torch

        mean, std = self.tensors["feature_mean"], self.tensors["feature_std"]
        x = np.concatenate([(features - mean) / std, object_geometry(boxes, sizes)], axis=1)
        with torch.no_grad():
            logits = self._object_net(torch.from_numpy(x.astype(np.float32)))
        return [torch.softmax(lg, dim=1).numpy().astype(np.float64) for lg in logits]

    def predict_scene(
        self, features: np.ndarray, boxes: np.ndarray, size: Sequence[float]
    ) -> dict[str, Any]:
        """The predicted scene graph of one image's *visible* objects (n, D) / (n, 4).

        Object ids are the positions ``"0" … "n-1"`` of the given rows.
        """
        n = len(boxes)
        sizes = np.tile(np.asarray(size, np.float32).reshape(1, 2), (max(n, 1), 1))[:n]
        scene: dict[str, Any] = {"width": float(size[0]), "height": float(size[1])}
        scene.update(self._scene_values(features, scene))
        if n == 0:
            scene["objects"] = {}
            return scene
        heads = self.object_probabilities(features, boxes, sizes)
        name_p = heads[0]
        score = 1.0 - name_p[:, -1]
        keep = np.nonzero(score > 0.5)[0]
        name_idx = name_p[:, :-1].argmax(axis=1)
        keep = keep[np.argsort(-score[keep], kind="stable")]
        kept: list[int] = []
        if len(keep):
            iou = iou_matrix(boxes[keep], boxes[keep])
            for pos, i in enumerate(keep):
                dup = any(
                    name_idx[j] == name_idx[i] and iou[pos, q] > self.nms_iou
                    for q, j in enumerate(keep[:pos])
                    if j in kept
                )
                if not dup:
                    kept.append(int(i))
        kept.sort()
        objects: dict[str, Any] = {}
        fam_names = list(self.families)
        for i in kept:
            b = boxes[i]
            attrs, probs = [], {"name": _top(name_p[i, :-1], self.names)}
            for k, fam in enumerate(fam_names):
                p = heads[k + 1][i]
                j = int(p.argmax())
                if j < len(self.families[fam]):
                    attrs.append(self.families[fam][j])
                probs[fam] = _top(p[:-1], self.families[fam])
            objects[str(i)] = {
                "name": self.names[int(name_idx[i])],
                "x": float(b[0]),
                "y": float(b[1]),
                "w": float(b[2] - b[0]),
                "h": float(b[3] - b[1]),
                "attributes": attrs,
                "relations": [],
                "score": float(score[i]),
                "probs": probs,
            }
        self._add_relations(objects, kept, boxes, size, name_idx)
        scene["objects"] = objects
        return scene

    def _scene_values(self, features: np.ndarray, scene: Mapping[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {"probs": {}}
        if not self.scene_values:
            return out
        pooled = _pool((features - self.tensors["feature_mean"]) / self.tensors["feature_std"])
        for key, values in self.scene_values.items():
            logits = (
                pooled @ self.tensors[f"scene.{key}.weight"].T + self.tensors[f"scene.{key}.bias"]
            )
            p = np.exp(logits - logits.max())
            p /= p.sum()
            out[key] = values[int(p.argmax())]
            out["probs"][key] = {v: float(q) for v, q in zip(values, p, strict=True)}
        return out

    def _add_relations(self, objects, kept, boxes, size, name_idx) -> None:
        import torch

        if len(kept) < 2 or not self.relations:
            return
        idx = np.asarray(kept)
        a, b = np.meshgrid(np.arange(len(idx)), np.arange(len(idx)), indexing="ij")
        off = a != b
        a, b = idx[a[off]], idx[b[off]]
        geo = pair_geometry(boxes, size, a, b)
        geo = (geo - self.tensors["pair_mean"]) / self.tensors["pair_std"]
        with torch.no_grad():
            logits = self._relation_net(
                torch.from_numpy(geo.astype(np.float32)),
                torch.from_numpy(name_idx[a].astype(np.int64)),
                torch.from_numpy(name_idx[b].astype(np.int64)),
            ).numpy()
        hit_pair, hit_rel = np.nonzero(logits > 0)
        for p, r in zip(hit_pair.tolist(), hit_rel.tolist(), strict=True):
            objects[str(a[p])]["relations"].append({"name": self.relations[r], "object": str(b[p])})

    def fallback_answer(self, record: Mapping[str, Any]) -> str:
        """The most frequent training answer of the question's local group, else its
        global group, its detailed type, else of the whole training split."""
        for key, group in _group_keys(record):
            answer = self.priors.get(key, {}).get(group)
            if answer is not None:
                return answer
        return str(self.priors.get("overall", "yes"))

    def predict(self, batch: QuestionBatch, visual: ObjectInput | PixelInput | None) -> ModelOutput:
        """Answer each question by executing its program over the predicted scene graph
        of its visible objects (module docstring)."""
        if not isinstance(visual, ObjectInput):
            raise TypeError("the symbolic model needs ObjectInput (detector objects)")
        with _threads(1):
            return self._predict(batch, visual)

    def _predict(self, batch: QuestionBatch, visual: ObjectInput) -> ModelOutput:
        size_b, size_n = visual.mask.shape
        n_ans = len(self.answer_vocab)
        probs = np.zeros((size_b, n_ans), dtype=np.float32)
        attention = np.zeros((size_b, size_n), dtype=np.float32)
        answers: list[str] = []
        cache: dict[tuple[str, bytes, bytes], tuple[dict[str, Any], np.ndarray]] = {}
        for row in range(size_b):
            cols = np.nonzero(visual.mask[row])[0]
            key = (
                str(batch.image_ids[row]),
                visual.mask[row].tobytes(),
                visual.boxes[row].tobytes(),
            )
            if key not in cache:
                cache[key] = (
                    self.predict_scene(
                        visual.features[row, cols], visual.boxes[row, cols], visual.image_sizes[row]
                    ),
                    cols,
                )
            scene, cols = cache[key]
            record = batch.record(row)
            answer, dist, touched = self._answer(record, scene)
            answers.append(answer)
            probs[row] = dist
            if touched:
                attention[row, cols[touched]] = 1.0 / len(touched)
        return ModelOutput(answers, probs, attention)

    def _answer(
        self, record: Mapping[str, Any], scene: Mapping[str, Any]
    ) -> tuple[str, np.ndarray, list[int]]:
        n_ans = len(self.answer_vocab)
        program = record.get("semantic")
        try:
            if not program:
                raise ProgramError("no program")
            result = run(program, scene, self.vocabulary, strict=False)
        except ProgramError:
            answer = self.fallback_answer(record)
            return answer, _smoothed(self._answer_index.get(answer), n_ans, 0.5), []
        touched = [int(o) for o in result.touched]
        answer = result.answer
        dist = _smoothed(self._answer_index.get(answer), n_ans, 0.1)
        what = str(program[-1].get("argument", ""))
        queried = what in self.families or what == "name"
        if result.final_operation == "query" and result.final_objects and queried:
            dist = self._query_distribution(scene, result.final_objects, what, answer)
        return answer, dist, touched

    def _query_distribution(self, scene, ids: Sequence[str], what: str, answer: str) -> np.ndarray:
        n_ans = len(self.answer_vocab)
        mass = np.zeros(n_ans, dtype=np.float64)
        for oid in ids:
            obj = scene["objects"][oid]
            for value, p in obj["probs"].get(what, {}).items():
                j = self._answer_index.get(value)
                if j is not None:
                    mass[j] += obj["score"] * p
        j = self._answer_index.get(answer)
        if mass.sum() <= 0 or j is None or mass.argmax() != j:
            return _smoothed(j, n_ans, 0.1)
        return (0.9 * mass / mass.sum() + 0.1 / n_ans).astype(np.float32)


# --------------------------------------------------------------------------- helpers
def _smoothed(index: int | None, n: int, eps: float) -> np.ndarray:
    """One-hot at ``index`` smoothed: ``(1 − ε)·onehot + ε/A`` (uniform if ``index`` is None)."""
    out = np.full(n, 1.0 / n if index is None else eps / n, dtype=np.float32)
    if index is not None:
        out[index] += 1.0 - eps
    return out


def _top(p: np.ndarray, labels: Sequence[str], k: int = 5) -> dict[str, float]:
    order = np.argsort(-p, kind="stable")[:k]
    return {labels[int(j)]: float(p[j]) for j in order}


def _pool(x: np.ndarray) -> np.ndarray:
    if len(x) == 0:
        return np.zeros(2 * x.shape[1], dtype=np.float64)
    return np.concatenate([x.mean(axis=0), x.max(axis=0)])


def _answer_vocabulary(questions, names, families, vocab, scene_values) -> list[str]:
    counts = Counter(str(r.get("answer", "")) for r in questions.values())
    extra: set[str] = {"yes", "no", *names, *vocab.relation_answer.values()}
    for values in families.values():
        extra.update(values)
    for cats in vocab.categories.values():
        extra.update(cats)
    for values in scene_values.values():
        extra.update(values)
    ordered = sorted(counts, key=lambda a: (-counts[a], a))
    return ordered + sorted(extra - set(ordered))


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
        match = match_boxes(boxes, obj_boxes)
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
        xs.append(_pool((feats - mean) / std))
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


def grounded_question_ids(data: GQAData, split: str, questions: Iterable[str] | None = None):
    """Question ids whose annotated objects (``annotations.question/answer/fullAnswer``)
    all have a detected box with IoU > 0.5 (questions annotating no object included)."""
    records = data.questions(split)
    scenes = data.scene_graphs(split)
    detected: dict[str, set[str]] = {}
    out = []
    for qid in questions if questions is not None else records:
        record = records[qid]
        image_id = str(record["imageId"])
        if image_id not in detected:
            scene = scenes.get(image_id, {"objects": {}})
            obj_ids = list(scene["objects"])
            found: set[str] = set()
            if obj_ids and image_id in data.detections:
                _, boxes = data.image_objects(image_id)
                corners = np.array([object_box_corners(scene["objects"][o]) for o in obj_ids])
                iou = iou_matrix(boxes, corners)
                if len(boxes):
                    found = {obj_ids[k] for k in np.nonzero(iou.max(axis=0) > MATCH_IOU)[0]}
            detected[image_id] = found
        annotated = {
            str(v)
            for part in (record.get("annotations") or {}).values()
            for v in (part or {}).values()
        }
        if annotated <= detected[image_id]:
            out.append(qid)
    return out
