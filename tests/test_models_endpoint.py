"""``--model openai:URL`` against real HTTP servers: ``transformers serve`` serving a tiny
LLaVA built offline (same answers as in-process, resume, zero requests on a rerun), and a
scripted server for what a healthy one never does (429, 5xx, the API key)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

from tiny_vlm import build_tiny_llava, free_port, transformers_serve
from vqadiag.errors import DataError

pytest.importorskip("urllib3")

from vqadiag.models.adapters.openai_endpoint import EndpointModel, api_root, image_data_url
from vqadiag.models.base import PixelInput, QuestionBatch

# -- a scripted server: the failures a healthy server never shows -------------------------------


class Script:
    """Responses to send in order (status, body); the last one repeats."""

    def __init__(self, *responses: tuple[int, str]) -> None:
        self.responses = list(responses)
        self.seen: list[dict] = []
        self.lock = threading.Lock()

    def next(self, request: dict) -> tuple[int, str]:
        with self.lock:
            self.seen.append(request)
            return self.responses[min(len(self.seen), len(self.responses)) - 1]


def _completion(text: str) -> str:
    return json.dumps({
        "id": "c", "object": "chat.completion", "created": 0, "model": "m",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": text}}],
    })  # fmt: skip


@pytest.fixture
def scripted():
    servers = []

    def start(script: Script) -> str:
        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                status, text = script.next(
                    {"auth": self.headers.get("Authorization"), "body": body}
                )
                payload = text.encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.send_header("Retry-After", "0")
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args):
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for server in servers:
        server.shutdown()


def _one_question():
    image = np.random.default_rng(0).integers(0, 256, (20, 30, 3), dtype=np.uint8)
    return QuestionBatch(["q7"], ["Is it red?"], ["img"]), PixelInput([image])


def test_retries_a_429_then_answers_with_the_key_from_the_environment(scripted, monkeypatch):
    script = Script((429, '{"error": {"message": "slow down"}}'), (200, _completion("Yes, it is.")))
    url = scripted(script)
    monkeypatch.setenv("MY_VLM_KEY", "sekrit-123")
    model = EndpointModel.from_spec(
        url,
        {"model": "tiny", "api_key_env": "MY_VLM_KEY", "max_retries": "2", "max_new_tokens": "7"},
    )
    out = model.predict(*_one_question())
    assert out.answers == ["yes"] and out.texts == ["Yes, it is."]
    assert len(script.seen) == 2 and model.requests_sent == 1
    assert {s["auth"] for s in script.seen} == {"Bearer sekrit-123"}
    body = script.seen[-1]["body"]
    assert body["model"] == "tiny" and body["temperature"] == 0 and body["max_tokens"] == 7
    image_part, text_part = body["messages"][0]["content"]
    assert image_part["image_url"]["url"].startswith("data:image/png;base64,")
    assert text_part["text"].startswith("Is it red?\n")
    # the key is nowhere in what vqadiag records
    assert "sekrit" not in json.dumps(model.settings()) + model.fingerprint()


@pytest.mark.parametrize("shape", [(9, 11, 3), (1, 1, 3), (5, 1, 3), (1, 7, 3), (64, 48, 3)])
def test_png_data_url_carries_the_exact_pixels(shape):
    import base64
    import io

    from PIL import Image

    image = np.random.default_rng(1).integers(0, 256, shape, dtype=np.uint8)
    url = image_data_url(image)
    decoded = Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1])))
    np.testing.assert_array_equal(np.asarray(decoded.convert("RGB")), image)


def test_rgb_png_refuses_what_is_not_an_rgb_image():
    from vqadiag.data.io.png import rgb_png

    for shape in ((4, 4), (4, 4, 4), (4,)):
        with pytest.raises(ValueError, match="expected an"):
            rgb_png(np.zeros(shape, np.uint8))


def test_a_server_that_keeps_failing_is_one_line_naming_the_question(scripted):
    script = Script((500, '{"error": {"message": "boom"}}'))
    model = EndpointModel.from_spec(scripted(script), {"model": "tiny", "max_retries": "1"})
    with pytest.raises(DataError) as info:
        model.predict(*_one_question())
    message = str(info.value)
    assert "question q7" in message and "HTTP 500: boom" in message and "\n" not in message
    assert len(script.seen) == 2  # the request and its one retry


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("ftp://host/v1", "http"),
        ("http://user:pw@host:8000/v1", "no credentials"),
        ("localhost:8000", "http"),
        ("http://h:99999/v1", "not a valid URL"),
        ("http://[::1/v1", "not a valid URL"),
        ("http://h/v1?key=abc", "no query string"),
    ],
)
def test_bad_urls_are_refused(url, message):
    with pytest.raises(DataError, match=message):
        api_root(url)


def test_api_root_adds_v1_only_when_there_is_no_path():
    assert api_root("http://h:1") == "http://h:1/v1"
    assert api_root("http://h:1/") == "http://h:1/v1"
    assert api_root("https://h/api/v1/") == "https://h/api/v1"


def test_an_unreachable_server_without_a_model_name_is_one_line():
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(DataError, match="model=NAME") as info:
        EndpointModel.from_spec(url, {"max_retries": "0", "timeout": "2"})
    assert "\n" not in str(info.value)


# -- transformers serve: a real OpenAI-compatible server on a tiny LLaVA ------------------------

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")


@pytest.fixture(scope="module")
def llava_dir(tmp_path_factory):
    return build_tiny_llava(tmp_path_factory.mktemp("llava_served") / "model")


@pytest.fixture(scope="module")
def served(llava_dir, tmp_path_factory):
    """``transformers serve`` on the tiny model (offline), its API root."""
    with transformers_serve(llava_dir, tmp_path_factory.mktemp("serve") / "serve.log") as url:
        yield url


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    from vqadiag.synth import generate_world

    out = tmp_path_factory.mktemp("served_world") / "world"
    generate_world(out, images=40, seed=1)
    return out


def _diagnose(run_cli, world, out, model, args, *extra, env=None):
    cmd = ["diagnose", "--data", world, "--model", model, "--out", out, "--suite",
           "accuracy,fpvg", "--max-questions", "16", "--n-bootstrap", "20", "--json",
           "--model-args", args, *extra]  # fmt: skip
    got = run_cli(*cmd)
    assert got.exit_code == 0, got.stderr
    return got.json()


def _requests(out: Path) -> int:
    return json.loads((out / "timing.json").read_text())["requests_sent"]


def test_served_and_in_process_give_identical_prediction_files(
    run_cli, served, llava_dir, world, tmp_path
):
    local = _diagnose(run_cli, world, tmp_path / "local", f"hf:{llava_dir}",
                      "batch_size=1,max_new_tokens=5")  # fmt: skip
    remote = _diagnose(run_cli, world, tmp_path / "remote", f"openai:{served}",
                       f"model={llava_dir},max_new_tokens=5,in_flight=4")  # fmt: skip
    files = sorted(p.relative_to(tmp_path / "local") for p in (tmp_path / "local").rglob("*.json")
                   if "predictions" in p.parts)  # fmt: skip
    assert len(files) == 4  # accuracy all; fpvg all, rel and irrel
    for rel in files:
        assert (tmp_path / "local" / rel).read_bytes() == (tmp_path / "remote" / rel).read_bytes()
    assert local["summary"] == remote["summary"]
    assert remote["model"]["settings"]["served_model"] == str(llava_dir)
    questions = sum(c["questions"] for c in remote["conditions"].values())
    assert _requests(tmp_path / "remote") == questions
    # a rerun asks the server nothing
    again = _diagnose(run_cli, world, tmp_path / "remote", f"openai:{served}",
                      f"model={llava_dir},max_new_tokens=5,in_flight=4")  # fmt: skip
    assert _requests(tmp_path / "remote") == 0 and again["summary"] == remote["summary"]


def test_predict_cli_served_equals_in_process(run_cli, served, llava_dir, world, tmp_path):
    files = {}
    for name, model, args in (
        ("local", f"hf:{llava_dir}", "batch_size=1,max_new_tokens=5"),
        ("served", f"openai:{served}", f"model={llava_dir},max_new_tokens=5"),
    ):
        files[name] = tmp_path / f"{name}.json"
        got = run_cli("predict", "--model", model, "--data", world, "--out", files[name],
                      "--model-args", args, "--quiet", "--json")  # fmt: skip
        assert got.exit_code == 0, got.stderr
    assert files["local"].read_bytes() == files["served"].read_bytes()


def test_unknown_settings_are_refused_before_the_server_is_asked():
    url = f"http://127.0.0.1:{free_port()}"
    started = time.monotonic()
    with pytest.raises(DataError, match="unknown setting.*device"):
        EndpointModel.from_spec(url, {"device": "cuda"})
    assert time.monotonic() - started < 1.0


def test_a_killed_run_resumes_without_asking_again(served, llava_dir, world, tmp_path):
    out = tmp_path / "killed"
    cmd = [sys.executable, "-m", "vqadiag", "diagnose", "--data", str(world), "--model",
           f"openai:{served}", "--out", str(out), "--suite", "accuracy,fpvg",
           "--max-questions", "16", "--n-bootstrap", "20", "--json",
           "--model-args", f"model={llava_dir},max_new_tokens=5,in_flight=2"]  # fmt: skip
    # every answer is its own store commit (two write points): die after about the 10th
    env = {**os.environ, "VQADIAG_KILL_AT_WRITE": "22"}
    killed = subprocess.run(cmd, env=env, capture_output=True, timeout=300)
    assert killed.returncode == -9, killed.stderr.decode()[-2000:]
    with sqlite3.connect(out / "store.sqlite") as db:
        stored = db.execute("SELECT COUNT(*) FROM answers").fetchone()[0]
    assert 8 <= stored <= 11
    done = subprocess.run(cmd, capture_output=True, timeout=300)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    result = json.loads(done.stdout)
    questions = sum(c["questions"] for c in result["conditions"].values())
    assert stored < questions and _requests(out) == questions - stored
    fresh = subprocess.run(cmd, capture_output=True, timeout=300)
    assert fresh.returncode == 0 and _requests(out) == 0
