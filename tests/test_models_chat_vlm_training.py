"""``vqadiag train --model chat-vlm``: a tiny configuration trained in seconds on a small
world gives a ``save_pretrained`` folder that transformers and ``hf:`` load and that
answers; the same seed gives the same weights; the blind twin cannot see the image; the
training sequences are the processor's (docs/chat-vlm.md)."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from tiny_vlm import lmms_eval_samples, needs_lmms_eval

TINY = ["image_size=32", "patch_size=16", "vision_dim=32", "vision_layers=1", "vision_heads=2",
        "text_dim=32", "text_layers=1", "text_heads=2", "vocab_size=400", "pretrain_epochs=1",
        "batch_size=32"]  # fmt: skip


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    from vqadiag.synth import generate_world

    out = tmp_path_factory.mktemp("chat_world") / "world"
    generate_world(out, images=30, seed=4)
    return out


@pytest.fixture(scope="module")
def trained(world, tmp_path_factory):
    import transformers
    from typer.testing import CliRunner

    from vqadiag.cli.main import app

    # as in a fresh process (an earlier test's hf: load turns transformers' bars off)
    transformers.utils.logging.enable_progress_bar()
    out = tmp_path_factory.mktemp("chat_runs")
    runs = {}
    for name, extra in (("a", ()), ("b", ()), ("seed1", ("--seed", "1")),
                        ("blind", ("-o", "blind=true")),
                        ("question_first", ("-o", "question_first=true"))):  # fmt: skip
        args = [a for o in TINY for a in ("-o", o)]
        got = CliRunner().invoke(app, ["train", "--model", "chat-vlm", "--data", str(world),
                                       "--out", str(out / name), "--epochs", "2", "--quiet",
                                       "--json", *args, *extra])  # fmt: skip
        assert got.exit_code == 0, got.output
        assert "Writing model shards" not in got.output  # no stray bar of transformers'
        runs[name] = json.loads(got.stdout)
    return out, runs


def _val_batch(world, n=12):
    from vqadiag.data.model_inputs.gqa_data import GQAData

    data = GQAData(world)
    qids = list(data.questions("val"))[:n]
    batch = data.batch("val", qids)
    return data, batch, data.pixel_input(list(batch.image_ids))


def test_the_run_is_a_plain_transformers_folder_that_hf_loads_and_that_answers(trained, world):
    import transformers

    from vqadiag.models.registry import load_model_spec

    out, runs = trained
    folder = out / "a" / "model"
    for name in ("config.json", "model.safetensors", "tokenizer.json", "processor_config.json"):
        assert (folder / name).is_file(), name
    processor = transformers.AutoProcessor.from_pretrained(folder, local_files_only=True)
    model = transformers.AutoModelForImageTextToText.from_pretrained(folder, local_files_only=True)
    assert type(model).__name__ == "LlavaForConditionalGeneration"
    assert "ASSISTANT:" in processor.chat_template
    _, batch, pixels = _val_batch(world)
    by_hf = load_model_spec(f"hf:{folder}", {"batch_size": 1}).predict(batch, pixels)
    by_run = load_model_spec(str(out / "a")).predict(batch, pixels)
    assert by_hf.answers == by_run.answers
    assert all(isinstance(a, str) for a in by_hf.answers) and any(by_hf.answers)
    assert by_hf.texts == by_run.texts and len(by_hf.texts) == len(batch)  # generated texts
    assert runs["a"]["val"]["questions"] > 0 and runs["a"]["val"]["accuracy"] is not None
    # the vision pre-training's patch names, on the training and the held-out images
    keys = {"loss", "name_acc", "object_name_acc", "held_out_name_acc", "held_out_object_name_acc"}
    assert set(runs["a"]["pretrain"]) == keys | {"images"}
    assert json.loads((out / "a" / "config.json").read_text())["pretrain"] == runs["a"]["pretrain"]
    assert "held_out_name_acc" not in runs["blind"]["pretrain"]  # the twin sees no image


def test_the_same_seed_gives_the_same_weights_and_another_seed_other_ones(trained):
    out, runs = trained
    configs = {k: json.loads((out / k / "config.json").read_text()) for k in runs}
    assert configs["a"]["model_digest"] == configs["b"]["model_digest"]
    assert (out / "a/model/model.safetensors").read_bytes() == (
        out / "b/model/model.safetensors"
    ).read_bytes()
    assert runs["a"]["fingerprint"] == runs["b"]["fingerprint"]
    assert configs["a"]["model_digest"] != configs["seed1"]["model_digest"]
    assert configs["a"]["trained_as"] == "chat-vlm" and configs["a"]["model"] == "hf-chat"


def test_the_blind_twin_answers_the_same_whatever_image_it_is_shown(trained, world):
    from safetensors.numpy import load_file

    from vqadiag.models.registry import load_model_spec

    out, _ = trained
    weights = load_file(out / "blind/model/model.safetensors")
    patch = [v for k, v in weights.items() if k.endswith("patch_embedding.weight")]
    assert len(patch) == 1 and not patch[0].any()
    _, batch, pixels = _val_batch(world)
    model = load_model_spec(f"hf:{out / 'blind' / 'model'}", {"batch_size": 1})
    seen = model.predict(batch, pixels).answers
    rng = np.random.default_rng(0)
    noise = [rng.integers(0, 256, im.shape, dtype=np.uint8) for im in pixels.images]
    assert model.predict(batch, replace(pixels, images=noise)).answers == seen
    # the sighted model's patch embedding is not zero: it can see
    sighted = load_file(out / "a/model/model.safetensors")
    assert any(v.any() for k, v in sighted.items() if k.endswith("patch_embedding.weight"))


@pytest.mark.parametrize("run", ["a", "question_first"])
def test_training_sequences_are_the_processors_tokens(trained, world, run):
    import transformers

    from vqadiag.models.reference.chat_vlm_data import prompt_ids, user_prompt

    out, _ = trained
    processor = transformers.AutoProcessor.from_pretrained(
        out / run / "model", local_files_only=True
    )
    _, batch, pixels = _val_batch(world, 3)
    for question, image in zip(batch.questions, pixels.images, strict=True):
        text = user_prompt(processor, question, image=True)
        asked = f"{question}\nAnswer the question using a single word or phrase."
        first = f"USER: {asked}\n<image>ASSISTANT:" if run == "question_first" else None
        assert text == (first or f"USER: <image>\n{asked}ASSISTANT:")
        enc = processor(images=[[image]], text=[text], return_tensors="pt")
        assert enc["input_ids"][0].tolist() == prompt_ids(
            processor, question, image=True, n_image_tokens=4
        )
        alone = user_prompt(processor, question, image=False)
        assert alone == f"USER: {asked}ASSISTANT:"
        assert processor(text=[alone])["input_ids"][0] == prompt_ids(
            processor, question, image=False, n_image_tokens=0
        )


def test_a_question_first_model_loads_and_answers_through_hf(trained, world):
    from vqadiag.models.registry import load_model_spec

    out, _ = trained
    run = out / "question_first"
    assert json.loads((run / "config.json").read_text())["options"]["question_first"] is True
    _, batch, pixels = _val_batch(world)
    by_hf = load_model_spec(f"hf:{run / 'model'}", {"batch_size": 1}).predict(batch, pixels)
    assert by_hf.answers == load_model_spec(str(run)).predict(batch, pixels).answers
    assert all(isinstance(a, str) for a in by_hf.answers) and len(by_hf.texts) == len(batch)


def test_unknown_options_are_refused_before_training(run_cli, world, tmp_path):
    got = run_cli("train", "--model", "chat-vlm", "--data", world, "--out", tmp_path / "r",
                  "-o", "hidden=3", "--quiet")  # fmt: skip
    assert got.exit_code != 0 and "unknown chat-vlm option" in got.stderr
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("value", ["no", "False", "2", "[]"])
def test_an_on_off_option_that_is_not_true_or_false_is_refused(run_cli, world, tmp_path, value):
    got = run_cli("train", "--model", "chat-vlm", "--data", world, "--out", tmp_path / "r",
                  "-o", f"question_first={value}", "--quiet")  # fmt: skip
    assert got.exit_code != 0 and "question_first must be true or false" in got.stderr
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("gpu", "device must be a PyTorch device (cpu, cuda …), not 'gpu'"),
        ("mps", "device 'mps': chat-vlm trains on cpu or cuda"),
        ("cuda", "device 'cuda': this machine's PyTorch has no CUDA"),
    ],
)
def test_a_device_this_machine_cannot_train_on_is_refused(run_cli, world, tmp_path, value,
                                                          message):  # fmt: skip
    import torch

    if value == "cuda" and torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    got = run_cli("train", "--model", "chat-vlm", "--data", world, "--out", tmp_path / "r",
                  "-o", f"device={value}", "--quiet")  # fmt: skip
    assert got.exit_code != 0 and message in got.stderr
    assert len(got.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "r").exists()


def test_on_off_options_take_true_false_1_and_0():
    from vqadiag.models.reference.chat_vlm import TrainedChatVLM

    for given, read in ((True, True), (1, True), (False, False), (0, False)):
        opts = TrainedChatVLM.resolve_options({"blind": given, "question_first": given}, None)
        assert opts["blind"] is read and opts["question_first"] is read


@pytest.mark.parametrize("run", ["a", "question_first"])
def test_in_process_answers_equal_those_behind_transformers_serve(run_cli, trained, world,
                                                                  tmp_path, run):  # fmt: skip
    pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")
    from tiny_vlm import transformers_serve

    folder = (trained[0] / run / "model").resolve()
    runs = {"local": (f"hf:{folder}", "batch_size=1")}
    with transformers_serve(folder, tmp_path / "serve.log") as url:
        runs["served"] = (f"openai:{url}", f"model={folder},in_flight=4")
        for name, (model, args) in runs.items():
            got = run_cli("diagnose", "--data", world, "--model", model, "--out", tmp_path / name,
                          "--suite", "accuracy,gain", "--max-questions", "24", "--n-bootstrap",
                          "20", "--json", "--model-args", args)  # fmt: skip
            assert got.exit_code == 0, got.stderr
    local, served = (tmp_path / k / "per_question.jsonl" for k in ("local", "served"))
    assert '"noimage":' in local.read_text()  # the text-only answers are compared too
    assert local.read_bytes() == served.read_bytes()


@pytest.mark.parametrize("run", ["a", "question_first"])
def test_an_image_placeholder_in_a_string_turn_goes_where_the_template_puts_the_image(trained, run):
    """A harness that writes the image placeholder into one string before the question
    (lmms-eval's simple ``llava_hf``, through the tokenizer's template) gets the turn the
    parts give: the question first too."""
    from transformers import AutoProcessor

    processor = AutoProcessor.from_pretrained(trained[0] / run / "model")
    text = "What color is the cat?\nAnswer the question using a single word or phrase."

    def turn(content, renderer=processor):
        messages = [{"role": "user", "content": content}]
        return renderer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)

    parts = turn([{"type": "image"}, {"type": "text", "text": text}])
    if run == "question_first":
        assert parts == f"USER: {text}\n<image>ASSISTANT:"
        assert turn(f"<image> <image>\n{text}") == f"USER: {text}\n<image>\n<image>ASSISTANT:"
        assert turn(f"{text}\n<image>") == parts  # already in the template's order
    else:
        assert parts == f"USER: <image>\n{text}ASSISTANT:"
    assert turn(f"<image>\n{text}") == turn(f"<image>\n{text}", processor.tokenizer) == parts
    assert turn(text) == turn([{"type": "text", "text": text}]) == f"USER: {text}ASSISTANT:"


def _redrawn_weights(folder, out):
    """A copy of the model folder (processor, tokenizer, template and config as trained)
    with its weights redrawn from a seeded normal: the tiny trained model answers nearly
    every question alike, a random one differently for every prompt and image."""
    import shutil

    import torch
    from transformers import AutoModelForImageTextToText

    shutil.copytree(folder, out)
    model = AutoModelForImageTextToText.from_pretrained(out)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for weights in model.parameters():
            weights.copy_(torch.randn(weights.shape, generator=generator) * 0.5)
    model.save_pretrained(out)
    return out


@pytest.mark.slow
@needs_lmms_eval
@pytest.mark.parametrize("implementation", ["chat", "simple"])
@pytest.mark.parametrize("run", ["a", "question_first"])
def test_in_process_answers_equal_those_of_lmms_evals_llava_hf(
    run_cli, trained, world, tmp_path, run, implementation
):
    """The folder ``vqadiag train`` writes, in the real lmms-eval (its Hugging Face LLaVA
    model, no vqadiag code), answers the exported conditions, FPVG's masked images
    included, as ``hf:`` does, through lmms-eval's chat implementation and its simple one
    (which writes ``<image>\\n`` before the question in one string). The gain suite is
    left out: an export asks every item with an image, so a harness's no-image condition
    is the blank image, where ``hf:`` asks the text alone (another condition,
    docs/diagnose.md)."""
    folder = _redrawn_weights(trained[0] / run / "model", tmp_path / "model").resolve()
    common = ("--suite", "accuracy,fpvg", "--max-questions", "12")
    export = tmp_path / "export"
    got = run_cli("conditions", "export", "--data", world, "--out", export, "--format",
                  "lmms-eval", *common, "--max-new-tokens", "8")  # fmt: skip
    assert got.exit_code == 0, got.stderr
    samples = lmms_eval_samples(folder, export, tmp_path, simple=implementation == "simple")
    runs = {"local": (f"hf:{folder}", "batch_size=1,max_new_tokens=8"),
            "harness": (f"files:{samples}", f"conditions={export}")}  # fmt: skip
    for name, (model, args) in runs.items():
        got = run_cli("diagnose", "--data", world, "--model", model, "--out", tmp_path / name,
                      *common, "--n-bootstrap", "20", "--json", "--model-args", args)  # fmt: skip
        assert got.exit_code == 0, got.stderr
    local, harness = (tmp_path / k / "per_question.jsonl" for k in runs)
    rows = [json.loads(line) for line in local.read_text().splitlines()]
    answers = [row["raw"]["all"] for row in rows if row["suite"] == "accuracy"]
    assert len(set(answers)) > len(answers) // 2, answers  # each prompt its own answer
    assert "irrel" in rows[-1]["raw"]  # the masked images are compared too
    assert local.read_bytes() == harness.read_bytes()


def test_augmented_patch_labels_follow_the_mirrored_and_moved_pixels():
    """``pretrain_augment``: a mirrored image's labels are the mirrored grid, an image moved
    by one patch has its labels moved by one patch (background where it left), and
    :func:`augment` moves the pixels the same way."""
    import torch

    from vqadiag.models.reference.chat_vlm_data import augment, patch_labels

    scene = {"width": 64, "height": 64, "objects": {
        "1": {"name": "dog", "x": 0, "y": 0, "w": 20, "h": 40, "attributes": ["white"]},
        "2": {"name": "cat", "x": 40, "y": 16, "w": 24, "h": 16, "attributes": []}}}  # fmt: skip
    names, attrs = {"dog": 1, "cat": 2}, {"white": 0}
    plain, plain_attr = patch_labels(scene, 4, names, attrs)
    grid = plain.reshape(4, 4)
    mirrored, _ = patch_labels(scene, 4, names, attrs, flip=True)
    assert (mirrored.reshape(4, 4) == grid[:, ::-1]).all()
    moved, moved_attr = patch_labels(scene, 4, names, attrs, shift=(0.25, -0.25))
    expected = np.zeros((4, 4), dtype=grid.dtype)
    expected[:3, 1:] = grid[1:, :3]
    assert (moved.reshape(4, 4) == expected).all()
    assert moved_attr.sum() == plain_attr.reshape(4, 4, 1)[1:, :3].sum()

    pixels = torch.arange(2 * 3 * 8 * 8, dtype=torch.float32).reshape(2, 3, 8, 8) + 1
    out = augment(pixels, np.array([True, False]), np.array([[0, 0], [2, -2]]))
    assert torch.equal(out[0], pixels[0].flip(-1))
    assert torch.equal(out[1, :, :6, 2:], pixels[1, :, 2:, :6])
    assert (out[1, :, 6:] == 0).all() and (out[1, :, :, :2] == 0).all()


def test_overlap_labels_give_a_patch_to_every_box_that_touches_it():
    """``patch_labels=overlap``: a patch is labelled by the smallest box sharing any area
    with it. The dog (x 0–20, y 0–40 of 64 × 64 in 16-pixel patches) touches columns 0–1
    of rows 0–2 and owns two centres; the cat (x 40–64, y 16–32) touches row 1 of columns
    2–3 only (its bottom edge is row 2's top edge). Mirrored and moved images follow."""
    from vqadiag.models.reference.chat_vlm_data import patch_labels

    scene = {"width": 64, "height": 64, "objects": {
        "1": {"name": "dog", "x": 0, "y": 0, "w": 20, "h": 40, "attributes": ["white"]},
        "2": {"name": "cat", "x": 40, "y": 16, "w": 24, "h": 16, "attributes": []}}}  # fmt: skip
    names, attrs = {"dog": 1, "cat": 2}, {"white": 0}
    centre, _ = patch_labels(scene, 4, names, attrs)
    assert centre.reshape(4, 4).tolist() == [[1, 0, 0, 0], [1, 0, 2, 2], [0] * 4, [0] * 4]
    overlap, overlap_attr = patch_labels(scene, 4, names, attrs, rule="overlap")
    grid = overlap.reshape(4, 4)
    assert grid.tolist() == [[1, 1, 0, 0], [1, 1, 2, 2], [1, 1, 0, 0], [0, 0, 0, 0]]
    assert overlap_attr[:, 0].reshape(4, 4).tolist() == (grid == 1).astype(float).tolist()
    mirrored, _ = patch_labels(scene, 4, names, attrs, flip=True, rule="overlap")
    assert (mirrored.reshape(4, 4) == grid[:, ::-1]).all()
    moved, _ = patch_labels(scene, 4, names, attrs, shift=(0.25, -0.25), rule="overlap")
    expected = np.zeros((4, 4), dtype=grid.dtype)
    expected[:3, 1:] = grid[1:, :3]
    assert (moved.reshape(4, 4) == expected).all()
    # the smaller of two touching boxes wins; an empty box touches nothing
    scene["objects"]["3"] = {"name": "cat", "x": 15, "y": 15, "w": 2, "h": 2}
    scene["objects"]["4"] = {"name": "dog", "x": 50, "y": 50, "w": 0, "h": 10}
    small, _ = patch_labels(scene, 4, names, attrs, rule="overlap")
    assert small.reshape(4, 4).tolist() == [[2, 2, 0, 0], [2, 2, 2, 2], [1, 1, 0, 0], [0] * 4]
    with pytest.raises(ValueError, match="patch label rule must be one of centre, overlap"):
        patch_labels(scene, 4, names, attrs, rule="corner")


def test_a_patch_label_rule_that_is_not_known_is_refused(run_cli, world, tmp_path):
    got = run_cli("train", "--model", "chat-vlm", "--data", world, "--out", tmp_path / "r",
                  "-o", "patch_labels=corner", "--quiet")  # fmt: skip
    assert got.exit_code != 0
    assert "patch_labels must be centre or overlap, not 'corner'" in got.stderr
    assert not (tmp_path / "r").exists()


def test_augmented_pre_training_is_seeded_and_deterministic(trained, world, tmp_path):
    """``pretrain_augment=true``: the same seed gives the same bytes; the draws change the
    weights (against the plain run ``a`` of the same seed)."""
    from vqadiag.data.model_inputs.gqa_data import GQAData
    from vqadiag.models.reference.chat_vlm import TrainedChatVLM

    out, _ = trained
    options = {k: json.loads(v) for k, v in (o.split("=", 1) for o in TINY)}
    blobs = []
    for name in ("x", "y"):
        model = TrainedChatVLM.train(
            GQAData(world), epochs=2, progress=False, pretrain_augment=True, **options
        )
        model.save(tmp_path / name)
        blobs.append((tmp_path / name / "model/model.safetensors").read_bytes())
    assert blobs[0] == blobs[1]
    assert blobs[0] != (out / "a/model/model.safetensors").read_bytes()


def test_a_caption_lists_the_largest_objects_from_left_to_right():
    """Hand-worked: areas 400 (a), 300 (b), 100 (c), 300 (d); the three largest are a, b
    and d (b before d: equal areas, ids in order); left to right by box centre: d (x 5),
    a (x 30), b (x 60)."""
    from vqadiag.models.reference.chat_vlm_data import caption

    scene = {"objects": {
        "a": {"name": "dog", "x": 20, "y": 0, "w": 20, "h": 20, "attributes": ["white", "small"]},
        "b": {"name": "cat", "x": 50, "y": 0, "w": 20, "h": 15, "attributes": []},
        "c": {"name": "cup", "x": 0, "y": 0, "w": 10, "h": 10, "attributes": ["red"]},
        "d": {"name": "sign", "x": 0, "y": 30, "w": 10, "h": 30, "attributes": ["metal"]},
    }}  # fmt: skip
    assert caption(scene, 3) == "metal sign, white small dog, cat"
    assert caption(scene, 1) == "white small dog"
    assert caption(scene, 9) == "red cup, metal sign, white small dog, cat"


def test_held_out_patches_are_labelled_with_the_training_splits_names(monkeypatch):
    """The held-out patch names use the training split's name index: "cat" is the more
    frequent name in val but index 2 (train's) all the same."""
    from vqadiag.errors import DataError
    from vqadiag.models.reference import chat_vlm, chat_vlm_data

    def scene(*names):
        objects = {str(i): {"name": n, "x": 32 * i, "y": 0, "w": 32, "h": 64}
                   for i, n in enumerate(names)}  # fmt: skip
        return {"width": 64, "height": 64, "objects": objects}

    class Data:
        root = "world"

        def __init__(self):
            self.scenes = {"train": {"1": scene("dog", "cat"), "2": scene("dog")},
                           "val": {"3": scene("cat", "cat"), "4": scene("dog", "cat")}}  # fmt: skip

        def scene_graphs(self, split):
            if split not in self.scenes:
                raise DataError("world", f"no {split} scene graphs")
            return self.scenes[split]

        def questions(self, split):
            return {f"q{i}": {"imageId": i} for i in self.scenes[split]}

    monkeypatch.setattr(chat_vlm_data, "pixel_values", lambda p, d, ids: list(ids))
    _, names, _ = chat_vlm_data.patch_vocabulary(Data(), "train", 4)
    assert names == {"<background>": 0, "dog": 1, "cat": 2}
    pixels, labels = chat_vlm.held_out_patches(Data(), "train", None, 2, names)
    assert pixels == ["3", "4"]
    assert labels.tolist() == [[2, 2, 2, 2], [1, 2, 1, 2]]
    assert chat_vlm.held_out_patches(Data(), "val", None, 2, names) is None  # no testdev
    # a per-image labeller replaces the rule: here each patch named by the image's id

    def by_id(image_id, scene, flip, shift):
        return np.full(4, int(image_id)), np.zeros((4, 0), dtype=np.float32)

    _, labels = chat_vlm.held_out_patches(Data(), "train", None, 2, names, label_image=by_id)
    assert labels.tolist() == [[3, 3, 3, 3], [4, 4, 4, 4]]


def test_caption_examples_are_never_asked_without_the_image(world, monkeypatch):
    """``caption_objects``: every training image adds a caption example, asked with its
    image even when ``text_only`` sends every question without it; the training log has
    the held-out patch names."""
    from vqadiag.data.model_inputs.gqa_data import GQAData
    from vqadiag.models.reference import chat_vlm_fit
    from vqadiag.models.reference.chat_vlm import TrainedChatVLM

    seen = []
    real = chat_vlm_fit.answer_loss

    def spy(model, features, chosen, text_only, *rest):
        seen.extend(
            (bool(ex.text_only), blind) for ex, blind in zip(chosen, text_only, strict=True)
        )
        return real(model, features, chosen, text_only, *rest)

    monkeypatch.setattr(chat_vlm_fit, "answer_loss", spy)
    options = {k: json.loads(v) for k, v in (o.split("=", 1) for o in TINY)}
    data = GQAData(world)
    model = TrainedChatVLM.train(data, epochs=1, progress=False, text_only=1.0,
                                 caption_objects=3, **options)  # fmt: skip
    images = {str(r["imageId"]) for r in data.questions("train").values()}
    questions = sum(1 for r in data.questions("train").values() if r.get("answer") is not None)
    assert len(seen) == questions + len(images)
    assert sum(1 for is_question, blind in seen if is_question and blind) == questions
    assert sum(1 for is_question, blind in seen if not is_question and not blind) == len(images)
    assert {"held_out_name_acc", "held_out_object_name_acc"} <= set(model.training_log["pretrain"])


def test_patch_name_hits_count_all_patches_and_those_with_an_object():
    """Hand-worked: predicted [0, 1, 2, 2, 3] against [0, 1, 1, 0, 3]: 3 of 5 patches right
    (60%); 3 patches have an object (truth ≠ 0), 2 of them right (66.7%)."""
    import torch

    from vqadiag.models.reference.chat_vlm_fit import _NameHits

    hits = _NameHits()
    hits.add(torch.tensor([[0, 1, 2]]), torch.tensor([[0, 1, 1]]))
    hits.add(torch.tensor([[2, 3]]), torch.tensor([[0, 3]]))
    assert hits.stats("x_") == pytest.approx({"x_name_acc": 60.0, "x_object_name_acc": 200 / 3})


def test_pre_training_trains_the_heads_it_is_given_and_the_same_as_fresh_ones():
    """Heads passed to ``pretrain_vision`` are the ones it trains (so the caller can read
    the tower through them after), and training given ``pretraining_heads`` made at the
    point it would make them gives the same tower, byte for byte."""
    import torch

    from vqadiag.models.reference import chat_vlm_build as build
    from vqadiag.models.reference import chat_vlm_fit as fit
    from vqadiag.models.reference.chat_vlm import TrainedChatVLM

    options = {k: json.loads(v) for k, v in (o.split("=", 1) for o in TINY)}
    opts = TrainedChatVLM.resolve_options({**options, "pretrain_epochs": 2}, None)
    pixels = torch.randn(6, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    names = np.array([[0, 1, 2, 1]] * 6)
    attrs = np.zeros((6, 4, 3), dtype=np.float32)
    attrs[:, 1, 0] = 1.0

    def label(flips=None, shifts=None):
        return names, attrs

    towers = []
    for given in (False, True):
        torch.manual_seed(0)
        model = build.build_llava(60, opts, 0)
        heads = fit.pretraining_heads(model, 3, 3) if given else None
        start = None if heads is None else [p.detach().clone() for p in heads.parameters()]
        fit.pretrain_vision(model, pixels, label, 3, opts, np.random.default_rng(0), False,
                            None, heads)  # fmt: skip
        if heads is not None:
            trained = list(heads.parameters())
            assert all(not torch.equal(a, b) for a, b in zip(start, trained, strict=True))
            assert [tuple(p.shape) for p in trained] == [(3, 32), (3,), (3, 32), (3,)]
        towers.append(model.model.vision_tower.state_dict())
    assert all(torch.equal(towers[0][k], towers[1][k]) for k in towers[0])


def test_the_tuned_tower_layers_finish_the_features_llava_reads():
    """``tune_tower_layers`` K: the states kept for the last K layers, run through them
    with the class token dropped, are the features LLaVA reads, exactly."""
    import torch

    from vqadiag.models.reference import chat_vlm_build as build
    from vqadiag.models.reference import chat_vlm_fit as fit
    from vqadiag.models.reference.chat_vlm import TrainedChatVLM

    options = {k: json.loads(v) for k, v in (o.split("=", 1) for o in TINY)}
    opts = TrainedChatVLM.resolve_options({**options, "vision_layers": 3}, None)
    model = build.build_llava(60, opts, 0)
    pixels = torch.randn(2, 3, 32, 32)
    # LLaVA's own image features: one (patches, text width) tensor per image
    projected = torch.cat(model.get_image_features(pixel_values=pixels).pooler_output)
    for tuned in (0, 1, 3):
        states = fit.encode_images(model, pixels, tuned=tuned)
        assert states.shape[1] == (4 if tuned == 0 else 5)
        features = fit.image_features(model, states, tuned)
        got = model.model.multi_modal_projector(features).flatten(0, 1)
        assert torch.equal(got, projected)


def test_tune_tower_layers_trains_the_last_tower_layers_and_nothing_else_of_the_tower(
    world, monkeypatch
):
    """With ``tune_tower_layers=1`` of 2, the answering stage changes the tower's last
    layer and leaves its first layer and its embeddings as pre-training left them."""
    import torch

    from vqadiag.data.model_inputs.gqa_data import GQAData
    from vqadiag.models.reference import chat_vlm, chat_vlm_fit
    from vqadiag.models.reference.chat_vlm import TrainedChatVLM

    before = {}
    real = chat_vlm_fit.train_language

    def spy(model, *args):
        before.update({k: v.clone() for k, v in model.model.vision_tower.state_dict().items()})
        return real(model, *args)

    monkeypatch.setattr(chat_vlm_fit, "train_language", spy)
    options = {k: json.loads(v) for k, v in (o.split("=", 1) for o in TINY)}
    opts = TrainedChatVLM.resolve_options(
        {**options, "vision_layers": 2, "tune_tower_layers": 1}, 1
    )
    model, _, _ = chat_vlm._fit(GQAData(world), "train", 0, opts, False)
    after = model.model.vision_tower.state_dict()
    changed = {k for k in before if not torch.equal(before[k], after[k])}
    assert changed and all(k.startswith("encoder.layers.1.") for k in changed)


@pytest.mark.parametrize("value", ["-1", "2", "1.5", "true", '"a"'])
def test_a_tune_tower_layers_outside_the_tower_is_refused(run_cli, world, tmp_path, value):
    args = [a for o in TINY for a in ("-o", o)]
    got = run_cli("train", "--model", "chat-vlm", "--data", world, "--out", tmp_path / "r",
                  *args, "-o", f"tune_tower_layers={value}", "--quiet")  # fmt: skip
    assert (
        got.exit_code != 0 and "tune_tower_layers must be a whole number from 0 to 1" in got.stderr
    )
    assert not (tmp_path / "r").exists()


def test_scene_questions_are_trained_on_and_counted_in_the_run(run_cli, world, tmp_path):
    """``scene_questions``: the run trains on the split's questions and K re-targeted
    ones per training image (docs/chat-vlm.md, "Scene questions"), counted in its
    config; the same seed gives the same weights."""
    from vqadiag.data.model_inputs.gqa_data import GQAData
    from vqadiag.models.reference.chat_vlm_scene_questions import scene_questions

    data = GQAData(world)
    records = [r for r in data.questions("train").values() if r.get("answer") is not None]
    images = sorted({str(r["imageId"]) for r in records})
    expected = len(scene_questions(records, data.scene_graphs("train"), images, 3, 0))
    assert expected > len(images)  # most images have an object to ask about
    digests = []
    for name in ("a", "b"):
        got = run_cli("train", "--model", "chat-vlm", "--data", world, "--out", tmp_path / name,
                      "--epochs", "1", "--quiet", *(a for o in TINY for a in ("-o", o)),
                      "-o", "scene_questions=3")  # fmt: skip
        assert got.exit_code == 0, got.stderr
        config = json.loads((tmp_path / name / "config.json").read_text())
        assert config["scene_questions"] == expected
        assert config["options"]["scene_questions"] == 3
        digests.append(config["model_digest"])
    assert digests[0] == digests[1]


def test_object_groups_join_an_images_patches_of_one_name_and_attributes():
    """Hand-worked: image 0 has background, two patches of name 3 (the same attributes)
    and one of name 5; image 1 two patches of name 2 with attributes (1, 0) and one of
    name 2 with (0, 1). Ids run across the batch; within an image they follow the sorted
    (name, attributes) keys, so (2, 0, 1) comes before (2, 1, 0)."""
    from vqadiag.models.reference.chat_vlm_fit import object_groups

    names = np.array([[0, 3, 3, 5], [2, 2, 0, 2]])
    attrs = np.zeros((2, 4, 2), dtype=np.float32)
    attrs[0, 1:3, 0] = 1.0
    attrs[1, :2, 0] = 1.0
    attrs[1, 3, 1] = 1.0
    assert object_groups(names, attrs).tolist() == [[-1, 0, 0, 1], [3, 3, -1, 2]]
    assert object_groups(np.zeros((1, 3), dtype=np.int64), np.zeros((1, 3, 2))).tolist() == [
        [-1, -1, -1]
    ]


def test_the_object_loss_reads_the_mean_of_an_objects_patches():
    """Hand-worked: an object on two patches with states (1, 0) and (3, 2), after two
    background patches at (9, 9). Name head the identity, attribute head (1, −1): the
    mean (2, 1) gives name logits (2, 1) for name 0, cross-entropy log(1 + e^−1), and
    attribute logit 1 for a true attribute, binary cross-entropy log(1 + e^−1):
    2 log(1 + e^−1) = 0.62652. A batch without an object gives 0."""
    import math

    import torch

    from vqadiag.models.reference.chat_vlm_fit import object_loss

    name_head, attr_head = torch.nn.Linear(2, 2), torch.nn.Linear(2, 1)
    with torch.no_grad():
        name_head.weight.copy_(torch.eye(2))
        name_head.bias.zero_()
        attr_head.weight.copy_(torch.tensor([[1.0, -1.0]]))
        attr_head.bias.zero_()
    heads = torch.nn.ModuleList([name_head, attr_head])
    # two background patches first: the object's labels are read among its own patches
    feats = torch.tensor([[[9.0, 9.0], [9.0, 9.0], [1.0, 0.0], [3.0, 2.0]]])
    names = torch.tensor([[1, 1, 0, 0]])
    attrs = torch.tensor([[[0.0], [0.0], [1.0], [1.0]]])
    loss = object_loss(heads, feats, names, attrs, np.array([[-1, -1, 0, 0]]))
    assert loss.item() == pytest.approx(2 * math.log1p(math.exp(-1)), abs=1e-6)
    assert object_loss(heads, feats, names, attrs, np.array([[-1, -1, -1, -1]])).item() == 0.0


def test_the_object_loss_changes_the_pre_trained_tower_and_takes_a_weight_of_0_or_more():
    """``pretrain_object_loss`` > 0 trains another tower than 0 does from the same start;
    a negative or not-a-number weight is refused before training."""
    import torch

    from vqadiag.errors import DataError
    from vqadiag.models.reference import chat_vlm_build as build
    from vqadiag.models.reference import chat_vlm_fit as fit
    from vqadiag.models.reference.chat_vlm import TrainedChatVLM

    options = {k: json.loads(v) for k, v in (o.split("=", 1) for o in TINY)}
    pixels = torch.randn(6, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    names = np.array([[0, 1, 1, 2]] * 6)
    attrs = np.zeros((6, 4, 3), dtype=np.float32)
    attrs[:, 1:3, 0] = 1.0

    def label(flips=None, shifts=None):
        return names, attrs

    towers = []
    for weight in (0.0, 1.0):
        opts = TrainedChatVLM.resolve_options(
            {**options, "pretrain_epochs": 2, "pretrain_object_loss": weight}, None
        )
        torch.manual_seed(0)
        model = build.build_llava(60, opts, 0)
        fit.pretrain_vision(model, pixels, label, 3, opts, np.random.default_rng(0))
        towers.append(model.model.vision_tower.state_dict())
    assert any(not torch.equal(towers[0][k], towers[1][k]) for k in towers[0])
    for bad in (-1.0, float("nan")):
        with pytest.raises(DataError, match="pretrain_object_loss"):
            TrainedChatVLM.resolve_options({"pretrain_object_loss": bad}, None)


@pytest.mark.parametrize("epochs", [1.5, True, -1])
def test_epochs_from_python_are_checked_before_they_are_used(epochs):
    """``TrainedChatVLM.train(epochs=…)`` resolves its options with the epochs in them:
    1.5 and True used to be read as 1 epoch."""
    from vqadiag.errors import DataError
    from vqadiag.models.reference.chat_vlm import TrainedChatVLM

    with pytest.raises(DataError, match="epochs must be a whole number of 0 or more, not"):
        TrainedChatVLM.resolve_options({}, epochs)
    assert TrainedChatVLM.resolve_options({}, 2)["epochs"] == 2


def test_pretrain_world_pre_trains_the_tower_on_another_worlds_images(
    run_cli, world, tmp_path, monkeypatch
):
    """``-o pretrain_world=DIR``: the tower pre-trains on every train image of DIR that
    has a scene graph, labelled over DIR's own names (the run counts them as the
    pre-training's ``images``), while the answers are learned on the training split's
    own images; the model loads and answers through ``hf:``, and its tower is not the
    one pre-trained on the training split. The blind twin of that recipe trains too,
    on blank images of both worlds (its patch embedding 0, no held-out figures)."""
    from vqadiag.data.model_inputs.gqa_data import GQAData
    from vqadiag.models.reference import chat_vlm_data as cdata
    from vqadiag.models.reference import chat_vlm_fit as fit
    from vqadiag.models.registry import load_model_spec
    from vqadiag.synth import generate_world

    other = tmp_path / "other_world"
    generate_world(other, images=20, seed=5)
    other_scenes, other_names, _ = cdata.patch_vocabulary(GQAData(other), "train", 64)
    train_images = {str(r["imageId"]) for r in GQAData(world).questions("train").values()}
    seen = {}
    pretrain, encode = fit.pretrain_vision, fit.encode_images

    def pretrain_spy(model, pixels, labeller, n_names, *args, **kwargs):
        seen["pretrain"] = (len(pixels), len(labeller), n_names)
        seen["pretrain_blank"] = not bool(pixels.any())
        return pretrain(model, pixels, labeller, n_names, *args, **kwargs)

    def encode_spy(model, pixels, *args, **kwargs):
        seen["answer_images"] = len(pixels)
        seen["answer_blank"] = not bool(pixels.any())
        return encode(model, pixels, *args, **kwargs)

    monkeypatch.setattr(fit, "pretrain_vision", pretrain_spy)
    monkeypatch.setattr(fit, "encode_images", encode_spy)
    configs = {}
    tiny = [a for o in TINY for a in ("-o", o)]
    # the blind twin of the recipe: blank images of the other world, then of the split
    twin = ("-o", f"pretrain_world={other}", "-o", "blind=true")
    got = run_cli("train", "--model", "chat-vlm", "--data", world, "--out", tmp_path / "twin",
                  "--epochs", "1", "--quiet", *tiny, *twin)  # fmt: skip
    assert got.exit_code == 0, got.stderr
    twin_config = json.loads((tmp_path / "twin" / "config.json").read_text())
    assert twin_config["pretrain"]["images"] == len(other_scenes)
    assert "held_out_name_acc" not in twin_config["pretrain"]
    assert seen["answer_images"] == len(train_images)
    assert seen["pretrain_blank"] and seen["answer_blank"]
    for name, extra in (("plain", ()), ("other", ("-o", f"pretrain_world={other}"))):
        got = run_cli("train", "--model", "chat-vlm", "--data", world, "--out", tmp_path / name,
                      "--epochs", "1", "--quiet", *tiny, *extra)  # fmt: skip
        assert got.exit_code == 0, got.stderr
        configs[name] = json.loads((tmp_path / name / "config.json").read_text())
    assert seen["pretrain"] == (len(other_scenes), len(other_scenes), len(other_names))
    assert seen["answer_images"] == len(train_images)
    assert not seen["pretrain_blank"] and not seen["answer_blank"]
    assert configs["other"]["pretrain"]["images"] == len(other_scenes) != len(train_images)
    assert configs["plain"]["pretrain"]["images"] == len(train_images)
    assert configs["other"]["options"]["pretrain_world"] == str(other)
    assert "held_out_name_acc" in configs["other"]["pretrain"]
    assert configs["other"]["model_digest"] != configs["plain"]["model_digest"]
    _, batch, pixels = _val_batch(world, n=4)
    answers = load_model_spec(f"hf:{tmp_path / 'other' / 'model'}", {}).predict(batch, pixels)
    assert len(answers.answers) == 4 and all(isinstance(a, str) for a in answers.answers)


@pytest.mark.parametrize(
    ("value", "extra", "message"),
    [
        ("nope", (), "nope: pretrain_world does not exist"),
        ("a_file", (), "a_file: pretrain_world is not a folder"),
        ("[1]", (), "pretrain_world must be a world folder, not [1]"),
        ("empty", (), "the chat VLM's vision pre-training needs them"),
    ],
)
def test_a_pretrain_world_that_cannot_be_read_is_refused_before_training(
    run_cli, world, tmp_path, monkeypatch, value, extra, message
):
    """Not a folder, not a path, or a folder without scene graphs (named, before any
    pre-training): one line, and no run folder."""
    from vqadiag.models.reference import chat_vlm_fit as fit

    def never(*args, **kwargs):
        raise AssertionError("pre-training started")

    monkeypatch.setattr(fit, "pretrain_vision", never)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a_file").write_text("x")
    (tmp_path / "empty").mkdir()
    got = run_cli("train", "--model", "chat-vlm", "--data", world, "--out", tmp_path / "run",
                  "--epochs", "1", "--quiet", *(a for o in TINY for a in ("-o", o)),
                  "-o", f"pretrain_world={value}", *extra)  # fmt: skip
    assert got.exit_code != 0
    assert message in got.stderr and len(got.stderr.strip().splitlines()) == 1, got.stderr
    assert not (tmp_path / "run" / "model").exists()
