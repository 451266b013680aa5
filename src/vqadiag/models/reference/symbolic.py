"""The symbolic model: classify detected objects, predict a scene graph, execute the program.

The reference for well-grounded behaviour (like VLR / NSM in the FPVG paper,
``papers/fpvg-faithful-plausible-visual-grounding.txt`` §4): the answer comes
only from the objects the question's program selects, so removing those objects
changes it and removing the others does not.

Training (seconds on the demo world), all from a split's scene graphs, detector
output and questions — nothing specific to the synthetic world:

1. **Matching.** Every detected box is labelled with the scene-graph object of
   largest IoU if that IoU is > 0.5 (docs/protocols.md §5 box geometry), else "no object".
2. **Program vocabulary**
   (:func:`~vqadiag.models.reference.symbolic_vocabulary.learn_vocabulary`): attribute
   families from the arguments of ``filter/verify/choose <family>`` and the answers of
   ``query <family>``; categories of a name from ``select`` / ``relate`` arguments that name the
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
   (else its global group, detailed type, program without its object ids, the whole
   split).

Prediction: the visible objects (``ObjectInput.mask``; a masked object does not
exist for the model) are classified; boxes whose "no object" probability is
≥ 0.5 are dropped, duplicates of one name with IoU > ``nms_iou`` are merged
(highest score kept); relations are the pairs whose sigmoid is > 0.5; the
question's ``semantic`` program is executed leniently
(:func:`vqadiag.data.formats.gqa_program.run`): GQA's, or the one a synthetic world
writes in its VQA v2 question records and VQA-introspect sub-questions (docs/synth.md,
"Programs"). Without a program, or when execution fails, the fallback answers.
``probs``: for a final ``query``, the classifier distribution of the queried
objects (score-weighted) mixed 0.9 / 0.1 with uniform; otherwise a one-hot
smoothed with ε = 0.1 (ε = 0.5 for a fallback). ``attention``: uniform over the
objects the program touched (zero elsewhere).

Where the parts live: the features in :mod:`vqadiag.models.reference.symbolic_features`,
the program vocabulary, group priors and answer vocabulary in
:mod:`vqadiag.models.reference.symbolic_vocabulary`, training in
:mod:`vqadiag.models.reference.symbolic_training`, the two networks in
:mod:`vqadiag.models.networks.symbolic`; this module holds :class:`SymbolicModel`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import orjson

from vqadiag.data.formats.gqa_program import ProgramError, ProgramVocabulary, run
from vqadiag.data.model_inputs.geometry import pairwise_iou
from vqadiag.data.model_inputs.gqa_data import GQAData
from vqadiag.errors import DataError
from vqadiag.models.base import Capabilities, ModelOutput, ObjectInput, PixelInput, QuestionBatch
from vqadiag.models.checkpoint import load_checkpoint, save_checkpoint
from vqadiag.models.option_checks import POSITIVE, Number, check_numbers
from vqadiag.models.reference.symbolic_features import object_geometry, pair_geometry, pool_features
from vqadiag.models.reference.symbolic_training import build_nets, torch_threads, train_symbolic
from vqadiag.models.reference.symbolic_vocabulary import group_keys

NAME = "symbolic"
NONE = "<none>"


#: the values each option of the symbolic model takes (``hidden=0`` trained a model that
#: answers from the prior alone; an overlap of 2 or NaN merges no duplicate)
SYMBOLIC_NUMBERS = {
    "epochs": Number(none=True),
    "hidden": POSITIVE,
    "relation_epochs": Number(none=True),
    "max_images": Number(none=True),
    "max_pairs": POSITIVE,
    "nms_iou": Number(whole=False, low=0, high=1),
}


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
        self._object_net, self._relation_net = build_nets(
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
        check_numbers(
            {"epochs": epochs, "hidden": hidden, "relation_epochs": relation_epochs,
             "max_images": max_images, "max_pairs": max_pairs, "nms_iou": nms_iou},
            SYMBOLIC_NUMBERS,
        )  # fmt: skip
        with torch_threads(1):
            return train_symbolic(
                cls, data, split, epochs, seed, progress, hidden, relation_epochs, max_images,
                max_pairs, nms_iou,
            )  # fmt: skip

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
            iou = pairwise_iou(boxes[keep], boxes[keep], integer=False)
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
        pooled = pool_features(
            (features - self.tensors["feature_mean"]) / self.tensors["feature_std"]
        )
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
        global group, its detailed type, its program without object ids
        (:func:`~vqadiag.models.reference.symbolic_vocabulary.program_key`), else of the
        whole training split."""
        for key, group in group_keys(record):
            answer = self.priors.get(key, {}).get(group)
            if answer is not None:
                return answer
        return str(self.priors.get("overall", "yes"))

    def predict(self, batch: QuestionBatch, visual: ObjectInput | PixelInput | None) -> ModelOutput:
        """Answer each question by executing its program over the predicted scene graph
        of its visible objects (module docstring)."""
        if not isinstance(visual, ObjectInput):
            raise TypeError("the symbolic model needs ObjectInput (detector objects)")
        with torch_threads(1):
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


def _smoothed(index: int | None, n: int, eps: float) -> np.ndarray:
    """One-hot at ``index`` smoothed: ``(1 − ε)·onehot + ε/A`` (uniform if ``index`` is None)."""
    out = np.full(n, 1.0 / n if index is None else eps / n, dtype=np.float32)
    if index is not None:
        out[index] += 1.0 - eps
    return out


def _top(p: np.ndarray, labels: Sequence[str], k: int = 5) -> dict[str, float]:
    order = np.argsort(-p, kind="stable")[:k]
    return {labels[int(j)]: float(p[j]) for j in order}
