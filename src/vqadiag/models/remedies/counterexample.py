"""The counter-example explanation model of Goyal et al. 2017 §5 (docs/protocols.md §2).

Two heads over a shared base, trained on complementary pairs with K = 24
nearest-neighbour candidates:

* **Shared base** — question ``q = GRU(words)`` (last state, as in the other
  built-in models); image embedding ``v̂`` from the detector objects
  ``v_j = [f_j ; x1/W, y1/H, x2/W, y2/H, area/(W·H)]``: with ``pooling="attention"``
  (default) question-guided top-down attention ``v̂ = Σ_j α_j v_j`` (as in UpDn),
  with ``pooling="mean"`` the masked mean of the objects (a question-independent
  image embedding, the closest analogue of the paper's CNN embedding); option
  ``count_feature`` appends the soft count ``Σ_j σ(logit_j)`` of attended objects; joint
  ``QI`` embedding ``h = ReLU(U_q q) ⊙ ReLU(U_v v̂)`` (point-wise product).
* **Answering head** — ``Linear(H, 2H) → ReLU → Dropout → Linear(2H, A)``, softmax,
  cross-entropy on the original image I only.
* **Explaining head** — for each candidate I_i: ``s_i = ⟨W_e h(Q, I_i), E_a[A]⟩``
  (a linear projection of the candidate's QI embedding and an embedding of the
  answer A to be explained, both of size ``explain_dim``; answers outside the
  training vocabulary share one extra embedding row), then one fully connected
  layer over the K inner products, ``S = W_s s + b_s`` (K → K, initialised to the
  identity so the untrained scores are the inner products).

Loss per question: ``−log P(A | I, Q) + λ Σ_{i ≠ t} max(0, M − (S(I') − S(I_i)))``
with I' = I_t the complementary image. The paper gives neither λ nor M nor the
layer sizes; defaults here: λ = 1, M = 1, ``explain_dim`` 128, the sizes of the
other built-in models (embedding 128, hidden 256) — see ``docs/explain.md``.
The answering head also trains on the training questions without candidates
(``all_questions``; their hinge term is absent).

Training is deterministic for a seed (same recipe as :func:`~vqadiag.models.training.fit`):
AdamW, seeded init and order, deterministic algorithms, a fixed thread count.
The run folder is a normal checkpoint (``config.json`` with ``"model":
"counterexample"``, ``weights.safetensors``, ``answers.json``).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from vqadiag.data.model_inputs.gqa_data import GQAData
from vqadiag.errors import DataError
from vqadiag.models.base import Capabilities
from vqadiag.models.option_checks import POSITIVE, WEIGHT, Number, check_numbers, check_switches
from vqadiag.models.training import (
    TRAINING_DEFAULTS,
    TorchModel,
    spatial_features,
)
from vqadiag.models.vocab import AnswerVocab, WordVocab
from vqadiag.progress import progress_bar

if TYPE_CHECKING:
    import torch

K_CANDIDATES = 24
#: the explainer's own number options (beside ``TRAINING_NUMBERS``): λ and M 0 or more
#: (λ 0: no hinge term), the explaining head's widths 1 or more (``k_candidates`` is the
#: candidates file's K, never an option given)
EXPLAINER_NUMBERS: dict[str, Number] = {
    **dict.fromkeys(("lambda", "margin"), WEIGHT),
    **dict.fromkeys(("explain_dim", "attention_dim"), POSITIVE),
}
#: metrics column of the training bar
LOSS_HINGE_ACC = (
    "loss {task.fields[loss]:.3f}  hinge {task.fields[hinge]:.3f}  acc {task.fields[acc]:.1f}%"
)


@dataclass(frozen=True, slots=True)
class ExplainItem:
    """One (I, Q, A) to explain: feature image ids of I and of its K candidates (nearest
    first), the index of the complementary image I' among them (−1 when unknown)."""

    question_id: str
    question: str
    image_id: str
    candidates: tuple[str, ...]
    target: int
    answer: str


def hinge_loss(scores: torch.Tensor, targets: torch.Tensor, margin: float) -> torch.Tensor:
    """``Σ_{i ≠ t} max(0, M − (S_t − S_i))`` per row of ``scores`` (B, K) → (B,)
    (the pairwise hinge ranking loss of Goyal et al. 2017 §5, eq. 1)."""
    import torch

    s_t = scores.gather(1, targets.view(-1, 1))
    terms = torch.clamp(margin - (s_t - scores), min=0.0)
    keep = torch.ones_like(terms).scatter(1, targets.view(-1, 1), 0.0)
    return (terms * keep).sum(dim=1)


def build_counterexample_net(
    n_words: int, n_answers: int, feature_dim: int, options: Mapping[str, Any]
) -> Any:
    """The two-headed network (see the module docstring;
    :class:`~vqadiag.models.networks.counterexample.CounterExampleNet`).
    ``forward(tokens, lengths, feats, spatial, mask)`` → ``(answer logits (B, A), pooling
    weights (B, N))``; ``explain(tokens, lengths, feats (B, K, N, D), spatial, mask,
    answer (B,))`` → ``(scores S (B, K), answer logits per candidate (B, K, A))``."""
    from vqadiag.models.networks.counterexample import (
        CounterExampleNet,
        CounterExampleNetConfig,
    )

    pooling = options["pooling"]
    if pooling not in ("attention", "mean"):
        raise ValueError(f"pooling must be 'attention' or 'mean', got {pooling!r}")
    config = CounterExampleNetConfig(
        n_words=n_words,
        n_answers=n_answers,
        feature_dim=feature_dim,
        embedding_dim=options["embedding_dim"],
        hidden_dim=options["hidden_dim"],
        dropout=options["dropout"],
        k_candidates=int(options["k_candidates"]),
        explain_dim=int(options["explain_dim"]),
        pooling=pooling,
        attention_dim=int(options["attention_dim"]),
        count_feature=bool(options["count_feature"]),
    )
    return CounterExampleNet(config)


class CounterExampleModel(TorchModel):
    """Answers questions (answering head) and ranks K candidate images as counter-examples
    to an answer (explaining head); ``predict`` is the answering head."""

    name: ClassVar[str] = "counterexample"
    capabilities: ClassVar[Capabilities] = Capabilities(
        visual="objects", object_masking=True, attention=True, gradients=False
    )
    uses_objects: ClassVar[bool] = True
    defaults: ClassVar[dict[str, Any]] = {
        **TRAINING_DEFAULTS,
        "epochs": 8,
        "lambda": 1.0,
        "margin": 1.0,
        "k_candidates": K_CANDIDATES,
        "explain_dim": 128,
        "attention_dim": 128,
        "pooling": "attention",
        "count_feature": False,
        "all_questions": True,
    }

    @classmethod
    def resolve_options(cls, options: Mapping[str, Any]) -> dict[str, Any]:
        """:meth:`TorchModel.resolve_options`, with :data:`EXPLAINER_NUMBERS` checked too
        (``ValueError`` naming the option)."""
        opts = super().resolve_options(options)
        check_numbers(opts, EXPLAINER_NUMBERS)
        check_switches(opts, ("count_feature", "all_questions"))
        return opts

    @classmethod
    def build_net(
        cls, n_words: int, n_answers: int, feature_dim: int, options: Mapping[str, Any]
    ) -> Any:
        """See :func:`build_counterexample_net`."""
        return build_counterexample_net(n_words, n_answers, feature_dim, options)

    @property
    def k_candidates(self) -> int:
        """K, the number of candidates the explaining head scores."""
        return int(self.options["k_candidates"])

    # -- tensors ----------------------------------------------------------------------
    def _candidate_tensors(
        self, data: GQAData, items: Sequence[ExplainItem]
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Objects of every item's K candidates → feats (B, K, N, D), spatial, mask."""
        import torch

        unique: dict[str, int] = {}
        for item in items:
            for image in item.candidates:
                unique.setdefault(image, len(unique))
        visual = data.object_input(list(unique), self.options["max_objects"])
        self._check_feature_width(visual)
        index = np.array([[unique[i] for i in item.candidates] for item in items], np.int64)
        spatial = spatial_features(visual.boxes, visual.image_sizes)
        return (
            torch.from_numpy(np.ascontiguousarray(visual.features[index], dtype=np.float32)),
            torch.from_numpy(np.ascontiguousarray(spatial[index])),
            torch.from_numpy(np.ascontiguousarray(visual.mask[index])),
        )

    def answer_index(self, answers: Sequence[str]) -> np.ndarray:
        """Row of each answer in the answer embedding (answers outside the vocabulary → A)."""
        n = len(self.answer_vocab)
        return np.array([self.answers.index.get(a, n) for a in answers], dtype=np.int64)

    def explain_forward(
        self,
        data: GQAData,
        items: Sequence[ExplainItem],
        answers: Sequence[str] | None = None,
        *,
        with_logits: bool = True,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``(scores S (B, K), answer logits on each candidate (B, K, A))`` for ``items``,
        explaining ``answers`` (default: each item's own answer)."""
        import torch

        for item in items:
            if len(item.candidates) != self.k_candidates:
                raise DataError(
                    None,
                    f"question {item.question_id!r} has {len(item.candidates)} candidates; "
                    f"the model was trained with K = {self.k_candidates}",
                )
        ids, lengths = self.words.encode(
            [i.question for i in items], self.options["max_question_tokens"]
        )
        feats, spatial, mask = self._candidate_tensors(data, items)
        answer = self.answer_index([i.answer for i in items] if answers is None else answers)
        return self.net.explain(
            torch.from_numpy(ids),
            torch.from_numpy(lengths),
            feats,
            spatial,
            mask,
            torch.from_numpy(answer),
            with_logits,
        )

    def score_candidates(
        self,
        data: GQAData,
        items: Sequence[ExplainItem],
        answers: Sequence[str] | None = None,
        *,
        batch_size: int = 64,
        progress: bool = False,
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(S (n, K), P(A | Q, I_i) (n, K))``: explaining-head scores of each item's
        candidates for its answer (or ``answers``) and the answering head's probability
        of that answer on each candidate (0 for answers outside the vocabulary)."""
        import torch

        n, k = len(items), self.k_candidates
        scores = np.zeros((n, k), np.float64)
        probs = np.zeros((n, k), np.float64)
        wanted = [i.answer for i in items] if answers is None else list(answers)
        idx = self.answer_index(wanted)
        self.net.eval()
        bar = progress_bar(progress, transient=True)
        with bar, torch.inference_mode():
            task = bar.add_task("explain", total=n)
            for start in range(0, n, batch_size):
                stop = min(n, start + batch_size)
                s, logits = self.explain_forward(data, items[start:stop], wanted[start:stop])
                p = torch.softmax(logits, dim=-1).numpy()
                scores[start:stop] = s.numpy()
                for row, a in enumerate(idx[start:stop]):
                    if a < p.shape[2]:
                        probs[start + row] = p[row, :, a]
                bar.advance(task, stop - start)
        return scores, probs

    # -- training -----------------------------------------------------------------------
    @classmethod
    def train_explainer(
        cls,
        data: GQAData,
        items: Sequence[ExplainItem],
        *,
        split: str = "train",
        epochs: int | None = None,
        seed: int = 0,
        progress: bool = True,
        val_items: Sequence[ExplainItem] | None = None,
        val_split: str = "val",
        **options: Any,
    ) -> CounterExampleModel:
        """Train on ``split`` of ``data`` with ``items`` (its questions that have candidates);
        Recall@5 on ``val_items`` after every epoch when given (see the module docstring).
        K, ``k_candidates``, is the number of candidates the items carry; giving it is
        refused."""
        if "k_candidates" in options:
            raise ValueError(
                "k_candidates is the number of candidates per question in the candidates "
                "file, not an option"
            )
        opts = cls.training_options(options, epochs)
        return _fit(cls, data, items, split, seed, progress, opts, val_items, val_split)


def _fit(
    cls: type[CounterExampleModel],
    data: GQAData,
    items: Sequence[ExplainItem],
    split: str,
    seed: int,
    progress: bool,
    options: dict[str, Any],
    val_items: Sequence[ExplainItem] | None,
    val_split: str,
) -> CounterExampleModel:
    import torch

    start = time.perf_counter()
    if not items:
        raise DataError(data.questions_path(split), "no questions with candidates to train on")
    k = len(items[0].candidates)
    options = {**options, "k_candidates": k}
    questions = data.questions(split)
    by_qid = {item.question_id: item for item in items}
    qids = list(questions) if options["all_questions"] else [i.question_id for i in items]
    words = WordVocab.build((questions[q]["question"] for q in qids), options["min_word_count"])
    answers = AnswerVocab.build(
        (questions[q]["answer"] for q in qids), options.get("top_answers") or None
    )
    targets_all = answers.encode([questions[q]["answer"] for q in qids])
    feature_dim = int(data.image_objects(str(questions[qids[0]]["imageId"]))[0].shape[1])

    deterministic = torch.are_deterministic_algorithms_enabled()
    threads = torch.get_num_threads()
    torch.use_deterministic_algorithms(True)
    if options.get("threads"):
        torch.set_num_threads(int(options["threads"]))
    try:
        torch.manual_seed(seed)
        net = cls.build_net(len(words), len(answers), feature_dim, options)
        model = cls(net, words, answers, options, feature_dim)
        optimizer = torch.optim.AdamW(
            net.parameters(), lr=options["lr"], weight_decay=options["weight_decay"]
        )
        ce = torch.nn.CrossEntropyLoss(ignore_index=-100, reduction="sum")
        lam, margin = float(options["lambda"]), float(options["margin"])
        rng = np.random.default_rng(seed)
        epochs, bs = int(options["epochs"]), int(options["batch_size"])
        n_batches = (len(qids) + bs - 1) // bs
        history: list[dict[str, Any]] = []
        bar = progress_bar(progress, metrics=LOSS_HINGE_ACC)
        with bar:
            task = bar.add_task(
                f"explainer epoch 1/{epochs}", total=epochs * n_batches, loss=0.0, hinge=0.0, acc=0
            )
            for epoch in range(1, epochs + 1):
                bar.update(task, description=f"explainer epoch {epoch}/{epochs}")
                net.train()
                order = rng.permutation(len(qids))
                loss_sum = hinge_sum = correct = seen = explained = 0.0
                for b in range(n_batches):
                    idx = order[b * bs : (b + 1) * bs]
                    batch_qids = [qids[i] for i in idx]
                    batch = data.batch(split, batch_qids)
                    visual = data.object_input(batch.image_ids, options["max_objects"])
                    target = torch.from_numpy(targets_all[idx])
                    logits, _ = model.forward(batch, visual)
                    answer_loss = ce(logits, target)
                    loss = answer_loss
                    rows = [by_qid[q] for q in batch_qids if q in by_qid]
                    hinge_total = 0.0
                    if rows:
                        scores, _ = model.explain_forward(data, rows, with_logits=False)
                        t = torch.tensor([r.target for r in rows], dtype=torch.int64)
                        hinge = hinge_loss(scores, t, margin).sum()
                        loss = loss + lam * hinge
                        hinge_total = float(hinge.detach())
                    loss = loss / len(idx)
                    optimizer.zero_grad(set_to_none=True)
                    loss.backward()
                    if options.get("grad_clip"):
                        torch.nn.utils.clip_grad_norm_(net.parameters(), options["grad_clip"])
                    optimizer.step()
                    loss_sum += float(loss.detach()) * len(idx)
                    hinge_sum += hinge_total
                    explained += len(rows)
                    known = target >= 0
                    correct += float((logits.argmax(1)[known] == target[known]).sum())
                    seen += len(idx)
                    bar.update(
                        task,
                        advance=1,
                        loss=loss_sum / seen,
                        hinge=hinge_sum / max(explained, 1),
                        acc=100 * correct / seen,
                    )
                row: dict[str, Any] = {
                    "epoch": epoch,
                    "loss": loss_sum / seen,
                    "hinge": hinge_sum / max(explained, 1),
                    "train_accuracy": 100.0 * correct / seen,
                }
                if val_items:
                    row["val_recall_at_5"] = _recall_at_5(model, data, val_items)
                row["seconds"] = time.perf_counter() - start
                history.append(row)
                if progress:
                    val = (
                        f"  val Recall@5 {row['val_recall_at_5']:.2f}%"
                        if "val_recall_at_5" in row
                        else ""
                    )
                    bar.console.print(
                        f"epoch {epoch}: loss {row['loss']:.4f}  hinge {row['hinge']:.3f}  "
                        f"train acc {row['train_accuracy']:.2f}%{val}"
                    )
    finally:
        torch.use_deterministic_algorithms(deterministic)
        torch.set_num_threads(threads)
    net.eval()
    model.training_log = {
        "split": split,
        "seed": seed,
        "questions": len(qids),
        "explained_questions": len(items),
        "history": history,
        "seconds": time.perf_counter() - start,
        "val_split": val_split if val_items else None,
    }
    model._fingerprint = None
    return model


def _recall_at_5(model: CounterExampleModel, data: GQAData, items: Sequence[ExplainItem]) -> float:
    """Recall@5 (percent) of the explaining head on ``items`` (validation during training)."""
    from vqadiag.metrics.counterexample import recall_hits, target_ranks

    scores, _ = model.score_candidates(data, items)
    ranks = target_ranks(scores, np.array([i.target for i in items]))
    return float(100.0 * recall_hits(ranks, 5).mean())
