"""The shared training loop and checkpoint plumbing of the neural built-in models.

:class:`TorchModel` is the base of
:class:`~vqadiag.models.reference.question_only.QuestionOnlyModel` and
:class:`~vqadiag.models.reference.updn.UpDnModel`: it owns the vocabularies, turns a
:class:`QuestionBatch` / :class:`ObjectInput` into tensors, predicts, saves and loads
(safetensors + JSON, never pickle) and fingerprints. :func:`fit` is the one training
loop: AdamW, cross-entropy against the GQA ``answer`` (answers outside the answer
vocabulary are ignored) — or the loss a model's :meth:`TorchModel.training_objective`
returns (UpDn's remedy options, docs/remedies.md) — shuffled batches with their
objects from :class:`GQAData`, a seed for initialisation, shuffling and dropout, a
step size that is constant or follows a cosine (:func:`lr_scheduler`, option
``lr_schedule`` where a model offers it), rich progress (loss, accuracy, ETA) and
validation accuracy after every epoch when a validation split exists.

The same seed reproduces the same weights: ``torch.manual_seed(seed)``, a numpy
generator seeded with ``seed`` for the order, deterministic algorithms
(``torch.use_deterministic_algorithms``) and a fixed intra-op thread count (option
``threads``, default 1: the networks are small, so one thread is as fast as two on
an idle machine and far faster on a busy one, and the summation order never
depends on the machine) while training.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import numpy as np
import orjson

from vqadiag.data.model_inputs.gqa_data import GQAData
from vqadiag.errors import DataError, first_line
from vqadiag.models.base import Capabilities, ModelOutput, ObjectInput, QuestionBatch
from vqadiag.models.checkpoint import WEIGHTS, load_checkpoint, save_checkpoint
from vqadiag.models.option_checks import TRAINING_NUMBERS, check_numbers
from vqadiag.models.run_configs import upgrade_options
from vqadiag.models.vocab import AnswerVocab, WordVocab, vocab_config, words_from_config
from vqadiag.progress import LOSS_ACC, progress_bar

if TYPE_CHECKING:
    import torch

    from vqadiag.data.model_inputs.vqa2_data import VQA2Data

SPATIAL_DIM = 5


def spatial_features(boxes: np.ndarray, image_sizes: np.ndarray) -> np.ndarray:
    """Boxes normalised by image size: ``x1/W, y1/H, x2/W, y2/H, (x2−x1)(y2−y1)/(W·H)``
    → (B, N, 5) float32 (the spatial features of UpDn, Anderson et al. 2018 §3.1)."""
    wh = np.maximum(np.asarray(image_sizes, np.float32), 1.0)[:, None, :]  # (B, 1, 2)
    b = np.asarray(boxes, np.float32)
    x1y1 = b[..., :2] / wh
    x2y2 = b[..., 2:] / wh
    area = np.prod(np.clip(x2y2 - x1y1, 0.0, None), axis=-1, keepdims=True)
    return np.concatenate([x1y1, x2y2, area], axis=-1).astype(np.float32)


#: Options every neural reference model accepts (``-o KEY=VALUE``), with their defaults.
TRAINING_DEFAULTS: dict[str, Any] = {
    "epochs": 6,
    "batch_size": 64,
    "lr": 2e-3,
    "weight_decay": 1e-4,
    "grad_clip": 5.0,
    "embedding_dim": 128,
    "hidden_dim": 256,
    "dropout": 0.2,
    "min_word_count": 1,
    "top_answers": None,
    "max_question_tokens": 30,
    "max_objects": 100,
    "threads": 1,
}


class TrainingObjective(Protocol):
    """One training step's loss: ``(batch, visual, target, feats=None) → (loss, logits)``;
    ``target`` (B,) holds answer indices, ``logits`` (B, A) are the test-time logits (what
    the accuracy bar counts); ``feats`` replaces the object-feature tensor (gradients)."""

    def __call__(
        self,
        batch: QuestionBatch,
        visual: ObjectInput | None,
        target: torch.Tensor,
        feats: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]: ...


class CrossEntropyObjective:
    """Mean cross-entropy ``−(1/B) Σ_b log softmax(z_b)[y_b]`` of the model's logits."""

    def __init__(self, model: TorchModel) -> None:
        import torch

        self.model = model
        self.loss_fn = torch.nn.CrossEntropyLoss()

    def __call__(
        self,
        batch: QuestionBatch,
        visual: ObjectInput | None,
        target: torch.Tensor,
        feats: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        logits, _ = self.model.forward(batch, visual, feats=feats)
        return self.loss_fn(logits, target), logits


@contextmanager
def torch_training_settings(threads: int | None) -> Iterator[None]:
    """Deterministic algorithms and ``threads`` intra-op threads inside the block; the
    caller's settings are restored afterwards."""
    import torch

    deterministic = torch.are_deterministic_algorithms_enabled()
    previous = torch.get_num_threads()
    torch.use_deterministic_algorithms(True)
    if threads:
        torch.set_num_threads(int(threads))
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(deterministic)
        torch.set_num_threads(previous)


class TorchModel:
    """Base of the neural models: vocabularies, tensors, predict, save / load, fingerprint."""

    name: ClassVar[str] = ""
    capabilities: ClassVar[Capabilities] = Capabilities()
    uses_objects: ClassVar[bool] = False
    #: whether ``max_objects`` caps the boxes a model that reads no objects crops
    reads_boxes: ClassVar[bool] = False
    defaults: ClassVar[dict[str, Any]] = TRAINING_DEFAULTS
    #: Options left out of :meth:`architecture` (config and fingerprint) while they have
    #: these values (options added after runs were saved, at their "off" value).
    omitted_options: ClassVar[dict[str, Any]] = {}

    def __init__(
        self,
        net: torch.nn.Module,
        words: WordVocab,
        answers: AnswerVocab,
        options: Mapping[str, Any],
        feature_dim: int = 0,
        training_log: Mapping[str, Any] | None = None,
    ) -> None:
        self.net = net
        self.words = words
        self.answers = answers
        self.answer_vocab: list[str] = answers.answers
        self.options = dict(options)
        self.feature_dim = feature_dim
        self.training_log: dict[str, Any] = dict(training_log or {})
        self._fingerprint: str | None = None

    # -- construction -------------------------------------------------------------------
    @classmethod
    def build_net(
        cls, n_words: int, n_answers: int, feature_dim: int, options: Mapping[str, Any]
    ) -> torch.nn.Module:
        """The network of this model (implemented by each subclass)."""
        raise NotImplementedError

    @classmethod
    def resolve_options(cls, options: Mapping[str, Any]) -> dict[str, Any]:
        """Defaults overridden by ``options``; unknown option names, and number options
        outside their range (:data:`~vqadiag.models.option_checks.TRAINING_NUMBERS`),
        raise ``ValueError``."""
        unknown = sorted(set(options) - set(cls.defaults))
        if unknown:
            known = ", ".join(sorted(cls.defaults))
            raise ValueError(f"unknown option(s) {unknown} for model {cls.name!r} (known: {known})")
        out = {**cls.defaults, **options}
        check_numbers(out, TRAINING_NUMBERS)
        return out

    @classmethod
    def train(
        cls,
        data: GQAData,
        *,
        split: str = "train",
        epochs: int | None = None,
        seed: int = 0,
        progress: bool = True,
        **options: Any,
    ) -> TorchModel:
        """Train on ``split`` of ``data`` with :func:`fit` (options: see ``defaults``;
        ``epochs`` is checked with them, :meth:`training_options`)."""
        opts = cls.training_options(options, epochs)
        return fit(cls, data, split=split, seed=seed, progress=progress, options=opts)

    @classmethod
    def training_options(cls, options: Mapping[str, Any], epochs: int | None) -> dict[str, Any]:
        """:meth:`resolve_options` of ``options`` with ``epochs`` among them when given, so
        that the epochs rule checks it too."""
        opts = cls.resolve_options(options if epochs is None else {**options, "epochs": epochs})
        if epochs is not None:
            opts["epochs"] = int(epochs)
        idle = cls.idle_option(opts, options)
        if idle is not None:
            raise ValueError(idle)
        return opts

    @staticmethod
    def idle_among(
        needs: Iterable[tuple[str, bool, str]],
        given: Mapping[str, Any],
        defaults: Mapping[str, Any],
    ) -> str | None:
        """``"KEY: why"`` for the first of ``needs`` (option, whether the resolved options
        use it, why) given away from its default where it is not used, else None."""
        for key, used, why in needs:
            if key in given and not used and given[key] != defaults[key]:
                return f"{key}: {why}"
        return None

    @classmethod
    def idle_option(cls, opts: Mapping[str, Any], given: Mapping[str, Any]) -> str | None:
        """Why one of the ``given`` options would change nothing in training with the
        resolved ``opts`` (it shapes a part these options leave out), or None: such an
        option is refused rather than recorded in the run as if it had been used
        (docs/models.md, "Options that would do nothing"). ``max_objects`` caps the
        objects (or boxes) of a model that reads them; given at its default, it is taken."""
        default = cls.defaults["max_objects"]
        reads = cls.uses_objects or cls.reads_boxes
        if not reads and given.get("max_objects", default) != default:
            return f"max_objects: model {cls.name!r} reads no objects"
        return None

    @classmethod
    def batch_order(
        cls,
        qids: Sequence[str],
        questions: Mapping[str, Mapping[str, Any]],
        rng: np.random.Generator,
        batch_size: int,
    ) -> np.ndarray:
        """The order of the training questions in one epoch (consecutive ``batch_size``
        slices are the batches): a random permutation."""
        return rng.permutation(len(qids))

    def training_input(self, data: GQAData, image_ids: Sequence[str]) -> Any:
        """The visual input of a training batch: objects for object models, else None."""
        if not self.uses_objects:
            return None
        return data.object_input(image_ids, self.options["max_objects"])

    def before_training(
        self,
        data: GQAData,
        split: str,
        question_ids: Sequence[str],
        objective: TrainingObjective,
        *,
        seed: int,
        progress: bool,
    ) -> None:
        """A stage run once the network is built, before the first epoch (none by
        default; the pixel model's box encoder pre-trains on object names here)."""

    def training_objective(
        self, data: GQAData, split: str, question_ids: Sequence[str]
    ) -> TrainingObjective:
        """The loss :func:`fit` minimises: mean cross-entropy of ``forward``'s logits
        (subclasses add remedy losses; ``question_ids`` are the training questions)."""
        return CrossEntropyObjective(self)

    # -- tensors --------------------------------------------------------------------------
    def _question_tensors(self, batch: QuestionBatch) -> tuple[torch.Tensor, torch.Tensor]:
        import torch

        ids, lengths = self.words.encode(batch.questions, self.options["max_question_tokens"])
        return torch.from_numpy(ids), torch.from_numpy(lengths)

    def _check_feature_width(self, visual: ObjectInput) -> None:
        """One line naming the detections file when the objects' feature width is not
        the one the model was trained on."""
        if visual.features.shape[2] != self.feature_dim:
            raise DataError(
                visual.source,
                f"object features have {visual.features.shape[2]} dimensions; "
                f"model {self.name!r} was trained on {self.feature_dim}",
            )

    def _object_tensors(
        self, visual: ObjectInput | None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        import torch

        if not isinstance(visual, ObjectInput):
            raise DataError(None, f"model {self.name!r} needs object input (features and boxes)")
        self._check_feature_width(visual)
        feats = torch.from_numpy(np.ascontiguousarray(visual.features, dtype=np.float32))
        spatial = torch.from_numpy(spatial_features(visual.boxes, visual.image_sizes))
        mask = torch.from_numpy(np.ascontiguousarray(visual.mask, dtype=bool))
        return feats, spatial, mask

    def forward(
        self, batch: QuestionBatch, visual: ObjectInput | None, feats: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``(logits (B, A), attention (B, N) or None)``; ``feats`` replaces the features
        tensor (for gradients)."""
        tokens, lengths = self._question_tensors(batch)
        if not self.uses_objects:
            return self.net(tokens, lengths), None
        f, spatial, mask = self._object_tensors(visual)
        return self.net(tokens, lengths, f if feats is None else feats, spatial, mask)

    def predict(self, batch: QuestionBatch, visual: ObjectInput | None = None) -> ModelOutput:
        """Softmax over the answer vocabulary; the answer is the arg-max (first on ties)."""
        import torch

        self.net.eval()
        with torch.inference_mode():
            logits, attention = self.forward(batch, visual)
            probs = torch.softmax(logits, dim=1).numpy()
        best = probs.argmax(axis=1)
        return ModelOutput(
            answers=[self.answer_vocab[i] for i in best],
            probs=probs,
            attention=None if attention is None else attention.numpy(),
        )

    # -- persistence ----------------------------------------------------------------------
    def state_arrays(self) -> dict[str, np.ndarray]:
        """The network weights as numpy arrays (what goes into ``weights.safetensors``)."""
        return {k: v.detach().cpu().numpy() for k, v in self.net.state_dict().items()}

    def architecture(self) -> dict[str, Any]:
        """Everything but the weights needed to rebuild the model (and nothing else)."""
        options = {
            k: v
            for k, v in self.options.items()
            if k not in self.omitted_options or v != self.omitted_options[k]
        }
        return {
            "model": self.name,
            "options": options,
            "feature_dim": self.feature_dim,
            **vocab_config(self.words, self.options["max_question_tokens"]),
        }

    def save(self, run_dir: str | Path) -> None:
        """Write ``config.json`` (architecture + training log), weights and answers."""
        config = {**self.architecture(), "training": self.training_log}
        save_checkpoint(run_dir, config, self.state_arrays(), self.answer_vocab)

    @classmethod
    def load(cls, run_dir: str | Path) -> TorchModel:
        """Rebuild from a run folder; mismatching weights raise ``DataError`` naming the file."""
        import torch

        config, tensors, answers = load_checkpoint(run_dir)
        path = Path(run_dir) / "config.json"
        try:
            words = words_from_config(config)
            options = cls.resolve_options(upgrade_options(cls.name, config["options"]))
            feature_dim = int(config.get("feature_dim", 0))
        except (KeyError, TypeError, ValueError) as err:
            raise DataError(path, f"not a {cls.name!r} config: {err}") from None
        vocab = AnswerVocab(answers)
        net = cls.build_net(len(words), len(vocab), feature_dim, options)
        try:
            net.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in tensors.items()})
        except RuntimeError as err:
            raise DataError(
                Path(run_dir) / WEIGHTS, f"weights do not fit the model: {first_line(err)}"
            ) from None
        net.eval()
        return cls(net, words, vocab, options, feature_dim, config.get("training"))

    def fingerprint(self) -> str:
        """SHA-256 (16 hex chars) over the architecture config and every weight tensor."""
        if self._fingerprint is None:
            digest = hashlib.sha256(orjson.dumps(self.architecture(), option=orjson.OPT_SORT_KEYS))
            digest.update(orjson.dumps(self.answer_vocab))
            for key, arr in sorted(self.state_arrays().items()):
                digest.update(key.encode())
                digest.update(np.ascontiguousarray(arr).tobytes())
            self._fingerprint = digest.hexdigest()[:16]
        return self._fingerprint


def has_split(data: GQAData | VQA2Data, split: str) -> bool:
    """Whether ``data`` (GQA or VQA v2 layout) has a question file for ``split``."""
    try:
        data.questions_path(split)
    except DataError:
        return False
    return True


def evaluate_accuracy(
    model: TorchModel, data: GQAData, split: str, batch_size: int = 512, max_objects: int = 100
) -> float:
    """Exact-match accuracy (percent) of ``model`` on every question of ``split``."""
    from vqadiag.models.predict import iter_batches

    correct = total = 0
    for batch, output in iter_batches(
        model, data, split, batch_size=batch_size, max_objects=max_objects
    ):
        for record, answer in zip(batch.records, output.answers, strict=True):
            correct += answer == record["answer"]
            total += 1
    return 100.0 * correct / total if total else float("nan")


#: values of the ``lr_schedule`` training option
LR_SCHEDULES = ("constant", "cosine")


def lr_scheduler(optimizer: Any, schedule: str, steps: int) -> Any:
    """The step-size schedule of ``optimizer`` over ``steps`` optimiser steps
    (docs/models.md, "Models"): ``constant`` keeps ``lr``; ``cosine`` scales it by
    ``½ (1 + cos(π s / steps))`` for step s = 0 … steps − 1, from ``lr`` down towards 0,
    which it reaches after the last step."""
    import math

    import torch

    if schedule not in LR_SCHEDULES:
        raise ValueError(f"lr_schedule must be one of {', '.join(LR_SCHEDULES)}, got {schedule!r}")
    if schedule == "constant":
        return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1.0)
    total = max(1, steps)
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: 0.5 * (1.0 + math.cos(math.pi * min(s, total) / total))
    )


def fit(
    cls: type[TorchModel],
    data: GQAData,
    *,
    split: str,
    seed: int,
    progress: bool,
    options: Mapping[str, Any],
    val_split: str | None = "val",
) -> TorchModel:
    """Train ``cls`` on ``split``: AdamW (``lr``, ``weight_decay``), the model's
    :meth:`~TorchModel.training_objective` (by default mean cross-entropy) over the
    questions whose answer is in the vocabulary, ``epochs`` passes of shuffled
    ``batch_size`` batches; validation accuracy after each epoch when ``val_split`` exists."""
    import torch

    start = time.perf_counter()
    questions = data.questions(split)
    if not questions:
        raise DataError(data.questions_path(split), "no questions to train on")
    qids = list(questions)
    words = WordVocab.build((questions[q]["question"] for q in qids), options["min_word_count"])
    answers = AnswerVocab.build(
        (questions[q]["answer"] for q in qids), options.get("top_answers") or None
    )
    targets_all = answers.encode([questions[q]["answer"] for q in qids])
    keep = targets_all >= 0
    qids = [q for q, k in zip(qids, keep, strict=True) if k]
    targets_all = targets_all[keep]

    feature_dim = 0
    if cls.uses_objects:
        first_image = str(questions[qids[0]]["imageId"])
        feature_dim = int(data.image_objects(first_image)[0].shape[1])

    with torch_training_settings(options.get("threads")):
        torch.manual_seed(seed)
        net = cls.build_net(len(words), len(answers), feature_dim, options)
        model = cls(net, words, answers, options, feature_dim)
        optimizer = torch.optim.AdamW(
            net.parameters(), lr=options["lr"], weight_decay=options["weight_decay"]
        )
        objective = model.training_objective(data, split, qids)
        model.before_training(data, split, qids, objective, seed=seed, progress=progress)
        rng = np.random.default_rng(seed)
        epochs = int(options["epochs"])
        bs = int(options["batch_size"])
        n_batches = (len(qids) + bs - 1) // bs
        scheduler = lr_scheduler(
            optimizer, options.get("lr_schedule", "constant"), epochs * n_batches
        )
        validate = val_split is not None and val_split != split and has_split(data, val_split)
        history: list[dict[str, Any]] = []
        bar = progress_bar(progress, metrics=LOSS_ACC)
        with bar:
            task = bar.add_task(
                f"{cls.name} epoch 1/{epochs}", total=epochs * n_batches, loss=0.0, acc=0.0
            )
            for epoch in range(1, epochs + 1):
                bar.update(task, description=f"{cls.name} epoch {epoch}/{epochs}")
                net.train()
                order = cls.batch_order(qids, questions, rng, bs)
                loss_sum = correct = seen = 0.0
                for b in range(n_batches):
                    idx = order[b * bs : (b + 1) * bs]
                    batch = data.batch(split, [qids[i] for i in idx])
                    visual = model.training_input(data, batch.image_ids)
                    target = torch.from_numpy(targets_all[idx])
                    loss, logits = objective(batch, visual, target)
                    optimizer.zero_grad(set_to_none=True)
                    loss.backward()
                    if options.get("grad_clip"):
                        torch.nn.utils.clip_grad_norm_(net.parameters(), options["grad_clip"])
                    optimizer.step()
                    scheduler.step()
                    loss_sum += loss.item() * len(idx)
                    correct += float((logits.argmax(1) == target).sum())
                    seen += len(idx)
                    bar.update(task, advance=1, loss=loss_sum / seen, acc=100 * correct / seen)
                row: dict[str, Any] = {
                    "epoch": epoch,
                    "loss": loss_sum / seen,
                    "train_accuracy": 100.0 * correct / seen,
                }
                if validate:
                    row["val_accuracy"] = evaluate_accuracy(
                        model, data, val_split, max_objects=options["max_objects"]
                    )
                row["seconds"] = time.perf_counter() - start
                history.append(row)
                if progress:
                    val = f"  val acc {row['val_accuracy']:.2f}%" if validate else ""
                    bar.console.print(
                        f"epoch {epoch}: loss {row['loss']:.4f}  "
                        f"train acc {row['train_accuracy']:.2f}%{val}"
                    )
    net.eval()
    model.training_log = {
        "split": split,
        "seed": seed,
        "questions": len(qids),
        "history": history,
        "seconds": time.perf_counter() - start,
        "val_split": val_split if validate else None,
    }
    model._fingerprint = None
    return model
