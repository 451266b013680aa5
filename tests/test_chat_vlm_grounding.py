"""``-o ground_tokens``: the chat VLM's question tokens that the annotations tie to an
object are taught to attend to that object's image tokens (docs/chat-vlm.md, "Training").
Hand-worked cases for the words, the patches, the tied tokens and the loss; the option
through ``vqadiag train``; its bad values refused."""

from __future__ import annotations

import json
import math

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from vqadiag.errors import DataError
from vqadiag.models.reference import chat_vlm_build as build
from vqadiag.models.reference import chat_vlm_data as cdata
from vqadiag.models.reference.chat_vlm import TrainedChatVLM
from vqadiag.models.reference.pixel_objective import word_token_starts

#: a 64 × 64 scene: a cup in the top-left quarter, a table across the bottom half and a
#: 2 × 2 crumb inside the top-right quarter
SCENE = {
    "width": 64,
    "height": 64,
    "objects": {
        "1": {"name": "cup", "x": 0, "y": 0, "w": 32, "h": 32},
        "2": {"name": "table", "x": 0, "y": 32, "w": 64, "h": 32},
        "3": {"name": "crumb", "x": 40, "y": 10, "w": 2, "h": 2},
    },
}
QUESTION = "Is the cup on the wooden table?"


def test_question_words_are_the_annotations_words_with_their_characters():
    assert cdata.question_words("Is it red?") == [(0, 2), (3, 5), (6, 9)]
    assert cdata.question_words("Is the cup, or the plate, red?")[2] == (7, 11)  # "cup,"
    assert cdata.question_words("Who is it.") == [(0, 3), (4, 6), (7, 9)]
    # leading whitespace is not a word (as for the pixel model), and the spans stay in
    # the question as given
    assert cdata.question_words(" \tIs it red? ") == [(2, 4), (5, 7), (8, 11)]
    assert len(word_token_starts(" \tIs it red? ")) == 3


def test_object_patches_are_those_whose_centre_lies_in_the_box():
    """Grid 2 over 64 × 64: patch centres at 16 and 48. The cup (0–32) covers centre 16
    on both axes: patch 0; the table (y 32–64, x 0–64): patches 2 and 3; the crumb
    (x 40–42, y 10–12) covers no centre: the patch of its centre (41, 11), patch 1."""
    objects = SCENE["objects"]
    assert cdata.object_patches(objects["1"], SCENE, 2) == [0]
    assert cdata.object_patches(objects["2"], SCENE, 2) == [2, 3]
    assert cdata.object_patches(objects["3"], SCENE, 2) == [1]
    # grid 4 (centres 8, 24, 40, 56): the cup covers columns and rows 0–1
    assert cdata.object_patches(objects["1"], SCENE, 4) == [0, 1, 4, 5]


def _processor(question_first: bool = False):
    opts = TrainedChatVLM.resolve_options(
        {"image_size": 32, "patch_size": 16, "question_first": question_first}, None
    )
    texts = cdata.training_texts([{"question": QUESTION, "answer": "yes"}] * 20)
    return build.build_processor(build.train_tokenizer(texts, 400), opts)


def test_with_the_image_first_the_tied_words_tokens_look_at_their_objects_patches():
    """Word 2 ("cup") → the cup, words 5–6 ("wooden table", annotation "5:7") → the
    table. With the image first each token of those words (positions in the prompt with
    its 4 image tokens) is a query with the image tokens of its object as keys: patch 0,
    and patches 2 and 3."""
    processor = _processor()
    record = {"question": QUESTION, "annotations": {"question": {"2": "1", "5:7": "2"}}}
    tied = cdata.grounding(processor, record, SCENE, grid=2)
    ids = cdata.prompt_ids(processor, QUESTION, image=True, n_image_tokens=4)
    first_image = ids.index(build.IMAGE)
    by_object: dict[tuple[int, ...], list[int]] = {}
    for position, patches in tied:
        by_object.setdefault(patches, []).append(position)
    cup, table = (first_image,), (first_image + 2, first_image + 3)
    assert set(by_object) == {cup, table}
    decode = processor.tokenizer.decode
    assert decode([ids[p] for p in by_object[cup]]).strip() == "cup"
    assert decode([ids[p] for p in by_object[table]]).strip() == "wooden table"
    assert all(p > first_image + 3 for p in by_object[cup] + by_object[table])


def test_with_the_question_first_the_objects_image_tokens_look_at_its_words():
    """The same annotations, the question before the image: each image token of the cup
    (patch 0) is a query with the tokens of "cup" as keys; each of the table's (patches 2
    and 3), with those of "wooden table"."""
    processor = _processor(question_first=True)
    record = {"question": QUESTION, "annotations": {"question": {"2": "1", "5:7": "2"}}}
    tied = dict(cdata.grounding(processor, record, SCENE, grid=2))
    ids = cdata.prompt_ids(processor, QUESTION, image=True, n_image_tokens=4)
    first_image = ids.index(build.IMAGE)
    assert sorted(tied) == [first_image, first_image + 2, first_image + 3]
    decode = processor.tokenizer.decode
    assert decode([ids[k] for k in tied[first_image]]).strip() == "cup"
    assert tied[first_image + 2] == tied[first_image + 3]
    assert decode([ids[k] for k in tied[first_image + 2]]).strip() == "wooden table"
    assert max(tied[first_image + 2]) < first_image


def test_the_question_is_found_where_the_template_puts_it():
    """A question whose words also open the turn (``USER``) is tied at its own place,
    after the image, not at the role's."""
    processor = _processor()
    question = "USER: cup?"
    record = {"question": question, "annotations": {"question": {"0": "1"}}}
    tied = cdata.grounding(processor, record, SCENE, grid=2)
    ids = cdata.prompt_ids(processor, question, image=True, n_image_tokens=4)
    first_image = ids.index(build.IMAGE)
    assert tied and all(q > first_image + 3 for q, _ in tied)
    assert processor.tokenizer.decode([ids[q] for q, _ in tied]).strip() == "USER:"


def test_no_ties_without_annotations_a_scene_or_the_object():
    processor = _processor()
    bare = {"question": QUESTION}
    assert cdata.grounding(processor, bare, SCENE, grid=2) == ()
    tied = {"question": QUESTION, "annotations": {"question": {"2": "1"}}}
    assert cdata.grounding(processor, tied, None, grid=2) == ()
    unknown = {"question": QUESTION, "annotations": {"question": {"2": "99", "x": "1"}}}
    assert cdata.grounding(processor, unknown, SCENE, grid=2) == ()
    malformed = {"": "1", "3:": "1", "²": "1", "1:2:9": "1", "5:3": "1"}
    odd = {"question": QUESTION, "annotations": {"question": malformed}}
    assert cdata.grounding(processor, odd, SCENE, grid=2) == ()


def test_from_the_answer_the_prompts_last_position_looks_at_every_annotated_object():
    """``ground_from="answer"``: one pair, the prompt's last position (it predicts the
    answer's first token) with the image tokens of the cup (patch 0, named in the
    question) and the table (patches 2 and 3, named in the full answer only); the crumb,
    named by no annotation, is not a key. The same pair comes out of :func:`examples`."""
    processor = _processor(question_first=True)
    record = {"question": QUESTION, "answer": "yes", "imageId": "i",
              "annotations": {"question": {"2": "1"}, "answer": {},
                              "fullAnswer": {"0": "2", "3": "1"}}}  # fmt: skip
    ids = cdata.prompt_ids(processor, QUESTION, image=True, n_image_tokens=4)
    first_image = ids.index(build.IMAGE)
    want = ((len(ids) - 1, (first_image, first_image + 2, first_image + 3)),)
    assert cdata.answer_grounding(record, SCENE, ids, grid=2) == want
    (example,) = cdata.examples(processor, [record], {"i": 0}, 4, {"i": SCENE}, "answer")
    assert example.grounded == want and example.with_image == tuple(ids)
    (by_words,) = cdata.examples(processor, [record], {"i": 0}, 4, {"i": SCENE})
    assert by_words.grounded == cdata.grounding(processor, record, SCENE, grid=2)


def test_no_answer_grounding_without_annotations_a_scene_an_image_or_the_object():
    ids = cdata.prompt_ids(_processor(), QUESTION, image=True, n_image_tokens=4)
    tied = {"question": QUESTION, "annotations": {"question": {"2": "1"}}}
    assert cdata.answer_grounding({"question": QUESTION}, SCENE, ids, grid=2) == ()
    assert cdata.answer_grounding(tied, None, ids, grid=2) == ()
    assert cdata.answer_grounding(tied, SCENE, [5, 6, 7], grid=2) == ()
    unknown = {"question": QUESTION, "annotations": {"question": {"2": "99"}, "answer": []}}
    assert cdata.answer_grounding(unknown, SCENE, ids, grid=2) == ()
    assert cdata.answer_pair(ids, []) == () and cdata.answer_pair([5, 6, 7], [0]) == ()
    listed = {"question": QUESTION, "annotations": [["2", "1"]]}
    with pytest.raises(DataError, match="'annotations' must be an object"):
        cdata.answer_grounding(listed, SCENE, ids, grid=2)


def test_with_uniform_attention_the_grounding_loss_is_minus_log_of_the_objects_share():
    """Hand-worked: with the query weights of head 0 of layer 0 zero, that head's scores
    are all equal, so token t spreads its attention evenly over positions 0..t (causal;
    right padding is never attended). In one batch: a token at t = 9 tied to 2 image
    tokens has mass 2/10; a token at t = 11 of a longer row tied to 4 has mass 4/12; a
    row asked without its image has no pairs. The loss grows by λ · mean(−log 0.2,
    −log ⅓) and the batch's mass is mean(0.2, ⅓). Tied to every position 0..9 the mass
    is 1 and the loss does not grow."""
    import torch

    from vqadiag.models.reference.chat_vlm_data import Example
    from vqadiag.models.reference.chat_vlm_fit import answer_loss

    opts = TrainedChatVLM.resolve_options(
        {"image_size": 32, "patch_size": 16, "text_dim": 32, "text_heads": 2,
         "vision_dim": 32, "vision_heads": 2}, None,
    )  # fmt: skip
    model = build.build_llava(50, opts, 0)
    model.set_attn_implementation("eager")
    attention = model.model.language_model.layers[0].self_attn
    with torch.no_grad():
        attention.q_proj.weight[: attention.head_dim].zero_()  # head 0's queries only
    features = torch.randn(2, 4, 32)
    image = (build.IMAGE,) * 4
    short, long = (5, 6, *image, 7, 8, 9, 10), (5, 6, *image, 7, 8, 9, 10, 11, 12)
    text = (5, 6, 7, 8)
    answer = (13, build.EOS)
    plain = [Example(0, short, text, answer), Example(1, long, text, answer),
             Example(0, short, text, answer)]  # fmt: skip
    tied = [Example(0, short, text, answer, ((9, (2, 3)),)),
            Example(1, long, text, answer, ((11, (2, 3, 4, 5)),)),
            Example(0, short, text, answer, ((9, (2, 3)),))]  # fmt: skip
    asked_blind = [False, False, True]
    ground = (2.0, 0, 0)
    base, _, none = answer_loss(model, features, plain, asked_blind, ground)
    grounded, _, mass = answer_loss(model, features, tied, asked_blind, ground)
    assert none is None
    assert mass == pytest.approx((0.2 + 1 / 3) / 2, abs=1e-5)
    expected = 2.0 * (-math.log(0.2) - math.log(1 / 3)) / 2
    assert float((grounded - base).detach()) == pytest.approx(expected, abs=1e-4)
    every = [Example(0, short, text, answer, ((9, tuple(range(10))),))]
    base_one, _, _ = answer_loss(model, features, plain[:1], [False], ground)
    with_every, _, all_mass = answer_loss(model, features, every, [False], ground)
    assert all_mass == pytest.approx(1.0, abs=1e-5)
    assert float((with_every - base_one).detach()) == pytest.approx(0.0, abs=1e-4)


def test_the_training_runs_eager_attention_and_gives_the_model_back_as_it_was(world, monkeypatch):
    """Eager attention (whose weights the loss reads) only while the answers are trained
    with ``ground_tokens``; the model :func:`_fit` returns has its own attention again.
    The blind twin has no pairs: never eager, no ``ground_mass``."""
    from vqadiag.data.model_inputs.gqa_data import GQAData
    from vqadiag.models.reference import chat_vlm, chat_vlm_fit

    seen = []
    real = chat_vlm_fit.train_language

    def spy(model, *args):
        seen.append(model.config.text_config._attn_implementation)
        return real(model, *args)

    monkeypatch.setattr(chat_vlm_fit, "train_language", spy)
    options = {k: json.loads(v) for k, v in (o.split("=", 1) for o in TINY)}
    for blind in (False, True):
        opts = TrainedChatVLM.resolve_options({**options, "ground_tokens": 1, "blind": blind}, 1)
        model, _, log = chat_vlm._fit(GQAData(world), "train", 0, opts, False)
        config = model.config
        assert {config._attn_implementation, config.text_config._attn_implementation,
                config.vision_config._attn_implementation} == {"sdpa"}  # fmt: skip
        assert ("ground_mass" in log["history"][0]) is not blind
    assert seen == ["eager", "sdpa"]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    from vqadiag.synth import generate_world

    out = tmp_path_factory.mktemp("ground_world") / "world"
    generate_world(out, images=30, seed=4)
    return out


TINY = ["image_size=32", "patch_size=16", "vision_dim=32", "vision_layers=1", "vision_heads=2",
        "text_dim=32", "text_layers=2", "text_heads=2", "vocab_size=400", "pretrain_epochs=1",
        "batch_size=32"]  # fmt: skip


@pytest.mark.parametrize("ground_from", ["question", "answer"])
def test_grounded_training_through_the_cli_logs_the_attention_mass(
    run_cli, world, tmp_path, ground_from
):
    args = [a for o in TINY for a in ("-o", o)]
    out = tmp_path / "run"
    got = run_cli("train", "--model", "chat-vlm", "--data", str(world), "--out", str(out),
                  "--epochs", "2", "--quiet", "--json", *args, "-o", "ground_tokens=1",
                  "-o", "ground_layer=1", "-o", f"ground_from={ground_from}")  # fmt: skip
    assert got.exit_code == 0, got.stderr
    config = json.loads((out / "config.json").read_text())
    assert config["options"]["ground_tokens"] == 1 and config["options"]["ground_layer"] == 1
    assert config["options"]["ground_from"] == ground_from
    assert [0 < h["ground_mass"] < 1 for h in config["history"]] == [True, True]


@pytest.mark.parametrize(
    ("options", "says"),
    [
        (["ground_tokens=nan"], "ground_tokens must be a number of 0 or more, not 'nan'"),
        (["ground_tokens=-1"], "ground_tokens must be a number of 0 or more, not -1"),
        (["ground_tokens=inf"], "ground_tokens must be a number of 0 or more, not 'inf'"),
        (["ground_tokens=abc"], "ground_tokens must be a number of 0 or more, not 'abc'"),
        # a layer of the 2-layer Llama; 1.5 and true used to be read as layer 1
        (["ground_layer=2"], "ground_layer must be a whole number from 0 to 1, not 2"),
        (["ground_layer=1.5"], "ground_layer must be a whole number from 0 to 1, not 1.5"),
        (["ground_layer=true"], "ground_layer must be a whole number from 0 to 1, not True"),
        (["ground_from=words"], "ground_from must be question or answer, not 'words'"),
    ],
)
def test_bad_grounding_options_are_refused_before_training(run_cli, world, tmp_path, options, says):
    args = [a for o in options for a in ("-o", o)]
    got = run_cli("train", "--model", "chat-vlm", "--data", str(world), "--out",
                  str(tmp_path / "run"), *args)  # fmt: skip
    assert got.exit_code != 0
    assert says in got.stderr and "--option" in got.stderr
    assert not (tmp_path / "run").exists()


def test_answer_loss_says_for_each_row_whether_every_answer_token_is_the_argmax():
    """Hand-worked: with the output layer zero every logit is 0, so the argmax is token 0
    at every position (the first of equal values) and an answer is exact exactly when
    all its tokens are 0, whatever the row's length, its padding or its image."""
    import torch

    from vqadiag.models.reference.chat_vlm_data import Example
    from vqadiag.models.reference.chat_vlm_fit import answer_loss

    opts = TrainedChatVLM.resolve_options(
        {"image_size": 32, "patch_size": 16, "text_dim": 32, "text_heads": 2,
         "vision_dim": 32, "vision_heads": 2}, None,
    )  # fmt: skip
    model = build.build_llava(50, opts, 0)
    with torch.no_grad():
        model.lm_head.weight.zero_()
    features = torch.randn(2, 4, 32)
    short, long = (5, 6, *(build.IMAGE,) * 4, 7), (5, 6, *(build.IMAGE,) * 4, 7, 8, 9, 10)
    text = (5, 6, 7)
    answers = [(0, 0), (0, 13), (13, 0), (0,), (0, 0, 0)]
    chosen = [Example(i % 2, long if i % 2 else short, text, a) for i, a in enumerate(answers)]
    _, exact, _ = answer_loss(model, features, chosen, [False, False, True, True, False])
    assert exact.tolist() == [True, False, False, True, True]
    assert not exact.requires_grad
