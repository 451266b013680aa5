"""The HTTP side of ``--model openai:URL`` (docs/vlms.md, "Servers"; docs/reliability.md,
"Model servers that misbehave").

One ``urllib3`` connection pool; every request is a loop of attempts driven here with
``urllib3.util.Retry`` (exponential backoff 0.5 s, 1 s, 2 s … at most 30 s with jitter; a
``Retry-After`` header wins). Connection errors, timeouts, 408, 409, 429 and 5xx are
retried, and so is a reply that arrives but cannot be used (``parse`` raises
:class:`ReplyError`: not JSON, no text), up to ``max_retries`` times.

Each attempt is bounded:

* in time: ``timeout`` seconds for all of it (connect, send, the headers and the whole
  body). A watchdog shuts the attempt's socket down at the deadline, which ends a read
  or a write blocked on it, so a server trickling its reply cannot keep it alive;
* in size: a reply over :data:`MAX_REPLY_BYTES` is refused (:class:`ReplyTooLarge`, not
  retried) by its ``Content-Length`` before its body is read, or once that many bytes
  have arrived.

Imported only when urllib3 is installed (``pip install 'vqadiag[openai]'``).
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import threading
import time
from collections.abc import Callable, Mapping
from http.client import HTTPException
from socket import SHUT_RDWR, socket
from typing import Any, TypeVar

import orjson
import urllib3
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import HTTPError, InvalidHeader, MaxRetryError
from urllib3.response import BaseHTTPResponse

from vqadiag.errors import first_line
from vqadiag.models.adapters.openai_reply import (
    MAX_REPLY_BYTES,
    AttemptTimeout,
    EndpointError,
    ReplyError,
    ReplyTooLarge,
    describe,
    server_message,
)

#: statuses retried with backoff (besides connection errors, timeouts and unusable replies)
RETRIED_STATUS = (408, 409, 429, 500, 502, 503, 504)
#: redirects followed within one attempt
MAX_REDIRECTS = 3
READ_CHUNK = 2**16
#: what a failed attempt raises (then retried)
TRANSPORT_ERRORS = (HTTPError, OSError, HTTPException)

T = TypeVar("T")


class _Deadline:
    """The deadline of one attempt (``at``, ``time.monotonic``): when it passes
    (:meth:`expire`, called by the :class:`_Watchdog`), the socket of the attempt's
    connection is shut down, so the blocked read or write fails, and :attr:`expired` is
    set."""

    def __init__(self, at: float) -> None:
        self.at = at
        self._lock = threading.Lock()
        self._sockets: list[socket] = []
        self.finished = False
        self.expired = False

    def watch(self, sock: socket) -> None:
        """Shut ``sock`` down at the deadline (at once if it has passed)."""
        with self._lock:
            self._sockets.append(sock)
            if self.expired:
                _shut(sock)

    def expire(self) -> None:
        """The deadline has passed: end the attempt unless it has finished."""
        with self._lock:
            if self.finished:
                return
            self.expired = True
            for sock in self._sockets:
                _shut(sock)

    def finish(self) -> bool:
        """Stop watching; whether the deadline passed first."""
        with self._lock:
            self.finished = True
            return self.expired


class _Watchdog:
    """One daemon thread per transport that expires the deadlines that pass (a heap), so an
    attempt costs no thread of its own."""

    def __init__(self) -> None:
        self._wake = threading.Condition()
        self._heap: list[tuple[float, int, _Deadline]] = []
        self._order = itertools.count()
        self._thread: threading.Thread | None = None

    def deadline(self, seconds: float) -> _Deadline:
        """A deadline ``seconds`` from now, watched."""
        deadline = _Deadline(time.monotonic() + seconds)
        with self._wake:
            heapq.heappush(self._heap, (deadline.at, next(self._order), deadline))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="vqadiag-openai-watchdog", daemon=True
                )
                self._thread.start()
            self._wake.notify()
        return deadline

    def _run(self) -> None:
        """Expire the deadlines as they pass; drop the finished ones from the top."""
        with self._wake:
            while True:
                now = time.monotonic()
                while self._heap and (self._heap[0][2].finished or self._heap[0][0] <= now):
                    heapq.heappop(self._heap)[2].expire()
                self._wake.wait(self._heap[0][0] - now if self._heap else None)


def _shut(sock: socket) -> None:
    """``sock.shutdown`` both ways; a socket already closed is left alone."""
    with contextlib.suppress(OSError):
        sock.shutdown(SHUT_RDWR)


_attempt_of_thread = threading.local()


def _watch(sock: socket | None) -> None:
    """Hand ``sock`` to the deadline of this thread's attempt (if any)."""
    deadline = getattr(_attempt_of_thread, "deadline", None)
    if deadline is not None and sock is not None:
        deadline.watch(sock)


class _WatchedConnection:
    """Mixin: a connection's socket is watched by the deadline of the attempt using it,
    whether the connection is new (:meth:`connect`) or reused (:meth:`request`)."""

    sock: socket | None

    def connect(self) -> None:
        super().connect()  # type: ignore[misc]
        _watch(self.sock)

    def request(self, *args: Any, **kwargs: Any) -> None:
        _watch(self.sock)
        super().request(*args, **kwargs)  # type: ignore[misc]


class WatchedHTTPConnection(_WatchedConnection, HTTPConnection):
    """``http://`` connection under the attempt's deadline."""


class WatchedHTTPSConnection(_WatchedConnection, HTTPSConnection):
    """``https://`` connection under the attempt's deadline."""


class WatchedHTTPPool(HTTPConnectionPool):
    """``http://`` pool of :class:`WatchedHTTPConnection`."""

    ConnectionCls = WatchedHTTPConnection


class WatchedHTTPSPool(HTTPSConnectionPool):
    """``https://`` pool of :class:`WatchedHTTPSConnection`."""

    ConnectionCls = WatchedHTTPSConnection


def read_capped(response: BaseHTTPResponse, limit: int = MAX_REPLY_BYTES) -> bytes:
    """The body of ``response``; :class:`ReplyTooLarge` as soon as it is known to pass
    ``limit`` bytes (by its ``Content-Length``, else once more have arrived)."""
    declared = str(response.headers.get("Content-Length", "")).strip()
    too_large = ReplyTooLarge(
        f"the reply is larger than {limit // 2**20} MiB (MAX_REPLY_BYTES): refused unread"
    )
    if declared.isdigit() and int(declared) > limit:
        raise too_large
    body = bytearray()
    for chunk in response.stream(READ_CHUNK, decode_content=True):
        body += chunk
        if len(body) > limit:
            raise too_large
    return bytes(body)


class Transport:
    """JSON requests to one API root, ``in_flight`` at a time, with the bounds and the
    retries of the module docstring."""

    def __init__(
        self,
        root: str,
        headers: Mapping[str, str],
        *,
        in_flight: int,
        timeout: float,
        max_retries: int,
    ) -> None:
        self.root = root
        self.timeout = float(timeout)
        self.max_retries = int(max_retries)
        self._headers = dict(headers)
        self._watchdog = _Watchdog()
        self._retry = urllib3.util.Retry(
            total=self.max_retries,
            backoff_factor=0.5,
            backoff_max=30.0,
            backoff_jitter=0.25,
            status_forcelist=RETRIED_STATUS,
            allowed_methods=None,  # POST too: a chat completion changes nothing
            respect_retry_after_header=True,
            raise_on_status=False,
        )
        # one attempt: no retries inside urllib3 (errors raised as they are), redirects followed
        self._one_attempt = urllib3.util.Retry(total=False, redirect=MAX_REDIRECTS)
        self._pool = urllib3.PoolManager(
            maxsize=in_flight, block=True, timeout=urllib3.util.Timeout(total=self.timeout)
        )
        self._pool.pool_classes_by_scheme = {"http": WatchedHTTPPool, "https": WatchedHTTPSPool}

    def call(self, method: str, path: str, body: Any, parse: Callable[[bytes], T]) -> T:
        """``parse`` of the reply to ``method path`` with the JSON ``body``: retried as the
        module docstring says; :class:`EndpointError` saying why when it fails."""
        url = self.root + path
        data = None if body is None else orjson.dumps(body)
        retry = self._retry
        while True:
            response: BaseHTTPResponse | None = None
            try:
                response, reply = self._attempt(method, url, data)
                if response.status < 400:
                    return parse(reply)
                failure: BaseException = EndpointError(
                    f"HTTP {response.status}: {server_message(reply)}"
                )
                if not retry.is_retry(method, response.status, "Retry-After" in response.headers):
                    raise failure
            except (*TRANSPORT_ERRORS, AttemptTimeout, ReplyError) as err:
                failure, response = err, None
            retry = self._next_try(retry, method, url, failure, response)

    def _next_try(
        self,
        retry: urllib3.util.Retry,
        method: str,
        url: str,
        failure: BaseException,
        response: BaseHTTPResponse | None,
    ) -> urllib3.util.Retry:
        """``retry`` counted down by one failed attempt, after its backoff (or the reply's
        ``Retry-After``); :class:`EndpointError` when no retry is left."""
        try:
            if response is None:
                retry = retry.increment(method, url, error=failure)  # type: ignore[arg-type]
            else:
                retry = retry.increment(method, url, response=response)
            retry.sleep(response)
        except MaxRetryError:
            retries = f"{self.max_retries} retr{'y' if self.max_retries == 1 else 'ies'}"
            raise EndpointError(f"the server failed after {retries}: {describe(failure)}") from None
        except InvalidHeader as err:  # a Retry-After that is neither seconds nor a date
            raise EndpointError(f"{describe(failure)}; {first_line(err)}") from None
        except TRANSPORT_ERRORS:  # urllib3 re-raises an error it will not retry
            raise EndpointError(describe(failure)) from None
        return retry

    def _attempt(self, method: str, url: str, data: bytes | None) -> tuple[BaseHTTPResponse, bytes]:
        """One attempt under its deadline: the response and its whole body."""
        deadline = self._watchdog.deadline(self.timeout)
        _attempt_of_thread.deadline = deadline
        response: BaseHTTPResponse | None = None
        failure: BaseException | None = None
        try:
            response = self._pool.request(
                method,
                url,
                body=data,
                headers=self._headers,
                preload_content=False,
                retries=self._one_attempt,
            )
            reply = read_capped(response)
        except TRANSPORT_ERRORS as err:
            failure = err
        finally:
            _attempt_of_thread.deadline = None
            expired = deadline.finish()
            if response is not None:
                if failure is not None or expired or not response.isclosed():
                    response.close()  # bytes left unread: the connection is not reused
                response.release_conn()
        if expired:
            raise AttemptTimeout(f"no complete reply within {self.timeout:g} s")
        if failure is not None:
            raise failure
        return response, reply  # type: ignore[return-value]
