"""The Hugging Face adapter on tiny randomly initialised ViLT / BLIP models saved locally."""

from __future__ import annotations

import json

import numpy as np
import pytest

from vqadiag.errors import DataError
from vqadiag.models.base import ObjectInput, PixelInput, QuestionBatch

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from vqadiag.models.adapters.hf_adapter import HFModel  # noqa: E402

WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "[DEC]", "what", "is", "the", "color",
         "of", "?", "red", "blue", "yes", "no", "it", "cat"]  # fmt: skip
LABELS = ["red", "blue", "yes", "no"]
QUESTIONS = ["What is the color of the cat?", "Is it red?", "What is it?"]


def _tokenizer(**kw):
    return transformers.BertTokenizerFast(vocab={w: i for i, w in enumerate(WORDS)}, **kw)


@pytest.fixture(scope="module")
def vilt_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("vilt")
    image = transformers.ViltImageProcessor(size={"shortest_edge": 32}, size_divisor=32)
    processor = transformers.ViltProcessor(image_processor=image, tokenizer=_tokenizer())
    config = transformers.ViltConfig(
        vocab_size=len(WORDS), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=37, image_size=32, patch_size=16, max_position_embeddings=40,
        num_labels=len(LABELS), id2label=dict(enumerate(LABELS)),
        label2id={a: i for i, a in enumerate(LABELS)}, max_image_length=-1,
    )  # fmt: skip
    torch.manual_seed(0)
    transformers.ViltForQuestionAnswering(config).save_pretrained(out)
    processor.save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def blip_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("blip")
    image = transformers.BlipImageProcessor(size={"height": 32, "width": 32})
    processor = transformers.BlipProcessor(
        image_processor=image, tokenizer=_tokenizer(bos_token="[DEC]")
    )
    config = transformers.BlipConfig(
        text_config=dict(
            vocab_size=len(WORDS), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
            intermediate_size=37, max_position_embeddings=40, encoder_hidden_size=32,
            bos_token_id=5, sep_token_id=3, pad_token_id=0,
        ),
        vision_config=dict(
            hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=37,
            image_size=32, patch_size=16,
        ),
    )  # fmt: skip
    torch.manual_seed(0)
    transformers.BlipForQuestionAnswering(config).save_pretrained(out)
    processor.save_pretrained(out)
    return out


def _inputs(n=3, seed=0):
    batch = QuestionBatch([str(i) for i in range(n)], QUESTIONS[:n], [f"img{i}" for i in range(n)])
    images = np.random.default_rng(seed).integers(0, 256, (n, 40, 48, 3), dtype=np.uint8)
    return batch, PixelInput(images)


def test_vilt_answers_are_the_argmax_label_of_the_model(vilt_dir):
    model = HFModel(vilt_dir)
    assert model.answer_vocab == LABELS
    caps = model.capabilities
    assert caps.visual == "pixels" and not caps.object_masking and caps.probabilities
    batch, pixels = _inputs()
    out = model.predict(batch, pixels)
    # the same forward pass by hand, with transformers directly
    proc = transformers.AutoProcessor.from_pretrained(vilt_dir, local_files_only=True)
    net = transformers.ViltForQuestionAnswering.from_pretrained(vilt_dir, local_files_only=True)
    enc = proc(images=list(pixels.images), text=QUESTIONS, return_tensors="pt", padding=True)
    with torch.no_grad():
        logits = net.eval()(**enc).logits
    assert out.answers == [LABELS[i] for i in logits.argmax(-1).tolist()]
    np.testing.assert_allclose(out.probs, torch.softmax(logits, -1).numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out.probs.sum(axis=1), 1.0, atol=1e-5)
    assert out.attention is None


def test_vilt_sigmoid_scores_and_batching(vilt_dir):
    batch, pixels = _inputs()
    whole = HFModel(vilt_dir, probs="sigmoid", batch_size=8).predict(batch, pixels)
    split = HFModel(vilt_dir, probs="sigmoid", batch_size=1).predict(batch, pixels)
    assert whole.answers == split.answers
    np.testing.assert_allclose(whole.probs, split.probs, rtol=1e-4, atol=1e-5)
    assert np.all((whole.probs > 0) & (whole.probs < 1))
    for a, p in zip(whole.answers, whole.probs, strict=True):  # sigmoid keeps the argmax
        assert LABELS[int(p.argmax())] == a


def test_blip_generates_text_without_probs(blip_dir):
    model = HFModel(blip_dir, max_new_tokens=4)
    assert model.answer_vocab == [] and not model.capabilities.probabilities
    batch, pixels = _inputs()
    out = model.predict(batch, pixels)
    proc = transformers.AutoProcessor.from_pretrained(blip_dir, local_files_only=True)
    net = transformers.BlipForQuestionAnswering.from_pretrained(blip_dir, local_files_only=True)
    enc = proc(images=list(pixels.images), text=QUESTIONS, return_tensors="pt", padding=True)
    with torch.no_grad():
        ids = net.eval().generate(**enc, max_new_tokens=4)
    expected = [t.strip() for t in proc.batch_decode(ids, skip_special_tokens=True)]
    assert out.answers == expected and all(isinstance(a, str) for a in out.answers)
    assert out.probs is None


def test_run_folder_points_at_the_model(vilt_dir, tmp_path):
    model = HFModel(vilt_dir, probs="sigmoid", batch_size=2)
    model.save(tmp_path / "run")
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["model"] == "hf" and config["path"] == str(vilt_dir.resolve())
    assert config["kind"] == "vilt" and config["probs"] == "sigmoid"
    assert json.loads((tmp_path / "run" / "answers.json").read_text()) == LABELS
    loaded = HFModel.load(tmp_path / "run")
    assert loaded.probs_mode == "sigmoid" and loaded.batch_size == 2
    assert loaded.fingerprint() == model.fingerprint()
    batch, pixels = _inputs()
    a, b = model.predict(batch, pixels), loaded.predict(batch, pixels)
    assert a.answers == b.answers
    np.testing.assert_array_equal(a.probs, b.probs)
    direct = HFModel.load(vilt_dir)  # the save_pretrained folder itself
    assert direct.kind == "vilt" and direct.predict(batch, pixels).answers == a.answers


def test_fingerprint_changes_with_the_weights(vilt_dir, tmp_path):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(vilt_dir, copy)
    assert HFModel(copy).fingerprint() == HFModel(vilt_dir).fingerprint()
    net = transformers.ViltForQuestionAnswering.from_pretrained(copy, local_files_only=True)
    with torch.no_grad():
        net.classifier[-1].bias.add_(1.0)
    net.save_pretrained(copy)
    assert HFModel(copy).fingerprint() != HFModel(vilt_dir).fingerprint()


def test_train_is_refused_with_a_clear_error(tmp_path):
    from vqadiag.data.model_inputs.gqa_data import GQAData

    with pytest.raises(DataError, match="cannot be trained by vqadiag"):
        HFModel.train(GQAData(tmp_path), progress=False)


def test_bad_inputs(vilt_dir, tmp_path):
    with pytest.raises(DataError, match="no config.json"):
        HFModel.load(tmp_path)
    bert = tmp_path / "bert"
    bert.mkdir()
    (bert / "config.json").write_text(json.dumps({"model_type": "bert"}))
    with pytest.raises(DataError, match=r"bert.config\.json: not a ViLT or BLIP"):
        HFModel(bert)
    run = tmp_path / "run"
    HFModel(vilt_dir).save(run)
    cfg = json.loads((run / "config.json").read_text())
    (run / "config.json").write_text(json.dumps({**cfg, "path": str(tmp_path / "gone")}))
    with pytest.raises(DataError, match="config.json: model folder .*gone.* not found"):
        HFModel.load(run)
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "config.json").write_text("{")
    with pytest.raises(DataError, match="broken.config\\.json"):
        HFModel.load(tmp_path / "broken")
    model = HFModel(vilt_dir)
    batch, pixels = _inputs()
    with pytest.raises(TypeError, match="PixelInput"):
        model.predict(batch, ObjectInput(np.zeros((3, 1, 2)), np.zeros((3, 1, 4)),
                                         np.ones((3, 1), bool), np.ones((3, 2))))  # fmt: skip
    with pytest.raises(ValueError, match="uint8"):
        model.predict(batch, PixelInput(pixels.images.astype(np.float32)))
    with pytest.raises(ValueError, match="2 images for 3 questions"):
        model.predict(batch, PixelInput(pixels.images[:2]))


@pytest.fixture(scope="module")
def rendered_world(tmp_path_factory):
    from vqadiag.synth import generate_world

    root = tmp_path_factory.mktemp("hfworld") / "world"
    generate_world(root, images=40, seed=2)
    return root


@pytest.mark.parametrize("kind", ["vilt", "blip"])
def test_hf_models_are_predicted_and_diagnosed_over_a_data_folder(
    kind, vilt_dir, blip_dir, rendered_world, tmp_path, run_cli
):
    """The pixel path feeds the HF adapter the folder's images; FPVG runs on pixels."""
    model_dir = vilt_dir if kind == "vilt" else blip_dir
    preds = tmp_path / "p.json"
    cli = run_cli(
        "predict", "--model", f"hf:{model_dir}", "--data", rendered_world, "--out", preds,
        "--json",
    )  # fmt: skip
    assert cli.exit_code == 0, cli.stderr
    answers = json.loads(preds.read_text())
    val = json.loads((rendered_world / "gqa" / "val_balanced_questions.json").read_text())
    assert set(answers) == set(val)
    if kind == "vilt":
        assert set(answers.values()) <= set(LABELS)
    out = tmp_path / "diag"
    cli = run_cli(
        "diagnose", "--data", rendered_world, "--model", f"hf:{model_dir}", "--out", out,
        "--suite", "accuracy,fpvg,importance", "--max-questions", "30", "--n-bootstrap", "20",
        "--json",
    )  # fmt: skip
    assert cli.exit_code == 0, cli.stderr
    result = json.loads(cli.stdout)
    assert result["model"]["capabilities"]["pixel_input"] is True
    assert "fpvg" not in result["skipped"] and result["summary"]["fpvg_plus"] is not None
    assert result["conditions"]["gqa.rel"]["computed"] > 0
    rows = [json.loads(line) for line in (out / "per_question.jsonl").open()]
    acc = [r for r in rows if r["suite"] == "accuracy"]
    assert len(acc) == 30 and all(isinstance(r["answers"]["all"], str) for r in acc)
    if kind == "vilt":  # a classifier: the plain answers are the ones predict wrote
        # (the random tiny BLIP's generated text can move with the batch's padding)
        assert all(r["answers"]["all"] == answers[r["id"]] for r in acc)
    if kind == "vilt":  # probabilities: leave-one-out importance runs on pixels
        assert result["summary"]["loo_relevant_score"] is not None
    else:
        assert "loo: model has no probabilities" in result["skipped"]["importance"]


def test_missing_images_name_the_file_and_question(vilt_dir, tmp_path, run_cli):
    from vqadiag.synth import generate_world

    world = tmp_path / "world"
    generate_world(world, images=30, seed=4)
    val = json.loads((world / "gqa" / "val_balanced_questions.json").read_text())
    image_id = next(iter(val.values()))["imageId"]
    victim = world / "gqa" / "images" / f"{image_id}.png"
    victim.unlink()
    args = ["diagnose", "--data", world, "--model", f"hf:{vilt_dir}", "--suite", "accuracy"]
    cli = run_cli(*args, "--out", tmp_path / "a")
    assert cli.exit_code == 2
    assert victim.stem in cli.stderr and "question" in cli.stderr
    assert len(cli.stderr.strip().splitlines()) == 1
    cli = run_cli(*args, "--out", tmp_path / "b", "--allow-missing", "--json")
    assert cli.exit_code == 0, cli.stderr
    result = json.loads(cli.stdout)
    assert result["data"]["missing_images"] == 1
    n_questions = sum(r["imageId"] != image_id for r in val.values() if r.get("isBalanced", True))
    assert result["summary"]["accuracy"]["n"] == n_questions
