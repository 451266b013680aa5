"""Generative chat VLMs in-process (``hf:DIR``): answer extraction, settings, a tiny random
LLaVA built offline, and ``vqadiag diagnose`` end to end on a rendered world."""

from __future__ import annotations

import json
import sqlite3

import numpy as np
import pytest

from vqadiag.errors import DataError
from vqadiag.models.adapters.generated_answer import DEFAULT_PROMPT, Generation, short_answer
from vqadiag.models.model_args import ModelArgs, parse_model_args
from vqadiag.probes.store import Answer, PredictionStore

# -- answer extraction (hand-worked cases, docs/vlms.md) ----------------------------------


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("Yes", "yes"),
        ("Yes, the cat is red.", "yes"),
        ("no.", "no"),
        ("Nothing", "nothing"),  # starts with "no" but is another word
        ("No one", "no one"),  # a VQA answer to "who …?"
        ("no-entry sign", "no-entry sign"),
        ("**Answer:** Yes", "yes"),  # Markdown around the prefix
        ("  Red.\nThe cat is red because …", "red"),
        ("\n\nThe answer is: Blue!", "blue"),
        ("Answer: two", "2"),
        ("The final answer is **left**.", "left"),
        ('"wooden table"', "wooden table"),
        ("Twenty", "20"),
        ("twenty one", "twenty one"),  # only whole number words
        ("3.5", "3.5"),  # a decimal point is not trailing punctuation
        ("", ""),
        ("   \n  ", ""),
    ],
)
def test_short_answer_hand_worked(text, answer):
    assert short_answer(text) == answer


def test_generation_asks_and_answers():
    gen = Generation()
    assert gen.ask("What is it?") == "What is it?\n" + DEFAULT_PROMPT.split("\n", 1)[1]
    assert gen.answer("Yes, it is.") == "yes"
    raw = Generation(prompt="Q: {question} A:", extraction="raw", max_new_tokens=4)
    assert raw.ask("Is it red?") == "Q: Is it red? A:"
    assert raw.answer("  Yes, it is.\n") == "Yes, it is."
    assert raw.to_json() == {"prompt": "Q: {question} A:", "extraction": "raw",
                             "max_new_tokens": 4}  # fmt: skip


@pytest.mark.parametrize(
    "kwargs",
    [{"prompt": "no placeholder"}, {"prompt": "{question} {other}"}, {"extraction": "x"},
     {"max_new_tokens": 0}, {"prompt": "{question.x} {question}"}],
)  # fmt: skip
def test_generation_refuses_bad_settings(kwargs):
    with pytest.raises(ValueError):
        Generation(**kwargs)


def test_model_args_parsing():
    assert parse_model_args(None) == {} and parse_model_args(" ") == {}
    assert parse_model_args("a=1, b = x") == {"a": "1", "b": "x"}
    # a value may hold commas (a prompt): only ", KEY=" starts a new setting
    got = parse_model_args("prompt={question}, answer briefly, please,max_new_tokens=4")
    assert got == {"prompt": "{question}, answer briefly, please", "max_new_tokens": "4"}
    for bad in ("novalue", "=1", "a=1,a=2", "1a=2"):
        with pytest.raises(DataError, match="--model-args"):
            parse_model_args(bad)


def test_model_args_types_and_unknown_keys():
    args = ModelArgs({"n": "3", "x": "0.5", "c": "b", "typo": "1"}, "demo")
    assert args.integer("n", 1) == 3 and args.number("x", 1.0) == 0.5
    assert args.choice("c", "a", ("a", "b")) == "b"
    with pytest.raises(DataError, match="unknown setting.*typo.*'demo'"):
        args.finish()
    for key, value, call in (
        ("n", "x", lambda a: a.integer("n", 1)),
        ("n", "0", lambda a: a.integer("n", 1)),
        ("x", "nan", lambda a: a.number("x", 1.0)),
        ("x", "-1", lambda a: a.number("x", 1.0)),
        ("c", "z", lambda a: a.choice("c", "a", ("a", "b"))),
    ):
        with pytest.raises(DataError, match=f"--model-args.*{key}"):
            call(ModelArgs({key: value}, "demo"))


def test_store_schema_1_gains_the_raw_column(tmp_path):
    path = tmp_path / "store.sqlite"
    db = sqlite3.connect(path)
    db.executescript(
        "CREATE TABLE answers (model TEXT NOT NULL, data TEXT NOT NULL, condition TEXT NOT NULL,"
        " qid TEXT NOT NULL, answer TEXT NOT NULL, p_answer REAL, ref TEXT, p_ref REAL, top TEXT,"
        " vector BLOB, PRIMARY KEY (model, data, condition, qid)) WITHOUT ROWID;"
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
        "INSERT INTO meta VALUES ('schema', '1');"
        "INSERT INTO answers VALUES ('m', 'd', 'c', 'q1', 'red', NULL, NULL, NULL, NULL, NULL);"
    )
    db.commit()
    db.close()
    with PredictionStore(path) as store:
        assert store.get(("m", "d", "c", "q1")) == Answer("red")
        store.put_many([(("m", "d", "c", "q2"), Answer("yes", raw="Yes, it is."))])
        assert store.get(("m", "d", "c", "q2")).raw == "Yes, it is."
    with PredictionStore(path) as store:  # reopened: schema 2, nothing to upgrade
        assert store.db.execute("SELECT value FROM meta").fetchone()[0] == "2"
    # an upgrade killed between adding the column and recording the version
    with sqlite3.connect(path) as db:
        db.execute("UPDATE meta SET value='1' WHERE key='schema'")
    with PredictionStore(path) as store:
        assert store.get(("m", "d", "c", "q2")).raw == "Yes, it is."
        assert store.db.execute("SELECT value FROM meta").fetchone()[0] == "2"


# -- a tiny random LLaVA, built offline -------------------------------------------------------

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from tiny_vlm import build_tiny_gemma3, build_tiny_llava  # noqa: E402
from vqadiag.models.adapters.chat_vlm import ChatVLM  # noqa: E402
from vqadiag.models.base import PixelInput, QuestionBatch  # noqa: E402
from vqadiag.models.registry import load_model_spec  # noqa: E402

QUESTIONS = ["What color is the cat?", "Is the table red or blue?", "Which is larger?"]


@pytest.fixture(scope="module")
def llava_dir(tmp_path_factory):
    return build_tiny_llava(tmp_path_factory.mktemp("llava") / "model")


@pytest.fixture(scope="module")
def gemma_dir(tmp_path_factory):
    return build_tiny_gemma3(tmp_path_factory.mktemp("gemma3") / "model")


def _inputs(n=3, seed=0):
    batch = QuestionBatch([str(i) for i in range(n)], QUESTIONS[:n], [f"img{i}" for i in range(n)])
    rng = np.random.default_rng(seed)
    images = [rng.integers(0, 256, (40 + 8 * i, 48, 3), dtype=np.uint8) for i in range(n)]
    return batch, PixelInput(images)


@pytest.mark.parametrize("folder", ["llava_dir", "gemma_dir"])
def test_chat_vlm_generates_what_transformers_generates(folder, request):
    model_dir = request.getfixturevalue(folder)  # LLaVA (CLIP + Llama), Gemma 3 (SigLIP)
    model = load_model_spec(f"hf:{model_dir}", {"max_new_tokens": "5", "batch_size": "3"})
    assert isinstance(model, ChatVLM)
    caps = model.capabilities
    assert caps.pixel_input and caps.generative_text and not caps.probabilities
    batch, pixels = _inputs()
    out = model.predict(batch, pixels)
    # the same thing by hand, one question at a time, with transformers directly
    proc = transformers.AutoProcessor.from_pretrained(model_dir, local_files_only=True)
    net = transformers.AutoModelForImageTextToText.from_pretrained(model_dir, local_files_only=True)
    expected = []
    for q, image in zip(QUESTIONS, pixels.images, strict=True):
        messages = [{"role": "user", "content": [
            {"type": "image"}, {"type": "text", "text": Generation().ask(q)}]}]  # fmt: skip
        text = proc.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        enc = proc(images=[[image]], text=[text], return_tensors="pt")
        with torch.no_grad():
            ids = net.eval().generate(**enc, max_new_tokens=5, do_sample=False)
        new = ids[:, enc["input_ids"].shape[1] :]
        expected.append(proc.batch_decode(new, skip_special_tokens=True)[0].strip())
    assert out.texts == expected
    assert out.answers == [short_answer(t) for t in expected]
    assert out.probs is None and out.attention is None
    # left padding: one batch of three answers as three batches of one
    single = load_model_spec(f"hf:{model_dir}", {"max_new_tokens": "5", "batch_size": "1"})
    assert single.predict(batch, pixels).texts == out.texts


def test_chat_vlm_answers_depend_on_the_pixels(llava_dir):
    model = ChatVLM(llava_dir, generation=Generation(max_new_tokens=6))
    batch, _pixels = _inputs(3, seed=0)
    texts = {tuple(model.predict(batch, _inputs(3, seed=s)[1]).texts) for s in range(4)}
    assert len(texts) > 1


def test_chat_vlm_settings_and_fingerprint(llava_dir, tmp_path):
    a = load_model_spec(f"hf:{llava_dir}")
    b = load_model_spec(f"hf:{llava_dir}", {"prompt": "Q: {question}"})
    c = load_model_spec(f"hf:{llava_dir}", {"batch_size": "2", "device": "cpu"})
    assert a.settings()["prompt"] == DEFAULT_PROMPT and b.settings()["prompt"] == "Q: {question}"
    assert a.settings()["architecture"] == "LlavaForConditionalGeneration"
    assert a.fingerprint() != b.fingerprint()  # the prompt changes the answers
    assert a.fingerprint() != c.fingerprint()  # so may the batch (padding)
    a.save(tmp_path / "run")
    again = load_model_spec(str(tmp_path / "run"))
    assert isinstance(again, ChatVLM) and again.fingerprint() == a.fingerprint()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"temperature": "1"}, "unknown setting.*temperature"),
        ({"dtype": "int3"}, "dtype must be one of"),
        ({"prompt": "no placeholder"}, "must contain"),
        ({"batch_size": "0"}, "batch_size must be at least 1"),
    ],
)
def test_chat_vlm_bad_settings_are_one_line(llava_dir, args, message):
    with pytest.raises(DataError, match=message) as info:
        load_model_spec(f"hf:{llava_dir}", args)
    assert "\n" not in str(info.value)


def test_hf_folder_that_is_no_chat_model_is_one_line(tmp_path):
    folder = tmp_path / "bert"
    transformers.BertConfig(
        vocab_size=10, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=8,
    ).save_pretrained(folder)  # fmt: skip
    with pytest.raises(DataError, match="cannot load an image-text-to-text chat model") as info:
        load_model_spec(f"hf:{folder}")
    assert str(folder.name) in str(info.value) and "\n" not in str(info.value)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    from vqadiag.synth import generate_world

    out = tmp_path_factory.mktemp("vlm_world") / "world"
    generate_world(out, images=40, seed=0)
    return out


def test_diagnose_cli_runs_a_chat_vlm_end_to_end(run_cli, llava_dir, world, tmp_path):
    out = tmp_path / "res"
    args = ("diagnose", "--data", world, "--model", f"hf:{llava_dir}", "--out", out,
            "--suite", "accuracy,fpvg,robustness", "--max-questions", "12",
            "--bq-ranker", "bleu1", "--n-bootstrap", "20", "--json",
            "--model-args", "batch_size=4,max_new_tokens=4", "--device", "cpu")  # fmt: skip
    first = run_cli(*args)
    assert first.exit_code == 0, first.stderr
    result = first.json()
    assert result["model"]["name"] == "hf-chat"
    settings = result["model"]["settings"]
    assert settings["prompt"] == DEFAULT_PROMPT and settings["max_new_tokens"] == 4
    assert result["model"]["capabilities"]["generative_text"] is True
    assert set(result["suites"]) == {"accuracy", "fpvg", "robustness"}, result["skipped"]
    rows = [json.loads(line) for line in (out / "per_question.jsonl").read_text().splitlines()]
    fpvg = [r for r in rows if r["suite"] == "fpvg"]
    assert fpvg and all(set(r["raw"]) == {"all", "rel", "irrel"} for r in fpvg)
    for r in rows:  # each answer is its raw text after the documented extraction
        assert r["raw"].keys() == r["answers"].keys()
        for k, text in r["raw"].items():
            assert r["answers"][k] == short_answer(text)
    # the report shows the generated text beside a failure's extracted answer
    rep = run_cli("report", out, "--out", tmp_path / "report")
    assert rep.exit_code == 0, rep.stderr
    page = (tmp_path / "report" / "report.html").read_text()
    differing = [t for r in rows for k, t in r["raw"].items() if t != r["answers"][k]]
    assert differing and page.count('class="raw"') > 0
    # a rerun asks the model nothing and gives the same numbers
    again = run_cli(*args)
    assert again.exit_code == 0, again.stderr
    assert all(c["computed"] == 0 for c in again.json()["conditions"].values())
    assert again.json()["summary"] == result["summary"]
    # the settings are part of the cache key: another prompt computes again
    other = run_cli(*args[:-4], "--model-args", "batch_size=4,max_new_tokens=4,prompt={question}")
    assert other.exit_code == 0, other.stderr
    assert all(c["cached"] == 0 for c in other.json()["conditions"].values())


def test_diagnose_cli_runs_a_gemma3_chat_model(run_cli, gemma_dir, world, tmp_path):
    got = run_cli("diagnose", "--data", world, "--model", f"hf:{gemma_dir}", "--out",
                  tmp_path / "res", "--suite", "accuracy,fpvg", "--max-questions", "8",
                  "--n-bootstrap", "20", "--model-args", "max_new_tokens=3", "--json")  # fmt: skip
    assert got.exit_code == 0, got.stderr
    result = got.json()
    assert result["model"]["settings"]["architecture"] == "Gemma3ForConditionalGeneration"
    assert set(result["suites"]) == {"accuracy", "fpvg"}
    assert result["conditions"]["gqa.rel"]["computed"] > 0


def test_predict_cli_with_a_chat_vlm(run_cli, llava_dir, world, tmp_path):
    out = tmp_path / "preds.json"
    got = run_cli("predict", "--model", f"hf:{llava_dir}", "--data", world, "--out", out,
                  "--model-args", "max_new_tokens=3", "--quiet", "--json")  # fmt: skip
    assert got.exit_code == 0, got.stderr
    preds = json.loads(out.read_text())
    assert got.json()["questions"] == len(preds) > 0
    assert all(isinstance(a, str) for a in preds.values())


def test_model_args_on_a_run_folder_or_twice_are_refused(run_cli, world, tmp_path, llava_dir):
    got = run_cli("predict", "--model", world, "--data", world, "--out", tmp_path / "p.json",
                  "--model-args", "device=cpu")  # fmt: skip
    assert got.exit_code == 2 and "--model-args" in got.stderr
    got = run_cli("predict", "--model", f"hf:{llava_dir}", "--data", world, "--out",
                  tmp_path / "p.json", "--model-args", "device=cpu", "--device", "cpu")  # fmt: skip
    assert got.exit_code == 2 and "--device" in got.stderr
