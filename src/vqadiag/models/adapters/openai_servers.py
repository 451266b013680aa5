"""Several OpenAI-compatible servers as one model (docs/vlms.md, "Several servers").

``--model openai:URL1,URL2,…`` serves one model from several servers (one vLLM per
GPU, or several machines). Each request goes to the server with the fewest requests in
flight (the first listed on a tie), so a faster server takes more of them. A request
that still fails on a server after that server's own retries
(:class:`~vqadiag.models.adapters.openai_http.Transport`) marks the server down for
:data:`COOLDOWN_SECONDS` and is sent to the next server up; a down server is tried
again after its cool-down. The request fails only when every server has failed it, so
a run loses no request while one server is up, and fails with one line when none is.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from vqadiag.models.adapters.openai_reply import EndpointError, ReplyTooLarge

T = TypeVar("T")
#: how long a server that failed a request is left out before it is tried again
COOLDOWN_SECONDS = 30.0


class ServerPool:
    """``call`` as one :class:`Transport` has it, spread over several (module docstring)."""

    def __init__(
        self,
        urls: Sequence[str],
        make_transport: Callable[[str], Any],
        *,
        cooldown: float = COOLDOWN_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.urls = list(urls)
        self._transports = {url: make_transport(url) for url in self.urls}
        self._in_flight = dict.fromkeys(self.urls, 0)
        self._down_until = dict.fromkeys(self.urls, 0.0)
        self.failures = dict.fromkeys(self.urls, 0)
        self.answered = dict.fromkeys(self.urls, 0)
        self._cooldown = cooldown
        self._clock = clock
        self._lock = threading.Lock()

    def _pick(self, tried: set[str]) -> str | None:
        """The server up with the fewest requests in flight, not tried for this request;
        when every untried one is down, the one whose cool-down ends first."""
        now = self._clock()
        untried = [u for u in self.urls if u not in tried]
        if not untried:
            return None
        up = [u for u in untried if self._down_until[u] <= now]
        if up:
            return min(up, key=lambda u: (self._in_flight[u], self.urls.index(u)))
        return min(untried, key=lambda u: self._down_until[u])

    def call(
        self, method: str, path: str, body: Mapping[str, Any] | None, parse: Callable[..., T]
    ) -> T:
        """The first server's reply that succeeds, trying each server at most once."""
        tried: set[str] = set()
        errors: list[str] = []
        while True:
            with self._lock:
                url = self._pick(tried)
                if url is None:
                    raise EndpointError(
                        f"all {len(self.urls)} servers failed: " + "; ".join(errors)
                    )
                tried.add(url)
                self._in_flight[url] += 1
            try:
                result = self._transports[url].call(method, path, body, parse)
            except ReplyTooLarge:
                raise  # the reply, not the server, is at fault
            except EndpointError as err:
                with self._lock:
                    self.failures[url] += 1
                    self._down_until[url] = self._clock() + self._cooldown
                errors.append(f"{url}: {err}")
                continue
            finally:
                with self._lock:
                    self._in_flight[url] -= 1
            with self._lock:
                self.answered[url] += 1
            return result

    def call_each(
        self, method: str, path: str, parse: Callable[..., T]
    ) -> dict[str, T | EndpointError]:
        """Every server's own reply (or its error), e.g. to check what each one serves."""
        out: dict[str, T | EndpointError] = {}
        for url in self.urls:
            try:
                out[url] = self._transports[url].call(method, path, None, parse)
            except EndpointError as err:
                with self._lock:
                    self._down_until[url] = self._clock() + self._cooldown
                out[url] = err
        return out
