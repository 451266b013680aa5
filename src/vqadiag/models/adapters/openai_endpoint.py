"""A VLM behind an OpenAI-compatible chat-completions server (docs/vlms.md, "Servers").

``--model openai:URL`` (vLLM, SGLang, Ollama, llama.cpp's server, ``transformers serve``,
a hosted API). ``URL`` is the API root (``http://localhost:8000/v1``; a URL without a
path gets ``/v1``); credentials never go in it: the API key is read from the
environment variable ``api_key_env`` (default ``OPENAI_API_KEY``; unset sends
``EMPTY``, which local servers accept) and is never written anywhere.

Each question is one request: a user message with the image as a base64 ``data:`` URL
(PNG by default, lossless, so the server sees exactly the pixels of the condition)
followed by ``prompt.format(question=…)``, ``temperature`` 0, ``max_tokens`` =
``max_new_tokens``. ``in_flight`` requests run at once over one ``urllib3`` connection
pool (bodies written and read with ``orjson``; :mod:`.openai_http`): each attempt has
``timeout`` seconds for all of it (connect, send, the whole reply) and a reply over
``MAX_REPLY_BYTES`` (4 MiB) is refused unread; connection errors, timeouts, 408, 409,
429, 5xx and replies without text are retried up to ``max_retries`` times with
exponential backoff (0.5 s, 1 s, 2 s … at most 30 s, with jitter; a ``Retry-After``
header wins) by ``urllib3.util.Retry``. The answer is ``choices[0].message.content``, a
string or the ``type: "text"`` parts of a list joined in order. Answers are handed to the
caller as they arrive (:meth:`EndpointModel.predict_stream`), so the prediction store
holds every finished answer of a killed run. Asked with no image (``visual`` None: the
no-image condition, docs/diagnose.md, "The model without its image"), the user message is
the text alone.

The fingerprint covers the served model's name, ``revision`` (a free label: change it
when other weights are served under the same name) and every setting that changes the
answers; not the server's URL, ``in_flight``, ``timeout`` or the key, so a model moved
to another server, or spread over several, keeps its stored answers.

``openai:URL1,URL2,…`` is one model served by several servers
(:mod:`.openai_servers`: requests go to the server with the fewest in flight, and a
server that fails is left out while the others take its requests). Every server must
serve the same model name; ``in_flight`` is per server.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import replace
from typing import Any, ClassVar
from urllib.parse import urlsplit, urlunsplit

import numpy as np

from vqadiag.data.io.png import rgb_png
from vqadiag.errors import DataError, first_line
from vqadiag.models.adapters.generated_answer import Generation, read_generation
from vqadiag.models.adapters.openai_reply import EndpointError, completion_text, json_reply
from vqadiag.models.base import (
    TEXT_GENERATOR,
    ModelOutput,
    ObjectInput,
    PixelInput,
    QuestionBatch,
    pixel_images,
)
from vqadiag.models.model_args import ModelArgs

NAME = "openai"
IMAGE_FORMATS = ("png", "jpeg")


def api_root(url: str) -> str:
    """``url`` checked (http / https, a host, a valid port, no credentials, no query) with
    ``/v1`` added when it has no path."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port  # raises on a port out of range
    except ValueError as err:
        raise DataError("--model", f"openai:URL is not a valid URL ({err}): {url!r}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname or port == 0:
        raise DataError("--model", f"openai:URL needs an http(s) URL, got {url!r}")
    if parts.username or parts.password:
        raise DataError("--model", "no credentials in the URL: put the API key in OPENAI_API_KEY")
    if parts.query or parts.fragment:
        raise DataError(
            "--model", "no query string in openai:URL (it would be written to results.json)"
        )
    path = parts.path.rstrip("/") or "/v1"
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def server_urls(spec: str) -> list[str]:
    """The API roots of ``openai:URL`` or ``openai:URL1,URL2,…`` (each :func:`api_root`),
    in order, without repeats."""
    urls = [api_root(u) for u in spec.split(",") if u.strip()]
    if not urls:
        raise DataError("--model", "openai: needs a server URL")
    return list(dict.fromkeys(urls))


def _model_names(reply: Any) -> list[str]:
    return sorted(str(m["id"]) for m in reply["data"])


def image_data_url(image: np.ndarray, image_format: str = "png") -> str:
    """``data:image/…;base64,…`` of an (H, W, 3) uint8 array (PNG: lossless,
    :func:`vqadiag.data.io.png.rgb_png`; JPEG: quality 95)."""
    if image_format == "png":
        data = rgb_png(image)
    else:
        from PIL import Image

        buffer = io.BytesIO()
        Image.fromarray(np.ascontiguousarray(image), "RGB").save(buffer, format="JPEG", quality=95)
        data = buffer.getvalue()
    return f"data:image/{image_format};base64," + base64.b64encode(data).decode()


class EndpointModel:
    """A served chat VLM (module docstring)."""

    name: ClassVar[str] = NAME
    #: the data path sends the stored image size
    input_size: ClassVar[None] = None

    def __init__(
        self,
        url: str,
        *,
        served_model: str | None = None,
        in_flight: int = 8,
        timeout: float = 60.0,
        max_retries: int = 5,
        api_key_env: str = "OPENAI_API_KEY",
        image_format: str = "png",
        revision: str = "",
        generation: Generation | None = None,
    ) -> None:
        try:
            from vqadiag.models.adapters.openai_http import Transport
        except ImportError:  # urllib3, an optional dependency
            raise DataError(
                "--model", "openai:URL needs urllib3: pip install 'vqadiag[openai]'"
            ) from None
        if image_format not in IMAGE_FORMATS:
            raise DataError("--model-args", f"image_format must be one of {IMAGE_FORMATS}")
        self.urls = server_urls(url)
        self.url = ",".join(self.urls)
        self.in_flight = max(1, int(in_flight))
        self.image_format = image_format
        self.revision = revision
        self.generation = generation or Generation()
        key = os.environ.get(api_key_env) or "EMPTY"

        def transport(root: str) -> Transport:
            return Transport(
                root,
                {"Content-Type": "application/json", "Authorization": f"Bearer {key}"},
                in_flight=self.in_flight,
                timeout=float(timeout),
                max_retries=int(max_retries),
            )

        if len(self.urls) == 1:
            self._http: Any = transport(self.urls[0])
        else:
            from vqadiag.models.adapters.openai_servers import ServerPool

            self._http = ServerPool(self.urls, transport)
        self.served_model = served_model or self._only_served_model()
        self.answer_vocab: list[str] = []
        self.capabilities = replace(TEXT_GENERATOR, text_only=True)
        self.requests_sent = 0
        self._count_lock = threading.Lock()

    @classmethod
    def from_spec(cls, spec: str, args: Mapping[str, Any] | None = None) -> EndpointModel:
        """The model of ``openai:URL`` with its ``--model-args`` (docs/vlms.md)."""
        reader = ModelArgs(args, NAME)
        settings: dict[str, Any] = {
            "served_model": reader.text("model", None),
            "in_flight": reader.integer("in_flight", 8),
            "timeout": reader.number("timeout", 60.0, minimum=0.001),
            "max_retries": reader.integer("max_retries", 5, minimum=0),
            "api_key_env": reader.text("api_key_env", "OPENAI_API_KEY") or "OPENAI_API_KEY",
            "image_format": reader.choice("image_format", "png", IMAGE_FORMATS),
            "revision": reader.text("revision", "") or "",
            "generation": read_generation(reader),
        }
        reader.finish()  # every setting checked before the server is asked anything
        return cls(spec, **settings)

    def _only_served_model(self) -> str:
        """The server's one model (``GET /models``); several or none is an error. Several
        servers must each serve that one model (a server that does not answer is left
        out until its cool-down ends)."""
        if len(self.urls) > 1:
            return self._pool_served_model()
        try:
            names = _model_names(self._http.call("GET", "/models", None, json_reply))
        except (EndpointError, KeyError, TypeError) as err:
            raise DataError(
                self.url,
                f"cannot list the served models ({first_line(err)}); name the model with "
                "--model-args model=NAME",
            ) from None
        if len(names) != 1:
            listed = ", ".join(names[:10]) or "none"
            raise DataError(
                self.url, f"name the served model with --model-args model=NAME (served: {listed})"
            )
        return names[0]

    def _pool_served_model(self) -> str:
        listed: dict[str, list[str]] = {}
        for url, reply in self._http.call_each("GET", "/models", json_reply).items():
            try:
                if not isinstance(reply, EndpointError):
                    listed[url] = _model_names(reply)
            except (KeyError, TypeError):
                continue
        if not listed:
            raise DataError(
                self.url, "no server lists its models; name the model with --model-args "
                "model=NAME",
            )  # fmt: skip
        kinds = {tuple(names) for names in listed.values()}
        if len(kinds) != 1 or len(next(iter(kinds))) != 1:
            shown = "; ".join(f"{u}: {', '.join(n[:5]) or 'none'}" for u, n in listed.items())
            raise DataError(
                self.url, "the servers must serve one and the same model; name it with "
                f"--model-args model=NAME (served: {shown})",
            )  # fmt: skip
        return next(iter(kinds))[0]

    def settings(self) -> dict[str, Any]:
        """What ``results.json`` records under ``model.settings`` (never the API key)."""
        return {
            "adapter": NAME,
            **({"url": self.url} if len(self.urls) == 1 else {"urls": self.urls}),
            "served_model": self.served_model,
            "revision": self.revision,
            "image_format": self.image_format,
            "in_flight": self.in_flight,
            **self.generation.to_json(),
        }

    def fingerprint(self) -> str:
        """SHA-256 (16 hex) of the settings that change answers (module docstring)."""
        leave_out = ("in_flight", "url", "urls")
        keep = {k: v for k, v in self.settings().items() if k not in leave_out}
        return hashlib.sha256(repr(sorted(keep.items())).encode()).hexdigest()[:16]

    # -- prediction -------------------------------------------------------------------
    def ask(self, question: str, image_url: str | None) -> str:
        """One chat completion: its generated text (:func:`.openai_reply.completion_text`;
        a reply without text is retried, then :class:`EndpointError`); ``image_url`` None
        sends the text alone."""
        with self._count_lock:
            self.requests_sent += 1
        content: list[dict[str, Any]] = []
        if image_url is not None:
            content.append({"type": "image_url", "image_url": {"url": image_url}})
        content.append({"type": "text", "text": self.generation.ask(question)})
        return self._http.call(
            "POST",
            "/chat/completions",
            {
                "model": self.served_model,
                "temperature": 0,
                "max_tokens": self.generation.max_new_tokens,
                "messages": [{"role": "user", "content": content}],
            },
            completion_text,
        )

    def predict_stream(
        self, batch: QuestionBatch, visual: ObjectInput | PixelInput | None
    ) -> Iterator[tuple[list[int], ModelOutput]]:
        """``([i], output of question i)`` as each answer arrives, ``in_flight`` at a time.
        A request that still fails after its retries stops the run with one line naming
        the question, once the requests already running have been handed over (no
        other request is started), however many questions are queued."""
        data_url = None if visual is None else self._data_urls(pixel_images(batch, visual))

        def one(i: int) -> str:
            return self.ask(batch.questions[i], None if data_url is None else data_url(i))

        failed: tuple[int, EndpointError] | None = None
        for i, text in self._as_answered(one, len(batch)):
            if isinstance(text, EndpointError):
                failed = failed or (i, text)
                continue
            yield [i], ModelOutput([self.generation.answer(text)], None, None, [text])
        if failed is not None:
            i, err = failed
            raise DataError(self.url, f"question {batch.question_ids[i]}: {first_line(err)}")

    def _data_urls(self, images: list[np.ndarray]) -> Callable[[int], str]:
        """``data_url(i)``: the ``data:`` URL of ``images[i]``, encoded once per image
        object however many questions (threads) ask for it."""
        encoded: dict[int, Future[str]] = {}
        lock = threading.Lock()

        def data_url(i: int) -> str:
            key = id(images[i])
            with lock:
                fut = encoded.get(key)
                owner = fut is None
                if fut is None:
                    fut = encoded[key] = Future()
            if owner:
                try:
                    fut.set_result(image_data_url(images[i], self.image_format))
                except BaseException as err:  # handed to every waiter
                    fut.set_exception(err)
            return fut.result()

        return data_url

    def _as_answered(
        self, one: Callable[[int], str], n: int
    ) -> Iterator[tuple[int, str | EndpointError]]:
        """``(i, one(i))`` for ``i < n`` as each finishes, ``in_flight`` running at a time
        (an :class:`EndpointError` is handed over, not raised). After the first one no
        other call starts; the running ones are waited for. No future is ever cancelled,
        so nothing is waited for that will not finish."""
        in_flight = self.in_flight * len(self.urls)
        pool = ThreadPoolExecutor(max_workers=in_flight)
        queued = iter(range(n))
        running: dict[Future[str], int] = {}
        stopped = False
        try:
            while True:
                while not stopped and len(running) < in_flight:
                    i = next(queued, None)
                    if i is None:
                        break
                    running[pool.submit(one, i)] = i
                if not running:
                    return
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                for fut in sorted(done, key=running.__getitem__):
                    i = running.pop(fut)
                    err = fut.exception()
                    if isinstance(err, EndpointError):
                        stopped = True
                        yield i, err
                    else:
                        yield i, fut.result()  # another error is raised as it is
        finally:
            pool.shutdown(wait=False, cancel_futures=True)

    def predict(self, batch: QuestionBatch, visual: ObjectInput | PixelInput | None) -> ModelOutput:
        """Every answer of ``batch`` in order (:meth:`predict_stream` collected)."""
        texts: list[str] = [""] * len(batch)
        answers: list[str] = [""] * len(batch)
        for rows, out in self.predict_stream(batch, visual):
            for i, answer, text in zip(rows, out.answers, out.texts or [], strict=True):
                answers[i], texts[i] = answer, text
        return ModelOutput(answers, None, None, texts)


def load_endpoint(spec: str, args: Mapping[str, Any] | None = None) -> EndpointModel:
    """``--model openai:URL`` (the adapter's loader): :meth:`EndpointModel.from_spec`."""
    return EndpointModel.from_spec(spec, args)
