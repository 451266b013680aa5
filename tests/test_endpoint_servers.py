"""``openai:URL1,URL2`` — one model served by several servers (docs/vlms.md, "Several
servers"): requests spread by the requests in flight, a server stopped mid-run loses no
request, the run fails with one line only when every server fails, and the fingerprint
does not depend on the servers listed.

Each server is a local ``ThreadingHTTPServer`` that lists one model and answers each
question with a function of its text, so every answer can be checked."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import pytest

from vqadiag.errors import DataError

pytest.importorskip("urllib3")

from vqadiag.models.adapters.openai_endpoint import EndpointModel
from vqadiag.models.adapters.openai_servers import ServerPool
from vqadiag.models.base import PixelInput, QuestionBatch


class ChatServer(ThreadingHTTPServer):
    """Serves ``model``; answers "answer to <question>" after ``delay`` seconds; after
    ``fail_after`` answers it replies 503 to every request (a server going down)."""

    daemon_threads = True

    def __init__(self, model: str = "tiny", delay: float = 0.0, fail_after: int | None = None):
        super().__init__(("127.0.0.1", 0), ChatHandler)
        self.model, self.delay, self.fail_after = model, delay, fail_after
        self.answered = 0
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class ChatHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: ChatServer

    def _send(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._send(200, {"object": "list", "data": [{"id": self.server.model}]})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with self.server.lock:
            down = (
                self.server.fail_after is not None
                and self.server.answered >= self.server.fail_after
            )
            if not down:
                self.server.answered += 1
        if down:
            self._send(503, {"error": "down"})
            return
        time.sleep(self.server.delay)
        text = body["messages"][0]["content"][-1]["text"]
        message = {"role": "assistant", "content": f"answer to {text.split(chr(10))[0]}"}
        self._send(200, {"choices": [{"index": 0, "message": message}]})

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def start():
    servers: list[ChatServer] = []

    def run(**kw: Any) -> ChatServer:
        server = ChatServer(**kw)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return server

    yield run
    for server in servers:
        server.shutdown()
        server.server_close()


def _batch(n: int) -> tuple[QuestionBatch, PixelInput]:
    image = np.zeros((8, 8, 3), np.uint8)
    ids = [f"q{i}" for i in range(n)]
    return QuestionBatch(ids, [f"question {i}?" for i in range(n)], ["img"] * n), PixelInput(
        [image] * n
    )


def _model(*servers: ChatServer, **args: Any) -> EndpointModel:
    settings = {"max_retries": "0", "timeout": "5", "in_flight": "2", **args}
    spec = ",".join(s.url for s in servers)
    return EndpointModel.from_spec(spec, {k: str(v) for k, v in settings.items()})


def test_two_servers_share_the_requests_and_every_answer_is_right(start):
    a, b = start(delay=0.01), start(delay=0.01)
    model = _model(a, b)
    out = model.predict(*_batch(40))
    assert all(f"question {i}?" in t for i, t in enumerate(out.texts))
    assert a.answered + b.answered == 40
    assert a.answered >= 10 and b.answered >= 10
    assert model.settings()["urls"] == [f"{a.url}/v1", f"{b.url}/v1"]


def test_a_server_stopped_mid_run_loses_no_request(start):
    a, b = start(delay=0.01), start(delay=0.01, fail_after=5)
    model = _model(a, b)
    out = model.predict(*_batch(60))
    assert all(f"question {i}?" in t for i, t in enumerate(out.texts))
    assert b.answered == 5 and a.answered == 55
    assert model._http.failures[f"{b.url}/v1"] >= 1


def test_a_server_that_is_gone_from_the_start_is_left_out(start):
    a, b = start(), start()
    b.shutdown()
    b.server_close()
    model = _model(a, b)  # b does not list its models: a names the model
    out = model.predict(*_batch(10))
    assert all(f"question {i}?" in t for i, t in enumerate(out.texts))
    assert a.answered == 10


def test_when_every_server_fails_the_run_stops_with_one_line(start):
    a, b = start(fail_after=2), start(fail_after=2)
    model = _model(a, b, in_flight="1")
    with pytest.raises(DataError) as err:
        model.predict(*_batch(20))
    line = str(err.value)
    assert "\n" not in line and "all 2 servers failed" in line and "question q" in line


def test_servers_serving_different_models_are_refused(start):
    a, b = start(model="tiny"), start(model="other")
    with pytest.raises(DataError, match="one and the same model"):
        _model(a, b)


def test_the_fingerprint_does_not_depend_on_the_servers_listed(start):
    a, b, c = start(), start(), start()
    one, two, three = _model(a), _model(a, b), _model(a, b, c)
    assert one.fingerprint() == two.fingerprint() == three.fingerprint()
    assert _model(a, b, revision="v2").fingerprint() != two.fingerprint()


def test_requests_go_to_the_server_with_fewest_in_flight():
    """Calls held open: each new call goes where fewest are in flight (the first listed
    on a tie)."""
    chosen: list[str] = []
    release = threading.Event()

    class Held:
        def __init__(self, name: str) -> None:
            self.name = name

        def call(self, method, path, body, parse):
            chosen.append(self.name)
            release.wait(10)
            return self.name

    pool = ServerPool(["a", "b"], Held)
    threads = []
    for k in range(4):
        threads.append(threading.Thread(target=pool.call, args=("POST", "/x", {}, None)))
        threads[-1].start()
        while len(chosen) <= k:  # the call has reached its server
            time.sleep(0.001)
    assert chosen == ["a", "b", "a", "b"]
    release.set()
    for t in threads:
        t.join()
    assert pool.answered == {"a": 2, "b": 2}
