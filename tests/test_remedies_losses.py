"""Remedy losses on hand-worked tensors: RUBi, BP, LMH, HINT ranking, SQuINT, subq, priors."""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from vqadiag.data.formats.introspect import parse_introspect  # noqa: E402
from vqadiag.models.remedies.debias import (  # noqa: E402
    PRIOR_FLOOR,
    bias_group,
    bias_product_loss,
    group_log_prior,
    learned_mixin_loss,
    rubi_loss,
)
from vqadiag.models.remedies.finetune import (  # noqa: E402
    answer_index,
    cross_entropy,
    introspect_pairs,
    masked_mse,
    squint_loss,
    subq_loss,
)
from vqadiag.models.remedies.hint import (  # noqa: E402
    gradcam_importance,
    hint_ranking_loss,
    normalized_importance,
    relevance_masks,
)

LN2 = math.log(2.0)


def t(rows):
    return torch.tensor(rows, dtype=torch.float64)


def test_rubi_loss_hand_worked():
    # z = [2, 0], mask logits m = [0, ln 3] -> sigma(m) = [1/2, 3/4] -> masked z = [1, 0]
    # CE(masked, y=0) = log(1 + e^-1) = 0.3132617; question-only logits [0, 0] -> ln 2
    loss = rubi_loss(t([[2.0, 0.0]]), t([[0.0, math.log(3.0)]]), t([[0.0, 0.0]]), torch.tensor([0]))
    assert loss.item() == pytest.approx(math.log(1 + math.exp(-1)) + LN2, abs=1e-12)
    assert loss.item() == pytest.approx(1.0064089, abs=1e-6)


def test_rubi_mask_gradient_reaches_the_question_branch():
    mask = t([[0.0, 0.0]]).requires_grad_(True)
    rubi_loss(t([[2.0, 0.0]]), mask, t([[0.0, 0.0]]), torch.tensor([0])).backward()
    # masked z = [2 s0, 0 s1] with s = sigma(m); d/d m0 of CE = -(1 - p0) * 2 * s0 (1 - s0)
    # p0 = e^1 / (e^1 + 1) = 0.7310586 -> -(0.2689414) * 2 * 0.25 = -0.1344707; m1 has z1 = 0
    assert mask.grad[0, 0].item() == pytest.approx(-0.1344707, abs=1e-6)
    assert mask.grad[0, 1].item() == 0.0


def test_bias_product_loss_hand_worked():
    # log softmax([0, 0]) = [-ln 2, -ln 2]; + log [.75, .25] -> softmax = [.75, .25]
    # CE with y = 1: -ln .25 = ln 4
    prior = t([[math.log(0.75), math.log(0.25)]])
    loss = bias_product_loss(t([[0.0, 0.0]]), prior, torch.tensor([1]))
    assert loss.item() == pytest.approx(math.log(4.0), abs=1e-12)


def test_learned_mixin_loss_hand_worked():
    prior = t([[math.log(0.75), math.log(0.25)]])
    gate_one = t([[math.log(math.e - 1.0)]])  # softplus = ln(1 + e - 1) = 1 -> g = 1
    # g = 1: same product as BP -> CE = ln 4; H(softmax(log p)) = H(.75, .25) = 0.5623351
    h = -(0.75 * math.log(0.75) + 0.25 * math.log(0.25))
    assert h == pytest.approx(0.5623351, abs=1e-7)
    loss = learned_mixin_loss(t([[0.0, 0.0]]), prior, gate_one, torch.tensor([1]), 0.36)
    assert loss.item() == pytest.approx(math.log(4.0) + 0.36 * h, abs=1e-12)
    no_penalty = learned_mixin_loss(t([[0.0, 0.0]]), prior, gate_one, torch.tensor([1]), 0.0)
    assert no_penalty.item() == pytest.approx(math.log(4.0), abs=1e-12)
    # g -> 0 (gate very negative): the prior is ignored -> CE = ln 2, H(uniform) = ln 2
    off = learned_mixin_loss(t([[0.0, 0.0]]), prior, t([[-60.0]]), torch.tensor([1]), 0.36)
    assert off.item() == pytest.approx(LN2 * 1.36, abs=1e-9)


def test_group_log_prior_and_groups():
    records = [
        {"answer": "x", "groups": {"global": "A", "local": "a1"}},
        {"answer": "x", "groups": {"global": "A", "local": "a2"}},
        {"answer": "y", "groups": {"global": "A", "local": "a2"}},
        {"answer": "y", "groups": {"global": None}, "question_type": "what color"},
        {"answer": "z", "groups": {"global": None}},
        {"answer": "unknown", "groups": {"global": None}},  # outside the vocabulary
    ]
    rows, log_prior = group_log_prior(records, {"x": 0, "y": 1, "z": 2}, "global")
    assert rows == {"global:A": 0, "type:what color": 1, None: 2}
    # A: x 2/3, y 1/3, z 0 -> floored; what color: y 1; None: z 1 (the unknown answer not counted)
    expected = np.log(
        np.maximum([[2 / 3, 1 / 3, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]], PRIOR_FLOOR)
    )
    np.testing.assert_allclose(log_prior, expected, rtol=1e-6)
    assert bias_group(records[1], "local") == "local:a2"
    assert bias_group({}, "global") is None


def test_hint_ranking_loss_hand_worked():
    s = t([[3.0, 1.0, 2.0, 0.0], [5.0, 5.0, 5.0, 5.0]]).requires_grad_(True)
    rel = torch.tensor([[True, True, False, False], [True, False, False, False]])
    irr = torch.tensor([[False, False, True, True], [False, False, False, False]])
    # question 0, pairs (rel j, irrel k): s_j - s_k = 1, 3, -1, 1 -> hinge max(0, -d) = 0,0,1,0
    # -> mean 1/4; question 1 has no irrelevant object and is left out
    loss = hint_ranking_loss(s, rel, irr)
    assert loss.item() == pytest.approx(0.25)
    loss.backward()
    # only the pair (1, 2) is active: d/ds1 = -1/4, d/ds2 = +1/4
    np.testing.assert_allclose(s.grad.numpy(), [[0, -0.25, 0.25, 0], [0, 0, 0, 0]])
    # margin 1: hinges max(0, 1 - d) = 0, 0, 2, 0 -> 0.5
    assert hint_ranking_loss(s, rel, irr, margin=1.0).item() == pytest.approx(0.5)
    # nothing to rank -> exactly 0
    none = hint_ranking_loss(s, rel, torch.zeros_like(irr))
    assert none.item() == 0.0


def test_normalized_importance_hand_worked():
    s = t([[2.0, -1.0, 1.0, 50.0], [0.0, 0.0, 0.0, 0.0]])
    visible = torch.tensor([[True, True, True, False], [True, True, False, False]])
    # row 0: sum |s| over the visible three = 4 -> [0.5, -0.25, 0.25, 0]; row 1 stays 0
    np.testing.assert_allclose(
        normalized_importance(s, visible).numpy(), [[0.5, -0.25, 0.25, 0.0], [0, 0, 0, 0]]
    )
    # scale-free: 1e-6 times the gradients gives the same shares
    np.testing.assert_allclose(
        normalized_importance(s * 1e-6, visible).numpy(), normalized_importance(s, visible)
    )


def test_gradcam_importance_of_a_linear_model():
    # logits[b, a] = sum_jd f[b, j, d] W[j, d, a]  ->  s_j = sum_d W[j, d, y]
    w = t([[[1.0, 0.0], [2.0, 0.0]], [[3.0, 0.0], [-4.0, 9.0]]]).requires_grad_(True)
    feats = t([[[0.5, 0.1], [0.2, 0.3]]]).requires_grad_(True)
    logits = torch.einsum("bjd,jda->ba", feats, w)
    s = gradcam_importance(logits, feats, torch.tensor([0]))
    np.testing.assert_allclose(s.detach().numpy(), [[1 + 2, 3 - 4]])
    # create_graph: a loss on s trains the weights (double backprop): d s_0 / d W[0, :, 0] = 1
    s[0, 0].backward()
    np.testing.assert_allclose(w.grad[0, :, 0].numpy(), [1.0, 1.0])
    assert float(w.grad[1].abs().sum()) == 0.0 and float(w.grad[0, :, 1].abs().sum()) == 0.0


def test_relevance_masks_drop_boxes_past_n_and_invisible():
    sets = {"q1": (np.array([0, 5]), np.array([1, 2]))}
    visible = np.array([[True, True, False, True], [True, True, True, True]])
    rel, irr = relevance_masks(sets, ["q1", "q2"], visible)
    assert rel.tolist() == [[True, False, False, False], [False] * 4]  # box 5 >= N = 4
    assert irr.tolist() == [[False, True, False, False], [False] * 4]  # box 2 not visible


def test_squint_loss_hand_worked():
    att_main = t([[0.5, 0.5, 0.0]]).requires_grad_(True)
    att_sub = t([[1.0, 0.0, 0.0]]).requires_grad_(True)
    mask = torch.tensor([[True, True, False]])
    # MSE over the 2 visible objects: ((0.5 - 1)^2 + 0.5^2) / 2 = 0.25
    # CE(o_main | att_sub = [0, 0], y = 0) = ln 2; CE(o_sub = [ln 3, 0], y = 0) = ln(4/3)
    total, parts = squint_loss(
        att_main,
        att_sub,
        mask,
        t([[0.0, 0.0]]),
        torch.tensor([0]),
        t([[math.log(3.0), 0.0]]),
        torch.tensor([0]),
    )
    assert parts["attention"] == pytest.approx(0.25)
    assert parts["main"] == pytest.approx(LN2)
    assert parts["sub"] == pytest.approx(math.log(4 / 3))
    assert total.item() == pytest.approx(0.25 + 0.1 * LN2 + math.log(4 / 3))
    assert total.item() == pytest.approx(0.6069967, abs=1e-6)
    total.backward()
    # d MSE / d att_main = 2 (a - b) / 2 = [-0.5, 0.5, 0]; the sub attention is a fixed target
    np.testing.assert_allclose(att_main.grad.numpy(), [[-0.5, 0.5, 0.0]])
    assert att_sub.grad is None


def test_subq_loss_and_cross_entropy_edges():
    total, parts = subq_loss(
        t([[0.0, 0.0]]), torch.tensor([0]), t([[math.log(3.0), 0.0]]), torch.tensor([0])
    )
    # 1/2 (ln 2 + ln 4/3) = 0.4904146
    assert total.item() == pytest.approx(0.4904146, abs=1e-6)
    assert parts == pytest.approx({"main": LN2, "sub": math.log(4 / 3)})
    # unknown answers (-100) are left out; all unknown -> 0, not NaN
    logits = t([[0.0, 0.0], [math.log(3.0), 0.0]])
    assert cross_entropy(logits, torch.tensor([-100, 0])).item() == pytest.approx(math.log(4 / 3))
    assert cross_entropy(logits, torch.tensor([-100, -100])).item() == 0.0
    # a fully masked row has no MSE term
    assert masked_mse(t([[1.0]]), t([[0.0]]), torch.tensor([[False]])).item() == 0.0


def test_answer_index_and_introspect_pairs():
    vocab = {"2": 0, "yes": 1, "dog": 2}
    assert answer_index(vocab, "yes") == 1
    assert answer_index(vocab, "two") == 0  # official normalization: number word -> digit
    assert answer_index(vocab, "zebra") == -100
    intro = parse_introspect(
        {
            "7": {
                "reasoning_question": "Is the animal wild?",
                "reasoning_answer_most_common": "no",
                "image_id": 3,
                "introspect": [
                    {
                        "pred_q_type": "perception",
                        "sub_qa": [
                            {"sub_question": "What animal is this?", "sub_answer": "dog"},
                            {"sub_question": "What animal is this?", "sub_answer": "Dog"},
                        ],
                    },
                    {
                        "pred_q_type": "invalid",
                        "sub_qa": [{"sub_question": "How many?", "sub_answer": "2"}],
                    },
                ],
            }
        },
        "intro.json",
    )
    # main 7 has a VQA record (answer "yes" on feature image "g3"); one sub after dedup
    pairs = introspect_pairs(
        intro, {"7": {"imageId": "g3", "answer": "yes"}}, vocab, lambda i, q: "unused"
    )
    assert [(p.main_id, p.sub_id, p.image_id, p.main_target, p.sub_target) for p in pairs] == [
        ("7", "7_0", "g3", 1, 2)
    ]
    # without the VQA record: the introspect answer ("no": unknown) and the mapped image
    pairs = introspect_pairs(intro, {}, vocab, lambda image, qid: f"g{image}")
    assert [(p.image_id, p.main_target) for p in pairs] == [("g3", -100)]
