"""UpDn remedy options: objectives, gradients, test-time behaviour, configs and old runs."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from vqadiag.data.model_inputs.gqa_data import GQAData  # noqa: E402
from vqadiag.errors import DataError  # noqa: E402
from vqadiag.models.reference.updn import UpDnModel  # noqa: E402
from vqadiag.models.registry import load_model  # noqa: E402
from vqadiag.models.remedies.debias import PriorObjective, RUBiObjective  # noqa: E402
from vqadiag.models.remedies.hint import HintObjective, gradcam_importance, hint_ranking_loss  # noqa: E402
from vqadiag.models.training import CrossEntropyObjective  # noqa: E402
from vqadiag.models.vocab import AnswerVocab, WordVocab  # noqa: E402


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    from vqadiag.synth import generate_world

    out = tmp_path_factory.mktemp("remedy_options_world")
    generate_world(out, images=60, seed=11, progress=False)
    return out


@pytest.fixture(scope="module")
def data(world):
    return GQAData(world)


def untrained(data, **options):
    """An UpDn with fixed random weights (seed 0) and the given options; no training."""
    questions = data.questions("train")
    words = WordVocab.build(r["question"] for r in questions.values())
    answers = AnswerVocab.build(r["answer"] for r in questions.values())
    opts = UpDnModel.resolve_options({"hidden_dim": 16, "embedding_dim": 8, **options})
    feature_dim = data.image_objects(next(iter(questions.values()))["imageId"])[0].shape[1]
    torch.manual_seed(0)
    net = UpDnModel.build_net(len(words), len(answers), feature_dim, opts)
    net.eval()  # no dropout: gradients comparable across objectives
    return UpDnModel(net, words, answers, opts, feature_dim)


def batch_of(data, model, n=24):
    qids = list(data.questions("train"))[:n]
    batch = data.batch("train", qids)
    target = torch.from_numpy(model.answers.encode([r["answer"] for r in batch.records]))
    return batch, data.object_input(batch.image_ids), target


def grads(model, objective, batch, visual, target):
    model.net.zero_grad(set_to_none=True)
    loss, _ = objective(batch, visual, target)
    loss.backward()
    return {k: p.grad.clone() for k, p in model.net.named_parameters() if p.grad is not None}


def test_objective_follows_the_option(data):
    qids = list(data.questions("train"))
    assert isinstance(
        untrained(data).training_objective(data, "train", qids), CrossEntropyObjective
    )
    for method in ("rubi", "rubi+qb"):
        model = untrained(data, debias=method)
        assert isinstance(model.training_objective(data, "train", qids), RUBiObjective)
    for method in ("bp", "lmh"):
        model = untrained(data, debias=method)
        assert isinstance(model.training_objective(data, "train", qids), PriorObjective)
    hint = untrained(data, hint=1.0).training_objective(data, "train", qids)
    assert isinstance(hint, HintObjective) and hint.sets


def test_bp_and_lmh_change_the_gradients_of_the_shared_weights(data):
    plain = untrained(data)
    batch, visual, target = batch_of(data, plain)
    qids = list(data.questions("train"))
    g_plain = grads(plain, plain.training_objective(data, "train", qids), batch, visual, target)
    for method in ("bp", "lmh"):
        model = untrained(data, debias=method)
        g = grads(model, model.training_objective(data, "train", qids), batch, visual, target)
        assert not torch.allclose(g["classifier.3.weight"], g_plain["classifier.3.weight"])
    # the same weights (seed 0): the base network is identical, only the loss differs
    bp = untrained(data, debias="bp")
    for key, value in plain.net.state_dict().items():
        torch.testing.assert_close(bp.net.state_dict()[key], value)


def test_bp_objective_equals_the_formula_with_the_counted_prior(data):
    model = untrained(data, debias="bp")
    qids = list(data.questions("train"))
    objective = model.training_objective(data, "train", qids)
    batch, visual, target = batch_of(data, model, 4)
    loss, logits = objective(batch, visual, target)
    # the prior of question 0's group counted by hand over the training questions
    record = batch.records[0]
    group = record["groups"]["global"]
    same = [
        r["answer"]
        for r in data.questions("train").values()
        if r["groups"]["global"] == group  # None == None: the group of questions without one
    ]
    p = np.array([same.count(a) / len(same) for a in model.answer_vocab])
    log_p = np.log(np.maximum(p, 1e-6))
    z = logits.detach().numpy()[0].astype(np.float64)
    combined = z - np.log(np.exp(z - z.max()).sum()) - z.max() + log_p
    expected0 = -(combined[target[0]] - np.log(np.exp(combined).sum()))
    per_question = torch.nn.functional.cross_entropy(
        torch.log_softmax(logits, 1) + objective.batch_prior(batch), target, reduction="none"
    )
    assert per_question[0].item() == pytest.approx(expected0, rel=1e-4)
    assert loss.item() == pytest.approx(per_question.mean().item(), rel=1e-6)


def test_hint_adds_the_ranking_loss_of_gradcam_importances(data):
    model = untrained(data, hint=2.0)
    qids = list(data.questions("train"))
    objective = model.training_objective(data, "train", qids)
    batch, visual, target = batch_of(data, model)
    target = target.clamp(min=0)
    feats, _, _ = model._object_tensors(visual)
    feats = feats.clone().requires_grad_(True)
    total, _ = objective(batch, visual, target, feats=feats)
    # recompute both terms independently
    feats2 = feats.detach().clone().requires_grad_(True)
    with model.net.features_read() as read:  # GradCAM: the features after feature_norm
        logits, _ = model.forward(batch, visual, feats=feats2)
    ce = torch.nn.functional.cross_entropy(logits, target)
    raw = gradcam_importance(logits, read[0], target)
    visible_raw = raw * torch.from_numpy(visual.mask)
    shares = visible_raw / visible_raw.abs().sum(1, keepdim=True).clamp(min=1e-12)
    from vqadiag.models.remedies.hint import relevance_masks

    rel, irr = relevance_masks(objective.sets, batch.question_ids, visual.mask)
    assert rel.any() and irr.any()
    ranking = hint_ranking_loss(shares, torch.from_numpy(rel), torch.from_numpy(irr))
    assert total.item() == pytest.approx(ce.item() + 2.0 * ranking.item(), rel=1e-5)
    assert ranking.item() > 0  # untrained: some irrelevant object outranks a relevant one
    # and it changes the gradients (double backprop through the importances)
    plain = untrained(data)
    g_plain = grads(plain, CrossEntropyObjective(plain), batch, visual, target)
    g_hint = grads(model, objective, batch, visual, target)
    change = (g_hint["att_v.weight"] - g_plain["att_v.weight"]).abs().max()
    assert change > 1e-3 * g_plain["att_v.weight"].abs().max()


def test_rubi_keeps_the_question_branch_only_with_qb(data):
    qb = untrained(data, debias="rubi+qb")
    rubi = untrained(data, debias="rubi")
    rubi.net.load_state_dict(qb.net.state_dict())
    batch, visual, _ = batch_of(data, qb, 8)
    tokens, lengths = qb._question_tensors(batch)
    f, spatial, mask = qb._object_tensors(visual)
    with torch.no_grad():
        q = qb.net.encode(tokens, lengths)
        v = qb.net.objects(f, spatial, mask)
        base, _ = qb.net.answer(q, v, qb.net.attend(q, v, mask))
        masked = base * torch.sigmoid(qb.net.question_mask(q))
    np.testing.assert_allclose(
        rubi.predict(batch, visual).probs, torch.softmax(base, 1).numpy(), rtol=1e-5
    )
    np.testing.assert_allclose(
        qb.predict(batch, visual).probs, torch.softmax(masked, 1).numpy(), rtol=1e-5
    )


def test_remedy_options_reach_config_and_fingerprint_and_load(data, tmp_path):
    plain, bp = untrained(data), untrained(data, debias="bp")
    assert "debias" not in plain.architecture()["options"]
    assert bp.architecture()["options"]["debias"] == "bp"
    assert plain.fingerprint() != bp.fingerprint()
    for model, name in ((bp, "bp"), (untrained(data, debias="rubi+qb"), "qb")):
        model.save(tmp_path / name)
        loaded = load_model(tmp_path / name)
        assert loaded.options == model.options and loaded.fingerprint() == model.fingerprint()
        batch, visual, _ = batch_of(data, model, 4)
        np.testing.assert_array_equal(
            loaded.predict(batch, visual).probs, model.predict(batch, visual).probs
        )


def test_runs_saved_before_the_options_load_unchanged(data, tmp_path):
    # a run from before feature_norm and the remedies: raw features, no such keys
    legacy = untrained(data, feature_norm="none")
    legacy.save(tmp_path / "old")
    import orjson

    config = orjson.loads((tmp_path / "old" / "config.json").read_bytes())
    assert not {"feature_norm", "debias", "hint"} & set(config["options"])
    loaded = load_model(tmp_path / "old")
    assert loaded.options["feature_norm"] == "none" and loaded.options["debias"] == "none"
    assert loaded.fingerprint() == legacy.fingerprint()
    assert "feature_norm.weight" not in loaded.net.state_dict()


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ({"debias": "magic"}, "debias must be one of"),
        ({"debias_groups": "type"}, "debias_groups must be one of"),
        ({"hint": -1}, "hint must be a number of 0 or more, not -1"),
        ({"hint_margin": float("nan")}, "hint_margin must be a number of 0 or more, not nan"),
        ({"feature_norm": "batch"}, "feature_norm must be one of"),
    ],
)
def test_bad_remedy_options(option, message):
    with pytest.raises(ValueError, match=message):
        UpDnModel.resolve_options(option)


def test_hint_without_scene_graphs_is_a_data_error(world, tmp_path):
    import shutil

    copy = tmp_path / "w"
    shutil.copytree(world, copy)
    (copy / "gqa" / "train_sceneGraphs.json").unlink()
    data = GQAData(copy)
    model = untrained(data, hint=1.0)
    with pytest.raises(DataError, match="train_sceneGraphs.json.*hint needs GQA scene graphs"):
        model.training_objective(data, "train", list(data.questions("train")))


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"hint_margin": 0.5}, "hint_margin: shapes the HINT loss: give hint above 0 with it"),
        ({"lmh_entropy": 0.5}, "lmh_entropy: weighs LMH's entropy: give debias=lmh"),
        ({"lmh_entropy": 0.5, "debias": "rubi"}, "lmh_entropy: weighs LMH's entropy"),
        ({"debias_groups": "local"}, "debias_groups: groups the prior of debias=bp or lmh"),
        ({"debias_groups": "local", "debias": "rubi"}, "debias_groups: groups the prior of"),
    ],
)
def test_a_remedy_option_whose_remedy_is_off_is_refused(given, message):
    """Accepted, they would train the same weights and still be recorded in the run as
    if they had shaped it."""
    with pytest.raises(ValueError, match=f"^{message}"):
        UpDnModel.training_options(given, None)


def test_remedy_options_with_their_remedy_and_max_objects_where_objects_are_read():
    from vqadiag.models.reference.question_only import QuestionOnlyModel

    opts = UpDnModel.training_options(
        {"hint": 1.0, "hint_margin": 0.5, "debias": "lmh", "lmh_entropy": 0.1,
         "debias_groups": "local", "max_objects": 10}, 2,
    )  # fmt: skip
    assert (opts["hint_margin"], opts["lmh_entropy"], opts["max_objects"]) == (0.5, 0.1, 10)
    with pytest.raises(ValueError, match="^max_objects: model 'question-only' reads no objects"):
        QuestionOnlyModel.training_options({"max_objects": 1}, None)
    assert QuestionOnlyModel.training_options({"hidden_dim": 8}, 1)["max_objects"] == 100
    # given at their defaults (a sweep that always passes them), they are taken
    assert QuestionOnlyModel.training_options({"max_objects": 100}, 1)["max_objects"] == 100
    opts = UpDnModel.training_options({"hint_margin": 0.0, "debias_groups": "global"}, 1)
    assert (opts["hint"], opts["hint_margin"], opts["debias"]) == (0.0, 0.0, "none")
    assert UpDnModel.training_options({"debias": "bp", "debias_groups": "local"}, 1)
