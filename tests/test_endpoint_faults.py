"""``openai:URL`` against a server that misbehaves (docs/reliability.md, "Model servers
that misbehave"): replies that are not chat completions, failures with more questions
queued than ``in_flight``, bodies trickled byte by byte, replies too large to keep.

Each test starts a fault-injecting ``ThreadingHTTPServer`` on 127.0.0.1 and runs the
prediction in a worker thread with a deadline, so a hang fails the test instead of
blocking the suite."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import pytest

from vqadiag.errors import DataError

pytest.importorskip("urllib3")

from vqadiag.models.adapters.openai_endpoint import EndpointModel
from vqadiag.models.adapters.openai_reply import MAX_REPLY_BYTES
from vqadiag.models.base import ModelOutput, PixelInput, QuestionBatch

Fault = Callable[["FaultHandler"], None]


class FaultServer(ThreadingHTTPServer):
    """A local server whose every request is answered by ``fault(handler)``."""

    daemon_threads = True

    def __init__(self, fault: Fault) -> None:
        super().__init__(("127.0.0.1", 0), FaultHandler)
        self.fault = fault
        self.stop = threading.Event()
        self.requests = 0
        self.bytes_sent = 0
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class FaultHandler(BaseHTTPRequestHandler):
    """Reads the request, counts it, hands the reply to the server's fault."""

    protocol_version = "HTTP/1.1"
    server: FaultServer

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        with self.server.lock:
            self.server.requests += 1
        self.server.fault(self)

    def send_bytes(self, data: bytes) -> bool:
        """Write ``data``; False once the client has gone."""
        try:
            self.wfile.write(data)
            self.wfile.flush()
        except OSError:
            return False
        with self.server.lock:
            self.server.bytes_sent += len(data)
        return True

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def serve():
    servers: list[FaultServer] = []

    def start(fault: Fault) -> FaultServer:
        server = FaultServer(fault)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop.set()
        server.shutdown()
        server.server_close()


def _head(status: int, length: int | None, extra: dict[str, str] | None = None) -> bytes:
    lines = [f"HTTP/1.1 {status} X", "Content-Type: application/json"]
    lines += [f"Content-Length: {length}"] if length is not None else []
    lines += [f"{k}: {v}" for k, v in (extra or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def reply(status: int, body: Any, **headers: str) -> Fault:
    """Always answer ``status`` with ``body`` (JSON-encoded unless bytes)."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    extra = {k.replace("_", "-"): v for k, v in headers.items()}
    return lambda h: h.send_bytes(_head(status, len(data), extra) + data)


def completion(content: Any) -> dict:
    return {"id": "c", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": content}}]}  # fmt: skip


def in_turn(*faults: Fault) -> Fault:
    """The n-th request gets the n-th fault; the last one repeats."""
    seen = []

    def fault(h: FaultHandler) -> None:
        seen.append(1)
        faults[min(len(seen), len(faults)) - 1](h)

    return fault


def never_answers(h: FaultHandler) -> None:
    h.server.stop.wait(30)
    h.close_connection = True


def truncated(h: FaultHandler) -> None:
    h.send_bytes(_head(200, 500) + b'{"choices": [')
    h.close_connection = True


def trickles(whole_reply: bool) -> Fault:
    """A valid completion sent one byte every 0.1 s (the body only, or everything)."""
    body = json.dumps(completion("yes" + " " * 300)).encode()

    def fault(h: FaultHandler) -> None:
        head = _head(200, len(body))
        data = head + body if whole_reply else body
        if not whole_reply and not h.send_bytes(head):
            return
        for byte in data:
            if h.server.stop.wait(0.1) or not h.send_bytes(bytes([byte])):
                break
        h.close_connection = True

    return fault


def declares_a_huge_body(h: FaultHandler) -> None:
    if h.send_bytes(_head(200, 50 * 2**20) + b" " * 65536):
        h.server.stop.wait(30)
    h.close_connection = True


def streams_forever(h: FaultHandler) -> None:
    """A chunked body with no end (no Content-Length to refuse it by)."""
    chunk = b" " * 65536
    framed = f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n"
    if h.send_bytes(_head(200, None, {"Transfer-Encoding": "chunked"})):
        while not h.server.stop.is_set() and h.send_bytes(framed):
            pass
    h.close_connection = True


def _batch(n: int) -> tuple[QuestionBatch, PixelInput]:
    image = np.random.default_rng(0).integers(0, 256, (8, 8, 3), dtype=np.uint8)
    ids = [f"q{i}" for i in range(n)]
    return QuestionBatch(ids, ["Is it red?"] * n, ["img"] * n), PixelInput([image] * n)


def _model(server: FaultServer, **args: Any) -> EndpointModel:
    settings = {"model": "tiny", "max_retries": "1", "timeout": "1", **args}
    return EndpointModel.from_spec(server.url, {k: str(v) for k, v in settings.items()})


def _predict_within(
    model: EndpointModel, n: int, seconds: float
) -> tuple[ModelOutput | BaseException, float]:
    """``model.predict`` on ``n`` questions in a worker thread: its result or exception and
    the seconds it took; fails the test when it has not ended after ``seconds``."""
    got: list[ModelOutput | BaseException] = []

    def work() -> None:
        try:
            got.append(model.predict(*_batch(n)))
        except BaseException as err:
            got.append(err)

    started = time.monotonic()
    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"predict still running after {seconds} s"
    return got[0], time.monotonic() - started


def _one_line_error(got: object, *fragments: str) -> str:
    assert isinstance(got, DataError), got
    message = str(got)
    assert "\n" not in message, message
    for fragment in fragments:
        assert fragment in message, message
    return message


# -- 1. a reply that is not a chat completion ---------------------------------------------------


NOT_COMPLETIONS = {
    "other_json": {"foo": [1, 2]},
    "content_null": completion(None),
    "no_message": {"choices": [{"index": 0}]},
    "no_choices": {"choices": []},
    "a_list": [1, 2],
    "not_json": b"<html>hello</html>",
    "parts_without_text": completion([{"type": "image_url", "image_url": {"url": "x"}}]),
    "text_part_not_a_string": completion([{"type": "text", "text": 5}]),
}


@pytest.mark.timeout(30)
@pytest.mark.parametrize("body", NOT_COMPLETIONS.values(), ids=NOT_COMPLETIONS.keys())
def test_a_reply_without_text_is_retried_then_one_line_naming_the_question(serve, body):
    server = serve(reply(200, body))
    got, _ = _predict_within(_model(server, max_retries=2), 1, 10)
    _one_line_error(got, "question q0", "after 2 retries")
    assert server.requests == 3  # the request and its two retries


@pytest.mark.timeout(30)
def test_a_reply_without_text_then_a_good_one_gives_the_good_answer(serve):
    server = serve(in_turn(reply(200, {"foo": [1, 2]}), reply(200, completion("Yes."))))
    got, _ = _predict_within(_model(server), 1, 10)
    assert isinstance(got, ModelOutput) and got.answers == ["yes"] and got.texts == ["Yes."]
    assert server.requests == 2


@pytest.mark.timeout(30)
def test_content_parts_are_the_text_parts_joined_in_order(serve):
    parts = [{"type": "text", "text": "Ye"}, {"type": "image_url", "image_url": {"url": "x"}},
             {"type": "text", "text": "s, it is."}]  # fmt: skip
    server = serve(reply(200, completion(parts)))
    got, _ = _predict_within(_model(server), 1, 10)
    assert isinstance(got, ModelOutput)
    assert got.texts == ["Yes, it is."] and got.answers == ["yes"]


@pytest.mark.timeout(30)
def test_an_empty_string_is_an_answer_not_an_error(serve):
    server = serve(reply(200, completion("")))
    got, _ = _predict_within(_model(server), 1, 10)
    assert isinstance(got, ModelOutput) and got.texts == [""] and server.requests == 1


# -- 9. a failure with more questions queued than in flight ------------------------------------


FAILURES = {
    "http_500": (reply(500, {"error": {"message": "boom"}}), "HTTP 500: boom"),
    "garbage": (reply(200, b"\x00\xff garbage"), "not JSON"),
    "truncated": (truncated, "question"),
    "never_answers": (never_answers, "question"),
    "bad_retry_after": (reply(503, {"error": "busy"}, Retry_After="soon"), "Retry-After"),
}


@pytest.mark.timeout(30)
@pytest.mark.parametrize(("fault", "says"), FAILURES.values(), ids=FAILURES.keys())
def test_a_failure_with_more_questions_than_in_flight_stops_promptly(serve, fault, says):
    server = serve(fault)
    model = _model(server, in_flight=2, timeout=0.5)
    got, seconds = _predict_within(model, 10, 15)
    _one_line_error(got, "question q", says)
    assert seconds < 6
    assert server.requests <= 4  # two questions in flight, one retry each; none after


# -- 10. the timeout bounds the attempt; replies have a size cap --------------------------------


@pytest.mark.timeout(30)
@pytest.mark.parametrize("whole_reply", [False, True], ids=["body", "headers_and_body"])
def test_a_trickled_reply_times_out_after_timeout_seconds(serve, whole_reply):
    server = serve(trickles(whole_reply))  # a whole reply would take over 30 s
    got, seconds = _predict_within(_model(server, timeout=1, max_retries=0), 1, 10)
    _one_line_error(got, "question q0", "no complete reply within 1 s")
    assert seconds < 2.5


@pytest.mark.timeout(30)
@pytest.mark.parametrize("fault", [declares_a_huge_body, streams_forever])
def test_a_reply_over_the_size_cap_is_refused_without_reading_it(serve, fault):
    server = serve(fault)
    got, seconds = _predict_within(_model(server, max_retries=3, timeout=5), 1, 10)
    _one_line_error(got, "question q0", f"larger than {MAX_REPLY_BYTES // 2**20} MiB")
    assert server.requests == 1  # refused, not retried
    assert server.bytes_sent < MAX_REPLY_BYTES + 8 * 2**20  # at most the cap and buffers
    assert seconds < 5


@pytest.mark.timeout(30)
def test_a_large_reply_under_the_cap_is_read(serve):
    body = completion("Yes." + " " * (MAX_REPLY_BYTES // 2))
    server = serve(reply(200, body))
    got, _ = _predict_within(_model(server), 1, 10)
    assert isinstance(got, ModelOutput) and got.texts == ["Yes."]


@pytest.mark.timeout(60)
def test_the_command_line_stops_with_one_line_when_the_server_keeps_failing(serve, tmp_path):
    from vqadiag.synth import generate_world

    world = tmp_path / "world"
    generate_world(world, images=10, seed=1)
    server = serve(reply(500, {"error": {"message": "boom"}}))
    args = "model=tiny,in_flight=2,max_retries=1,timeout=1"
    out = tmp_path / "p.json"
    cmd = [sys.executable, "-m", "vqadiag", "predict", "--data", str(world), "--out", str(out),
           "--model", f"openai:{server.url}", "--model-args", args]  # fmt: skip
    started = time.monotonic()
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=40)
    assert done.returncode == 2, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "question" in lines[0] and "HTTP 500: boom" in lines[0], lines
    assert time.monotonic() - started < 20 and server.requests <= 4
